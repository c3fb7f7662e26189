import CLMDB
import Foundation
import LocalStore
import LocalStoreLMDB

/// Fuzzes LocalStoreLMDB's record decoder (and, less often, its catalog decoder) through the public
/// API: damaged records are written straight into the table's LMDB database with liblmdb, then read
/// back through `LMDBStore` (lookups by id and full scans). The valid records damaged are of both
/// versions (docs/lmdb.md, "Record format"): version 2 from a new store, version 1 from a store of format 1. Every read must return a row of the
/// schema's types or throw a `LocalStoreError`; unmodified records must decode to their original
/// rows. Each damaged record read is one execution.
public final class RecordFuzzer {
    public struct Stats: Sendable, CustomStringConvertible {
        public var executions = 0
        public var decoded = 0
        public var refused: [String: Int] = [:]
        public var catalogExecutions = 0
        public var catalogRefused: [String: Int] = [:]
        /// One message per unexpected code (anything but `corrupt`), for the report.
        public var examples: [String: String] = [:]
        public var disagreements: [String] = []

        public var description: String {
            "\(executions) damaged-record reads (\(decoded) decoded to rows of the schema's types, refused: "
                + refused.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                + "), \(catalogExecutions) damaged catalog opens (refused: "
                + catalogRefused.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                + "), \(disagreements.count) failures"
                + (examples.isEmpty ? "" : "; examples: " + examples.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; "))
        }
    }

    let path: String
    var rng: SplitMix
    let seed: UInt64
    var validRecords: [[UInt8]] = []
    var validRows: [Item] = []
    var catalogEntry: [UInt8] = []
    public private(set) var stats = Stats()
    static let table = FuzzGenerator.table
    static let tableDatabase = "t:f"
    static let catalogKey = Array("table:f".utf8)

    /// Prepares a store in `directory` with valid rows of every type and keeps their raw records.
    public init(directory: String, seed: UInt64) throws {
        path = directory + "/records.lmdb"
        rng = SplitMix(seed: seed)
        self.seed = seed
        let store = try LMDBStore(path: path)
        try store.defineTable(FuzzGenerator.schema)
        var g = FuzzGenerator(seed: seed ^ 0xDEC0DE)
        var rows: [Item] = []
        for n in 0..<80 {
            var row = g.row(n)
            row["id"] = .string("k\(n)")
            rows.append(Item(row))
        }
        try store.upsert(rows, into: Self.table)
        try store.close()
        var entry: [UInt8] = []
        try Self.withEnvironment(path) { txn in
            entry = Self.get(txn, try Self.open(txn, "meta"), Self.catalogKey) ?? []
            return false
        }
        // The same rows as records of version 1, written by a store of format 1 (as a store created before
        // format 3 writes them): made by lowering a new store's format number before its table is defined.
        let oldPath = directory + "/records-v1.lmdb"
        try LMDBStore(path: oldPath).close()
        try Self.withEnvironment(oldPath) { txn in
            try Self.put(txn, try Self.open(txn, "meta"), Array("format".utf8), Array("LSLMDB".utf8) + [0, 0, 0, 0, 0, 0, 0, 1])
            return true
        }
        let oldStore = try LMDBStore(path: oldPath)
        try oldStore.defineTable(FuzzGenerator.schema)
        try oldStore.upsert(rows, into: Self.table)
        try oldStore.close()
        // Records of both versions; `validRows[k]` is the row of `validRecords[k]`.
        validRecords = try Self.records(path, count: rows.count) + Self.records(oldPath, count: rows.count)
        validRows = rows + rows
        guard validRecords[0].first == 2, validRecords[rows.count].first == 1 else {
            throw LocalStoreError(.internal, "the stores did not write records of versions 2 and 1: the fuzzer's format rule is out of date")
        }
        catalogEntry = entry
        guard !entry.isEmpty else { throw LocalStoreError(.internal, "no catalog entry 'table:f' in the meta database") }
    }

    /// The raw records `k0` … `k<count - 1>` of the fuzzed table in the environment at `path`.
    static func records(_ path: String, count: Int) throws -> [[UInt8]] {
        var records: [[UInt8]] = []
        try withEnvironment(path) { txn in
            let dbi = try open(txn, tableDatabase)
            for n in 0..<count {
                guard let record = get(txn, dbi, key("k\(n)")) else {
                    throw LocalStoreError(.internal, "the id key of k\(n) is not lowercase + 00 00: the fuzzer's key rule is out of date")
                }
                records.append(record)
            }
            return false
        }
        return records
    }

