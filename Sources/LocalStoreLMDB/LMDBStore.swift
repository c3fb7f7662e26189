import CLMDB
import Foundation
import LocalStore
import LocalStoreKV
import Logging
import Synchronization

/// How an ``LMDBStore`` is opened (also spelled `LMDBStore.Options`).
///
/// The same names as `SQLiteStore.Options` and `SQLCipherStore.Options` for what they share:
/// ``durability`` and ``maximumReaders``; the system table names are an argument of
/// ``LMDBStore/init(path:systemTableNames:options:logger:)``, as on every backend.
public struct LMDBStoreOptions: Sendable, Hashable {
    /// How much a commit waits for the disk (default `StoreDurability.full`):
    /// - `StoreDurability.full`: every commit flushes data and meta page before it returns; a
    ///   committed write survives a crash of the process *and* of the operating system.
    /// - `StoreDurability.normal`: `MDB_NOMETASYNC`: data pages are flushed, the meta page is not.
    ///   An operating-system crash (or power loss) may lose the last committed transactions; the
    ///   store stays intact. A process crash loses nothing.
    /// - `StoreDurability.off`: `MDB_NOSYNC`: nothing is flushed at commit; the operating system
    ///   writes when it likes. An operating-system crash may lose recent transactions and, on file
    ///   systems that reorder writes, damage the store. A process crash loses nothing. Call
    ///   ``LMDBStore/sync()`` at safe points to bound the risk (closing the last store on the
    ///   environment also flushes).
    public var durability: StoreDurability
    /// The map size the environment starts with, in bytes. Only a starting point: the map grows
    /// on its own whenever it is full (you never need to choose a size). Reopening keeps the
    /// grown size.
    public var initialMapSize: Int
    /// The most LMDB databases the environment may hold: one per table plus one per index (the
    /// system tables take six). Exceeding it is a `full` error.
    public var maximumDatabases: Int
    /// The most read transactions that may be open at once across all processes (LMDB's reader
    /// table); beyond it reads fail with `readersFull`.
    public var maximumReaders: Int
    /// System table names given through the deprecated ``systemTableNames`` (0.1.0 spelling).
    var legacySystemTableNames: SystemTableNames?
    /// How long a write waits while another process writes to the store before it fails with `busy`
    /// (default 5 seconds, like the SQL backends' busy timeout). Writers of one process queue without
    /// a limit, as on the SQL backends. Only LocalStore processes take part: a program writing with
    /// liblmdb directly is waited for in LMDB's own lock, without a timeout.
    public var busyTimeout: Duration
    /// Whether opening walks every page of the store in a forked child process first, as
    /// ``LMDBStore/checkIntegrity()`` does, before this process reads any (default `false`). liblmdb
    /// keeps no page checksums and can abort or fault on a damaged page; with this option a store
    /// damaged before it is opened is a `corrupt` error from the initializer instead of a process ended
    /// by a signal. It costs a fork and a read of every page on each open (docs/lmdb.md, "Damaged
    /// pages"); damage that appears while the store is open is not caught.
    public var verifyPagesOnOpen: Bool

    /// Creates options; every parameter has a safe default.
    public init(
        durability: StoreDurability = .full, initialMapSize: Int = 16 << 20, maximumDatabases: Int = 1024,
        maximumReaders: Int = 126, busyTimeout: Duration = .seconds(5), verifyPagesOnOpen: Bool = false
    ) {
        self.verifyPagesOnOpen = verifyPagesOnOpen
        self.busyTimeout = busyTimeout
        self.durability = durability
        self.initialMapSize = initialMapSize
        self.maximumDatabases = maximumDatabases
        self.maximumReaders = maximumReaders
    }
}

