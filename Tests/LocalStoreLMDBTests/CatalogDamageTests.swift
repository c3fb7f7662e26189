import CLMDB
import Foundation
import LocalStore
import LocalStoreLMDB
import Testing

/// A damaged catalog entry is `corrupt`, whatever part of it is damaged (found by
/// `localstore-fuzz --catalog`: a damaged database name used to surface as `internal` MDB_NOTFOUND).
@Suite("LMDB damaged catalog entries")
struct CatalogDamageTests {
    /// Reads, changes and writes back the catalog entry of table `F` with liblmdb directly.
    static func damage(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var env: OpaquePointer?
        try #require(mdb_env_create(&env) == 0)
        defer { mdb_env_close(env) }
        try #require(mdb_env_set_maxdbs(env, 64) == 0)
        try #require(mdb_env_open(env, path, 0, 0o600) == 0)
        var txn: OpaquePointer?
        try #require(mdb_txn_begin(env, nil, 0, &txn) == 0)
        var dbi: MDB_dbi = 0
        try #require(mdb_dbi_open(txn, "meta", 0, &dbi) == 0)
        var key = Array("table:f".utf8)
        var entry: [UInt8] = []
        key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var dv = MDB_val()
            if mdb_get(txn, dbi, &kv, &dv) == 0 { entry = Array(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)) }
        }
        try #require(!entry.isEmpty, "no catalog entry for table F")
        change(&entry)
        let rc = key.withUnsafeMutableBytes { k in
            entry.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                return mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
        try #require(rc == 0)
        try #require(mdb_txn_commit(txn) == 0)
    }

    /// Replaces the first occurrence of `old` in `bytes` with `new` (same length).
    static func replace(_ old: String, with new: String, in bytes: inout [UInt8]) {
        let o = Array(old.utf8), n = Array(new.utf8)
        guard o.count == n.count, bytes.count >= o.count else { Issue.record("bad replacement"); return }
        for i in 0...(bytes.count - o.count) where Array(bytes[i..<(i + o.count)]) == o {
            bytes.replaceSubrange(i..<(i + o.count), with: n)
            return
        }
        Issue.record("'\(old)' is not in the catalog entry")
    }

    static let forms: [(String, @Sendable (inout [UInt8]) -> Void)] = [
        ("primary database renamed", { replace("t:f", with: "t:g", in: &$0) }),
        ("index database renamed", { replace("i:f:", with: "i:g:", in: &$0) }),
        ("truncated", { $0.removeLast(3) }),
        ("trailing byte", { $0.append(0) }),
        ("unknown version", { $0[0] = 0xEE }),
        ("entry describes another table", { replace("\u{1}F", with: "\u{1}G", in: &$0) }),
    ]

    @Test(arguments: 0..<forms.count)
    func damagedEntryIsCorrupt(_ form: Int) throws {
        let (name, change) = Self.forms[form]
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        try store.defineTable(TableSchema("F", ["n": .integer, "s": .string], indexed: ["n"]))
        try store.upsert([["id": "a", "n": 1, "s": "x"]], into: "F")
        try store.close()
        try Self.damage(dir.storePath, change)
        let code = errorCode {
            let s = try LMDBStore(path: dir.storePath)
            defer { try? s.close() }
            _ = try s.tableSchemas()
            var q = Query("F")
            q.predicate = try OData.parseFilter("n eq 1")
            _ = try s.read(q)
        }
        #expect(code == .corrupt, "\(name): got \(String(describing: code))")
    }
}
