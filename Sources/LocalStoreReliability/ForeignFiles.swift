import CLMDB
import CSQLite
import Foundation
import LocalStore

/// A plain SQLite file made with the system library (not a LocalStore store).
public enum SQLiteFile {
    /// Creates `path` and runs `sql` (several statements allowed) on it.
    public static func create(path: String, sql: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK else {
            sqlite3_close_v2(db)
            throw LocalStoreError(.internal, "cannot create \(path)")
        }
        defer { sqlite3_close_v2(db) }
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw LocalStoreError(.internal, "sqlite3_exec: \(String(cString: sqlite3_errmsg(db)))")
        }
    }
}

/// An LMDB environment made with liblmdb directly (not by LocalStoreLMDB).
public enum LMDBFile {
    /// An environment in `directory` holding one key in its main database.
    public static func createForeign(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var env: OpaquePointer?
        guard mdb_env_create(&env) == 0, let env else { throw LocalStoreError(.internal, "mdb_env_create") }
        defer { mdb_env_close(env) }
        guard mdb_env_open(env, directory, 0, 0o600) == 0 else { throw LocalStoreError(.internal, "mdb_env_open") }
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, 0, &txn) == 0 else { throw LocalStoreError(.internal, "mdb_txn_begin") }
        var dbi: MDB_dbi = 0
        mdb_dbi_open(txn, nil, 0, &dbi)
        var key = Array("someone-else".utf8)
        var value = Array("their data".utf8)
        let rc = key.withUnsafeMutableBytes { k in
            value.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                return mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
        guard rc == 0, mdb_txn_commit(txn) == 0 else { throw LocalStoreError(.internal, "mdb_put") }
    }
}
