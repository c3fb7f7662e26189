import Dispatch
import Logging

/// A ``LocalStore`` that keeps everything in memory: fast, thread-safe, and gone when the process
/// (or ``close()``) ends.
///
/// Reads run concurrently with each other; a write transaction excludes readers until it commits or
/// rolls back, so a reader never sees half of a transaction. Indexed columns keep an ordered index
/// (a B-tree), so an equality, range, `IN` or prefix filter on an indexed column, or a sort on one
/// with `top`, does not scan and sort the whole table. A compound index (``TableIndex``) keeps a B-tree over
/// composite entries: an equality prefix, a range on the next column and a sort on the columns after it read
/// the index range in order and stop after `skip + top` rows; a count it answers exactly counts entries.
/// ``explain(_:)`` tells which plan a query gets.
public final class InMemoryStore: LocalStore, @unchecked Sendable {
    /// The names of the system tables.
    public let systemTableNames: SystemTableNames

    private let lock = ReadWriteLock()
    private let writer = WriterThread()
    // Guarded by `lock`.
    private var tables: [String: MemTable] = [:]
    private var isClosed = false
    /// Committed changes go to the observers through this.
    public let changeCenter = ChangeCenter()

    /// Where queries (plan and duration, at trace) and write transactions (duration, at debug) are logged.
    private let logger: Logger?

    /// Creates an empty store holding only the three system tables.
    ///
    /// - Parameter logger: where to log (swift-log), as the persistent backends do: each query's plan and
    ///   duration at `trace`, write transactions at `debug`. Values are never logged.
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
            tables[Identifier.fold(schema.name)] = MemTable(schema: withIndexes)
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
                tables[key] = MemTable(schema: schema)
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
            return (try readUnlocked(query), table.plan(for: resolved).description(schema: table.schema))
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
            return table.plan(for: resolved).description(schema: table.schema)
        }
    }

    // MARK: Unlocked implementation (caller holds the lock)

    fileprivate func table(_ name: String) throws -> MemTable {
        guard !isClosed else { throw LocalStoreError.closed() }
        guard let t = tables[Identifier.fold(name)] else { throw LocalStoreError.unknownTable(name) }
        return t
    }

    fileprivate func resolve(_ query: Query) throws -> (MemTable, ResolvedQuery) {
        let t = try table(query.table)
        return (t, try ResolvedQuery(query, schema: t.schema))
    }

    fileprivate func readUnlocked(table name: String, id: Value) throws -> Item? {
        let t = try table(name)
        try t.schema.checkId(id)
        guard let row = t.row(MemTable.key(id)) else { return nil }
        return t.item(row)
    }

    fileprivate func readUnlocked(_ query: Query) throws -> ReadResult {
        let (t, q) = try resolve(query)
        let selected = t.run(q)
        return ReadResult(items: selected.rows.map(q.project), totalCount: q.includeTotalCount ? selected.count : nil)
    }

    /// The transaction handed to a `write {}` body. Records a before-image of every row it touches
    /// so that a thrown error restores the store exactly.
    final class Transaction: LocalStoreTransaction {
        let store: InMemoryStore
        var isActive = true
        private var undo: [(MemTable, MemTable.Key, [Value]?)] = []
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
        }

        func rollback() {
            for (table, key, before) in undo.reversed() { table.set(key, before) }
            undo.removeAll()
        }

        private func set(_ table: MemTable, _ key: MemTable.Key, _ row: [Value]?) {
            undo.append((table, key, table.row(key)))
            table.set(key, row)
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
            let width = t.schema.columns.count
            for p in prepared {
                let key = MemTable.key(p.id)
                if var row = t.row(key) {
                    p.merge(into: &row)
                    set(t, key, row)
                } else {
                    set(t, key, p.newRow(columnCount: width))
                }
            }
            if changes != nil, !prepared.isEmpty { changes?.upserted(prepared.map(\.id), in: t.schema.name) }
        }

        func delete(ids: [Value], from table: String) throws {
            try check()
            if ids.isEmpty && store.tables[Identifier.fold(table)] == nil && !store.isClosed { return }
            let t = try store.table(table)
            for id in ids { try t.schema.checkId(id) }
            for id in ids {
                let key = MemTable.key(id)
                if t.row(key) != nil { set(t, key, nil) }
            }
            if changes != nil, !ids.isEmpty { changes?.deleted(ids, in: t.schema.name) }
        }

        func delete(matching query: Query) throws {
            try check()
            let (t, q) = try store.resolve(query)
            let rows = t.run(q).rows
            for row in rows { set(t, MemTable.key(row[t.schema.idIndex]), nil) }
            if changes != nil, !rows.isEmpty { changes?.changedMany(in: t.schema.name) }
        }

        func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
            try check()
            return try body(self)
        }
    }
}

