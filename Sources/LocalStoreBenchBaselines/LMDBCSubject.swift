import CLMDB
import Foundation
import LocalStore
import LocalStoreBench

/// The `lmdb-c` baseline: the benchmark's workloads written directly against the LMDB C API — the practical
/// limit of the engine for what the `lmdb` backend does.
///
/// One environment (`MDB_NOTLS`, synchronous commits as the backend's default durability) with a primary
/// database of TodoItem records keyed by the case-folded id, duplicate-sorted index databases for
/// `priority` and `updatedAt` (order-preserving big-endian keys, the primary key as data), an operations
/// database keyed by big-endian int64 ids with a `(table, itemId)` index (the lookup a sync engine makes on
/// every enqueue to collapse an item's operations; the `lmdb` backend keeps it as the operations table's
/// index), an errors database with an `operationId` index and a config
/// database. Records are written in a fixed binary layout straight into LMDB's pages (`MDB_RESERVE`);
/// reads reuse one read-only transaction handle (reset and renewed per call) and decode rows into
/// ``TodoRecord``s. The indexed query walks a compound (priority, updatedAt descending) index — the same
/// index the backends get — and stops after 50 rows.
public final class LMDBCSubject: BenchSubject {
    let path: String
    var env: OpaquePointer?
    var readTxn: OpaquePointer?
    var dbis = DBIs()
    /// Scratch space for a case-folded key (LMDB's maximum key size is 511 bytes).
    let keyBuffer = UnsafeMutableRawPointer.allocate(byteCount: 512, alignment: 8)
    let pkBuffer = UnsafeMutableRawPointer.allocate(byteCount: 512, alignment: 8)

    struct DBIs {
        var todo: MDB_dbi = 0
        var byPriority: MDB_dbi = 0
        var byUpdatedAt: MDB_dbi = 0
        /// The compound index (priority, updatedAt descending): 16-byte keys, the primary key as data.
        var byPriorityUpdatedAt: MDB_dbi = 0
        var operations: MDB_dbi = 0
        /// Operations by `table`, then the case-folded `itemId` (a 0 byte between): the operation's id key as data.
        var operationsByItem: MDB_dbi = 0
        var errors: MDB_dbi = 0
        var errorsByOperation: MDB_dbi = 0
        var config: MDB_dbi = 0
        /// The config entries by `table`, a 0 byte, `key`, a 0 byte, the key type (8 bytes big-endian), the
        /// entry's key as data: the `(table, key, keyType)` index LocalStore keeps on its config table.
        var configByPair: MDB_dbi = 0
    }

    /// Opens (creating) the environment in `directory/lmdb-c`.
    public init(directory: URL) throws {
        let dir = directory.appendingPathComponent("lmdb-c")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        path = dir.path
        try open()
    }

    deinit {
        closeEnvironment()
        keyBuffer.deallocate()
        pkBuffer.deallocate()
    }

