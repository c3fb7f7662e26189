import CLMDB
import CSQLite
import Foundation
import LocalStore
#if canImport(Glibc)
import Glibc
#endif

/// Integrity checks of a store's files: the store's own ``IntegrityChecking`` when it has one, and
/// checks that share no code with the backends (a separate SQLite connection running
/// `PRAGMA integrity_check`; a raw LMDB walk of every database).
public enum Integrity {
    /// The store's own check, or `nil` when the backend does not implement ``IntegrityChecking``.
    public static func storeCheck(_ store: any LocalStore) throws -> [String]? {
        guard let checking = store as? any IntegrityChecking else { return nil }
        return try checking.checkIntegrity()
    }

    /// The backend's independent check of the store at `path`: `PRAGMA integrity_check` for SQLite, a
    /// raw walk for LMDB (call it only when this process has no `LMDBStore` open on `path`), `nil`
    /// for SQLCipher (its pages cannot be read without the cipher; its own check covers it).
    public static func independentCheck(_ backend: ReliabilityBackend, path: String) -> [String]? {
        switch backend {
        case .sqlite: return sqliteIntegrityCheck(path: path)
        case .lmdb: return LMDBWalk.check(path: path)
        case .sqlcipher: return nil
        }
    }

    /// `PRAGMA integrity_check` on a fresh read-only connection of the system SQLite. On a location this
    /// process cannot write (where a WAL database cannot get its `-shm`), the connection uses the
    /// `immutable` URI parameter, after checking that no `-wal` holds transactions it would ignore.
    public static func sqliteIntegrityCheck(path: String) -> [String] {
        var db: OpaquePointer?
        let directory = (path as NSString).deletingLastPathComponent
        let unwritable = access(path, W_OK) != 0 || access(directory.isEmpty ? "." : directory, W_OK) != 0
        var name = path
        var flags = SQLITE_OPEN_READONLY
        if unwritable {
            if let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int, size > 0 {
                return ["cannot check '\(path)': its location is not writable and its -wal holds \(size) bytes"]
            }
            name = "file:" + path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
                .replacingOccurrences(of: "#", with: "%23") + "?immutable=1"
            flags |= SQLITE_OPEN_URI
        }
        let rc = sqlite3_open_v2(name, &db, flags, nil)
        defer { sqlite3_close_v2(db) }
        guard rc == SQLITE_OK, let db else { return ["cannot open '\(path)' read-only: code \(rc)"] }
        sqlite3_busy_timeout(db, 5000)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nil) == SQLITE_OK else {
            return ["integrity_check cannot run: \(String(cString: sqlite3_errmsg(db)))"]
        }
        defer { sqlite3_finalize(statement) }
        var lines: [String] = []
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_ROW {
                lines.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
            } else if step == SQLITE_DONE {
                break
            } else {
                return lines + ["integrity_check failed: \(String(cString: sqlite3_errmsg(db)))"]
            }
        }
        return lines == ["ok"] ? [] : lines
    }
}

