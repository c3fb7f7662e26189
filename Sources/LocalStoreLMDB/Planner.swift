import CLMDB
import Foundation
import LocalStore
import LocalStoreKV

/// Runs a plan inside a transaction.
struct QueryRunner {
    let context: TxnContext
    let table: TableDefinition
    let query: ResolvedQuery
    /// Whether each returned row carries where it is stored after its columns: `.binary(stored
    /// key)`, `.int(row number)` (for deleting the rows without looking them up again). The
    /// evaluator reads rows by column position only, so the extra values ride along unseen.
    var withLocation = false
    /// The position of the table's id column.
    private let idIndex: Int

    init(context: TxnContext, table: TableDefinition, query: ResolvedQuery, withLocation: Bool = false) {
        self.context = context
        self.table = table
        self.query = query
        self.withLocation = withLocation
        idIndex = table.schema.idIndex
    }

    var schema: TableSchema { table.schema }

    /// The row of a record, with its location when ``withLocation``.
    private func decodeRow(_ record: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) throws -> [Value] {
        let decoded = try RecordCodec.decode(record, schema: schema, idIndex: idIndex)
        guard withLocation else { return decoded.row }
        return QueryRunner.located(decoded.row, key: Array(key), rowId: decoded.rowId)
    }

    static func located(_ row: [Value], key: [UInt8], rowId: UInt64) -> [Value] {
        var row = row
        row.append(.binary(key))
        row.append(.int(Int64(bitPattern: rowId)))
        return row
    }

    /// The location a row of ``run()`` carries with ``withLocation``.
    static func location(_ row: [Value], width: Int) -> StoredRow? {
        guard row.count == width + 2, case .binary(let key) = row[width], case .int(let rowId) = row[width + 1] else { return nil }
        return StoredRow(key: key, row: Array(row[0..<width]), rowId: UInt64(bitPattern: rowId))
    }

    /// A record an ordered walk took: its bytes and its stored primary key, both valid until the
    /// transaction ends or writes (a query writes nothing while it runs).
    struct TakenRecord {
        let record: UnsafeRawBufferPointer
        let key: UnsafeRawBufferPointer
    }

    /// What a plan produced: rows (filtered, ordered, cut), or the records of an ordered walk — every
    /// match up to skip + top (a last group may run past it), in query order, not yet decoded.
    private enum Output {
        case rows([[Value]], count: Int)
        case records([TakenRecord], count: Int)
    }

    /// The rows the query returns (not projected) and the number of matches (meaningful when the
    /// query asks for the count).
    func run() throws -> (rows: [[Value]], count: Int) {
        switch try execute(try makePlan().plan) {
        case .rows(let rows, let count):
            return (rows, count)
        case .records(let taken, let count):
            // Every taken record is decoded (and so checked), the skipped ones too.
            let rows = try taken.map { try decodeRow($0.record, key: $0.key) }
            return (Array(rows.dropFirst(query.skip).prefix(query.top ?? rows.count)), count)
        }
    }

    /// The items the query returns and the number of matches (meaningful when the query asks for
    /// the count). The records of an ordered walk become items straight from their bytes
    /// (``RecordItemBuilder``: row-form items, no decoded row per record); other plans' rows are projected.
    /// `wholeRows`: a builder of every column of the table, used when the query returns them all.
    /// `plan`: the plan made for the same query and catalog before (``QueryPlanCache``), used instead of
    /// planning again. Returns the plan it ran when that plan depends on nothing but the query and the
    /// catalog (`reusable`; `nil` when the planner counted entries to choose it).
    func items(wholeRows: RecordItemBuilder? = nil, plan cached: QueryPlan? = nil) throws -> (items: [Item], count: Int, reusable: QueryPlan?) {
        let (plan, reusable) = try cached.map { ($0, $0) } ?? makePlan()
        let (items, count) = try items(try execute(plan), wholeRows: wholeRows)
        return (items, count, reusable)
    }

