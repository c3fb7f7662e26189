import Foundation

/// Reading and writing rows: what a ``LocalStore`` and a ``LocalStoreTransaction`` both offer.
///
/// Implementations must satisfy every rule below; `LocalStoreConformance` checks them.
///
/// - Tables and columns are matched case-insensitively (ASCII); returned items use the defined spelling.
/// - String ids match case-insensitively (ASCII, as SQLite's `NOCASE`) on read, upsert and delete;
///   an update stores the id in its newest spelling.
/// - A read returns every column of the table (null for unset ones) and nothing else; a query with
///   `select` returns exactly the selected columns plus `version` when the table has one.
/// - An unknown table is an `unknownTable` error for every call except `delete(ids:from:)` with an
///   empty list.
/// - Values round-trip exactly (see ``Value``).
/// - Every call validates all of its input before writing anything: a failed call leaves the store as
///   it was.
public protocol LocalStoreAccess {
    /// The names of the operation, error and config tables.
    var systemTableNames: SystemTableNames { get }

    /// The definition of `table`, or `nil` when it is not defined. System tables are included.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func schema(of table: String) throws -> TableSchema?

    /// The row of `table` whose id is `id`, or `nil` (no error) when there is none.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func read(table: String, id: Value) throws -> Item?

    /// The rows `query` selects, and their total count when the query asks for it.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func read(_ query: Query) throws -> ReadResult

    /// Inserts or updates `items` by id with merge semantics: keys absent from an item keep their
    /// stored values, an explicit null clears the column. The batch is all-or-nothing; an empty
    /// batch is a no-op (on a known table).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws

    /// Deletes the rows with these ids; ids not present are ignored.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func delete(ids: [Value], from table: String) throws

    /// Deletes exactly the rows `query` would return (predicate, order, skip and top honoured).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func delete(matching query: Query) throws

    /// Runs `body` so that all of its writes commit together or not at all. Callers use
    /// ``LocalStoreAccess/write(_:)``; backends implement this.
    ///
    /// On a store this is a new write transaction (a thrown error rolls all of it back). On a
    /// transaction it runs `body` inside that transaction as a savepoint: a thrown error undoes the
    /// body's writes (and their change records) and the transaction goes on. That is what makes every
    /// composite call (``LocalStoreAccess/enqueue(_:_:into:)``, a resolution, a pulled page, a batch)
    /// atomic inside a caller's transaction; the conformance checks `writeNestedIsASavepoint` and
    /// `nestedTypedCallsAreAtomic` hold a backend to it.
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R
}

extension LocalStoreAccess {
    /// Runs `body` so that all of its writes commit together or not at all: on a store, one write
    /// transaction that a thrown error rolls back entirely; on a transaction, a savepoint that a thrown
    /// error rolls back (the enclosing transaction goes on).
    ///
    /// ```swift
    /// try store.write { tx in
    ///     try tx.upsert([item], into: "TodoItem")
    ///     _ = try tx.appendOperation(table: "TodoItem", itemId: "a1")
    /// }
    /// ```
    ///
    /// In an `async` context the `async` overload on ``LocalStore`` is chosen, which runs the
    /// transaction on a thread outside Swift's cooperative pool.
    @_disfavoredOverload
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    @inlinable public func write<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try performWrite(body)
    }
}

/// The view of a store inside ``LocalStore/write(_:)``. Valid only during the call that received it.
public protocol LocalStoreTransaction: LocalStoreAccess {}

/// A local store for an offline-sync client: user tables plus the three system tables.
///
/// The Linux counterpart of the Azure Mobile Apps iOS SDK's `MSSyncContextDataSource`. A store is
/// `Sendable`; its methods are synchronous, throwing and callable from any thread. Reads may run
/// concurrently with each other; whether they also run during a write transaction depends on the
/// backend (the persistent backends allow it; the in-memory backend makes them wait).
///
/// Every implementation must satisfy the contract of ``LocalStoreAccess`` and:
/// - The three system tables exist from the moment the store is opened.
/// - ``defineTable(_:)`` creates a table, or adds the new columns and indexes of a repeated
///   definition (existing rows read null for new columns). Changing a column's type or the id's type
///   is `schemaConflict`; a system table's name is `reservedName`; a bad name is `invalidIdentifier`.
/// - After ``close()`` every call fails with `closed` and the store's files are released.
/// - Every committed write transaction that changed something is published through
///   ``changeCenter`` after its commit, in commit order; a rolled-back one never is.
public protocol LocalStore: LocalStoreAccess, Sendable {
    /// Creates `schema`'s table or adds its new columns and indexes to the existing one.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func defineTable(_ schema: TableSchema) throws

