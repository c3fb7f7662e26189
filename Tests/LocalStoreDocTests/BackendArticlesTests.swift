import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLite
import Testing

// The snippets of "Choosing a backend" and "Reliability guarantees"
// (Sources/LocalStore/LocalStore.docc/ChoosingABackend.md, ReliabilityGuarantees.md), verbatim
// (ArticleSnippetTests checks that), on temporary stores.

@Suite("Articles: Choosing a backend, Reliability guarantees")
struct BackendArticlesTests {
    @Test("durability options")
    func durabilityOptions() throws {
        let (directory, remove) = try DocBackend.temporaryDirectory()
        defer { remove() }

        let durable = try SQLiteStore(path: directory.appendingPathComponent("orders.sqlite").path,
                                      options: SQLiteStore.Options(durability: .full))
        let quick = try LMDBStore(path: directory.appendingPathComponent("cache.lmdb").path,
                                  options: LMDBStoreOptions(durability: .normal))

        #expect(durable.options.durability == .full)
        #expect(quick.options.durability == .normal)
        for store in [durable, quick] as [any LocalStore] {
            try store.defineTable(todoSchema)
            try store.upsert([["id": "1", "text": "kept"]], into: "TodoItem")
            try store.close()
        }
        let reopened = try LMDBStore(path: directory.appendingPathComponent("cache.lmdb").path)
        #expect(try reopened.read(table: "TodoItem", id: "1")?["text"] == "kept")
        try reopened.close()
    }

    @Test("integrity check, in-flight operations released, a typed error for bad input")
    func reliability() throws {
        let (directory, remove) = try DocBackend.temporaryDirectory()
        defer { remove() }
        let sqlite = try SQLiteStore(path: directory.appendingPathComponent("todo.sqlite").path)
        defer { try? sqlite.close() }
        try sqlite.defineTable(todoSchema)
        try sqlite.enqueue(.insert, ["id": "x", "text": "pushed when killed", "priority": 1], into: "TodoItem")
        #expect(try sqlite.beginPush()?.isInFlight == true)

        let problems = try sqlite.checkIntegrity()   // [] when the file is sound
        try sqlite.verifyIntegrity()                 // the same check; damage throws `corrupt`
        let released = try sqlite.releaseInFlightOperations()   // operations a killed push left in flight
        #expect(problems.isEmpty)
        #expect(released == 1)
        #expect(try sqlite.queuedOperations().map(\.isInFlight) == [false])

        do {
            try sqlite.upsert([["id": "x", "priority": "high"]], into: "TodoItem")
        } catch let error as LocalStoreError {
            print(error.code, error.column ?? "")   // typeMismatch priority
        }
        let error = #expect(throws: LocalStoreError.self) { try sqlite.upsert([["id": "x", "priority": "high"]], into: "TodoItem") }
        #expect(error.map { "\($0.code) \($0.column ?? "")" } == "typeMismatch priority")
        #expect(try sqlite.read(table: "TodoItem", id: "x")?["priority"] == 1)
    }
}