    private func items(_ output: Output, wholeRows: RecordItemBuilder?) throws -> (items: [Item], count: Int) {
        switch output {
        case .rows(let rows, let count):
            return (ItemProjector(query, wholeRows: wholeRows).items(rows), count)
        case .records(let taken, let count):
            let skip = query.skip
            let end = min(taken.count, query.top.map { skip.addingReportingOverflow($0).overflow ? Int.max : skip + $0 } ?? Int.max)
            guard skip < end else {
                for t in taken { try RecordCodec.check(t.record, schema: schema, idIndex: idIndex) }
                return ([], count)
            }
            let builder = wholeRows.flatMap { query.projection.count == schema.columns.count ? $0 : nil } ?? RecordItemBuilder(query)
            // Checked as the rows path decodes them: a damaged record is `corrupt` either way (in walk
            // order: the first damaged record's error is the one thrown).
            for i in 0..<skip { try RecordCodec.check(taken[i].record, schema: schema, idIndex: idIndex) }
            let items = try builder.items(count: end - skip) { taken[skip + $0].record }
            for i in end..<taken.count { try RecordCodec.check(taken[i].record, schema: schema, idIndex: idIndex) }
            return (items, count)
        }
    }

    /// The plan of the query, and the same plan again when it can be reused for the same query and
    /// catalog: when the planner did not look at the data (entry counts) to choose it.
    private func makePlan() throws -> (plan: QueryPlan, reusable: QueryPlan?) {
        try QueryPlanner(table: table, query: query, statistics: context.statistics(table)).reusablePlan()
    }

    private func execute(_ plan: QueryPlan) throws -> Output {
        let primary = try context.handle(table.database)
        if let top = query.top, top == 0 || query.skip.addingReportingOverflow(top) == (0, false) {
            // No rows wanted: at most the count, without building rows.
            guard query.includeTotalCount else { return .rows([], count: 0) }
            return .rows([], count: try count(plan, primary: primary))
        }
        if withLocation, query.top == nil, query.skip == 0 {
            // Every match, in no particular order (a deletion): the ranges' rows are the matches
            // already (each tested by the filter), so they are neither tested again nor sorted.
            switch plan {
            case .ranges(let source, let ranges):
                let rows = try rows(source, ranges, primary: primary)
                return .rows(rows, count: rows.count)
            case .compoundRanges(let index, let ranges, _):
                let rows = try rows(.index(index), ranges, primary: primary)
                return .rows(rows, count: rows.count)
            default:
                break
            }
        }
        func selected(_ rows: [[Value]]) -> Output {
            let (rows, count) = query.select(rows)
            return .rows(rows, count: count)
        }
        switch plan {
        case .empty:
            return .rows([], count: 0)
        case .ids(let ids):
            return selected(try rows(ids: ids))
        case .ranges(let source, let ranges):
            return selected(try rows(source, ranges, primary: primary))
        case .ordered(let source, let range, let descending):
            return try ordered(source, range, descending: descending, primary: primary, budget: .max)
                ?? selected(try rows(source, [range], primary: primary))
        case .walkOrRanges(let walk, let descending, let budget, let source, let ranges):
            if let result = try ordered(walk, .all, descending: descending, primary: primary, budget: budget) { return result }
            return selected(try rows(source, ranges, primary: primary))
        case .scan:
            let (rows, count) = try context.withAllRows(table, filter: RecordFilter(query), withLocation: withLocation) { query.select($0) }
            return .rows(rows, count: count)
        case .compoundOrdered(let index, let range, let descending, let groupComponents, _, let exact):
            return try ordered(
                .index(index), range, descending: descending, primary: primary, budget: .max, groupComponents: groupComponents,
                exact: exact)
                ?? selected(try rows(.index(index), [range], primary: primary))
        case .compoundRanges(let index, let ranges, _):
            return selected(try rows(.index(index), ranges, primary: primary))
        case .countEntries(let index, let ranges, _):
            return .rows([], count: try countEntries(index, ranges, primary: primary))
        }
    }