/// A persistent `LocalStore` on the system's LMDB (liblmdb): one LMDB environment (a directory)
/// per store, one LMDB database per table and per index.
///
/// - Reads run in LMDB read transactions: a consistent snapshot, from any thread, never blocked by
///   the writer and never blocking it.
/// - `write {}` is one LMDB write transaction. Writers are serialised (also across processes).
///   Calling the store itself from inside the body (instead of the transaction) is `misuse`.
/// - The map grows by itself. When a write finds it full, the transaction is rolled back, the map
///   doubled and the writes made so far are replayed; the body is not run again. Only when another
///   *process* commits to the same store during that growth is the body run once more from the
///   start (on the new state) — so a body should keep side effects outside the store idempotent,
///   as with any retried transaction.
/// - ``explain(_:)`` tells which plan a query gets.
///
/// Opening the same directory twice in one process shares one environment; its files are released
/// when the last of those stores is closed.
///
/// ```swift
/// let store = try LMDBStore(path: directory.appendingPathComponent("store.lmdb").path)
/// try store.defineTable(TableSchema("TodoItem", ["id": .string, "text": .string, "done": .boolean], indexed: ["done"]))
/// try store.upsert([["id": "1", "text": "Buy milk", "done": false]], into: "TodoItem")
/// ```
public final class LMDBStore: LocalStore, QueryPlanReporting {
    /// The names of the system tables.
    public let systemTableNames: SystemTableNames
    /// The environment directory.
    public let path: String
    /// The options the store was opened with (for a shared environment, the first opener's
    /// durability and limits apply).
    public let options: LMDBStoreOptions
    /// The stale reader slots (left by crashed processes) cleared when the store was opened.
    public let clearedStaleReaders: Int

    let environment: Environment
    /// Whether the store is closed, with what the external-change probe reads (the probe holds this
    /// object, weakly, never the store: see ``ProbeState``).
    private let state: ProbeState
    /// Where committed changes are published (see docs/observation.md): commits of other processes
    /// (or other store objects on the same directory) are noticed when this store writes or reads,
    /// and every 100 ms while observed.
    public let changeCenter = ChangeCenter()
    let changeTracker: CommitTracker
    /// Where queries (plan and duration, at trace) and write transactions (duration, at debug) are logged.
    private let logger: Logger?