    /// The LMDB library's version (`mdb_version`), as `major.minor.patch`.
    public static var libraryVersion: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        _ = mdb_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }

    // MARK: Environment

    static func check(_ rc: Int32, _ what: String) throws {
        guard rc == MDB_SUCCESS else {
            throw LocalStoreError(.ioError, "lmdb-c: \(what): \(String(cString: mdb_strerror(rc)))")
        }
    }

    private func open() throws {
        var e: OpaquePointer?
        try Self.check(mdb_env_create(&e), "mdb_env_create")
        guard let e else { throw LocalStoreError(.ioError, "lmdb-c: no environment") }
        env = e
        try Self.check(mdb_env_set_maxdbs(e, 16), "mdb_env_set_maxdbs")
        try Self.check(mdb_env_set_mapsize(e, 1 << 34), "mdb_env_set_mapsize")
        try Self.check(mdb_env_open(e, path, UInt32(MDB_NOTLS), 0o644), "mdb_env_open")
        try write { txn in
            func db(_ name: String, _ flags: Int32) throws -> MDB_dbi {
                var dbi: MDB_dbi = 0
                try Self.check(mdb_dbi_open(txn, name, UInt32(MDB_CREATE | flags), &dbi), "mdb_dbi_open \(name)")
                return dbi
            }
            dbis.todo = try db("TodoItem", 0)
            dbis.byPriority = try db("TodoItem.priority", MDB_DUPSORT)
            dbis.byUpdatedAt = try db("TodoItem.updatedAt", MDB_DUPSORT)
            dbis.byPriorityUpdatedAt = try db("TodoItem.priority_updatedAt_desc", MDB_DUPSORT)
            dbis.operations = try db("MS_TableOperations", 0)
            dbis.operationsByItem = try db("MS_TableOperations.table_itemId", MDB_DUPSORT)
            dbis.errors = try db("MS_TableOperationErrors", 0)
            dbis.errorsByOperation = try db("MS_TableOperationErrors.operationId", MDB_DUPSORT)
            dbis.config = try db("MS_TableConfig", 0)
            dbis.configByPair = try db("MS_TableConfig.table_key_keyType", MDB_DUPSORT)
        }
        var r: OpaquePointer?
        try Self.check(mdb_txn_begin(e, nil, UInt32(MDB_RDONLY), &r), "mdb_txn_begin (read)")
        mdb_txn_reset(r)
        readTxn = r
    }

    func closeEnvironment() {
        if let readTxn { mdb_txn_abort(readTxn) }
        readTxn = nil
        if let env { mdb_env_close(env) }
        env = nil
    }

    func write<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        guard let env else { throw LocalStoreError.closed() }
        var t: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &t), "mdb_txn_begin")
        guard let txn = t else { throw LocalStoreError(.ioError, "lmdb-c: no transaction") }
        do {
            let r = try body(txn)
            try Self.check(mdb_txn_commit(txn), "mdb_txn_commit")
            return r
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }

    /// Runs `body` in the reused read-only transaction (renewed before, reset after).
    private func read<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        guard env != nil, let txn = readTxn else { throw LocalStoreError.closed() }
        try Self.check(mdb_txn_renew(txn), "mdb_txn_renew")
        defer { mdb_txn_reset(txn) }
        return try body(txn)
    }

    func cursor<R>(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ body: (OpaquePointer) throws -> R) throws -> R {
        var c: OpaquePointer?
        try Self.check(mdb_cursor_open(txn, dbi, &c), "mdb_cursor_open")
        guard let c else { throw LocalStoreError(.ioError, "lmdb-c: no cursor") }
        defer { mdb_cursor_close(c) }
        return try body(c)
    }

    /// The ids of the queued operations, in order (for tests: the baseline gives no id twice).
    func operationIds() throws -> [Int64] {
        try read { txn in
            try cursor(txn, dbis.operations) { c in
                var ids: [Int64] = []
                var key = MDB_val()
                var value = MDB_val()
                var rc = mdb_cursor_get(c, &key, &value, MDB_FIRST)
                while rc == MDB_SUCCESS {
                    guard let k = key.mv_data, key.mv_size == 8 else { throw LocalStoreError(.corrupt, "lmdb-c: an operation key is not 8 bytes") }
                    ids.append(Int64(bitPattern: UInt64(bigEndian: k.loadUnaligned(as: UInt64.self)) ^ (1 << 63)))
                    rc = mdb_cursor_get(c, &key, &value, MDB_NEXT)
                }
                if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_cursor_get") }
                return ids
            }
        }
    }

    // MARK: Keys and records

    /// Runs `body` with `id` case-folded (ASCII, as `NOCASE`) into `buffer`, as an `MDB_val`.
    static func folded<R>(_ id: String, into buffer: UnsafeMutableRawPointer, _ body: (inout MDB_val) throws -> R)
        throws -> R
    {
        var id = id
        return try id.withUTF8 { bytes in
            guard bytes.count > 0, bytes.count <= 511 else {
                throw LocalStoreError(.invalidValue, "lmdb-c: an id must have 1 to 511 bytes")
            }
            for i in 0..<bytes.count {
                let b = bytes[i]
                buffer.storeBytes(of: b &- 65 < 26 ? b | 0x20 : b, toByteOffset: i, as: UInt8.self)
            }
            var key = MDB_val(mv_size: bytes.count, mv_data: buffer)
            return try body(&key)
        }
    }

    /// An order-preserving 8-byte key for an integer.
    static func intKey(_ v: Int64) -> UInt64 { (UInt64(bitPattern: v) ^ (1 << 63)).bigEndian }

    /// An order-preserving 8-byte key for a double.
    static func doubleKey(_ d: Double) -> UInt64 {
        let bits = d.bitPattern
        return (bits >> 63 == 1 ? ~bits : bits | (1 << 63)).bigEndian
    }

    /// The compound key (priority, updatedAt descending): the priority key, then the updatedAt key complemented.
    static func withCompoundKey<R>(_ priority: Int64, _ updatedAt: Double, _ body: (inout MDB_val) throws -> R) rethrows -> R {
        var k = (intKey(priority), ~doubleKey(updatedAt))
        return try withUnsafeMutableBytes(of: &k) { raw in
            var key = MDB_val(mv_size: 16, mv_data: raw.baseAddress)
            return try body(&key)
        }
    }

    static func withKey<R>(_ k: UInt64, _ body: (inout MDB_val) throws -> R) rethrows -> R {
        var k = k
        return try withUnsafeMutableBytes(of: &k) { raw in
            var key = MDB_val(mv_size: 8, mv_data: raw.baseAddress)
            return try body(&key)
        }
    }

    // Record layout: complete u8, deleted u8, priority i64, createdAt f64, updatedAt f64 (reference-date
    // seconds), then the byte counts of id, text and version (u32 each) and their UTF-8 bytes.
    static let header = 38

    static func priority(_ v: UnsafeRawPointer) -> Int64 { v.loadUnaligned(fromByteOffset: 2, as: Int64.self) }
    static func updatedAt(_ v: UnsafeRawPointer) -> Double { v.loadUnaligned(fromByteOffset: 18, as: Double.self) }
    static func length(_ v: UnsafeRawPointer, _ n: Int) -> Int {
        Int(v.loadUnaligned(fromByteOffset: 26 + 4 * n, as: UInt32.self))
    }

    static func string(_ p: UnsafeRawPointer, _ count: Int) -> String {
        String(decoding: UnsafeRawBufferPointer(start: p, count: count), as: UTF8.self)
    }

    static func decode(_ value: MDB_val) -> TodoRecord? {
        guard let v = value.mv_data.map(UnsafeRawPointer.init), value.mv_size >= header else { return nil }
        let idLength = length(v, 0)
        let textLength = length(v, 1)
        let versionLength = length(v, 2)
        guard header + idLength + textLength + versionLength <= value.mv_size else { return nil }
        return TodoRecord(
            id: string(v + header, idLength), text: string(v + header + idLength, textLength),
            complete: v.load(as: UInt8.self) != 0, priority: priority(v),
            createdAt: Date(timeIntervalSinceReferenceDate: v.loadUnaligned(fromByteOffset: 10, as: Double.self)),
            updatedAt: Date(timeIntervalSinceReferenceDate: updatedAt(v)),
            version: string(v + header + idLength + textLength, versionLength),
            deleted: v.load(fromByteOffset: 1, as: UInt8.self) != 0)
    }

    /// Inserts or replaces `r` and keeps both indexes in step.
    private func put(_ r: TodoRecord, _ txn: OpaquePointer) throws {
        try Self.folded(r.id, into: pkBuffer) { pk in
            var old = MDB_val()
            let found = mdb_get(txn, dbis.todo, &pk, &old)
            var newIndexEntries = true
            if found == MDB_SUCCESS, let v = old.mv_data {
                let oldPriority = Self.priority(v)
                let oldUpdatedAt = Self.updatedAt(v)
                newIndexEntries = false
                if oldPriority != r.priority {
                    try Self.withKey(Self.intKey(oldPriority)) { k in
                        try Self.check(mdb_del(txn, dbis.byPriority, &k, &pk), "mdb_del priority")
                    }
                    try Self.withKey(Self.intKey(r.priority)) { k in
                        try Self.check(mdb_put(txn, dbis.byPriority, &k, &pk, 0), "mdb_put priority")
                    }
                }
                if oldPriority != r.priority || oldUpdatedAt != r.updatedAt.timeIntervalSinceReferenceDate {
                    try Self.withCompoundKey(oldPriority, oldUpdatedAt) { k in
                        try Self.check(mdb_del(txn, dbis.byPriorityUpdatedAt, &k, &pk), "mdb_del priority_updatedAt")
                    }
                    try Self.withCompoundKey(r.priority, r.updatedAt.timeIntervalSinceReferenceDate) { k in
                        try Self.check(mdb_put(txn, dbis.byPriorityUpdatedAt, &k, &pk, 0), "mdb_put priority_updatedAt")
                    }
                }
                if oldUpdatedAt != r.updatedAt.timeIntervalSinceReferenceDate {
                    try Self.withKey(Self.doubleKey(oldUpdatedAt)) { k in
                        try Self.check(mdb_del(txn, dbis.byUpdatedAt, &k, &pk), "mdb_del updatedAt")
                    }
                    try Self.withKey(Self.doubleKey(r.updatedAt.timeIntervalSinceReferenceDate)) { k in
                        try Self.check(mdb_put(txn, dbis.byUpdatedAt, &k, &pk, 0), "mdb_put updatedAt")
                    }
                }
            } else if found != MDB_NOTFOUND {
                try Self.check(found, "mdb_get")
            }
            var id = r.id
            var text = r.text
            var version = r.version
            try id.withUTF8 { idBytes in
                try text.withUTF8 { textBytes in
                    try version.withUTF8 { versionBytes in
                        var value = MDB_val(
                            mv_size: Self.header + idBytes.count + textBytes.count + versionBytes.count, mv_data: nil)
                        try Self.check(mdb_put(txn, dbis.todo, &pk, &value, UInt32(MDB_RESERVE)), "mdb_put record")
                        guard let p = value.mv_data else { throw LocalStoreError(.ioError, "lmdb-c: no reserved space") }
                        p.storeBytes(of: r.complete ? 1 : 0, as: UInt8.self)
                        p.storeBytes(of: r.deleted ? 1 : 0, toByteOffset: 1, as: UInt8.self)
                        p.storeBytes(of: r.priority, toByteOffset: 2, as: Int64.self)
                        p.storeBytes(of: r.createdAt.timeIntervalSinceReferenceDate, toByteOffset: 10, as: Double.self)
                        p.storeBytes(of: r.updatedAt.timeIntervalSinceReferenceDate, toByteOffset: 18, as: Double.self)
                        p.storeBytes(of: UInt32(idBytes.count), toByteOffset: 26, as: UInt32.self)
                        p.storeBytes(of: UInt32(textBytes.count), toByteOffset: 30, as: UInt32.self)
                        p.storeBytes(of: UInt32(versionBytes.count), toByteOffset: 34, as: UInt32.self)
                        var at = Self.header
                        func append(_ bytes: UnsafeBufferPointer<UInt8>) {
                            if let base = bytes.baseAddress { (p + at).copyMemory(from: base, byteCount: bytes.count) }
                            at += bytes.count
                        }
                        append(idBytes)
                        append(textBytes)
                        append(versionBytes)
                    }
                }
            }
            if newIndexEntries {
                try Self.withKey(Self.intKey(r.priority)) { k in
                    try Self.check(mdb_put(txn, dbis.byPriority, &k, &pk, 0), "mdb_put priority")
                }
                try Self.withKey(Self.doubleKey(r.updatedAt.timeIntervalSinceReferenceDate)) { k in
                    try Self.check(mdb_put(txn, dbis.byUpdatedAt, &k, &pk, 0), "mdb_put updatedAt")
                }
                try Self.withCompoundKey(r.priority, r.updatedAt.timeIntervalSinceReferenceDate) { k in
                    try Self.check(mdb_put(txn, dbis.byPriorityUpdatedAt, &k, &pk, 0), "mdb_put priority_updatedAt")
                }
            }
        }
    }

    // MARK: BenchSubject

    public func setUp() throws {}

    public func upsert(_ page: [TodoRecord]) throws {
        try write { txn in for r in page { try put(r, txn) } }
    }

    public func read(id: String) throws -> Bool {
        try read { txn in try get(id, txn) != nil }
    }

    private func get(_ id: String, _ txn: OpaquePointer) throws -> TodoRecord? {
        try Self.folded(id, into: keyBuffer) { key in
            var value = MDB_val()
            let rc = mdb_get(txn, dbis.todo, &key, &value)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_get")
            return Self.decode(value)
        }
    }

    /// The first 50 rows of `priority` by updatedAt descending then id: the compound index's entries from
    /// the first key of `priority` on (equal keys hold the primary keys ascending: the id tie-break).
    public func queryIndexed(priority: Int64) throws -> Int {
        try read { txn in
            try cursor(txn, dbis.byPriorityUpdatedAt) { c in
                try Self.withCompoundKey(priority, .infinity) { key in
                    let wanted = Self.intKey(priority)
                    var pk = MDB_val()
                    var rows: [MDB_val] = []
                    rows.reserveCapacity(50)
                    var rc = mdb_cursor_get(c, &key, &pk, MDB_SET_RANGE)
                    while rc == MDB_SUCCESS, rows.count < 50 {
                        guard key.mv_size == 16, let k = key.mv_data, k.loadUnaligned(as: UInt64.self) == wanted else { break }
                        var value = MDB_val()
                        try Self.check(mdb_get(txn, dbis.todo, &pk, &value), "mdb_get (index entry)")
                        rows.append(value)
                        rc = mdb_cursor_get(c, &key, &pk, MDB_NEXT)
                    }
                    guard rc == MDB_SUCCESS || rc == MDB_NOTFOUND else { throw LocalStoreError(.ioError, "lmdb-c: cursor: \(rc)") }
                    return rows.compactMap(Self.decode).count
                }
            }
        }
    }

    public func queryScan(textContains needle: String) throws -> Int {
        let pattern = Array(needle.utf8)
        return try read { txn in
            try cursor(txn, dbis.todo) { c in
                var rows: [TodoRecord] = []
                var key = MDB_val()
                var value = MDB_val()
                var rc = mdb_cursor_get(c, &key, &value, MDB_FIRST)
                while rc == MDB_SUCCESS, rows.count < 50 {
                    if let v = value.mv_data, value.mv_size >= Self.header {
                        let text = UnsafeRawBufferPointer(
                            start: v + Self.header + Self.length(v, 0), count: Self.length(v, 1))
                        if Self.contains(text, pattern), let r = Self.decode(value) { rows.append(r) }
                    }
                    rc = mdb_cursor_get(c, &key, &value, MDB_NEXT)
                }
                return rows.count
            }
        }
    }

    /// Whether `haystack` contains the bytes of `needle`.
    private static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        guard haystack.count >= needle.count else { return false }
        var i = 0
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == first {
                var j = 1
                while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return true }
            }
            i += 1
        }
        return false
    }

    public func countComplete() throws -> Int {
        try read { txn in
            try cursor(txn, dbis.todo) { c in
                var n = 0
                var key = MDB_val()
                var value = MDB_val()
                var rc = mdb_cursor_get(c, &key, &value, MDB_FIRST)
                while rc == MDB_SUCCESS {
                    if let v = value.mv_data, v.load(as: UInt8.self) != 0 { n += 1 }
                    rc = mdb_cursor_get(c, &key, &value, MDB_NEXT)
                }
                return n
            }
        }
    }

    public func deleteWhere(priority: Int64) throws -> Int {
        try write { txn in
            try Self.withKey(Self.intKey(priority)) { key in
                let pks: [[UInt8]] = try cursor(txn, dbis.byPriority) { c in
                    var pks: [[UInt8]] = []
                    var pk = MDB_val()
                    var rc = mdb_cursor_get(c, &key, &pk, MDB_SET_KEY)
                    while rc == MDB_SUCCESS {
                        pks.append(Array(UnsafeRawBufferPointer(start: pk.mv_data, count: pk.mv_size)))
                        rc = mdb_cursor_get(c, &key, &pk, MDB_NEXT_DUP)
                    }
                    return pks
                }
                guard !pks.isEmpty else { return 0 }
                for var pkBytes in pks {
                    try pkBytes.withUnsafeMutableBytes { raw in
                        var pk = MDB_val(mv_size: raw.count, mv_data: raw.baseAddress)
                        var value = MDB_val()
                        try Self.check(mdb_get(txn, dbis.todo, &pk, &value), "mdb_get (index entry)")
                        guard let v = value.mv_data else { return }
                        try Self.withKey(Self.doubleKey(Self.updatedAt(v))) { k in
                            try Self.check(mdb_del(txn, dbis.byUpdatedAt, &k, &pk), "mdb_del updatedAt")
                        }
                        try Self.withCompoundKey(priority, Self.updatedAt(v)) { k in
                            try Self.check(mdb_del(txn, dbis.byPriorityUpdatedAt, &k, &pk), "mdb_del priority_updatedAt")
                        }
                        try Self.check(mdb_del(txn, dbis.todo, &pk, nil), "mdb_del record")
                    }
                }
                try Self.check(mdb_del(txn, dbis.byPriority, &key, nil), "mdb_del priority")
                return pks.count
            }
        }
    }

    private static let insertProperties = Array(#"{"type":"insert"}"#.utf8)

    public func localWrite(_ record: TodoRecord) throws {
        try write { txn in
            try put(record, txn)
            let last: Int64 = try cursor(txn, dbis.operations) { c in
                var key = MDB_val()
                var value = MDB_val()
                let rc = mdb_cursor_get(c, &key, &value, MDB_LAST)
                if rc == MDB_NOTFOUND { return 0 }
                try Self.check(rc, "mdb_cursor_get")
                guard let k = key.mv_data, key.mv_size == 8 else { return 0 }
                return Int64(bitPattern: UInt64(bigEndian: k.loadUnaligned(as: UInt64.self)) ^ (1 << 63))
            }
            // Ids are never given twice (LocalStore's guarantee, kept by its high-water mark): the next id
            // is one more than both the largest id and the largest ever given, which a config entry keeps.
            let id = try Self.withHighWaterKey { markKey -> Int64 in
                var value = MDB_val()
                let rc = mdb_get(txn, dbis.config, &markKey, &value)
                var mark: Int64 = 0
                if rc == MDB_SUCCESS, let v = value.mv_data, value.mv_size == 8 {
                    mark = v.loadUnaligned(as: Int64.self)
                } else if rc != MDB_NOTFOUND {
                    try Self.check(rc, "mdb_get high-water mark")
                }
                let next = max(last, mark) + 1
                var stored = next
                try withUnsafeMutableBytes(of: &stored) { bytes in
                    var newValue = MDB_val(mv_size: 8, mv_data: bytes.baseAddress)
                    try Self.check(mdb_put(txn, dbis.config, &markKey, &newValue, 0), "mdb_put high-water mark")
                }
                if rc == MDB_NOTFOUND { try putConfigIndex(Self.highWaterPair, rowKey: &markKey, txn) }
                return next
            }
            let op = TableOperation(
                id: id, table: "TodoItem", itemId: record.id, properties: Self.insertProperties)
            try Self.withKey(Self.intKey(op.id)) { key in
                try Self.putOperation(op, key: &key, txn, dbis.operations)
                try Self.withItemKey(op.table, op.itemId, into: keyBuffer) { itemKey in
                    try Self.check(mdb_put(txn, dbis.operationsByItem, &itemKey, &key, 0), "mdb_put operation index")
                }
            }
        }
    }

    /// The config key of the operation-id high-water mark (its value: the largest id ever given, Int64).
    private static let highWaterKey = Array("localstore|operationidhighwater".utf8)

    /// Runs `body` with the high-water mark's config key.
    // MARK: The config table's (table, key, keyType) index

    /// The index key of a config entry: `table`, a 0 byte, `key`, a 0 byte, `keyType` big-endian.
    static func configPair(table: some Sequence<UInt8>, key: some Sequence<UInt8>, keyType: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: table)
        out.append(0)
        out.append(contentsOf: key)
        out.append(0)
        withUnsafeBytes(of: UInt64(bitPattern: keyType).bigEndian) { out.append(contentsOf: $0) }
        return out
    }

    /// The index key of the operation-id high-water mark (its entry holds only the mark).
    static let highWaterPair = configPair(
        table: "".utf8, key: TableConfigEntry.operationIdHighWater("0").key.utf8, keyType: TableConfigEntry.localStoreKeyType)

    /// The index key of the stored entry `value` (the layout of ``deltaTokenRoundTrip(_:queryId:)``; an
    /// 8-byte value is the high-water mark).
    static func configPair(of value: MDB_val) throws -> [UInt8] {
        guard let v = value.mv_data.map(UnsafeRawPointer.init) else { throw LocalStoreError(.corrupt, "lmdb-c: an empty config entry") }
        if value.mv_size == 8 { return highWaterPair }
        guard value.mv_size >= 24 else { throw LocalStoreError(.corrupt, "lmdb-c: a config entry is damaged") }
        let lengths = (0..<4).map { Int(v.loadUnaligned(fromByteOffset: 8 + 4 * $0, as: UInt32.self)) }
        let tableStart = 24 + lengths[0]
        let keyStart = tableStart + lengths[1]
        guard keyStart + lengths[2] <= value.mv_size else { throw LocalStoreError(.corrupt, "lmdb-c: a config entry is damaged") }
        return configPair(
            table: UnsafeRawBufferPointer(start: v + tableStart, count: lengths[1]),
            key: UnsafeRawBufferPointer(start: v + keyStart, count: lengths[2]),
            keyType: v.loadUnaligned(as: Int64.self))
    }

    /// Adds the index entry `pair` → `rowKey`.
    func putConfigIndex(_ pair: [UInt8], rowKey: inout MDB_val, _ txn: OpaquePointer) throws {
        var pair = pair
        try pair.withUnsafeMutableBytes { p in
            var k = MDB_val(mv_size: p.count, mv_data: p.baseAddress)
            try Self.check(mdb_put(txn, dbis.configByPair, &k, &rowKey, 0), "mdb_put config index")
        }
    }

    /// Removes the index entry `pair` → `rowKey`.
    func deleteConfigIndex(_ pair: [UInt8], rowKey: inout MDB_val, _ txn: OpaquePointer) throws {
        var pair = pair
        try pair.withUnsafeMutableBytes { p in
            var k = MDB_val(mv_size: p.count, mv_data: p.baseAddress)
            let rc = mdb_del(txn, dbis.configByPair, &k, &rowKey)
            if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_del config index") }
        }
    }

    /// Before the entry under `rowKey` is written with the index key `pair`: its index entry added, or
    /// moved when the stored entry has another table, key or key type (left alone when they are the same,
    /// as LocalStore leaves an index entry whose columns an update did not change).
    func replaceConfigIndex(of rowKey: inout MDB_val, with pair: [UInt8], _ txn: OpaquePointer) throws {
        var value = MDB_val()
        let rc = mdb_get(txn, dbis.config, &rowKey, &value)
        if rc == MDB_NOTFOUND { return try putConfigIndex(pair, rowKey: &rowKey, txn) }
        try Self.check(rc, "mdb_get config")
        let old = try Self.configPair(of: value)
        if old != pair {
            try deleteConfigIndex(old, rowKey: &rowKey, txn)
            try putConfigIndex(pair, rowKey: &rowKey, txn)
        }
    }

    /// Deletes the config entry under `rowKey` and its index entry; `false` when there is none.
    @discardableResult
    func deleteConfigEntry(_ rowKey: inout MDB_val, _ txn: OpaquePointer) throws -> Bool {
        var value = MDB_val()
        let rc = mdb_get(txn, dbis.config, &rowKey, &value)
        if rc == MDB_NOTFOUND { return false }
        try Self.check(rc, "mdb_get config")
        try deleteConfigIndex(try Self.configPair(of: value), rowKey: &rowKey, txn)
        try Self.check(mdb_del(txn, dbis.config, &rowKey, nil), "mdb_del config")
        return true
    }

    static func withHighWaterKey<R>(_ body: (inout MDB_val) throws -> R) throws -> R {
        try highWaterKey.withUnsafeBytes { k in
            var key = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            return try body(&key)
        }
    }

    /// Runs `body` with the `(table, itemId)` key of an operation (`table`, a 0 byte, `itemId` case-folded as
    /// `NOCASE`) written into `buffer`.
    static func withItemKey<R>(
        _ table: String, _ itemId: String, into buffer: UnsafeMutableRawPointer, _ body: (inout MDB_val) throws -> R
    ) throws -> R {
        var table = table
        var itemId = itemId
        return try table.withUTF8 { t in
            try itemId.withUTF8 { i in
                guard t.count + 1 + i.count <= 511 else { throw LocalStoreError(.invalidValue, "lmdb-c: an operation key must have at most 511 bytes") }
                if let base = t.baseAddress { buffer.copyMemory(from: base, byteCount: t.count) }
                buffer.storeBytes(of: 0, toByteOffset: t.count, as: UInt8.self)
                for k in 0..<i.count {
                    let b = i[k]
                    buffer.storeBytes(of: b &- 65 < 26 ? b | 0x20 : b, toByteOffset: t.count + 1 + k, as: UInt8.self)
                }
                var key = MDB_val(mv_size: t.count + 1 + i.count, mv_data: buffer)
                return try body(&key)
            }
        }
    }

    // Operation layout: tableKind i64, then the byte counts of table, itemId and properties (u32 each) and the bytes.
    private static func putOperation(_ op: TableOperation, key: inout MDB_val, _ txn: OpaquePointer, _ dbi: MDB_dbi)
        throws
    {
        var table = op.table
        var itemId = op.itemId
        try table.withUTF8 { t in
            try itemId.withUTF8 { i in
                try op.properties.withUnsafeBytes { p in
                    var value = MDB_val(mv_size: 20 + t.count + i.count + p.count, mv_data: nil)
                    try check(mdb_put(txn, dbi, &key, &value, UInt32(MDB_APPEND | MDB_RESERVE)), "mdb_put operation")
                    guard let out = value.mv_data else { throw LocalStoreError(.ioError, "lmdb-c: no reserved space") }
                    out.storeBytes(of: Int64(op.tableKind), as: Int64.self)
                    out.storeBytes(of: UInt32(t.count), toByteOffset: 8, as: UInt32.self)
                    out.storeBytes(of: UInt32(i.count), toByteOffset: 12, as: UInt32.self)
                    out.storeBytes(of: UInt32(p.count), toByteOffset: 16, as: UInt32.self)
                    var at = 20
                    for bytes in [UnsafeRawBufferPointer(t), UnsafeRawBufferPointer(i), p] {
                        if let base = bytes.baseAddress, bytes.count > 0 {
                            (out + at).copyMemory(from: base, byteCount: bytes.count)
                        }
                        at += bytes.count
                    }
                }
            }
        }
    }

    private static func decodeOperation(id: Int64, _ value: MDB_val) -> TableOperation? {
        guard let v = value.mv_data.map(UnsafeRawPointer.init), value.mv_size >= 20 else { return nil }
        let t = Int(v.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        let i = Int(v.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        let p = Int(v.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        guard 20 + t + i + p <= value.mv_size else { return nil }
        return TableOperation(
            id: id, table: string(v + 20, t), tableKind: Int(v.loadUnaligned(as: Int64.self)),
            itemId: string(v + 20 + t, i), properties: Array(UnsafeRawBufferPointer(start: v + 20 + t + i, count: p)))
    }

    public func drainOne() throws -> Bool {
        try write { txn in
            try cursor(txn, dbis.operations) { c in
                var key = MDB_val()
                var value = MDB_val()
                let rc = mdb_cursor_get(c, &key, &value, MDB_FIRST)
                if rc == MDB_NOTFOUND { return false }
                try Self.check(rc, "mdb_cursor_get")
                guard let k = key.mv_data, key.mv_size == 8 else { throw LocalStoreError(.ioError, "lmdb-c: bad operation key") }
                let id = Int64(bitPattern: UInt64(bigEndian: k.loadUnaligned(as: UInt64.self)) ^ (1 << 63))
                // Decode the operation as a sync engine would before pushing it.
                guard let op = Self.decodeOperation(id: id, value) else {
                    throw LocalStoreError(.ioError, "lmdb-c: bad operation record")
                }
                try Self.withKey(Self.intKey(op.id)) { opKey in
                    try Self.withItemKey(op.table, op.itemId, into: keyBuffer) { itemKey in
                        try Self.check(mdb_del(txn, dbis.operationsByItem, &itemKey, &opKey), "mdb_del operation index")
                    }
                }
                try Self.check(mdb_cursor_del(c, 0), "mdb_cursor_del")
                try removeErrors(operationId: op.id, txn)
                return true
            }
        }
    }

    /// Deletes the errors recorded for operation `operationId` (found through the operationId index).
    func removeErrors(operationId: Int64, _ txn: OpaquePointer) throws {
        try Self.withKey(Self.intKey(operationId)) { key in
            var errorIds: [[UInt8]] = []
            try cursor(txn, dbis.errorsByOperation) { c in
                var id = MDB_val()
                var rc = mdb_cursor_get(c, &key, &id, MDB_SET_KEY)
                while rc == MDB_SUCCESS {
                    errorIds.append(Array(UnsafeRawBufferPointer(start: id.mv_data, count: id.mv_size)))
                    rc = mdb_cursor_get(c, &key, &id, MDB_NEXT_DUP)
                }
            }
            guard !errorIds.isEmpty else { return }
            for var e in errorIds {
                try e.withUnsafeMutableBytes { raw in
                    var id = MDB_val(mv_size: raw.count, mv_data: raw.baseAddress)
                    let rc = mdb_del(txn, dbis.errors, &id, nil)
                    if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_del error") }
                }
            }
            try Self.check(mdb_del(txn, dbis.errorsByOperation, &key, nil), "mdb_del error index")
        }
    }

    public func reopen(andRead id: String) throws -> Bool {
        closeEnvironment()
        try open()
        return try read(id: id)
    }

    // Config layout: keyType i64, then the byte counts of id, table, key and value (u32 each) and the bytes.
    public func deltaTokenRoundTrip(_ date: Date, queryId: String) throws -> Date? {
        let id = "deltaToken|TodoItem|\(queryId)"
        let fields = [id, "TodoItem", queryId, DeltaTokenFormat.string(from: date)].map { Array($0.utf8) }
        try write { txn in
            try Self.folded(id, into: keyBuffer) { key in
                try replaceConfigIndex(of: &key, with: Self.configPair(table: fields[1], key: fields[2], keyType: 0), txn)
                var value = MDB_val(mv_size: 24 + fields.reduce(0) { $0 + $1.count }, mv_data: nil)
                try Self.check(mdb_put(txn, dbis.config, &key, &value, UInt32(MDB_RESERVE)), "mdb_put config")
                guard let out = value.mv_data else { throw LocalStoreError(.ioError, "lmdb-c: no reserved space") }
                out.storeBytes(of: Int64(0), as: Int64.self)
                var at = 24
                for (n, f) in fields.enumerated() {
                    out.storeBytes(of: UInt32(f.count), toByteOffset: 8 + 4 * n, as: UInt32.self)
                    f.withUnsafeBytes { if let b = $0.baseAddress { (out + at).copyMemory(from: b, byteCount: f.count) } }
                    at += f.count
                }
            }
        }
        return try read { txn in
            try Self.folded(id, into: keyBuffer) { key in
                var value = MDB_val()
                let rc = mdb_get(txn, dbis.config, &key, &value)
                if rc == MDB_NOTFOUND { return nil }
                try Self.check(rc, "mdb_get config")
                guard let v = value.mv_data.map(UnsafeRawPointer.init), value.mv_size >= 24 else { return nil }
                let lengths = (0..<4).map { Int(v.loadUnaligned(fromByteOffset: 8 + 4 * $0, as: UInt32.self)) }
                let start = 24 + lengths[0] + lengths[1] + lengths[2]
                guard start + lengths[3] <= value.mv_size else { return nil }
                return DeltaTokenFormat.date(from: Self.string(v + start, lengths[3]))
            }
        }
    }

    public func close() throws { closeEnvironment() }
}