    /// The number of rows within `ranges` of `index`, which hold exactly the matching rows: entries
    /// are counted without reading their rows, except for a truncated (long) key or one outside
    /// the full-key bounds, whose row is read and tested. Several ranges (from `IN`) are deduplicated.
    private func countEntries(_ index: IndexDefinition, _ ranges: [KeyRange], primary: MDB_dbi) throws -> Int {
        let dbi = try context.handle(index.database)
        let dedup = ranges.count > 1
        var seen = Set<[UInt8]>()
        var n = 0
        let predicate = query.predicate
        let schema = self.schema
        for r in ranges {
            let s = r.stored
            try context.walkRaw(dbi, lower: s.lower, upper: s.upper, descending: false, index: index) { key, value in
                if dedup && !seen.insert(Array(value)).inserted { return true }
                if r.holdsWhole(key) {
                    n += 1
                } else if try row(storedKey: value, primary: primary, { record -> [Value]? in
                    let row = try RecordCodec.decode(record, schema: schema).row
                    return predicate.matches(row) ? row : nil
                }) != nil {
                    n += 1
                }
                return true
            }
        }
        return n
    }

    private func rows(ids: [Value]) throws -> [[Value]] {
        var seen = Set<[UInt8]>()
        var rows: [[Value]] = []
        for id in ids where ids.count == 1 || seen.insert(KeyCodec.idKey(id)).inserted {
            if let found = try context.findRow(table, id: id) {
                rows.append(withLocation ? QueryRunner.located(found.row, key: found.key, rowId: found.rowId) : found.row)
            }
        }
        return rows
    }

    /// The number of rows matching the predicate, read the cheapest way the plan allows: records
    /// are tested in place (``RecordFilter``), never decoded into rows; an index range whose
    /// entries carry every column the predicate reads is counted from the index keys alone.
    private func count(_ plan: QueryPlan, primary: MDB_dbi) throws -> Int {
        switch plan {
        case .empty:
            return 0
        case .ids(let ids):
            return try rows(ids: ids).reduce(0) { $0 + (query.predicate.matches($1) ? 1 : 0) }
        case .ranges(let source, let ranges):
            return try count(source, ranges, primary: primary)
        case .ordered(let source, let range, _):
            return try count(source, [range], primary: primary)
        case .walkOrRanges(_, _, _, let source, let ranges):
            return try count(source, ranges, primary: primary)
        case .scan:
            return try count(.primary, [.all], primary: primary)
        case .compoundOrdered(let index, let range, _, _, _, _):
            return try count(.index(index), [range], primary: primary)
        case .compoundRanges(let index, let ranges, _):
            return try count(.index(index), ranges, primary: primary)
        case .countEntries(let index, let ranges, _):
            return try countEntries(index, ranges, primary: primary)
        }
    }

    private func count(_ source: PlanSource, _ ranges: [KeyRange], primary: MDB_dbi) throws -> Int {
        let dedup = ranges.count > 1
        var seen = Set<[UInt8]>()
        let filter = RecordFilter(query)
        var n = 0
        switch source {
        case .primary where ranges.count == 1 && ranges[0].lower == nil && ranges[0].upper == nil:
            return try context.countAll(primary, filter)
        case .primary:
            for r in ranges {
                let s = r.stored
                n += try context.withRange(primary, lower: s.lower, upper: s.upper, descending: false) { cursor in
                    var n = 0
                    while let (key, value) = try cursor.next() {
                        if !dedup || seen.insert(Array(key)).inserted, try filter.matches(value) { n += 1 }
                    }
                    return n
                }
            }
        case .index(let index):
            let dbi = try context.handle(index.database)
            let keyTest = IndexKeyTest(index: index, predicate: query.predicate, schema: schema)
            for r in ranges {
                let s = r.stored
                n += try context.withRange(dbi, lower: s.lower, upper: s.upper, descending: false, index: index) { cursor in
                    var n = 0
                    while let (key, value) = try cursor.next() {
                        guard !dedup || seen.insert(Array(value)).inserted else { continue }
                        if let keyTest, let answer = keyTest.matches(key) {
                            if answer { n += 1 }
                        } else if try row(storedKey: value, primary: primary, { try filter.matches($0) }) {
                            n += 1
                        }
                    }
                    return n
                }
            }
        }
        return n
    }

