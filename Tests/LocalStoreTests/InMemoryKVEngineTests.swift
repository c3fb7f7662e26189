import Foundation
import LocalStore
import LocalStoreKV
import Testing

/// The toolkit's reference engine as the engine contract asks: writers of several store objects sharing
/// one engine take turns.
@Suite("InMemoryKVEngine")
struct InMemoryKVEngineTests {
    /// Two store objects on one engine (as two on the same files), with table `T` defined by the first.
    static func twoStores() throws -> (InMemoryKVEngine, KVStore<InMemoryKVEngine>, KVStore<InMemoryKVEngine>) {
        let engine = InMemoryKVEngine()
        let first = try KVStore(engine: engine)
        try first.defineTable(TableSchema("T", ["n": .integer]))
        return (engine, first, try KVStore(engine: engine))
    }

    @Test("two store objects on one engine writing at once: every write of both is kept")
    func writersOfTwoStoresTakeTurns() throws {
        let (_, first, second) = try Self.twoStores()
        let perStore = 300
        let failures = LockedFailures()
        DispatchQueue.concurrentPerform(iterations: 2) { k in
            let store = k == 0 ? first : second
            do {
                for n in 0..<perStore {
                    try store.write { tx in
                        // A read, then a write that depends on it: a transaction working on a stale copy
                        // would drop the other store's rows when it commits.
                        _ = try tx.count("T")
                        try tx.upsert([["id": .string("s\(k)-\(n)"), "n": .int(Int64(n))]], into: "T")
                    }
                }
            } catch {
                failures.add("\(error)")
            }
        }
        #expect(failures.all.isEmpty)
        #expect(try first.count("T") == 2 * perStore)
        #expect(try second.count("T") == 2 * perStore)
    }
}

extension InMemoryKVEngineTests {
    @Test("a store on the same engine called inside another's write body is misuse, not a wait for itself")
    func reentryFromTheWritingThreadIsMisuse() throws {
        let (engine, first, second) = try Self.twoStores()
        let error = #expect(throws: LocalStoreError.self) {
            try first.write { tx in
                try tx.upsert([["id": "a", "n": 1]], into: "T")
                try second.upsert([["id": "b", "n": 2]], into: "T")
            }
        }
        #expect(error?.code == .misuse)
        #expect(throws: LocalStoreError.self) {
            try first.write { _ in _ = try KVStore(engine: engine) }
        }
        #expect(try first.count("T") == 0)
        try second.upsert([["id": "b", "n": 2]], into: "T")
        #expect(try first.count("T") == 1)
    }

    @Test("a table of another shape named as a system table is refused when the store opens, as LMDB refuses it")
    func systemTableOfAnotherShape() throws {
        let engine = InMemoryKVEngine()
        let first = try KVStore(engine: engine)
        try first.defineTable(TableSchema("Q", ["id": .string, "table": .string, "tableKind": .integer, "itemId": .string, "properties": .binary]))
        try first.upsert([["id": "r1", "table": "T", "tableKind": 0, "itemId": "a"]], into: "Q")
        let error = #expect(throws: LocalStoreError.self) {
            _ = try KVStore(engine: engine, systemTableNames: SystemTableNames(operations: "Q", errors: "E2", config: "C2"))
        }
        #expect(error?.code == .schemaConflict)
        #expect(error?.table == "Q")
        // Nothing was written: the other system tables of those names were not made.
        #expect(try first.schema(of: "E2") == nil)
        #expect(try first.count("Q") == 1)
    }
}

private final class LockedFailures: @unchecked Sendable {  // `lock` guards `list`
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ failure: String) { lock.withLock { list.append(failure) } }
    var all: [String] { lock.withLock { list } }
}
