import CLMDB
import Foundation
import LocalStore
import LocalStoreKV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One open LMDB environment, shared by every ``LMDBStore`` of this process opened on the same
/// directory (LMDB forbids opening one environment twice in a process: closing the second
/// descriptor would drop the first one's POSIX locks).
///
/// Locking, outermost first:
/// 1. `writeLock` — held by a `write` call for its whole duration, including map growth and replay,
///    so that no other writer of this process runs between an aborted attempt and its replay;
///    then `crossProcessLock` (other LocalStore processes' writers), waited for at most `busyTimeout`;
/// 2. `gate` — shared by every transaction, exclusive for map resizing and closing;
/// 3. LMDB's own writer mutex (inside `mdb_txn_begin`);
/// 4. `handleLock` — held by any transaction that opens database handles, until it ends (LMDB's
///    rule for `mdb_dbi_open`).
final class Environment: @unchecked Sendable {
    struct Key: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    /// A reset read transaction. Only ever used by one thread at a time: it is taken out of the
    /// state before it is renewed (`MDB_NOTLS`: any thread may renew it).
    struct IdleReader: @unchecked Sendable {
        let txn: OpaquePointer
    }

    struct State {
        var handles: [String: MDB_dbi] = [:]
        /// Read transactions that ended (reset: no snapshot held, reader slot kept), renewed by the
        /// next reads instead of beginning new ones (`mdb_txn_begin` allocates and zeroes a
        /// transaction sized by `maximumDatabases` every time).
        var idleReaders: [IdleReader] = []
        var catalog: Catalog?
        /// The snapshot (`mdb_txn_id` of a read transaction) in which `catalog` was last found current:
        /// a read of the same snapshot needs no look at the catalog's generation.
        var catalogSnapshot: Int?
        /// What reads by id of recently read tables need, per catalog generation (``ReadByIdPlan``), at
        /// most eight: kept with the catalog so that a read by id finds its plan in the same lock.
        var readByIdPlans: [ReadByIdPlan] = []
        var references = 1
        var isOpen = true
        var isClosing = false
    }

    let env: OpaquePointer
    let key: Key
    /// This environment's number, unique in the process (``ThreadPlanMemo`` tells environments apart by
    /// it: an address can be reused by a later one).
    let serial = Environment.serials.wrappingAdd(1, ordering: .relaxed).newValue
    private static let serials = Atomic<UInt64>(0)
    let path: String
    let options: LMDBStoreOptions
    let gate = TransactionGate()
    let writeLock = PosixMutex()
    /// Serializes writers across processes with a timeout (`nil` when `lock.mdb` cannot be opened for
    /// writing; then LMDB's own mutex, without a timeout, is all there is).
    let crossProcessLock: CrossProcessWriterLock?
    let handleLock = PosixMutex()
    let writer = WriterThread()
    let state = LockedValue(State())
    /// The catalog database's handle, set by ``initialize()`` before the environment is shared (it
    /// never changes afterwards).
    private(set) var metaHandle: MDB_dbi = 0
    /// How records are written: version 2 (tags first) in a store of format 3 or later, version 1 in
    /// an older store, which stays readable by the versions that wrote it. Set by ``initialize()``
    /// before the environment is shared (a store's format never changes while it is open: only a
    /// compound index raises it, from 1 to 2).
    private(set) var recordLayout: RecordCodec.Layout = .inline
    /// Whether this store writes bare index entries (format 4: ``MetaKey/bareIndexEntries(format:)``).
    private(set) var bareIndexEntries = false
    /// What queries read before need again, per catalog generation (``QueryPlanCache``).
    let queryPlans = LockedValue(QueryPlanCache<CachedQueryPlan>())
    /// Tests only: runs after a full write transaction was aborted for a map growth, before the
    /// new one begins (the window in which another process may commit).
    let afterGrowthAbortHook = LockedValue<(@Sendable () -> Void)?>(nil)
    /// Tests only: runs in ``beginRead()`` after liblmdb began or renewed the read transaction and
    /// before its snapshot is checked (`hasAfterReadBeginHook` keeps the check off the lock).
    let afterReadBeginHook = LockedValue<(@Sendable () -> Void)?>(nil)
    let hasAfterReadBeginHook = Atomic<Bool>(false)
    /// Write transactions of this process whose `mdb_txn_commit` began, and those whose
    /// `mdb_txn_commit` returned (see ``beginRead()``).
    private let commitsBegun = Atomic<UInt64>(0)
    private let commitsEnded = Atomic<UInt64>(0)
    /// Read transactions begun again because their snapshot may be newer than their id (tests).
    let readRestarts = Atomic<Int>(0)
    /// One idle read transaction kept outside the lock (its pointer's bits, 0 when empty): a reader
    /// takes it and puts it back with one atomic operation each, where the idle list costs a lock
    /// round trip each way (~120 instructions; a read by id took four locks). Like the list, it is
    /// filled only while the gate is held shared (``endRead(_:)``) and drained while it is held
    /// exclusively (``dropIdleReaders()``).
    private let idleSlot = Atomic<UInt>(0)
    /// `false` from the moment the environment closes: a read transaction that ends is then aborted
    /// (the slot's side of `State.isOpen`).
    private let keepsIdleReaders = Atomic<Bool>(true)