    /// The rows within `ranges` of `source` that match, each once. One range holds every row at
    /// most once (a row has one entry per index); several ranges (from `IN`) may overlap and are
    /// deduplicated.
    private func rows(_ source: PlanSource, _ ranges: [KeyRange], primary: MDB_dbi) throws -> [[Value]] {
        let dedup = ranges.count > 1
        let filter = RecordFilter(query)
        var seen = Set<[UInt8]>()
        var rows: [[Value]] = []
        let dbi: MDB_dbi
        let walked: IndexDefinition?
        switch source {
        case .primary: (dbi, walked) = (primary, nil)
        case .index(let index): (dbi, walked) = (try context.handle(index.database), index)
        }
        for r in ranges {
            let s = r.stored
            try context.withRange(dbi, lower: s.lower, upper: s.upper, descending: false, index: walked) { cursor in
                while let (key, value) = try cursor.next() {
                    switch source {
                    case .primary:
                        if !dedup || seen.insert(Array(key)).inserted, try filter.matches(value) {
                            rows.append(try decodeRow(value, key: key))
                        }
                    case .index:
                        if !dedup || seen.insert(Array(value)).inserted,
                            let row = try row(storedKey: value, primary: primary, { try filter.matches($0) ? try decodeRow($0, key: value) : nil })
                        {
                            rows.append(row)
                        }
                    }
                }
            }
        }
        return rows
    }

    /// `decode` applied to the record stored under a primary key found in an index.
    private func row<T>(storedKey: UnsafeRawBufferPointer, primary: MDB_dbi, _ decode: (UnsafeRawBufferPointer) throws -> T)
        throws -> T
    {
        guard let decoded = try context.withValue(primary, raw: storedKey, decode) else {
            throw LMDBErrors.danglingIndexEntry(table: schema.name)
        }
        return decoded
    }

