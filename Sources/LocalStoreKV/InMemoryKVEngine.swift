import Foundation
import LocalStore

/// An ``OrderedKeyValueEngine`` in memory: a sorted array of entries behind a lock. Readers take the
/// committed array (a snapshot, copied on write); a write transaction works on a copy and swaps it in
/// when its body returns. Write transactions take turns, also those of several ``KVStore`` objects
/// sharing one engine (as two store objects share the same files). For tests of ``KVStore`` and as the
/// smallest example of an engine.
public final class InMemoryKVEngine: OrderedKeyValueEngine, @unchecked Sendable {  // `lock` guards `entries`
    /// One entry.
    public struct Entry: Sendable {
        var key: [UInt8]
        var value: [UInt8]
    }

    private let lock = NSLock()
    /// Held by the running write transaction.
    private let writeLock = NSLock()
    private var entries: [Entry] = []
    /// The number of write transactions committed: the number of the snapshot they left.
    private var commits: UInt64 = 0
    /// The thread running the write transaction (guarded by `lock`).
    private var writer: Thread?

    /// Whether write transactions keep savepoints (``OrderedKeyValueWriter/hasSavepoints``).
    public let savepoints: Bool
    /// Whether write transactions can restart (``OrderedKeyValueWriter/canRestart``).
    public let restarts: Bool

    /// An empty engine. `savepoints`: its write transactions keep savepoints (a log of what each write
    /// replaced while one is set), so that `KVStore` keeps no undo log of its own. `restarts`: they can
    /// begin again on the entries they began with, so that `KVStore` undoes a failed call by a replay.
    /// Neither (the default): `KVStore` undoes from its own log.
    public init(savepoints: Bool = false, restarts: Bool = false) {
        self.savepoints = savepoints
        self.restarts = restarts
    }

    public func read<R>(_ body: (Snapshot) throws -> R) throws -> R {
        let snapshot = lock.withLock { Snapshot(entries: entries, snapshotNumber: commits) }
        return try body(snapshot)
    }

    public func write<R>(_ body: (Transaction) throws -> R) throws -> R {
        // A second write from the thread already writing (another store object on this engine called
        // from inside a write body) would wait for itself.
        if lock.withLock({ writer === Thread.current }) {
            throw LocalStoreError(.misuse, "a write transaction of this engine is already running on this thread: a store on the same engine was called inside another's write body")
        }
        writeLock.lock()
        lock.withLock { writer = Thread.current }
        defer {
            lock.withLock { writer = nil }
            writeLock.unlock()
        }
        let transaction = Transaction(entries: lock.withLock { entries }, savepoints: savepoints, restarts: restarts)
        let result = try body(transaction)
        lock.withLock {
            entries = transaction.entries
            commits += 1
        }
        return result
    }

    public func close() throws {}

    /// The index of the first entry whose key is not below `key`.
    static func lowerBound(_ entries: [Entry], _ key: [UInt8]) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].key.lexicographicallyPrecedes(key) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    static func value(_ entries: [Entry], _ key: [UInt8]) -> [UInt8]? {
        let i = lowerBound(entries, key)
        return i < entries.count && entries[i].key == key ? entries[i].value : nil
    }

    static func scan(
        _ entries: [Entry], from lower: [UInt8], to upper: [UInt8]?, reverse: Bool,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) rethrows {
        func call(_ i: Int) throws -> Bool {
            try entries[i].key.withUnsafeBytes { k in try entries[i].value.withUnsafeBytes { v in try body(k, v) } }
        }
        let start = lowerBound(entries, lower)
        let end = upper.map { lowerBound(entries, $0) } ?? entries.count
        guard start < end else { return }
        if reverse {
            for i in (start..<end).reversed() where try !call(i) { return }
        } else {
            for i in start..<end where try !call(i) { return }
        }
    }

    /// A read snapshot, numbered by the commits before it.
    public struct Snapshot: OrderedKeyValueReader {
        let entries: [Entry]
        /// The number of write transactions committed before the snapshot was taken.
        public let snapshotNumber: UInt64?

        public func get(_ key: [UInt8]) throws -> [UInt8]? { InMemoryKVEngine.value(entries, key) }

        public func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            try InMemoryKVEngine.scan(entries, from: lower, to: upper, reverse: reverse, body)
        }
    }

    /// A write transaction on a copy of the entries.
    public final class Transaction: OrderedKeyValueWriter {
        fileprivate var entries: [Entry]

        /// What each write replaced while a savepoint is on the stack, and where each savepoint begins in
        /// it: a savepoint costs nothing to keep (`KVStore` keeps one per call until the commit).
        private var log: [(key: [UInt8], old: [UInt8]?)] = []
        private var marks: [Int] = []
        public let hasSavepoints: Bool
        /// The entries the transaction began with, when it can restart.
        private let begun: [Entry]?

        init(entries: [Entry], savepoints: Bool, restarts: Bool) {
            self.entries = entries
            hasSavepoints = savepoints
            begun = restarts ? entries : nil
        }

        public var canRestart: Bool { begun != nil }

        public func restart() throws {
            guard let begun else { throw LocalStoreError(.internal, "this engine's transactions cannot restart") }
            entries = begun
            log.removeAll()
            marks.removeAll()
        }

        public func setSavepoint() throws {
            guard hasSavepoints else { throw LocalStoreError(.internal, "this engine's transactions have no savepoints") }
            marks.append(log.count)
        }

        public func rollbackToSavepoint() throws {
            guard let mark = marks.popLast() else { throw LocalStoreError(.internal, "no savepoint to roll back to") }
            while log.count > mark {
                let (key, old) = log.removeLast()
                if let old { set(key, old) } else { remove(key) }
            }
            if marks.isEmpty { log.removeAll() }
        }

        public func get(_ key: [UInt8]) throws -> [UInt8]? { InMemoryKVEngine.value(entries, key) }

        public func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            // A copy: the body may write while it scans.
            let current = entries
            try InMemoryKVEngine.scan(current, from: lower, to: upper, reverse: reverse, body)
        }

        public func put(_ key: [UInt8], _ value: [UInt8]) throws {
            if !marks.isEmpty { log.append((key, InMemoryKVEngine.value(entries, key))) }
            set(key, value)
        }

        public func delete(_ key: [UInt8]) throws {
            if !marks.isEmpty { log.append((key, InMemoryKVEngine.value(entries, key))) }
            remove(key)
        }

        private func set(_ key: [UInt8], _ value: [UInt8]) {
            let i = InMemoryKVEngine.lowerBound(entries, key)
            if i < entries.count && entries[i].key == key {
                entries[i].value = value
            } else {
                entries.insert(Entry(key: key, value: value), at: i)
            }
        }

        private func remove(_ key: [UInt8]) {
            let i = InMemoryKVEngine.lowerBound(entries, key)
            if i < entries.count && entries[i].key == key { entries.remove(at: i) }
        }
    }
}
