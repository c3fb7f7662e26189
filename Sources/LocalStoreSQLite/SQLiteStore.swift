import CSQLite
import LocalStore
import Logging
import LocalStoreSQLEngine

/// A `LocalStore` kept in one SQLite file, using the system `libsqlite3`.
///
/// ```swift
/// let store = try SQLiteStore(path: "/var/lib/app/store.sqlite")
/// try store.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean], indexed: ["complete"]))
/// try store.upsert([["id": "1", "text": "milk", "complete": false]], into: "TodoItem")
/// ```
///
/// - The file keeps its table definitions: reopening it needs no `defineTable`, and defining a table
///   again adds its new columns and indexes (`ALTER TABLE`, `CREATE INDEX`).
/// - Writes go through one connection in WAL mode; every batch, and every `write {}` body, is one
///   transaction (`BEGIN IMMEDIATE`), rolled back on any error.
/// - Reads use a small pool of reader connections: they run concurrently with each other and with a
///   write transaction, and see the last committed state.
/// - Calling the store from inside its own `write {}` body (instead of using the transaction passed to
///   the body) is a `misuse` error.
/// - SQLite's errors become `LocalStoreError` codes (`busy`, `full`, `corrupt`, `notADatabase`,
///   `readOnly`, `ioError`, `constraint`, …) with SQLite's own message.
///
/// See `docs/sqlite.md` for the file layout and type mapping.
public final class SQLiteStore: LocalStore, IntegrityChecking, QueryPlanReporting {
    /// How a store trades speed for durability and concurrency.
    ///
    /// The same names as `SQLCipherStore.Options` and `LMDBStoreOptions` for what they share:
    /// ``durability``, ``busyTimeout``, ``maximumReaders``, ``cacheSizeKiB``.
    public struct Options: Sendable, Hashable {
        /// When a committed transaction is on disk (default `StoreDurability.normal`). The store runs in
        /// WAL mode; `StoreDurability.full` is `PRAGMA synchronous = FULL` (every commit synced),
        /// `StoreDurability.normal` is `NORMAL` (the WAL is synced at checkpoints: a power loss may roll
        /// back the last transactions, the file is never damaged), `StoreDurability.off` is `OFF`.
        public var durability: StoreDurability
        /// How long a call waits for a lock held by another connection or process before failing with
        /// `busy` (default 5 s; whole milliseconds, a negative duration is 0).
        public var busyTimeout: Duration
        /// The largest number of reader connections (default 4), opened as reads need them; more
        /// concurrent readers wait.
        public var maximumReaders: Int
        /// Prepared statements cached per connection (default 64).
        public var statementCacheCapacity: Int
        /// Whether statements logged at trace level include their bound values (default `false`: bound
        /// values are user data).
        public var logsBoundValues: Bool
        /// The largest page cache of each connection, in KiB (default 32768, the same as
        /// `SQLCipherStore`; it fills only as pages are read, SQLite's own default is 2048). Temporary
        /// tables and sorts stay in memory (`temp_store = MEMORY`).
        public var cacheSizeKiB: Int

        /// Creates options.
        public init(
            durability: StoreDurability = .normal, busyTimeout: Duration = .seconds(5), maximumReaders: Int = 4,
            statementCacheCapacity: Int = 64, logsBoundValues: Bool = false, cacheSizeKiB: Int = 32768
        ) {
            self.durability = durability
            self.busyTimeout = busyTimeout
            self.maximumReaders = maximumReaders
            self.statementCacheCapacity = statementCacheCapacity
            self.logsBoundValues = logsBoundValues
            self.cacheSizeKiB = cacheSizeKiB
        }
    }

    /// The path of the database file.
    public let path: String
    /// The options the store was opened with.
    public let options: Options
    let engine: SQLEngine

    /// Opens the store at `path`, creating the file when it does not exist.
    ///
    /// - Throws: `notADatabase` when the file is not a SQLite database (or is encrypted), or is a SQLite
    ///   database that LocalStore did not create (the file is left untouched); `versionMismatch` for a
    ///   file written by a newer LocalStore; `schemaConflict` when the file was created with other
    ///   system table names; `unsupported` for `":memory:"`, an empty path or a `file:` URI; `ioError`
    ///   when the file cannot be opened.
    /// - Parameters:
    ///   - path: the database file; its directory must exist.
    ///   - systemTableNames: the names of the operation, error and config tables (the SDK's by default).
    ///   - options: durability, lock waiting, reader connections and caches.
    ///   - logger: where to log (swift-log): each statement's text and duration at `trace`,
    ///     write transactions and opened connections at `debug`. Bound values only with
    ///     ``Options/logsBoundValues``.
    public convenience init(
        path: String, systemTableNames: SystemTableNames = .default, options: Options = Options(), logger: Logger? = nil
    ) throws {
        try self.init(path: path, systemTableNames: systemTableNames, options: options, api: .system, logger: logger)
    }

