import CRocksDB
import Foundation
import LocalStore
import LocalStoreKV

/// A LocalStore backend on RocksDB, built on the LocalStoreKV toolkit: `KVStore` over this engine.
///
/// ```swift
/// let store = try RocksDBStore.open(directory: "/var/lib/app/store")
/// ```
public enum RocksDBStore {
    /// Opens (creating it when missing) the store in `directory`. `sync`: every commit is flushed to disk
    /// before it returns (as the other persistent backends do); `false` trades that for speed. Indexes are
    /// covering: a RocksDB point read costs about as much as reading a whole index range entry by entry.
    public static func open(directory: String, sync: Bool = true) throws -> KVStore<RocksDBEngine> {
        try KVStore(engine: RocksDBEngine(directory: directory, sync: sync), coveringIndexes: true)
    }
}

/// RocksDB (its `TransactionDB`) as an `OrderedKeyValueEngine`: snapshot reads, write transactions that
/// read their own writes. RocksDB opens a directory once per process, so the store objects of one
/// directory share one handle (``Shared``), and their writers take turns on its lock.
public final class RocksDBEngine: OrderedKeyValueEngine, @unchecked Sendable {  // `Shared` guards the handle
    final class Shared: @unchecked Sendable {
        let db: OpaquePointer
        let writeLock = NSLock()
        /// The thread running a write transaction (guarded by `registryLock`).
        var writer: Thread?
        var users = 1  // guarded by `RocksDBEngine.registry`
        init(db: OpaquePointer) { self.db = db }
    }

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [String: Shared] = [:]  // guarded by `registryLock`
    private let shared: Shared
    private let path: String
    private let sync: Bool
    private let closeLock = NSLock()
    private var isClosed = false  // guarded by `closeLock`