/// A raw, read-only walk of a LocalStoreLMDB environment with liblmdb, sharing no code with the
/// backend: the data file is at least as long as the pages the meta page claims; every named
/// database is walked with a cursor (LMDB checks each page's type on the way), its keys strictly
/// increase and their number is the one `mdb_stat` records; every table has a catalog entry; every
/// index has exactly one entry per row of its table and each points at an existing row.
///
/// LMDB forbids opening an environment twice in one process: call this only when the process has no
/// `LMDBStore` open on the directory.
public enum LMDBWalk {
    public static func check(path: String) -> [String] {
        var problems: [String] = []
        func problem(_ s: String) { if problems.count < 30 { problems.append(s) } }
        var env: OpaquePointer?
        guard mdb_env_create(&env) == 0, let env else { return ["mdb_env_create failed"] }
        defer { mdb_env_close(env) }
        mdb_env_set_maxdbs(env, 4096)
        var rc = mdb_env_open(env, path, UInt32(MDB_RDONLY | MDB_NOTLS), 0o600)
        guard rc == 0 else { return ["mdb_env_open: \(String(cString: mdb_strerror(rc)))"] }

        // The file must hold every page up to the last one in use, or reading it faults (SIGBUS).
        var info = MDB_envinfo()
        var st = MDB_stat()
        mdb_env_info(env, &info)
        mdb_env_stat(env, &st)
        var fileStat = stat()
        if stat(path + "/data.mdb", &fileStat) == 0 {
            let needed = (Int(info.me_last_pgno) + 1) * Int(st.ms_psize)
            if Int(fileStat.st_size) < needed {
                return ["data.mdb has \(fileStat.st_size) bytes but its pages run to \(needed) (truncated)"]
            }
        }

        var txn: OpaquePointer?
        rc = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
        guard rc == 0, let txn else { return ["mdb_txn_begin: \(String(cString: mdb_strerror(rc)))"] }
        defer { mdb_txn_abort(txn) }

        /// Walks `dbi` and returns its (key, value) pairs, checking order and count.
        func walk(_ dbi: MDB_dbi, _ name: String) -> [([UInt8], [UInt8])]? {
            var cursor: OpaquePointer?
            var rc = mdb_cursor_open(txn, dbi, &cursor)
            guard rc == 0 else {
                problem("\(name): mdb_cursor_open: \(String(cString: mdb_strerror(rc)))")
                return nil
            }
            defer { mdb_cursor_close(cursor) }
            var pairs: [([UInt8], [UInt8])] = []
            var key = MDB_val()
            var value = MDB_val()
            rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            while rc == 0 {
                let k = Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
                let v = Array(UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size))
                if let last = pairs.last?.0, !last.lexicographicallyPrecedes(k) {
                    problem("\(name): keys out of order")
                }
                pairs.append((k, v))
                rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            if rc != MDB_NOTFOUND {
                problem("\(name): walk stopped: \(String(cString: mdb_strerror(rc)))")
                return nil
            }
            var stat = MDB_stat()
            if mdb_stat(txn, dbi, &stat) == 0, Int(stat.ms_entries) != pairs.count {
                problem("\(name): \(pairs.count) entries walked, \(stat.ms_entries) recorded")
            }
            return pairs
        }

        var main: MDB_dbi = 0
        rc = mdb_dbi_open(txn, nil, 0, &main)
        guard rc == 0, let names = walk(main, "main database") else {
            return problems + ["cannot open the main database: \(String(cString: mdb_strerror(rc)))"]
        }
        var databases: [String: [([UInt8], [UInt8])]] = [:]
        var handles: [String: MDB_dbi] = [:]
        for (rawName, _) in names {
            let name = String(decoding: rawName, as: UTF8.self)
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, name, 0, &dbi)
            guard rc == 0 else {
                problem("database '\(name)': \(String(cString: mdb_strerror(rc)))")
                continue
            }
            handles[name] = dbi
            if let pairs = walk(dbi, name) { databases[name] = pairs }
        }
        guard let meta = databases["meta"] else { return problems + ["no meta database"] }
        let metaKeys = Set(meta.map { String(decoding: $0.0, as: UTF8.self) })
        if !metaKeys.contains("format") { problem("meta has no format key") }
        for name in databases.keys where name.hasPrefix("t:") {
            let table = String(name.dropFirst(2))
            if !metaKeys.contains("table:" + table) { problem("database \(name) has no catalog entry") }
        }
        for (name, entries) in databases where name.hasPrefix("i:") {
            // i:<folded table>:<columns>
            let rest = name.dropFirst(2)
            guard let colon = rest.firstIndex(of: ":") else {
                problem("index database \(name) has no table part")
                continue
            }
            let tableDB = "t:" + rest[..<colon]
            guard let rows = databases[tableDB], let tableHandle = handles[tableDB] else {
                problem("index \(name) belongs to no table")
                continue
            }
            if entries.count != rows.count { problem("index \(name) has \(entries.count) entries, its table \(rows.count) rows") }
            let components = rest[rest.index(after: colon)...].split(separator: ",").count
            for (indexKey, value) in entries {
                // A bare entry (format 4: an empty value) names its row by the bytes after its components.
                guard let primaryKey = value.isEmpty ? Self.bareEntryPrimaryKey(indexKey, components: components) : value else {
                    problem("index \(name) has a bare entry whose key does not parse")
                    break
                }
                var k = primaryKey
                let found = k.withUnsafeMutableBytes { buffer -> Bool in
                    var key = MDB_val(mv_size: buffer.count, mv_data: buffer.baseAddress)
                    var value = MDB_val()
                    return mdb_get(txn, tableHandle, &key, &value) == 0
                }
                if !found {
                    problem("index \(name) points at a missing row")
                    break
                }
            }
        }
        return problems
    }

    /// The primary key a bare LMDB index entry names: the key's bytes after its `components` components,
    /// parsed here from the tags alone (docs/lmdb.md, "Keys"), independently of LocalStoreLMDB. A
    /// descending component is complemented, its tag included. `nil` when the key does not parse.
    static func bareEntryPrimaryKey(_ key: [UInt8], components: Int) -> [UInt8]? {
        var offset = 0
        for _ in 0..<components {
            guard offset < key.count else { return nil }
            let flip: UInt8 = key[offset] >= 0x80 ? 0xFF : 0
            var end: Int?
            switch key[offset] ^ flip {
            case 0x00, 0x60: end = offset + 1  // null, json
            case 0x10: end = offset + 2  // bool
            case 0x20, 0x30: end = offset + 9  // number, date
            case 0x40, 0x50:  // string, binary: escaped, ended by 00 01
                var i = offset + 1
                while i + 1 < key.count {
                    if key[i] ^ flip == 0 {
                        if key[i + 1] ^ flip == 0x01 {
                            end = i + 2
                            break
                        }
                        i += 2
                    } else {
                        i += 1
                    }
                }
            case 0x70:  // NOCASE: ended by 00 00, or 00 01 and 8 bytes of length
                var i = offset + 1
                while i + 1 < key.count {
                    if key[i] ^ flip == 0 {
                        end = key[i + 1] ^ flip == 0 ? i + 2 : i + 10
                        break
                    }
                    i += 1
                }
            default: return nil
            }
            guard let end, end <= key.count else { return nil }
            offset = end
        }
        return offset < key.count ? Array(key[offset...]) : nil
    }
}