    /// Walks `range` of `source` in the order of the first sort key, one group of equal first-key
    /// values at a time; each group is put in the full order (later keys, then id) and the walk
    /// stops once skip + top rows are out. Truncated long keys can put different values in one
    /// group (their order within the group is restored by the sort), never out of group order.
    /// A group already in order (every group of one row, and so every row of a primary-key walk
    /// whose keys are not truncated) is not sorted again. The walk keeps the matching records as
    /// they are stored (``TakenRecord``); only the members of a group of two or more are decoded
    /// here, to be put in order.
    /// `nil` when the walk visited more than `budget` entries before it was done. `exact`: every entry of
    /// `range` is a match (the predicate is not tested).
    private func ordered(
        _ source: PlanSource, _ range: KeyRange, descending: Bool, primary: MDB_dbi, budget: Int, groupComponents: Int = 1,
        exact: Bool = false
    ) throws -> Output? {
        func all() throws -> Output {
            let (rows, count) = try context.withAllRows(table, withLocation: withLocation) { query.select($0) }
            return .rows(rows, count: count)
        }
        guard let top = query.top else { return try all() }
        let wanted = query.skip.addingReportingOverflow(top)
        if wanted.overflow { return try all() }
        if wanted.partialValue == 0 { return .rows([], count: 0) }
        let limit = wanted.partialValue
        // The predicate's test, made when a row must be tested: with `exact`, only for an entry whose key
        // is truncated (long) or lies outside the range's full-key bounds (as ``countEntries`` does).
        var filter = LazyRecordFilter(query)
        func matches(_ record: UnsafeRawBufferPointer) throws -> Bool { try filter.matches(record) }
        func answeredByKey(_ key: UnsafeRawBufferPointer) -> Bool { exact && range.holdsWhole(key) }
        let sort = query.sort
        let schema = self.schema
        let idIndex = self.idIndex
        let s = range.stored
        let isPrimary: Bool
        let dbi: MDB_dbi
        let index: IndexDefinition?
        switch source {
        case .primary:
            isPrimary = true
            dbi = primary
            index = nil
        case .index(let i):
            isPrimary = false
            dbi = try context.handle(i.database)
            index = i
        }
        if isPrimary {
            switch try orderedWholeIds(dbi, s, descending: descending, budget: budget, limit: limit) {
            case .taken(let out): return .records(out, count: out.count)
            case .overBudget: return nil
            case .longKey: break  // the walk below groups truncated keys
            }
        }
        if let index, !descending, QueryRunner.walkIsQueryOrder(index, groupComponents: groupComponents, sort: sort, idIndex: idIndex) {
            switch try orderedWholeIndexKeys(index, dbi, range, primary: primary, budget: budget, limit: limit, exact: exact) {
            case .taken(let out): return .records(out, count: out.count)
            case .overBudget: return nil
            case .longKey: break  // the walk below groups truncated keys
            }
        }
        let txn = try context.activeTxn()
        // The descending flags of the components that form a group (index walks).
        let groupFlags = index.map { Array($0.components.prefix(groupComponents).map(\.descending)) } ?? []
        let walked = try context.withRange(dbi, lower: s.lower, upper: s.upper, descending: descending, index: index) { cursor -> [TakenRecord]? in
            var out: [TakenRecord] = []
            out.reserveCapacity(min(limit, 1024))
            // The current group is `out[groupStart...]`; its key is `groupKey`, bytes of the walked key
            // that started it (LMDB's memory: valid while the transaction neither ends nor writes).
            var groupStart = 0
            var groupKey = UnsafeRawBufferPointer(start: nil, count: 0)
            var inGroup = false
            var visited = 0
            /// Ends the current group: a group of two or more is put in the full order.
            func flush() throws {
                if out.count - groupStart > 1 {
                    let group = Array(out[groupStart...])
                    let rows = try group.map { try RecordCodec.decode($0.record, schema: schema, idIndex: idIndex).row }
                    var inOrder = true
                    for i in 1..<rows.count where ResolvedQuery.compare(rows[i - 1], rows[i], by: sort) > 0 {
                        inOrder = false
                        break
                    }
                    if !inOrder {
                        let order = rows.indices.sorted { ResolvedQuery.compare(rows[$0], rows[$1], by: sort) < 0 }
                        for (k, i) in order.enumerated() { out[groupStart + k] = group[i] }
                    }
                }
                groupStart = out.count
            }
            while let (key, value) = try cursor.next() {
                let g: UnsafeRawBufferPointer
                if isPrimary {
                    visited += 1
                    if visited > budget { return nil }
                    if key.count <= KeyCodec.prefixLimit {
                        // A whole id: a group of its own, in order.
                        if inGroup {
                            try flush()
                            inGroup = false
                            if out.count >= limit { break }
                        }
                        if try matches(value) {
                            out.append(TakenRecord(record: value, key: key))
                            groupStart = out.count
                            if out.count >= limit { break }
                        }
                        continue
                    }
                    g = UnsafeRawBufferPointer(rebasing: key[0..<KeyCodec.prefixLimit])
                } else if let n = QueryRunner.groupLength(key, groupFlags), n <= KeyCodec.prefixLimit {
                    g = UnsafeRawBufferPointer(rebasing: key[0..<n])
                } else {
                    g = key.count > KeyCodec.prefixLimit ? UnsafeRawBufferPointer(rebasing: key[0..<KeyCodec.prefixLimit]) : key
                }
                // Starts a new group when `g` differs from the current group's key.
                if inGroup {
                    if !QueryRunner.equal(g, groupKey) {
                        try flush()
                        if out.count >= limit { break }
                        groupKey = g
                    }
                } else {
                    inGroup = true
                    groupStart = out.count
                    groupKey = g
                }
                if !isPrimary {
                    visited += 1
                    if visited > budget { return nil }
                }
                if isPrimary {
                    if try matches(value) { out.append(TakenRecord(record: value, key: key)) }
                } else {
                    guard let record = try QueryRunner.record(txn, primary, storedKey: value) else {
                        throw LMDBErrors.danglingIndexEntry(table: schema.name)
                    }
                    if try answeredByKey(key) || matches(record) { out.append(TakenRecord(record: record, key: value)) }
                }
            }
            try flush()
            return out
        }
        guard let out = walked else { return nil }
        return .records(out, count: out.count)
    }

