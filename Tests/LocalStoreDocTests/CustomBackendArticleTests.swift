import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreKV
import Testing

// The snippets of "Writing your own backend" (Sources/LocalStore/LocalStore.docc/WritingYourOwnBackend.md),
// verbatim (ArticleSnippetTests checks that): the sample backend, written directly on the protocol, and the
// tests that run the whole conformance suite against it.

/// The data of a ``MyStore``: every table's schema and rows. A value: a write transaction works on a
/// copy, a savepoint is one more copy, and a commit swaps the copy in.
struct MyTables: Sendable {
    struct Table: Sendable {
        var schema: TableSchema
        /// The rows by ``MyTables/key(_:)`` of their id; values in schema order.
        var rows: [Value: [Value]] = [:]
    }

    /// The tables by folded name (`Identifier.fold`): names match case-insensitively.
    var tables: [String: Table] = [:]

    /// A string id matches as SQLite's NOCASE: its key is the bytes of `Collation.noCaseKey` of it (not
    /// the String, whose `==` treats canonically equivalent spellings as one).
    static func key(_ id: Value) -> Value {
        if case .string(let s) = id { return .binary(Array(Collation.noCaseKey(s).utf8)) }
        return id
    }

    func table(_ name: String) throws -> Table {
        guard let table = tables[Identifier.fold(name)] else { throw LocalStoreError.unknownTable(name) }
        return table
    }
}

extension MyTables {
    func read(table name: String, id: Value) throws -> Item? {
        let table = try table(name)
        try table.schema.checkId(id)
        guard let row = table.rows[Self.key(id)] else { return nil }
        return try ResolvedQuery(Query(name), schema: table.schema).project(row)
    }

    func read(_ query: Query) throws -> ReadResult {
        let table = try table(query.table)
        // Resolving checks the query exactly as every backend does; `apply` filters, counts, sorts,
        // pages and projects with the shared evaluator. This engine has no index: it reads every row.
        return try ResolvedQuery(query, schema: table.schema).apply(to: table.rows.values)
    }

    mutating func upsert(_ items: [Item], into name: String, options: UpsertOptions, changes: inout ChangeCollector?) throws {
        var table = try table(name)
        // Check the whole batch before writing any of it: a refused batch changes nothing.
        let prepared = try items.map { try table.schema.prepare($0, options: options) }
        try table.schema.checkMergedSizes(prepared, options: options) { id in
            table.rows[Self.key(id)].map { $0.map(TableSchema.byteCount(of:)) }
        }
        for item in prepared {
            // Merge: absent columns keep their values (null in a new row); the id takes this spelling.
            var row = table.rows[Self.key(item.id)] ?? Array(repeating: .null, count: table.schema.columns.count)
            for assignment in item.assignments { row[assignment.column] = assignment.value }
            table.rows[Self.key(item.id)] = row
        }
        tables[Identifier.fold(name)] = table
        changes?.upserted(prepared.map(\.id), in: table.schema.name)
    }

    mutating func delete(ids: [Value], from name: String, changes: inout ChangeCollector?) throws {
        guard !ids.isEmpty else { return }
        var table = try table(name)
        for id in ids { try table.schema.checkId(id) }
        let removed = ids.compactMap { table.rows.removeValue(forKey: Self.key($0))?[table.schema.idIndex] }
        tables[Identifier.fold(name)] = table
        if !removed.isEmpty { changes?.deleted(removed, in: table.schema.name) }
    }

    mutating func delete(matching query: Query, changes: inout ChangeCollector?) throws {
        var table = try table(query.table)
        let matches = try ResolvedQuery(query, schema: table.schema).select(table.rows.values).rows
        for row in matches { table.rows[Self.key(row[table.schema.idIndex])] = nil }
        tables[Identifier.fold(query.table)] = table
        if !matches.isEmpty { changes?.changedMany(in: table.schema.name) }  // reported as "many rows"
    }