    /// Opens (or creates) the store in the directory `path`.
    ///
    /// - Throws: `notADatabase` when `path` is a file, a directory holding other files, or an
    ///   environment LocalStore did not write; `versionMismatch` for a store of another format or
    ///   LMDB version; `corrupt` for a damaged one; `readOnly`/`ioError` when it cannot be created;
    ///   `invalidValue` when `systemTableNames` and the deprecated `options.systemTableNames` disagree.
    /// - Parameters:
    ///   - path: the environment directory (created when it does not exist).
    ///   - systemTableNames: the names of the system tables.
    ///   - options: durability, map size and limits.
    ///   - logger: where to log (swift-log): each query's plan and duration at `trace`, write
    ///     transactions at `debug`. Values are never logged.
    public init(
        path: String, systemTableNames: SystemTableNames = .default, options: LMDBStoreOptions = LMDBStoreOptions(),
        logger: Logger? = nil
    ) throws {
        self.logger = logger
        var names = systemTableNames
        if let legacy = options.legacySystemTableNames, legacy != systemTableNames {
            guard systemTableNames == .default else {
                throw LocalStoreError(
                    .invalidValue,
                    "system table names given twice and different: \(Self.describe(systemTableNames)) (systemTableNames:) and "
                        + "\(Self.describe(legacy)) (the deprecated options.systemTableNames)")
            }
            names = legacy
        }
        try names.validate()
        if options.verifyPagesOnOpen, FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent("data.mdb")) {
            try ChildWalk.run(path: path, maximumDatabases: options.maximumDatabases)
        }
        let (environment, cleared) = try Environment.acquire(path: path, options: options)
        do {
            try LMDBSystemTables.ensure(names, in: environment)
        } catch {
            environment.release()
            throw error
        }
        self.environment = environment
        let changeTracker = CommitTracker(center: changeCenter)
        self.changeTracker = changeTracker
        state = ProbeState(environment: environment, changeTracker: changeTracker)
        self.clearedStaleReaders = cleared
        self.systemTableNames = names
        self.path = path
        self.options = options
        changeCenter.setExternalChangeProbe(interval: Self.externalChangePollInterval) { [weak state = self.state] baseline in
            guard let state, !state.isClosed.load(ordering: .acquiring),
                let last = state.environment.lastCommittedTxnId()
            else { return }
            state.changeTracker.sawCommitted(last, baseline: baseline)
        }
    }

    private static func describe(_ names: SystemTableNames) -> String {
        "'\(names.operations)', '\(names.errors)', '\(names.config)'"
    }

    /// How often an observed store looks for commits made elsewhere when it neither writes nor reads.
    static let externalChangePollInterval: Duration = .milliseconds(100)

    deinit {
        if !state.isClosed.exchange(true, ordering: .acquiringAndReleasing) { environment.release() }
        changeCenter.finish()
    }

    func checkOpen() throws {
        try environment.writer.check()
        if state.isClosed.load(ordering: .acquiring) { throw LocalStoreError.closed() }
    }

    // MARK: LocalStore

    /// Creates `schema`'s table, or adds its new columns and indexes to the existing one (new
    /// indexes are built from the existing rows in the same transaction).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func defineTable(_ schema: TableSchema) throws {
        try checkOpen()
        try schema.validate()
        guard !systemTableNames.isReserved(schema.name) else {
            throw LocalStoreError(.reservedName, "'\(schema.name)' is the name of a system table", table: schema.name)
        }
        try environment.write(tracker: changeTracker) { try $0.perform(.define(schema, system: nil)) }
    }

    /// The definitions of all user tables, sorted by name.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func tableSchemas() throws -> [TableSchema] {
        try checkOpen()
        return try environment.read { context in
            context.catalog.tables.values.map(\.schema).filter { !systemTableNames.isReserved($0.name) }
                .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        }
    }

    /// Closes the store. Once the last store of this process on the directory is closed, the
    /// environment is closed (after in-flight reads finish) and its files are released.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func close() throws {
        try environment.writer.check()
        if !state.isClosed.exchange(true, ordering: .acquiringAndReleasing) { environment.release() }
        changeCenter.finish()
    }

    /// The definition of `table` (system tables included), or `nil`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func schema(of table: String) throws -> TableSchema? {
        try checkOpen()
        return try environment.read { $0.schema(of: table) }
    }

    /// The row of `table` whose id is `id` (NOCASE for string ids), or `nil`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(table: String, id: Value) throws -> Item? {
        try checkOpen()
        if ReadByIdPlan.needsContext(id) {
            // A long id: the few keys sharing its stored prefix are compared (``TxnContext/findRow``).
            return try environment.read(tracker: changeTracker) { try $0.read(table: table, id: id) }
        }
        // The table's definition, handle and item builder come from the plan cached for the snapshot's
        // catalog generation (no folding, hashing or handle lookup per read).
        return try environment.readItem(table: table, id: id, tracker: changeTracker)
    }

    /// The rows `query` selects, in one consistent snapshot; see ``explain(_:)`` for the plan.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(_ query: Query) throws -> ReadResult {
        try checkOpen()
        guard let logger, logger.logLevel <= .trace else {
            return try environment.read(tracker: changeTracker) { try $0.read(query) }
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let (result, plan) = try environment.read(tracker: changeTracker) { context in (try context.read(query), try context.explain(query)) }
        logger.trace(
            "query",
            metadata: [
                "table": "\(query.table)", "plan": "\(plan)", "rows": "\(result.items.count)",
                "micros": "\((DispatchTime.now().uptimeNanoseconds - start) / 1000)", "path": "\(path)",
            ])
        return result
    }

    /// Inserts or updates `items` by id with merge semantics, all-or-nothing, in one transaction.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try checkOpen()
        if items.isEmpty {
            _ = try environment.read { try $0.table(table) }
            return
        }
        try environment.write(tracker: changeTracker) { try $0.perform(.upsert(items, table: table, options: options)) }
    }

    /// Deletes the rows with these ids (absent ones are ignored), in one transaction.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(ids: [Value], from table: String) throws {
        try checkOpen()
        if ids.isEmpty { return }
        try environment.write(tracker: changeTracker) { try $0.perform(.deleteIds(ids, table: table)) }
    }

    /// Deletes exactly the rows `query` returns, in one transaction.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(matching query: Query) throws {
        try checkOpen()
        try environment.write(tracker: changeTracker) { try $0.perform(.deleteMatching(query)) }
    }

    /// Runs `body` in one LMDB write transaction: everything it writes through the transaction
    /// commits together, or nothing does when it throws.
    ///
    /// Callers use `write(_:)`. The transaction may be used only on the calling thread and only during the call. If the map
    /// has to grow, the writes made so far are replayed into a new transaction and `body` goes on;
    /// only if another process commits during that growth is `body` run again from the start.
    public func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try checkOpen()
        let names = systemTableNames
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let result = try environment.write(tracker: changeTracker) { context in
                let tx = LMDBTransaction(context: context, systemTableNames: names)
                defer { tx.isActive = false }
                return try body(tx)
            }
            logWrite("committed", start: start, error: nil)
            return result
        } catch {
            logWrite("rolled back", start: start, error: error)
            throw error
        }
    }

    private func logWrite(_ outcome: String, start: UInt64, error: (any Error)?) {
        guard let logger, logger.logLevel <= .debug else { return }
        var metadata: Logger.Metadata = [
            "path": "\(path)", "micros": "\((DispatchTime.now().uptimeNanoseconds - start) / 1000)",
        ]
        if let error { metadata["error"] = "\(error)" }
        logger.debug("write transaction \(outcome)", metadata: metadata)
    }

    // MARK: LMDB specifics

    /// Describes how `query` would be answered: `"primary key"` (id lookups), `"primary key
    /// range"`, `"index <column>"` (`"index (a, b)"` for a composite index), `"ordered index
    /// <column>"` / `"ordered primary key"` (a walk in sort order that stops after skip + top
    /// rows), `"full scan"`, or `"empty"` (the predicate is always false). A compound index of the
    /// schema reads `"[ordered ]index <name>(<a>, <b> desc) using <n> of <m> columns"` (the leading
    /// columns the query uses), and a count it answers exactly `"index-only count <name>(…) using …"`.
    public func explain(_ query: Query) throws -> String {
        try checkOpen()
        return try environment.read { try $0.explain(query) }
    }

    /// The access path a read of `query` takes (see `QueryPlanReporting`): the planner's choice that
    /// ``explain(_:)`` describes.
    public func accessPath(for query: Query) throws -> QueryAccessPath {
        try checkOpen()
        return try environment.read { try $0.accessPath(query) }
    }

    /// Writes a compacted copy of the store (free pages omitted) into the directory `path`, which
    /// must not hold a store already. The copy is a consistent snapshot; writers are not blocked.
    public func compact(to path: String) throws {
        try checkOpen()
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw LocalStoreError(.invalidValue, "cannot compact into '\(path)': it is a file")
            }
            if FileManager.default.fileExists(atPath: path + "/data.mdb") {
                throw LocalStoreError(.invalidValue, "cannot compact into '\(path)': it already holds a store")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw LocalStoreError(.ioError, "cannot create '\(path)': \(error.localizedDescription)")
            }
        }
        try environment.withEnvironment { env in
            try LMDBErrors.check(mdb_env_copy2(env, path, UInt32(MDB_CP_COMPACT)), "cannot write a compacted copy to '\(path)'")
        }
    }

    /// Flushes committed transactions to disk (useful with `StoreDurability.off` or
    /// `StoreDurability.normal`).
    public func sync() throws {
        try checkOpen()
        try environment.withEnvironment { env in
            try LMDBErrors.check(mdb_env_sync(env, 1), "cannot flush the store")
        }
    }

    /// Clears reader slots left by processes that died with a read transaction open and returns
    /// how many were cleared (opening a store does this too; see ``clearedStaleReaders``).
    public func clearStaleReaders() throws -> Int {
        try checkOpen()
        return try environment.withEnvironment { env in
            var dead: Int32 = 0
            try LMDBErrors.check(mdb_reader_check(env, &dead), "cannot check the reader table")
            return Int(dead)
        }
    }

    /// The process ids of the reader slots holding a snapshot (live or stale), from LMDB's reader
    /// table. Slots of reset transactions kept for reuse (no snapshot; their `txnid` is `-`) are left out.
    func readerSlotProcesses() throws -> [Int32] {
        try checkOpen()
        return try environment.withEnvironment { env in
            final class Lines { var text: [String] = [] }
            let lines = Lines()
            mdb_reader_list(
                env,
                { message, context in
                    if let message, let context { Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().text.append(String(cString: message)) }
                    return 0
                }, Unmanaged.passUnretained(lines).toOpaque())
            // Lines are "    pid     thread     txnid" (a header) and "<pid> <thread> <txnid>".
            return lines.text.compactMap { line in
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
                guard fields.count >= 3, fields[2] != "-" else { return nil }
                return Int32(fields[0])
            }
        }
    }

    /// The current size of the memory map in bytes (it grows on its own).
    public func mapSize() throws -> Int {
        try checkOpen()
        return try environment.withEnvironment { _ in environment.mapSize }
    }
}

