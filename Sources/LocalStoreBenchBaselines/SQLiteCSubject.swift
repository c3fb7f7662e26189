import CSQLite
import Foundation
import LocalStore
import LocalStoreBench
import LocalStoreSQLEngine
import LocalStoreSQLite

/// The `sqlite-c` baseline: the benchmark's workloads written directly against the SQLite C API — the
/// practical limit of the engine for what the `sqlite` backend does.
///
/// Same schema as the backend (the TodoItem table with a `NOCASE` text primary key and indexes on
/// `priority` and `updatedAt`; the three system tables, the operations table keyed by an integer
/// primary key), same configuration (WAL, `synchronous = NORMAL`, a 32 MiB page cache, `temp_store = MEMORY`), one connection, every statement
/// prepared once and kept, values bound straight from the record's fields (text without a copy), one
/// transaction per page, rows decoded into ``TodoRecord``s.
///
/// The C functions are called through a table of function pointers (`SQLiteAPI`), as the engine calls
/// them: the system `libsqlite3` for `sqlite-c`, SQLCipher loaded with `dlopen` for `sqlcipher-c`
/// (``init(directory:sqlcipherKey:)``: the same raw key, cipher page size and settings as the
/// `sqlcipher` backend's), so that each backend is measured against its own engine.
public final class SQLiteCSubject: BenchSubject {
    private let path: String
    let api: SQLiteAPI
    /// SQLCipher's key, as the `x'…'` raw-key text `api.key` takes; `nil` for plain SQLite.
    private let keyText: [UInt8]?
    var db: OpaquePointer?
    /// Whether the library has `INSERT … ON CONFLICT … DO UPDATE` (SQLite 3.24).
    var hasUpsertClause: Bool { api.libversion_number() >= 3_024_000 }
    private var statements: [Statement: OpaquePointer] = [:]

    /// The SQL the workloads run, prepared once per connection.
    enum Statement: CaseIterable {
        case begin, commit, rollback, upsert, readById, queryIndexed, queryScan, countComplete, deleteWhere
        case appendOperation, firstOperation, deleteOperation, deleteErrors, setConfig, updateConfigValue, readConfig
        // The sync workloads (SQLiteCSync.swift).
        case upsertPulled, readPulledById, rowExists, deleteRow, deletePulledRow, itemOperations, operationById
        case updateOperationProperties, countTableOperations, countPulledPriority, deletePulledPriority, deleteConfig, updateVersion
        // SQLite before 3.24 (SQLCipher 3.4.1's 3.15.2) has no `ON CONFLICT … DO UPDATE`: an upsert is the
        // engine's `INSERT OR IGNORE`, then an `UPDATE` of every column when it inserted nothing.
        case insertOrIgnore, updateRow, insertOrIgnorePulled, updatePulledRow, insertConfig, storeLocalStoreEntry

