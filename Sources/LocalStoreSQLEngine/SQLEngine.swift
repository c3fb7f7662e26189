import Foundation
import LocalStore
import Logging
import Synchronization

/// The SQL backend's engine: a ``LocalStore`` over SQLite reached through a ``SQLiteAPI`` table.
///
/// `LocalStoreSQLite` wraps it with the system `libsqlite3`; a SQLCipher backend can wrap it with a
/// table loaded by `dlopen` and an ``OpenHook`` that applies the key.
///
/// - One writer connection (WAL journal) behind a lock; `write {}` is `BEGIN IMMEDIATE` … `COMMIT`,
///   rolled back on every error path. Calls on a transaction made inside a user's `write {}` body run
///   in a savepoint, so a failed call leaves the transaction as it was.
/// - A pool of reader connections (`PRAGMA query_only`), opened on demand: reads run concurrently with
///   each other and with a write transaction, on the last committed state.
/// - Table definitions live in the file (``SQLNames/schemaTable``), so a store reopens without
///   redefining its tables.
package final class SQLEngine: @unchecked Sendable {
    /// Runs on every connection right after `sqlite3_open_v2`, before anything is read (SQLCipher
    /// applies the key here).
    package typealias OpenHook = @Sendable (_ db: OpaquePointer, _ api: SQLiteAPI) throws -> Void

    /// Tuning of an engine.
    package struct Configuration: Sendable {
        /// `PRAGMA synchronous`: `FULL`, `NORMAL` or `OFF`.
        package var durability: StoreDurability
        /// `sqlite3_busy_timeout` of every connection, in milliseconds.
        package var busyTimeoutMilliseconds: Int32
        /// The largest number of reader connections.
        package var maximumReaderCount: Int
        /// Prepared statements kept per connection.
        package var statementCacheCapacity: Int
        /// Where the engine logs: statements with their durations at trace level, transactions at debug.
        package var logger: Logger?
        /// Whether logged statements include their bound values (user data; off by default).
        package var logsBoundValues: Bool
        /// The largest page cache of each connection, in KiB (`PRAGMA cache_size = -N`); it fills only as
        /// pages are read. Every connection also keeps temporary tables and sorts in memory
        /// (`PRAGMA temp_store = MEMORY`).
        package var cacheSizeKiB: Int

        package init(
            durability: StoreDurability = .normal, busyTimeoutMilliseconds: Int32 = 5000, maximumReaderCount: Int = 4,
            statementCacheCapacity: Int = 64, logger: Logger? = nil, logsBoundValues: Bool = false,
            cacheSizeKiB: Int = SQLEngine.defaultCacheSizeKiB
        ) {
            self.cacheSizeKiB = cacheSizeKiB
            self.logger = logger
            self.logsBoundValues = logsBoundValues
            self.durability = durability
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.maximumReaderCount = maximumReaderCount
            self.statementCacheCapacity = statementCacheCapacity
        }
    }

    /// The default page cache per connection, in KiB (32 MiB, a limit: it fills only as pages are read).
    /// SQLite's own default is 2 MiB; a 100,000-row store of the benchmark is about 20 MiB.
    package static let defaultCacheSizeKiB = 32768

    /// The newest file layout this engine reads and writes (metadata row `format`; docs/format.md):
    /// 1 — tables, columns and column indexes (0.1.0); 2 — also compound indexes (a table definition
    /// stored as a `{"columns", "indexes"}` object). A store is created as format 1 and becomes format 2
    /// in the transaction that first stores a compound index, so a store without one stays readable by
    /// 0.1.0; a store of a format above this is refused with `versionMismatch`.
    package static let formatVersion: Int64 = 2
    /// The format of a new store.
    package static let initialFormatVersion: Int64 = 1
    /// The format a store needs once a table has a compound index.
    package static let compoundIndexFormatVersion: Int64 = 2

    package let systemTableNames: SystemTableNames
    package let path: String
    let api: SQLiteAPI
    let configuration: Configuration
    let openHook: OpenHook?
    /// Whether the store sits on a location this process cannot write (a read-only file system or
    /// directory): then every connection is opened read-only with SQLite's `immutable` URI parameter,
    /// reads work and writes fail with `readOnly`.
    package let isReadOnlyLocation: Bool

    private let writerLock = PThreadMutex()
    fileprivate let writerThread = WriterThread()
    // Guarded by writerLock.
    private var writer: Connection?
    private var writerClosed = false
    /// The writer's `PRAGMA data_version` when last looked at (it changes when another connection,
    /// in this process or another, commits). Guarded by writerLock.
    private var lastDataVersion: Int64?

    /// Where committed transactions are published. Owned by the store (it outlives a rekey's engine
    /// swap); the store finishes it on close.
    package let changes: ChangeCenter

    private let pool = PThreadMutex()
    // Guarded by pool.
    private var idleReaders: [Connection] = []
    private var openReaders = 0
    private var isClosedFlag = false

    /// Tables by folded name. Replaced only after the transaction that changed the file committed.
    private let catalog = LockedValue<[String: TableInfo]>([:])
    /// Bumped (inside `catalog`'s lock) whenever `catalog` changes, so a connection can keep the table
    /// it looked up last without taking the lock or hashing the name again.
    private let catalogGeneration = Atomic<Int>(0)
    /// `PRAGMA schema_version` read just before `catalog` was last loaded from the file (-1: never).
    private let catalogSchemaVersion = Atomic<Int64>(-1)
    /// Serializes reloads of `catalog` (see ``refreshCatalog(_:)``).
    private let catalogReload = PThreadMutex()
    private let fallbackCounter = Atomic<Int>(0)

    /// Opens (creating when needed) the store at `path`.
    ///
    /// Nothing is written before the file is known to be readable by this library and to be either
    /// empty or a LocalStore store: a file that is not is left byte for byte untouched.
    package init(
        path: String, systemTableNames: SystemTableNames, configuration: Configuration, api: SQLiteAPI,
        openHook: OpenHook? = nil, changes: ChangeCenter = ChangeCenter()
    ) throws {
        self.changes = changes
        // The default names are valid identifiers and distinct (no need to check them on every open).
        if systemTableNames != .default { try systemTableNames.validate() }
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else {
            throw LocalStoreError(.unsupported, "the SQLite backend needs a file path, not \(Value.string(path))")
        }
        // One stat(2) for what FileManager's fileExists(atPath:isDirectory:) answered (it follows links too).
        let status = FileStatus(path)
        if status?.isDirectory == true {
            throw LocalStoreError(.notADatabase, "'\(path)' is a directory, not a SQLite store")
        }
        self.path = path
        self.systemTableNames = systemTableNames
        self.configuration = configuration
        self.api = api
        self.openHook = openHook
        isReadOnlyLocation = status != nil && SQLEngine.cannotWrite(path)
        if isReadOnlyLocation {
            // A log left by an unfinished writer would be ignored by an immutable connection, which
            // would then read an older state without saying so.
            if let size = FileStatus(path + "-wal", followingLinks: false)?.size, size > 0 {
                throw LocalStoreError(
                    .readOnly,
                    "'\(path)' is on a location this process cannot write and its write-ahead log '\(path)-wal' still "
                        + "holds transactions: open it once where it is writable (or copy the three files there) to recover them")
            }
        }
        if !isReadOnlyLocation { try verifyBeforeRecovery() }
        let w = try openConnection(create: !isReadOnlyLocation)
        do {
            let tables = try setUp(w)
            replaceCatalog(tables)
        } catch {
            w.close()
            throw error
        }
        writer = w
        changes.setExternalChangeProbe(interval: Self.externalChangePollInterval) { [weak self] baseline in
            self?.pollExternalChanges(baseline: baseline)
        }
    }

    /// How often an observed store looks for commits of other processes when it does not write itself.
    package static let externalChangePollInterval: Duration = .milliseconds(100)

    deinit {
        writer?.close()
        for c in idleReaders { c.close() }
    }

    /// How many queries were evaluated in Swift because SQL could not express them on a connection.
    package var fallbackCount: Int { fallbackCounter.load(ordering: .relaxed) }

    func noteFallback() { fallbackCounter.add(1, ordering: .relaxed) }

    /// `SQLITE_LIMIT_VARIABLE_NUMBER` of the connections, and whether the `localstore_*` SQL functions
    /// are registered on them.
    package func connectionLimits() throws -> (variables: Int, hasFunctions: Bool) {
        try withReader { ($0.connection.variableLimit, $0.connection.hasFunctions) }
    }

    /// The catalog's generation now (bumped whenever a table definition changes).
    var currentCatalogGeneration: Int { catalogGeneration.load(ordering: .acquiring) }

    func tableInfo(_ name: String) -> TableInfo? {
        let key = Identifier.fold(name)
        return catalog.withLock { $0[key] }
    }

    /// ``tableInfo(_:)`` for a call on `connection`, which remembers the table it looked up last and
    /// the catalog generation it found it in: a call path names the same table again and again, and
    /// while the catalog is unchanged the answer is the same object (no lock, no folding, no hashing).
    func tableInfo(_ name: String, on connection: Connection) -> TableInfo? {
        let generation = catalogGeneration.load(ordering: .acquiring)
        if let last = connection.lastTable, last.generation == generation, Identifier.isSameSpelling(last.name, name) { return last.info }
        let key = Identifier.fold(name)
        guard let info = catalog.withLock({ $0[key] }) else { return nil }
        connection.lastTable = (name, generation, info)
        return info
    }

    /// Replaces the whole catalog.
    private func replaceCatalog(_ tables: [String: TableInfo]) {
        catalog.withLock {
            $0 = tables
            catalogGeneration.add(1, ordering: .releasing)
        }
    }

    // MARK: Opening

    /// Whether `path`, an existing file, is one this process cannot write, or lives in a directory it
    /// cannot write (SQLite needs to create `-wal` and `-shm` next to it). `access` answers for the
    /// real user; root passes it except on a read-only file system.
    private static func cannotWrite(_ path: String) -> Bool {
        return access(path, W_OK) != 0 || access(FileStatus.directory(of: path), W_OK) != 0
    }

    /// When a write-ahead log is next to the file (a writer was killed, or another process has the store
    /// open), checks the key, the kind of file and the store's metadata on a read-only connection before a
    /// normal connection opens.
    ///
    /// A normal connection that reads the file runs WAL recovery, and closing it checkpoints the log into
    /// the file and deletes `-wal` and `-shm` — even when the read then fails because the key is wrong or
    /// the file is not a store of this kind. A read-only connection never checkpoints, so on failure the
    /// database file and `-wal` stay byte for byte as they were (its WAL recovery rebuilds the `-shm`
    /// index, which holds no data). It reads the log's commits too: the main file alone is not enough,
    /// since after a crash during a checkpoint its pages may be incomplete while the log still holds
    /// them (the power-loss simulation produced such a state). Only when no log is left is this skipped:
    /// then a failed open leaves the files as they were anyway, and a passphrase is not stretched again.
    private func verifyBeforeRecovery() throws {
        // lstat(2), as FileManager's attributesOfItem(atPath:) (which also built a dictionary of every
        // attribute and looked up the owner's names).
        guard let size = FileStatus(path + "-wal", followingLinks: false)?.size, size > 0 else { return }
        // An empty database file has no page to check (SQLite discards a log next to it, as before).
        guard let fileSize = FileStatus(path, followingLinks: false)?.size, fileSize > 0 else { return }
        let probe = try Connection.open(path: path, create: false, api: api, cacheCapacity: 4, hook: openHook, readOnly: true)
        defer { probe.close() }
        _ = api.busy_timeout(probe.db, configuration.busyTimeoutMilliseconds)
        let (objects, hasMeta) = try Self.schemaObjects(probe)
        if !hasMeta && objects > 0 {
            throw LocalStoreError(
                .notADatabase, "'\(path)' is a SQLite database but not a LocalStore store (it has no \(SQLNames.metaTable) table)")
        }
        if hasMeta { try checkMeta(MetadataRows.readMeta(probe)) }
    }

    private func openConnection(create: Bool) throws -> Connection {
        let c = try Connection.open(
            path: path, create: create, api: api, cacheCapacity: configuration.statementCacheCapacity, hook: openHook,
            immutable: isReadOnlyLocation)
        _ = api.busy_timeout(c.db, configuration.busyTimeoutMilliseconds)
        do {
            try c.executeOnce("PRAGMA cache_size = -\(max(64, configuration.cacheSizeKiB))")
            try c.executeOnce("PRAGMA temp_store = MEMORY")
        } catch {
            c.close()
            throw error
        }
        c.logger = configuration.logger
        c.logsBoundValues = configuration.logsBoundValues
        configuration.logger?.debug("connection opened", metadata: ["path": "\(path)"])
        return c
    }

    private func configureWriter(_ w: Connection) throws {
        let synchronous = switch configuration.durability {
        case .full: "FULL"
        case .normal: "NORMAL"
        case .off: "OFF"
        }
        try w.executeOnce("PRAGMA synchronous = \(synchronous)")
    }

    private static let metaExists = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1"

    /// The number of objects in the file's schema and whether the metadata table is one of them, in one
    /// statement (reading the schema fails with `SQLITE_NOTADB` for a file that is not a readable database).
    private static func schemaObjects(_ c: Connection) throws -> (objects: Int64, hasMeta: Bool) {
        let sql = "SELECT count(*), coalesce(sum(type = 'table' AND name = ?1), 0) FROM sqlite_master"
        return try c.withStatement(sql) { s in
            try s.bind(.string(SQLNames.metaTable), at: 1)
            return try s.step() ? (s.int64(0), s.int64(1) > 0) : (0, false)
        }
    }

    /// Verifies the file, switches it to WAL, creates the metadata and system tables of a new store and
    /// loads the catalog.
    private func setUp(_ w: Connection) throws -> [String: TableInfo] {
        // The metadata and the table definitions in one statement; when it
        // cannot be prepared (a new or foreign file, another layout, not a readable database) one step at a
        // time as the steps below need them. Reading the schema fails with SQLITE_NOTADB for a file that is
        // not a (readable) database.
        let stored = try MetadataRows.readAll(w)
        // The statement preparing at all shows the metadata table exists.
        let (objects, hasMeta) = try stored != nil ? (1, true) : Self.schemaObjects(w)
        if !hasMeta && objects > 0 {
            throw LocalStoreError(
                .notADatabase, "'\(path)' is a SQLite database but not a LocalStore store (it has no \(SQLNames.metaTable) table)")
        }
        if hasMeta { try checkMeta(try stored ?? MetadataRows.readMeta(w)) }
        if isReadOnlyLocation {
            guard hasMeta else {
                throw LocalStoreError(.readOnly, "'\(path)' is an empty file on a location this process cannot write: no store can be created there")
            }
            try configureWriter(w)
            return try catalog(from: try stored ?? MetadataRows.readDefinitions(w))
        }
        // The file is ours (or empty): from here on it may be written.
        let mode = try w.withUncachedStatement("PRAGMA journal_mode = WAL") { s in try s.step() ? s.text(0) : nil }
        guard mode?.lowercased() == "wal" else {
            throw LocalStoreError(.unsupported, "SQLite cannot use a WAL journal for '\(path)' (journal mode \(mode ?? "?"))")
        }
        try configureWriter(w)
        if !hasMeta {
            try w.run(.beginImmediate)
            do {
                // Another connection may have initialized the file meanwhile.
                if (try w.scalarInt(SQLEngine.metaExists, [.string(SQLNames.metaTable)]) ?? 0) == 0 {
                    try initialize(w)
                }
                try w.run(.commit)
            } catch {
                Self.rollback(w)
                throw error
            }
            let written = try MetadataRows.readAll(w)
            try checkMeta(try written ?? MetadataRows.readMeta(w))
            return try catalog(from: try written ?? MetadataRows.readDefinitions(w))
        }
        let tables = try catalog(from: try stored ?? MetadataRows.readDefinitions(w))
        if stored?.hasPairIndex != true { addMissingSystemIndexes(w, tables) }
        return tables
    }

    /// Creates the system tables' indexes a store made by an earlier version lacks (the config table's
    /// pair index). Each is one `CREATE INDEX IF NOT EXISTS`, atomic on its own; one that cannot be
    /// created now (another process holds the write lock past the busy timeout, the disk is full) is
    /// logged and left for the next opening: the lookups it serves scan the table without it.
    private func addMissingSystemIndexes(_ w: Connection, _ tables: [String: TableInfo]) {
        guard let config = tables.values.first(where: { $0.kind == .config }),
            ["table", "key", "keyType"].allSatisfy({ config.schema.column(named: $0) != nil })
        else { return }
        var added = true
        for index in config.indexes {
            do {
                try w.execute(index.sql)
            } catch {
                added = false
                configuration.logger?.warning(
                    "could not add the index \(index.name) of \(config.schema.name); it is added on a later opening",
                    metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
        guard added else { return }
        // Recorded once the indexes exist, so later openings do not look for them (a crash in between
        // leaves the row out, and the next opening runs the idempotent statements again).
        do {
            try w.withStatement("INSERT OR REPLACE INTO \(SQLNames.quote(SQLNames.metaTable)) (key, value) VALUES (?1, 1)") { s in
                try s.bind([.string(MetadataRows.pairIndexKey)])
                try s.run()
            }
        } catch {
            configuration.logger?.warning(
                "could not record the indexes of \(config.schema.name); they are looked for again on a later opening",
                metadata: ["path": "\(path)", "error": "\(error)"])
        }
    }

    /// Checks the metadata rows: a format this version reads, and the system table names the store was
    /// opened with.
    private func checkMeta(_ rows: MetadataRows) throws {
        guard let format = rows.format, format >= 1 else {
            throw LocalStoreError(.corrupt, "'\(path)' has no valid LocalStore format version")
        }
        guard format <= SQLEngine.formatVersion else {
            throw LocalStoreError(
                .versionMismatch,
                "'\(path)' has LocalStore SQLite format \(format); this version reads format \(SQLEngine.formatVersion) and older")
        }
        for (key, wanted) in [
            ("operations", systemTableNames.operations), ("errors", systemTableNames.errors), ("config", systemTableNames.config),
        ] {
            let stored = rows.metaText[key]
            // The same bytes (the usual case: the names the store was created with) need no folding.
            guard let stored, sameBytes(stored, wanted) || Identifier.fold(stored) == Identifier.fold(wanted) else {
                throw LocalStoreError(
                    .schemaConflict,
                    "'\(path)' was created with the \(key) table '\(stored ?? "?")'; it cannot be opened with '\(wanted)'")
            }
        }
    }

    /// The system tables with the same `indexed` flags as the other backends.
    private var systemTables: [TableInfo] {
        func withIndex(_ s: TableSchema, _ column: String) -> TableSchema {
            TableSchema(name: s.name, columns: s.columns.map { Column($0.name, $0.type, indexed: $0.name == column) })
        }
        return [
            TableInfo(
                schema: withIndex(systemTableNames.operationsSchema, "table"),
                sqlName: SQLNames.table(for: systemTableNames.operations), kind: .operations),
            TableInfo(
                schema: withIndex(systemTableNames.errorsSchema, "operationId"),
                sqlName: SQLNames.table(for: systemTableNames.errors), kind: .errors),
            TableInfo(
                schema: withIndex(systemTableNames.configSchema, "table"),
                sqlName: SQLNames.table(for: systemTableNames.config), kind: .config),
        ]
    }

    private func initialize(_ w: Connection) throws {
        try w.execute(
            "CREATE TABLE \(SQLNames.quote(SQLNames.metaTable)) (key TEXT PRIMARY KEY NOT NULL, value)")
        try w.execute(
            "CREATE TABLE \(SQLNames.quote(SQLNames.schemaTable)) (name TEXT COLLATE NOCASE PRIMARY KEY NOT NULL, "
                + "sqlName TEXT NOT NULL, kind INTEGER NOT NULL, columns TEXT NOT NULL)")
        let insertMeta = "INSERT INTO \(SQLNames.quote(SQLNames.metaTable)) (key, value) VALUES (?1, ?2)"
        for (key, value) in [
            ("format", Value.int(SQLEngine.initialFormatVersion)), ("operations", .string(systemTableNames.operations)),
            ("errors", .string(systemTableNames.errors)), ("config", .string(systemTableNames.config)),
            // The config table's indexes, its pair index included, are made below in this transaction.
            (MetadataRows.pairIndexKey, .int(1)),
        ] {
            try w.withStatement(insertMeta) { s in
                try s.bind([.string(key), value])
                try s.run()
            }
        }
        for t in systemTables {
            try w.execute(t.createSQL)
            for index in t.indexes { try w.execute(index.sql) }
            try saveDefinition(t, on: w)
        }
    }

    private func saveDefinition(_ t: TableInfo, on w: Connection) throws {
        if !t.schema.indexes.isEmpty {
            // In the definition's transaction: older versions then refuse the store with versionMismatch
            // instead of failing on a definition they cannot parse.
            let sql = "UPDATE \(SQLNames.quote(SQLNames.metaTable)) SET value = ?1 WHERE key = 'format' AND value < ?1"
            try w.withStatement(sql) { s in
                try s.bind([.int(SQLEngine.compoundIndexFormatVersion)])
                try s.run()
            }
        }
        let sql = "INSERT OR REPLACE INTO \(SQLNames.quote(SQLNames.schemaTable)) (name, sqlName, kind, columns) VALUES (?1, ?2, ?3, ?4)"
        try w.withStatement(sql) { s in
            try s.bind([.string(t.schema.name), .string(t.sqlName), .int(Int64(t.kind.rawValue)), .string(t.columnsJSON)])
            try s.run()
        }
    }

    private func loadCatalog(_ w: Connection) throws -> [String: TableInfo] {
        try catalog(from: MetadataRows.readDefinitions(w))
    }

    /// The catalog of the stored table definitions. A definition already parsed in this process (the same
    /// name, SQL name, kind and stored text) is not parsed again (``TableInfo/memoized(name:sqlName:kind:columns:failure:)``).
    private func catalog(from rows: MetadataRows) throws -> [String: TableInfo] {
        var tables: [String: TableInfo] = [:]
        if let known = TableInfo.knownCatalog(rows.definitions) {
            tables = known
        } else {
            tables = try parsedCatalog(rows)
            TableInfo.rememberCatalog(rows.definitions, tables)
        }
        let folded = systemTableNames == .default ? Self.defaultSystemTablesFolded : systemTableNames.folded
        for (name, key, kind) in [
            (systemTableNames.operations, folded.operations, TableKind.operations),
            (systemTableNames.errors, folded.errors, .errors), (systemTableNames.config, folded.config, .config),
        ] where tables[key]?.kind != kind {
            throw LocalStoreError(.corrupt, "'\(path)' lacks the system table '\(name)'", table: name)
        }
        return tables
    }

    /// The default system table names, folded once.
    private static let defaultSystemTablesFolded = SystemTableNames.default.folded

    private func parsedCatalog(_ rows: MetadataRows) throws -> [String: TableInfo] {
        var tables: [String: TableInfo] = [:]
        for d in rows.definitions {
            guard let kind = TableKind(rawValue: Int(d.kind)) else {
                throw LocalStoreError(.corrupt, "the definition of table '\(d.name)' in '\(path)' cannot be read", table: d.name)
            }
            let info = try TableInfo.memoized(name: d.name, sqlName: d.sqlName, kind: kind, columns: d.columns) { why in
                why.map { LocalStoreError(.corrupt, "the definition of table '\(d.name)' in '\(path)' is invalid: \($0)", table: d.name) }
                    ?? LocalStoreError(.corrupt, "the definition of table '\(d.name)' in '\(path)' cannot be read", table: d.name)
            }
            tables[Identifier.fold(d.name)] = info
        }
        return tables
    }

    /// Reloads the catalog when the file's schema changed since it was loaded: another process, or
    /// another store instance on the same file, defined or changed a table. Costs one cached
    /// `PRAGMA schema_version` per call; the full reload only happens after a schema change. The
    /// version is read before the catalog, so a change in between only causes one more reload later.
    func refreshCatalog(_ c: Connection) throws {
        if try c.schemaVersion() == catalogSchemaVersion.load(ordering: .acquiring) { return }
        try catalogReload.withLock {
            guard let version = try c.schemaVersion(),
                version != catalogSchemaVersion.load(ordering: .acquiring)
            else { return }
            let tables = try loadCatalog(c)
            replaceCatalog(tables)
            catalogSchemaVersion.store(version, ordering: .releasing)
        }
    }

    // MARK: Connections

    private func checkOpen() throws {
        if pool.withLock({ isClosedFlag }) { throw LocalStoreError.closed() }
    }

    /// The writer connection, reopened if an earlier failure discarded it. Caller holds `writerLock`.
    private func writerConnection() throws -> Connection {
        guard !writerClosed else { throw LocalStoreError.closed() }
        if let w = writer { return w }
        let w = try openConnection(create: false)
        do {
            try configureWriter(w)
        } catch {
            w.close()
            throw error
        }
        writer = w
        return w
    }

    private func acquireReader() throws -> Connection {
        pool.lock()
        while true {
            if isClosedFlag {
                pool.unlock()
                throw LocalStoreError.closed()
            }
            if let c = idleReaders.popLast() {
                pool.unlock()
                return c
            }
            if openReaders < max(1, configuration.maximumReaderCount) {
                openReaders += 1
                pool.unlock()
                do {
                    let c = try openConnection(create: false)
                    do {
                        try c.executeOnce("PRAGMA query_only = 1")
                    } catch {
                        c.close()
                        throw error
                    }
                    return c
                } catch {
                    pool.withLock {
                        openReaders -= 1
                        pool.broadcast()
                    }
                    throw error
                }
            }
            pool.wait()
        }
    }

    private func releaseReader(_ c: Connection) {
        if c.isInTransaction { try? c.execute("ROLLBACK") }
        pool.withLock {
            if isClosedFlag || c.isInTransaction {
                c.close()
                openReaders -= 1
            } else {
                idleReaders.append(c)
            }
            pool.broadcast()
        }
    }

    /// Runs `body` on a reader connection (outside any transaction).
    private func withReader<R>(_ body: (Session) throws -> R) throws -> R {
        try writerThread.check()
        let c = try acquireReader()
        defer { releaseReader(c) }
        try refreshCatalog(c)
        return try body(Session(engine: self, connection: c))
    }

    /// Runs a short read (`body`) on the writer connection when no write holds it, else on a reader.
    ///
    /// A reader connection drops its whole page cache whenever another connection committed since its
    /// last read (SQLite's WAL rule), so a read that follows a write pays for reading — and on SQLCipher
    /// decrypting and authenticating — every page it touches again. The writer's cache stays valid across
    /// its own commits. Only short reads come here (by id, `top` ≤ 1), so a write waits at most for one.
    private func withShortRead<R>(_ body: (Session) throws -> R) throws -> R {
        try writerThread.check()
        if writerLock.tryLock() {
            defer { writerLock.unlock() }
            if !writerClosed, let w = writer, !w.isInTransaction {
                try checkOpen()
                defer { Self.rollback(w) }
                return try body(Session(engine: self, connection: w))
            }
        }
        return try withReader(body)
    }

    static func rollback(_ c: Connection) {
        if c.isInTransaction { try? c.execute("ROLLBACK") }
    }

    /// Starts a write transaction on the writer, first ending one a failed ROLLBACK may have left.
    /// Caller holds `writerLock`.
    private func beginImmediate(_ w: Connection) throws {
        if w.isInTransaction { Self.rollback(w) }
        try w.run(.beginImmediate)
    }

    /// Rolls back after a failure; when even that fails, closes the writer (closing rolls back) so
    /// that the next write opens a fresh connection. Caller holds `writerLock`.
    private func abandon(_ w: Connection) {
        Self.rollback(w)
        if w.isInTransaction {
            w.close()
            writer = nil
        }
    }

    /// Logs the end of a write transaction at debug level (duration and, on rollback, the error).
    private func logTransaction(_ outcome: String, start: UInt64, error: (any Error)?) {
        guard let logger = configuration.logger, logger.logLevel <= .debug else { return }
        var metadata: Logger.Metadata = [
            "path": "\(path)", "micros": "\((DispatchTime.now().uptimeNanoseconds - start) / 1000)",
        ]
        if let error { metadata["error"] = "\(error)" }
        logger.debug("write transaction \(outcome)", metadata: metadata)
    }

    /// Publishes an unlisted change when another connection committed since the writer last looked
    /// (`PRAGMA data_version`). Caller holds `writerLock`.
    private func noteExternalCommits(_ w: Connection, baseline: Bool = false) {
        guard let version = try? w.scalarInt("PRAGMA data_version") else { return }
        if !baseline, let last = lastDataVersion, last != version { changes.publishUnlistedChange() }
        lastDataVersion = version
    }

    /// The poll of an observed store: looks for other connections' commits unless a write is running
    /// (which looks itself when it begins). With `baseline`, only records the current version.
    private func pollExternalChanges(baseline: Bool) {
        guard changes.isObserved, writerLock.tryLock() else { return }
        defer { writerLock.unlock() }
        guard !writerClosed, let w = writer, !w.isInTransaction else {
            if baseline { lastDataVersion = nil }
            return
        }
        noteExternalCommits(w, baseline: baseline)
    }

    /// Runs `body` in a write transaction on the writer connection.
    private func transaction<R>(implicit: Bool, _ body: (SQLTransaction) throws -> R) throws -> R {
        try writerThread.check()
        return try writerLock.withLock {
            let w = try writerConnection()
            writerThread.set()
            defer { writerThread.clear() }
            try beginImmediate(w)
            let start = DispatchTime.now().uptimeNanoseconds
            do {
                try refreshCatalog(w)
            } catch {
                abandon(w)
                throw error
            }
            let collector = changes.beginTransaction()
            if collector != nil { noteExternalCommits(w) }
            let tx = SQLTransaction(session: Session(engine: self, connection: w), isImplicit: implicit, changes: collector)
            defer { tx.end() }
            do {
                let result = try body(tx)
                tx.end()
                if let failure = tx.failure { throw failure }
                try w.run(.commit)
                changes.publish(tx.changes)
                logTransaction("committed", start: start, error: nil)
                return result
            } catch {
                abandon(w)
                logTransaction("rolled back", start: start, error: error)
                throw error
            }
        }
    }

    // MARK: LocalStore

    package func defineTable(_ schema: TableSchema) throws {
        try writerThread.check()
        try schema.validate()
        guard !systemTableNames.isReserved(schema.name) else {
            throw LocalStoreError(.reservedName, "'\(schema.name)' is the name of a system table", table: schema.name)
        }
        try writerLock.withLock {
            let w = try writerConnection()
            try refreshCatalog(w)
            let existing = tableInfo(schema.name)
            let updated: TableInfo
            if let existing {
                let merged = try existing.schema.merged(with: schema)
                if merged == existing.schema { return }
                updated = TableInfo(schema: merged, sqlName: existing.sqlName, kind: existing.kind)
            } else {
                updated = TableInfo(schema: schema, sqlName: SQLNames.table(for: schema.name), kind: .user)
            }
            try beginImmediate(w)
            do {
                if let existing {
                    for c in updated.schema.columns where existing.schema.index(ofColumn: c.name) == nil {
                        try w.execute(
                            "ALTER TABLE \(updated.quotedName) ADD COLUMN \(TableInfo.columnDefinition(c, isId: false))")
                    }
                } else {
                    try w.execute(updated.createSQL)
                }
                for index in updated.indexes { try w.execute(index.sql) }
                try saveDefinition(updated, on: w)
                try w.run(.commit)
            } catch {
                abandon(w)
                throw error
            }
            catalog.withLock {
                $0[Identifier.fold(updated.schema.name)] = updated
                catalogGeneration.add(1, ordering: .releasing)
            }
        }
    }

    package func tableSchemas() throws -> [TableSchema] {
        try withReader { _ in catalog.withLock { $0.values.filter { $0.kind == .user }.map(\.schema) } }
            .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    }

    package func close() throws {
        try writerThread.check()
        pool.withLock {
            isClosedFlag = true
            for c in idleReaders { c.close() }
            openReaders -= idleReaders.count
            idleReaders = []
        }
        writerLock.withLock {
            writerClosed = true
            writer?.close()
            writer = nil
        }
        // Readers still in use are closed when they come back.
        pool.withLock {
            while openReaders > 0 { pool.wait() }
        }
    }

    /// Whether ``close()`` has run.
    package var isClosed: Bool { pool.withLock { isClosedFlag } }

    /// Opens every reader connection the configuration allows and keeps them idle, so that the open
    /// hook has run on all of them before this returns (SQLCipher wipes its key afterwards).
    package func openAllReaders() throws {
        var opened: [Connection] = []
        defer { for c in opened { releaseReader(c) } }
        for _ in 0..<max(1, configuration.maximumReaderCount) { opened.append(try acquireReader()) }
    }

    /// Runs `body` with the writer's raw connection while no reader connection is open and no other
    /// write can start (for `sqlite3_rekey`). Idle readers are closed first; it is `busy` when a reader
    /// is in use. Readers opened later run the open hook again.
    package func withExclusiveWriter<R>(_ body: (OpaquePointer, SQLiteAPI) throws -> R) throws -> R {
        try writerThread.check()
        return try writerLock.withLock {
            try pool.withLock {
                for c in idleReaders { c.close() }
                openReaders -= idleReaders.count
                idleReaders = []
                guard openReaders == 0 else {
                    throw LocalStoreError(.busy, "\(openReaders) reader connection(s) of '\(path)' are in use")
                }
            }
            let w = try writerConnection()
            return try body(w.db, api)
        }
    }

    /// Copies every committed page from the write-ahead log into the database file and truncates the
    /// log (`PRAGMA wal_checkpoint(TRUNCATE)`); `busy` when readers keep it from completing.
    package func checkpoint() throws {
        try writerThread.check()
        try writerLock.withLock {
            let w = try writerConnection()
            let rows = try w.pragmaRowsAllColumns("PRAGMA wal_checkpoint(TRUNCATE)")
            if let first = rows.first, first.first == "1" {
                throw LocalStoreError(.busy, "the checkpoint of '\(path)' could not complete: a reader holds the log")
            }
        }
    }

    /// Runs each `PRAGMA <name>` (e.g. `integrity_check`) on a reader connection and returns every row
    /// that is not `ok`.
    ///
    /// A check that cannot run to the end because SQLite fails on a page (SQLCipher reports a page whose
    /// HMAC does not match as "SQL logic error") is damage: `corrupt`, with the engine's message.
    package func integrityCheck(pragmas: [String]) throws -> [String] {
        do {
            return try withReader { session in
                var problems: [String] = []
                for pragma in pragmas {
                    for row in try session.connection.pragmaRows("PRAGMA \(pragma)") where row != "ok" {
                        problems.append("\(pragma): \(row)")
                    }
                }
                return problems
            }
        } catch let e as LocalStoreError where e.code == .internal {
            throw LocalStoreError(.corrupt, "the integrity check of '\(path)' could not read the store: \(e.message)")
        }
    }

    package func schema(of table: String) throws -> TableSchema? {
        try withReader { _ in tableInfo(table)?.schema }
    }

    package func read(table: String, id: Value) throws -> Item? {
        try withShortRead { try $0.read(table: table, id: id) }
    }

    package func read(_ query: Query) throws -> ReadResult {
        if let top = query.top, top <= 1, !query.includeTotalCount {
            return try withShortRead { try $0.read(query) }
        }
        return try withReader { try $0.read(query) }
    }

    /// The head of the operation queue after `id`, read with a statement prepared once (see
    /// `SystemTableReadShortcuts`); a short read.
    package func firstOperation(after id: Int64) throws -> TableOperation? {
        try withShortRead { try $0.firstOperation(after: id) }
    }

    /// Writes the value of the delta-token `entry` when its row is its pair's only one, in one `UPDATE` that
    /// commits by itself (see `SystemTableStoreShortcuts`); `false` when it wrote nothing.
    ///
    /// What the write transaction around the same statement adds is not needed for it: an autocommit write
    /// statement takes the write lock when it begins (waiting as `BEGIN IMMEDIATE` does, through the busy
    /// handler) and commits or rolls back whole. The catalog is not checked (`PRAGMA schema_version`
    /// outside a transaction costs a read transaction of its own, 3.2 k instructions): the statement names
    /// the config table's columns, which a redefinition never removes or retypes (docs/semantics.md), and
    /// SQLite prepares it again by itself after any schema change. When somebody observes
    /// the store the transaction runs instead, so that its change collector publishes the change as before.
    package func updateSoleDeltaTokenRowAlone(_ entry: TableConfigEntry) throws -> Bool {
        try writerThread.check()
        guard !changes.isObserved else { return false }
        return try writerLock.withLock {
            let w = try writerConnection()
            // A transaction a failed ROLLBACK left open: the transaction path ends it.
            guard !w.isInTransaction else { return false }
            return try Session(engine: self, connection: w).updateSoleDeltaTokenRow(entry)
        }
    }

    /// The operations of one item, read with a statement prepared once (see `SystemTableReadShortcuts`);
    /// a short read.
    package func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        try withShortRead { try $0.itemOperations(table: table, itemId: itemId) }
    }

    /// The operation `id`, read with a statement prepared once; a short read.
    package func operationRow(id: Int64) throws -> [TableOperation]? {
        try withShortRead { try $0.operationRow(id: id) }
    }

    /// The id and value of the config row `id`, read with a statement prepared once; a short read.
    package func configValue(id: String) throws -> Value? {
        try withShortRead { try $0.configValue(id: id) }
    }

    package func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try transaction(implicit: true) { try $0.upsert(items, into: table, options: options) }
    }

    package func delete(ids: [Value], from table: String) throws {
        try writerThread.check()
        if ids.isEmpty {
            try checkOpen()
            if tableInfo(table) == nil { return }
        }
        try transaction(implicit: true) { try $0.delete(ids: ids, from: table) }
    }

    package func delete(matching query: Query) throws {
        try transaction(implicit: true) { try $0.delete(matching: query) }
    }

    package func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try transaction(implicit: false) { try body($0) }
    }

    /// A composite call's transaction (`CompositeWrites`): its calls run without savepoints of their
    /// own, as a single store call's do; a thrown error rolls the whole transaction back.
    package func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try transaction(implicit: true) { try body($0) }
    }

    /// SQLite's query plan for `query` (see `SQLiteStore.explain(_:)`).
    package func explain(_ query: Query) throws -> String {
        try withReader { try $0.queryPlan(query) }.joined(separator: "; ")
    }

    /// The access path a read of `query` takes (see `QueryPlanReporting`), from SQLite's query plan.
    package func accessPath(for query: Query) throws -> QueryAccessPath {
        try withReader { try $0.accessPath(query) }
    }

    /// SQLite's query plans of the system-table statements (tests: each must search an index or the
    /// primary key, not scan), by statement kind; empty when the system tables are not the standard ones.
    package func systemStatementQueryPlans() throws -> [String: [String]] {
        try withReader { session in try session.systemStatements()?.queryPlans(on: session.connection) ?? [:] }
    }

    /// Runs one read-only SQL statement on a reader connection (see `SQLiteStore.query(sql:arguments:)`).
    package func query(sql: String, arguments: [Value]) throws -> [Item] {
        try withReader { try $0.rawQuery(sql, arguments) }
    }

    /// Refuses every action but reading, so a raw query cannot change the file or the connection.
    static let readOnlyAuthorizer: SQLiteAPI.Authorizer = { _, action, _, _, _, _ in
        switch action {
        case SQLite.AUTH_READ, SQLite.AUTH_SELECT, SQLite.AUTH_FUNCTION, SQLite.AUTH_RECURSIVE: return SQLite.OK
        default: return SQLite.DENY
        }
    }
}

