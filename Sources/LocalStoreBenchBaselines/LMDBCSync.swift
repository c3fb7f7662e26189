import CLMDB
import Foundation
import LocalStore
import LocalStoreBench

// The sync workloads of the `lmdb-c` baseline (`BenchSyncSubject`): LocalStore's typed queue, pull and purge
// (OperationQueue.swift, PullAndPurge.swift) written directly against the LMDB C API — the same steps, in the
// same transactions, over the same databases and indexes as the `lmdb` backend takes them: the item's
// operations found through the operations' `(table, case-folded itemId)` index, an operation's errors through
// the errors' `operationId` index, the `properties` JSON LocalStore writes (compact, keys sorted), rows written
// with their three indexes kept in step. Unlike the backend it resolves no query, plans nothing, decodes a
// `properties` text in one pass (LocalStore's JSON decoder only for a text of another shape) and writes the JSON
// it needs by hand.

/// The databases of a table with the TodoItem layout (see ``LMDBCSubject``): records keyed by the case-folded
/// id, and the `priority`, `updatedAt` and (priority, updatedAt descending) indexes.
struct LMDBCTable {
    /// The table's name as defined (`TodoItem`, `TodoPulled`).
    var name: String
    var rows: MDB_dbi
    var byPriority: MDB_dbi
    var byUpdatedAt: MDB_dbi
    var byPriorityUpdatedAt: MDB_dbi
}

/// What ``LMDBCSubject/beginSending()`` sent: the operation as marked in flight, its table and item id, and
/// the item's row (`nil` for a delete, or when the row is gone).
struct LMDBCSending {
    var op: LMDBCOperation
    var table: String
    var itemId: String
    var row: TodoRecord?
}

/// One operation of the queue as stored (the layout of ``LMDBCSubject``'s operations database: tableKind i64,
/// the byte counts of table, itemId and properties (u32 each), then the bytes), its `properties` read into the
/// members the queue uses.
struct LMDBCOperation {
    var id: Int64
    /// The stored value; its head (up to the properties) is written back unchanged when the operation is.
    var record: [UInt8]
    var tableCount: Int
    var headCount: Int
    var kind: OperationKind
    var version: Int64
    /// `"state":1`.
    var isInFlight: Bool
    /// The JSON text of `item` (a delete's snapshot of the row); `nil` when absent or null.
    var item: ArraySlice<UInt8>?
    /// The JSON text of `sent` (LocalStore's `SentOperationRecord`); `nil` when absent.
    var sent: ArraySlice<UInt8>?

    /// In flight, or sent and never completed: nothing collapses into it.
    var mayBeOnServer: Bool { isInFlight || sent != nil }

    var table: String { String(decoding: record[20..<(20 + tableCount)], as: UTF8.self) }
    var itemId: String { String(decoding: record[(20 + tableCount)..<headCount], as: UTF8.self) }

