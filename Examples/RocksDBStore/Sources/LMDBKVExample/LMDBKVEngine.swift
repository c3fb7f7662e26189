import CLMDB
import Foundation
import LocalStore
import LocalStoreKV

/// LMDB as an `OrderedKeyValueEngine`: one unnamed database, snapshot reads in read-only transactions,
/// each write in one write transaction (flushed to disk at commit unless `sync` is `false`). It measures
/// what the toolkit costs against `LMDBStore` on the same engine. Keys longer than LMDB's limit (511 bytes)
/// are refused (`LMDBStore` truncates them): `KeyLengthLimitedEngine` over it makes it a complete backend.
///
/// LMDB opens a directory once per process, so the engine objects of one directory share one environment
/// (``Environment``), as `LMDBStore`'s store objects do: a second store object on the same files sees the
/// first's commits, and its writer waits for the first's. Called inside the first's write body on the
/// same thread, it would wait for itself: that is `misuse`.
///
/// With a small `mapSize`, the map grows as `LMDBStore`'s does: a put or a delete that finds it full
/// (`MDB_MAP_FULL`) aborts the transaction, doubles the map once every transaction of the process on the
/// environment has ended (`gate`), begins again and throws `OrderedKeyValueRestarted` (`restartsOnItsOwn`),
/// and `KVStore` replays. A commit that finds it full is written again by the engine itself, from its log of
/// the transaction's puts and deletes, with the environment's write lock held all along: a replay by
/// `KVStore` would begin a new write, and another store object's writer could commit before it.
/// An engine object dropped without `close()` releases its share of the environment.
package final class LMDBKVEngine: OrderedKeyValueEngine, @unchecked Sendable {  // `Environment` guards what is shared; `closeLock` the rest
    /// One LMDB environment, shared by the engine objects of its directory.
    package final class Environment: @unchecked Sendable {  // LMDB serializes the writers; `spareLock` guards the spare reads, `gate` the map, `registryLock` `writer` and `users`
        fileprivate let env: OpaquePointer
        fileprivate let dbi: MDB_dbi
        /// Whether the map grows when full (it was opened small).
        package let grows: Bool
        /// Held shared by every transaction on the environment, exclusively while the map grows
        /// (`mdb_env_set_mapsize` wants no transaction active in the process).
        fileprivate let gate = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        /// How many times the map grew, and how many of those at a commit.
        package fileprivate(set) var growths = 0
        package fileprivate(set) var growthsAtCommit = 0
        /// Read transactions ended with `mdb_txn_reset`, renewed by the next read (as `LMDBStore` reuses its own),
        /// each in the cell its `Access` reads it from.
        private var spareReads: [UnsafeMutablePointer<OpaquePointer?>] = []
        private let spareLock = NSLock()
        /// Held for each write, restarts and growths included: the writers of the process take turns here,
        /// not at LMDB's writer lock, which a writer waiting for it would hold the gate against a growth.
        fileprivate let writeLock = NSLock()
        /// The thread running a write transaction, and the engine objects open on the environment.
        fileprivate var writer: Thread?
        fileprivate var users = 1
        /// The puts and deletes of the running write transaction since it (last) began (guarded by `writeLock`;
        /// kept when the map grows): a commit that finds the map full is written again here, under the write lock.
        fileprivate var writeLog: [(key: [UInt8], value: [UInt8]?)] = []

        fileprivate init(directory: String, mapSize: Int, sync: Bool) throws {
            grows = mapSize < 8 << 30
            pthread_rwlock_init(gate, nil)
            var handle: OpaquePointer?
            try LMDBKVEngine.check(mdb_env_create(&handle), "create")
            guard let env = handle else { throw LocalStoreError(.internal, "mdb_env_create returned no environment") }
            self.env = env
            do {
                try LMDBKVEngine.check(mdb_env_set_mapsize(env, mapSize), "set the map size")
                try LMDBKVEngine.check(mdb_env_open(env, directory, UInt32(MDB_NOTLS) | (sync ? 0 : UInt32(MDB_NOSYNC)), 0o600), "open '\(directory)'")
                var txn: OpaquePointer?
                try LMDBKVEngine.check(mdb_txn_begin(env, nil, 0, &txn), "begin")
                var dbi: MDB_dbi = 0
                let opened = mdb_dbi_open(txn, nil, 0, &dbi)
                guard opened == 0 else {
                    mdb_txn_abort(txn)
                    try LMDBKVEngine.check(opened, "open the database")
                    throw LocalStoreError(.internal, "unreachable")
                }
                try LMDBKVEngine.check(mdb_txn_commit(txn), "commit")
                self.dbi = dbi
            } catch {
                mdb_env_close(env)
                pthread_rwlock_destroy(gate)
                gate.deallocate()
                throw error
            }
        }

        fileprivate func close() {
            abortSpareReads()
            mdb_env_close(env)
            pthread_rwlock_destroy(gate)
            gate.deallocate()
        }

        /// Doubles the map, from inside a write transaction whose LMDB transaction has ended (the gate held
        /// shared: released, taken exclusively for the growth, taken shared again).
        fileprivate func growMap() throws {
            pthread_rwlock_unlock(gate)
            pthread_rwlock_wrlock(gate)
            defer {
                pthread_rwlock_unlock(gate)
                pthread_rwlock_rdlock(gate)
            }
            // The spare read transactions go too: no transaction of the process may be active.
            abortSpareReads()
            var info = MDB_envinfo()
            try LMDBKVEngine.check(mdb_env_info(env, &info), "read the map size")
            try LMDBKVEngine.check(mdb_env_set_mapsize(env, info.me_mapsize * 2), "grow the map")
            growths += 1
        }

        /// Aborts the spare read transactions and frees their cells.
        private func abortSpareReads() {
            for cell in spareLock.withLock({ () -> [UnsafeMutablePointer<OpaquePointer?>] in defer { spareReads.removeAll() }; return spareReads }) {
                mdb_txn_abort(cell.pointee)
                cell.deallocate()
            }
        }

        fileprivate func takeSpareRead() -> UnsafeMutablePointer<OpaquePointer?>? { spareLock.withLock { spareReads.popLast() } }
        fileprivate func keepSpareRead(_ cell: UnsafeMutablePointer<OpaquePointer?>) { spareLock.withLock { spareReads.append(cell) } }
    }

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [String: Environment] = [:]  // guarded by `registryLock`
    /// The environment of this engine's directory, shared with the other engine objects open on it.
    package let environment: Environment
    private let path: String
    private let closeLock = NSLock()
    private var isClosed = false  // guarded by `closeLock`

    /// Opens (creating it when missing) the store in `directory`, or shares the environment another engine
    /// object of the process has open on it (its map size and `sync` then hold).
    package init(directory: String, mapSize: Int = 8 << 30, sync: Bool = true) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        self.path = path
        environment = try Self.registryLock.withLock {
            if let shared = Self.registry[path] {
                shared.users += 1
                return shared
            }
            let shared = try Environment(directory: path, mapSize: mapSize, sync: sync)
            Self.registry[path] = shared
            return shared
        }
    }

    /// Whether the map grows when full; how many times it grew, and how many of those at a commit.
    package var grows: Bool { environment.grows }
    package var growths: Int { environment.growths }
    package var growthsAtCommit: Int { environment.growthsAtCommit }

    static func check(_ rc: Int32, _ what: String) throws {
        guard rc != 0 else { return }
        let code: LocalStoreError.Code = rc == MDB_MAP_FULL ? .full : .ioError
        throw LocalStoreError(code, "LMDB could not \(what): \(String(cString: mdb_strerror(rc)))")
    }

    package func read<R>(_ body: (Access) throws -> R) throws -> R {
        let shared = environment
        pthread_rwlock_rdlock(shared.gate)
        defer { pthread_rwlock_unlock(shared.gate) }
        let cell: UnsafeMutablePointer<OpaquePointer?>
        if let spare = shared.takeSpareRead() {
            let rc = mdb_txn_renew(spare.pointee)
            guard rc == 0 else {
                mdb_txn_abort(spare.pointee)
                spare.deallocate()
                try Self.check(rc, "renew a read")
                throw LocalStoreError(.internal, "unreachable")
            }
            cell = spare
        } else {
            var begun: OpaquePointer?
            try Self.check(mdb_txn_begin(shared.env, nil, UInt32(MDB_RDONLY), &begun), "begin a read")
            guard let begun else { throw LocalStoreError(.internal, "mdb_txn_begin returned no transaction") }
            cell = .allocate(capacity: 1)
            cell.initialize(to: begun)
        }
        defer {
            mdb_txn_reset(cell.pointee)
            shared.keepSpareRead(cell)
        }
        return try body(Access(cell: cell, shared: shared))
    }

    package func write<R>(_ body: (Access) throws -> R) throws -> R {
        let shared = environment
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
        pthread_rwlock_rdlock(shared.gate)
        defer { pthread_rwlock_unlock(shared.gate) }
        // Emptied when the write ends, under the write lock: the next write does not pay for releasing it,
        // and its keys and values are not kept alive in between.
        defer { shared.writeLog.removeAll(keepingCapacity: true) }
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(shared.env, nil, 0, &txn), "begin a write")
        // The transaction in a cell: a restart replaces it.
        let cell = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: 1)
        cell.initialize(to: txn)
        defer { cell.deallocate() }
        let result: R
        do {
            result = try body(Access(cell: cell, shared: shared))
        } catch {
            if let txn = cell.pointee { mdb_txn_abort(txn) }
            throw error
        }
        guard let txn = cell.pointee else { throw LocalStoreError(.internal, "the write transaction ended before its commit") }
        let id = mdb_txn_id(txn)
        var rc = mdb_txn_commit(txn)  // ends the transaction, committed or not
        // A full map at the commit: grown, and the transaction written again and committed here, the write
        // lock held all along (no other writer of the process can commit in between; `KVStore`'s replay of a
        // restarted commit would begin a new write, after another store object's writer could take the lock).
        while rc == MDB_MAP_FULL && shared.grows {
            try shared.growMap()
            shared.growthsAtCommit += 1
            var again: OpaquePointer?
            try Self.check(mdb_txn_begin(shared.env, nil, 0, &again), "begin the write again")
            guard let again else { throw LocalStoreError(.internal, "mdb_txn_begin returned no transaction") }
            guard mdb_txn_id(again) == id else {
                mdb_txn_abort(again)
                throw LocalStoreError(.busy, "another process committed while the map grew at a commit: nothing was committed")
            }
            rc = 0
            for (key, value) in shared.writeLog where rc == 0 {
                rc = key.withUnsafeBytes { k in
                    var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                    guard let value else {
                        let r = mdb_del(again, shared.dbi, &kv, nil)
                        return r == MDB_NOTFOUND ? 0 : r
                    }
                    return value.withUnsafeBytes { v in
                        var vv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                        return mdb_put(again, shared.dbi, &kv, &vv, 0)
                    }
                }
            }
            if rc != 0 {
                mdb_txn_abort(again)
                if rc == MDB_MAP_FULL { continue }
                try Self.check(rc, "write again")
            }
            rc = mdb_txn_commit(again)
        }
        try Self.check(rc, "commit")
        return result
    }

    /// An engine object dropped without `close()` (a store that never opened on it) releases the environment.
    deinit { try? close() }

    /// Releases this engine object; the last one open on the directory closes the environment.
    package func close() throws {
        guard closeLock.withLock({ () -> Bool in defer { isClosed = true }; return !isClosed }) else { return }
        // Closed under the registry's lock: an engine object opened meanwhile waits, then opens the files
        // again, instead of a second LMDB environment on them in one process (which LMDB forbids).
        Self.registryLock.withLock {
            environment.users -= 1
            guard environment.users == 0 else { return }
            Self.registry[path] = nil
            environment.close()
        }
    }

    package struct Access: OrderedKeyValueWriter {
        let cell: UnsafeMutablePointer<OpaquePointer?>
        let shared: Environment
        var env: OpaquePointer { shared.env }
        var dbi: MDB_dbi { shared.dbi }
        /// The transaction; `nil` (an error) after a restart that could not begin again.
        var txn: OpaquePointer {
            get throws {
                guard let txn = cell.pointee else { throw LocalStoreError(.ioError, "the write transaction could not begin again") }
                return txn
            }
        }

        /// A write transaction begins again by `mdb_txn_abort` and `mdb_txn_begin`, on the same state when
        /// no other writer committed in between: the new transaction's id is then the old one's.
        package var canRestart: Bool { true }
        /// A full map grows, and the transaction begins again.
        package var restartsOnItsOwn: Bool { shared.grows }

        /// After `rc` from a write: when the map was full and grows, ends the transaction, grows the map,
        /// begins again on the same state and throws `OrderedKeyValueRestarted`; else checks `rc`.
        private func checkWrite(_ rc: Int32, _ what: String) throws {
            guard rc == MDB_MAP_FULL, shared.grows else { return try LMDBKVEngine.check(rc, what) }
            try beginAgain(growing: true)
            throw OrderedKeyValueRestarted("the map was full and grew")
        }

        package func restart() throws { try beginAgain(growing: false) }

        /// Aborts the transaction, grows the map when `growing`, and begins again: `busy` when another writer
        /// committed meanwhile (the new transaction's id is not the old one's).
        private func beginAgain(growing: Bool) throws {
            let old = try txn
            // Everything is written again after a restart (KVStore replays): the log starts over.
            shared.writeLog.removeAll(keepingCapacity: true)
            let id = mdb_txn_id(old)
            mdb_txn_abort(old)
            cell.pointee = nil
            if growing { try shared.growMap() }
            var fresh: OpaquePointer?
            try LMDBKVEngine.check(mdb_txn_begin(env, nil, 0, &fresh), "begin the write again")
            cell.pointee = fresh
            guard mdb_txn_id(fresh) == id else {
                throw LocalStoreError(
                    .busy, "another writer committed while \(growing ? "the map grew" : "a failed call was undone"): the transaction cannot go on")
            }
        }

        /// Calls `body` with `bytes` as an `MDB_val` (LMDB only reads a key or value it is given).
        private func withVal<R>(_ bytes: [UInt8], _ body: (inout MDB_val) throws -> R) rethrows -> R {
            try bytes.withUnsafeBytes { b in
                var val = MDB_val(mv_size: b.count, mv_data: UnsafeMutableRawPointer(mutating: b.baseAddress))
                return try body(&val)
            }
        }

        /// The id of the last commit this transaction sees (a read's), or of the write it is.
        package var snapshotNumber: UInt64? { cell.pointee.map { UInt64(mdb_txn_id($0)) } }

        package func get(_ key: [UInt8]) throws -> [UInt8]? { try withValue(key) { $0.map { Array($0) } } }

        /// The value in LMDB's memory map: no copy.
        package func withValue<R>(_ key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
            try key.withUnsafeBytes { try withValue(forKey: $0, body) }
        }

        package func withValue<R>(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
            var data = MDB_val()
            let txn = try txn
            var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            let rc = mdb_get(txn, dbi, &k, &data)
            if rc == MDB_NOTFOUND { return try body(nil) }
            try LMDBKVEngine.check(rc, "get")
            return try body(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
        }

        package func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            var cursor: OpaquePointer?
            try LMDBKVEngine.check(mdb_cursor_open(try txn, dbi, &cursor), "open a cursor")
            defer { mdb_cursor_close(cursor) }
            var key = MDB_val()
            var data = MDB_val()
            var rc: Int32
            if !reverse {
                rc = lower.isEmpty ? mdb_cursor_get(cursor, &key, &data, MDB_FIRST) : withVal(lower) { k in
                    let r = mdb_cursor_get(cursor, &k, &data, MDB_SET_RANGE)
                    key = k
                    return r
                }
            } else if let upper {
                rc = withVal(upper) { k in
                    let r = mdb_cursor_get(cursor, &k, &data, MDB_SET_RANGE)
                    key = k
                    return r
                }
                // At the first key at or past `upper` (or past every key): the walk starts just before it.
                rc = rc == MDB_NOTFOUND ? mdb_cursor_get(cursor, &key, &data, MDB_LAST) : rc == 0 ? mdb_cursor_get(cursor, &key, &data, MDB_PREV) : rc
            } else {
                rc = mdb_cursor_get(cursor, &key, &data, MDB_LAST)
            }
            while rc == 0 {
                let k = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
                if reverse ? KeyCodec.precedes(k, lower) : upper.map({ !KeyCodec.precedes(k, $0) }) ?? false { return }
                guard try body(k, UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)) else { return }
                rc = mdb_cursor_get(cursor, &key, &data, reverse ? MDB_PREV : MDB_NEXT)
            }
            if rc != MDB_NOTFOUND { try LMDBKVEngine.check(rc, "scan") }
        }

        package func put(_ key: [UInt8], _ value: [UInt8]) throws {
            let txn = try txn
            try withVal(key) { k in
                try withVal(value) { v in try checkWrite(mdb_put(txn, dbi, &k, &v, 0), "put") }
            }
            if shared.grows { shared.writeLog.append((key, value)) }
        }

        package func delete(_ key: [UInt8]) throws {
            let txn = try txn
            let rc = withVal(key) { mdb_del(txn, dbi, &$0, nil) }
            if rc != MDB_NOTFOUND { try checkWrite(rc, "delete") }
            if shared.grows { shared.writeLog.append((key, nil)) }
        }
    }
}