    mutating func define(_ schema: TableSchema, systemTableNames: SystemTableNames) throws {
        guard !systemTableNames.isReserved(schema.name) else {
            throw LocalStoreError(.reservedName, "'\(schema.name)' is the name of a system table", table: schema.name)
        }
        try schema.validate()  // names, column count, the id's type, and the indexes
        guard var table = tables[Identifier.fold(schema.name)] else {
            tables[Identifier.fold(schema.name)] = Table(schema: schema)
            return
        }
        // Columns and indexes are only ever added; a new column is null in every row.
        let merged = try table.schema.merged(with: schema)
        let added = merged.columns.count - table.schema.columns.count
        if added > 0 {
            for (key, row) in table.rows { table.rows[key] = row + Array(repeating: .null, count: added) }
        }
        table.schema = merged
        tables[Identifier.fold(schema.name)] = table
    }
}

/// The transaction a ``MyStore`` write body gets: it works on its own copy of the tables, so its reads
/// see its own writes, and it refuses every call once its body returned or from another thread.
final class MyTransaction: LocalStoreTransaction {
    let systemTableNames: SystemTableNames
    private(set) var tables: MyTables
    /// What the transaction changed, when somebody observes the store.
    private(set) var changes: ChangeCollector?
    private let thread = Thread.current
    private var isActive = true

    init(_ tables: MyTables, systemTableNames: SystemTableNames, changes: ChangeCollector?) {
        self.tables = tables
        self.systemTableNames = systemTableNames
        self.changes = changes
    }

    /// Called by the store when the body returned or threw.
    func end() { isActive = false }

    private func check() throws {
        guard Thread.current === thread else {
            throw LocalStoreError(.misuse, "a transaction was used from another thread than its write body's")
        }
        guard isActive else { throw LocalStoreError(.misuse, "a transaction was used after its write body returned") }
    }

    func schema(of table: String) throws -> TableSchema? {
        try check()
        return tables.tables[Identifier.fold(table)]?.schema
    }
    func read(table: String, id: Value) throws -> Item? {
        try check()
        return try tables.read(table: table, id: id)
    }
    func read(_ query: Query) throws -> ReadResult {
        try check()
        return try tables.read(query)
    }
    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try check()
        try tables.upsert(items, into: table, options: options, changes: &changes)
    }
    func delete(ids: [Value], from table: String) throws {
        try check()
        try tables.delete(ids: ids, from: table, changes: &changes)
    }
    func delete(matching query: Query) throws {
        try check()
        try tables.delete(matching: query, changes: &changes)
    }

    /// A nested write is a savepoint: a thrown error undoes the body's writes, and the transaction goes on.
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try check()
        let (savedTables, savedChanges) = (tables, changes)
        do {
            return try body(self)
        } catch {
            (tables, changes) = (savedTables, savedChanges)
            throw error
        }
    }
}

/// A backend written directly on the protocol. Its engine is a Swift value guarded by a lock: readers
/// take the committed value (a consistent snapshot), one writer at a time works on a copy.
final class MyStore: LocalStore, QueryPlanReporting, @unchecked Sendable {  // the locks guard the state
    let systemTableNames: SystemTableNames
    let changeCenter = ChangeCenter()
    private let lock = NSLock()  // guards `committed`, `isClosed` and `writingThread`
    private let writeLock = NSLock()  // held by the one running write transaction
    private var committed = MyTables()
    private var isClosed = false
    private var writingThread: Thread?

    init(directory: URL, systemTableNames: SystemTableNames = .default) throws {
        try systemTableNames.validate()
        self.systemTableNames = systemTableNames
        // The three system tables exist from the moment the store opens.
        for schema in systemTableNames.schemas {
            committed.tables[Identifier.fold(schema.name)] = MyTables.Table(schema: schema)
        }
    }