        var sql: String {
            switch self {
            case .begin: return "BEGIN IMMEDIATE"
            case .commit: return "COMMIT"
            case .rollback: return "ROLLBACK"
            case .upsert:
                return """
                    INSERT INTO "TodoItem" ("id", "text", "complete", "priority", "createdAt", "updatedAt", "version", \
                    "deleted") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT ("id") DO UPDATE SET \
                    "id" = excluded."id", "text" = excluded."text", "complete" = excluded."complete", \
                    "priority" = excluded."priority", "createdAt" = excluded."createdAt", \
                    "updatedAt" = excluded."updatedAt", "version" = excluded."version", "deleted" = excluded."deleted"
                    """
            case .readById: return "SELECT \(SQLiteCSubject.columns) FROM \"TodoItem\" WHERE \"id\" = ?1"
            case .queryIndexed:
                return """
                    SELECT \(SQLiteCSubject.columns) FROM "TodoItem" WHERE "priority" = ?1 \
                    ORDER BY "updatedAt" DESC, "id" LIMIT 50
                    """
            case .queryScan:
                return "SELECT \(SQLiteCSubject.columns) FROM \"TodoItem\" WHERE instr(\"text\", ?1) > 0 ORDER BY \"id\" LIMIT 50"
            case .countComplete: return "SELECT count(*) FROM \"TodoItem\" WHERE \"complete\" = 1"
            case .deleteWhere: return "DELETE FROM \"TodoItem\" WHERE \"priority\" = ?1"
            case .appendOperation:
                // A NULL integer primary key becomes the next operation id: with AUTOINCREMENT, one more than
                // both the largest id and the largest ever given (`sqlite_sequence`), so an id is never given
                // twice — the guarantee LocalStore's queue keeps with its high-water mark.
                return """
                    INSERT INTO "MS_TableOperations" ("id", "table", "tableKind", "itemId", "properties") \
                    VALUES (NULL, ?1, 0, ?2, ?3)
                    """
            case .firstOperation:
                return """
                    SELECT "id", "table", "tableKind", "itemId", "properties" FROM "MS_TableOperations" \
                    WHERE "id" > 0 ORDER BY "id" LIMIT 1
                    """
            case .deleteOperation: return "DELETE FROM \"MS_TableOperations\" WHERE \"id\" = ?1"
            case .deleteErrors: return "DELETE FROM \"MS_TableOperationErrors\" WHERE \"operationId\" = ?1"
            case .setConfig:
                return """
                    INSERT INTO "MS_TableConfig" ("id", "table", "key", "keyType", "value") VALUES (?1, ?2, ?3, 0, ?4) \
                    ON CONFLICT ("id") DO UPDATE SET "id" = excluded."id", "table" = excluded."table", \
                    "key" = excluded."key", "keyType" = excluded."keyType", "value" = excluded."value"
                    """
            // The sqlite backend's value-only token update (docs/sqlite.md): only `value` changes when the
            // row exists, so its indexes are not rewritten; the insert runs when no row changed.
            case .updateConfigValue: return "UPDATE \"MS_TableConfig\" SET \"value\" = ?2 WHERE \"id\" = ?1"
            case .readConfig: return "SELECT \"value\" FROM \"MS_TableConfig\" WHERE \"id\" = ?1"
            case .upsertPulled: return Statement.upsert.sql.replacingOccurrences(of: "\"TodoItem\"", with: "\"TodoPulled\"")
            case .readPulledById: return Statement.readById.sql.replacingOccurrences(of: "\"TodoItem\"", with: "\"TodoPulled\"")
            case .rowExists: return "SELECT 1 FROM \"TodoItem\" WHERE \"id\" = ?1"
            case .deleteRow: return "DELETE FROM \"TodoItem\" WHERE \"id\" = ?1"
            case .deletePulledRow: return "DELETE FROM \"TodoPulled\" WHERE \"id\" = ?1"
            case .itemOperations:
                // The lookup of an item's operations, through the (table, itemId COLLATE NOCASE) index.
                return """
                    SELECT "id", "properties" FROM "MS_TableOperations" WHERE "table" = ?1 AND "itemId" = ?2 COLLATE NOCASE \
                    ORDER BY "id"
                    """
            case .operationById: return "SELECT \"properties\" FROM \"MS_TableOperations\" WHERE \"id\" = ?1"
            case .updateOperationProperties: return "UPDATE \"MS_TableOperations\" SET \"properties\" = ?2 WHERE \"id\" = ?1"
            case .countTableOperations: return "SELECT count(*) FROM \"MS_TableOperations\" WHERE \"table\" = ?1"
            case .countPulledPriority: return "SELECT count(*) FROM \"TodoPulled\" WHERE \"priority\" = ?1"
            case .deletePulledPriority: return "DELETE FROM \"TodoPulled\" WHERE \"priority\" = ?1"
            case .deleteConfig: return "DELETE FROM \"MS_TableConfig\" WHERE \"id\" = ?1"
            case .updateVersion: return "UPDATE \"TodoItem\" SET \"version\" = ?2 WHERE \"id\" = ?1"
            case .insertOrIgnore:
                return """
                    INSERT OR IGNORE INTO "TodoItem" ("id", "text", "complete", "priority", "createdAt", "updatedAt", "version", \
                    "deleted") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                    """
            case .updateRow:
                return """
                    UPDATE "TodoItem" SET "id" = ?1, "text" = ?2, "complete" = ?3, "priority" = ?4, "createdAt" = ?5, \
                    "updatedAt" = ?6, "version" = ?7, "deleted" = ?8 WHERE "id" = ?1
                    """
            case .insertConfig:
                return "INSERT OR IGNORE INTO \"MS_TableConfig\" (\"id\", \"table\", \"key\", \"keyType\", \"value\") VALUES (?1, ?2, ?3, 0, ?4)"
            case .storeLocalStoreEntry:
                // LocalStore's own config rows (key type 100): the push's tracking rows and their marker.
                return "INSERT OR REPLACE INTO \"MS_TableConfig\" (\"id\", \"table\", \"key\", \"keyType\", \"value\") VALUES (?1, '', ?2, 100, ?3)"
            case .insertOrIgnorePulled: return Statement.insertOrIgnore.sql.replacingOccurrences(of: "\"TodoItem\"", with: "\"TodoPulled\"")
            case .updatePulledRow: return Statement.updateRow.sql.replacingOccurrences(of: "\"TodoItem\"", with: "\"TodoPulled\"")
            }
        }
    }

