import Dispatch
import Logging

/// A ``LocalStore`` that keeps everything in memory: fast, thread-safe, and gone when the process
/// (or ``close()``) ends.
///
/// Reads run concurrently with each other; a write transaction excludes readers until it commits or
/// rolls back, so a reader never sees half of a transaction. Rows are stored column-wise (numbers in
/// arrays, string and binary bytes in one arena per column), about their payload plus a few bytes per
/// column and index; indexes hold row slots, not copies of values. Indexed columns keep an ordered index
/// (a B-tree), so an equality, range, `IN` or prefix filter on an indexed column, or a sort on one
/// with `top`, does not scan and sort the whole table. A compound index (``TableIndex``) keeps a B-tree over
/// composite entries: an equality prefix, a range on the next column and a sort on the columns after it read
/// the index range in order and stop after `skip + top` rows; a count it answers exactly counts entries.
/// ``explain(_:)`` tells which plan a query gets.
public final class InMemoryStore: LocalStore, QueryPlanReporting, @unchecked Sendable {
    /// The names of the system tables.
    public let systemTableNames: SystemTableNames

    private let lock = ReadWriteLock()
    private let writer = WriterThread()
    // Guarded by `lock`.
    private var tables: [String: MemTable] = [:]
    /// The same tables under the spelling their definition first gave (`tables` is keyed by the folded
    /// name): a caller who spells a name as defined finds its table without folding it. Changed with
    /// `tables`, under the write lock.
    private var tablesByDefinedName: [String: MemTable] = [:]
    private var isClosed = false
    /// Committed changes go to the observers through this.
    public let changeCenter = ChangeCenter()

    /// Where queries (plan and duration, at trace) and write transactions (duration, at debug) are logged.
    private let logger: Logger?

    /// Creates an empty store holding only the three system tables.
    ///
    /// - Parameters:
    ///   - systemTableNames: the names of the operation, error and config tables (validated; a bad
    ///     name is an error that names it).
    ///   - logger: where to log (swift-log), as the persistent backends do: each query's plan and
    ///     duration at `trace`, write transactions at `debug`. Values are never logged.
    public init(systemTableNames: SystemTableNames = .default, logger: Logger? = nil) throws {
        try systemTableNames.validate()
        self.systemTableNames = systemTableNames
        self.logger = logger
        let indexed: [(TableSchema, [String])] = [
            (systemTableNames.operationsSchema, ["table"]),
            (systemTableNames.errorsSchema, ["operationId"]),
            (systemTableNames.configSchema, ["table"]),
        ]
        for (schema, columns) in indexed {
            let withIndexes = TableSchema(
                name: schema.name,
                columns: schema.columns.map { Column($0.name, $0.type, indexed: columns.contains($0.name)) })
            let table = MemTable(schema: withIndexes)
            if schema.name == systemTableNames.operations,
                let byItem = CompoundIndex(
                    TableIndex(name: "table_itemId", [.init("table"), .init("itemId")]), schema: withIndexes, noCase: [false, true])
            {
                // An item's operations (enqueue, complete, a pulled page's skip test) found through
                // (table, itemId NOCASE), as the SQL and LMDB backends find them.
                table.addInternalIndex(byItem)
            }
            tables[Identifier.fold(schema.name)] = table
            tablesByDefinedName[schema.name] = table
        }
    }