    /// The committed tables; `closed` after close, `misuse` from inside this store's own write body
    /// (that thread holds the write lock: waiting for it would deadlock).
    private func current() throws -> MyTables {
        try lock.withLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            guard writingThread !== Thread.current else {
                throw LocalStoreError(.misuse, "the store was called inside its own write body; use the body's transaction")
            }
            return committed
        }
    }

    func schema(of table: String) throws -> TableSchema? { try current().tables[Identifier.fold(table)]?.schema }
    func read(table: String, id: Value) throws -> Item? { try current().read(table: table, id: id) }
    func read(_ query: Query) throws -> ReadResult { try current().read(query) }
    func tableSchemas() throws -> [TableSchema] {
        try current().tables.values.map(\.schema).filter { !systemTableNames.isReserved($0.name) }
            .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    }

    // Each single write is a transaction of its own.
    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try performWrite { try $0.upsert(items, into: table, options: options) }
    }
    func delete(ids: [Value], from table: String) throws { try performWrite { try $0.delete(ids: ids, from: table) } }
    func delete(matching query: Query) throws { try performWrite { try $0.delete(matching: query) } }

    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        _ = try current()
        writeLock.lock()
        defer { writeLock.unlock() }
        let start = try lock.withLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            writingThread = Thread.current
            return committed
        }
        let transaction = MyTransaction(start, systemTableNames: systemTableNames, changes: changeCenter.beginTransaction())
        defer {
            transaction.end()
            lock.withLock { writingThread = nil }
        }
        let result = try body(transaction)
        lock.withLock { committed = transaction.tables }  // the commit
        changeCenter.publish(transaction.changes)  // after the commit, still holding the write lock
        return result
    }

    func defineTable(_ schema: TableSchema) throws {
        _ = try current()
        writeLock.lock()
        defer { writeLock.unlock() }
        try lock.withLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            var tables = committed
            try tables.define(schema, systemTableNames: systemTableNames)  // a refused definition changes nothing
            committed = tables
        }
    }

    func close() throws {
        lock.withLock { isClosed = true }
        changeCenter.finish()
    }

    /// Every query reads every row: this engine has no index.
    func accessPath(for query: Query) throws -> QueryAccessPath {
        _ = try current().table(query.table)
        return .fullScan
    }
}

let factory = StoreFactory(name: "mine", isPersistent: false) { directory in try MyStore(directory: directory) }

@Test(arguments: ConformanceSuite.completeSuite.filter { $0.name != "queriesUseDeclaredIndexes" })
func myStoreConforms(_ check: ConformanceCheck) throws {
    try check.run(factory)
}

@Test(arguments: ConformanceSuite.observationChecks)
func myStoreObservationConforms(_ check: AsyncConformanceCheck) async throws {
    try await check.run(factory)
}

@Test func myStoreIgnoresItsIndexes() throws {
    #expect(throws: ConformanceFailure.self) { try ConformanceSuite.queriesUseDeclaredIndexes(factory) }
}

/// The suite is not vacuous: the same backend, claimed persistent (it forgets everything when it is
/// reopened), fails the persistence check.
@Test func aFalsePersistenceClaimFailsTheSuite() throws {
    let forgetful = StoreFactory(name: "forgetful", isPersistent: true) { directory in try MyStore(directory: directory) }
    #expect(throws: (any Error).self) { try ConformanceSuite.persistenceAcrossReopen(forgetful) }
    try ConformanceSuite.persistenceAcrossReopen(factory)
}

/// The toolkit path: any ordered key-value engine, here the toolkit's reference engine, passes the whole
/// suite — the index check included.
@Test func aKeyValueEngineThroughTheToolkit() throws {
    let toolkit = StoreFactory(name: "kv", isPersistent: false) { _ in try KVStore(engine: InMemoryKVEngine()) }
    try ConformanceSuite.queriesUseDeclaredIndexes(toolkit)
    try ConformanceSuite.storeCallsInsideWriteAreMisuse(toolkit)
}