    /// Opens the store through another SQLite library's function table (tests run the engine on
    /// SQLCipher's SQLite 3.15.2 this way).
    package init(
        path: String, systemTableNames: SystemTableNames = .default, options: Options = Options(), api: SQLiteAPI,
        openHook: SQLEngine.OpenHook? = nil, logger: Logger? = nil
    ) throws {
        self.path = path
        self.options = options
        let configuration = SQLEngine.Configuration(
            durability: options.durability, busyTimeoutMilliseconds: options.busyTimeout.clampedMilliseconds,
            maximumReaderCount: max(1, options.maximumReaders),
            statementCacheCapacity: max(1, options.statementCacheCapacity), logger: logger,
            logsBoundValues: options.logsBoundValues, cacheSizeKiB: options.cacheSizeKiB)
        engine = try SQLEngine(
            path: path, systemTableNames: systemTableNames, configuration: configuration, api: api, openHook: openHook)
    }

    /// The version of the SQLite library in use, e.g. `3.40.1`.
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    // MARK: LocalStore

    /// The names of the system tables.
    public var systemTableNames: SystemTableNames { engine.systemTableNames }

    /// Creates `schema`'s table or adds its new columns and indexes to the existing one.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func defineTable(_ schema: TableSchema) throws { try engine.defineTable(schema) }

    /// The definitions of all user tables, sorted by name.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func tableSchemas() throws -> [TableSchema] { try engine.tableSchemas() }

    /// Closes every connection (the files are released) and ends every observation. Further calls fail with `closed`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func close() throws {
        defer { engine.changes.finish() }
        try engine.close()
    }

    /// Where committed changes are published (see docs/observation.md): commits of other processes
    /// are noticed through `PRAGMA data_version` when this store writes, and every 100 ms while observed.
    public var changeCenter: ChangeCenter { engine.changes }

    /// The definition of `table`, or `nil`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func schema(of table: String) throws -> TableSchema? { try engine.schema(of: table) }

    /// The row of `table` whose id is `id`, or `nil`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(table: String, id: Value) throws -> Item? { try engine.read(table: table, id: id) }

    /// The rows `query` selects (and their total count when asked).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(_ query: Query) throws -> ReadResult { try engine.read(query) }

    /// Inserts or updates `items` (merge semantics) in one transaction.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try engine.upsert(items, into: table, options: options)
    }

    /// Deletes the rows with these ids.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(ids: [Value], from table: String) throws { try engine.delete(ids: ids, from: table) }

    /// Deletes exactly the rows `query` would return.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(matching query: Query) throws { try engine.delete(matching: query) }

    /// Runs `body` in one write transaction: all of its writes commit together, or none when it throws.
    /// Callers use `write(_:)`.
    public func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try engine.performWrite(body)
    }

    /// A composite call's transaction (the core's `CompositeWrites`): no savepoint per call.
    package func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try engine.performCompositeWrite(body)
    }

    // MARK: Raw SQL

    /// Runs one read-only SQL `SELECT` with bound `arguments` (`?`, `?NNN`) and returns its rows, each
    /// keyed by result column name.
    ///
    /// Columns read straight from a table column come back with that column's LocalStore type (a
    /// boolean column as `bool`, a date as `date`, json as `json`); computed columns by SQLite's storage
    /// class (`int`, `double`, `string`, `binary`, `null`). Tables are named as defined (a table whose name
    /// starts with `sqlite_` is stored as `"localstore:<name>"`).
    ///
    /// - Throws: `invalidQuery` for anything but one read-only `SELECT` (writes, `PRAGMA`, `ATTACH`,
    ///   transaction control, several statements), a syntax error, or a wrong number of arguments.
    /// Moves every committed page from the write-ahead log into the database file and truncates the log
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`); `busy` when a reader keeps it from completing.
    public func checkpoint() throws { try engine.checkpoint() }

    /// `PRAGMA integrity_check`: every problem SQLite reports (empty when sound).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func checkIntegrity() throws -> [String] {
        try engine.integrityCheck(pragmas: ["integrity_check"])
    }

    public func query(sql: String, arguments: [Value] = []) throws -> [Item] {
        try engine.query(sql: sql, arguments: arguments)
    }

    /// How SQLite answers `query`: the `detail` lines of `EXPLAIN QUERY PLAN` for the statement a read
    /// of `query` runs, joined by `"; "` — for example `SEARCH TABLE TodoItem USING INDEX … (priority=?)`.
    /// A plan without `USE TEMP B-TREE FOR ORDER BY` reads the rows in the query's order.
    public func explain(_ query: Query) throws -> String {
        try engine.explain(query)
    }

    /// The access path a read of `query` takes (see `QueryPlanReporting`), read from the plan ``explain(_:)``
    /// shows: `SEARCH … USING INDEX` is that index, a `SCAN` a full scan unless it walks an index in the
    /// query's order for `top` rows.
    public func accessPath(for query: Query) throws -> QueryAccessPath {
        try engine.accessPath(for: query)
    }
}

/// A delta token's value written in one statement that commits by itself (the core's `setDeltaToken` on
/// the store uses it).
extension SQLiteStore: SystemTableStoreShortcuts {
    package func updateSoleDeltaTokenRowAlone(_ entry: TableConfigEntry) throws -> Bool {
        try engine.updateSoleDeltaTokenRowAlone(entry)
    }
}

/// The head of the operation queue and config rows by primary key with statements prepared once per
/// connection (the core's `operation(after:)`, `deltaToken` and `operationIdHighWaterMark()` use them).
extension SQLiteStore: SystemTableReadShortcuts {
    package func firstOperation(after id: Int64) throws -> TableOperation? { try engine.firstOperation(after: id) }
    package func configValue(id: String) throws -> Value? { try engine.configValue(id: id) }
}
extension SQLiteStore: CompositeWrites {}
