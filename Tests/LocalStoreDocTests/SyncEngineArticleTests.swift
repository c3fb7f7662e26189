import Foundation
import LocalStore
import LocalStoreSQLCipher
import LocalStoreSync
import Testing

// The snippets of "Writing a sync client" (Sources/LocalStoreSync/LocalStoreSync.docc/WritingASyncClient.md),
// verbatim (ArticleSnippetTests checks that), run against an InMemoryTableService on every backend.

@Suite("Article: Writing a sync client (LocalStoreSync)")
struct SyncEngineArticleTests {
    @Test("the guide's snippets, in order (SQLCipher)", .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func guideSQLCipher() async throws { try await guide(.sqlcipher) }

    @Test("the guide's snippets, in order", arguments: DocBackend.plain)
    func guide(_ backend: DocBackend) async throws {
        let (directory, remove) = try DocBackend.temporaryDirectory()
        defer { remove() }
        let store = try backend.open(in: directory)
        let service = try InMemoryTableService()

        let schema = TableSchema("TodoItem", ["id": .string, "text": .string, "complete": .boolean,
                                              "version": .string, "updatedAt": .date, "createdAt": .date, "deleted": .boolean])
        try await store.defineTable(schema)
        let sync = SyncContext(store: store, transport: service, conflicts: ConflictPolicy.serverWins)
        try await service.defineTable(schema)

        try await store.enqueue(.insert, ["id": "t1", "text": "buy milk", "complete": false], into: "TodoItem")
        try await store.enqueue(.update, ["id": "t1", "complete": true], into: "TodoItem")
        let pushed = try await sync.push()
        print(pushed.pushedCount, try await store.pendingOperationCount())   // 1 0
        #expect(pushed.pushedCount == 1)
        #expect(try await store.pendingOperationCount() == 0)
        #expect(try await service.items(in: "TodoItem").first?["complete"] == true)

        // Offline: the push stops, nothing is lost; a refused operation is recorded.
        await service.setOffline(true)
        try await store.enqueue(.update, ["id": "t1", "text": "buy oat milk"], into: "TodoItem")
        do {
            let result = try await sync.push()
            if let failure = result.stoppedBy {
                print("offline: \(failure)")   // nothing lost; push again later
            }
            for error in result.errors {
                print(error.table, error.itemId, error.statusCode ?? 0, error.message)
            }
            #expect(result.stoppedBy?.kind == .transient)
            #expect(try await store.pendingOperationCount() == 1)
        }
        await service.setOffline(false)

        // A conflict: another client changed the item; the handler merges.
        try await service.serverSave(["id": "t1", "text": "buy soy milk", "complete": false], in: "TodoItem")
        let merging = ConflictPolicy { conflict in
            guard var mine = conflict.localItem, conflict.operation.kind == .update else { return .serverWins }
            mine["complete"] = .bool(mine["complete"] == true || conflict.serverItem["complete"] == true)
            mine["text"] = conflict.serverItem["text"]
            return .merge(mine)
        }
        let careful = SyncContext(store: store, transport: service, conflicts: merging)
        let merged = try await careful.push()
        #expect(merged.isComplete)
        let onServer = try #require(try await service.items(in: "TodoItem").first)
        #expect(onServer["text"] == "buy soy milk" && onServer["complete"] == true)

        for i in 0..<60 { try await service.serverSave(["id": .string("s\(i)"), "text": "x", "complete": .bool(i % 2 == 0)], in: "TodoItem") }
        let pulled = try await sync.pull("TodoItem", queryId: "all")
        print(pulled.upserted, pulled.deleted, pulled.skipped, pulled.deltaToken ?? .distantPast)
        let open = try await sync.pull("TodoItem", where: Field("complete") == false, queryId: "open")
        print(open.pages)
        #expect(pulled.upserted == 61 && pulled.pages == 2)
        #expect(open.pages == 1)
        #expect(try await store.read(table: "TodoItem", id: "t1")?["version"] == onServer["version"])

        try await sync.purge("TodoItem", where: Field("complete") == true, queryId: "open")
        try await sync.forcePurge("TodoItem")   // the unpushed changes are given up
        #expect(try await store.deltaToken(table: "TodoItem", queryId: "open") == nil)
        #expect(try await store.count("TodoItem") == 0)

        await sync.startAutomaticPush()
        let progress = Task {
            for await event in sync.events() {
                if case .operationPushed(let entry) = event { print("pushed \(entry.operation.itemId)") }
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        try await store.enqueue(.insert, ["id": "t2", "text": "call mum"], into: "TodoItem")
        // Five minutes: under `make test` a store call waits behind about a thousand test cases (EngineTests' `eventually`).
        let deadline = ContinuousClock.now + .seconds(300)
        while try await service.items(in: "TodoItem").contains(where: { $0.stringId == "t2" }) == false, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await service.items(in: "TodoItem").contains { $0.stringId == "t2" })
        await sync.stopAutomaticPush()
        progress.cancel()
        try await store.close()
    }
}
