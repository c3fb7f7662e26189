import Foundation
import GRDB
import LocalStore
import LocalStoreBench

/// The benchmark's workloads written with GRDB, the way a Swift developer would use it without LocalStore:
/// a `DatabasePool` (WAL, `synchronous = NORMAL`, readers concurrent with the writer), the schema created by a
/// `DatabaseMigrator`, Codable records written with GRDB's `insert`, `update` and `upsert`
/// (`INSERT … ON CONFLICT DO UPDATE`) and read through cached prepared statements
/// (`Database.cachedStatement(sql:)`) — GRDB's query interface would generate the SQL again on every call,
/// which costs more than the read itself.
///
/// The schema matches the `sqlite` backend's and the `sqlite-c` baseline's: a `NOCASE` text primary key,
/// indexes on `priority` and `updatedAt` and the compound `(priority, updatedAt DESC, id)` that answers the
/// list query, dates stored as `REAL` seconds (`timeIntervalSinceReferenceDate`, so they round-trip exactly),
/// and the three system tables with their indexes — the operations table keyed by an `AUTOINCREMENT`
/// integer (an id is never given twice, as LocalStore's high-water mark guarantees) and indexed on
/// `(table, itemId COLLATE NOCASE)`, the errors table on `operationId`, the config table on
/// `(table, key, keyType)` — so the numbers compare like for like. The sync workloads
/// (``BenchSyncSubject``) are in `GRDBSubject+Sync.swift`.
public final class GRDBSubject: BenchSubject {
    private let path: String
    private var pool: DatabasePool?

    /// Opens (creating) `directory/grdb.sqlite` with the system tables.
    public init(directory: URL) throws {
        path = directory.appendingPathComponent("grdb.sqlite").path
        pool = try Self.open(path)
        try Self.migrator.migrate(writer(), upTo: Migration.systemTables)
    }

    /// The migrations' identifiers: the system tables when the store is created, TodoItem by ``setUp()``,
    /// TodoPulled by ``setUpSync()``.
    enum Migration {
        static let systemTables = "systemTables"
        static let todoItem = "TodoItem"
        static let todoPulled = "TodoPulled"
    }