    // MARK: LocalStore

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func defineTable(_ schema: TableSchema) throws {
        try writer.check()
        try schema.validate()
        guard !systemTableNames.isReserved(schema.name) else {
            throw LocalStoreError(.reservedName, "'\(schema.name)' is the name of a system table", table: schema.name)
        }
        try lock.withWriteLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            let key = Identifier.fold(schema.name)
            if let existing = tables[key] {
                existing.redefine(try existing.schema.merged(with: schema))
            } else {
                let table = MemTable(schema: schema)
                tables[key] = table
                tablesByDefinedName[schema.name] = table
            }
        }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func tableSchemas() throws -> [TableSchema] {
        try writer.check()
        return try lock.withReadLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            return tables.values.map(\.schema).filter { !systemTableNames.isReserved($0.name) }
                .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func close() throws {
        try writer.check()
        lock.withWriteLock {
            isClosed = true
            tables = [:]
            tablesByDefinedName = [:]
        }
        changeCenter.finish()
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func schema(of table: String) throws -> TableSchema? {
        try writer.check()
        return try lock.withReadLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            return tables[Identifier.fold(table)]?.schema
        }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(table: String, id: Value) throws -> Item? {
        try writer.check()
        return try lock.withReadLock { try readUnlocked(table: table, id: id) }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(_ query: Query) throws -> ReadResult {
        try writer.check()
        guard let logger, logger.logLevel <= .trace else {
            return try lock.withReadLock { try readUnlocked(query) }
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let (result, plan) = try lock.withReadLock {
            let (table, resolved) = try resolve(query)
            return (try readUnlocked(query), table.plan(for: resolved).description(schema: table.schema, compound: table.compound.map(\.index)))
        }
        logger.trace(
            "query",
            metadata: [
                "table": "\(query.table)", "plan": "\(plan)", "rows": "\(result.items.count)",
                "micros": "\((DispatchTime.now().uptimeNanoseconds - start) / 1000)",
            ])
        return result
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try write { try $0.upsert(items, into: table, options: options) }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(ids: [Value], from table: String) throws {
        try write { try $0.delete(ids: ids, from: table) }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(matching query: Query) throws {
        try write { try $0.delete(matching: query) }
    }

    public func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try writer.check()
        guard let logger, logger.logLevel <= .debug else { return try performWriteUnlogged(body) }
        let start = DispatchTime.now().uptimeNanoseconds
        func log(_ outcome: String, _ error: (any Error)?) {
            var metadata: Logger.Metadata = ["micros": "\((DispatchTime.now().uptimeNanoseconds - start) / 1000)"]
            if let error { metadata["error"] = "\(error)" }
            logger.debug("write transaction \(outcome)", metadata: metadata)
        }
        do {
            let result = try performWriteUnlogged(body)
            log("committed", nil)
            return result
        } catch {
            log("rolled back", error)
            throw error
        }
    }

    private func performWriteUnlogged<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try lock.withWriteLock {
            guard !isClosed else { throw LocalStoreError.closed() }
            writer.set()
            defer { writer.clear() }
            let tx = Transaction(store: self, changes: changeCenter.beginTransaction())
            defer { tx.isActive = false }
            let result: R
            do {
                result = try body(tx)
            } catch {
                tx.rollback()
                throw error
            }
            tx.commit()
            changeCenter.publish(tx.changes)
            return result
        }
    }

    /// Describes how `query` would be answered: `"primary key"`, `"index <column>"`,
    /// `"ordered index <column>"`, `"full scan"`, or for a compound index
    /// `"[ordered ]index <name>(<a>, <b> desc) using <n> of <m> columns"` and
    /// `"index-only count <name>(…) using <n> of <m> columns"`.
    public func explain(_ query: Query) throws -> String {
        try writer.check()
        return try lock.withReadLock {
            let (table, resolved) = try resolve(query)
            return table.plan(for: resolved).description(schema: table.schema, compound: table.compound.map(\.index))
        }
    }

    /// The access path a read of `query` takes (see ``QueryPlanReporting``): the plan ``explain(_:)``
    /// describes.
    public func accessPath(for query: Query) throws -> QueryAccessPath {
        try writer.check()
        return try lock.withReadLock {
            let (table, resolved) = try resolve(query)
            return table.plan(for: resolved).accessPath(schema: table.schema, compound: table.compound.map(\.index))
        }
    }

    // MARK: Unlocked implementation (caller holds the lock)

    fileprivate func table(_ name: String) throws -> MemTable {
        guard !isClosed else { throw LocalStoreError.closed() }
        // The defined spelling's bytes, not `String`'s `==` (canonical equivalence: a KELVIN SIGN is a `K`).
        if let t = tablesByDefinedName[name], Identifier.isSameSpelling(t.schema.name, name) { return t }
        guard let t = tables[Identifier.fold(name)] else { throw LocalStoreError.unknownTable(name) }
        return t
    }

    fileprivate func resolve(_ query: Query) throws -> (MemTable, ResolvedQuery) {
        let t = try table(query.table)
        return (t, try ResolvedQuery(query, schema: t.schema))
    }

    fileprivate func readUnlocked(table name: String, id: Value) throws -> Item? {
        let t = try table(name)
        try t.checkId(id)
        guard let slot = t.slot(of: id) else { return nil }
        return t.item(slot)
    }

    fileprivate func readUnlocked(_ query: Query) throws -> ReadResult {
        let (t, q) = try resolve(query)
        let selected = t.run(q)
        let builder = ItemBuilder(t, columns: q.projection)
        return ReadResult(items: builder.items(selected.slots), totalCount: q.includeTotalCount ? selected.count : nil)
    }

    /// The transaction handed to a `write {}` body. Logs how to undo every row change it makes so that a
    /// thrown error restores the store exactly; a deleted row keeps its slot and values until the commit.
    final class Transaction: LocalStoreTransaction {
        /// How to undo one row change.
        private enum Undo {
            /// A new row was written into the slot: unlink and free it.
            case inserted(MemTable, Int)
            /// The row in the slot was unlinked (its values kept): link it again.
            case deleted(MemTable, Int)
            /// Columns of the row in the slot changed: these were their values.
            case updated(MemTable, Int, [PreparedItem.Assignment])
        }

        let store: InMemoryStore
        var isActive = true
        private var undo: [Undo] = []
        /// What this transaction changed, when somebody observes the store.
        var changes: ChangeCollector?

        init(store: InMemoryStore, changes: ChangeCollector?) {
            self.store = store
            self.changes = changes
        }

        var systemTableNames: SystemTableNames { store.systemTableNames }

        private func check() throws {
            guard isActive else {
                throw LocalStoreError(.misuse, "a transaction was used after its write {} block ended")
            }
            // The body's thread holds the write lock and set `writer`; any other thread is misuse.
            guard store.writer.isCurrentThread else {
                throw LocalStoreError(.misuse, "a transaction was used on another thread than the one running its write {} body")
            }
        }

        func rollback() { rollback(to: 0) }

        /// Undoes the row changes logged after the first `mark` steps.
        func rollback(to mark: Int) {
            for step in undo[mark...].reversed() {
                switch step {
                case .inserted(let t, let slot):
                    t.unlink(slot)
                    t.release(slot)
                case .deleted(let t, let slot):
                    t.link(slot)
                case .updated(let t, let slot, let before):
                    _ = t.update(slot, before)
                }
            }
            undo.removeSubrange(mark...)
        }

        /// Frees the slots of the rows this transaction deleted and compacts the tables it changed.
        func commit() {
            var touched: [ObjectIdentifier: MemTable] = [:]
            for step in undo {
                switch step {
                case .deleted(let t, let slot):
                    t.release(slot)
                    touched[ObjectIdentifier(t)] = t
                case .inserted(let t, _), .updated(let t, _, _):
                    touched[ObjectIdentifier(t)] = t
                }
            }
            for t in touched.values { t.compact() }
            undo.removeAll()
        }

        private func delete(_ slot: Int, from t: MemTable) {
            t.unlink(slot)
            undo.append(.deleted(t, slot))
        }

        func schema(of table: String) throws -> TableSchema? {
            try check()
            return store.tables[Identifier.fold(table)]?.schema
        }

        func read(table: String, id: Value) throws -> Item? {
            try check()
            return try store.readUnlocked(table: table, id: id)
        }

        func read(_ query: Query) throws -> ReadResult {
            try check()
            return try store.readUnlocked(query)
        }

        func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
            try check()
            let t = try store.table(table)
            let prepared = try items.map { try t.schema.prepare($0, options: options) }
            try t.schema.checkMergedSizes(prepared, options: options) { id in
                t.slot(of: id).map { slot in t.columns.map { $0.byteCount(slot) } }
            }
            for p in prepared {
                if let slot = t.slot(of: p.id) {
                    let before = t.update(slot, p.assignments)
                    if !before.isEmpty { undo.append(.updated(t, slot, before)) }
                } else {
                    undo.append(.inserted(t, t.insert(p.assignments)))
                }
            }
            if changes != nil, !prepared.isEmpty { changes?.upserted(prepared.map(\.id), in: t.schema.name) }
        }

        func delete(ids: [Value], from table: String) throws {
            try check()
            if ids.isEmpty && store.tables[Identifier.fold(table)] == nil && !store.isClosed { return }
            let t = try store.table(table)
            for id in ids { try t.checkId(id) }
            for id in ids {
                if let slot = t.slot(of: id) { delete(slot, from: t) }
            }
            if changes != nil, !ids.isEmpty { changes?.deleted(ids, in: t.schema.name) }
        }

        func delete(matching query: Query) throws {
            try check()
            let (t, q) = try store.resolve(query)
            let slots = t.run(q, ordered: false).slots
            for slot in slots { delete(slot, from: t) }
            if changes != nil, !slots.isEmpty { changes?.changedMany(in: t.schema.name) }
        }

        /// A nested write: a savepoint in the undo log. A thrown error undoes the body's row changes and
        /// its change records, and the transaction goes on.
        func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
            try check()
            let mark = undo.count
            let recorded = changes
            do {
                return try body(self)
            } catch {
                rollback(to: mark)
                changes = recorded
                throw error
            }
        }
    }
}

/// One table of an ``InMemoryStore``, stored column-wise by row slot (``MemColumn``): fixed-width values in
/// arrays, string and binary bytes in one arena per column, a free list of deleted slots. The id map
/// (``MemIdMap``) and the ordered indexes (``SlotTree``) hold slot numbers only and read the values they
/// order from the columns, so a row costs its payload plus a few bytes per column and per index, with no
/// heap object per row or per value. Scans test values in place (booleans and integers in their arrays,
/// string searches in the arena).
///
/// The stored properties opt out of dynamic exclusivity checks for the reason given at ``MemColumn``.
final class MemTable {
    @exclusivity(unchecked) private(set) var schema: TableSchema
    /// The id column's position and type: fixed for the table's life (a redefinition only appends
    /// columns), kept here so a read by id does not copy the schema to ask.
    let idPosition: Int
    let idType: ColumnType
    @exclusivity(unchecked) private(set) var columns: [MemColumn]
    /// The names of every column in schema order, shared by the whole-row items of this definition
    /// (``item(_:)``, queries of all columns); `nil` if the names were not distinct.
    @exclusivity(unchecked) private(set) var layout: ItemLayout?
    /// Whether each slot holds a live row. A row deleted by an uncommitted transaction is not live but
    /// keeps its values (and its slot) until the transaction commits, so a rollback can bring it back.
    @exclusivity(unchecked) private(set) var live: [Bool] = []
    @exclusivity(unchecked) private var freeSlots: [Int] = []
    @exclusivity(unchecked) private var ids = MemIdMap()
    /// The ordered index of each indexed column (entries ordered by value, then id NOCASE).
    @exclusivity(unchecked) private(set) var indexes: [Int: SlotTree] = [:]
    @exclusivity(unchecked) private var indexedColumns: [Int] = []
    /// The compound indexes of the schema, in its order.
    @exclusivity(unchecked) private(set) var compound: [CompoundIndex] = []
    /// Every live row in id order (NOCASE for string ids).
    let idOrder = SlotTree()
    /// The orders of `indexes`, `compound` and `idOrder`, made once. Concrete ``IndexOrder`` values, not
    /// closures: the tree's insertion and removal are specialized for them, so a comparison is a direct
    /// call (closures stored in a collection also went through two conversion thunks per comparison, a
    /// third of a bulk delete's instructions).
    @exclusivity(unchecked) private var columnOrders: [Int: IndexOrder] = [:]
    @exclusivity(unchecked) private var compoundOrders: [IndexOrder] = []
    @exclusivity(unchecked) private var idOrderFunction = IndexOrder(parts: [], id: MemColumn(type: .string, count: 0))

    /// The order of an index: its components (each ascending or descending, nulls first then last as
    /// ``MemColumn/compare(_:_:noCase:)`` orders them), then the id (NOCASE for strings).
    struct IndexOrder: SlotOrdering {
        // The first two components are stored properties (the id column where there is no such component),
        // not optionals or array elements: a class reference unwrapped or read out of an array is retained
        // around the call made on it, on every comparison.
        private let partCount: Int
        private let first: MemColumn
        private let firstDescending: Bool
        private let firstNoCase: Bool
        private let second: MemColumn
        private let secondDescending: Bool
        private let secondNoCase: Bool
        /// The components after the second.
        private let rest: [(column: MemColumn, descending: Bool, noCase: Bool)]
        private let id: MemColumn

        /// `noCase`: per component, whether strings compare as SQLite's NOCASE does (empty: none do).
        init(parts: [(column: MemColumn, descending: Bool)], noCase: [Bool] = [], id: MemColumn) {
            func folds(_ k: Int) -> Bool { k < noCase.count && noCase[k] }
            partCount = parts.count
            first = parts.first?.column ?? id
            firstDescending = parts.first?.descending ?? false
            firstNoCase = folds(0)
            second = parts.count > 1 ? parts[1].column : id
            secondDescending = parts.count > 1 ? parts[1].descending : false
            secondNoCase = folds(1)
            rest = parts.enumerated().dropFirst(2).map { ($0.element.column, $0.element.descending, folds($0.offset)) }
            self.id = id
        }

        @inline(__always) func compare(_ a: UInt32, _ b: UInt32) -> Int {
            if partCount > 0 {
                let r = first.compare(Int(a), Int(b), noCase: firstNoCase)
                if r != 0 { return firstDescending ? -r : r }
                if partCount > 1 {
                    let r = second.compare(Int(a), Int(b), noCase: secondNoCase)
                    if r != 0 { return secondDescending ? -r : r }
                    var k = 0
                    while k < rest.count {
                        let r = rest[k].column.compare(Int(a), Int(b), noCase: rest[k].noCase)
                        if r != 0 { return rest[k].descending ? -r : r }
                        k += 1
                    }
                }
            }
            return id.compare(Int(a), Int(b), noCase: true)
        }
    }

    init(schema: TableSchema) {
        self.schema = schema
        idPosition = schema.idIndex
        idType = schema.idType
        columns = schema.columns.map { MemColumn(type: $0.type, count: 0) }
        layout = ItemLayout(names: schema.columns.map(\.name))
        for (n, c) in schema.columns.enumerated() where c.indexed && n != schema.idIndex {
            indexes[n] = SlotTree()
        }
        indexedColumns = indexes.keys.sorted()
        compound = schema.indexes.compactMap { CompoundIndex($0, schema: schema) }
        makeOrders()
    }

    private func makeOrders() {
        columnOrders = Dictionary(uniqueKeysWithValues: indexedColumns.map { ($0, columnIndexOrder($0)) })
        compoundOrders = compound.map(compoundIndexOrder)
        idOrderFunction = IndexOrder(parts: [], id: idColumn)
    }

    /// The number of live rows.
    var rowCount: Int { ids.count }

    var idColumn: MemColumn { columns[idPosition] }

    /// ``TableSchema/checkId(_:)``, answered without the schema for an id of the id column's kind.
    func checkId(_ id: Value) throws {
        if !TableSchema.isPlainId(id, ofType: idType) { try schema.checkId(id) }
    }

    /// The slot of the live row with id `id` (of the id column's type).
    func slot(of id: Value) -> Int? { ids.find(id, in: idColumn) }

    /// The value of `column` in `slot`.
    @inline(__always) func value(_ slot: Int, _ column: Int) -> Value { columns[column].value(slot) }

    /// The row in `slot` as an item with every column (in row form under ``layout``).
    func item(_ slot: Int) -> Item {
        if let layout { return Item(layout: layout, values: MemColumn.values(slot, of: columns), start: 0) }
        var values: [String: Value] = Dictionary(minimumCapacity: schema.columns.count)
        for (n, c) in schema.columns.enumerated() { values[c.name] = columns[n].value(slot) }
        return Item(values)
    }


    // MARK: Orders

    /// The order of the index of column `n`: its value, then the id.
    func columnIndexOrder(_ n: Int) -> IndexOrder {
        IndexOrder(parts: [(columns[n], false)], id: idColumn)
    }

    /// The order of a compound index: each component ascending or descending (nulls then last), then id.
    func compoundIndexOrder(_ c: CompoundIndex) -> IndexOrder {
        IndexOrder(parts: zip(c.columns, c.descending).map { (columns[$0.0], $0.1) }, noCase: c.noCase, id: idColumn)
    }

    /// A probe for a compound-index bound: compares an entry with `values` on the first components and
    /// places the bound before (`edge` -1) or after (+1) every entry starting with them.
    func compoundProbe(_ c: CompoundIndex, _ values: [Value], edge: Int) -> (UInt32) -> Int {
        // One component (an equality prefix of one column, the list query's case): no loop over parts,
        // and an integer compared on the column's words. A walk calls its bound's probe on every entry.
        if values.count == 1 {
            let column = columns[c.columns[0]]
            let sign = c.descending[0] ? -1 : 1
            let noCase = c.noCase[0]
            if column.type == .integer, case .int(let y) = values[0] {
                return { e in
                    let r = column.compareInt(Int(e), y)
                    return r != 0 ? sign * r : -edge
                }
            }
            let v = values[0]
            return { e in
                let r = column.compare(Int(e), v, noCase: noCase)
                return r != 0 ? sign * r : -edge
            }
        }
        let parts = values.indices.map { (columns[c.columns[$0]], c.descending[$0], values[$0], c.noCase[$0]) }
        return { e in
            for (column, descending, v, noCase) in parts {
                let r = column.compare(Int(e), v, noCase: noCase)
                if r != 0 { return descending ? -r : r }
            }
            return -edge
        }
    }

    /// A probe for a bound of the index of column `n`: before (`edge` -1) or after (+1) the entries of `v`.
    func valueProbe(_ n: Int, _ v: Value, edge: Int) -> (UInt32) -> Int {
        let column = columns[n]
        return { e in
            let r = column.compare(Int(e), v, noCase: false)
            return r != 0 ? r : -edge
        }
    }

    // MARK: Writing

    /// Adopts a merged schema: adds null columns and builds indexes for newly indexed columns.
    func redefine(_ newSchema: TableSchema) {
        for c in newSchema.columns.dropFirst(columns.count) { columns.append(MemColumn(type: c.type, count: live.count)) }
        schema = newSchema
        layout = ItemLayout(names: newSchema.columns.map(\.name))
        for (n, c) in newSchema.columns.enumerated() where c.indexed && n != newSchema.idIndex && indexes[n] == nil {
            let tree = SlotTree()
            let order = columnIndexOrder(n)
            for slot in live.indices where live[slot] { tree.insert(UInt32(slot), by: order) }
            indexes[n] = tree
        }
        indexedColumns = indexes.keys.sorted()
        for index in newSchema.indexes where !compound.contains(where: { $0.index.hasSameKeys(as: index) }) {
            guard let c = CompoundIndex(index, schema: newSchema) else { continue }
            let order = compoundIndexOrder(c)
            for slot in live.indices where live[slot] { c.tree.insert(UInt32(slot), by: order) }
            compound.append(c)
        }
        makeOrders()
    }

    /// Adds a compound index the schema cannot declare (a NOCASE component) to this empty table.
    func addInternalIndex(_ c: CompoundIndex) {
        compound.append(c)
        makeOrders()
    }

    /// Writes a new row (null except `assignments`, which set the id) into a free slot; returns the slot.
    func insert(_ assignments: [PreparedItem.Assignment]) -> Int {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = live.count
            live.append(false)
            for c in columns { c.grow(to: slot + 1) }
        }
        for a in assignments { columns[a.column].set(slot, a.value) }
        link(slot)
        return slot
    }

    /// Sets `assignments` in the live row `slot`; returns the previous values of the columns that changed.
    func update(_ slot: Int, _ assignments: [PreparedItem.Assignment]) -> [PreparedItem.Assignment] {
        var before: [PreparedItem.Assignment] = []
        for a in assignments where !columns[a.column].holds(slot, a.value) {
            before.append(PreparedItem.Assignment(column: a.column, value: columns[a.column].value(slot)))
        }
        guard !before.isEmpty else { return [] }
        let changed = Set(before.map(\.column))
        let idChanged = changed.contains(schema.idIndex)
        // Out of the indexes whose order the change may move it in (compared with the old values), written,
        // then back in.
        let single = indexedColumns.filter { idChanged || changed.contains($0) }
        let multi = compound.indices.filter { c in idChanged || compound[c].columns.contains { changed.contains($0) } }
        let s = UInt32(slot)
        for n in single { if let order = columnOrders[n] { indexes[n]?.remove(s, by: order) } }
        for c in multi { compound[c].tree.remove(s, by: compoundOrders[c]) }
        if idChanged { idOrder.remove(s, by: idOrderFunction) }
        for a in assignments where changed.contains(a.column) { columns[a.column].set(slot, a.value) }
        for n in single { if let order = columnOrders[n] { indexes[n]?.insert(s, by: order) } }
        for c in multi { compound[c].tree.insert(s, by: compoundOrders[c]) }
        if idChanged { idOrder.insert(s, by: idOrderFunction) }
        return before
    }

    /// Takes the live row `slot` out of the id map and the indexes. Its values stay until ``release(_:)``
    /// (at commit), so ``link(_:)`` can bring it back.
    func unlink(_ slot: Int) {
        let s = UInt32(slot)
        for n in indexedColumns { if let order = columnOrders[n] { indexes[n]?.remove(s, by: order) } }
        for c in compound.indices { compound[c].tree.remove(s, by: compoundOrders[c]) }
        idOrder.remove(s, by: idOrderFunction)
        ids.remove(slot, column: idColumn)
        live[slot] = false
    }

    /// Puts the row in `slot` (written, not live) into the id map and the indexes.
    func link(_ slot: Int) {
        let s = UInt32(slot)
        live[slot] = true
        ids.insert(slot, column: idColumn)
        for n in indexedColumns { if let order = columnOrders[n] { indexes[n]?.insert(s, by: order) } }
        for c in compound.indices { compound[c].tree.insert(s, by: compoundOrders[c]) }
        idOrder.insert(s, by: idOrderFunction)
    }

    /// Frees the unlinked `slot`: clears its values and puts it on the free list.
    func release(_ slot: Int) {
        for c in columns { c.set(slot, .null) }
        freeSlots.append(slot)
    }

    /// Rewrites string and binary arenas whose garbage outweighs their live bytes.
    func compact() {
        for c in columns { c.compactIfWorthIt() }
    }

    /// Heap bytes held by the table's columns, id map and slot bookkeeping (not the index trees), for
    /// diagnostics.
    var heapBytes: Int {
        columns.reduce(0) { $0 + $1.heapBytes } + live.capacity + freeSlots.capacity * 8 + ids.heapBytes
    }

    // MARK: Planning

    enum Plan {
        case ids([Value])
        case indexRange(column: Int, ranges: [IndexRange])
        case ordered(column: Int, descending: Bool)
        case idRange(IndexRange)
        case idOrdered(descending: Bool)
        case scan
        /// A compound index: the range `range` of index `index` (of ``compound``), read whole, walked
        /// in order (`order`), or only counted (`countOnly`: the entries are exactly the matches).
        /// `exact`: the range's entries are exactly the matches, so their rows are not tested again.
        case compound(index: Int, range: CompoundRange, order: CompoundOrder?, countOnly: Bool, leading: Int, exact: Bool)

        /// `compound`: the table's compound indexes (``MemTable/compound``: the schema's, then any internal one).
        func description(schema: TableSchema, compound: [TableIndex]) -> String {
            switch self {
            case .compound(let n, _, let order, let countOnly, let leading, _):
                let index = n < compound.count ? compound[n].description : "?"
                let kind = countOnly ? "index-only count" : order != nil ? "ordered index" : "index"
                let total = n < compound.count ? compound[n].keys.count : 0
                return "\(kind) \(index) using \(leading) of \(total) columns"
            case .ids: return "primary key"
            case .indexRange(let n, _): return "index \(schema.columns[n].name)"
            case .ordered(let n, _): return "ordered index \(schema.columns[n].name)"
            case .idRange: return "primary key range"
            case .idOrdered: return "primary key order"
            case .scan: return "full scan"
            }
        }

        /// The plan's ``QueryAccessPath``; `compound` as for ``description(schema:compound:)``.
        func accessPath(schema: TableSchema, compound: [TableIndex]) -> QueryAccessPath {
            switch self {
            case .compound(let n, _, _, _, _, _): return .index(n < compound.count ? compound[n].resolvedName : "?")
            case .ids, .idRange, .idOrdered: return .primaryKey
            case .indexRange(let n, _), .ordered(let n, _): return .index(schema.columns[n].name)
            case .scan: return .fullScan
            }
        }
    }

    struct IndexRange {
        var lower: Value?
        var lowerInclusive: Bool
        var upper: Value?
        var upperInclusive: Bool
        var prefix: String?
    }

    /// A range of a compound index: equal values on its first components, then at most one range
    /// (in value order: a descending component walks it from `upper` to `lower`).
    struct CompoundRange {
        var equal: [Value]
        var lower: Value?
        var lowerInclusive = false
        var upper: Value?
        var upperInclusive = false
        var hasRange: Bool { lower != nil || upper != nil }
    }

    /// How a walk of a compound index's range answers the sort: reversed or not, grouped by the first
    /// `groupComponents` components (each group then sorted by the full order).
    struct CompoundOrder {
        var descending: Bool
        var groupComponents: Int
    }

    /// The best compound index for `parts`: its position, range, walk order and score (2 per equality,
    /// 1 for the range, doubled, plus 1 when it answers the sort), and whether the range holds exactly
    /// the matching rows.
    private func compoundCandidate(_ q: ResolvedQuery, _ parts: [ResolvedPredicate])
        -> (index: Int, range: CompoundRange, order: CompoundOrder?, score: Int, exact: Bool, leading: Int)?
    {
        var best: (index: Int, range: CompoundRange, order: CompoundOrder?, score: Int, exact: Bool, leading: Int)?
        let canOrder = q.top != nil && !q.includeTotalCount
        for (i, c) in compound.enumerated() {
            var range = CompoundRange(equal: [])
            var used = Set<Int>()
            for (k, column) in c.columns.enumerated() {
                if c.noCase[k] {
                    // A NOCASE component (the operations table's itemId): an equality ignoring case selects
                    // exactly its entries; a case-sensitive one selects a superset, tested again row by row.
                    if let (p, v) = parts.enumerated().lazy.compactMap({ p in MemTable.equality(p.element, column, ignoringCase: true).map { (p.offset, $0) } }).first {
                        range.equal.append(v)
                        used.insert(p)
                        continue
                    }
                    if let v = parts.lazy.compactMap({ MemTable.equality($0, column) }).first {
                        range.equal.append(v)
                        continue
                    }
                    break
                }
                if let (p, v) = parts.enumerated().lazy.compactMap({ p in MemTable.equality(p.element, column).map { (p.offset, $0) } }).first {
                    range.equal.append(v)
                    used.insert(p)
                    continue
                }
                for (p, part) in parts.enumerated() {
                    guard let (op, v) = MemTable.comparison(part, column) else { continue }
                    switch op {
                    case .less, .lessOrEqual:
                        if let u = range.upper, Collation.compare(u, v) < 0 || (Collation.compare(u, v) == 0 && op == .lessOrEqual) { continue }
                        range.upper = v
                        range.upperInclusive = op == .lessOrEqual
                        range.lower = range.lower ?? .null
                    case .greater, .greaterOrEqual:
                        if let l = range.lower, !l.isNull, Collation.compare(l, v) > 0 || (Collation.compare(l, v) == 0 && op == .greaterOrEqual) { continue }
                        range.lower = v
                        range.lowerInclusive = op == .greaterOrEqual
                    default: continue
                    }
                    used.insert(p)
                }
                break
            }
            guard !range.equal.isEmpty || range.hasRange || canOrder else { continue }
            let leading = range.equal.count + (range.hasRange ? 1 : 0)
            var order: CompoundOrder? = nil
            if canOrder {
                let fixed = Set(c.columns.prefix(range.equal.count))
                var j = range.equal.count
                var direction: Bool? = nil
                for key in q.sort where !fixed.contains(key.column) {
                    guard j < c.columns.count, c.columns[j] == key.column, key.column != schema.idIndex else { break }
                    let reversed = key.descending != c.descending[j]
                    if let direction, direction != reversed { break }
                    direction = reversed
                    j += 1
                }
                if let direction, j > range.equal.count { order = CompoundOrder(descending: direction, groupComponents: j) }
            }
            guard leading > 0 || order != nil else { continue }
            let exact = used.count == parts.count
            let score = (range.equal.count * 2 + (range.hasRange ? 1 : 0)) * 2 + (order != nil || (exact && q.top == 0) ? 1 : 0)
            if score > (best?.score ?? 0) {
                best = (i, range, order, score, exact, max(leading, order?.groupComponents ?? 0))
            }
        }
        return best
    }

    /// The value `p` fixes `column` to (an equality with a literal, case-sensitive — or ignoring case with
    /// `ignoringCase` —, or a null test).
    private static func equality(_ p: ResolvedPredicate, _ column: Int, ignoringCase: Bool = false) -> Value? {
        switch p {
        case .compare(.column(let n, _, _), .equal, .literal(let v, _), let ci) where n == column && ci == ignoringCase: return v
        case .compare(.literal(let v, _), .equal, .column(let n, _, _), let ci) where n == column && ci == ignoringCase: return v
        case .isNull(.column(let n, _, _)) where n == column && !ignoringCase: return .null
        default: return nil
        }
    }

    /// `column op literal` (flipped when the literal comes first), case-sensitive, for a range.
    private static func comparison(_ p: ResolvedPredicate, _ column: Int) -> (QueryPredicate.ComparisonOperator, Value)? {
        switch p {
        case .compare(.column(let n, _, _), let op, .literal(let v, _), false) where n == column && !v.isNull: return (op, v)
        case .compare(.literal(let v, _), let op, .column(let n, _, _), false) where n == column && !v.isNull:
            switch op {
            case .less: return (.greater, v)
            case .lessOrEqual: return (.greaterOrEqual, v)
            case .greater: return (.less, v)
            case .greaterOrEqual: return (.lessOrEqual, v)
            default: return (op, v)
            }
        default: return nil
        }
    }

    private static func conjuncts(_ p: ResolvedPredicate) -> [ResolvedPredicate] {
        if case .and(let ps) = p { return ps }
        return [p]
    }

    func plan(for q: ResolvedQuery) -> Plan {
        let parts = MemTable.conjuncts(q.predicate)
        let idIndex = schema.idIndex
        if let ids = schema.idLookup(parts) { return .ids(ids) }
        if let c = compoundCandidate(q, parts) {
            // A column index's best constraint scores 2 (equality) or 1 (range), doubled as above.
            let single = parts.lazy.compactMap { self.indexRanges($0) }.map { r in r.1.allSatisfy { $0.lower == $0.upper && $0.lowerInclusive } ? 4 : 2 }.max() ?? 0
            if c.score > single {
                let countOnly = c.exact && q.top == 0
                return .compound(
                    index: c.index, range: c.range, order: countOnly ? nil : c.order, countOnly: countOnly, leading: c.leading,
                    exact: c.exact)
            }
        }
        for p in parts {
            guard let (n, ranges) = indexRanges(p) else { continue }
            // With top and a sort on an indexed column, walking that index in order and filtering
            // visits about (skip + top) × rows / matches entries, against `matches` for the range
            // (plus sorting them): take the walk when the range is estimated to be the larger.
            if let walk = orderedPlan(q), q.sort.first?.column != n, let matches = estimatedEntries(column: n, ranges) {
                let wanted = Double(q.skip) + Double(q.top ?? 0)
                if matches * matches > wanted * Double(max(1, rowCount)) { return walk }
            }
            return .indexRange(column: n, ranges: ranges)
        }
        for p in parts {
            switch p {
            case .compare(.column(let n, _, _), let op, .literal(let v, _), _) where n == idIndex && op != .notEqual:
                if let r = range(op, v) { return .idRange(r) }
            default: continue
            }
        }
        return orderedPlan(q) ?? .scan
    }

    /// Walking the primary key or an index in the first sort key's order, when the query has `top`
    /// and does not need the total count.
    private func orderedPlan(_ q: ResolvedQuery) -> Plan? {
        guard q.top != nil, !q.includeTotalCount, let first = q.sort.first else { return nil }
        if first.column == schema.idIndex { return .idOrdered(descending: first.descending) }
        if indexes[first.column] != nil { return .ordered(column: first.column, descending: first.descending) }
        return nil
    }

    /// The estimated number of entries of index `column` within `ranges`; nil when unknown (prefix ranges).
    private func estimatedEntries(column: Int, _ ranges: [IndexRange]) -> Double? {
        guard let tree = indexes[column] else { return nil }
        var total = 0.0
        for r in ranges {
            guard r.prefix == nil else { return nil }
            let low = r.lower.map { tree.estimatedRank(valueProbe(column, $0, edge: r.lowerInclusive ? -1 : 1)) } ?? 0
            let high = r.upper.map { tree.estimatedRank(valueProbe(column, $0, edge: r.upperInclusive ? 1 : -1)) }
                ?? Double(tree.count)
            total += max(0, high - low)
        }
        return total
    }

    private func indexRanges(_ p: ResolvedPredicate) -> (Int, [IndexRange])? {
        switch p {
        case .compare(.column(let n, _, _), let op, .literal(let v, _), false) where indexes[n] != nil:
            // `!=` has no range: such a conjunct cannot pick rows from the index.
            guard let r = range(op, v) else { return nil }
            return (n, [r])
        case .compare(.literal(let v, _), let op, .column(let n, _, _), false) where indexes[n] != nil:
            guard let r = range(op.mirrored, v) else { return nil }
            return (n, [r])
        case .in(.column(let n, _, _), let vs, false) where indexes[n] != nil:
            return (n, vs.map { IndexRange(lower: $0, lowerInclusive: true, upper: $0, upperInclusive: true) })
        case .isNull(.column(let n, _, _)) where indexes[n] != nil:
            return (n, [IndexRange(lower: .null, lowerInclusive: true, upper: .null, upperInclusive: true)])
        // A string column only: a number or boolean subject is tested on its text, which its index does not order.
        case .string(.startsWith, .column(let n, .string, _), .literal(.string(let prefix), _), false) where indexes[n] != nil:
            return (n, [IndexRange(lower: .string(prefix), lowerInclusive: true, upper: nil, upperInclusive: false, prefix: prefix)])
        default:
            return nil
        }
    }

    private func range(_ op: QueryPredicate.ComparisonOperator, _ v: Value) -> IndexRange? {
        switch op {
        case .equal: return IndexRange(lower: v, lowerInclusive: true, upper: v, upperInclusive: true)
        case .less: return IndexRange(lower: .null, lowerInclusive: false, upper: v, upperInclusive: false)
        case .lessOrEqual: return IndexRange(lower: .null, lowerInclusive: false, upper: v, upperInclusive: true)
        case .greater: return IndexRange(lower: v, lowerInclusive: false, upper: nil, upperInclusive: false)
        case .greaterOrEqual: return IndexRange(lower: v, lowerInclusive: true, upper: nil, upperInclusive: false)
        case .notEqual: return nil
        }
    }

    // MARK: Running

    /// Orders two slots by `keys`.
    func compare(_ a: Int, _ b: Int, by keys: [ResolvedSortKey]) -> Int {
        for key in keys {
            let c = columns[key.column].compare(a, b, noCase: key.noCase)
            if c != 0 { return key.descending ? -c : c }
        }
        return 0
    }

    /// Orders `matched` (slots that passed the filter) by the query's sort and applies skip and top.
    private func select(_ matched: [Int], _ q: ResolvedQuery, _ ordered: Bool) -> (slots: [Int], count: Int) {
        var top = TopSlots(q, self, ordered: ordered)
        for s in matched { top.add(s) }
        return top.result()
    }

    /// Selects the slots of the rows `q` returns, in order (in any order when not `ordered` and `q` has
    /// neither skip nor top), and the number of matches.
    func run(_ q: ResolvedQuery, ordered: Bool = true) -> (slots: [Int], count: Int) {
        let filter = SlotFilter(q.predicate, self)
        switch plan(for: q) {
        case .ids(let ids):
            var seen = Set<Int>()
            var matched: [Int] = []
            for id in ids {
                if let s = slot(of: id), ids.count == 1 || seen.insert(s).inserted, filter.matches(s) { matched.append(s) }
            }
            return select(matched, q, ordered)
        case .indexRange(let n, let ranges):
            guard let tree = indexes[n] else { return scan(q, filter, ordered) }
            var seen = Set<Int>()
            var matched: [Int] = []
            let column = columns[n]
            for r in ranges {
                let start = r.lower.map { valueProbe(n, $0, edge: r.lowerInclusive ? -1 : 1) }
                let prefix = r.prefix.map { Array($0.utf8) }
                tree.forEach(ascendingFrom: start, inclusive: true) { e in
                    let slot = Int(e)
                    if let upper = r.upper {
                        let c = column.compare(slot, upper, noCase: false)
                        if c > 0 || (c == 0 && !r.upperInclusive) { return false }
                    }
                    if let prefix {
                        guard column.type == .string, column.state[slot] != 0,
                            column.withBytes(slot, { $0.starts(with: prefix) })
                        else { return false }
                    }
                    // One range visits a row once; several (an IN list) may meet it again.
                    if ranges.count == 1 || seen.insert(slot).inserted, filter.matches(slot) { matched.append(slot) }
                    return true
                }
            }
            return select(matched, q, ordered)
        case .ordered(let n, let descending):
            guard let tree = indexes[n], let top = q.top else { return scan(q, filter, ordered) }
            let wanted = q.skip.addingReportingOverflow(top)
            if wanted.overflow { return scan(q, filter, ordered) }
            // Walk the index in the first key's order, one group of equal values at a time; sort each
            // group by the full order (later keys, then id) and stop once skip + top rows are out.
            let keys = q.sort
            let column = columns[n]
            var out: [Int] = []
            var group: [Int] = []
            var previous = -1
            func flush() {
                if group.count > 1 { group.sort { compare($0, $1, by: keys) < 0 } }
                out.append(contentsOf: group)
                group.removeAll(keepingCapacity: true)
            }
            let visit: (UInt32) -> Bool = { e in
                let slot = Int(e)
                if previous >= 0, column.compare(previous, slot, noCase: false) != 0 {
                    flush()
                    if out.count >= wanted.partialValue { return false }
                }
                previous = slot
                if filter.matches(slot) { group.append(slot) }
                return true
            }
            if descending {
                tree.forEach(descendingFrom: nil, inclusive: true, visit)
            } else {
                tree.forEach(ascendingFrom: nil, inclusive: true, visit)
            }
            flush()
            return (Array(out.dropFirst(q.skip).prefix(top)), out.count)
        case .idRange(let r):
            // Bounds compare ids with the id column's rule (NOCASE for strings).
            var matched: [Int] = []
            let id = idColumn
            let noCase = schema.idType == .string
            // Sorted by id ascending with top: stop once skip + top matching rows are collected.
            var limit = Int.max
            if let top = q.top, !q.includeTotalCount, let first = q.sort.first, first.column == schema.idIndex,
                !first.descending
            {
                let w = q.skip.addingReportingOverflow(top)
                if !w.overflow { limit = w.partialValue }
            }
            if limit == 0 { return ([], 0) }
            var start: ((UInt32) -> Int)? = nil
            if let lower = r.lower, !lower.isNull { start = { e in id.compare(Int(e), lower, noCase: true) } }
            idOrder.forEach(ascendingFrom: start, inclusive: r.lowerInclusive) { e in
                let slot = Int(e)
                if let upper = r.upper {
                    let c = id.compare(slot, upper, noCase: noCase)
                    if c > 0 || (c == 0 && !r.upperInclusive) { return false }
                }
                if filter.matches(slot) { matched.append(slot) }
                return matched.count < limit
            }
            return select(matched, q, ordered)
        case .idOrdered(let descending):
            guard let top = q.top else { return scan(q, filter, ordered) }
            let wanted = q.skip.addingReportingOverflow(top)
            if wanted.overflow { return scan(q, filter, ordered) }
            // The walk reads rows in id order, which is random memory order. When the filter passes few
            // rows it would read most of the table that way; past a budget, a scan in memory order (with
            // a top-k heap) is cheaper, so give up the walk and scan.
            var walk = IdWalk(budget: filter.isAlwaysTrue ? Int.max : max(wanted.partialValue * 16, rowCount / 8))
            if wanted.partialValue > 0 {
                // The walk's state behind a pointer: variables captured by the visitor were checked for
                // exclusive access (a runtime call) twice per row.
                withUnsafeMutablePointer(to: &walk) { w in
                    let visit = { (e: UInt32) -> Bool in
                        w.pointee.budget -= 1
                        if w.pointee.budget < 0 {
                            w.pointee.exhausted = true
                            return false
                        }
                        if filter.matches(Int(e)) { w.pointee.out.append(Int(e)) }
                        return w.pointee.out.count < wanted.partialValue
                    }
                    if descending {
                        idOrder.forEach(descendingFrom: nil, inclusive: true, visit)
                    } else {
                        idOrder.forEach(ascendingFrom: nil, inclusive: true, visit)
                    }
                }
            }
            if walk.exhausted { return scan(q, filter, ordered) }
            return (Array(walk.out.dropFirst(q.skip).prefix(top)), walk.out.count)
        case .scan:
            return scan(q, filter, ordered)
        case .compound(let n, let range, let order, let countOnly, _, let exact):
            return runCompound(q, exact ? nil : filter, compound[n], range, order: order, countOnly: countOnly, ordered: ordered)
        }
    }

    /// The state of the `.idOrdered` walk of ``run(_:ordered:)``.
    private struct IdWalk {
        var budget: Int
        var exhausted = false
        var out: [Int] = []
    }

    /// Runs a compound-index plan: visits the entries of `range` in tree order (reversed for a
    /// descending walk) and counts them, collects their rows, or — walking in the sort's order —
    /// groups them by the first `groupComponents` values, sorts each group by the full order and
    /// stops once skip + top rows are out. `filter` is `nil` when the range holds exactly the matches.
    private func runCompound(
        _ q: ResolvedQuery, _ filter: SlotFilter?, _ c: CompoundIndex, _ range: CompoundRange, order: CompoundOrder?,
        countOnly: Bool, ordered: Bool
    ) -> (slots: [Int], count: Int) {
        // Tree-order bounds: a descending component holds its values in reverse, so its value range
        // starts at `upper`.
        let k = range.equal.count
        let reversed = k < c.columns.count && c.descending[k]
        let first: (Value?, Bool) = reversed ? (range.upper, range.upperInclusive) : (range.lower, range.lowerInclusive)
        let last: (Value?, Bool) = reversed ? (range.lower, range.lowerInclusive) : (range.upper, range.upperInclusive)
        // `start` sorts just before the first entry of the range, `end` just after the last one.
        let start: ((UInt32) -> Int)? = first.0.map { compoundProbe(c, range.equal + [$0], edge: first.1 ? -1 : 1) }
            ?? (k > 0 ? compoundProbe(c, range.equal, edge: -1) : nil)
        let end: ((UInt32) -> Int)? = last.0.map { compoundProbe(c, range.equal + [$0], edge: last.1 ? 1 : -1) }
            ?? (k > 0 ? compoundProbe(c, range.equal, edge: 1) : nil)
        if countOnly {
            var n = 0
            c.tree.forEach(ascendingFrom: start, inclusive: true) { e in
                if let end, end(e) > 0 { return false }
                n += 1
                return true
            }
            return ([], n)
        }
        // Without an order the walk answers, or with skip + top past Int.max: every match of the range.
        let wanted = q.top.map { q.skip.addingReportingOverflow($0) }
        guard let order, let top = q.top, let wanted, !wanted.overflow else {
            var matched: [Int] = []
            c.tree.forEach(ascendingFrom: start, inclusive: true) { e in
                if let end, end(e) > 0 { return false }
                if filter?.matches(Int(e)) ?? true { matched.append(Int(e)) }
                return true
            }
            return select(matched, q, ordered)
        }
        if wanted.partialValue == 0 { return ([], 0) }
        var walk = CompoundWalk(
            table: self, filter: filter, keys: q.sort, groupColumns: c.columns.prefix(order.groupComponents).map { columns[$0] },
            wanted: wanted.partialValue)
        if order.descending {
            c.tree.forEach(descendingFrom: end, inclusive: true) { e in
                if let start, start(e) < 0 { return false }
                return walk.visit(Int(e))
            }
        } else {
            c.tree.forEach(ascendingFrom: start, inclusive: true) { e in
                if let end, end(e) > 0 { return false }
                return walk.visit(Int(e))
            }
        }
        walk.flush()
        return (Array(walk.out.dropFirst(q.skip).prefix(top)), walk.out.count)
    }

    /// Runs `q` over every live row in slot order, testing values in place.
    private func scan(_ q: ResolvedQuery, _ filter: SlotFilter, _ ordered: Bool) -> (slots: [Int], count: Int) {
        if q.top == 0 {
            guard q.includeTotalCount else { return ([], 0) }
            var count = 0
            filter.scan(live) { _ in count += 1 }
            return ([], count)
        }
        var top = TopSlots(q, self, ordered: ordered)
        filter.scan(live) { top.add($0) }
        return top.result()
    }
}

/// Builds the items of a query's result in row form: one `[Value]` of the returned columns per item under
/// a layout of their names shared by every item (the table's own for a query of all columns), so no
/// dictionary is built or copied per row.
struct ItemBuilder {
    /// `nil` when the names are not distinct; the items are then dictionaries.
    private let layout: ItemLayout?
    private let names: [String]
    private let fields: [MemColumn]

