import Foundation
import LocalStore
import LocalStoreSQLCipher
import Testing

// The snippets of "The typed operation queue" (Sources/LocalStore/LocalStore.docc/TheOperationQueue.md),
// verbatim (ArticleSnippetTests checks that), run against TodoServer on a temporary store of every backend.

func push(_ store: any LocalStore, to server: TodoServer) throws {
    var next = try store.beginPush()
    while let op = next {
        do {
            let answer = try server.send(op.kind, to: op.table, item: try store.pushItem(for: op))
            next = try store.completeAndBeginNext(op, serverItem: answer).next
        } catch let failure as TodoServer.Failure {
            try store.recordPushError(for: op, statusCode: failure.statusCode, message: failure.message,
                                      serverItem: failure.serverItem)
            next = try store.beginPush(after: op.id)
        }
    }
}

func pull(_ store: any LocalStore, from server: TodoServer, queryId: String = "all") throws {
    var skip = 0
    while true {
        let token = try store.deltaToken(table: "TodoItem", queryId: queryId)
        let query = PullRequest.incremental(Query("TodoItem", top: 50), since: token).skip(skip)
        let page = try server.get("TodoItem", query: try PullRequest(query: query).queryString())
        if page.isEmpty { break }
        let applied = try store.applyPulledPage(page, into: "TodoItem", queryId: queryId)
        skip = applied.deltaToken == token ? skip + page.count : 0
    }
}