    /// The schema, as a GRDB app declares it.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(Migration.systemTables) { db in
            try db.create(table: "MS_TableOperations") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("table", .text)
                t.column("tableKind", .integer)
                t.column("itemId", .text)
                t.column("properties", .blob)
            }
            try db.create(
                index: "MS_TableOperations_table_itemId", on: "MS_TableOperations",
                expressions: [Column("table"), Column("itemId").collating(.nocase)])
            try db.create(table: "MS_TableOperationErrors") { t in
                t.primaryKey("id", .text).collate(.nocase)
                t.column("operationId", .integer)
                t.column("tableKind", .integer)
                t.column("properties", .blob)
            }
            try db.create(index: "MS_TableOperationErrors_operationId", on: "MS_TableOperationErrors", columns: ["operationId"])
            try db.create(table: "MS_TableConfig") { t in
                t.primaryKey("id", .text).collate(.nocase)
                t.column("table", .text)
                t.column("key", .text)
                t.column("keyType", .integer)
                t.column("value", .text)
            }
            try db.create(index: "MS_TableConfig_table_key_keyType", on: "MS_TableConfig", columns: ["table", "key", "keyType"])
        }
        migrator.registerMigration(Migration.todoItem) { db in try createTodoTable(Todo.databaseTableName, db) }
        migrator.registerMigration(Migration.todoPulled) { db in try createTodoTable(PulledTodo.databaseTableName, db) }
        return migrator
    }

    /// A table of the TodoItem schema (TodoItem, TodoPulled).
    private static func createTodoTable(_ name: String, _ db: Database) throws {
        try db.create(table: name) { t in
            t.primaryKey("id", .text).collate(.nocase)
            t.column("text", .text)
            t.column("complete", .boolean)
            t.column("priority", .integer).indexed()
            t.column("createdAt", .double)
            t.column("updatedAt", .double).indexed()
            t.column("version", .text)
            t.column("deleted", .boolean)
        }
        // The list query's index (`priority == p` sorted by updatedAt descending, then id): GRDB's
        // `create(index:)` takes columns or expressions but no sort order, and its documentation sends an
        // index it cannot express to raw SQL. The id ends it, as in the `sqlite` backend's compound indexes,
        // so the sort's tie-break is read from the index too.
        let index = "\(name)_priority_updatedAt_desc"
        try db.execute(
            sql: """
                CREATE INDEX \(index.quotedDatabaseIdentifier) ON \(name.quotedDatabaseIdentifier) \
                ("priority", "updatedAt" DESC, "id")
                """)
    }

    private static func open(_ path: String) throws -> DatabasePool {
        var configuration = Configuration()
        configuration.label = "grdb-bench"
        return try DatabasePool(path: path, configuration: configuration)
    }

    func writer() throws -> DatabasePool {
        guard let pool else { throw LocalStoreError.closed() }
        return pool
    }

    /// The SQLite library GRDB links (`sqlite_version()`).
    public static var libraryVersion: String {
        (try? DatabaseQueue().read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") } ?? nil) ?? "unknown"
    }

    // MARK: Records

    /// A row of a table of the TodoItem schema.
    protocol TodoRow: Codable, FetchableRecord, PersistableRecord {
        init(_ r: TodoRecord)
    }

    /// A row of TodoItem. Dates as `REAL` seconds since 2001 (GRDB's default would store text).
    struct Todo: TodoRow {
        static let databaseTableName = "TodoItem"
        static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .timeIntervalSinceReferenceDate }
        static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .timeIntervalSinceReferenceDate }
        var id: String
        var text: String
        var complete: Bool
        var priority: Int64
        var createdAt: Date
        var updatedAt: Date
        var version: String
        var deleted: Bool

        init(_ r: TodoRecord) {
            (id, text, complete, priority) = (r.id, r.text, r.complete, r.priority)
            (createdAt, updatedAt, version, deleted) = (r.createdAt, r.updatedAt, r.version, r.deleted)
        }
    }

    /// A row of TodoPulled (the table `initial-pull` fills and `purge` empties), the TodoItem schema.
    struct PulledTodo: TodoRow {
        static let databaseTableName = "TodoPulled"
        static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .timeIntervalSinceReferenceDate }
        static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .timeIntervalSinceReferenceDate }
        var id: String
        var text: String
        var complete: Bool
        var priority: Int64
        var createdAt: Date
        var updatedAt: Date
        var version: String
        var deleted: Bool

        init(_ r: TodoRecord) {
            (id, text, complete, priority) = (r.id, r.text, r.complete, r.priority)
            (createdAt, updatedAt, version, deleted) = (r.createdAt, r.updatedAt, r.version, r.deleted)
        }
    }

    struct Operation: Codable, FetchableRecord, MutablePersistableRecord {
        static let databaseTableName = "MS_TableOperations"
        var id: Int64?
        var table: String
        var tableKind: Int
        var itemId: String
        var properties: Data

        mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
    }

    struct OperationError: Codable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "MS_TableOperationErrors"
        var id: String
        var operationId: Int64
        var tableKind: Int
        var properties: Data
    }

    struct Config: Codable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "MS_TableConfig"
        var id: String
        var table: String
        var key: String
        var keyType: Int64
        var value: String
    }

    // MARK: BenchSubject

    public func setUp() throws { try Self.migrator.migrate(writer(), upTo: Migration.todoItem) }

    public func upsert(_ page: [TodoRecord]) throws {
        try writer().write { db in
            for r in page { try Todo(r).upsert(db) }
        }
    }

    public func read(id: String) throws -> Bool {
        try writer().read { db in
            try Todo.fetchOne(db.cachedStatement(sql: #"SELECT * FROM "TodoItem" WHERE "id" = ?"#), arguments: [id])
        } != nil
    }

    public func queryIndexed(priority: Int64) throws -> Int {
        try writer().read { db in
            let sql = #"SELECT * FROM "TodoItem" WHERE "priority" = ? ORDER BY "updatedAt" DESC, "id" LIMIT 50"#
            return try Todo.fetchAll(db.cachedStatement(sql: sql), arguments: [priority])
        }.count
    }

    public func queryScan(textContains needle: String) throws -> Int {
        // `instr`, not LIKE: the contract's `contains` is case-sensitive.
        try writer().read { db in
            let sql = #"SELECT * FROM "TodoItem" WHERE instr("text", ?) > 0 ORDER BY "id" LIMIT 50"#
            return try Todo.fetchAll(db.cachedStatement(sql: sql), arguments: [needle])
        }.count
    }

    public func countComplete() throws -> Int {
        try writer().read { db in
            try Int.fetchOne(db.cachedStatement(sql: #"SELECT count(*) FROM "TodoItem" WHERE "complete" = 1"#)) ?? 0
        }
    }

    public func deleteWhere(priority: Int64) throws -> Int {
        try writer().write { db in
            try db.cachedStatement(sql: #"DELETE FROM "TodoItem" WHERE "priority" = ?"#).execute(arguments: [priority])
            return db.changesCount
        }
    }

    private static let insertProperties = Data(#"{"type":"insert"}"#.utf8)

    public func localWrite(_ record: TodoRecord) throws {
        try writer().write { db in
            try Todo(record).upsert(db)
            var op = Operation(id: nil, table: "TodoItem", tableKind: 0, itemId: record.id, properties: Self.insertProperties)
            try op.insert(db)
        }
    }

    public func drainOne() throws -> Bool {
        try writer().write { db in
            let first = try db.cachedStatement(sql: #"SELECT * FROM "MS_TableOperations" ORDER BY "id" LIMIT 1"#)
            guard let op = try Operation.fetchOne(first), let id = op.id else { return false }
            try db.cachedStatement(sql: #"DELETE FROM "MS_TableOperations" WHERE "id" = ?"#).execute(arguments: [id])
            try db.cachedStatement(sql: #"DELETE FROM "MS_TableOperationErrors" WHERE "operationId" = ?"#)
                .execute(arguments: [id])
            return true
        }
    }

    public func reopen(andRead id: String) throws -> Bool {
        try pool?.close()
        pool = nil
        pool = try Self.open(path)
        return try read(id: id)
    }

    public func deltaTokenRoundTrip(_ date: Date, queryId: String) throws -> Date? {
        let id = "deltaToken|TodoItem|\(queryId)"
        let entry = Config(
            id: id, table: "TodoItem", key: queryId, keyType: 0, value: DeltaTokenFormat.string(from: date))
        try writer().write { db in try entry.upsert(db) }
        return try writer().read { db in
            try Config.fetchOne(db.cachedStatement(sql: #"SELECT * FROM "MS_TableConfig" WHERE "id" = ?"#), arguments: [id])
        }.flatMap { DeltaTokenFormat.date(from: $0.value) }
    }

    public func close() throws {
        try pool?.close()
        pool = nil
    }
}
