import LocalStore
import LocalStoreSQLEngine

/// A bare SQLCipher connection for the few statements that run outside the engine: applying a key,
/// cipher settings, `ATTACH … KEY` + `sqlcipher_export`, probes. Every value is a bound parameter.
struct RawConnection {
    let api: SQLiteAPI
    let db: OpaquePointer

    /// Opens `path` (read-write, created when `create`).
    static func open(_ path: String, api: SQLiteAPI, create: Bool) throws -> RawConnection {
        var handle: OpaquePointer?
        let flags = SQLite.OPEN_READWRITE | (create ? SQLite.OPEN_CREATE : 0) | SQLite.OPEN_NOMUTEX
        let rc = api.open_v2(path, &handle, flags, nil)
        guard rc == SQLite.OK, let handle else {
            let message = handle.flatMap { api.errmsg($0) }.map { String(cString: $0) } ?? "cannot open"
            if let handle { _ = api.close_v2(handle) }
            throw SQLiteError.make(rc, message: message, context: "opening '\(path)'")
        }
        return RawConnection(api: api, db: handle)
    }

    func close() { _ = api.close_v2(db) }

    /// Runs `sql` (one statement) with `arguments` bound as text or blobs, discarding rows.
    func execute(_ sql: String, _ arguments: [Argument] = []) throws {
        _ = try rows(sql, arguments)
    }

    enum Argument {
        case text(String)
        case bytes(UnsafeRawBufferPointer)
    }

    /// Runs `sql` and returns the first column of every row as text (nil for NULL).
    @discardableResult
    func rows(_ sql: String, _ arguments: [Argument] = []) throws -> [String?] {
        var stmt: OpaquePointer?
        var rc = api.prepare_v2(db, sql, -1, &stmt, nil)
        guard rc == SQLite.OK, let stmt else { throw failure(rc, sql) }
        defer { _ = api.finalize(stmt) }
        for (n, a) in arguments.enumerated() {
            switch a {
            case .text(let s):
                rc = api.bind_text(stmt, Int32(n + 1), s, Int32(s.utf8.count), SQLite.TRANSIENT)
            case .bytes(let b):
                // SQLite copies the bytes (TRANSIENT); the copy is SQLite's and is freed by it.
                rc = api.bind_blob(stmt, Int32(n + 1), b.baseAddress, Int32(b.count), SQLite.TRANSIENT)
            }
            guard rc == SQLite.OK else { throw failure(rc, sql) }
        }
        var out: [String?] = []
        while true {
            rc = api.step(stmt)
            if rc == SQLite.DONE { return out }
            guard rc == SQLite.ROW else { throw failure(rc, sql) }
            if api.column_count(stmt) > 0, api.column_type(stmt, 0) != SQLite.NULL, let t = api.column_text(stmt, 0) {
                out.append(String(decoding: UnsafeBufferPointer(start: t, count: Int(api.column_bytes(stmt, 0))), as: UTF8.self))
            } else {
                out.append(nil)
            }
        }
    }

    func failure(_ rc: Int32, _ sql: String) -> LocalStoreError {
        let message = api.errmsg(db).map { String(cString: $0) } ?? "error \(rc)"
        // The statement text is ours (never key material: keys are always bound).
        return SQLiteError.make(api.extended_errcode(db) == 0 ? rc : api.extended_errcode(db), message: message, context: sql)
    }
}