    /// The definitions of all user tables (system tables excluded), sorted by name.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func tableSchemas() throws -> [TableSchema]

    /// Closes the store. Further calls fail with `closed`; closing twice is allowed.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func close() throws

    /// Where the store publishes its committed changes (see ``changes()``, ``observe(_:)`` and
    /// docs/observation.md). A backend publishes every committed write transaction through it, in
    /// commit order and only after the commit, and calls ``ChangeCenter/finish()`` on close.
    var changeCenter: ChangeCenter { get }
}

// MARK: - Conveniences

extension LocalStoreAccess {
    /// The operations table's name (`MS_TableOperations` by default).
    public var operationTableName: String { systemTableNames.operations }
    /// The errors table's name (`MS_TableOperationErrors` by default).
    public var errorTableName: String { systemTableNames.errors }
    /// The config table's name (`MS_TableConfig` by default).
    public var configTableName: String { systemTableNames.config }

    /// The system properties `table` has as columns; empty for an unknown table.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func systemProperties(for table: String) throws -> Set<SystemProperty> {
        try schema(of: table)?.systemProperties ?? []
    }

    /// The row of `table` with the string id `id`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(table: String, id: String) throws -> Item? { try read(table: table, id: .string(id)) }

    /// Upserts with strict column checking.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func upsert(_ items: [Item], into table: String) throws {
        try upsert(items, into: table, options: .strict)
    }

    /// Deletes the rows with these string ids.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(ids: [String], from table: String) throws {
        try delete(ids: ids.map(Value.string), from: table)
    }

    /// The number of rows matching `predicate` in `table`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func count(_ table: String, where predicate: QueryPredicate? = nil) throws -> Int {
        try read(Query(table, where: predicate, top: 0, includeTotalCount: true)).totalCount ?? 0
    }

    // MARK: Operations

    /// Appends an operation with the next id and returns it. Ids strictly increase for the life of the
    /// store, starting at 1: the next id is one more than both the largest id in the table and the
    /// highest id ever given out (a high-water mark in the config table, written in the same
    /// transaction), so removing the newest operation never lets its id be given again. When no
    /// larger id exists the call fails with `full` and changes nothing.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func appendOperation(table: String, tableKind: Int = 0, itemId: String, properties: [UInt8] = [])
        throws -> TableOperation
    {
        try compositeWrite { tx in
            var op = TableOperation(id: 0, table: table, tableKind: tableKind, itemId: itemId, properties: properties)
            op.id = try appendOperationRecord(op, in: tx)
            return op
        }
    }

    /// Every pending operation, in id order.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func pendingOperations() throws -> [TableOperation] {
        try read(Query(operationTableName, sort: [SortKey("id")])).items.compactMap(TableOperation.init)
    }

    /// The pending operations of `table`, in id order.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func pendingOperations(table: String) throws -> [TableOperation] {
        try read(Query(operationTableName, where: Field("table") == .literal(.string(table)), sort: [SortKey("id")]))
            .items.compactMap(TableOperation.init)
    }

    /// The pending operations of one item of `table` (item id matched case-insensitively), in id order.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func pendingOperations(table: String, itemId: String) throws -> [TableOperation] {
        if let shortcuts = ShortcutCasts.readShortcuts(self), let ops = try shortcuts.itemOperations(table: table, itemId: itemId) {
            return ops
        }
        return try read(Query(operationTableName, where: Self.itemOperationsPredicate(table: table, itemId: itemId), sort: [SortKey("id")]))
            .items.compactMap(TableOperation.init)
    }

    /// Whether an operation of one item of `table` (item id matched case-insensitively) is queued: one
    /// lookup of the operations table's `(table, itemId)` index, nothing decoded.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func hasPendingOperation(table: String, itemId: String) throws -> Bool {
        if let shortcuts = ShortcutCasts.readShortcuts(self), let ops = try shortcuts.itemOperations(table: table, itemId: itemId) {
            return !ops.isEmpty
        }
        return try count(operationTableName, where: Self.itemOperationsPredicate(table: table, itemId: itemId)) > 0
    }

    /// For each of `itemIds`, whether an operation of `table` is queued for it (as
    /// ``hasPendingOperation(table:itemId:)`` answers), one flag per id: in one call when the backend
    /// serves it, else id by id.
    package func pendingFlags(table: String, itemIds: [String]) throws -> [Bool] {
        if let shortcuts = ShortcutCasts.readShortcuts(self), let flags = try shortcuts.pendingItems(table: table, itemIds: itemIds),
            flags.count == itemIds.count
        {
            return flags
        }
        return try itemIds.map { try hasPendingOperation(table: table, itemId: $0) }
    }

    /// The operations of one item of `table`: `table` as bytes, the item id ignoring ASCII case.
    static func itemOperationsPredicate(table: String, itemId: String) -> QueryPredicate {
        Field("table") == .literal(.string(table)) && Field("itemId").equalsIgnoringCase(.literal(.string(itemId)))
    }

    /// The first operation whose id is greater than `id` (pass 0 for the head of the queue).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func operation(after id: Int64) throws -> TableOperation? {
        if let shortcuts = ShortcutCasts.readShortcuts(self) { return try shortcuts.firstOperation(after: id) }
        return try genericFirstOperation(after: id)
    }

    /// The operation with id `id`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func operation(id: Int64) throws -> TableOperation? {
        if let shortcuts = ShortcutCasts.readShortcuts(self), let rows = try shortcuts.operationRow(id: id) { return rows.first }
        return try read(table: operationTableName, id: .int(id)).flatMap(TableOperation.init)
    }

    /// The number of pending operations.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func pendingOperationCount() throws -> Int { try count(operationTableName) }

    /// Removes the operation `id` together with its errors, atomically.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func removeOperation(id: Int64) throws {
        try compositeWrite { tx in
            if let shortcuts = ShortcutCasts.shortcuts(tx) { return try shortcuts.removeOperationAndErrors(id: id) }
            try tx.genericRemoveOperationAndErrors(id: id)
        }
    }

    // MARK: Errors

    /// Records a push failure.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func recordError(_ error: TableOperationError) throws {
        try upsert([error.item], into: errorTableName, options: .strict)
    }

    /// Every recorded error, ordered by operation id then id.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func operationErrors() throws -> [TableOperationError] {
        try read(Query(errorTableName, sort: [SortKey("operationId")])).items.compactMap(TableOperationError.init)
    }

    /// The errors recorded for operation `operationId`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func operationErrors(operationId: Int64) throws -> [TableOperationError] {
        try read(Query(errorTableName, where: Field("operationId") == .literal(.int(operationId))))
            .items.compactMap(TableOperationError.init)
    }

    /// Removes one error.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func removeError(id: String) throws { try delete(ids: [.string(id)], from: errorTableName) }

    /// Removes every error.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func clearErrors() throws { try delete(matching: Query(errorTableName)) }

    // MARK: Config and delta tokens

    // deltaToken(table:queryId:), setDeltaToken, removeDeltaToken, deltaTokens(table:),
    // removeDeltaTokens(table:) and migrateDeltaTokenRows() are in DeltaTokens.swift.

    /// Every config entry, ordered by table then key.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func configEntries() throws -> [TableConfigEntry] {
        try read(Query(configTableName, sort: [SortKey("table"), SortKey("key")])).items.compactMap(TableConfigEntry.init)
    }
}

