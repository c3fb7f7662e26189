import CLMDB
import Foundation
import LocalStore
import LocalStoreConformance
@testable import LocalStoreLMDB
import Synchronization
import Testing

/// A thread's reads never go back in time: each read sees at least every commit an earlier read of
/// the same thread saw (docs/lmdb.md, "Monotonic reads").
///
/// liblmdb 0.9.x begins a read transaction by reading the last committed transaction id `T` and then
/// copying meta page `T & 1`; a reader delayed between the two while two more transactions commit
/// copies the meta page of `T + 2` (or a later one of the same parity: the pages are overwritten in
/// place) under the id `T`. A later read begun before `T + 2` publishes its id gets `T + 1`: the
/// reader sees the table shrink. The race itself cannot be forced from here; these tests force the
/// condition the backend checks for (``Environment`` `beginRead()`), the stress test
/// `growthUnderConcurrency` (StoreTests) hits the race itself now and then.
@Suite("LMDB monotonic reads")
struct MonotonicReadTests {
    /// Runs `hook` once, the next time a read transaction has been begun by liblmdb and before its
    /// snapshot is checked.
    private static func onNextReadBegin(_ environment: Environment, _ hook: @escaping @Sendable () -> Void) {
        let fired = Locked(false)
        environment.afterReadBeginHook.withLock {
            $0 = {
                let first = fired.withLock { f -> Bool in
                    defer { f = true }
                    return !f
                }
                if first { hook() }
            }
        }
        environment.hasAfterReadBeginHook.store(true, ordering: .relaxed)
    }

    /// The check for this process's writers, deterministically: two commits begin and end while a
    /// read transaction is being begun. liblmdb may have copied the second one's meta page under
    /// the id before the first, so the transaction is begun again and the read sees both commits.
    @Test("a read begun across two commits of this process is begun again")
    func readAcrossTwoCommitsOfThisProcess() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["n": .integer]))
        try store.upsert([["id": "a", "n": 1]], into: "T")
        let environment = store.environment
        Self.onNextReadBegin(environment) {
            // Another thread: this one holds a read transaction; writes of this process may run
            // meanwhile (no map growth waits for the gate here).
            runOnThreads([{
                try? store.upsert([["id": "b", "n": 2]], into: "T")
                try? store.upsert([["id": "c", "n": 3]], into: "T")
            }])
        }
        let restarts = environment.readRestarts.load(ordering: .relaxed)
        #expect(try store.count("T") == 3)
        #expect(environment.readRestarts.load(ordering: .relaxed) == restarts + 1)
        // One commit during the begin cannot have overwritten the meta page: no restart.
        Self.onNextReadBegin(environment) {
            runOnThreads([{ try? store.upsert([["id": "d", "n": 4]], into: "T") }])
        }
        let count = try store.count("T")
        #expect(count == 3 || count == 4)
        #expect(environment.readRestarts.load(ordering: .relaxed) == restarts + 1)
    }

    /// The check for other processes' writers: two commits of another process land while a read
    /// transaction is being begun; a meta page then names a transaction two past the read's id, so
    /// it is begun again and sees them.
    @Test("a read begun across two commits of another process is begun again")
    func readAcrossTwoCommitsOfAnotherProcess() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["n": .integer]))
        let helper = try #require(builtExecutable("lmdb-reader-holder"))
        let environment = store.environment
        let childFailures = Locked<[String]>([])
        let storePath = dir.storePath
        Self.onNextReadBegin(environment) {
            for _ in 0..<2 {
                // `lmdb-reader-holder write` commits one transaction (the key `childWrote` in `meta`).
                let child = Process()
                child.executableURL = URL(fileURLWithPath: helper)
                child.arguments = ["write", storePath]
                let input = Pipe()
                child.standardInput = input
                child.standardOutput = FileHandle.nullDevice
                do {
                    try child.run()
                    input.fileHandleForWriting.write(Data("go\n".utf8))
                    child.waitUntilExit()
                    if child.terminationStatus != 0 { childFailures.withLock { $0.append("exit \(child.terminationStatus)") } }
                } catch {
                    childFailures.withLock { $0.append("\(error)") }
                }
            }
        }
        let restarts = environment.readRestarts.load(ordering: .relaxed)
        let childWrote = try environment.read { context in
            try context.withValue(try context.handle(MetaKey.database), Array("childWrote".utf8)) { Array($0) }
        }
        #expect(childFailures.withLock { $0 }.isEmpty, "\(childFailures.withLock { $0 })")
        #expect(childWrote == [1])
        #expect(environment.readRestarts.load(ordering: .relaxed) == restarts + 1)
    }
}