/// The transaction handed to a `write {}` body (and used by the store's own single writes).
final class SQLTransaction: LocalStoreTransaction, CompositeWrites {
    let session: Session
    private let lock = PThreadMutex()
    // Guarded by lock.
    /// Above 0 while the calls need no savepoint of their own, a failure undoing more than the call: in
    /// a single store call's own transaction (1 from the start), and while a composite call's body runs
    /// (`performCompositeWrite`, whose savepoint or transaction undoes the whole body).
    private var unguardedDepth: Int
    private var isActive = true
    private var storedFailure: LocalStoreError?
    /// What the transaction changed, when somebody observes the store.
    private var collector: ChangeCollector?

    init(session: Session, isImplicit: Bool, changes: ChangeCollector?) {
        self.session = session
        self.unguardedDepth = isImplicit ? 1 : 0
        self.collector = changes
    }

    /// What the transaction changed (`nil` when nobody observed when it began).
    var changes: ChangeCollector? { lock.withLock { collector } }

    /// The defined name of `table` (for change records).
    private func definedName(_ table: String) -> String { session.engine.tableInfo(table)?.schema.name ?? table }

    var systemTableNames: SystemTableNames { session.engine.systemTableNames }

    /// Set when SQLite rolled the whole transaction back: every later call, and the commit, fail.
    var failure: LocalStoreError? { lock.withLock { storedFailure } }