    /// A new operation (version 1, not in flight) of `itemId` of `table`; its id is given when it is appended.
    init(table: String, itemId: String, kind: OperationKind, item: [UInt8]?) {
        var head = [UInt8](repeating: 0, count: 20)
        head.reserveCapacity(20 + table.utf8.count + itemId.utf8.count)
        head.append(contentsOf: table.utf8)
        let t = head.count - 20
        head.append(contentsOf: itemId.utf8)
        let i = head.count - 20 - t
        head.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(t), toByteOffset: 8, as: UInt32.self)
            raw.storeBytes(of: UInt32(i), toByteOffset: 12, as: UInt32.self)
        }
        id = 0
        record = head
        tableCount = t
        headCount = head.count
        self.kind = kind
        version = 1
        isInFlight = false
        self.item = item.map { ArraySlice($0) }
        sent = nil
    }

    /// Reads operation `id` from its stored value. `properties` of the shape the queue writes are read in one
    /// pass; any other text goes through LocalStore's decoder (`QueuedOperation`), which reports a damaged one
    /// as `corrupt`.
    init(id: Int64, _ value: MDB_val) throws {
        guard let v = value.mv_data.map(UnsafeRawPointer.init), value.mv_size >= 20 else {
            throw LocalStoreError(.corrupt, "lmdb-c: operation #\(id) is damaged")
        }
        let t = Int(v.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        let i = Int(v.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        let p = Int(v.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        guard 20 + t + i + p <= value.mv_size else { throw LocalStoreError(.corrupt, "lmdb-c: operation #\(id) is damaged") }
        let bytes = Array(UnsafeRawBufferPointer(start: v, count: 20 + t + i + p))
        let head = 20 + t + i
        self.id = id
        record = bytes
        tableCount = t
        headCount = head
        if let m = LMDBCPropertiesScan(bytes, head..<bytes.count) {
            kind = m.kind
            version = m.version
            isInFlight = m.isInFlight
            item = m.item.map { bytes[$0] }
            sent = m.sent.map { bytes[$0] }
        } else {
            let op = try QueuedOperation(
                TableOperation(
                    id: id, table: String(decoding: bytes[20..<(20 + t)], as: UTF8.self),
                    tableKind: Int(v.loadUnaligned(as: Int64.self)), itemId: String(decoding: bytes[(20 + t)..<head], as: UTF8.self),
                    properties: Array(bytes[head...])))
            guard op.extraProperties.keys.allSatisfy({ $0 == "sent" }) else {
                throw LocalStoreError(
                    .unsupported, "lmdb-c: operation #\(id) has properties members the baseline does not keep on a rewrite")
            }
            kind = op.kind
            version = op.version
            isInFlight = op.isInFlight
            item = op.item.map { ArraySlice(Array($0.jsonText.utf8)) }
            sent = op.extraProperties["sent"].map { ArraySlice(Array($0.jsonText.utf8)) }
        }
    }

    /// `properties` as LocalStore writes them (`QueuedOperation.properties`: compact, keys sorted):
    /// `{"item":…,"sent":…,"state":1,"type":K,"version":V}`, absent members left out.
    var properties: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(48 + (item?.count ?? 0) + (sent?.count ?? 0))
        out.append(UInt8(ascii: "{"))
        if let item {
            LMDBCJSON.raw(#""item":"#, &out)
            out.append(contentsOf: item)
            out.append(UInt8(ascii: ","))
        }
        if let sent {
            LMDBCJSON.raw(#""sent":"#, &out)
            out.append(contentsOf: sent)
            out.append(UInt8(ascii: ","))
        }
        if isInFlight { LMDBCJSON.raw(#""state":1,"#, &out) }
        LMDBCJSON.raw(#""type":"#, &out)
        LMDBCJSON.int(kind.rawValue, &out)
        LMDBCJSON.raw(#","version":"#, &out)
        LMDBCJSON.int(version, &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}

/// The members of an operation's `properties` text the queue reads, found in one pass: `nil` when the text is
/// not an object of only `type` (an integer), `version`, `state` (integers), `item` and `sent`, which is the
/// shape the queue writes.
struct LMDBCPropertiesScan {
    var kind: OperationKind
    var version: Int64 = 1
    var isInFlight = false
    var item: Range<Int>?
    var sent: Range<Int>?

    init?(_ bytes: [UInt8], _ range: Range<Int>) {
        var c = LMDBCJSONCursor(b: bytes, i: range.lowerBound, end: range.upperBound)
        guard c.take(UInt8(ascii: "{")) else { return nil }
        var kind: OperationKind?
        if !c.take(UInt8(ascii: "}")) {
            repeat {
                guard let key = c.plainString(), c.take(UInt8(ascii: ":")) else { return nil }
                if c.isKey(key, "type") {
                    guard let n = c.integer(), let k = OperationKind(rawValue: n) else { return nil }
                    kind = k
                } else if c.isKey(key, "version") {
                    guard let n = c.integer() else { return nil }
                    version = n
                } else if c.isKey(key, "state") {
                    guard let n = c.integer() else { return nil }
                    isInFlight = n == 1
                } else if c.isKey(key, "item") {
                    guard let r = c.value() else { return nil }
                    item = c.isKey(r, "null") ? nil : r
                } else if c.isKey(key, "sent") {
                    guard let r = c.value() else { return nil }
                    sent = r
                } else {
                    return nil
                }
            } while c.take(UInt8(ascii: ","))
            guard c.take(UInt8(ascii: "}")) else { return nil }
        }
        c.skipSpace()
        guard c.i == c.end, let kind else { return nil }
        self.kind = kind
    }
}

/// A position in a JSON text.
struct LMDBCJSONCursor {
    let b: [UInt8]
    var i: Int
    let end: Int

    static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }

    mutating func skipSpace() { while i < end, Self.isSpace(b[i]) { i += 1 } }

    /// Consumes `c` (after white space) when it is next.
    mutating func take(_ c: UInt8) -> Bool {
        skipSpace()
        guard i < end, b[i] == c else { return false }
        i += 1
        return true
    }

    /// The content of a string without escapes (object keys); `nil` for anything else.
    mutating func plainString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = i
        while i < end {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return start..<(i - 1)
            }
            if c == UInt8(ascii: "\\") { return nil }
            i += 1
        }
        return nil
    }

    /// Whether the bytes of `r` are `s`.
    func isKey(_ r: Range<Int>, _ s: StaticString) -> Bool {
        guard r.count == s.utf8CodeUnitCount else { return false }
        var k = 0
        for j in r {
            guard b[j] == s.utf8Start[k] else { return false }
            k += 1
        }
        return true
    }

    /// An integer written without fraction or exponent that fits in Int64.
    mutating func integer() -> Int64? {
        skipSpace()
        var negative = false
        if i < end, b[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        let start = i
        var n: Int64 = 0
        while i < end, b[i] >= 0x30, b[i] <= 0x39 {
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = negative ? m.subtractingReportingOverflow(Int64(b[i] - 0x30)) : m.addingReportingOverflow(Int64(b[i] - 0x30))
            guard !o1, !o2 else { return nil }
            n = s
            i += 1
        }
        guard i > start else { return nil }
        if i < end, !(b[i] == UInt8(ascii: ",") || b[i] == UInt8(ascii: "}") || Self.isSpace(b[i])) { return nil }
        return n
    }

    /// Skips one value (string, object, array or literal); its range.
    mutating func value() -> Range<Int>? {
        skipSpace()
        guard i < end else { return nil }
        let start = i
        switch b[i] {
        case UInt8(ascii: "\""):
            guard skipString() else { return nil }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while i < end {
                let c = b[i]
                if c == UInt8(ascii: "\"") {
                    guard skipString() else { return nil }
                    continue
                }
                i += 1
                if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
                    depth += 1
                } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 { return start..<i }
                }
            }
            return nil
        default:
            while i < end, b[i] != UInt8(ascii: ","), b[i] != UInt8(ascii: "}"), b[i] != UInt8(ascii: "]"), !Self.isSpace(b[i]) {
                i += 1
            }
            guard i > start else { return nil }
        }
        return start..<i
    }

    /// Skips the string starting at the cursor (a quote).
    mutating func skipString() -> Bool {
        i += 1
        while i < end {
            let c = b[i]
            i += 1
            if c == UInt8(ascii: "\\") {
                i += 1
            } else if c == UInt8(ascii: "\"") {
                return true
            }
        }
        return false
    }
}

/// JSON text written by hand, as LocalStore's `JSON.write(into:)` writes it.
enum LMDBCJSON {
    static func raw(_ s: StaticString, _ out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    static func int(_ n: Int64, _ out: inout [UInt8]) { out.append(contentsOf: String(n).utf8) }

    /// A string, escaped as `JSON.writeString` escapes it.
    static func string(_ bytes: UnsafeRawBufferPointer, _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): raw(#"\""#, &out)
            case UInt8(ascii: "\\"): raw(#"\\"#, &out)
            case 0x0A: raw(#"\n"#, &out)
            case 0x0D: raw(#"\r"#, &out)
            case 0x09: raw(#"\t"#, &out)
            case 0..<0x20:
                let hex: StaticString = "0123456789abcdef"
                raw(#"\u00"#, &out)
                out.append(hex.utf8Start[Int(byte >> 4)])
                out.append(hex.utf8Start[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func string(_ s: String, _ out: inout [UInt8]) {
        var s = s
        s.withUTF8 { string(UnsafeRawBufferPointer($0), &out) }
    }

    /// A date as `ItemJSON` writes one: a `yyyy-MM-ddTHH:mm:ss.SSSZ` string.
    static func date(_ referenceSeconds: Double, _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: DeltaTokenFormat.string(from: Date(timeIntervalSinceReferenceDate: referenceSeconds)).utf8)
        out.append(UInt8(ascii: "\""))
    }
}

extension LMDBCSubject: BenchSyncSubject {
    // MARK: Tables

    /// TodoItem's databases.
    var todoTable: LMDBCTable {
        LMDBCTable(
            name: "TodoItem", rows: dbis.todo, byPriority: dbis.byPriority, byUpdatedAt: dbis.byUpdatedAt,
            byPriorityUpdatedAt: dbis.byPriorityUpdatedAt)
    }

    /// The databases of `table` (named case-insensitively, as LocalStore matches table names): TodoItem's, or
    /// TodoPulled's (their handles, open in the environment since ``setUpSync()``, looked up by name).
    func tableDatabases(_ table: String, _ txn: OpaquePointer) throws -> LMDBCTable {
        if Self.isNamed(table, "todoitem") { return todoTable }
        guard Self.isNamed(table, "todopulled") else { throw LocalStoreError.unknownTable(table) }
        func db(_ name: String, _ flags: Int32) throws -> MDB_dbi {
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, name, UInt32(flags), &dbi)
            if rc == MDB_NOTFOUND { throw LocalStoreError.unknownTable("TodoPulled") }
            try Self.check(rc, "mdb_dbi_open (TodoPulled; after a reopen, setUpSync() opens its databases again)")
            return dbi
        }
        return LMDBCTable(
            name: "TodoPulled", rows: try db("TodoPulled", 0), byPriority: try db("TodoPulled.priority", MDB_DUPSORT),
            byUpdatedAt: try db("TodoPulled.updatedAt", MDB_DUPSORT),
            byPriorityUpdatedAt: try db("TodoPulled.priority_updatedAt_desc", MDB_DUPSORT))
    }

    /// Whether `name` is `lower` ignoring ASCII case.
    static func isNamed(_ name: String, _ lower: StaticString) -> Bool {
        guard name.utf8.count == lower.utf8CodeUnitCount else { return false }
        var k = 0
        for b in name.utf8 {
            guard (b &- 65 < 26 ? b | 0x20 : b) == lower.utf8Start[k] else { return false }
            k += 1
        }
        return true
    }

    /// Creates TodoPulled: the TodoItem layout, its own four databases. The environment is opened again first:
    /// ``LMDBCSubject``'s has room for 10 named databases and uses 9, and LMDB fixes that number before an
    /// environment opens; this one has room for 16 (as the `lmdb` backend's environment has room for the
    /// databases of its tables).
    public func setUpSync() throws {
        try write { txn in
            for (name, flags) in [("TodoPulled", 0), ("TodoPulled.priority", MDB_DUPSORT), ("TodoPulled.updatedAt", MDB_DUPSORT),
                ("TodoPulled.priority_updatedAt_desc", MDB_DUPSORT)]
            {
                var dbi: MDB_dbi = 0
                try Self.check(mdb_dbi_open(txn, name, UInt32(MDB_CREATE | flags), &dbi), "mdb_dbi_open \(name)")
            }
        }
    }

    // MARK: Rows

    /// Inserts or replaces `r` in `t`, keeping its three indexes in step (``LMDBCSubject``'s `put` for any table
    /// of the layout); returns whether the row existed. With `mustBeNew`, an existing row is a `constraint` error
    /// and nothing is written.
    @discardableResult
    func putRow(_ r: TodoRecord, _ t: LMDBCTable, _ txn: OpaquePointer, mustBeNew: Bool = false) throws -> Bool {
        try Self.folded(r.id, into: pkBuffer) { pk in
            let newPriority = r.priority
            let newUpdatedAt = r.updatedAt.timeIntervalSinceReferenceDate
            var old = MDB_val()
            let found = mdb_get(txn, t.rows, &pk, &old)
            var existed = false
            if found == MDB_SUCCESS, let v = old.mv_data {
                guard !mustBeNew else {
                    throw LocalStoreError(.constraint, "\(t.name)/\(r.id): the item already exists", table: t.name, column: "id")
                }
                guard old.mv_size >= Self.header else { throw LocalStoreError(.corrupt, "lmdb-c: a record of \(t.name) is damaged") }
                existed = true
                let oldPriority = Self.priority(v)
                let oldUpdatedAt = Self.updatedAt(v)
                if oldPriority != newPriority {
                    try Self.withKey(Self.intKey(oldPriority)) { k in
                        try Self.check(mdb_del(txn, t.byPriority, &k, &pk), "mdb_del priority")
                    }
                    try Self.withKey(Self.intKey(newPriority)) { k in
                        try Self.check(mdb_put(txn, t.byPriority, &k, &pk, 0), "mdb_put priority")
                    }
                }
                if oldPriority != newPriority || oldUpdatedAt != newUpdatedAt {
                    try Self.withCompoundKey(oldPriority, oldUpdatedAt) { k in
                        try Self.check(mdb_del(txn, t.byPriorityUpdatedAt, &k, &pk), "mdb_del priority_updatedAt")
                    }
                    try Self.withCompoundKey(newPriority, newUpdatedAt) { k in
                        try Self.check(mdb_put(txn, t.byPriorityUpdatedAt, &k, &pk, 0), "mdb_put priority_updatedAt")
                    }
                }
                if oldUpdatedAt != newUpdatedAt {
                    try Self.withKey(Self.doubleKey(oldUpdatedAt)) { k in
                        try Self.check(mdb_del(txn, t.byUpdatedAt, &k, &pk), "mdb_del updatedAt")
                    }
                    try Self.withKey(Self.doubleKey(newUpdatedAt)) { k in
                        try Self.check(mdb_put(txn, t.byUpdatedAt, &k, &pk, 0), "mdb_put updatedAt")
                    }
                }
            } else if found != MDB_NOTFOUND {
                try Self.check(found, "mdb_get")
            }
            try Self.writeRecord(r, &pk, t.rows, txn)
            if !existed {
                try Self.withKey(Self.intKey(newPriority)) { k in
                    try Self.check(mdb_put(txn, t.byPriority, &k, &pk, 0), "mdb_put priority")
                }
                try Self.withKey(Self.doubleKey(newUpdatedAt)) { k in
                    try Self.check(mdb_put(txn, t.byUpdatedAt, &k, &pk, 0), "mdb_put updatedAt")
                }
                try Self.withCompoundKey(newPriority, newUpdatedAt) { k in
                    try Self.check(mdb_put(txn, t.byPriorityUpdatedAt, &k, &pk, 0), "mdb_put priority_updatedAt")
                }
            }
            return existed
        }
    }

    /// Writes the record of `r` under `pk` in `dbi`, straight into LMDB's page (``LMDBCSubject``'s layout).
    static func writeRecord(_ r: TodoRecord, _ pk: inout MDB_val, _ dbi: MDB_dbi, _ txn: OpaquePointer) throws {
        var id = r.id
        var text = r.text
        var version = r.version
        try id.withUTF8 { idBytes in
            try text.withUTF8 { textBytes in
                try version.withUTF8 { versionBytes in
                    var value = MDB_val(mv_size: header + idBytes.count + textBytes.count + versionBytes.count, mv_data: nil)
                    try check(mdb_put(txn, dbi, &pk, &value, UInt32(MDB_RESERVE)), "mdb_put record")
                    guard let p = value.mv_data else { throw LocalStoreError(.ioError, "lmdb-c: no reserved space") }
                    p.storeBytes(of: r.complete ? 1 : 0, as: UInt8.self)
                    p.storeBytes(of: r.deleted ? 1 : 0, toByteOffset: 1, as: UInt8.self)
                    p.storeBytes(of: r.priority, toByteOffset: 2, as: Int64.self)
                    p.storeBytes(of: r.createdAt.timeIntervalSinceReferenceDate, toByteOffset: 10, as: Double.self)
                    p.storeBytes(of: r.updatedAt.timeIntervalSinceReferenceDate, toByteOffset: 18, as: Double.self)
                    p.storeBytes(of: UInt32(idBytes.count), toByteOffset: 26, as: UInt32.self)
                    p.storeBytes(of: UInt32(textBytes.count), toByteOffset: 30, as: UInt32.self)
                    p.storeBytes(of: UInt32(versionBytes.count), toByteOffset: 34, as: UInt32.self)
                    var at = header
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
    }

    /// Deletes the row `id` of `t` and its three index entries, `snapshot` seeing the row first; returns
    /// whether there was one.
    @discardableResult
    func deleteRow(_ id: String, _ t: LMDBCTable, _ txn: OpaquePointer, snapshot: (MDB_val) throws -> Void = { _ in }) throws -> Bool {
        try Self.folded(id, into: pkBuffer) { pk in
            var value = MDB_val()
            let rc = mdb_get(txn, t.rows, &pk, &value)
            if rc == MDB_NOTFOUND { return false }
            try Self.check(rc, "mdb_get")
            guard let v = value.mv_data, value.mv_size >= Self.header else { throw LocalStoreError(.corrupt, "lmdb-c: a record of \(t.name) is damaged") }
            try snapshot(value)
            let priority = Self.priority(v)
            let updatedAt = Self.updatedAt(v)
            try Self.withKey(Self.intKey(priority)) { k in try Self.check(mdb_del(txn, t.byPriority, &k, &pk), "mdb_del priority") }
            try Self.withKey(Self.doubleKey(updatedAt)) { k in try Self.check(mdb_del(txn, t.byUpdatedAt, &k, &pk), "mdb_del updatedAt") }
            try Self.withCompoundKey(priority, updatedAt) { k in
                try Self.check(mdb_del(txn, t.byPriorityUpdatedAt, &k, &pk), "mdb_del priority_updatedAt")
            }
            try Self.check(mdb_del(txn, t.rows, &pk, nil), "mdb_del record")
            return true
        }
    }

    /// The row `id` of `t`, decoded.
    func row(_ id: String, _ t: LMDBCTable, _ txn: OpaquePointer) throws -> TodoRecord? {
        try Self.folded(id, into: pkBuffer) { pk in
            var value = MDB_val()
            let rc = mdb_get(txn, t.rows, &pk, &value)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_get")
            guard let r = Self.decode(value) else { throw LocalStoreError(.corrupt, "lmdb-c: a record of \(t.name) is damaged") }
            return r
        }
    }

    /// Appends the row `value` as `ItemJSON.object` writes the item LocalStore reads (keys sorted by their
    /// UTF-8 bytes, dates as `yyyy-MM-ddTHH:mm:ss.SSSZ` strings); `id` replaces the stored id.
    static func appendRowJSON(_ value: MDB_val, id: String?, into out: inout [UInt8]) throws {
        guard let v = value.mv_data.map(UnsafeRawPointer.init), value.mv_size >= header else {
            throw LocalStoreError(.corrupt, "lmdb-c: a record is damaged")
        }
        let idLength = length(v, 0)
        let textLength = length(v, 1)
        let versionLength = length(v, 2)
        guard header + idLength + textLength + versionLength <= value.mv_size else {
            throw LocalStoreError(.corrupt, "lmdb-c: a record is damaged")
        }
        out.reserveCapacity(out.count + 150 + idLength + textLength + versionLength)
        LMDBCJSON.raw(#"{"complete":"#, &out)
        LMDBCJSON.raw(v.load(as: UInt8.self) != 0 ? "true" : "false", &out)
        LMDBCJSON.raw(#","createdAt":"#, &out)
        LMDBCJSON.date(v.loadUnaligned(fromByteOffset: 10, as: Double.self), &out)
        LMDBCJSON.raw(#","deleted":"#, &out)
        LMDBCJSON.raw(v.load(fromByteOffset: 1, as: UInt8.self) != 0 ? "true" : "false", &out)
        LMDBCJSON.raw(#","id":"#, &out)
        if let id {
            LMDBCJSON.string(id, &out)
        } else {
            LMDBCJSON.string(UnsafeRawBufferPointer(start: v + header, count: idLength), &out)
        }
        LMDBCJSON.raw(#","priority":"#, &out)
        LMDBCJSON.int(priority(v), &out)
        LMDBCJSON.raw(#","text":"#, &out)
        LMDBCJSON.string(UnsafeRawBufferPointer(start: v + header + idLength, count: textLength), &out)
        LMDBCJSON.raw(#","updatedAt":"#, &out)
        LMDBCJSON.date(updatedAt(v), &out)
        LMDBCJSON.raw(#","version":"#, &out)
        LMDBCJSON.string(UnsafeRawBufferPointer(start: v + header + idLength + textLength, count: versionLength), &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Deletes the rows of `t` with `priority` and their index entries (walking the priority index); returns
    /// how many.
    func deleteRows(priority: Int64, _ t: LMDBCTable, _ txn: OpaquePointer) throws -> Int {
        // The primary keys, copied (one buffer) before anything is deleted.
        var keys: [UInt8] = []
        var ends: [Int] = []
        try Self.withKey(Self.intKey(priority)) { key in
            try cursor(txn, t.byPriority) { c in
                var k = key
                var pk = MDB_val()
                var rc = mdb_cursor_get(c, &k, &pk, MDB_SET_KEY)
                while rc == MDB_SUCCESS {
                    keys.append(contentsOf: UnsafeRawBufferPointer(start: pk.mv_data, count: pk.mv_size))
                    ends.append(keys.count)
                    rc = mdb_cursor_get(c, &k, &pk, MDB_NEXT_DUP)
                }
                if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_cursor_get") }
            }
        }
        guard !ends.isEmpty else { return 0 }
        try keys.withUnsafeMutableBytes { all in
            var start = 0
            for end in ends {
                var pk = MDB_val(mv_size: end - start, mv_data: all.baseAddress.map { $0 + start })
                start = end
                var value = MDB_val()
                try Self.check(mdb_get(txn, t.rows, &pk, &value), "mdb_get (index entry)")
                guard let v = value.mv_data, value.mv_size >= Self.header else { throw LocalStoreError(.corrupt, "lmdb-c: a record of \(t.name) is damaged") }
                let updatedAt = Self.updatedAt(v)
                try Self.withKey(Self.doubleKey(updatedAt)) { k in try Self.check(mdb_del(txn, t.byUpdatedAt, &k, &pk), "mdb_del updatedAt") }
                try Self.withCompoundKey(priority, updatedAt) { k in
                    try Self.check(mdb_del(txn, t.byPriorityUpdatedAt, &k, &pk), "mdb_del priority_updatedAt")
                }
                try Self.check(mdb_del(txn, t.rows, &pk, nil), "mdb_del record")
            }
        }
        try Self.withKey(Self.intKey(priority)) { key in try Self.check(mdb_del(txn, t.byPriority, &key, nil), "mdb_del priority") }
        return ends.count
    }

    // MARK: Operations

    /// The operation id of an 8-byte key of the operations database.
    static func operationId(_ key: MDB_val) throws -> Int64 {
        guard let k = key.mv_data, key.mv_size == 8 else { throw LocalStoreError(.corrupt, "lmdb-c: an operation key is not 8 bytes") }
        return Int64(bitPattern: UInt64(bigEndian: k.loadUnaligned(as: UInt64.self)) ^ (1 << 63))
    }

    /// The operation `id`, read.
    func operation(_ id: Int64, _ txn: OpaquePointer) throws -> LMDBCOperation? {
        try Self.withKey(Self.intKey(id)) { key in
            var value = MDB_val()
            let rc = mdb_get(txn, dbis.operations, &key, &value)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_get operation")
            return try LMDBCOperation(id: id, value)
        }
    }

    /// The newest operation of the item whose `(table, itemId)` index key is `itemKey`: the last of the key's
    /// entries (they hold the operation keys, in id order).
    func newestOperation(_ itemKey: MDB_val, _ txn: OpaquePointer) throws -> LMDBCOperation? {
        let id: Int64? = try cursor(txn, dbis.operationsByItem) { c in
            var key = itemKey
            var data = MDB_val()
            var rc = mdb_cursor_get(c, &key, &data, MDB_SET)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_cursor_get operation index")
            rc = mdb_cursor_get(c, &key, &data, MDB_LAST_DUP)
            try Self.check(rc, "mdb_cursor_get operation index")
            return try Self.operationId(data)
        }
        guard let id else { return nil }
        guard let op = try operation(id, txn) else {
            throw LocalStoreError(.corrupt, "lmdb-c: the operation index names operation #\(id), which is not there")
        }
        return op
    }

    /// Writes `op` under its id: a rewrite, or (`appending`) a new last operation.
    func storeOperation(_ op: LMDBCOperation, _ txn: OpaquePointer, appending: Bool) throws {
        let properties = op.properties
        try Self.withKey(Self.intKey(op.id)) { key in
            var value = MDB_val(mv_size: op.headCount + properties.count, mv_data: nil)
            let flags = appending ? MDB_RESERVE | MDB_APPEND : MDB_RESERVE
            try Self.check(mdb_put(txn, dbis.operations, &key, &value, UInt32(flags)), "mdb_put operation")
            guard let out = value.mv_data else { throw LocalStoreError(.ioError, "lmdb-c: no reserved space") }
            op.record.withUnsafeBytes { if let base = $0.baseAddress { out.copyMemory(from: base, byteCount: op.headCount) } }
            out.storeBytes(of: UInt32(properties.count), toByteOffset: 16, as: UInt32.self)
            properties.withUnsafeBytes { if let base = $0.baseAddress { (out + op.headCount).copyMemory(from: base, byteCount: properties.count) } }
        }
    }

    /// The next operation id, recorded as the high-water mark: one more than both the largest id and the largest
    /// ever given (as `localWrite` and LocalStore's `appendOperationRecord` take it).
    func nextOperationId(_ txn: OpaquePointer) throws -> Int64 {
        let last: Int64 = try cursor(txn, dbis.operations) { c in
            var key = MDB_val()
            var value = MDB_val()
            let rc = mdb_cursor_get(c, &key, &value, MDB_LAST)
            if rc == MDB_NOTFOUND { return 0 }
            try Self.check(rc, "mdb_cursor_get")
            return try Self.operationId(key)
        }
        return try Self.withHighWaterKey { markKey -> Int64 in
            var value = MDB_val()
            let rc = mdb_get(txn, dbis.config, &markKey, &value)
            var mark: Int64 = 0
            if rc == MDB_SUCCESS, let v = value.mv_data, value.mv_size == 8 {
                mark = v.loadUnaligned(as: Int64.self)
            } else if rc != MDB_NOTFOUND {
                try Self.check(rc, "mdb_get high-water mark")
            }
            let base = max(last, mark)
            guard base < Int64.max else { throw LocalStoreError(.full, "lmdb-c: the operation ids are exhausted") }
            var next = base + 1
            try withUnsafeMutableBytes(of: &next) { bytes in
                var newValue = MDB_val(mv_size: 8, mv_data: bytes.baseAddress)
                try Self.check(mdb_put(txn, dbis.config, &markKey, &newValue, 0), "mdb_put high-water mark")
            }
            if rc == MDB_NOTFOUND { try putConfigIndex(Self.highWaterPair, rowKey: &markKey, txn) }
            return base + 1
        }
    }

    /// Appends `op` under the next id, with its `(table, itemId)` index entry.
    func appendOperation(_ op: inout LMDBCOperation, itemKey: inout MDB_val, _ txn: OpaquePointer) throws {
        op.id = try nextOperationId(txn)
        try storeOperation(op, txn, appending: true)
        try Self.withKey(Self.intKey(op.id)) { key in
            try Self.check(mdb_put(txn, dbis.operationsByItem, &itemKey, &key, 0), "mdb_put operation index")
        }
    }

    /// Deletes operation `id`, its `(table, itemId)` index entry and its errors.
    func removeOperation(_ id: Int64, itemKey: inout MDB_val, _ txn: OpaquePointer) throws {
        try Self.withKey(Self.intKey(id)) { key in
            try Self.check(mdb_del(txn, dbis.operations, &key, nil), "mdb_del operation")
            try Self.check(mdb_del(txn, dbis.operationsByItem, &itemKey, &key), "mdb_del operation index")
        }
        try removeErrors(operationId: id, txn)
    }

    /// LocalStore's `enqueue` in `txn`, for TodoItem: the collapse rule against the item's newest operation,
    /// the row written or deleted, the operation appended, rewritten (its errors removed) or removed.
    func enqueueChange(_ edit: BenchEdit, _ record: TodoRecord, _ txn: OpaquePointer) throws -> BenchEnqueueOutcome {
        let table = todoTable
        guard !record.id.isEmpty else {
            throw LocalStoreError(.invalidValue, "the id of an item of \(table.name) must not be empty", table: table.name, column: "id")
        }
        let kind: OperationKind
        switch edit {
        case .insert: kind = .insert
        case .update: kind = .update
        case .delete: kind = .delete
        }
        return try Self.withItemKey(table.name, record.id, into: keyBuffer) { itemKey in
            let existing = try newestOperation(itemKey, txn)
            let rule = CollapseRule.decide(existing: existing?.kind, inFlight: existing?.mayBeOnServer ?? false, new: kind)
            if rule == .notSupported, let existing {
                throw LocalStoreError(
                    .constraint,
                    "\(table.name)/\(record.id): a \(kind) is not allowed while a\(existing.kind == .insert ? "n" : "") \(existing.kind) operation (#\(existing.id)) is queued for the item",
                    table: table.name)
            }
            // The row.
            var snapshot: [UInt8]? = nil
            switch edit {
            case .insert:
                try putRow(record, table, txn, mustBeNew: true)
            case .update:
                try putRow(record, table, txn)
            case .delete:
                // The operation keeps the row as it was (its id as given), `{"id":…}` when there is none.
                var json: [UInt8] = []
                let found = try deleteRow(record.id, table, txn) { value in try Self.appendRowJSON(value, id: record.id, into: &json) }
                if !found {
                    LMDBCJSON.raw(#"{"id":"#, &json)
                    LMDBCJSON.string(record.id, &json)
                    json.append(UInt8(ascii: "}"))
                }
                snapshot = json
            }
            // The queue.
            switch (rule, existing) {
            case (.keep, var op?):
                op.version += 1
                try storeOperation(op, txn, appending: false)
                try removeErrors(operationId: op.id, txn)
                return .kept
            case (.toDelete, var op?):
                op.kind = .delete
                op.item = snapshot.map { ArraySlice($0) }
                op.version += 1
                try storeOperation(op, txn, appending: false)
                try removeErrors(operationId: op.id, txn)
                return .changedToDelete
            case (.remove, let op?):
                try removeOperation(op.id, itemKey: &itemKey, txn)
                return .removed
            default:
                var op = LMDBCOperation(table: table.name, itemId: record.id, kind: kind, item: snapshot)
                try appendOperation(&op, itemKey: &itemKey, txn)
                return .added
            }
        }
    }

    // MARK: BenchSyncSubject

    public func seedQueue(_ records: [TodoRecord]) throws {
        try write { txn in
            for r in records { _ = try enqueueChange(.insert, r, txn) }
        }
    }

    public func enqueue(_ edit: BenchEdit, _ record: TodoRecord) throws -> BenchEnqueueOutcome {
        try write { txn in try enqueueChange(edit, record, txn) }
    }

    /// LocalStore's `beginSending` then `complete(op, serverItem:)`, in their two transactions.
    public func pushOne(serverVersion: String) throws -> String? {
        guard let sending = try beginSending() else { return nil }
        try complete(sending, serverVersion: serverVersion)
        return sending.itemId
    }

    /// LocalStore's `beginSending`, in one transaction: the head operation and its item's row; the operation
    /// rewritten in flight with its `sent` record. `nil` when the queue is empty.
    func beginSending() throws -> LMDBCSending? {
        try write { txn in
            let head: LMDBCOperation? = try cursor(txn, dbis.operations) { c in
                var key = MDB_val()
                var value = MDB_val()
                let rc = mdb_cursor_get(c, &key, &value, MDB_FIRST)
                if rc == MDB_NOTFOUND { return nil }
                try Self.check(rc, "mdb_cursor_get")
                return try LMDBCOperation(id: Self.operationId(key), value)
            }
            guard var op = head else { return nil }
            let table = op.table
            let itemId = op.itemId
            var row: TodoRecord? = nil
            // `{"item":…,"kind":K,"version":V}`; no item for a delete or a row that is gone.
            var sent: [UInt8] = []
            sent.append(UInt8(ascii: "{"))
            if op.kind != .delete {
                let t = try tableDatabases(table, txn)
                try Self.folded(itemId, into: pkBuffer) { pk in
                    var value = MDB_val()
                    let rc = mdb_get(txn, t.rows, &pk, &value)
                    if rc == MDB_NOTFOUND { return }
                    try Self.check(rc, "mdb_get")
                    guard let r = Self.decode(value) else { throw LocalStoreError(.corrupt, "lmdb-c: a record of \(t.name) is damaged") }
                    row = r
                    LMDBCJSON.raw(#""item":"#, &sent)
                    try Self.appendRowJSON(value, id: nil, into: &sent)
                    sent.append(UInt8(ascii: ","))
                }
            }
            LMDBCJSON.raw(#""kind":"#, &sent)
            LMDBCJSON.int(op.kind.rawValue, &sent)
            LMDBCJSON.raw(#","version":"#, &sent)
            LMDBCJSON.int(op.version, &sent)
            sent.append(UInt8(ascii: "}"))
            op.isInFlight = true
            op.sent = ArraySlice(sent)
            try storeOperation(op, txn, appending: false)
            try trackMayBeOnServer(op.id, txn)
            return LMDBCSending(op: op, table: table, itemId: itemId, row: row)
        }
    }

    /// LocalStore's `complete(op, serverItem:)` with the server's answer to `sending` (its item with `version`
    /// = `serverVersion`), in one transaction: the operation and its errors removed when it still has the
    /// version sent; the server's item stored when no other change of the item is queued.
    func complete(_ sending: LMDBCSending, serverVersion: String) throws {
        try write { txn in
            guard var current = try operation(sending.op.id, txn) else { return }  // LocalStore: `.missing`
            let unchanged = current.version == sending.op.version && current.kind == sending.op.kind
            var absorbed = false
            try Self.withItemKey(sending.table, sending.itemId, into: keyBuffer) { itemKey in
                if unchanged { try removeOperation(current.id, itemKey: &itemKey, txn) }
                guard var server = sending.row else { return }  // a delete, or no row to send
                server.version = serverVersion
                let t = try tableDatabases(sending.table, txn)
                var entry = MDB_val()
                let rc = mdb_get(txn, dbis.operationsByItem, &itemKey, &entry)
                if rc == MDB_NOTFOUND {
                    try putRow(server, t, txn)
                } else {
                    try Self.check(rc, "mdb_get operation index")
                    try absorbSystemColumns(of: server, t, itemKey: itemKey, txn)
                    absorbed = true
                }
            }
            if unchanged {
                try untrackMayBeOnServer(current.id, txn)
                return
            }
            // It changed while it was pushed: it stays, no longer in flight (an insert the server now has
            // becomes an update).
            if absorbed, let reread = try operation(current.id, txn) { current = reread }
            var rewrite = current.mayBeOnServer
            current.isInFlight = false
            current.sent = nil
            if rewrite { try untrackMayBeOnServer(current.id, txn) }
            if sending.op.kind == .insert && current.kind == .insert {
                current.kind = .update
                current.version += 1
                rewrite = true
            }
            if rewrite { try storeOperation(current, txn, appending: false) }
        }
    }

    /// LocalStore's `absorbSystemColumns`: another change of the item is queued, so only the server's
    /// `createdAt`, `updatedAt`, `version` and `deleted` reach its row and the items of its queued deletes.
    func absorbSystemColumns(of server: TodoRecord, _ t: LMDBCTable, itemKey: MDB_val, _ txn: OpaquePointer) throws {
        if var r = try row(server.id, t, txn) {
            r.createdAt = server.createdAt
            r.updatedAt = server.updatedAt
            r.version = server.version
            r.deleted = server.deleted
            try putRow(r, t, txn)
        }
        var ids: [Int64] = []
        try cursor(txn, dbis.operationsByItem) { c in
            var key = itemKey
            var data = MDB_val()
            var rc = mdb_cursor_get(c, &key, &data, MDB_SET_KEY)
            while rc == MDB_SUCCESS {
                ids.append(try Self.operationId(data))
                rc = mdb_cursor_get(c, &key, &data, MDB_NEXT_DUP)
            }
            if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_cursor_get operation index") }
        }
        let system: [(String, JSON)] = [
            ("createdAt", .string(DeltaTokenFormat.string(from: server.createdAt))),
            ("updatedAt", .string(DeltaTokenFormat.string(from: server.updatedAt))), ("version", .string(server.version)),
            ("deleted", .bool(server.deleted)),
        ]
        for id in ids {
            guard var op = try operation(id, txn), op.kind == .delete, let item = op.item,
                case .object(var members) = try JSON(parsing: Array(item))
            else { continue }
            for (column, value) in system {
                for key in members.keys where key.utf8.count == column.utf8.count && key.lowercased() == column.lowercased() {
                    members.removeValue(forKey: key)
                }
                members[column] = value
            }
            op.item = ArraySlice(Array(JSON.object(members).jsonText.utf8))
            try storeOperation(op, txn, appending: false)
        }
    }

    public func applyPulledPage(_ records: [TodoRecord], into table: String, queryId: String) throws -> BenchPulledPage {
        try DeltaTokenKey.validate(table: table, queryId: queryId)
        return try write { txn in
            let t = try tableDatabases(table, txn)
            var deletes: [Int] = []
            var upserts: [Int] = []
            var skipped = 0
            var maxDate: Date? = nil
            for (n, r) in records.enumerated() {
                guard !r.id.isEmpty else {
                    throw LocalStoreError(.missingId, "pulled item \(n) of \(t.name) has no id", table: t.name, column: "id")
                }
                maxDate = max(maxDate ?? r.updatedAt, r.updatedAt)
                // A queued operation of the item: one lookup of the (table, itemId) index.
                let pending = try Self.withItemKey(t.name, r.id, into: keyBuffer) { itemKey in
                    var entry = MDB_val()
                    let rc = mdb_get(txn, dbis.operationsByItem, &itemKey, &entry)
                    if rc == MDB_NOTFOUND { return false }
                    try Self.check(rc, "mdb_get operation index")
                    return true
                }
                if pending {
                    skipped += 1
                } else if r.deleted {
                    deletes.append(n)
                } else {
                    upserts.append(n)
                }
            }
            // As LocalStore: the deletes (counted whether or not the row was there), then the upserts.
            for n in deletes { try deleteRow(records[n].id, t, txn) }
            for n in upserts { try putRow(records[n], t, txn) }
            if let maxDate {
                let id = Self.deltaTokenId(t.name, queryId)
                let token = try deltaToken(id, txn)
                if token.map({ $0 < maxDate }) ?? true { try storeDeltaToken(id, table: t.name, queryId: queryId, maxDate, txn) }
            }
            return BenchPulledPage(upserted: upserts.count, deleted: deletes.count, skipped: skipped)
        }
    }

    public func purge(_ table: String, priority: Int64, queryId: String) throws -> Int {
        try DeltaTokenKey.validate(table: table, queryId: queryId)
        return try write { txn in
            let t = try tableDatabases(table, txn)
            // Any queued operation of the table: the first (table, itemId) index key at or after `table` + 0.
            let pending = try Self.withItemKey(t.name, "", into: keyBuffer) { prefix in
                try cursor(txn, dbis.operationsByItem) { c in
                    var key = prefix
                    var data = MDB_val()
                    let rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE)
                    if rc == MDB_NOTFOUND { return false }
                    try Self.check(rc, "mdb_cursor_get operation index")
                    guard key.mv_size >= prefix.mv_size, let k = key.mv_data, let p = prefix.mv_data else { return false }
                    return memcmp(k, p, prefix.mv_size) == 0
                }
            }
            guard !pending else {
                throw LocalStoreError(.constraint, "\(t.name) cannot be purged because it has pending operations", table: t.name)
            }
            let n = try deleteRows(priority: priority, t, txn)
            try Self.folded(Self.deltaTokenId(t.name, queryId), into: keyBuffer) { key in
                _ = try deleteConfigEntry(&key, txn)
            }
            return n
        }
    }

    // MARK: Delta tokens

    /// The config key of the token of `(table, queryId)` (case-folded when used, as `deltaTokenRoundTrip`'s).
    static func deltaTokenId(_ table: String, _ queryId: String) -> String { "deltaToken|\(table)|\(queryId)" }

    /// The token stored under `id` (the layout of `deltaTokenRoundTrip`: keyType i64, the byte counts of id,
    /// table, key and value (u32 each), then the bytes).
    func deltaToken(_ id: String, _ txn: OpaquePointer) throws -> Date? {
        try Self.folded(id, into: keyBuffer) { key in
            var value = MDB_val()
            let rc = mdb_get(txn, dbis.config, &key, &value)
            if rc == MDB_NOTFOUND { return nil }
            try Self.check(rc, "mdb_get config")
            guard let v = value.mv_data.map(UnsafeRawPointer.init), value.mv_size >= 24 else {
                throw LocalStoreError(.corrupt, "lmdb-c: the delta token \(id) is damaged")
            }
            var start = 24
            for n in 0..<3 { start += Int(v.loadUnaligned(fromByteOffset: 8 + 4 * n, as: UInt32.self)) }
            let count = Int(v.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
            guard start + count <= value.mv_size, let date = DeltaTokenFormat.date(from: Self.string(v + start, count)) else {
                throw LocalStoreError(.corrupt, "lmdb-c: the delta token \(id) is damaged")
            }
            return date
        }
    }

    /// Stores the token of `(table, queryId)` under `id`, as `deltaTokenRoundTrip` does.
    func storeDeltaToken(_ id: String, table: String, queryId: String, _ date: Date, _ txn: OpaquePointer) throws {
        try storeConfigEntry(id, table: table, key: queryId, keyType: TableConfigEntry.deltaTokenKeyType, value: DeltaTokenFormat.string(from: date), txn)
    }

    /// Stores a config entry under its case-folded id: keyType i64, then the byte counts of id, table, key and
    /// value (u32 each) and the bytes (the layout of `deltaTokenRoundTrip`).
    func storeConfigEntry(_ id: String, table: String, key: String, keyType: Int64, value: String, _ txn: OpaquePointer) throws {
        let size = 24 + id.utf8.count + table.utf8.count + key.utf8.count + value.utf8.count
        try Self.folded(id, into: keyBuffer) { k in
            try replaceConfigIndex(of: &k, with: Self.configPair(table: table.utf8, key: key.utf8, keyType: keyType), txn)
            var v = MDB_val(mv_size: size, mv_data: nil)
            try Self.check(mdb_put(txn, dbis.config, &k, &v, UInt32(MDB_RESERVE)), "mdb_put config")
            guard let out = v.mv_data else { throw LocalStoreError(.ioError, "lmdb-c: no reserved space") }
            out.storeBytes(of: keyType, as: Int64.self)
            var at = 24
            func append(_ field: String, _ n: Int) {
                var field = field
                field.withUTF8 { bytes in
                    out.storeBytes(of: UInt32(bytes.count), toByteOffset: 8 + 4 * n, as: UInt32.self)
                    if let base = bytes.baseAddress { (out + at).copyMemory(from: base, byteCount: bytes.count) }
                    at += bytes.count
                }
            }
            append(id, 0)
            append(table, 1)
            append(key, 2)
            append(value, 3)
        }
    }

    // MARK: Operations that may be on the server

    // LocalStore's SentTracking.swift: one config entry per operation a push marked (in flight, or with a
    // `sent` record), so that releasing marks and recovering lost answers read only those operations.

    /// LocalStore's `trackMayBeOnServer`: the tracking entry of operation `id`; the first mark of a store (no
    /// marker entry) first writes one for every marked operation, the whole queue read once, then the marker.
    func trackMayBeOnServer(_ id: Int64, _ txn: OpaquePointer) throws {
        let tracking = try Self.folded("localstore|sentTracking", into: keyBuffer) { key in
            var value = MDB_val()
            let rc = mdb_get(txn, dbis.config, &key, &value)
            if rc == MDB_NOTFOUND { return false }
            try Self.check(rc, "mdb_get config")
            return true
        }
        if !tracking {
            let marked: [Int64] = try cursor(txn, dbis.operations) { c in
                var ids: [Int64] = []
                var key = MDB_val()
                var value = MDB_val()
                var rc = mdb_cursor_get(c, &key, &value, MDB_FIRST)
                while rc == MDB_SUCCESS {
                    let op = try LMDBCOperation(id: Self.operationId(key), value)
                    if op.mayBeOnServer { ids.append(op.id) }
                    rc = mdb_cursor_get(c, &key, &value, MDB_NEXT)
                }
                if rc != MDB_NOTFOUND { try Self.check(rc, "mdb_cursor_get") }
                return ids
            }
            for m in marked { try storeTrackingEntry(m, txn) }
            try storeConfigEntry(
                "localstore|sentTracking", table: "", key: "sentTracking", keyType: TableConfigEntry.localStoreKeyType, value: "1", txn)
        }
        try storeTrackingEntry(id, txn)
    }

    /// The tracking entry of operation `id` (`localstore|sent|<id>`, key `sentOperation`, the id as value).
    func storeTrackingEntry(_ id: Int64, _ txn: OpaquePointer) throws {
        let value = String(id)
        try storeConfigEntry(
            "localstore|sent|" + value, table: "", key: "sentOperation", keyType: TableConfigEntry.localStoreKeyType, value: value, txn)
    }

    /// LocalStore's `untrackMayBeOnServer`: removes the tracking entry of operation `id`.
    func untrackMayBeOnServer(_ id: Int64, _ txn: OpaquePointer) throws {
        try Self.folded("localstore|sent|" + String(id), into: keyBuffer) { key in
            _ = try deleteConfigEntry(&key, txn)
        }
    }
}