/// A store that can check its own files for damage (`PRAGMA integrity_check`, a full LMDB traversal, ...).
public protocol IntegrityChecking {
    /// Reads the whole store and returns a description of every problem found; empty when it is sound.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func checkIntegrity() throws -> [String]
}

extension IntegrityChecking {
    /// Checks the whole store and throws when it is damaged: the typed form of ``checkIntegrity()``.
    ///
    /// Damage is always `corrupt` — whether the engine stops on a damaged page or the check completes and
    /// lists problems — so a caller that only needs "is this store sound" switches on one code:
    ///
    /// ```swift
    /// do {
    ///     try store.verifyIntegrity()
    /// } catch let error as LocalStoreError where error.code == .corrupt {
    ///     // restore from a backup, or delete the store and pull everything again
    /// }
    /// ```
    ///
    /// - Throws: `corrupt` naming the number of problems and the first few of them; any other error the
    ///   check itself throws (`closed`, `busy`, `ioError`...) as it comes.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func verifyIntegrity() throws {
        let problems = try checkIntegrity()
        if let error = IntegrityReport.error(for: problems) { throw error }
    }
}

/// The `corrupt` error that reports an integrity check's problems.
enum IntegrityReport {
    /// How many problems the message quotes.
    static let quoted = 5

    static func error(for problems: [String]) -> LocalStoreError? {
        guard !problems.isEmpty else { return nil }
        let shown = problems.prefix(quoted).map { $0.count > 300 ? String($0.prefix(300)) + "…" : $0 }
        let more = problems.count > quoted ? "; and \(problems.count - quoted) more" : ""
        return LocalStoreError(
            .corrupt,
            "the integrity check found \(problems.count) problem\(problems.count == 1 ? "" : "s"): "
                + shown.joined(separator: "; ") + more)
    }
}