/// The transaction handed to a ``LMDBStore/write(_:)`` body.
final class LMDBTransaction: LocalStoreTransaction {
    let context: TxnContext
    let systemTableNames: SystemTableNames
    /// Atomic: a misused transaction may be checked from another thread.
    private let active = Atomic<Bool>(true)

    init(context: TxnContext, systemTableNames: SystemTableNames) {
        self.context = context
        self.systemTableNames = systemTableNames
    }

    var isActive: Bool {
        get { active.load(ordering: .acquiring) }
        set { active.store(newValue, ordering: .releasing) }
    }

    /// The context, after the checks every call of the transaction makes.
    func checkedContext() throws -> TxnContext { try check() }

    private func check() throws -> TxnContext {
        guard isActive else { throw LocalStoreError(.misuse, "a transaction was used after its write {} block ended") }
        guard context.environment.writer.isCurrentThread else {
            throw LocalStoreError(.misuse, "a transaction was used on another thread than the one running its write {} body")
        }
        if context.needsRestart { throw RestartSignal() }
        if let failure = context.failure { throw failure }
        return context
    }

    func schema(of table: String) throws -> TableSchema? { try check().schema(of: table) }

    func read(table: String, id: Value) throws -> Item? { try check().read(table: table, id: id) }

    func read(_ query: Query) throws -> ReadResult { try check().read(query) }

    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try check().perform(.upsert(items, table: table, options: options))
    }

    func delete(ids: [Value], from table: String) throws {
        let context = try check()
        if ids.isEmpty { return }
        try context.perform(.deleteIds(ids, table: table))
    }

    func delete(matching query: Query) throws { try check().perform(.deleteMatching(query)) }

    /// A nested write: on a thrown error the transaction is rolled back to where the body began
    /// (``TxnContext/rollback(to:)``) and goes on — so a composite call that fails inside a caller's
    /// `write {}` leaves nothing behind, also when the caller catches.
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        let context = try check()
        let savepoint = context.savepoint()
        do {
            return try body(self)
        } catch {
            if !(error is RestartSignal) { context.rollback(to: savepoint) }
            throw error
        }
    }
}