    func end() { lock.withLock { isActive = false } }

    private var connection: Connection { session.connection }

    /// Runs one call of the transaction. A write call of a `write {}` body runs in a savepoint, so that
    /// a failure undoes this call only — unless `singleStatement`: the call guards itself (a one-item
    /// upsert, see `Session.upsertOne`) or is one `DELETE` by id, which deletes rows and their index
    /// entries only after every check passed (an I/O error rolls the whole transaction back, which
    /// `failure` then reports). A savepoint is not free: the first change of every page inside it copies
    /// the page to the sub-journal, and SQLCipher encrypts each copy (docs/encryption.md).
    private func access<R>(writes: Bool, singleStatement: Bool = false, _ body: () throws -> R) throws -> R {
        try lock.withLock {
            guard isActive else {
                throw LocalStoreError(.misuse, "a transaction was used after its write {} block ended")
            }
            guard session.engine.writerThread.isCurrentThread else {
                throw LocalStoreError(.misuse, "a transaction was used on another thread than the one running its write {} body")
            }
            if let storedFailure { throw storedFailure }
            guard connection.isInTransaction else {
                let e = LocalStoreError(.internal, "sqlite: the transaction was rolled back after an earlier error")
                storedFailure = e
                throw e
            }
            if !writes || unguardedDepth > 0 || singleStatement { return try body() }
            try connection.execute("SAVEPOINT localstore_call")
            do {
                let result = try body()
                try connection.execute("RELEASE localstore_call")
                return result
            } catch {
                // Undo this call only; if SQLite already rolled back everything, the transaction is lost.
                do {
                    guard connection.isInTransaction else { throw error }
                    try connection.execute("ROLLBACK TO localstore_call")
                    try connection.execute("RELEASE localstore_call")
                } catch let e {
                    storedFailure = e as? LocalStoreError ?? LocalStoreError(.internal, "\(e)")
                }
                throw error
            }
        }
    }