    static let columns = #""id", "text", "complete", "priority", "createdAt", "updatedAt", "version", "deleted""#

    // The `sqlite` backend's DDL: the same column declarations (dates as `timeIntervalSinceReferenceDate`
    // seconds in a column without REAL affinity) and the same indexes on the system tables.
    static let schema = """
        CREATE TABLE IF NOT EXISTS "MS_TableOperations" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "table" TEXT, "tableKind" INTEGER, \
        "itemId" TEXT, "properties" BLOB);
        CREATE INDEX IF NOT EXISTS "MS_TableOperations_table_itemId" ON "MS_TableOperations" \
        ("table", "itemId" COLLATE NOCASE);
        CREATE TABLE IF NOT EXISTS "MS_TableOperationErrors" ("id" TEXT COLLATE NOCASE PRIMARY KEY NOT NULL, \
        "operationId" INTEGER, "tableKind" INTEGER, "properties" BLOB);
        CREATE INDEX IF NOT EXISTS "MS_TableOperationErrors_operationId" ON "MS_TableOperationErrors" ("operationId");
        CREATE TABLE IF NOT EXISTS "MS_TableConfig" ("id" TEXT COLLATE NOCASE PRIMARY KEY NOT NULL, "table" TEXT, \
        "key" TEXT, "keyType" INTEGER, "value" TEXT);
        CREATE INDEX IF NOT EXISTS "MS_TableConfig_table_key_keyType" ON "MS_TableConfig" ("table", "key", "keyType");
        CREATE INDEX IF NOT EXISTS "MS_TableConfig_pair_nocase" ON "MS_TableConfig" \
        ("table" COLLATE NOCASE, "key" COLLATE BINARY, "keyType", "id");
        """

    static let todoSchema = """
        CREATE TABLE IF NOT EXISTS "TodoItem" ("id" TEXT COLLATE NOCASE PRIMARY KEY NOT NULL, "text" TEXT, \
        "complete" BOOLEAN, "priority" INTEGER, "createdAt" DATE_BLOB, "updatedAt" DATE_BLOB, "version" TEXT, \
        "deleted" BOOLEAN);
        CREATE INDEX IF NOT EXISTS "TodoItem_priority" ON "TodoItem" ("priority");
        CREATE INDEX IF NOT EXISTS "TodoItem_updatedAt" ON "TodoItem" ("updatedAt");
        CREATE INDEX IF NOT EXISTS "TodoItem_priority_updatedAt_desc" ON "TodoItem" ("priority", "updatedAt" DESC, "id");
        """