    /// For the columns at positions `columns` of `table`, under their defined names.
    init(_ table: MemTable, columns: [Int]) {
        names = columns.map { table.schema.columns[$0].name }
        fields = columns.map { table.columns[$0] }
        if columns.count == table.schema.columns.count, columns.elementsEqual(table.schema.columns.indices) {
            layout = table.layout
        } else {
            layout = ItemLayout(names: names)
        }
    }

    /// The items of the rows in `slots`, in that order. In row form their values share one buffer (each
    /// item a slice of it: one allocation per result, not one per row).
    func items(_ slots: [Int]) -> [Item] {
        guard let layout, !slots.isEmpty, !fields.isEmpty else { return slots.map(item) }
        let width = fields.count
        let values = ValueRows.make(count: slots.count * width) { base in
            var initialized = 0
            for slot in slots {
                MemColumn.initialize(base + initialized, row: slot, of: fields)
                initialized += width
            }
        }
        var items: [Item] = []
        items.reserveCapacity(slots.count)
        var start = 0
        for _ in slots {
            items.append(Item(layout: layout, values: values, start: start))
            start += width
        }
        return items
    }

    /// The item of the row in `slot`.
    func item(_ slot: Int) -> Item {
        if let layout { return Item(layout: layout, values: MemColumn.values(slot, of: fields), start: 0) }
        let row = MemColumn.row(slot, of: fields)
        var values: [String: Value] = Dictionary(minimumCapacity: names.count)
        for (name, value) in zip(names, row) { values[name] = value }
        return Item(values)
    }
}

/// The state of an ordered walk of a compound index (``MemTable``'s `runCompound`): the entries come in
/// the order of the index's first components; each group of equal leading values is put in the query's
/// full order, and the walk stops once `wanted` rows are out. A struct mutated in place by the walk's
/// closure (local functions capturing variables made every access a dynamic exclusivity check).
private struct CompoundWalk {
    let table: MemTable
    /// `nil` when every entry walked is a match.
    let filter: SlotFilter?
    let keys: [ResolvedSortKey]
    let groupColumns: [MemColumn]
    let wanted: Int
    /// The entries taken so far, in order; the current group's matches are its tail from `groupStart` (put
    /// in the full order when the group ends). Appending to `out` directly, not to a group array moved
    /// into it at each group's end, saves ~120 instructions per entry when groups hold one row each (the
    /// list query: `priority == p` ordered by `updatedAt`).
    var out: [Int] = []
    var groupStart = 0
    var previous = -1