/// One table of an ``InMemoryStore``: rows in slots found by normalised id, plus an ordered index per
/// indexed column whose entries name the row's slot (so an index walk reads rows without hashing ids).
final class MemTable {
    enum Key: Hashable {
        case int(Int64)
        /// The UTF-8 bytes of the NOCASE key. Bytes, not `String`: Swift compares strings by canonical
        /// equivalence, which would make distinct ids such as "é" and "e\u{301}" collide.
        case string([UInt8])

        // The synthesized hash feeds the bytes to the hasher one at a time; hash them in one call.
        func hash(into hasher: inout Hasher) {
            switch self {
            case .int(let i):
                hasher.combine(0 as UInt8)
                hasher.combine(i)
            case .string(let bytes):
                hasher.combine(bytes.count)
                bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            }
        }
    }

    private(set) var schema: TableSchema
    /// Row storage. A free slot holds an empty array (a live row always has at least its id column).
    private var slots: [[Value]] = []
    private var freeSlots: [Int] = []
    /// The slot of every row, by normalised id.
    private var slotByKey: [Key: Int] = [:]
    private(set) var indexes: [Int: BTree<IndexEntry>] = [:]
    private var indexedColumns: [Int] = []
    /// The compound indexes of the schema, in its order.
    private(set) var compound: [CompoundIndex] = []
    /// Every id in id order (entries with a null value), for id ranges and id-ordered scans.
    private(set) var idOrder = BTree<IndexEntry>()

    init(schema: TableSchema) {
        self.schema = schema
        for (n, c) in schema.columns.enumerated() where c.indexed && n != schema.idIndex {
            indexes[n] = BTree()
        }
        indexedColumns = indexes.keys.sorted()
        compound = schema.indexes.compactMap { CompoundIndex($0, schema: schema) }
    }

    /// The row stored under `key`.
    func row(_ key: Key) -> [Value]? { slotByKey[key].map { slots[$0] } }

    /// The number of rows.
    var rowCount: Int { slotByKey.count }

    /// Every row, in no particular order.
    var allRows: LazyFilterSequence<[[Value]]> { slots.lazy.filter { !$0.isEmpty } }

    static func key(_ id: Value) -> Key {
        switch id {
        case .int(let i): return .int(i)
        case .string(let s): return .string(noCaseBytes(s))
        default: return .string(Array(id.description.utf8))
        }
    }

    /// The bytes of ``Collation/noCaseKey(_:)`` for `s`, built directly.
    static func noCaseBytes(_ s: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            if b == 0 {
                bytes.append(0)
                bytes.append(contentsOf: String(s.utf8.count).utf8)
                return bytes
            }
            bytes.append(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
        }
        return bytes
    }

    func item(_ row: [Value]) -> Item {
        var values: [String: Value] = Dictionary(minimumCapacity: schema.columns.count)
        for (n, c) in schema.columns.enumerated() { values[c.name] = row[n] }
        return Item(values)
    }