    private init(env: OpaquePointer, key: Key, path: String, options: LMDBStoreOptions, crossProcessLock: CrossProcessWriterLock?) {
        self.crossProcessLock = crossProcessLock
        self.env = env
        self.key = key
        self.path = path
        self.options = options
    }

    // MARK: Registry

    private static let registry = LockedValue<[Key: Environment]>([:])

    /// Opens the environment at `path`, or shares the one this process already has open there.
    /// Returns it with one more reference and the number of stale reader slots cleared.
    static func acquire(path: String, options: LMDBStoreOptions) throws -> (Environment, Int) {
        while true {
            let result: (Environment, Int)? = try registry.withLock { envs in
                let ancestor = DirectorySync.existingAncestor(of: path)
                try prepareDirectory(path)
                let key = try directoryKey(path)
                if let existing = envs[key] {
                    let usable = existing.state.withLock { s -> Bool? in
                        if s.isClosing { return nil }
                        s.references += 1
                        return true
                    }
                    guard usable != nil else { return nil }  // being closed: wait and retry
                    var dead: Int32 = 0
                    mdb_reader_check(existing.env, &dead)
                    return (existing, Int(dead))
                }
                let (environment, dead) = try open(path: path, key: key, options: options, createdBelow: ancestor)
                envs[key] = environment
                return (environment, dead)
            }
            if let result { return result }
            usleep(1000)
        }
    }

    /// Drops one reference; the last one closes the environment (after every transaction of this
    /// process has ended) and releases its files.
    func release() {
        let last = state.withLock { s -> Bool in
            s.references -= 1
            if s.references == 0 {
                s.isClosing = true
                return true
            }
            return false
        }
        guard last else { return }
        gate.lockExclusive()
        state.withLock { $0.isOpen = false }
        keepsIdleReaders.store(false, ordering: .relaxed)
        dropIdleReaders()
        // In the faster durability modes the last close is a flush point (best effort: closing
        // cannot fail, and a process exit keeps the data in the OS cache anyway).
        if options.durability != .full { mdb_env_sync(env, 1) }
        mdb_env_close(env)
        crossProcessLock?.close()  // only now: closing it earlier would drop LMDB's locks
        gate.unlockExclusive()
        Environment.registry.withLock { envs in
            if envs[key] === self { envs[key] = nil }
        }
    }

    var isOpen: Bool { state.withLock { $0.isOpen } }