    init(table: MemTable, filter: SlotFilter?, keys: [ResolvedSortKey], groupColumns: [MemColumn], wanted: Int) {
        self.table = table
        self.filter = filter
        self.keys = keys
        self.groupColumns = groupColumns
        self.wanted = wanted
        out.reserveCapacity(min(wanted, 1024))
    }

    /// Ends the current group: a group of two or more is put in the full order.
    mutating func flush() {
        if out.count &- groupStart > 1 {
            let (table, keys) = (self.table, self.keys)
            out[groupStart...].sort { table.compare($0, $1, by: keys) < 0 }
        }
        groupStart = out.count
    }

    /// Whether `slot` differs from `previous` in a group column. The columns are borrowed from the
    /// array (iterating it retained and released each column per entry).
    private func startsGroup(_ previous: Int, _ slot: Int) -> Bool {
        groupColumns.withUnsafeBufferPointer { columns in
            for n in columns.indices
            where Unmanaged.passUnretained(columns[n])._withUnsafeGuaranteedRef({ $0.compare(previous, slot, noCase: false) }) != 0 {
                return true
            }
            return false
        }
    }

    /// Takes the entry `slot`; `false` once enough rows are out.
    mutating func visit(_ slot: Int) -> Bool {
        let previous = self.previous
        if previous >= 0, startsGroup(previous, slot) {
            flush()
            if out.count >= wanted { return false }
        }
        self.previous = slot
        if filter?.matches(slot) ?? true { out.append(slot) }
        return true
    }
}

/// The rows a query keeps while they are found: every match, or with `top` only the first `skip + top` in
/// the query's order (a bounded max-heap), then ordered, skipped and cut by ``result()``.
private struct TopSlots {
    let table: MemTable
    let keys: [ResolvedSortKey]
    let skip: Int
    let top: Int?
    /// `skip + top` when it is finite.
    let limit: Int?
    /// Whether ``result()`` sorts (a delete needs no order when it has neither skip nor top).
    let ordered: Bool
    var slots: [Int] = []
    var count = 0