/// The system tables' definitions: the schemas of ``SystemTableNames`` plus their indexes.
enum LMDBSystemTables {
    static func definitions(_ names: SystemTableNames) -> [TableDefinition] {
        func make(_ schema: TableSchema, flagged: String, _ components: [IndexDefinition.Component]) -> TableDefinition {
            let flaggedSchema = TableSchema(
                name: schema.name,
                columns: schema.columns.map { Column($0.name, $0.type, indexed: $0.name == flagged) })
            return TableDefinition(
                schema: flaggedSchema, database: TableDefinition.databaseName(table: schema.name),
                indexes: [
                    IndexDefinition(
                        database: TableDefinition.indexName(table: schema.name, components: components), components: components)
                ])
        }
        return [
            // Operations: (table, NOCASE itemId) answers pendingOperations(table:) and (table:itemId:).
            make(names.operationsSchema, flagged: "table", [.init(column: 1, noCase: false), .init(column: 3, noCase: true)]),
            // Errors: operationId.
            make(names.errorsSchema, flagged: "operationId", [.init(column: 1, noCase: false)]),
            // Config: (table, key, keyType) answers the delta-token lookups.
            make(
                names.configSchema, flagged: "table",
                [.init(column: 1, noCase: false), .init(column: 2, noCase: false), .init(column: 3, noCase: false)]),
        ]
    }

    /// Creates the system tables that do not exist yet.
    static func ensure(_ names: SystemTableNames, in environment: Environment) throws {
        let definitions = definitions(names)
        let missing = try environment.read { context -> Bool in
            var missing = false
            for def in definitions {
                if let existing = context.catalog.table(def.schema.name) {
                    guard SystemTableShapes.isCompatible(existing.schema, def.schema) else {
                        throw LocalStoreError(
                            .schemaConflict,
                            "table '\(existing.schema.name)' exists but does not have the columns of a system table",
                            table: existing.schema.name)
                    }
                } else {
                    missing = true
                }
            }
            return missing
        }
        guard missing else { return }
        try environment.write { context in
            for def in definitions { try context.perform(.define(def.schema, system: def)) }
        }
    }
}

/// What the external-change probe of an ``LMDBStore`` reads, apart from the store: the probe's closure
/// references this object (weakly, to stay out of a cycle through the change center), never the store.
/// An object that is weakly referenced gets a side table, and every retain and release of it then takes
/// the Swift runtime's slow path; the store is retained on most calls (its side table cost about 3% of a
/// read by id).
private final class ProbeState: Sendable {
    let environment: Environment
    let changeTracker: CommitTracker
    let isClosed = Atomic<Bool>(false)

    init(environment: Environment, changeTracker: CommitTracker) {
        self.environment = environment
        self.changeTracker = changeTracker
    }
}
