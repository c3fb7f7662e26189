import LocalStore

/// A range of an engine's keys, `lower <= key < upper`: a plan's ``KeyRange`` under its source's prefix.
struct KVKeyRange: Hashable, Sendable {
    var lower: [UInt8]
    /// `nil`: no upper bound.
    var upper: [UInt8]?

    /// The first key after every key that starts with `prefix`, or `nil` when there is none (no upper bound).
    static func end(of prefix: [UInt8]) -> [UInt8]? { KeyCodec.successor(prefix) }

    /// `range` (bounds relative to `prefix`, `nil` meaning unbounded) as keys of the engine.
    init(_ range: KeyRange, under prefix: [UInt8]) {
        lower = prefix + (range.lower ?? [])
        upper = range.upper.map { prefix + $0 } ?? Self.end(of: prefix)
    }
}

extension KVTable {
    /// The prefix of `source`'s keys.
    func prefix(_ source: PlanSource) -> [UInt8] {
        switch source {
        case .primary: return KVKeys.rows(number)
        case .index(let index): return KVKeys.index(number, specs[index.slot].number)
        }
    }
}

/// The reads of ``KVStore`` over a snapshot or a write transaction. Not generic over the reader: code of this
/// module runs unspecialized for an engine of another module, and a generic value's type metadata is looked up
/// in the runtime's cache (~300 instructions) every time such code makes one; an existential reader is not.
struct KVReads {
    let reader: any OrderedKeyValueReader
    let catalog: KVCatalog

    func row(_ table: KVTable, idKey: [UInt8]) throws -> [Value]? {
        try reader.withValue(KVKeys.row(table.number, idKey: idKey)) { try $0.map(table.decode) }
    }

    /// The plan of `query` on `table` (the shared ``QueryPlanner`` over the table's indexes, with the row
    /// count and the index entries as statistics for its cost choice), and the same plan again when it can
    /// be reused for the same query and catalog: when the planner did not look at the data to choose it.
    func plan(_ table: KVTable, _ query: ResolvedQuery) throws -> (plan: QueryPlan, reusable: QueryPlan?) {
        let statistics = PlanStatistics(
            rowCount: { Int(clamping: try KVCatalog.readNumber(KVKeys.rowCount(table.number), reader)) },
            countEntries: { source, ranges, limit in try countEntries(table, source, ranges, limit: limit) })
        return try QueryPlanner(schema: table.schema, indexes: table.indexes, query: query, statistics: statistics).reusablePlan()
    }

    /// The number of entries of `source` within `ranges`, counted no further than `limit` (the planner's
    /// statistics; an index-only count).
    /// With `distinct`, an index's entries of one row within several ranges (overlapping `IN` ranges) count once.
    func countEntries(_ table: KVTable, _ source: PlanSource, _ ranges: [KeyRange], limit: Int = .max, distinct: Bool = false) throws -> Int {
        let prefix = table.prefix(source)
        let spec: KVIndexSpec? = if case .index(let index) = source { table.specs[index.slot] } else { nil }
        let dedup = distinct && ranges.count > 1
        var seen = Set<[UInt8]>()
        var n = 0
        for range in ranges where n < limit {
            let keys = KVKeyRange(range, under: prefix)
            try reader.scan(from: keys.lower, to: keys.upper, reverse: false) { key, value in
                if dedup {
                    let id = spec.map { Self.entryIdKey($0, value) } ?? Array(key)
                    guard seen.insert(id).inserted else { return true }
                }
                n += 1
                return n < limit
            }
        }
        return n
    }

    func schema(of name: String) -> TableSchema? { catalog.lookup(name)?.schema }

    func read(table name: String, id: Value) throws -> Item? {
        let table = try catalog.table(name)
        try table.checkId(id)
        func item(_ record: UnsafeRawBufferPointer?) throws -> Item? { try record.map { try table.wholeRows.item($0) } }
        // The key on the stack (no array per read), unless the id is too long for it.
        return try KVKeys.withRowKey(table.number, id: id) { key in
            guard let key else { return try reader.withValue(table.rowKey(id), item) }
            return try reader.withValue(forKey: key, item)
        }
    }