    /// The query's record test, made on the first record an index walk must test (never, when an exact
    /// range of whole keys answers every entry).
    struct LazyRecordFilter {
        private let query: ResolvedQuery
        private var made: (test: RecordFilter, simple: SimpleRecordTest?)?

        init(_ query: ResolvedQuery) { self.query = query }

        mutating func matches(_ record: UnsafeRawBufferPointer) throws -> Bool {
            if let made { return try made.test.matches(record, made.simple) }
            let test = RecordFilter(query)
            made = (test, test.simple)
            return try test.matches(record, test.simple)
        }
    }

    /// What ``orderedWholeIds(_:_:descending:budget:limit:)`` and
    /// ``orderedWholeIndexKeys(_:_:primary:budget:limit:exact:)`` found.
    private enum WholeIdWalk {
        /// The rows the walk takes, in order.
        case taken([TakenRecord])
        /// More than `budget` entries were visited: the caller gives up the walk, as ``ordered`` does.
        case overBudget
        /// A truncated (long) key was met: the grouping walk of ``ordered`` must run instead.
        case longKey
    }

    /// The primary-key walk of ``ordered`` while every key is a whole id, so every row is a group of its
    /// own, already in order: each matching row is taken as it comes until `limit` are out. A loop of
    /// its own, with its state in locals and the predicate's test made once before it (the grouping
    /// walk's nested functions capture its state, which costs exclusivity checks on every entry).
    private func orderedWholeIds(
        _ dbi: MDB_dbi, _ s: KeyRange, descending: Bool, budget: Int, limit: Int
    ) throws -> WholeIdWalk {
        let test = RecordFilter(query)
        guard let simple = test.simple else {
            return try wholeKeyWalk(dbi, s, descending: descending, budget: budget, limit: limit) { key, value in
                try test.matchesInGeneral(value) ? TakenRecord(record: value, key: key) : nil
            }
        }
        // The one-pass test unwrapped once, outside the loop: unwrapped per record, it was copied per record.
        return try wholeKeyWalk(dbi, s, descending: descending, budget: budget, limit: limit) { key, value in
            let matches = try simple.evaluate(value) ?? test.matchesInGeneral(value)
            return matches ? TakenRecord(record: value, key: key) : nil
        }
    }

    /// The loop of the walks that take entries as they come while every key is whole
    /// (``orderedWholeIds(_:_:descending:budget:limit:)``, ``orderedWholeIndexKeys(_:_:primary:budget:limit:exact:)``):
    /// `take` makes the record an entry contributes, or `nil` when it does not match; the walk stops once
    /// `limit` are taken, after `budget` entries (`.overBudget`), or at the first truncated key (`.longKey`).
    @inline(__always)
    private func wholeKeyWalk(
        _ dbi: MDB_dbi, _ s: KeyRange, descending: Bool, budget: Int, limit: Int, index: IndexDefinition? = nil,
        _ take: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> TakenRecord?
    ) throws -> WholeIdWalk {
        try context.withRange(dbi, lower: s.lower, upper: s.upper, descending: descending, index: index) { cursor in
            var out: [TakenRecord] = []
            out.reserveCapacity(min(limit, 1024))
            var visited = 0
            while let (key, value) = try cursor.next() {
                visited += 1
                if visited > budget { return .overBudget }
                if key.count > KeyCodec.prefixLimit { return .longKey }
                if let taken = try take(key, value) {
                    out.append(taken)
                    if out.count >= limit { break }
                }
            }
            return .taken(out)
        }
    }