    private func failure(_ text: String) {
        if stats.disagreements.count < 20 { stats.disagreements.append("seed \(seed): \(text)") }
    }

    // MARK: liblmdb

    /// The key of a string id without NUL bytes: its ASCII-lower-cased bytes, then 00 00.
    static func key(_ id: String) -> [UInt8] { Array(id.lowercased().utf8) + [0, 0] }

    static func withEnvironment(_ path: String, _ body: (OpaquePointer) throws -> Bool) throws {
        var env: OpaquePointer?
        guard mdb_env_create(&env) == 0, let env else { throw LocalStoreError(.internal, "mdb_env_create") }
        defer { mdb_env_close(env) }
        mdb_env_set_maxdbs(env, 64)
        var rc = mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600)
        guard rc == 0 else { throw LocalStoreError(.internal, "mdb_env_open: \(String(cString: mdb_strerror(rc)))") }
        var txn: OpaquePointer?
        rc = mdb_txn_begin(env, nil, 0, &txn)
        guard rc == 0, let txn else { throw LocalStoreError(.internal, "mdb_txn_begin: \(String(cString: mdb_strerror(rc)))") }
        do {
            if try body(txn) {
                rc = mdb_txn_commit(txn)
                guard rc == 0 else { throw LocalStoreError(.internal, "mdb_txn_commit: \(String(cString: mdb_strerror(rc)))") }
            } else {
                mdb_txn_abort(txn)
            }
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }

    static func open(_ txn: OpaquePointer, _ name: String) throws -> MDB_dbi {
        var dbi: MDB_dbi = 0
        let rc = mdb_dbi_open(txn, name, 0, &dbi)
        guard rc == 0 else { throw LocalStoreError(.internal, "mdb_dbi_open \(name): \(String(cString: mdb_strerror(rc)))") }
        return dbi
    }

    static func get(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8]) -> [UInt8]? {
        var k = key
        return k.withUnsafeMutableBytes { kb -> [UInt8]? in
            var kv = MDB_val(mv_size: kb.count, mv_data: kb.baseAddress)
            var vv = MDB_val()
            guard mdb_get(txn, dbi, &kv, &vv) == 0 else { return nil }
            return Array(UnsafeRawBufferPointer(start: vv.mv_data, count: vv.mv_size))
        }
    }