    func read(_ query: Query) throws -> ReadResult {
        let table = try catalog.table(query.table)
        // A plan chosen by counting (the planner's cost choice) is made again on every read.
        var made: QueryPlan?
        let entry = try catalog.plans.entry(query, version: catalog.version) {
            let resolved = try ResolvedQuery(query, schema: table.schema)
            let (plan, reusable) = try self.plan(table, resolved)
            made = plan
            var items: RecordItemBuilder?
            if case .compoundOrdered(_, _, _, _, _, exact: true) = plan { items = RecordItemBuilder(resolved) }
            return KVPlanCache.Entry(resolved: resolved, plan: reusable, items: items)
        }
        let resolved = entry.resolved
        let plan = try made ?? entry.plan ?? self.plan(table, resolved).plan
        switch plan {
        case .compoundOrdered(let index, let range, let descending, let groupComponents, _, exact: true):
            if let builder = entry.items,
                let items = try exactWalk(
                    table, builder, index, range, reverse: descending, need: Self.need(resolved), groupComponents: groupComponents,
                    skip: resolved.skip)
            {
                return ReadResult(items: items, totalCount: nil)
            }
        case .countEntries(let index, let ranges, _):
            // Only the count is wanted, and the entries are exactly the matches: no row is read.
            return ReadResult(items: [], totalCount: resolved.includeTotalCount ? try countEntries(table, .index(index), ranges, distinct: true) : nil)
        default:
            break
        }
        if let top = resolved.top, resolved.skip.addingReportingOverflow(top) == (0, false) {
            // Only the count is wanted (or nothing): the matches are counted, not decoded.
            guard resolved.includeTotalCount else { return ReadResult(items: [], totalCount: nil) }
            return ReadResult(items: [], totalCount: try matches(table, resolved, plan, decoding: false).count)
        }
        return resolved.apply(toMatching: try matches(table, resolved, plan).rows)
    }

    /// The rows an ordered walk must return: skip + top (every row when there is no top or it overflows).
    static func need(_ query: ResolvedQuery) -> Int {
        guard let top = query.top else { return .max }
        let n = query.skip.addingReportingOverflow(top)
        return n.overflow ? .max : n.partialValue
    }

    /// The length of the first `components` components of an index entry's key, after the index's prefix
    /// (`start` bytes).
    static func groupEnd(_ key: UnsafeRawBufferPointer, start: Int, _ index: IndexDefinition, components: Int) -> Int {
        var end = start
        for component in index.components.prefix(components) {
            end += KeyCodec.componentLength(key, at: end, descending: component.descending) ?? (key.count - end)
        }
        return min(key.count, end)
    }

    /// The id key of an index entry of `spec` (the entry's value: the id key, or for a covering entry its
    /// length, the id key and the record).
    static func entryIdKey(_ spec: KVIndexSpec, _ value: UnsafeRawBufferPointer) -> [UInt8] {
        guard spec.covering == true else { return Array(value) }
        var reader = ByteReader(value)
        guard let length = try? reader.length(), reader.offset + length <= value.count else { return Array(value) }
        return Array(value[reader.offset..<reader.offset + length])
    }

    /// The items of an exact walk (every entry matches), built from its entries' records without a
    /// decoded row, or `nil` when two of the entries it reads tie on the sort's components: the walk
    /// orders those by id key, which is not the evaluator's id order in every case (a reversed walk,
    /// NOCASE ids holding a NUL), so the shared evaluator orders them instead.
    func exactWalk(
        _ table: KVTable, _ builder: RecordItemBuilder, _ index: IndexDefinition, _ range: KeyRange, reverse: Bool, need: Int,
        groupComponents: Int, skip: Int
    ) throws -> [Item]? {
        let spec = table.specs[index.slot]
        let prefix = table.prefix(.index(index))
        let start = prefix.count
        let keys = KVKeyRange(range, under: prefix)
        var records: [UInt8] = []
        var spans: [Range<Int>] = []
        var group: [UInt8] = []
        var rowKey: [UInt8] = []
        var tie = false
        try reader.scan(from: keys.lower, to: keys.upper, reverse: reverse) { key, value in
            let current = UnsafeRawBufferPointer(rebasing: key[start..<Self.groupEnd(key, start: start, index, components: groupComponents)])
            if KeyCodec.equals(current, group) {
                tie = true
                return false
            }
            if spans.count >= need { return false }
            group.removeAll(keepingCapacity: true)
            group.append(contentsOf: current)
            try table.withEntryRecord(spec, value, reader: reader, rowKey: &rowKey) { record in
                spans.append(records.count..<records.count + record.count)
                records.append(contentsOf: record)
            }
            return true
        }
        if tie { return nil }
        let taken = spans.dropFirst(skip)
        return try records.withUnsafeBytes { bytes in
            try builder.items(count: taken.count) { UnsafeRawBufferPointer(rebasing: bytes[taken[taken.startIndex + $0]]) }
        }
    }

    func accessPath(_ query: Query) throws -> QueryAccessPath {
        let table = try catalog.table(query.table)
        return try plan(table, try ResolvedQuery(query, schema: table.schema)).plan.accessPath(schema: table.schema)
    }