    /// Whether a forward walk of `index`, grouped by all its components, yields whole-key entries in the
    /// full order of `sort` (the resolved keys, ending with the `id` tie-break): every component is a
    /// group component (an equality or a sort key the walk answers, so within a group the entries differ
    /// by id alone), none is NOCASE, every sort key is on an index column except the final `id` tie-break,
    /// which is ascending as the id part of every index key is. Then every group of whole keys is
    /// already in order and ``orderedWholeIndexKeys(_:_:primary:budget:limit:exact:)`` can take the
    /// entries as they come.
    static func walkIsQueryOrder(_ index: IndexDefinition, groupComponents: Int, sort: [ResolvedSortKey], idIndex: Int) -> Bool {
        guard groupComponents == index.components.count, !index.components.contains(where: \.noCase),
            let last = sort.last, last.column == idIndex, !last.descending
        else { return false }
        return sort.dropLast().allSatisfy { key in index.components.contains { $0.column == key.column } }
    }

    /// The index walk of ``ordered`` while every key is whole, when the index order is the query order
    /// (``walkIsQueryOrder(_:groupComponents:sort:idIndex:)``): each entry's row is read, tested (unless
    /// `exact` and the key lies within the range's full-key bounds) and taken as it comes until `limit`
    /// are out — no group keys computed or compared. Stops at the first truncated key (`.longKey`: the
    /// grouping walk must run instead), as ``orderedWholeIds(_:_:descending:budget:limit:)`` does.
    private func orderedWholeIndexKeys(
        _ index: IndexDefinition, _ dbi: MDB_dbi, _ range: KeyRange, primary: MDB_dbi, budget: Int, limit: Int, exact: Bool
    ) throws -> WholeIdWalk {
        let txn = try context.activeTxn()
        let s = range.stored
        let name = schema.name
        var filter = LazyRecordFilter(query)
        return try wholeKeyWalk(dbi, s, descending: false, budget: budget, limit: limit, index: index) { key, value in
            guard let record = try QueryRunner.record(txn, primary, storedKey: value) else {
                throw LMDBErrors.danglingIndexEntry(table: name)
            }
            let taken = try (exact && range.holdsWhole(key)) || filter.matches(record)
            return taken ? TakenRecord(record: record, key: value) : nil
        }
    }

    /// The record stored in `primary` under `storedKey` (its bytes are valid until the transaction
    /// ends or writes), or `nil`.
    @inline(__always)
    static func record(_ txn: OpaquePointer, _ primary: MDB_dbi, storedKey: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var kv = MDB_val(mv_size: storedKey.count, mv_data: UnsafeMutableRawPointer(mutating: storedKey.baseAddress))
        var dv = MDB_val()
        let rc = mdb_get(txn, primary, &kv, &dv)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBErrors.check(rc, "cannot read")
        return UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)
    }
}

extension QueryRunner {
    /// The length of the components of an index key whose descending flags are `descending` (its first
    /// `descending.count`); `nil` when the key ends first.
    @inline(__always)
    static func groupLength(_ key: UnsafeRawBufferPointer, _ descending: [Bool]) -> Int? {
        var offset = 0
        for d in descending {
            guard let n = KeyCodec.componentLength(key, at: offset, descending: d) else { return nil }
            offset += n
        }
        return offset
    }

    /// Whether two byte strings are equal.
    @inline(__always)
    static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let x = a.baseAddress, let y = b.baseAddress else { return true }
        return memcmp(x, y, a.count) == 0
    }
}