    public init(directory: String, sync: Bool = true) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        self.path = path
        self.sync = sync
        shared = try Self.registryLock.withLock {
            if let shared = Self.registry[path] {
                shared.users += 1
                return shared
            }
            let options = rocksdb_options_create()
            let dbOptions = rocksdb_transactiondb_options_create()
            defer {
                rocksdb_options_destroy(options)
                rocksdb_transactiondb_options_destroy(dbOptions)
            }
            rocksdb_options_set_create_if_missing(options, 1)
            // Reads by key (a row behind each index entry) dominate queries: bloom filters and a block cache.
            rocksdb_options_optimize_for_point_lookup(options, 64)
            var error: UnsafeMutablePointer<CChar>?
            let db = rocksdb_transactiondb_open(options, dbOptions, path, &error)
            try Self.check(error, "open", path)
            guard let db else { throw LocalStoreError(.ioError, "RocksDB could not open '\(path)'") }
            let shared = Shared(db: db)
            Self.registry[path] = shared
            return shared
        }
    }

    static func check(_ error: UnsafeMutablePointer<CChar>?, _ what: String, _ path: String) throws {
        guard let error else { return }
        let message = String(cString: error)
        rocksdb_free(error)
        throw LocalStoreError(.ioError, "RocksDB \(what) failed on '\(path)': \(message)")
    }

    public func read<R>(_ body: (Access) throws -> R) throws -> R {
        let snapshot = rocksdb_transactiondb_create_snapshot(shared.db)
        let options = rocksdb_readoptions_create()
        defer {
            rocksdb_readoptions_destroy(options)
            rocksdb_transactiondb_release_snapshot(shared.db, snapshot)
        }
        rocksdb_readoptions_set_snapshot(options, snapshot)
        return try body(Access(db: shared.db, transaction: nil, options: options, path: path))
    }

    public func write<R>(_ body: (Access) throws -> R) throws -> R {
        // Another store object on this directory called inside a write body would wait for itself.
        guard Self.registryLock.withLock({ shared.writer !== Thread.current }) else {
            throw LocalStoreError(.misuse, "a store on '\(path)' was called inside the write body of another store on it")
        }
        shared.writeLock.lock()
        Self.registryLock.withLock { shared.writer = Thread.current }
        defer {
            Self.registryLock.withLock { shared.writer = nil }
            shared.writeLock.unlock()
        }
        let writeOptions = rocksdb_writeoptions_create()
        let transactionOptions = rocksdb_transaction_options_create()
        let readOptions = rocksdb_readoptions_create()
        rocksdb_writeoptions_set_sync(writeOptions, sync ? 1 : 0)
        let transaction = rocksdb_transaction_begin(shared.db, writeOptions, transactionOptions, nil)
        defer {
            rocksdb_transaction_destroy(transaction)
            rocksdb_readoptions_destroy(readOptions)
            rocksdb_transaction_options_destroy(transactionOptions)
            rocksdb_writeoptions_destroy(writeOptions)
        }
        var error: UnsafeMutablePointer<CChar>?
        let result: R
        do {
            result = try body(Access(db: shared.db, transaction: transaction, options: readOptions, path: path))
        } catch {
            var ignored: UnsafeMutablePointer<CChar>?
            rocksdb_transaction_rollback(transaction, &ignored)
            if let ignored { rocksdb_free(ignored) }
            throw error
        }
        rocksdb_transaction_commit(transaction, &error)
        try Self.check(error, "commit", path)
        return result
    }

    public func close() throws {
        guard closeLock.withLock({ () -> Bool in defer { isClosed = true }; return !isClosed }) else { return }
        let last = Self.registryLock.withLock { () -> Bool in
            shared.users -= 1
            guard shared.users == 0 else { return false }
            Self.registry[path] = nil
            return true
        }
        guard last else { return }
        // The memtable written out first: the next open then reads tables, not the whole write-ahead log.
        let flush = rocksdb_flushoptions_create()
        rocksdb_flushoptions_set_wait(flush, 1)
        var error: UnsafeMutablePointer<CChar>?
        rocksdb_transactiondb_flush(shared.db, flush, &error)
        rocksdb_flushoptions_destroy(flush)
        rocksdb_transactiondb_close(shared.db)
        try Self.check(error, "flush", path)  // the commits are in the log all the same
    }

    /// A snapshot (no `transaction`) or a write transaction.
    public struct Access: OrderedKeyValueWriter {
        let db: OpaquePointer
        let transaction: OpaquePointer?
        let options: OpaquePointer?
        let path: String

        public func get(_ key: [UInt8]) throws -> [UInt8]? { try withValue(key) { $0.map { Array($0) } } }

        /// The value pinned where RocksDB holds it (a block in its cache, an entry of the memtable): no copy.
        public func withValue<R>(_ key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
            try key.withUnsafeBytes { try withValue(forKey: $0, body) }
        }

        public func withValue<R>(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
            var error: UnsafeMutablePointer<CChar>?
            let k = key.baseAddress?.assumingMemoryBound(to: CChar.self)
            let slice = transaction.map { rocksdb_transaction_get_pinned($0, options, k, key.count, &error) }
                ?? rocksdb_transactiondb_get_pinned(db, options, k, key.count, &error)
            defer { rocksdb_pinnableslice_destroy(slice) }
            try RocksDBEngine.check(error, "get", path)
            guard let slice else { return try body(nil) }
            var length = 0
            return try body(UnsafeRawBufferPointer(start: rocksdb_pinnableslice_value(slice, &length), count: length))
        }

        public func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            let iterator = transaction.map { rocksdb_transaction_create_iterator($0, options) } ?? rocksdb_transactiondb_create_iterator(db, options)
            defer { rocksdb_iter_destroy(iterator) }
            // The iterator's current entry, lent: valid until the iterator moves.
            func bytes(_ get: (UnsafeMutablePointer<Int>) -> UnsafePointer<CChar>?) -> UnsafeRawBufferPointer {
                var length = 0
                return UnsafeRawBufferPointer(start: get(&length), count: length)
            }
            let seek = { (key: [UInt8], previous: Bool) in
                key.withUnsafeBufferPointer { k in
                    k.withMemoryRebound(to: CChar.self) { k in
                        previous ? rocksdb_iter_seek_for_prev(iterator, k.baseAddress, k.count) : rocksdb_iter_seek(iterator, k.baseAddress, k.count)
                    }
                }
            }
            if !reverse {
                seek(lower, false)
            } else if let upper {
                seek(upper, true)
                if rocksdb_iter_valid(iterator) != 0, bytes({ rocksdb_iter_key(iterator, $0) }).elementsEqual(upper) { rocksdb_iter_prev(iterator) }
            } else {
                rocksdb_iter_seek_to_last(iterator)
            }
            while rocksdb_iter_valid(iterator) != 0 {
                let key = bytes { rocksdb_iter_key(iterator, $0) }
                if reverse ? KeyCodec.precedes(key, lower) : upper.map({ !KeyCodec.precedes(key, $0) }) ?? false { break }
                guard try body(key, bytes { rocksdb_iter_value(iterator, $0) }) else { break }
                if reverse { rocksdb_iter_prev(iterator) } else { rocksdb_iter_next(iterator) }
            }
            var error: UnsafeMutablePointer<CChar>?
            rocksdb_iter_get_error(iterator, &error)
            try RocksDBEngine.check(error, "scan", path)
        }

        public func put(_ key: [UInt8], _ value: [UInt8]) throws {
            guard let transaction else { throw LocalStoreError(.internal, "a write on a read snapshot of '\(path)'") }
            var error: UnsafeMutablePointer<CChar>?
            key.withUnsafeBufferPointer { k in
                value.withUnsafeBufferPointer { v in
                    k.withMemoryRebound(to: CChar.self) { k in
                        v.withMemoryRebound(to: CChar.self) { v in
                            rocksdb_transaction_put(transaction, k.baseAddress, k.count, v.baseAddress, v.count, &error)
                        }
                    }
                }
            }
            try RocksDBEngine.check(error, "put", path)
        }

        public func delete(_ key: [UInt8]) throws {
            guard let transaction else { throw LocalStoreError(.internal, "a write on a read snapshot of '\(path)'") }
            var error: UnsafeMutablePointer<CChar>?
            key.withUnsafeBufferPointer { k in
                k.withMemoryRebound(to: CChar.self) { k in rocksdb_transaction_delete(transaction, k.baseAddress, k.count, &error) }
            }
            try RocksDBEngine.check(error, "delete", path)
        }

        /// A write transaction's savepoints (RocksDB's): `KVStore` then reads nothing before it writes.
        public var hasSavepoints: Bool { transaction != nil }

        public func setSavepoint() throws { rocksdb_transaction_set_savepoint(transaction) }

        public func rollbackToSavepoint() throws {
            var error: UnsafeMutablePointer<CChar>?
            rocksdb_transaction_rollback_to_savepoint(transaction, &error)
            try RocksDBEngine.check(error, "roll back to a savepoint", path)
        }
    }
}