    /// Adopts a merged schema: widens every row and builds indexes for newly indexed columns.
    func redefine(_ newSchema: TableSchema) {
        let width = newSchema.columns.count
        if width > schema.columns.count {
            for s in slots.indices where !slots[s].isEmpty && slots[s].count < width {
                slots[s].append(contentsOf: repeatElement(Value.null, count: width - slots[s].count))
            }
        }
        schema = newSchema
        for (n, c) in newSchema.columns.enumerated() where c.indexed && n != newSchema.idIndex && indexes[n] == nil {
            var tree = BTree<IndexEntry>()
            for (slot, row) in slots.enumerated() where !row.isEmpty {
                tree.insert(IndexEntry(row[n], row[newSchema.idIndex], slot: slot))
            }
            indexes[n] = tree
        }
        indexedColumns = indexes.keys.sorted()
        for index in newSchema.indexes where !compound.contains(where: { $0.index.hasSameKeys(as: index) }) {
            guard var c = CompoundIndex(index, schema: newSchema) else { continue }
            for (slot, row) in slots.enumerated() where !row.isEmpty { c.tree.insert(c.entry(row, newSchema.idIndex, slot: slot)) }
            compound.append(c)
        }
    }

    /// Replaces (or removes, for `nil`) the row stored under `key`, keeping the indexes in step.
    func set(_ key: Key, _ row: [Value]?) {
        let idIndex = schema.idIndex
        if let slot = slotByKey[key] {
            let old = slots[slot]
            // Iterate over the keys, not the dictionary: an iterator would hold a copy of `indexes` and
            // force copy-on-write of every tree it changes.
            for n in indexedColumns {
                if let row, old[n] == row[n], old[idIndex] == row[idIndex] { continue }
                indexes[n]?.remove(IndexEntry(old[n], old[idIndex], slot: slot))
                if let row { indexes[n]?.insert(IndexEntry(row[n], row[idIndex], slot: slot)) }
            }
            for c in compound.indices {
                if let row, old[idIndex] == row[idIndex], compound[c].columns.allSatisfy({ old[$0] == row[$0] }) { continue }
                compound[c].tree.remove(compound[c].entry(old, idIndex, slot: slot))
                if let row { compound[c].tree.insert(compound[c].entry(row, idIndex, slot: slot)) }
            }
            if let row {
                if old[idIndex] != row[idIndex] {
                    idOrder.remove(IndexEntry(.null, old[idIndex], slot: slot))
                    idOrder.insert(IndexEntry(.null, row[idIndex], slot: slot))
                }
                slots[slot] = row
            } else {
                idOrder.remove(IndexEntry(.null, old[idIndex], slot: slot))
                slots[slot] = []
                freeSlots.append(slot)
                slotByKey[key] = nil
            }
        } else if let row {
            let slot: Int
            if let free = freeSlots.popLast() {
                slot = free
                slots[slot] = row
            } else {
                slot = slots.count
                slots.append(row)
            }
            slotByKey[key] = slot
            for n in indexedColumns { indexes[n]?.insert(IndexEntry(row[n], row[idIndex], slot: slot)) }
            for c in compound.indices { compound[c].tree.insert(compound[c].entry(row, idIndex, slot: slot)) }
            idOrder.insert(IndexEntry(.null, row[idIndex], slot: slot))
        }
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
        case compound(index: Int, range: CompoundRange, order: CompoundOrder?, countOnly: Bool, leading: Int)

        func description(schema: TableSchema) -> String {
            switch self {
            case .compound(let n, _, let order, let countOnly, let leading):
                let index = n < schema.indexes.count ? schema.indexes[n].description : "?"
                let kind = countOnly ? "index-only count" : order != nil ? "ordered index" : "index"
                let total = n < schema.indexes.count ? schema.indexes[n].keys.count : 0
                return "\(kind) \(index) using \(leading) of \(total) columns"
            case .ids: return "primary key"
            case .indexRange(let n, _): return "index \(schema.columns[n].name)"
            case .ordered(let n, _): return "ordered index \(schema.columns[n].name)"
            case .idRange: return "primary key range"
            case .idOrdered: return "primary key order"
            case .scan: return "full scan"
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
            for column in c.columns {
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

    /// The value `p` fixes `column` to (an equality with a literal, case-sensitive, or a null test).
    private static func equality(_ p: ResolvedPredicate, _ column: Int) -> Value? {
        switch p {
        case .compare(.column(let n, _, _), .equal, .literal(let v, _), false) where n == column: return v
        case .compare(.literal(let v, _), .equal, .column(let n, _, _), false) where n == column: return v
        case .isNull(.column(let n, _, _)) where n == column: return .null
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

    /// Whether `v` has the kind of this table's ids (so a key lookup finds exactly the equal rows).
    private func idKind(_ v: Value) -> Bool {
        switch (schema.idType, v) {
        case (.string, .string), (.integer, .int): return true
        default: return false
        }
    }

    func plan(for q: ResolvedQuery) -> Plan {
        let parts = MemTable.conjuncts(q.predicate)
        let idIndex = schema.idIndex
        for p in parts {
            switch p {
            // Direct lookups only for literals of the id's own kind: `id == 1.0` on the integer id of the
            // operations table matches id 1 numerically, which a key lookup would miss.
            case .compare(.column(let n, _, _), .equal, .literal(let v, _), _) where n == idIndex && idKind(v):
                return .ids([v])
            case .compare(.literal(let v, _), .equal, .column(let n, _, _), _) where n == idIndex && idKind(v):
                return .ids([v])
            case .in(.column(let n, _, _), let vs, _) where n == idIndex && vs.allSatisfy(idKind): return .ids(vs)
            default: continue
            }
        }
        if let c = compoundCandidate(q, parts) {
            // A column index's best constraint scores 2 (equality) or 1 (range), doubled as above.
            let single = parts.lazy.compactMap { self.indexRanges($0) }.map { r in r.1.allSatisfy { $0.lower == $0.upper && $0.lowerInclusive } ? 4 : 2 }.max() ?? 0
            if c.score > single {
                let countOnly = c.exact && q.top == 0
                return .compound(index: c.index, range: c.range, order: countOnly ? nil : c.order, countOnly: countOnly, leading: c.leading)
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
            let low = r.lower.map { tree.estimatedRank(of: IndexEntry(bound: $0, edge: r.lowerInclusive ? -1 : 1)) } ?? 0
            let high = r.upper.map { tree.estimatedRank(of: IndexEntry(bound: $0, edge: r.upperInclusive ? 1 : -1)) }
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
            let flipped: QueryPredicate.ComparisonOperator
            switch op {
            case .less: flipped = .greater
            case .lessOrEqual: flipped = .greaterOrEqual
            case .greater: flipped = .less
            case .greaterOrEqual: flipped = .lessOrEqual
            default: flipped = op
            }
            guard let r = range(flipped, v) else { return nil }
            return (n, [r])
        case .in(.column(let n, _, _), let vs, false) where indexes[n] != nil:
            return (n, vs.map { IndexRange(lower: $0, lowerInclusive: true, upper: $0, upperInclusive: true) })
        case .isNull(.column(let n, _, _)) where indexes[n] != nil:
            return (n, [IndexRange(lower: .null, lowerInclusive: true, upper: .null, upperInclusive: true)])
        case .string(.startsWith, .column(let n, _, _), .literal(.string(let prefix), _), false) where indexes[n] != nil:
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

    /// Selects the rows `q` returns (not projected) and the number of matches.
    func run(_ q: ResolvedQuery) -> (rows: [[Value]], count: Int) {
        switch plan(for: q) {
        case .ids(let ids):
            var seen = Set<Int>()
            var candidates: [[Value]] = []
            for id in ids {
                if let slot = slotByKey[MemTable.key(id)], ids.count == 1 || seen.insert(slot).inserted {
                    candidates.append(slots[slot])
                }
            }
            return q.select(candidates)
        case .indexRange(let n, let ranges):
            var seen = Set<Int>()
            var candidates: [[Value]] = []
            guard let tree = indexes[n] else { return scan(q) }
            for r in ranges {
                let start = r.lower.map { IndexEntry(bound: $0, edge: r.lowerInclusive ? -1 : 1) }
                tree.forEach(ascendingFrom: start, inclusive: true) { entry in
                    if let upper = r.upper {
                        let c = Collation.compare(entry.value, upper)
                        if c > 0 || (c == 0 && !r.upperInclusive) { return false }
                    }
                    if let prefix = r.prefix {
                        guard case .string(let s) = entry.value, s.utf8.starts(with: prefix.utf8) else { return false }
                    }
                    // One range visits a row once; several (an IN list) may meet it again.
                    if ranges.count == 1 || seen.insert(entry.slot).inserted { candidates.append(slots[entry.slot]) }
                    return true
                }
            }
            return q.select(candidates)
        case .ordered(let n, let descending):
            guard let tree = indexes[n], let top = q.top else { return scan(q) }
            let wanted = q.skip.addingReportingOverflow(top)
            if wanted.overflow { return scan(q) }
            // Walk the index in the first key's order, one group of equal values at a time; sort each
            // group by the full order (later keys, then id) and stop once skip + top rows are out.
            // Locals, not `q`: a closure using `q` would copy the whole query on every call.
            let keys = q.sort
            let predicate = RowTest(q.predicate)
            var out: [[Value]] = []
            var group: [[Value]] = []
            var groupValue: Value? = nil
            func flush() {
                if group.count > 1 { group.sort { ResolvedQuery.compare($0, $1, by: keys) < 0 } }
                out.append(contentsOf: group)
                group.removeAll(keepingCapacity: true)
            }
            // A non-escaping closure and a local `slots`: no dynamic exclusivity checks per entry.
            let slots = self.slots
            MemTable.walk(tree, descending: descending) { entry in
                if let g = groupValue, Collation.compare(g, entry.value) != 0 {
                    flush()
                    if out.count >= wanted.partialValue { return false }
                }
                groupValue = entry.value
                let row = slots[entry.slot]
                if predicate.matches(row) { group.append(row) }
                return true
            }
            flush()
            return (Array(out.dropFirst(q.skip).prefix(top)), out.count)
        case .idRange(let r):
            // Entries of `idOrder` hold the id in `id`; bounds compare ids with the id column's rule.
            var candidates: [[Value]] = []
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
            let start = r.lower.flatMap { $0.isNull ? nil : IndexEntry(.null, $0) }
            let predicate = RowTest(q.predicate)
            idOrder.forEach(ascendingFrom: start, inclusive: r.lowerInclusive) { entry in
                if let upper = r.upper {
                    let c = Collation.compare(entry.id, upper, noCase: noCase)
                    if c > 0 || (c == 0 && !r.upperInclusive) { return false }
                }
                let row = slots[entry.slot]
                if predicate.matches(row) { candidates.append(row) }
                return candidates.count < limit
            }
            return q.select(candidates)
        case .idOrdered(let descending):
            guard let top = q.top else { return scan(q) }
            let wanted = q.skip.addingReportingOverflow(top)
            if wanted.overflow { return scan(q) }
            var out: [[Value]] = []
            let predicate = RowTest(q.predicate)
            // The walk reads rows in id order, which is random memory order. When the filter passes few
            // rows it would read most of the table that way; past a budget, a scan in memory order (with
            // a top-k heap) is cheaper, so give up the walk and scan.
            var budget = Int.max
            if case .general(.constant(true)) = predicate {} else { budget = max(wanted.partialValue * 16, rowCount / 8) }
            var exhausted = false
            let slots = self.slots
            if wanted.partialValue > 0 {
                MemTable.walk(idOrder, descending: descending) { entry in
                    budget -= 1
                    if budget < 0 {
                        exhausted = true
                        return false
                    }
                    let row = slots[entry.slot]
                    if predicate.matches(row) { out.append(row) }
                    return out.count < wanted.partialValue
                }
            }
            if exhausted { return scan(q) }
            return (Array(out.dropFirst(q.skip).prefix(top)), out.count)
        case .scan:
            return scan(q)
        case .compound(let n, let range, let order, let countOnly, _):
            return runCompound(q, compound[n], range, order: order, countOnly: countOnly)
        }
    }

    /// Runs a compound-index plan: visits the entries of `range` in tree order (reversed for a
    /// descending walk) and counts them, collects their rows, or — walking in the sort's order —
    /// groups them by the first `groupComponents` values, sorts each group by the full order and
    /// stops once skip + top rows are out.
    private func runCompound(_ q: ResolvedQuery, _ c: CompoundIndex, _ range: CompoundRange, order: CompoundOrder?, countOnly: Bool)
        -> (rows: [[Value]], count: Int)
    {
        // Tree-order bounds: a descending component holds its values in reverse, so its value range
        // starts at `upper`.
        let k = range.equal.count
        let reversed = k < c.columns.count && c.descending[k]
        let first: (Value?, Bool) = reversed ? (range.upper, range.upperInclusive) : (range.lower, range.lowerInclusive)
        let last: (Value?, Bool) = reversed ? (range.lower, range.lowerInclusive) : (range.upper, range.upperInclusive)
        // `start` sorts just before the first entry of the range, `end` just after the last one.
        let start: CompoundEntry? = first.0.map { c.bound(range.equal + [$0], edge: first.1 ? -1 : 1) }
            ?? (k > 0 ? c.bound(range.equal, edge: -1) : nil)
        let end: CompoundEntry? = last.0.map { c.bound(range.equal + [$0], edge: last.1 ? 1 : -1) }
            ?? (k > 0 ? c.bound(range.equal, edge: 1) : nil)
        let slots = self.slots
        if countOnly {
            var n = 0
            c.tree.forEach(ascendingFrom: start, inclusive: true) { entry in
                if let end, CompoundEntry.compare(entry, end) > 0 { return false }
                n += 1
                return true
            }
            return ([], n)
        }
        let predicate = RowTest(q.predicate)
        guard let order, let top = q.top else {
            var candidates: [[Value]] = []
            c.tree.forEach(ascendingFrom: start, inclusive: true) { entry in
                if let end, CompoundEntry.compare(entry, end) > 0 { return false }
                let row = slots[entry.slot]
                if predicate.matches(row) { candidates.append(row) }
                return true
            }
            return q.select(candidates)
        }
        let wanted = q.skip.addingReportingOverflow(top)
        if wanted.overflow { return q.select(candidates(c, start, end)) }
        if wanted.partialValue == 0 { return ([], 0) }
        let keys = q.sort
        let g = order.groupComponents
        var out: [[Value]] = []
        var group: [[Value]] = []
        var groupEntry: CompoundEntry? = nil
        func flush() {
            if group.count > 1 { group.sort { ResolvedQuery.compare($0, $1, by: keys) < 0 } }
            out.append(contentsOf: group)
            group.removeAll(keepingCapacity: true)
        }
        func visit(_ entry: CompoundEntry) -> Bool {
            if let ge = groupEntry, !ge.samePrefix(entry, g) {
                flush()
                if out.count >= wanted.partialValue { return false }
            }
            groupEntry = entry
            let row = slots[entry.slot]
            if predicate.matches(row) { group.append(row) }
            return true
        }
        if order.descending {
            c.tree.forEach(descendingFrom: end, inclusive: true) { entry in
                if let start, CompoundEntry.compare(entry, start) < 0 { return false }
                return visit(entry)
            }
        } else {
            c.tree.forEach(ascendingFrom: start, inclusive: true) { entry in
                if let end, CompoundEntry.compare(entry, end) > 0 { return false }
                return visit(entry)
            }
        }
        flush()
        return (Array(out.dropFirst(q.skip).prefix(top)), out.count)
    }

    /// Every row of the compound index between `start` and `end`.
    private func candidates(_ c: CompoundIndex, _ start: CompoundEntry?, _ end: CompoundEntry?) -> [[Value]] {
        var rows: [[Value]] = []
        c.tree.forEach(ascendingFrom: start, inclusive: true) { entry in
            if let end, CompoundEntry.compare(entry, end) > 0 { return false }
            rows.append(slots[entry.slot])
            return true
        }
        return rows
    }

    /// Visits every entry of `tree` in ascending or descending order until `body` returns false.
    private static func walk(_ tree: BTree<IndexEntry>, descending: Bool, _ body: (IndexEntry) -> Bool) {
        if descending {
            tree.forEach(descendingFrom: nil, inclusive: true, body)
        } else {
            tree.forEach(ascendingFrom: nil, inclusive: true, body)
        }
    }

    /// Runs `q` over every row, testing the rows in place: only matching rows are copied out.
    private func scan(_ q: ResolvedQuery) -> (rows: [[Value]], count: Int) {
        let test = RowTest(q.predicate)
        if q.top == 0 {
            guard q.includeTotalCount else { return ([], 0) }
            var count = 0
            slots.withUnsafeBufferPointer { buffer in
                for i in buffer.indices where !buffer[i].isEmpty && test.matches(buffer[i]) { count += 1 }
            }
            return ([], count)
        }
        var matched: [[Value]] = []
        slots.withUnsafeBufferPointer { buffer in
            for i in buffer.indices where !buffer[i].isEmpty && test.matches(buffer[i]) { matched.append(buffer[i]) }
        }
        return q.select(matched)
    }
}

/// A filter for a scan: the commonest shapes (a boolean or integer column against a literal) tested inline,
/// so the loop stays small enough for the processor to overlap the memory reads of several rows; anything
/// else through ``ResolvedPredicate/matches(_:)``. Same results: a null column matches no comparison.
private enum RowTest {
    case bool(column: Int, equal: Bool, to: Bool)
    case int(column: Int, QueryPredicate.ComparisonOperator, Int64)
    /// A case-sensitive string test of a column against a literal (boxed: a one-pointer payload
    /// keeps the other cases' scan loops as cheap as without it).
    case string(StringTest)
    case general(ResolvedPredicate)

    init(_ p: ResolvedPredicate) {
        switch p {
        case .compare(.column(let n, .boolean, _), let op, .literal(.bool(let v), _), _) where op == .equal || op == .notEqual:
            self = .bool(column: n, equal: op == .equal, to: v)
        case .compare(.column(let n, .integer, _), let op, .literal(.int(let v), _), _):
            self = .int(column: n, op, v)
        case .string(let op, .column(let n, .string, false), .literal(.string(let pattern), _), false):
            self = .string(StringTest(op: op, column: n, pattern: pattern))
        default:
            self = .general(p)
        }
    }

    @inline(__always) func matches(_ row: [Value]) -> Bool {
        switch self {
        case .bool(let n, let equal, let v):
            guard case .bool(let b) = row[n] else { return false }
            return (b == v) == equal
        case .int(let n, let op, let v):
            guard case .int(let x) = row[n] else { return false }
            switch op {
            case .equal: return x == v
            case .notEqual: return x != v
            case .less: return x < v
            case .lessOrEqual: return x <= v
            case .greater: return x > v
            case .greaterOrEqual: return x >= v
            }
        case .string(let t):
            return t.matches(row)
        case .general(let p):
            return p.matches(row)
        }
    }

    final class StringTest: Sendable {
        let op: QueryPredicate.StringOperator
        let column: Int
        let pattern: String

        init(op: QueryPredicate.StringOperator, column: Int, pattern: String) {
            self.op = op
            self.column = column
            self.pattern = pattern
        }

        func matches(_ row: [Value]) -> Bool {
            guard case .string(let s) = row[column] else { return false }
            switch op {
            case .startsWith: return s.utf8.starts(with: pattern.utf8)
            case .endsWith: return s.utf8.reversed().starts(with: pattern.utf8.reversed())
            case .contains: return StringSearch.contains(s, pattern)
            }
        }
    }
}

/// An entry of a column index: the column's value, then the row's id; `edge` makes a bound that
/// sorts before (-1) or after (+1) every entry with the same value.
struct IndexEntry: Comparable, Sendable {
    let value: Value
    let id: Value
    /// The row's slot in its ``MemTable`` (not part of the order; -1 for a bound).
    let slot: Int
    let edge: Int8

    init(_ value: Value, _ id: Value, slot: Int = -1) {
        self.value = value
        self.id = id
        self.slot = slot
        self.edge = 0
    }

    init(bound value: Value, edge: Int8) {
        self.value = value
        self.id = .null
        self.slot = -1
        self.edge = edge
    }

    static func < (l: IndexEntry, r: IndexEntry) -> Bool { compare(l, r) < 0 }
    static func == (l: IndexEntry, r: IndexEntry) -> Bool { compare(l, r) == 0 }

    static func compare(_ l: IndexEntry, _ r: IndexEntry) -> Int {
        let c = Collation.compare(l.value, r.value)
        if c != 0 { return c }
        if l.edge != 0 || r.edge != 0 { return Int(l.edge) - Int(r.edge) }
        return Collation.compare(l.id, r.id, noCase: true)
    }
}

/// A compound index of a ``MemTable``: the column positions, their directions and the tree.
struct CompoundIndex {
    let index: TableIndex
    let columns: [Int]
    let descending: [Bool]
    /// Bit `i` set when component `i` is descending.
    let mask: UInt32
    var tree = BTree<CompoundEntry>()

    init?(_ index: TableIndex, schema: TableSchema) {
        guard let positions = schema.positions(of: index), !positions.isEmpty, positions.count <= 32 else { return nil }
        self.index = index
        columns = positions.map(\.column)
        descending = positions.map(\.descending)
        var mask: UInt32 = 0
        for (i, p) in positions.enumerated() where p.descending { mask |= 1 << UInt32(i) }
        self.mask = mask
    }

    func entry(_ row: [Value], _ idIndex: Int, slot: Int) -> CompoundEntry {
        CompoundEntry(values: columns.map { row[$0] }, id: row[idIndex], slot: slot, edge: 0, mask: mask)
    }

    /// A bound that sorts before (`edge` -1) or after (+1) every entry starting with `values`.
    func bound(_ values: [Value], edge: Int8) -> CompoundEntry {
        CompoundEntry(values: values, id: .null, slot: -1, edge: edge, mask: mask)
    }
}

/// An entry of a compound index: the indexed values (each component ascending or, per `mask`,
/// descending with nulls last), then the row's id (ascending, NOCASE). A bound holds a prefix of the
/// values and an `edge` placing it before (-1) or after (+1) every entry with that prefix.
struct CompoundEntry: Comparable, Sendable {
    let values: [Value]
    let id: Value
    /// The row's slot in its ``MemTable`` (not part of the order; -1 for a bound).
    let slot: Int
    let edge: Int8
    let mask: UInt32

    static func < (l: CompoundEntry, r: CompoundEntry) -> Bool { compare(l, r) < 0 }
    static func == (l: CompoundEntry, r: CompoundEntry) -> Bool { compare(l, r) == 0 }

    static func compare(_ l: CompoundEntry, _ r: CompoundEntry) -> Int {
        let n = min(l.values.count, r.values.count)
        for i in 0..<n {
            let c = Collation.compare(l.values[i], r.values[i])
            if c != 0 { return l.mask & (1 << UInt32(i)) != 0 ? -c : c }
        }
        if l.edge != 0 || r.edge != 0 { return Int(l.edge) - Int(r.edge) }
        return Collation.compare(l.id, r.id, noCase: true)
    }

    /// Whether the first `count` values of two entries are equal.
    func samePrefix(_ other: CompoundEntry, _ count: Int) -> Bool {
        for i in 0..<min(count, values.count, other.values.count) where Collation.compare(values[i], other.values[i]) != 0 { return false }
        return true
    }
}