    init(_ q: ResolvedQuery, _ table: MemTable, ordered: Bool) {
        self.table = table
        self.ordered = ordered || q.top != nil || q.skip != 0
        keys = q.sort
        skip = q.skip
        top = q.top
        if let top = q.top {
            let w = q.skip.addingReportingOverflow(top)
            limit = w.overflow ? nil : w.partialValue
        } else {
            limit = nil
        }
    }

    @inline(__always) private func less(_ a: Int, _ b: Int) -> Bool { table.compare(a, b, by: keys) < 0 }

    mutating func add(_ slot: Int) {
        count += 1
        guard let limit else {
            slots.append(slot)
            return
        }
        if limit == 0 { return }
        if slots.count < limit {
            // Sift up (max-heap: the worst kept row at the root).
            slots.append(slot)
            var i = slots.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard less(slots[parent], slots[i]) else { break }
                slots.swapAt(parent, i)
                i = parent
            }
        } else if less(slot, slots[0]) {
            slots[0] = slot
            var i = 0
            while true {
                let l = 2 * i + 1
                let r = l + 1
                var largest = i
                if l < slots.count, less(slots[largest], slots[l]) { largest = l }
                if r < slots.count, less(slots[largest], slots[r]) { largest = r }
                if largest == i { break }
                slots.swapAt(i, largest)
                i = largest
            }
        }
    }