    private static func prepareDirectory(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw LocalStoreError(.notADatabase, "'\(path)' is a file, not an LMDB store directory")
            }
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            if !contents.contains("data.mdb"), contents.contains(where: { $0 != "lock.mdb" }) {
                throw LocalStoreError(.notADatabase, "'\(path)' holds other files but no LMDB store")
            }
            var data = stat()
            if stat(path + "/data.mdb", &data) == 0, (data.st_mode & S_IFMT) != S_IFREG {
                throw LocalStoreError(.notADatabase, "'\(path)/data.mdb' is not a regular file")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                let code = errno
                throw LocalStoreError(
                    code == EACCES || code == EROFS || code == EPERM ? .readOnly : .ioError,
                    "cannot create the store directory '\(path)': \(error.localizedDescription)")
            }
        }
    }

    private static func directoryKey(_ path: String) throws -> Key {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw LocalStoreError(.ioError, "cannot stat '\(path)': \(String(cString: strerror(errno)))")
        }
        return Key(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// `createdBelow`: the nearest ancestor of `path` that existed before this open (`path` itself when
    /// the directory existed); a new store's directory entries are synced up to it.
    private static func open(path: String, key: Key, options: LMDBStoreOptions, createdBelow: String) throws -> (Environment, Int) {
        var handle: OpaquePointer?
        try LMDBErrors.check(mdb_env_create(&handle), "cannot create an LMDB environment")
        guard let env = handle else { throw LocalStoreError(.internal, "mdb_env_create returned no environment") }
        var crossProcessLock: CrossProcessWriterLock?
        do {
            try LMDBErrors.check(mdb_env_set_maxdbs(env, MDB_dbi(max(8, options.maximumDatabases))), "cannot set the database limit")
            try LMDBErrors.check(mdb_env_set_maxreaders(env, UInt32(max(1, options.maximumReaders))), "cannot set the reader limit")
            // A new environment starts at the initial size; an existing one keeps the size it grew to
            // (LMDB adopts the size recorded in the file when none is set).
            var data = stat()
            let isNew = stat(path + "/data.mdb", &data) != 0 || data.st_size == 0
            if isNew {
                try LMDBErrors.check(mdb_env_set_mapsize(env, Environment.roundedMapSize(options.initialMapSize)), "cannot set the map size")
            }
            var flags = UInt32(MDB_NOTLS)
            switch options.durability {
            case .full: break
            case .normal: flags |= UInt32(MDB_NOMETASYNC)
            case .off: flags |= UInt32(MDB_NOSYNC)
            }
            try DataFileCheck.verify(path + "/data.mdb")
            try LMDBErrors.check(mdb_env_open(env, path, flags, 0o600), "cannot open the LMDB store at '\(path)'")
            if isNew {
                // A new store: its meta pages and the directory entries leading to it are durable before
                // the first commit can be reported (DirectorySync).
                mdb_env_sync(env, 1)
                DirectorySync.sync(path, upTo: createdBelow)
            }
            guard mdb_env_get_maxkeysize(env) >= Int32(KeyCodec.longKeyLength) else {
                throw LocalStoreError(.unsupported, "liblmdb was built with keys shorter than \(KeyCodec.longKeyLength) bytes")
            }
            var dead: Int32 = 0
            try LMDBErrors.check(mdb_reader_check(env, &dead), "cannot check the reader table")
            crossProcessLock = CrossProcessWriterLock(lockFile: path + "/lock.mdb", storePath: path)
            let environment = Environment(env: env, key: key, path: path, options: options, crossProcessLock: crossProcessLock)
            try environment.initialize()
            return (environment, Int(dead))
        } catch {
            mdb_env_close(env)
            crossProcessLock?.close()
            throw error
        }
    }

    static func roundedMapSize(_ size: Int) -> Int {
        let unit = 1 << 16
        let clamped = max(size, unit)
        return (clamped + unit - 1) / unit * unit
    }

    // MARK: Format

    /// Checks the format marker (creating it in an empty environment) and opens the handles of
    /// every table. Runs before the environment is shared, so no other transaction exists.
    private func initialize() throws {
        gate.lockShared()
        defer { gate.unlockShared() }
        var needsCreation = false
        try withRawTransaction(readOnly: true) { txn in
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, MetaKey.database, 0, &dbi)
            if rc == MDB_NOTFOUND {
                var main: MDB_dbi = 0
                try LMDBErrors.check(mdb_dbi_open(txn, nil, 0, &main), "cannot open the main database")
                var st = MDB_stat()
                try LMDBErrors.check(mdb_stat(txn, main, &st), "cannot read the main database")
                guard st.ms_entries == 0 else {
                    throw LocalStoreError(.notADatabase, "'\(path)' is an LMDB environment that LocalStore did not create")
                }
                needsCreation = true
                return false
            }
            if rc == MDB_INCOMPATIBLE {
                throw LocalStoreError(.notADatabase, "'\(path)' is an LMDB environment that LocalStore did not create")
            }
            try LMDBErrors.check(rc, "cannot open the catalog")
            let format = try checkFormat(txn, dbi)
            recordLayout = MetaKey.recordLayout(format: format)
            bareIndexEntries = MetaKey.bareIndexEntries(format: format)
            return true
        }
        if needsCreation {
            try withRawTransaction(readOnly: false) { txn in
                var dbi: MDB_dbi = 0
                try LMDBErrors.check(mdb_dbi_open(txn, MetaKey.database, UInt32(MDB_CREATE), &dbi), "cannot create the catalog")
                if try Environment.rawGet(txn, dbi, MetaKey.format) == nil {
                    try Environment.rawPut(txn, dbi, MetaKey.format, MetaKey.formatValue(MetaKey.initialFormatVersion))
                    recordLayout = MetaKey.recordLayout(format: UInt64(MetaKey.initialFormatVersion))
                    bareIndexEntries = MetaKey.bareIndexEntries(format: UInt64(MetaKey.initialFormatVersion))
                    var one: [UInt8] = []
                    KeyCodec.appendBigEndian(1, into: &one)
                    try Environment.rawPut(txn, dbi, MetaKey.generation, one)
                    try Environment.rawPut(txn, dbi, MetaKey.nextRowId, one)
                } else {
                    let format = try checkFormat(txn, dbi)
            recordLayout = MetaKey.recordLayout(format: format)
            bareIndexEntries = MetaKey.bareIndexEntries(format: format)
                }
                return true
            }
        }
        // Open the catalog's handle and every table's, in one transaction that commits them.
        try withRawTransaction(readOnly: true) { txn in
            var meta: MDB_dbi = 0
            try LMDBErrors.check(mdb_dbi_open(txn, MetaKey.database, 0, &meta), "cannot open the catalog")
            let catalog = try Environment.loadCatalog(txn, meta)
            var handles: [String: MDB_dbi] = [MetaKey.database: meta]
            for table in catalog.tables.values {
                for name in table.databases {
                    var dbi: MDB_dbi = 0
                    let rc = mdb_dbi_open(txn, name, 0, &dbi)
                // The catalog names only databases created in the same transaction as its entry:
                // one that is missing (or is not a database) means a damaged catalog entry.
                if rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE {
                    throw LMDBErrors.corrupt("the catalog names database '\(name)', which \(rc == MDB_NOTFOUND ? "does not exist" : "is not a database")")
                }
                try LMDBErrors.check(rc, "cannot open database '\(name)'")
                    handles[name] = dbi
                }
            }
            metaHandle = meta
            state.withLock {
                $0.handles = handles
                $0.catalog = catalog
                $0.catalogSnapshot = nil
            }
            return true
        }
    }

    /// Returns the store's format number.
    private func checkFormat(_ txn: OpaquePointer, _ meta: MDB_dbi) throws -> UInt64 {
        guard let value = try Environment.rawGet(txn, meta, MetaKey.format), value.count == MetaKey.magic.count + 8,
            Array(value.prefix(MetaKey.magic.count)) == MetaKey.magic
        else {
            throw LocalStoreError(.notADatabase, "'\(path)' is an LMDB environment that LocalStore did not create")
        }
        let version = KeyCodec.readBigEndian(value[MetaKey.magic.count...])
        guard version >= 1, version <= UInt64(MetaKey.formatVersion) else {
            throw LocalStoreError(
                .versionMismatch,
                "'\(path)' was written in LocalStoreLMDB format \(version); this version reads formats 1 to \(MetaKey.formatVersion)")
        }
        return version
    }

    /// Runs `body` in a transaction of its own (no gate handling: the caller holds the gate);
    /// commits when `body` returns `true`, aborts otherwise. Holds `handleLock` throughout.
    private func withRawTransaction(readOnly: Bool, _ body: (OpaquePointer) throws -> Bool) throws {
        try handleLock.withLock {
            var handle: OpaquePointer?
            try LMDBErrors.check(
                mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &handle), "cannot begin a transaction")
            guard let txn = handle else { throw LocalStoreError(.internal, "mdb_txn_begin returned no transaction") }
            var ended = false
            defer { if !ended { mdb_txn_abort(txn) } }
            if try body(txn) {
                ended = true
                try commit(txn, signalsMapFull: false)
            }
        }
    }

    // MARK: Raw access

    static func rawGet(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var dv = MDB_val()
            let rc = mdb_get(txn, dbi, &kv, &dv)
            if rc == MDB_NOTFOUND { return nil }
            try LMDBErrors.check(rc, "cannot read the catalog")
            return Array(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size))
        }
    }

    static func rawPut(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var dv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                try LMDBErrors.check(mdb_put(txn, dbi, &kv, &dv, 0), "cannot write the catalog")
            }
        }
    }

    static func generation(_ txn: OpaquePointer, _ meta: MDB_dbi) throws -> UInt64 {
        // Read in place: this runs at the start of every transaction.
        try MetaKey.generation.withUnsafeBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var dv = MDB_val()
            let rc = mdb_get(txn, meta, &kv, &dv)
            guard rc != MDB_NOTFOUND, dv.mv_size == 8, let data = dv.mv_data else {
                if rc != MDB_NOTFOUND { try LMDBErrors.check(rc, "cannot read the catalog") }
                throw LMDBErrors.corrupt("the catalog has no generation")
            }
            return UInt64(bigEndian: data.loadUnaligned(as: UInt64.self))
        }
    }

    /// Reads every table definition of the snapshot `txn`.
    static func loadCatalog(_ txn: OpaquePointer, _ meta: MDB_dbi) throws -> Catalog {
        let generation = try generation(txn, meta)
        var tables: [String: TableDefinition] = [:]
        var cursor: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, meta, &cursor), "cannot read the catalog")
        defer { mdb_cursor_close(cursor) }
        let prefix = MetaKey.tablePrefix
        try prefix.withUnsafeBytes { p in
            var kv = MDB_val(mv_size: p.count, mv_data: UnsafeMutableRawPointer(mutating: p.baseAddress))
            var dv = MDB_val()
            var rc = mdb_cursor_get(cursor, &kv, &dv, MDB_SET_RANGE)
            while rc == 0 {
                let key = UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size)
                guard key.starts(with: prefix) else { break }
                let def = try TableDefinition.decode(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size))
                let folded = String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
                guard folded == Identifier.fold(def.schema.name) else {
                    throw LMDBErrors.corrupt("the catalog entry '\(folded)' describes table '\(def.schema.name)'")
                }
                tables[folded] = def
                rc = mdb_cursor_get(cursor, &kv, &dv, MDB_NEXT)
            }
            if rc != 0 && rc != MDB_NOTFOUND { try LMDBErrors.check(rc, "cannot read the catalog") }
        }
        return Catalog(generation: generation, tables: tables)
    }

    // MARK: Handles and catalog cache

    func handle(_ name: String) -> MDB_dbi? { state.withLock { $0.handles[name] } }

    /// The read-by-id plan of table `name` (as the caller spelled it) in the snapshot `txn`, found by
    /// the thread whose memo is `memo`: as ``readByIdPlan(_:in:)`` with the snapshot's catalog, but when
    /// the cached catalog was found current in this snapshot already (the usual case: no commit since),
    /// the plan is found under one lock and no catalog is copied. The plan is remembered in `memo`.
    ///
    /// ``readItem(table:id:tracker:)`` asks the memo first, without a lock: the plan the thread used last,
    /// if that was for this environment, this table spelling and this very snapshot. A snapshot is
    /// immutable — the same transaction id is the same committed state, catalog included — so a plan
    /// found right for it stays right, and a run of reads with no commit between them takes no lock at
    /// all (the lock was a mutex round trip per read: two locked instructions and ~180 instructions).
    func readByIdPlan(_ name: String, forRead txn: OpaquePointer, memo: ThreadPlanMemo) throws -> ReadByIdPlan {
        let snapshot = mdb_txn_id(txn)
        let plan: ReadByIdPlan
        let cached = state.withLock { s -> ReadByIdPlan? in
            guard s.catalogSnapshot == snapshot, let generation = s.catalog?.generation else { return nil }
            return s.readByIdPlans.first { $0.generation == generation && Identifier.isSameSpelling($0.name, name) }
        }
        if let cached {
            plan = cached
        } else {
            plan = try readByIdPlan(name, in: try catalog(forRead: txn))
        }
        // Either way the plan was made for the catalog current in this snapshot.
        memo.remember(plan, environment: serial, snapshot: snapshot)
        return plan
    }

    /// The read-by-id plan of table `name` (as the caller spelled it) in `catalog`: the cached one when
    /// it was made for the same spelling and catalog generation, else a new one (kept, at most eight).
    func readByIdPlan(_ name: String, in catalog: Catalog) throws -> ReadByIdPlan {
        let generation = catalog.generation
        if let plan = state.withLock({ s in s.readByIdPlans.first { $0.generation == generation && Identifier.isSameSpelling($0.name, name) } }) {
            return plan
        }
        guard let table = catalog.table(name) else { throw LocalStoreError.unknownTable(name) }
        guard let dbi = handle(table.database) else {
            throw LocalStoreError(.internal, "the LMDB database '\(table.database)' has no handle")
        }
        let plan = ReadByIdPlan(generation: generation, name: name, table: table, dbi: dbi)
        state.withLock { s in
            s.readByIdPlans.removeAll { $0.generation != generation }
            if s.readByIdPlans.count >= 8 { s.readByIdPlans.removeFirst() }
            s.readByIdPlans.append(plan)
        }
        return plan
    }

    /// ``catalog(for:)`` for a read transaction: when the cached catalog was found current in the same
    /// snapshot (same transaction id: nothing committed since), it is returned without reading the
    /// generation.
    func catalog(forRead txn: OpaquePointer) throws -> Catalog {
        let snapshot = mdb_txn_id(txn)
        if let cached = state.withLock({ $0.catalogSnapshot == snapshot ? $0.catalog : nil }) { return cached }
        let catalog = try self.catalog(for: txn)
        state.withLock { s in
            if s.catalog?.generation == catalog.generation { s.catalogSnapshot = snapshot }
        }
        return catalog
    }

    /// The catalog of the snapshot `txn`, from the cache when its generation matches.
    /// Throws ``MissingHandlesSignal`` when a table has no handle in this process yet.
    func catalog(for txn: OpaquePointer) throws -> Catalog {
        let meta = metaHandle
        let generation = try Environment.generation(txn, meta)
        if let cached = state.withLock({ $0.catalog }), cached.generation == generation { return cached }
        let catalog = try Environment.loadCatalog(txn, meta)
        let missing = state.withLock { s -> [String] in
            let names = catalog.tables.values.flatMap(\.databases).filter { s.handles[$0] == nil }
            if names.isEmpty, s.catalog.map({ $0.generation < generation }) ?? true {
                s.catalog = catalog
                s.catalogSnapshot = nil
            }
            return names
        }
        if !missing.isEmpty { throw MissingHandlesSignal(names: missing) }
        return catalog
    }

    /// Opens handles for databases another process created. The caller holds the gate shared and
    /// has no transaction.
    func openHandles(_ names: [String]) throws {
        try withRawTransaction(readOnly: true) { txn in
            var opened: [String: MDB_dbi] = [:]
            for name in names where handle(name) == nil {
                var dbi: MDB_dbi = 0
                let rc = mdb_dbi_open(txn, name, 0, &dbi)
                // The catalog names only databases created in the same transaction as its entry:
                // one that is missing (or is not a database) means a damaged catalog entry.
                if rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE {
                    throw LMDBErrors.corrupt("the catalog names database '\(name)', which \(rc == MDB_NOTFOUND ? "does not exist" : "is not a database")")
                }
                try LMDBErrors.check(rc, "cannot open database '\(name)'")
                opened[name] = dbi
            }
            state.withLock { s in s.handles.merge(opened) { old, _ in old } }
            return true
        }
    }

    /// Publishes handles and the catalog of a committed transaction.
    func publish(handles: [String: MDB_dbi], catalog: Catalog?) {
        state.withLock { s in
            s.handles.merge(handles) { old, _ in old }
            if let catalog, s.catalog.map({ $0.generation < catalog.generation }) ?? true {
                s.catalog = catalog
                s.catalogSnapshot = nil
            }
        }
    }

    // MARK: Map size

    var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// Grows the map after `MDB_MAP_FULL` at `observed` bytes. The caller holds no transaction and
    /// not the gate; this waits until no transaction of the process is active.
    func growMap(from observed: Int) throws {
        gate.lockExclusive()
        defer { gate.unlockExclusive() }
        guard isOpen else { throw LocalStoreError.closed() }
        dropIdleReaders()
        let current = mapSize
        guard current <= observed else { return }  // another writer grew it already
        let doubled = observed.multipliedReportingOverflow(by: 2)
        guard !doubled.overflow else { throw LocalStoreError(.full, "the LMDB map cannot grow beyond \(observed) bytes") }
        let target = Environment.roundedMapSize(max(doubled.partialValue, observed + (1 << 20)))
        try LMDBErrors.check(mdb_env_set_mapsize(env, target), "cannot grow the LMDB map to \(target) bytes")
    }

    /// Adopts a map size another process set (`MDB_MAP_RESIZED`). Same locking as ``growMap(from:)``.
    func adoptMapSize() throws {
        gate.lockExclusive()
        defer { gate.unlockExclusive() }
        guard isOpen else { throw LocalStoreError.closed() }
        dropIdleReaders()
        try LMDBErrors.check(mdb_env_set_mapsize(env, 0), "cannot adopt the new map size")
    }

    /// Runs `body` with the raw environment while no map resize or close can happen.
    func withEnvironment<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        try writer.check()
        gate.lockShared()
        defer { gate.unlockShared() }
        guard isOpen else { throw LocalStoreError.closed() }
        return try body(env)
    }

    // MARK: Transactions

    /// Begins a transaction. The caller holds the gate shared; on `MDB_MAP_RESIZED` the gate is
    /// released while the new size is adopted and taken again.
    func beginTransaction(readOnly: Bool) throws -> OpaquePointer {
        while true {
            guard isOpen else { throw LocalStoreError.closed() }
            var handle: OpaquePointer?
            let rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &handle)
            if rc == MDB_MAP_RESIZED {
                gate.unlockShared()
                defer { gate.lockShared() }
                try adoptMapSize()
                continue
            }
            try LMDBErrors.check(rc, readOnly ? "cannot begin a read transaction" : "cannot begin a write transaction")
            guard let txn = handle else { throw LocalStoreError(.internal, "mdb_txn_begin returned no transaction") }
            return txn
        }
    }

    /// The most reset read transactions kept for reuse. Each keeps its slot in LMDB's reader table
    /// (`maximumReaders`, shared by every process), so only a few are kept: as many as reads of this
    /// process usually run at once.
    static let maximumIdleReaders = 4

    /// Commits `txn`, counted for ``beginRead()``. `signalsMapFull`: `MDB_MAP_FULL` is thrown as
    /// ``MapFullSignal`` (the caller grows the map) rather than as a `full` error.
    func commit(_ txn: OpaquePointer, signalsMapFull: Bool) throws {
        commitsBegun.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer { commitsEnded.wrappingAdd(1, ordering: .sequentiallyConsistent) }
        try LMDBErrors.commit(txn, path: path, env: signalsMapFull ? env : nil)
    }

    /// How many times ``beginRead()`` begins a read transaction again before it gives up (`busy`);
    /// a restart needs two commits during one begin, so this is never reached in practice.
    static let maximumReadRestarts = 1000

    /// A read transaction whose snapshot is the committed state its id names: an idle one renewed,
    /// or a new one. The caller holds the gate shared.
    ///
    /// liblmdb (0.9.x) begins a read by reading the last committed id `T` from the lock file and then
    /// copying meta page `T & 1`. A commit writes its meta page in place (before it publishes its
    /// id), so a reader delayed between the two steps while `T + 1` commits and `T + 2` writes its
    /// meta page copies the roots of `T + 2` (or of a later commit of the same parity, or a mix)
    /// under the id `T`; a later read begun before `T + 2` publishes its id (with `synchronous`
    /// durability the meta page is written a whole sync before) gets `T + 1`: it goes back in time.
    /// The pages of `T + 2` stay valid (the reader slot holding `T` pins them), only the order breaks.
    ///
    /// A transaction is begun again when that may have happened:
    /// * two commits of this process began and ended around it (`commitsEnded` read before,
    ///   `commitsBegun` after: exact for this process's writers);
    /// * a meta page already names a transaction newer than `T + 1` (`mdb_env_info`: catches other
    ///   processes' commits, except one whose meta page is being copied at the very moment).
    private func beginRead() throws -> OpaquePointer {
        var rejected: OpaquePointer?
        var restarts = 0
        while true {
            let endedBefore = commitsEnded.load(ordering: .sequentiallyConsistent)
            let txn: OpaquePointer
            if let again = rejected, mdb_txn_renew(again) == MDB_SUCCESS {
                txn = again
            } else {
                if let again = rejected { mdb_txn_abort(again) }
                txn = try renewIdleOrBegin()
            }
            rejected = nil
            if hasAfterReadBeginHook.load(ordering: .relaxed), let hook = afterReadBeginHook.withLock({ $0 }) { hook() }
            // The meta page copy above happens before the counter is read: an order of loads, which an
            // acquiring fence gives (on x86 no instruction at all, where a sequentially consistent fence
            // is a locked read-modify-write that drains the store buffer — the reader slot's stores —
            // on every read). The writer's side is its locked increment of `commitsBegun` before it
            // writes a meta page.
            atomicMemoryFence(ordering: .acquiring)
            let begunAfter = commitsBegun.load(ordering: .acquiring)
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            let id = mdb_txn_id(txn)
            if begunAfter &- endedBefore < 2, info.me_last_txnid < id + 2 { return txn }
            readRestarts.wrappingAdd(1, ordering: .relaxed)
            restarts += 1
            guard restarts < Environment.maximumReadRestarts else {
                mdb_txn_abort(txn)
                throw LocalStoreError(.busy, "a read transaction could not get a stable snapshot: commits kept overwriting the LMDB meta pages while it began")
            }
            mdb_txn_reset(txn)
            rejected = txn
        }
    }

    /// An idle read transaction renewed, or a new one.
    private func renewIdleOrBegin() throws -> OpaquePointer {
        if let idle = OpaquePointer(bitPattern: idleSlot.exchange(0, ordering: .acquiring)) {
            if mdb_txn_renew(idle) == MDB_SUCCESS { return idle }
            mdb_txn_abort(idle)
        }
        while let idle = state.withLock({ $0.idleReaders.popLast() })?.txn {
            if mdb_txn_renew(idle) == MDB_SUCCESS { return idle }
            // A renewal that fails (the map was resized by another process, a reader-table
            // problem) ends that transaction; a new one reports or handles the condition.
            mdb_txn_abort(idle)
        }
        return try beginTransaction(readOnly: true)
    }

    /// Ends a read transaction: reset and kept for reuse, or aborted when enough are kept.
    private func endRead(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        if keepsIdleReaders.load(ordering: .relaxed),
            idleSlot.compareExchange(expected: 0, desired: UInt(bitPattern: txn), ordering: .releasing).exchanged
        {
            return
        }
        let kept = state.withLock { s -> Bool in
            guard s.isOpen, s.idleReaders.count < Environment.maximumIdleReaders else { return false }
            s.idleReaders.append(IdleReader(txn: txn))
            return true
        }
        if !kept { mdb_txn_abort(txn) }
    }

    /// Aborts the idle read transactions (before a map resize or close; the caller holds the gate
    /// exclusively, so none is in use).
    private func dropIdleReaders() {
        if let idle = OpaquePointer(bitPattern: idleSlot.exchange(0, ordering: .acquiring)) { mdb_txn_abort(idle) }
        let idle = state.withLock { s -> [IdleReader] in
            defer { s.idleReaders = [] }
            return s.idleReaders
        }
        for reader in idle { mdb_txn_abort(reader.txn) }
    }

    /// Runs `body` in a read transaction (a consistent snapshot; never blocks on a writer). `tracker`
    /// learns the snapshot's transaction id when somebody observes (commits made elsewhere).
    func read<R>(tracker: CommitTracker? = nil, _ body: (TxnContext) throws -> R) throws -> R {
        try readTransaction(tracker: tracker) { txn, catalog in
            let context = TxnContext(environment: self, txn: txn, catalog: catalog, isWrite: false)
            // The transaction is ended by `readTransaction`; the context only lets go of it.
            defer { context.end(reusing: { _ in }) }
            return try body(context)
        }
    }

    /// ``read(tracker:_:)`` without a ``TxnContext``: `body` gets the read transaction (valid only
    /// during the call; it must not end it) and its snapshot's catalog.
    func readTransaction<R>(tracker: CommitTracker? = nil, _ body: (OpaquePointer, Catalog) throws -> R) throws -> R {
        try readTransaction(tracker: tracker, resolving: { try catalog(forRead: $0) }, body)
    }

    /// The item stored under `id` in table `name` (as the caller spelled it), read in a snapshot of its
    /// own: ``LMDBStore/read(table:id:)`` in one call, with no closure between the layers. The plan comes
    /// from the thread's memo (``ThreadPlanMemo``) when it was found right for this very snapshot (no
    /// lock, no retain: the memo keeps the plan, and only this thread changes its memo), else from
    /// ``readByIdPlan(_:forRead:memo:)``; the values go into the thread's spare buffer
    /// (``ReadByIdPlan/read(_:id:spare:)``). Only for an id whose key is a stored key
    /// (``ReadByIdPlan/needsContext(_:)`` false); `tracker` learns the snapshot's transaction id when
    /// somebody observes.
    ///
    /// The caller has checked that the store is open and that this is not its writer thread
    /// (``LMDBStore/checkOpen()``). The steps are ``readTransaction(tracker:resolving:_:)``'s, written out:
    /// its closures cost a retain of the plan and ~100 instructions per read.
    func readItem(table name: String, id: Value, tracker: CommitTracker?) throws -> Item? {
        gate.lockShared()
        defer { gate.unlockShared() }
        let serial = self.serial
        while true {
            let txn = try beginRead()
            // Asked through the center (borrowed), not a bound tracker (retained and released per read).
            if let center = tracker?.center, center.isObserved { tracker?.sawCommitted(mdb_txn_id(txn)) }
            let item: Item?
            do {
                item = try ThreadPlanMemo.withCurrent { memo -> Item? in
                    let snapshot = mdb_txn_id(txn)
                    if let found = try memo.withPlan(environment: serial, snapshot: snapshot, name: name, { plan in
                        try plan.read(txn, id: id, spare: &memo.spare)
                    }) {
                        return found
                    }
                    return try readByIdPlan(name, forRead: txn, memo: memo).read(txn, id: id, spare: &memo.spare)
                }
            } catch let missing as MissingHandlesSignal {
                endRead(txn)
                try openHandles(missing.names)
                continue
            } catch {
                endRead(txn)
                throw error
            }
            endRead(txn)
            return item
        }
    }

    /// Begins a read transaction, resolves what `body` needs from its snapshot (opening the handles of
    /// tables another process created, then beginning again) and runs `body`.
    private func readTransaction<Resolved, R>(
        tracker: CommitTracker?, resolving resolve: (OpaquePointer) throws -> Resolved,
        _ body: (OpaquePointer, Resolved) throws -> R
    ) throws -> R {
        try writer.check()
        gate.lockShared()
        defer { gate.unlockShared() }
        while true {
            let txn = try beginRead()
            if let center = tracker?.center, center.isObserved { tracker?.sawCommitted(mdb_txn_id(txn)) }
            let resolved: Resolved
            do {
                resolved = try resolve(txn)
            } catch let missing as MissingHandlesSignal {
                endRead(txn)
                try openHandles(missing.names)
                continue
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            defer { endRead(txn) }
            return try body(txn, resolved)
        }
    }

    /// The id of the environment's last committed transaction, or `nil` once it is closed.
    func lastCommittedTxnId() -> Int? {
        gate.lockShared()
        defer { gate.unlockShared() }
        guard isOpen else { return nil }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_last_txnid
    }

    /// Runs `body` in the write transaction and commits; see ``TxnContext`` for map growth.
    /// `tracker` records the changes and publishes them after the commit.
    func write<R>(tracker: CommitTracker? = nil, _ body: (TxnContext) throws -> R) throws -> R {
        try writer.check()
        writeLock.lock()
        defer { writeLock.unlock() }
        try crossProcessLock?.lock(timeout: options.busyTimeout)
        defer { crossProcessLock?.unlock() }
        writer.set()
        defer { writer.clear() }
        gate.lockShared()
        defer { gate.unlockShared() }
        var restarts = 0
        while true {
            let context = try beginWriteContext()
            context.changes = tracker?.writeBegan(txnId: context.startTxnId)
            do {
                let result = try body(context)
                if context.needsRestart { throw RestartSignal() }
                if let failure = context.failure { throw failure }
                try context.commit()
                tracker?.committed(txnId: context.startTxnId, context.changes)
                return result
            } catch {
                tracker?.aborted(context.changes)
                let restart = context.needsRestart || error is RestartSignal
                context.end()
                if restart {
                    restarts += 1
                    if restarts > 100 {
                        throw LocalStoreError(.busy, "another process kept writing while this transaction waited for the map to grow")
                    }
                    continue
                }
                // Internal signals never reach the caller (they are handled where they arise; this
                // is a safety net).
                if let full = error as? MapFullSignal {
                    throw context.failure ?? LocalStoreError(.full, "the LMDB map is full at \(full.mapSize) bytes")
                }
                throw error
            }
        }
    }

    /// Begins a write transaction with a loaded catalog (caller holds the gate shared).
    func beginWriteContext() throws -> TxnContext {
        while true {
            let txn = try beginTransaction(readOnly: false)
            do {
                let catalog = try self.catalog(for: txn)
                return TxnContext(environment: self, txn: txn, catalog: catalog, isWrite: true)
            } catch let missing as MissingHandlesSignal {
                mdb_txn_abort(txn)
                try openHandles(missing.names)
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
        }
    }
}

/// The read-by-id plan a thread used last (``Environment/readItem(table:id:tracker:)``): its
/// environment's ``Environment/serial``, the snapshot it was found right for, and the plan, which the
/// memo keeps alive; and the value buffer of the last item it read by id.
/// One per thread, reached through a POSIX thread-specific key without a lock, released when the thread
/// exits; only its own thread reads or writes it.
final class ThreadPlanMemo {
    private var environment: UInt64 = 0
    private var snapshot = -1
    /// The plan, retained by the memo (released when replaced or when the thread exits); held unmanaged
    /// so that lending it to a read takes no retain and release.
    private var planReference: Unmanaged<ReadByIdPlan>?
    /// The value buffer of the item this thread read by id last (of a record of at most
    /// ``RecordItemBuilder/spareRecordLimit`` bytes): refilled by the next read when that item was dropped
    /// (``RecordItemBuilder/item(_:reusing:)``), so a read allocates and frees no buffer.
    @exclusivity(unchecked) var spare: ValueRows?

    deinit { planReference?.release() }

    /// Remembers `plan` as found right for `snapshot` of the environment numbered `environment`.
    func remember(_ plan: ReadByIdPlan, environment: UInt64, snapshot: Int) {
        let old = planReference
        planReference = Unmanaged.passRetained(plan)
        old?.release()
        self.environment = environment
        self.snapshot = snapshot
    }

    /// Runs `body` with the remembered plan when it was found right for `snapshot` of the environment
    /// numbered `environment` and for the table spelling `name`; `nil` (without running `body`)
    /// otherwise. `body` must not make the memo remember another plan (it would release the one lent).
    func withPlan<R>(environment: UInt64, snapshot: Int, name: String, _ body: (ReadByIdPlan) throws -> R) rethrows -> R? {
        guard self.environment == environment, self.snapshot == snapshot, let reference = planReference else { return nil }
        return try reference._withUnsafeGuaranteedRef { plan in
            guard Identifier.isSameSpelling(plan.name, name) else { return nil }
            return try body(plan)
        }
    }

    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { memo in
            if let memo { Unmanaged<ThreadPlanMemo>.fromOpaque(memo).release() }
        }
        return rc == 0 ? key : nil
    }()

    /// Runs `body` with the calling thread's memo (made on its first use; the thread's reference keeps it,
    /// so it is lent to `body` without a retain). When the process has no thread-specific key left, a
    /// fresh memo each time: nothing is remembered, and every read takes the locked path.
    static func withCurrent<R>(_ body: (ThreadPlanMemo) throws -> R) rethrows -> R {
        guard let key else { return try body(ThreadPlanMemo()) }
        if let memo = pthread_getspecific(key) {
            return try Unmanaged<ThreadPlanMemo>.fromOpaque(memo)._withUnsafeGuaranteedRef(body)
        }
        let memo = ThreadPlanMemo()
        if pthread_setspecific(key, Unmanaged.passRetained(memo).toOpaque()) != 0 {
            Unmanaged.passUnretained(memo).release()
        }
        return try body(memo)
    }
}