    func schema(of table: String) throws -> TableSchema? {
        try access(writes: false) { session.engine.tableInfo(table)?.schema }
    }

    func read(table: String, id: Value) throws -> Item? {
        try access(writes: false) { try session.read(table: table, id: id) }
    }

    func read(_ query: Query) throws -> ReadResult {
        try access(writes: false) { try session.read(query) }
    }

    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        // One item guards its own statements (Session.upsertOne): its INSERT needs no savepoint when the
        // new row cannot fail while being written, and its UPDATE gets one only when it runs.
        let single = items.count == 1 && lock.withLock({ unguardedDepth == 0 })
        try access(writes: true, singleStatement: single) {
            if single {
                try session.upsertOne(items[0], into: table, options: options)
            } else {
                try session.upsert(items, into: table, options: options)
            }
            if collector != nil, !items.isEmpty, let schema = session.engine.tableInfo(table)?.schema {
                collector?.upserted(items, schema: schema)
            }
        }
    }

    func delete(ids: [Value], from table: String) throws {
        // Up to the variable limit, one `DELETE … WHERE id IN (…)`.
        try access(writes: true, singleStatement: ids.count <= connection.variableLimit) {
            try session.delete(ids: ids, from: table)
            if collector != nil, !ids.isEmpty { collector?.deleted(ids, in: definedName(table)) }
        }
    }

    func delete(matching query: Query) throws {
        try access(writes: true) {
            try session.delete(matching: query)
            if collector != nil, session.connection.api.changes(session.connection.db) > 0 {
                collector?.changedMany(in: definedName(query.table))
            }
        }
    }

    /// A nested write runs in a savepoint: a thrown error rolls its writes (and its change records)
    /// back and the transaction goes on — so a composite call (enqueue, a resolution, a pulled page)
    /// that fails inside a caller's `write {}` leaves nothing behind, also when the caller catches.
    /// Inside a body whose failure undoes more than it (a single call's transaction, a composite call's
    /// body) it needs none.
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try nestedWrite(composite: false, body)
    }

    /// A composite call inside the transaction (`CompositeWrites`): one savepoint for the whole body,
    /// none for the calls it makes, since the body propagates every error (the savepoint then undoes
    /// all of it).
    func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try nestedWrite(composite: true, body)
    }

    private func nestedWrite<R>(composite: Bool, _ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        let recorded: ChangeCollector?? = try lock.withLock {
            guard isActive else {
                throw LocalStoreError(.misuse, "a transaction was used after its write {} block ended")
            }
            guard session.engine.writerThread.isCurrentThread else {
                throw LocalStoreError(.misuse, "a transaction was used on another thread than the one running its write {} body")
            }
            if let storedFailure { throw storedFailure }
            // Unguarded already: a failure undoes more than this body.
            if unguardedDepth > 0 { return .none }
            try connection.execute("SAVEPOINT localstore_write")
            if composite { unguardedDepth = 1 }
            return .some(collector)
        }
        guard let recorded else { return try body(self) }
        do {
            let result = try body(self)
            try lock.withLock {
                if composite { unguardedDepth = 0 }
                try connection.execute("RELEASE localstore_write")
            }
            return result
        } catch {
            lock.withLock {
                if composite { unguardedDepth = 0 }
                do {
                    guard connection.isInTransaction else { throw error }
                    try connection.execute("ROLLBACK TO localstore_write")
                    try connection.execute("RELEASE localstore_write")
                    collector = recorded
                } catch let e {
                    storedFailure = e as? LocalStoreError ?? LocalStoreError(.internal, "\(e)")
                }
            }
            throw error
        }
    }
}