    func result() -> (slots: [Int], count: Int) {
        guard ordered else { return (slots, count) }
        var sorted = slots
        sorted.sort { less($0, $1) }
        var kept = sorted.dropFirst(skip)
        if let top { kept = kept.prefix(top) }
        return (Array(kept), count)
    }
}

/// A query's filter, tested on a row's slot: the common shapes (a boolean, integer, double or date column
/// against a literal, a case-sensitive string test, a null test, and/or/not of those) read the column storage
/// in place; anything else decodes only the columns it reads and goes through ``ResolvedPredicate/matches(_:)``.
/// Same results as ``ResolvedPredicate/matches(_:)`` on the decoded row: a null matches no comparison.
///
/// One per query run (it holds a decoding buffer); not shared between threads.
final class SlotFilter {
    private indirect enum Test {
        case constant(Bool)
        case and([Test])
        case or([Test])
        case not(Test)
        case bool(MemColumn, equal: Bool, to: Bool)
        case int(MemColumn, QueryPredicate.ComparisonOperator, Int64)
        case real(MemColumn, QueryPredicate.ComparisonOperator, Double)
        case string(MemColumn, QueryPredicate.StringOperator, [UInt8])
        case null(MemColumn, isNull: Bool)
        case general(ResolvedPredicate)
    }