    /// Opens (creating) `directory/sqlite-c.sqlite` with the system tables.
    public init(directory: URL) throws {
        path = directory.appendingPathComponent("sqlite-c.sqlite").path
        api = SQLiteAPI.system
        keyText = nil
        try open()
    }

    /// Opens (creating) `directory/sqlcipher-c.db`, encrypted with the 32-byte raw key `sqlcipherKey`, through
    /// SQLCipher's own C API (the library the `sqlcipher` backend loads), with the backend's settings:
    /// the raw key (no key derivation), a 4096-byte cipher page, `temp_store = MEMORY`.
    public init(directory: URL, sqlcipherKey: [UInt8]) throws {
        path = directory.appendingPathComponent("sqlcipher-c.db").path
        api = try SQLCipherBaseline.api()
        let hex = Array("0123456789ABCDEF".utf8)
        keyText = [UInt8(ascii: "x"), UInt8(ascii: "'")] + sqlcipherKey.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0xF)]] } + [UInt8(ascii: "'")]
        try open()
    }

    deinit { closeConnection() }

    /// The SQLite library's version (`sqlite3_libversion()`).
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    // MARK: Connection

    private func open() throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = api.open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.flatMap { api.errmsg($0) }.map { String(cString: $0) } ?? "out of memory"
            _ = api.close_v2(handle)
            throw LocalStoreError(.ioError, "sqlite-c: cannot open \(path): \(message)")
        }
        db = handle
        if let keyText {
            guard let key = api.key else { throw LocalStoreError(.libraryMissing, "sqlcipher-c: the library has no api.key") }
            let rc = keyText.withUnsafeBytes { key(handle, $0.baseAddress, Int32($0.count)) }
            guard rc == SQLITE_OK else { throw failure("api.key", rc) }
            try exec("PRAGMA cipher_page_size = 4096; PRAGMA kdf_iter = 256000;")
        }
        try exec(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -32768; PRAGMA temp_store = MEMORY;")
        try exec(Self.schema)
        statements = [:]
    }

    private func closeConnection() {
        for (_, s) in statements { _ = api.finalize(s) }
        statements = [:]
        if let db { _ = api.close_v2(db) }
        db = nil
    }

    /// Runs every statement of `sql` (`api.exec` without a callback, written with the table's functions).
    func exec(_ sql: String) throws {
        guard let db else { throw LocalStoreError.closed() }
        try sql.withCString { start in
            var rest: UnsafePointer<CChar>? = start
            while let current = rest, current.pointee != 0 {
                var stmt: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let rc = api.prepare_v2(db, current, -1, &stmt, &tail)
                guard rc == SQLITE_OK else { throw failure("exec", rc) }
                rest = tail
                guard let stmt else { continue }  // whitespace or a comment
                defer { _ = api.finalize(stmt) }
                var step = api.step(stmt)
                while step == SQLITE_ROW { step = api.step(stmt) }
                guard step == SQLITE_DONE else { throw failure("exec", step) }
            }
        }
    }

    func failure(_ what: String, _ rc: Int32) -> LocalStoreError {
        let message = db.flatMap { api.errmsg($0) }.map { String(cString: $0) } ?? "closed"
        return LocalStoreError(.ioError, "sqlite-c: \(what) failed (\(rc)): \(message)")
    }

    /// The prepared statement for `s` (prepared on first use, kept until the connection closes), reset and
    /// with its bindings cleared.
    func statement(_ s: Statement) throws -> OpaquePointer {
        if let stmt = statements[s] { return stmt }
        guard let db else { throw LocalStoreError.closed() }
        var stmt: OpaquePointer?
        let rc = api.prepare_v2(db, s.sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw failure("prepare", rc) }
        statements[s] = stmt
        return stmt
    }

    /// Steps a statement that returns no rows, then resets it.
    func run(_ stmt: OpaquePointer) throws {
        let rc = api.step(stmt)
        _ = api.reset(stmt)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw failure("step", rc) }
    }

    func transaction<R>(_ body: () throws -> R) throws -> R {
        try run(try statement(.begin))
        do {
            let r = try body()
            try run(try statement(.commit))
            return r
        } catch {
            try? run(try statement(.rollback))
            throw error
        }
    }

    /// The ids of the queued operations, in order (for tests: the baseline gives no id twice).
    func operationIds() throws -> [Int64] {
        var stmt: OpaquePointer?
        let rc = api.prepare_v2(db, "SELECT \"id\" FROM \"MS_TableOperations\" ORDER BY \"id\"", -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw failure("prepare", rc) }
        defer { _ = api.finalize(stmt) }
        var ids: [Int64] = []
        while true {
            let rc = api.step(stmt)
            if rc == SQLITE_DONE { return ids }
            guard rc == SQLITE_ROW else { throw failure("step", rc) }
            ids.append(api.column_int64(stmt, 0))
        }
    }

    // MARK: Binding and decoding

    /// Binds `text` without copying it for as long as `body` runs (the statement is stepped inside).
    func withText<R>(_ text: String, bind stmt: OpaquePointer, _ index: Int32, _ body: () throws -> R) rethrows -> R {
        var text = text
        return try text.withUTF8 { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    _ = api.bind_text(stmt, index, $0, Int32(bytes.count), nil)  // SQLITE_STATIC
                }
            } else {
                _ = api.bind_text(stmt, index, "", 0, SQLite.TRANSIENT)
            }
            return try body()
        }
    }


    func text(_ stmt: OpaquePointer, _ column: Int32) -> String {
        guard let p = api.column_text(stmt, column) else { return "" }
        let n = Int(api.column_bytes(stmt, column))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    func record(_ stmt: OpaquePointer) -> TodoRecord {
        TodoRecord(
            id: text(stmt, 0), text: text(stmt, 1), complete: api.column_int64(stmt, 2) != 0,
            priority: api.column_int64(stmt, 3),
            createdAt: Date(timeIntervalSinceReferenceDate: api.column_double(stmt, 4)),
            updatedAt: Date(timeIntervalSinceReferenceDate: api.column_double(stmt, 5)), version: text(stmt, 6),
            deleted: api.column_int64(stmt, 7) != 0)
    }

    /// Steps `stmt` to the end, decoding every row; returns the rows, then resets the statement.
    private func records(_ stmt: OpaquePointer) throws -> [TodoRecord] {
        defer { _ = api.reset(stmt) }
        var rows: [TodoRecord] = []
        while true {
            let rc = api.step(stmt)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else { throw failure("step", rc) }
            rows.append(record(stmt))
        }
    }

    func upsertRow(_ r: TodoRecord, pulled: Bool = false) throws {
        guard hasUpsertClause else {
            try bindRow(r, try statement(pulled ? .insertOrIgnorePulled : .insertOrIgnore))
            if api.changes(db) == 0 { try bindRow(r, try statement(pulled ? .updatePulledRow : .updateRow)) }
            return
        }
        try bindRow(r, try statement(pulled ? .upsertPulled : .upsert))
    }

    /// Binds the record's eight columns to `stmt` and runs it.
    private func bindRow(_ r: TodoRecord, _ stmt: OpaquePointer) throws {
        _ = api.bind_int64(stmt, 3, r.complete ? 1 : 0)
        _ = api.bind_int64(stmt, 4, r.priority)
        _ = api.bind_double(stmt, 5, r.createdAt.timeIntervalSinceReferenceDate)
        _ = api.bind_double(stmt, 6, r.updatedAt.timeIntervalSinceReferenceDate)
        _ = api.bind_int64(stmt, 8, r.deleted ? 1 : 0)
        try withText(r.id, bind: stmt, 1) {
            try withText(r.text, bind: stmt, 2) {
                try withText(r.version, bind: stmt, 7) { try run(stmt) }
            }
        }
    }

    // MARK: BenchSubject

    public func setUp() throws { try exec(Self.todoSchema) }

    public func upsert(_ page: [TodoRecord]) throws {
        try transaction { for r in page { try upsertRow(r) } }
    }

    public func read(id: String) throws -> Bool {
        let stmt = try statement(.readById)
        return try withText(id, bind: stmt, 1) { try records(stmt).count == 1 }
    }

    public func queryIndexed(priority: Int64) throws -> Int {
        let stmt = try statement(.queryIndexed)
        _ = api.bind_int64(stmt, 1, priority)
        return try records(stmt).count
    }

    public func queryScan(textContains needle: String) throws -> Int {
        let stmt = try statement(.queryScan)
        return try withText(needle, bind: stmt, 1) { try records(stmt).count }
    }

    public func countComplete() throws -> Int {
        let stmt = try statement(.countComplete)
        defer { _ = api.reset(stmt) }
        let rc = api.step(stmt)
        guard rc == SQLITE_ROW else { throw failure("count", rc) }
        return Int(api.column_int64(stmt, 0))
    }

    public func deleteWhere(priority: Int64) throws -> Int {
        try transaction {
            let stmt = try statement(.deleteWhere)
            _ = api.bind_int64(stmt, 1, priority)
            try run(stmt)
            return Int(api.changes(db))
        }
    }

    static let insertProperties = Array(#"{"type":"insert"}"#.utf8)

    public func localWrite(_ record: TodoRecord) throws {
        try transaction {
            try upsertRow(record)
            let stmt = try statement(.appendOperation)
            try SQLiteCSubject.insertProperties.withUnsafeBytes { props in
                _ = api.bind_blob(stmt, 3, props.baseAddress, Int32(props.count), nil)
                try withText("TodoItem", bind: stmt, 1) {
                    try withText(record.id, bind: stmt, 2) { try run(stmt) }
                }
            }
        }
    }

    public func drainOne() throws -> Bool {
        try transaction {
            let first = try statement(.firstOperation)
            let rc = api.step(first)
            guard rc == SQLITE_ROW else {
                _ = api.reset(first)
                if rc == SQLITE_DONE { return false }
                throw failure("step", rc)
            }
            // Decode the operation as a sync engine would before pushing it.
            let op = TableOperation(
                id: api.column_int64(first, 0), table: text(first, 1),
                tableKind: Int(api.column_int64(first, 2)), itemId: text(first, 3),
                properties: blob(first, 4))
            _ = api.reset(first)
            let deleteOp = try statement(.deleteOperation)
            _ = api.bind_int64(deleteOp, 1, op.id)
            try run(deleteOp)
            let deleteErrors = try statement(.deleteErrors)
            _ = api.bind_int64(deleteErrors, 1, op.id)
            try run(deleteErrors)
            return true
        }
    }

    func blob(_ stmt: OpaquePointer, _ column: Int32) -> [UInt8] {
        let n = Int(api.column_bytes(stmt, column))
        guard n > 0, let p = api.column_blob(stmt, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    public func reopen(andRead id: String) throws -> Bool {
        closeConnection()
        try open()
        return try read(id: id)
    }

    public func deltaTokenRoundTrip(_ date: Date, queryId: String) throws -> Date? {
        let id = "deltaToken|TodoItem|\(queryId)"
        try storeToken(id, table: "TodoItem", queryId: queryId, date)
        return try configValue(id).flatMap(DeltaTokenFormat.date(from:))
    }

    public func close() throws { closeConnection() }
}