// MARK: - System-table shortcuts

/// The queue, high-water mark and delta-token conveniences of the core run these inside a transaction:
/// statements prepared once per connection (``SystemStatements``), each call checked and recorded for
/// observers as the generic call it replaces.
extension SQLTransaction: SystemTableShortcuts {
    private var names: SystemTableNames { session.engine.systemTableNames }

    func firstOperation(after id: Int64) throws -> TableOperation? {
        try access(writes: false) { try session.firstOperation(after: id) }
    }

    func configValue(id: String) throws -> Value? {
        try access(writes: false) { try session.configValue(id: id) }
    }

    func largestOperationId() throws -> Int64? {
        try access(writes: false) { try session.largestOperationId() }
    }

    func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        try access(writes: false) { try session.itemOperations(table: table, itemId: itemId) }
    }

    func operationRow(id: Int64) throws -> [TableOperation]? {
        try access(writes: false) { try session.operationRow(id: id) }
    }

    func deltaTokenRowIds(table: String, queryId: String) throws -> [Value] {
        try access(writes: false) { try session.deltaTokenRowIds(table: table, queryId: queryId) }
    }

    func insertOperation(_ operation: TableOperation) throws {
        // As upsert of one item: it guards its own statement (no savepoint).
        try access(writes: true, singleStatement: true) {
            try session.insertOperation(operation)
            if collector != nil { collector?.upserted([.int(operation.id)], in: definedName(names.operations)) }
        }
    }

    func rewriteOperation(_ operation: TableOperation) throws {
        // As insertOperation: one statement (or the upsert, which guards its own).
        try access(writes: true, singleStatement: true) {
            try session.rewriteOperation(operation)
            if collector != nil { collector?.upserted([.int(operation.id)], in: definedName(names.operations)) }
        }
    }

    func appendAtNextOperationId(_ operation: TableOperation) throws -> Int64? {
        // Two statements without a savepoint: the first writes only the mark's value, the second inserts
        // a row under an id no row has (larger than every id), checked for size beforehand — neither can
        // fail halfway or on a constraint; an I/O error rolls the whole transaction back, which `failure`
        // then reports.
        try access(writes: true, singleStatement: true) {
            guard let id = try session.appendAtNextOperationId(operation) else { return nil }
            if collector != nil {
                collector?.upserted([.int(id)], in: definedName(names.operations))
                collector?.upserted([.string(TableConfigEntry.operationIdHighWaterId)], in: definedName(names.config))
            }
            return id
        }
    }

    func storeConfigEntry(_ entry: TableConfigEntry) throws {
        try access(writes: true, singleStatement: true) {
            try session.storeConfigEntry(entry)
            if collector != nil { collector?.upserted([.string(entry.id)], in: definedName(names.config)) }
        }
    }

    func updateSoleDeltaTokenRow(_ entry: TableConfigEntry) throws -> Bool {
        try access(writes: true, singleStatement: true) {
            let updated = try session.updateSoleDeltaTokenRow(entry)
            if updated, collector != nil { collector?.upserted([.string(entry.id)], in: definedName(names.config)) }
            return updated
        }
    }

    func removeOperationErrors(operationId: Int64) throws { try genericRemoveOperationErrors(operationId: operationId) }

    func removeOperationAndErrors(id: Int64) throws {
        guard try access(writes: false, { try session.systemStatements() != nil }) else {
            return try genericRemoveOperationAndErrors(id: id)
        }
        // Two DELETEs without a savepoint: like the DELETE by id, SQLite checks everything before it deletes
        // (no constraint, no trigger can stop either halfway); an I/O error rolls the whole transaction back,
        // which `failure` then reports.
        try access(writes: true, singleStatement: true) {
            guard let system = try session.systemStatements() else { return }
            let deletedErrors = try session.removeOperationAndErrors(id: id, system)
            if collector != nil {
                collector?.deleted([.int(id)], in: definedName(names.operations))
                if deletedErrors { collector?.changedMany(in: definedName(names.errors)) }
            }
        }
    }
}

extension SystemTableNames {
    /// The three names folded (the catalog's keys).
    fileprivate var folded: (operations: String, errors: String, config: String) {
        (Identifier.fold(operations), Identifier.fold(errors), Identifier.fold(config))
    }
}
