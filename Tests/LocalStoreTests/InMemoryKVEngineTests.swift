import Foundation
import LocalStore
import LocalStoreKV
import Testing

/// The toolkit's reference engine as the engine contract asks: writers of several store objects sharing
/// one engine take turns.
@Suite("InMemoryKVEngine")
struct InMemoryKVEngineTests {
    @Test("two store objects on one engine writing at once: every write of both is kept")
    func writersOfTwoStoresTakeTurns() throws {
        let engine = InMemoryKVEngine()
        let first = try KVStore(engine: engine)
        try first.defineTable(TableSchema("T", ["n": .integer]))
        let second = try KVStore(engine: engine)
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

private final class LockedFailures: @unchecked Sendable {  // `lock` guards `list`
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ failure: String) { lock.withLock { list.append(failure) } }
    var all: [String] { lock.withLock { list } }
}