    private let test: Test
    private let columns: [MemColumn]
    /// The columns the general tests read, decoded into `buffer` once per slot.
    private let needed: [Int]
    @exclusivity(unchecked) private var buffer: [Value]
    @exclusivity(unchecked) private var decoded = -1

    init(_ p: ResolvedPredicate, _ table: MemTable) {
        columns = table.columns
        var needed = Set<Int>()
        test = Self.compile(p, table.columns, &needed)
        self.needed = needed.sorted()
        buffer = needed.isEmpty ? [] : [Value](repeating: .null, count: table.columns.count)
    }

    /// Whether the filter passes every row.
    var isAlwaysTrue: Bool {
        if case .constant(true) = test { return true }
        return false
    }

    private static func compile(_ p: ResolvedPredicate, _ columns: [MemColumn], _ needed: inout Set<Int>) -> Test {
        switch p {
        case .constant(let b): return .constant(b)
        case .and(let ps): return .and(ps.map { compile($0, columns, &needed) })
        case .or(let ps): return .or(ps.map { compile($0, columns, &needed) })
        case .not(let q): return .not(compile(q, columns, &needed))
        case .compare(.column(let n, .boolean, _), let op, .literal(.bool(let v), _), _) where op == .equal || op == .notEqual:
            return .bool(columns[n], equal: op == .equal, to: v)
        case .compare(.column(let n, .integer, _), let op, .literal(.int(let v), _), _):
            return .int(columns[n], op, v)
        case .compare(.column(let n, .double, _), let op, .literal(.double(let v), _), _):
            return .real(columns[n], op, v)
        case .compare(.column(let n, .double, _), let op, .literal(.int(let v), _), _):
            return .real(columns[n], op, Double(v))
        case .compare(.column(let n, .date, _), let op, .literal(.date(let d), _), _):
            return .real(columns[n], op, d.timeIntervalSinceReferenceDate)
        case .string(let op, .column(let n, .string, false), .literal(.string(let pattern), _), false):
            return .string(columns[n], op, Array(pattern.utf8))
        case .isNull(.column(let n, _, _)): return .null(columns[n], isNull: true)
        case .isNotNull(.column(let n, _, _)): return .null(columns[n], isNull: false)
        default:
            collectColumns(p, &needed)
            return .general(p)
        }
    }