    static func put(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        var k = key
        var v = value
        let rc = k.withUnsafeMutableBytes { kb in
            v.withUnsafeMutableBytes { vb in
                var kv = MDB_val(mv_size: kb.count, mv_data: kb.baseAddress)
                // An empty value needs a non-null pointer.
                var vv = MDB_val(mv_size: vb.count, mv_data: vb.baseAddress ?? UnsafeMutableRawPointer(kb.baseAddress!))
                return mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
        guard rc == 0 else { throw LocalStoreError(.internal, "mdb_put: \(String(cString: mdb_strerror(rc)))") }
    }

    // MARK: Mutations

    func damaged() -> (bytes: [UInt8], original: Int?) {
        let k = rng.below(validRecords.count)
        var r = validRecords[k]
        switch rng.below(10) {
        case 0:
            return (r, k)  // unmodified: must decode to the original row
        case 1:
            for _ in 0..<(1 + rng.below(4)) where !r.isEmpty { r[rng.below(r.count)] = UInt8(truncatingIfNeeded: rng.next()) }
        case 2:
            r = Array(r.prefix(rng.below(r.count + 1)))
        case 3:
            r += (0..<(1 + rng.below(16))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        case 4:
            r = (0..<rng.below(64)).map { _ in rng.oneIn(3) ? UInt8(rng.below(10)) : UInt8(truncatingIfNeeded: rng.next()) }
        case 5:
            let other = validRecords[rng.below(validRecords.count)]
            r = Array(r.prefix(rng.below(r.count + 1))) + Array(other.suffix(rng.below(other.count + 1)))
        case 6:
            let at = rng.below(r.count + 1)
            r.insert(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, rng.pick([0x01, 0x7F, 0x00])], at: at)
        case 7:
            // Deep json, version 1: version, row id, column count, id "x", 8 nulls, then nested arrays;
            // version 2: version, column count, the tags (string, 8 nulls, json), row id, "x", the arrays.
            let depth = rng.below(3000)
            let head: [UInt8] = rng.oneIn(2)
                ? [1, 0, 10, 5, 1, 0x78] + [UInt8](repeating: 0, count: 8) + [8]
                : [2, 10, 5] + [UInt8](repeating: 0, count: 8) + [8, 0, 1, 0x78]
            r = head + Array(repeating: [6, 1], count: depth).flatMap { $0 } + [0]
        case 8:
            if r.count > 2 {
                let a = rng.below(r.count - 1)
                let b = a + 1 + rng.below(r.count - a - 1)
                r.insert(contentsOf: r[a..<b], at: rng.below(r.count + 1))
            }
        default:
            // One bit.
            if !r.isEmpty { r[rng.below(r.count)] ^= UInt8(1 << rng.below(8)) }
        }
        return (r, r == validRecords[k] ? k : nil)
    }

    /// Whether `item` has exactly the schema's columns, each null or of its type.
    func conforms(_ item: Item) -> Bool {
        guard item.count == FuzzGenerator.schema.columns.count else { return false }
        for c in FuzzGenerator.schema.columns {
            guard let v = item[c.name] else { return false }
            if v.isNull { if c.name == "id" { return false } else { continue } }
            if !c.type.accepts(v) { return false }
            if case .double(let d) = v, !d.isFinite { return false }
        }
        return true
    }

    // MARK: Batches

    /// Writes `count` damaged records, then reads each back through a freshly opened store.
    public func recordBatch(_ count: Int) throws {
        var originals: [Int: Int] = [:]
        try Self.withEnvironment(path) { txn in
            let dbi = try Self.open(txn, Self.tableDatabase)
            guard mdb_drop(txn, dbi, 0) == 0 else { throw LocalStoreError(.internal, "mdb_drop") }
            for n in 0..<count {
                let (bytes, original) = damaged()
                if let original { originals[n] = original }
                try Self.put(txn, dbi, Self.key("k\(n)"), bytes)
            }
            return true
        }
        let store = try LMDBStore(path: path)
        defer { try? store.close() }
        for n in 0..<count {
            stats.executions += 1
            do {
                guard let item = try store.read(table: Self.table, id: .string("k\(n)")) else {
                    failure("record k\(n) was written but reads as missing")
                    continue
                }
                stats.decoded += 1
                if !conforms(item) { failure("record k\(n) decoded to a row that breaks the schema: \(item)") }
                if let k = originals[n] {
                    var expected = validRows[k]
                    expected["id"] = item["id"]  // the record's own id; the key is k<n>
                    if item != expected { failure("an undamaged record k\(n) decoded to \(item), not \(validRows[k])") }
                }
            } catch let e as LocalStoreError {
                stats.refused["\(e.code)", default: 0] += 1
                if e.code != .corrupt && stats.examples["record \(e.code)"] == nil { stats.examples["record \(e.code)"] = e.message }
                if originals[n] != nil { failure("an undamaged record k\(n) was refused: \(e)") }
            } catch {
                failure("record k\(n): a non-LocalStoreError \(error)")
            }
        }
        // A full scan meets the same records in key order.
        do {
            _ = try store.read(Query(Self.table, includeTotalCount: true))
        } catch is LocalStoreError {
        } catch {
            failure("full scan: a non-LocalStoreError \(error)")
        }
    }

    /// Damages the table's catalog entry `count` times, opening the store after each.
    public func catalogBatch(_ count: Int) throws {
        for _ in 0..<count {
            var entry = catalogEntry
            switch rng.below(4) {
            case 0: for _ in 0..<(1 + rng.below(3)) { entry[rng.below(entry.count)] = UInt8(truncatingIfNeeded: rng.next()) }
            case 1: entry = Array(entry.prefix(rng.below(entry.count)))
            case 2: entry += (0..<(1 + rng.below(8))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            default: entry[rng.below(entry.count)] ^= UInt8(1 << rng.below(8))
            }
            try Self.withEnvironment(path) { txn in
                try Self.put(txn, try Self.open(txn, "meta"), Self.catalogKey, entry)
                return true
            }
            stats.catalogExecutions += 1
            do {
                let store = try LMDBStore(path: path)
                _ = try? store.tableSchemas()
                _ = try? store.read(Query(Self.table, top: 3))
                try store.close()
                stats.catalogRefused["opened", default: 0] += 1
            } catch let e as LocalStoreError {
                stats.catalogRefused["\(e.code)", default: 0] += 1
                if e.code != .corrupt && stats.examples["catalog \(e.code)"] == nil { stats.examples["catalog \(e.code)"] = e.message }
            } catch {
                failure("damaged catalog entry: a non-LocalStoreError \(error)")
            }
        }
        // Restore the valid entry for the record batches.
        try Self.withEnvironment(path) { txn in
            try Self.put(txn, try Self.open(txn, "meta"), Self.catalogKey, catalogEntry)
            return true
        }
    }
}