    /// The keys `delete(matching:)` removes for `query` without `top` and `skip` over a plan that reads one
    /// key range (of the rows or of an index) or every row, and how many rows they hold; `nil` for any
    /// other query or plan. The range is walked once and each matching row's keys are collected on the
    /// way: the walked entry's own key, the row's key, and the keys of its other index entries, built from
    /// the columns those indexes hold — located in the record, not decoded whole.
    func deletion(_ table: KVTable, _ query: ResolvedQuery, _ plan: QueryPlan) throws -> (keys: [[UInt8]], rows: Int)? {
        guard query.top == nil, query.skip == 0 else { return nil }
        let source: PlanSource
        let range: KeyRange
        switch plan {
        case .ranges(let s, let r) where r.count == 1: (source, range) = (s, r[0])
        case .compoundRanges(let index, let r, _) where r.count == 1: (source, range) = (.index(index), r[0])
        case .scan: (source, range) = (.primary, .all)
        default: return nil
        }
        let walked: KVIndexSpec? = if case .index(let index) = source { table.specs[index.slot] } else { nil }
        let others = table.specs.filter { $0.number != walked?.number }
        var needed = ColumnSet()
        for spec in others { for column in spec.columns { needed.insert(column) } }
        let columns = needed.members
        let fields = RecordFields(schema: table.schema, through: columns.last ?? 0)
        let filter = RecordFilter(query)
        let prefix = table.prefix(source)
        let keys = KVKeyRange(range, under: prefix)
        // Behind a pointer, as in `matches`: the scan's closure updates them per entry.
        let found = UnsafeMutablePointer<(keys: [[UInt8]], rows: Int, row: [Value])>.allocate(capacity: 1)
        found.initialize(to: ([], 0, [Value](repeating: .null, count: table.schema.columns.count)))
        defer {
            found.deinitialize(count: 1)
            found.deallocate()
        }
        var rowKey: [UInt8] = []
        /// Collects the keys of a matching row: its other indexes' entries, built from `record`, then `rowKey`.
        func collect(_ record: UnsafeRawBufferPointer, id: [UInt8], rowKey: [UInt8]) throws {
            if !others.isEmpty {
                try fields.locate(record)
                for column in columns { found.pointee.row[column] = try fields.value(column) }
                for spec in others { found.pointee.keys.append(table.entryKey(spec, found.pointee.row, idKey: id)) }
            }
            found.pointee.keys.append(rowKey)
            found.pointee.rows += 1
        }
        // Each entry's record is tested first: nothing is copied or built for an entry that does not match.
        try reader.scan(from: keys.lower, to: keys.upper, reverse: false) { key, value in
            if let walked {
                try table.withEntryRecord(walked, value, reader: reader, rowKey: &rowKey) { record in
                    guard try filter.matches(record) else { return }
                    let id = Self.entryIdKey(walked, value)
                    found.pointee.keys.append(Array(key))
                    try collect(record, id: id, rowKey: KVKeys.row(table.number, idKey: id))
                }
            } else if try filter.matches(value) {
                try collect(value, id: Array(key[prefix.count...]), rowKey: Array(key))
            }
            return true
        }
        return (found.pointee.keys, found.pointee.rows)
    }