    private static func collectColumns(_ p: ResolvedPredicate, _ out: inout Set<Int>) {
        switch p {
        case .constant: break
        case .and(let ps), .or(let ps): for q in ps { collectColumns(q, &out) }
        case .not(let q): collectColumns(q, &out)
        case .compare(let a, _, let b, _), .string(_, let a, let b, _):
            collectColumns(a, &out)
            collectColumns(b, &out)
        case .isNull(let e), .isNotNull(let e), .in(let e, _, _): collectColumns(e, &out)
        }
    }

    private static func collectColumns(_ e: ResolvedExpression, _ out: inout Set<Int>) {
        switch e {
        case .column(let n, _, _): out.insert(n)
        case .literal: break
        case .arithmetic(_, let a, let b, _):
            collectColumns(a, &out)
            collectColumns(b, &out)
        case .toLower(let a), .toUpper(let a), .length(let a): collectColumns(a, &out)
        case .function(_, let args, _): for a in args { collectColumns(a, &out) }
        }
    }

    /// Whether the row in `slot` passes.
    func matches(_ slot: Int) -> Bool { evaluate(test, slot) }

    private func evaluate(_ t: Test, _ slot: Int) -> Bool {
        switch t {
        case .constant(let b): return b
        case .and(let ts):
            for x in ts where !evaluate(x, slot) { return false }
            return true
        case .or(let ts):
            for x in ts where evaluate(x, slot) { return true }
            return false
        case .not(let x): return !evaluate(x, slot)
        case .bool(let c, let equal, let v):
            let s = c.state[slot]
            return s != 0 && ((s == 2) == v) == equal
        case .int(let c, let op, let v):
            guard c.state[slot] != 0 else { return false }
            return Self.holds(op, Int64(bitPattern: c.words[slot]), v)
        case .real(let c, let op, let v):
            guard c.state[slot] != 0 else { return false }
            return op.holds(for: Collation.cmp(Double(bitPattern: c.words[slot]), v))
        case .string(let c, let op, let pattern):
            guard c.state[slot] != 0 else { return false }
            return c.withBytes(slot) { Self.stringTest(op, $0, pattern) }
        case .null(let c, let isNull):
            return (c.state[slot] == 0) == isNull
        case .general(let p):
            if decoded != slot {
                for n in needed { buffer[n] = columns[n].value(slot) }
                decoded = slot
            }
            return p.matches(buffer)
        }
    }

    @inline(__always) private static func holds(_ op: QueryPredicate.ComparisonOperator, _ x: Int64, _ v: Int64) -> Bool {
        switch op {
        case .equal: return x == v
        case .notEqual: return x != v
        case .less: return x < v
        case .lessOrEqual: return x <= v
        case .greater: return x > v
        case .greaterOrEqual: return x >= v
        }
    }

    @inline(__always) private static func stringTest(
        _ op: QueryPredicate.StringOperator, _ s: UnsafeRawBufferPointer, _ pattern: [UInt8]
    ) -> Bool {
        switch op {
        case .startsWith: return s.starts(with: pattern)
        case .endsWith: return s.count >= pattern.count && s.suffix(pattern.count).elementsEqual(pattern)
        case .contains: return pattern.withUnsafeBytes { ByteSearch.contains(s, $0) }
        }
    }

    /// Calls `body` with every live slot that passes, in slot order. The commonest single tests run in loops
    /// over the column arrays themselves.
    func scan(_ live: [Bool], _ body: (Int) -> Void) {
        live.withUnsafeBufferPointer { live in
            switch test {
            case .bool(let c, let equal, let v):
                let wanted: UInt8 = v ? 2 : 1
                c.state.withUnsafeBufferPointer { state in
                    for i in live.indices where live[i] {
                        let s = state[i]
                        if s != 0 && (s == wanted) == equal { body(i) }
                    }
                }
            case .int(let c, let op, let v):
                c.state.withUnsafeBufferPointer { state in
                    c.words.withUnsafeBufferPointer { words in
                        for i in live.indices where live[i] && state[i] != 0 && Self.holds(op, Int64(bitPattern: words[i]), v) { body(i) }
                    }
                }
            case .string(let c, let op, let pattern):
                c.state.withUnsafeBufferPointer { state in
                    c.offsets.withUnsafeBufferPointer { offsets in
                        c.lengths.withUnsafeBufferPointer { lengths in
                            c.arena.withUnsafeBytes { arena in
                                pattern.withUnsafeBytes { needle in
                                    for i in live.indices where live[i] && state[i] != 0 {
                                        let s = UnsafeRawBufferPointer(rebasing: arena[offsets[i]..<offsets[i] + Int(lengths[i])])
                                        let hit: Bool
                                        switch op {
                                        case .contains: hit = ByteSearch.contains(s, needle)
                                        case .startsWith: hit = s.starts(with: needle)
                                        case .endsWith: hit = s.count >= needle.count && s.suffix(needle.count).elementsEqual(needle)
                                        }
                                        if hit { body(i) }
                                    }
                                }
                            }
                        }
                    }
                }
            default:
                for i in live.indices where live[i] && matches(i) { body(i) }
            }
        }
    }
}

/// A compound index of a ``MemTable``: the column positions, their directions and the tree of slots.
struct CompoundIndex {
    let index: TableIndex
    let columns: [Int]
    let descending: [Bool]
    /// Per component, whether strings are ordered and matched as SQLite's NOCASE does (only the
    /// operations table's `(table, itemId NOCASE)` index has such a component; a ``TableIndex`` cannot).
    let noCase: [Bool]
    let tree = SlotTree()

    init?(_ index: TableIndex, schema: TableSchema, noCase: [Bool] = []) {
        guard let positions = schema.positions(of: index), !positions.isEmpty else { return nil }
        self.index = index
        columns = positions.map(\.column)
        descending = positions.map(\.descending)
        self.noCase = positions.indices.map { $0 < noCase.count && noCase[$0] }
    }
}