@Suite("Article: Writing a sync client")
struct SyncClientArticleTests {
    @Test("queue local edits: collapse rules (SQLCipher)", .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func queueLocalEditsSQLCipher() throws { try queueLocalEdits(.sqlcipher) }

    @Test("queue local edits: collapse rules", arguments: DocBackend.plain)
    func queueLocalEdits(_ backend: DocBackend) throws {
        let (store, cleanup) = try backend.openTodoStore()
        defer { cleanup() }

        try store.enqueue(.insert, ["id": "t1", "text": "buy milk", "complete": false], into: "TodoItem")
        try store.enqueue(.update, ["id": "t1", "complete": true], into: "TodoItem")   // collapses into the insert
        print(try store.queuedOperations().map(\.kind))   // [insert]
        let outcome = try store.enqueue(.delete, ["id": "t1"], into: "TodoItem")       // cancels the insert
        print(outcome, try store.pendingOperationCount())   // removed(operationId: 1) 0
        #expect(outcome == .removed(operationId: 1))
        #expect(try store.queuedOperations(table: "TodoItem", itemId: "t1").isEmpty)
        #expect("\(outcome)" == "removed(operationId: 1)")
        #expect(try store.pendingOperationCount() == 0)
        #expect(try store.read(table: "TodoItem", id: "t1") == nil)
        try store.enqueue(.insert, ["id": "t3", "text": "collapsed"], into: "TodoItem")
        try store.enqueue(.update, ["id": "t3", "complete": true], into: "TodoItem")
        #expect(try store.queuedOperations(table: "TodoItem", itemId: "t3").map { [$0.kind.description, "\($0.version)"] } == [["insert", "2"]])
        #expect(try store.read(table: "TodoItem", id: "t3")?["complete"] == true)
        try store.enqueue(.insert, ["id": "t2", "text": "twice"], into: "TodoItem")
        #expect(throws: LocalStoreError.self) { try store.enqueue(.insert, ["id": "t2", "text": "twice"], into: "TodoItem") }
        #expect(try store.queuedOperations().map(\.itemId) == ["t3", "t2"])
    }

    @Test("push, a conflict and its resolution, pull with paging, purge (SQLCipher)", .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func pushResolvePullPurgeSQLCipher() throws { try pushResolvePullPurge(.sqlcipher) }

    @Test("push, a conflict and its resolution, pull with paging, purge", arguments: DocBackend.plain)
    func pushResolvePullPurge(_ backend: DocBackend) throws {
        let (store, cleanup) = try backend.openTodoStore()
        defer { cleanup() }
        let server = try TodoServer()

        // Push two inserts; the server's answers (version, updatedAt) land in the rows.
        try store.enqueue(.insert, ["id": "a", "text": "buy milk", "complete": false], into: "TodoItem")
        try store.enqueue(.insert, ["id": "b", "text": "call mom", "complete": false], into: "TodoItem")
        try push(store, to: server)
        #expect(try store.pendingOperationCount() == 0)
        #expect(try store.read(table: "TodoItem", id: "a")?["version"] == "v1")
        #expect(try server.database.count("TodoItem") == 2)

        // Another client changes "a"; a local edit of "a" then conflicts (412) and is recorded.
        // Another client also changes "b", which this client deletes: the delete conflicts too.
        try server.change(["id": "a", "text": "buy oat milk"])
        try server.change(["id": "b", "text": "call mom today"])
        try store.enqueue(.update, ["id": "a", "text": "buy 2 milk"], into: "TodoItem")
        try store.enqueue(.delete, ["id": "b"], into: "TodoItem")
        try push(store, to: server)
        let recorded = try store.pushErrors()
        #expect(recorded.map(\.statusCode) == [412, 412])
        #expect(try store.queuedOperations().map(\.isInFlight) == [false, false])

        for error in try store.pushErrors() {
            guard error.statusCode == 409 || error.statusCode == 412, let serverJSON = error.serverItem,
                  let serverItem = ItemJSON.item(serverJSON) else { continue }   // not a conflict: leave it recorded
            if error.operationKind == .delete, let sentJSON = error.item, var deleted = ItemJSON.item(sentJSON) {
                deleted["version"] = serverItem["version"]    // client wins for a delete too: delete the server's version
                try store.changeOperation(error, to: .delete, item: deleted)
            } else if var mine = try store.read(table: error.table, id: error.itemId) {
                mine["version"] = serverItem["version"]       // client wins: retry on top of the server's version
                try store.changeOperation(error, to: error.operationKind == .insert ? .update : error.operationKind, item: mine)
            }
        }
        try push(store, to: server)
        #expect(try store.pushErrors().isEmpty)
        #expect(try store.pendingOperationCount() == 0)
        #expect(try server.database.read(table: "TodoItem", id: "a")?["text"] == "buy 2 milk")
        #expect(try server.database.read(table: "TodoItem", id: "b")?["deleted"] == true, "the client's delete won")

        // 120 items written elsewhere with one updatedAt, and a soft delete: the pull pages by skip.
        server.frozenClock = true
        for n in 0..<120 { try server.change(["id": .string("s\(n)"), "text": .string("server \(n)")]) }
        try server.change(["id": "b", "deleted": true])
        try pull(store, from: server)
        #expect(try store.count("TodoItem") == 121)   // a + s0...s119; b deleted
        #expect(try store.read(table: "TodoItem", id: "b") == nil)
        #expect(try store.deltaToken(table: "TodoItem", queryId: "all") == server.now)
        #expect(try store.deltaTokens(table: "TodoItem").count == 1)

        // Purge: refused while an operation is queued; force purge drops rows, operations and tokens.
        try store.enqueue(.update, ["id": "a", "complete": true], into: "TodoItem")
        #expect(throws: LocalStoreError.self) { try store.purge("TodoItem") }
        do {
            _ = try store.purge("TodoItem")
        } catch let error as LocalStoreError where error.code == .constraint {
            _ = try store.forcePurge("TodoItem")   // the queued changes are given up
        }
        #expect(try store.count("TodoItem") == 0)
        #expect(try store.pendingOperationCount() == 0)
        #expect(try store.deltaTokens(table: "TodoItem").isEmpty)
    }

    @Test("a pending operation wakes the push loop (SQLCipher)", .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func wakeThePushLoopSQLCipher() async throws { try await wakeThePushLoop(.sqlcipher) }

    @Test("a pending operation wakes the push loop", arguments: DocBackend.plain)
    func wakeThePushLoop(_ backend: DocBackend) async throws {
        let (store, cleanup) = try backend.openTodoStore()
        defer { cleanup() }
        let waiter = Task { try await store.waitForPendingOperations() }
        try await store.enqueue(.insert, ["id": "w1", "text": "wake up"], into: "TodoItem")
        #expect(try await waiter.value == 1)
    }
}
