import Foundation
import LocalStore            // the protocol, InMemoryStore, queries, the operation queue
import LocalStoreSQLite      // SQLiteStore: one file, the system libsqlite3
import LocalStoreSQLCipher   // SQLCipherStore: one encrypted file, libsqlcipher loaded at run time
import LocalStoreLMDB        // LMDBStore: one directory, the system liblmdb
import Testing

// The snippets of "Getting started" (Sources/LocalStore/LocalStore.docc/GettingStarted.md), verbatim
// (ArticleSnippetTests checks that): every store the article opens runs the rest of the article.

@Suite("Article: Getting started")
struct GettingStartedArticleTests {
    @Test("open each backend, define, write atomically, query, observe",
        .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func gettingStarted() async throws {
        let (directory, remove) = try DocBackend.temporaryDirectory()
        defer { remove() }

        let memory = try InMemoryStore()
        let sqlite = try SQLiteStore(path: directory.appendingPathComponent("todo.sqlite").path)
        let key = try SQLCipherKey.raw(keyBytes)   // 32 bytes from a keyring, a TPM or a KMS
        let sqlcipher = try SQLCipherStore(path: directory.appendingPathComponent("todo.db").path, key: key)
        let lmdb = try LMDBStore(path: directory.appendingPathComponent("todo.lmdb").path)

        for store in [memory, sqlite, sqlcipher, lmdb] as [any LocalStore] {
            try defineWriteAndQuery(store)
            try await observe(store)
            try await store.close()
        }
    }

    private func defineWriteAndQuery(_ store: any LocalStore) throws {
        try store.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean, "priority": .integer,
                                                       "updatedAt": .date, "version": .string], indexed: ["priority"]))
        #expect(try store.schema(of: "TodoItem") == todoSchema)

        try store.enqueue(.insert, ["id": "a1", "text": "buy milk", "complete": false, "priority": 2], into: "TodoItem")
        try store.write { tx in
            try tx.enqueue(.insert, ["id": "a2", "text": "call mom", "complete": false, "priority": 3], into: "TodoItem")
            try tx.enqueue(.update, ["id": "a1", "priority": 1], into: "TodoItem")   // collapses into a1's insert
        }
        print(try store.pendingOperationCount())   // 2
        #expect(try store.pendingOperationCount() == 2)
        #expect(try store.queuedOperations().map(\.kind) == [.insert, .insert])

        // A failing body leaves nothing behind.
        #expect(throws: LocalStoreError.self) {
            try store.write { tx in
                try tx.enqueue(.insert, ["id": "a3", "text": "never"], into: "TodoItem")
                try tx.enqueue(.insert, ["id": "a4", "colour": "red"], into: "TodoItem")   // unknownColumn
            }
        }
        #expect(try store.count("TodoItem") == 2)
        #expect(try store.pendingOperationCount() == 2)

        let open = try store.read(Query("TodoItem", where: Field("complete") == false).sorted(by: "priority", .descending).top(50))
        for item in open.items { print(item["text"] ?? .null) }   // call mom, buy milk
        let urgent = try store.count("TodoItem", where: Field("priority") >= 3)   // 1
        #expect(open.items.map { $0["text"] } == ["call mom", "buy milk"])
        #expect(urgent == 1)
    }

    private func observe(_ store: any LocalStore) async throws {
        let openItems = Query("TodoItem", where: Field("complete") == false)
        let screen = Task {
            var shown: [Int] = []
            for try await result in store.observe(openItems) {   // the result now, then after each change
                shown.append(result.items.count)
                if result.items.isEmpty { break }
            }
            return shown
        }
        try await store.upsert([["id": "a1", "complete": true], ["id": "a2", "complete": true]], into: "TodoItem")
        print(try await screen.value)   // [2, 0], or [0] when the task started after the commit
        let shown = try await screen.value
        #expect(shown == [2, 0] || shown == [0])
    }
}

@Test("the LocalStore landing page's example")
func landingPageExample() throws {
    let store = try InMemoryStore()   // or SQLiteStore, SQLCipherStore, LMDBStore: the same code runs on each
    try store.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean, "updatedAt": .date, "version": .string]))
    try store.enqueue(.insert, ["id": "a1", "text": "buy milk", "complete": false], into: "TodoItem")   // row + queued insert
    let open = try store.read(Query("TodoItem", where: Field("complete") == false).top(50))
    print(open.items.count, try store.pendingOperationCount())   // 1 1
    #expect(open.items.map(\.stringId) == ["a1"])
    #expect(try store.queuedOperations().map(\.kind) == [.insert])
}
