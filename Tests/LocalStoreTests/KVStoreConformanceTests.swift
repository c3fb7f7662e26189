import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreKV
import Testing

/// The toolkit's generic store on its in-memory reference engine, held to the whole conformance suite.
@Suite("KVStore on InMemoryKVEngine: the whole conformance suite")
struct KVStoreConformanceTests {
    static let factory = StoreFactory(name: "kv-memory", isPersistent: false) { _ in try KVStore(engine: InMemoryKVEngine()) }

    @Test("conformance check", arguments: ConformanceSuite.completeSuite)
    func conforms(_ check: ConformanceCheck) throws {
        try check.run(Self.factory)
    }

    @Test("observation check", arguments: ConformanceSuite.observationChecks)
    func observationConforms(_ check: AsyncConformanceCheck) async throws {
        try await check.run(Self.factory)
    }
}

/// The same with each way an engine can undo instead of `KVStore`'s undo log:
/// - the engine's savepoints (``OrderedKeyValueWriter/hasSavepoints``): `KVStore` keeps no undo log, and
///   every failed call, rolled-back nested write and refused input is undone by the engine;
/// - restarts (``OrderedKeyValueWriter/canRestart``, no savepoints): `KVStore` keeps what the transaction
///   wrote, and a failed call, rolled-back nested write or refused input restarts the engine's transaction
///   and replays the writes made before it;
/// - an engine that also restarts on its own (``SelfRestartingEngine``);
/// - and, on other axes, an engine that stores keys of 32 bytes and more truncated
///   (``KeyLengthLimitedEngine``): most index entries and every long id take that path; and covering
///   indexes (each entry holds its row's record).
@Suite("KVStore on engines that undo by savepoints or restarts, or limit their keys, and with covering indexes: the whole conformance suite")
struct KVStoreUndoModeConformanceTests {
    static let factories = [
        StoreFactory(name: "kv-memory-key-limit-32", isPersistent: false) { _ in
            try KVStore(engine: KeyLengthLimitedEngine(InMemoryKVEngine(), maximumKeyLength: 32))
        },
        StoreFactory(name: "kv-memory-savepoints", isPersistent: false) { _ in try KVStore(engine: InMemoryKVEngine(savepoints: true)) },
        StoreFactory(name: "kv-memory-restarts", isPersistent: false) { _ in try KVStore(engine: InMemoryKVEngine(restarts: true)) },
        // Covering indexes (each entry holds its row's record), which only the RocksDB example used.
        StoreFactory(name: "kv-memory-covering", isPersistent: false) { _ in try KVStore(engine: InMemoryKVEngine(), coveringIndexes: true) },
        StoreFactory(name: "kv-memory-self-restarting", isPersistent: false) { _ in try KVStore(engine: SelfRestartingEngine()) },
    ]

    @Test("conformance check", arguments: factories, ConformanceSuite.completeSuite)
    func conforms(_ factory: StoreFactory, _ check: ConformanceCheck) throws {
        try check.run(factory)
    }
}

/// `InMemoryKVEngine` with restarts that also begins write transactions again on its own, as LMDB does when
/// its map grows (``OrderedKeyValueRestarted``): a transaction may write `room` entries, and its next write
/// doubles the room and begins the transaction again (the room starts at 3: the first transactions of every
/// check restart, some several times); and every 3rd commit begins again. The whole suite must not notice:
/// `KVStore` replays each transaction's writes.
final class SelfRestartingEngine: OrderedKeyValueEngine, @unchecked Sendable {  // `lock` guards the counters
    let base = InMemoryKVEngine(restarts: true)
    private let lock = NSLock()
    private var room = 3
    private var written = 0
    private var commits = 0
    private struct CommitRestart: Error {}

    /// Counts a write; `true` when it finds no room (the room is doubled).
    fileprivate func isFull() -> Bool {
        lock.withLock {
            written += 1
            guard written > room else { return false }
            room *= 2
            written = 0
            return true
        }
    }

    func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R { try base.read(body) }
    func write<R>(_ body: (Writer) throws -> R) throws -> R {
        do {
            return try base.write { transaction in
                lock.withLock { written = 0 }
                let result = try body(Writer(base: transaction, engine: self))
                let restartsCommit = lock.withLock { () -> Bool in
                    commits += 1
                    return commits % 3 == 0
                }
                if restartsCommit { throw CommitRestart() }  // the base commits nothing
                return result
            }
        } catch is CommitRestart {
            throw OrderedKeyValueRestarted("the commit began again (test)")
        }
    }
    func close() throws {}

    struct Writer: OrderedKeyValueWriter {
        let base: InMemoryKVEngine.Transaction
        let engine: SelfRestartingEngine

        private func restartIfFull() throws {
            guard engine.isFull() else { return }
            try base.restart()
            throw OrderedKeyValueRestarted("the transaction began again with more room (test)")
        }
        func get(_ key: [UInt8]) throws -> [UInt8]? { try base.get(key) }
        func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            try base.scan(from: lower, to: upper, reverse: reverse, body)
        }
        func put(_ key: [UInt8], _ value: [UInt8]) throws {
            try restartIfFull()
            try base.put(key, value)
        }
        func delete(_ key: [UInt8]) throws {
            try restartIfFull()
            try base.delete(key)
        }
        var canRestart: Bool { true }
        var restartsOnItsOwn: Bool { true }
        func restart() throws {
            try base.restart()
            engine.lock.withLock { engine.written = 0 }
        }
    }
}