    /// The rows matching `query` that its plan yields: all of them, except that an ordered walk stops after
    /// the group in which skip + top matches are out (a group: the entries equal in the components the
    /// walk orders by), so the shared evaluator's order and cut over them is its order and cut over all rows.
    /// `decoding: false` (a query that wants only the count): the matches are counted, none is decoded.
    func matches(_ table: KVTable, _ query: ResolvedQuery, _ plan: QueryPlan, decoding: Bool = true) throws -> (rows: [[Value]], count: Int) {
        // The matches so far, behind a pointer: the local functions and closures below update them per
        // entry, and a captured `var` cost a dynamic exclusivity check (~75 instructions) per access.
        let found = UnsafeMutablePointer<(rows: [[Value]], count: Int)>.allocate(capacity: 1)
        found.initialize(to: ([], 0))
        defer {
            found.deinitialize(count: 1)
            found.deallocate()
        }
        // Records are tested in place (the columns the predicate reads, located without decoding) and
        // decoded only when they match.
        let filter = RecordFilter(query)
        var rowKey: [UInt8] = []
        func add(_ record: UnsafeRawBufferPointer) throws {
            guard try filter.matches(record) else { return }
            found.pointee.count += 1
            if decoding { found.pointee.rows.append(try table.decode(record)) }
        }
        /// Every row within `ranges` of `source`, each once (ranges from `IN` lists may overlap).
        func ranges(_ source: PlanSource, _ ranges: [KeyRange]) throws {
            let prefix = table.prefix(source)
            var seen = Set<[UInt8]>()
            let dedup = Set(ranges).count > 1
            for range in Set(ranges) {
                let keys = KVKeyRange(range, under: prefix)
                switch source {
                case .primary where !dedup && !decoding:
                    // A count over one range of rows (`count`, the commonest whole-table walk): the test
                    // inline, the one-pass form in a local, no call per record.
                    var n = 0
                    if let simple = filter.simple, case .bool = simple.kind {
                        // A boolean column's test (`count where done == false`): each tag's answer is known
                        // before the walk, and a record reads one byte (LMDB's count loop).
                        try reader.scan(from: keys.lower, to: keys.upper, reverse: false) { _, value in
                            if let base = value.baseAddress, let answer = simple.boolAnswer(base, value.count) {
                                if answer { n &+= 1 }
                            } else if try filter.matchesInGeneral(value) {
                                n &+= 1
                            }
                            return true
                        }
                    } else {
                        let simple = filter.simple
                        try reader.scan(from: keys.lower, to: keys.upper, reverse: false) { _, value in
                            if try filter.matches(value, simple) { n &+= 1 }
                            return true
                        }
                    }
                    found.pointee.count += n
                case .primary:
                    try reader.scan(from: keys.lower, to: keys.upper, reverse: false) { key, value in
                        if !dedup || seen.insert(Array(key)).inserted { try add(value) }
                        return true
                    }
                case .index(let index):
                    let spec = table.specs[index.slot]
                    try reader.scan(from: keys.lower, to: keys.upper, reverse: false) { _, value in
                        if !dedup || seen.insert(Self.entryIdKey(spec, value)).inserted {
                            try table.withEntryRecord(spec, value, reader: reader, rowKey: &rowKey) { try add($0) }
                        }
                        return true
                    }
                }
            }
        }
        /// One range of `source` walked in order, group by group, until `need` rows are out; `false` (and the
        /// walk given up) once it has visited more than `budget` entries.
        func walk(_ source: PlanSource, _ range: KeyRange, reverse: Bool, groupComponents: Int, budget: Int = .max) throws -> Bool {
            let need = Self.need(query)
            let prefix = table.prefix(source)
            let start = prefix.count
            let keys = KVKeyRange(range, under: prefix)
            var group: [UInt8] = []
            var visited = 0
            switch source {
            case .primary:
                // Row keys are in the evaluator's id order (NOCASE for a string id, NULs included:
                // `KeyCodec.appendNoCase`), and no two rows share an id: each row is a group of its own.
                try reader.scan(from: keys.lower, to: keys.upper, reverse: reverse) { _, value in
                    visited += 1
                    if visited > budget { return false }
                    try add(value)
                    return found.pointee.count < need
                }
            case .index(let index):
                let spec = table.specs[index.slot]
                try reader.scan(from: keys.lower, to: keys.upper, reverse: reverse) { key, value in
                    visited += 1
                    if visited > budget { return false }
                    let current = UnsafeRawBufferPointer(rebasing: key[start..<Self.groupEnd(key, start: start, index, components: groupComponents)])
                    if !KeyCodec.equals(current, group) {
                        if found.pointee.count >= need { return false }
                        group.removeAll(keepingCapacity: true)
                        group.append(contentsOf: current)
                    }
                    try table.withEntryRecord(spec, value, reader: reader, rowKey: &rowKey) { try add($0) }
                    return true
                }
            }
            return visited <= budget
        }
        switch plan {
        case .empty:
            break
        case .ids(let ids):
            var seen = Set<[UInt8]>()
            for id in ids {
                let key = KeyCodec.idKey(id)
                guard seen.insert(key).inserted else { continue }
                try reader.withValue(KVKeys.row(table.number, idKey: key)) { record in if let record { try add(record) } }
            }
        case .ranges(let source, let r):
            try ranges(source, r)
        case .walkOrRanges(let walked, let descending, let budget, let source, let r):
            // The walk over the sort's index, estimated cheaper; past its budget (the matches lie far along
            // the sort order), the ranges instead.
            if try !walk(walked, .all, reverse: descending, groupComponents: 1, budget: budget) {
                found.pointee = ([], 0)
                try ranges(source, r)
            }
        case .compoundRanges(let index, let r, _), .countEntries(let index, let r, _):
            try ranges(.index(index), r)
        case .ordered(let source, let range, let descending):
            _ = try walk(source, range, reverse: descending, groupComponents: 1)
        case .compoundOrdered(let index, let range, let descending, let groupComponents, _, _):
            _ = try walk(.index(index), range, reverse: descending, groupComponents: groupComponents)
        case .scan:
            try ranges(.primary, [.all])
        }
        return found.pointee
    }
}
