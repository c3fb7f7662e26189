import Foundation
import LocalStore

/// One index of a table as the planner sees it: entries keyed by the encoded components, then the row's
/// id key (``KeyCodec``: `appendComponent`, complemented when descending, `appendNoCaseComponent` for a
/// NOCASE component, `appendId`). LMDB keeps each in a database of its own; ``KVStore`` under a key prefix.
package struct IndexDefinition: Hashable, Sendable {
    package struct Component: Hashable, Sendable {
        /// The column position.
        package var column: Int
        /// Whether the component holds the NOCASE form of a string (equality lookups only).
        package var noCase: Bool
        /// Whether the component's bytes are complemented, so that it sorts in descending order
        /// (nulls last).
        package var descending: Bool = false

        package init(column: Int, noCase: Bool, descending: Bool = false) {
            self.column = column
            self.noCase = noCase
            self.descending = descending
        }
    }

    /// Where the backend stores the index (LMDB: its database's name; ``KVStore``: its spec's name).
    package var database: String
    package var components: [Component]
    /// The compound index of the schema this database implements; `nil` for a column index (from
    /// `Column.indexed`) and for the system tables' indexes.
    package var compound: TableIndex? = nil
    /// The backend's own number for the index (``KVStore``: its spec's position in the table's specs; LMDB
    /// does not use it).
    package var slot: Int = 0

    package init(database: String, components: [Component], compound: TableIndex? = nil, slot: Int = 0) {
        self.database = database
        self.components = components
        self.compound = compound
        self.slot = slot
    }

    /// `"<column>"` for a one-column index, `"(a, b[c])"` for a composite one; a compound index of
    /// the schema is `"<name>(a, b desc)"`.
    package func description(schema: TableSchema) -> String {
        let names = components.map {
            schema.columns[$0.column].name + ($0.noCase ? "[c]" : "") + ($0.descending ? " desc" : "")
        }
        if let compound { return compound.resolvedName + "(" + names.joined(separator: ", ") + ")" }
        return names.count == 1 ? names[0] : "(" + names.joined(separator: ", ") + ")"
    }

    /// The name `QueryPlanReporting` gives the index: the compound index's ``TableIndex/resolvedName``,
    /// the column's name for a column index, the database's name for a system table's own index.
    package func reportedName(schema: TableSchema) -> String {
        if let compound { return compound.resolvedName }
        if components.count == 1 { return schema.columns[components[0].column].name }
        return database
    }
}

/// A range of full keys: `lower <= key < upper`, `nil` meaning unbounded.
package struct KeyRange: Hashable, Sendable {
    package var lower: [UInt8]?
    package var upper: [UInt8]?

    package init(lower: [UInt8]?, upper: [UInt8]?) {
        self.lower = lower
        self.upper = upper
    }

    package static let all = KeyRange(lower: nil, upper: nil)

    /// The same range over stored (possibly truncated) keys; it holds every row of this one.
    package var stored: KeyRange {
        KeyRange(lower: lower.map(KeyCodec.storedLower), upper: upper.flatMap(KeyCodec.storedUpper))
    }

    /// Whether the stored key `key`, met walking ``stored``, is whole (not truncated) and within this
    /// range's full bounds: then it is in this range without its row being read. A truncated key, or one
    /// outside a bound longer than a stored key, needs its row tested.
    package func holdsWhole(_ key: UnsafeRawBufferPointer) -> Bool {
        guard key.count <= KeyCodec.prefixLimit else { return false }
        if let lower, lower.count > KeyCodec.prefixLimit, key.lexicographicallyPrecedes(lower) { return false }
        if let upper, upper.count > KeyCodec.prefixLimit, !key.lexicographicallyPrecedes(upper) { return false }
        return true
    }
}

/// Where a plan reads: the primary database (ordered by id) or an index.
package enum PlanSource: Sendable {
    case primary
    case index(IndexDefinition)

    package func accessPath(schema: TableSchema) -> QueryAccessPath {
        switch self {
        case .primary: return .primaryKey
        case .index(let i): return .index(i.reportedName(schema: schema))
        }
    }
}

/// How a query is answered. Every plan yields a superset of the matching rows (or, for `ordered`,
/// the matching rows in query order); the shared evaluator then filters, orders, skips and cuts,
/// so every plan returns exactly what `ResolvedQuery.select` over all rows returns.
package enum QueryPlan: Sendable {
    /// The predicate is always false.
    case empty
    /// `id ==` / `id IN`: direct lookups.
    case ids([Value])
    /// Key ranges of an index (or of the primary database).
    case ranges(PlanSource, [KeyRange])
    /// One range walked in the order of the first sort key, stopping once skip + top rows are out.
    case ordered(PlanSource, KeyRange, descending: Bool)
    /// Every row.
    case scan
    /// One range of a compound index walked in index order (reversed when `descending`), grouped by
    /// its first `groupComponents` components (equalities, then the sort keys it answers); each group
    /// is sorted by the full order and the walk stops once skip + top rows are out. `leading` is the
    /// number of leading components the query uses. `exact`: the range holds exactly the rows the
    /// predicate matches (every conjunct is answered by the index, as for ``countEntries``), so the
    /// rows it reaches are not tested again.
    case compoundOrdered(IndexDefinition, KeyRange, descending: Bool, groupComponents: Int, leading: Int, exact: Bool)
    /// Ranges of a compound index (`leading` components constrained).
    case compoundRanges(IndexDefinition, [KeyRange], leading: Int)
    /// The query needs only the count and the ranges of the index hold exactly the matching rows:
    /// count the index entries without reading rows.
    case countEntries(IndexDefinition, [KeyRange], leading: Int)
    /// The cost choice between an index's ranges and an ordered walk: `walk` (an ordered walk over
    /// `.all`) was estimated cheaper than reading `ranges` of `source`. The walk gives up after
    /// visiting `budget` entries (matches correlated with the sort order, against the estimate's
    /// assumption) and the ranges are read instead.
    indirect case walkOrRanges(walk: PlanSource, descending: Bool, budget: Int, source: PlanSource, ranges: [KeyRange])

    package func description(schema: TableSchema) -> String {
        switch self {
        case .empty: return "empty"
        case .ids: return "primary key"
        case .ranges(.primary, _): return "primary key range"
        case .ranges(.index(let i), _): return "index \(i.description(schema: schema))"
        case .ordered(.primary, _, _): return "ordered primary key"
        case .ordered(.index(let i), _, _): return "ordered index \(i.description(schema: schema))"
        case .scan: return "full scan"
        case .compoundOrdered(let i, _, _, _, let leading, _):
            return "ordered index \(i.description(schema: schema)) using \(leading) of \(i.components.count) columns"
        case .compoundRanges(let i, _, let leading):
            return "index \(i.description(schema: schema)) using \(leading) of \(i.components.count) columns"
        case .countEntries(let i, _, let leading):
            return "index-only count \(i.description(schema: schema)) using \(leading) of \(i.components.count) columns"
        case .walkOrRanges(let walk, let descending, _, _, _):
            return QueryPlan.ordered(walk, .all, descending: descending).description(schema: schema)
        }
    }

    /// The plan's access path (`QueryPlanReporting`): a cost choice reports its ordered walk, the
    /// path it tries first.
    package func accessPath(schema: TableSchema) -> QueryAccessPath {
        switch self {
        case .empty: return .noRows
        case .ids: return .primaryKey
        case .scan: return .fullScan
        case .ranges(let source, _), .ordered(let source, _, _), .walkOrRanges(walk: let source, _, _, _, _):
            return source.accessPath(schema: schema)
        case .compoundOrdered(let i, _, _, _, _, _), .compoundRanges(let i, _, _), .countEntries(let i, _, _):
            return .index(i.reportedName(schema: schema))
        }
    }
}

/// What the planner may ask the store for a cost choice.
package struct PlanStatistics {
    /// The number of rows of the table.
    package var rowCount: () throws -> Int
    /// The number of entries of a source within ranges, counting no further than `limit`.
    package var countEntries: (_ source: PlanSource, _ ranges: [KeyRange], _ limit: Int) throws -> Int

    package init(rowCount: @escaping () throws -> Int, countEntries: @escaping (_ source: PlanSource, _ ranges: [KeyRange], _ limit: Int) throws -> Int) {
        self.rowCount = rowCount
        self.countEntries = countEntries
    }
}

/// Chooses a ``QueryPlan`` from the conjuncts of a resolved predicate.
package struct QueryPlanner {
    /// The table's schema and its indexes (the id is indexed by the rows' own keys).
    package let schema: TableSchema
    package let indexes: [IndexDefinition]
    package let query: ResolvedQuery
    /// Without statistics the planner never trades an index's ranges for an ordered walk.
    package var statistics: PlanStatistics? = nil

    package init(schema: TableSchema, indexes: [IndexDefinition], query: ResolvedQuery, statistics: PlanStatistics? = nil) {
        self.schema = schema
        self.indexes = indexes
        self.query = query
        self.statistics = statistics
    }

    /// The most Cartesian-product ranges a composite index lookup may expand to.
    package static let maximumRanges = 1024

    /// ``plan()``, and the same plan again when it can be reused for the same query and catalog: when the
    /// planner did not consult ``statistics`` (the data) to choose it; `nil` otherwise.
    package func reusablePlan() throws -> (plan: QueryPlan, reusable: QueryPlan?) {
        guard let statistics else {
            let plan = try plan()
            return (plan, plan)
        }
        var consulted = false
        var observing = self
        observing.statistics = PlanStatistics(
            rowCount: {
                consulted = true
                return try statistics.rowCount()
            },
            countEntries: { source, ranges, limit in
                consulted = true
                return try statistics.countEntries(source, ranges, limit)
            })
        let plan = try observing.plan()
        return (plan, consulted ? nil : plan)
    }

    package func plan() throws -> QueryPlan {
        let parts = query.predicate.conjuncts
        if parts.contains(where: { if case .constant(false) = $0 { return true } else { return false } }) { return .empty }
        // 1. Point lookups by id.
        if let ids = schema.idLookup(parts) { return .ids(ids) }
        // 2. Key ranges: the index (or primary) with the best constraint; between equal constraints, one
        // whose order answers the sort.
        let sortFirst = query.sort.first
        let canOrder = query.top != nil && !query.includeTotalCount
        var best: (source: PlanSource, ranges: [KeyRange], score: Int, firstColumnRangeOnly: Bool)?
        var bestIndex: (index: IndexDefinition, candidate: Candidate, order: SortMatch?)?
        for index in indexes {
            guard let c = candidate(index: index, parts: parts, partCount: parts.count) else { continue }
            let order = canOrder ? sortMatch(index, c) : nil
            let score = c.score * 2 + (order != nil ? 1 : 0)
            if score > (best?.score ?? 0) {
                best = (.index(index), c.ranges, score, c.equalities == 0)
                bestIndex = (index, c, order)
            }
        }
        if let c = primaryCandidate(parts), c.score * 2 > (best?.score ?? 0) {
            best = (.primary, c.ranges, c.score * 2, true)
            bestIndex = nil
        }
        if let (index, c, _) = bestIndex, c.exact, query.top == 0 {
            // Only the count is wanted and the entries are exactly the matches: count them.
            return .countEntries(index, c.ranges, leading: c.leading)
        }
        if let (index, c, order) = bestIndex, let order, index.compound != nil || c.equalities > 0 {
            return .compoundOrdered(
                index, c.ranges[0], descending: order.descending, groupComponents: order.groupComponents,
                leading: max(c.leading, order.groupComponents), exact: c.exact && c.ranges.count == 1)
        }
        if let best {
            if canOrder, best.ranges.count == 1, best.firstColumnRangeOnly, let first = sortFirst,
                orderColumn(best.source) == first.column
            {
                return .ordered(best.source, best.ranges[0], descending: first.descending)
            }
            // Reading the ranges costs one row per entry (`matches`), plus sorting them; walking the
            // first sort key's source in order and filtering visits about wanted × rows / matches
            // entries (when the matches are spread evenly over the sort order). Count the entries
            // only up to the break-even point √(wanted × rows): the choice needs no more.
            if canOrder, let statistics, let first = sortFirst, let walk = orderedSource(first.column),
                let top = query.top
            {
                let wanted = Double(query.skip) + Double(top)
                let rows = Double(try statistics.rowCount())
                let threshold = wanted * rows
                let limit = threshold >= 1e30 ? Int.max : Int(threshold.squareRoot()) + 1
                let matches = try statistics.countEntries(best.source, best.ranges, limit)
                if matches > 0, Double(matches) * Double(matches) > threshold {
                    let expected = threshold / Double(matches)
                    let budget = expected >= 1e15 ? Int.max : 4 * Int(expected) + 256
                    return .walkOrRanges(
                        walk: walk, descending: first.descending, budget: budget, source: best.source, ranges: best.ranges)
                }
            }
            if let (index, c, _) = bestIndex, index.compound != nil {
                return .compoundRanges(index, c.ranges, leading: c.leading)
            }
            return .ranges(best.source, best.ranges)
        }
        // 3. An ordered walk over the first sort key's index, else over a compound index led by the sort keys.
        // (A compound index answering two or more sort keys beats a one-column walk.)
        if canOrder {
            let whole = Candidate(ranges: [.all], equalities: 0, score: 0)
            var bestWalk: (IndexDefinition, SortMatch)?
            for index in indexes where index.compound != nil {
                if let m = sortMatch(index, whole), m.groupComponents > (bestWalk?.1.groupComponents ?? 0) { bestWalk = (index, m) }
            }
            let single = sortFirst.flatMap { orderedSource($0.column) }
            if let (index, m) = bestWalk, m.groupComponents > 1 || single == nil {
                return .compoundOrdered(
                    index, .all, descending: m.descending, groupComponents: m.groupComponents, leading: m.groupComponents,
                    exact: false)
            }
            if let first = sortFirst, let walk = single {
                return .ordered(walk, .all, descending: first.descending)
            }
        }
        return .scan
    }

    /// The source whose order is `column`'s: the primary database for the id, else the first
    /// index led by a byte-ordered `column` component.
    private func orderedSource(_ column: Int) -> PlanSource? {
        if column == schema.idIndex { return .primary }
        if let index = indexes.first(where: { $0.components[0] == .init(column: column, noCase: false) }) {
            return .index(index)
        }
        return nil
    }

    /// The column a source is ordered by first (for a NOCASE component: none usable for sorting).
    private func orderColumn(_ source: PlanSource) -> Int? {
        switch source {
        case .primary: return schema.idIndex
        case .index(let i): return i.components[0].noCase ? nil : i.components[0].column
        }
    }

    /// How an index's order answers the query's sort: walked forwards or backwards, grouped by its
    /// first `groupComponents` components.
    struct SortMatch {
        var descending: Bool
        var groupComponents: Int
    }

    /// Whether walking `c`'s single range of `index` yields rows in the order of the sort keys that
    /// follow its equality prefix (sort keys on columns the equalities fix are skipped: they are
    /// constant). `nil` when it answers none of them.
    private func sortMatch(_ index: IndexDefinition, _ c: Candidate) -> SortMatch? {
        guard c.ranges.count == 1 else { return nil }
        // A NOCASE component's equality leaves its column's case free: it fixes no sort key.
        let fixed = Set(index.components.prefix(c.equalities).filter { !$0.noCase }.map(\.column))
        var j = c.equalities
        var direction: Bool? = nil
        for key in query.sort where !fixed.contains(key.column) {
            guard j < index.components.count else { break }
            let component = index.components[j]
            guard component.column == key.column, !component.noCase, key.column != schema.idIndex else { break }
            let reversed = key.descending != component.descending
            if let direction, direction != reversed { break }
            direction = reversed
            j += 1
        }
        guard let direction, j > c.equalities else { return nil }
        return SortMatch(descending: direction, groupComponents: j)
    }

    // MARK: Constraints on one component

    /// How a component's values are encoded.
    enum Mode {
        /// An index component: tag + order-preserving encoding.
        case value
        /// A descending index component: the `value` encoding complemented.
        case descending
        /// An index component holding the NOCASE form of a string.
        case noCase
        /// The primary key: the bare id encoding.
        case primary
    }

    /// What the conjuncts say about one component: exact values (a point per value), or ranges.
    struct Constraint {
        var points: [[UInt8]]?
        var ranges: [KeyRange]
        /// Whether the keys within `ranges` are exactly the rows the conjunct matches (not a superset).
        var exact: Bool = false
    }

    private func encode(_ v: Value, _ mode: Mode) -> [UInt8] {
        var out: [UInt8] = []
        switch mode {
        case .value: KeyCodec.appendComponent(v, into: &out)
        case .descending: KeyCodec.appendDescendingComponent(v, into: &out)
        case .noCase: KeyCodec.appendNoCaseComponent(v, into: &out)
        case .primary: KeyCodec.appendId(v, into: &out)
        }
        return out
    }

    /// A literal compared with a column, converted to the column's encoding space: `.exact` when
    /// the comparison is the same as comparing encodings, `.between` (inclusive integers) for a
    /// double compared with an integer column (`Double(x)` rounds, so a margin is added).
    private enum Bound {
        case exact(Value)
        case between(Int64, Int64)
    }

    private func bound(_ v: Value, column type: ColumnType) -> Bound {
        switch (type, v) {
        case (.double, .int(let i)): return .exact(.double(Double(i)))
        case (.integer, .double(let d)):
            // |Double(x) - x| <= 512 for every Int64, so a margin of 2048 keeps every candidate.
            func clamp(_ x: Double) -> Int64 {
                if x <= -9.2e18 { return .min }
                if x >= 9.2e18 { return .max }
                return Int64(x)
            }
            let low = clamp(d.rounded(.down)).subtractingReportingOverflow(2048)
            let high = clamp(d.rounded(.up)).addingReportingOverflow(2048)
            return .between(low.overflow ? .min : low.partialValue, high.overflow ? .max : high.partialValue)
        default: return .exact(v)
        }
    }

    /// The range of a comparison `column op v`, or `nil` when it gives no usable range.
    private func range(_ op: QueryPredicate.ComparisonOperator, _ v: Value, type: ColumnType, mode: Mode) -> Constraint? {
        if mode == .descending { return descendingRange(op, v, type: type) }
        let nonNull: [UInt8]? = mode == .primary ? nil : [KeyCodec.Tag.null + 1]
        switch bound(v, column: type) {
        case .exact(let e):
            let key = encode(e, mode)
            let exact = mode == .value
            switch op {
            case .equal: return Constraint(points: [key], ranges: [KeyRange(lower: key, upper: KeyCodec.successor(key))], exact: exact)
            case .less: return Constraint(points: nil, ranges: [KeyRange(lower: nonNull, upper: key)], exact: exact)
            case .lessOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: nonNull, upper: KeyCodec.successor(key))], exact: exact)
            case .greater: return Constraint(points: nil, ranges: [KeyRange(lower: KeyCodec.successor(key), upper: nil)], exact: exact)
            case .greaterOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: key, upper: nil)], exact: exact)
            case .notEqual: return nil
            }
        case .between(let lo, let hi):
            let low = encode(.int(lo), mode)
            let high = KeyCodec.successor(encode(.int(hi), mode))
            switch op {
            case .equal: return Constraint(points: nil, ranges: [KeyRange(lower: low, upper: high)])
            case .less, .lessOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: nonNull, upper: high)])
            case .greater, .greaterOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: low, upper: nil)])
            case .notEqual: return nil
            }
        }
    }

    /// ``range(_:_:type:mode:)`` for a descending component. Complemented encodings sort in reverse:
    /// `x > v` is every key before `~enc(v)`, `x < v` every key after the keys starting with `~enc(v)`
    /// up to the null component `[0xFF]` (nulls sort last and match no comparison).
    private func descendingRange(_ op: QueryPredicate.ComparisonOperator, _ v: Value, type: ColumnType) -> Constraint? {
        let nullKey: [UInt8] = [~KeyCodec.Tag.null]
        switch bound(v, column: type) {
        case .exact(let e):
            let key = encode(e, .descending)
            switch op {
            case .equal: return Constraint(points: [key], ranges: [KeyRange(lower: key, upper: KeyCodec.successor(key))], exact: true)
            case .less: return Constraint(points: nil, ranges: [KeyRange(lower: KeyCodec.successor(key), upper: nullKey)], exact: true)
            case .lessOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: key, upper: nullKey)], exact: true)
            case .greater: return Constraint(points: nil, ranges: [KeyRange(lower: nil, upper: key)], exact: true)
            case .greaterOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: nil, upper: KeyCodec.successor(key))], exact: true)
            case .notEqual: return nil
            }
        case .between(let lo, let hi):
            let low = encode(.int(hi), .descending)
            let high = KeyCodec.successor(encode(.int(lo), .descending))
            switch op {
            case .equal: return Constraint(points: nil, ranges: [KeyRange(lower: low, upper: high)])
            case .less, .lessOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: low, upper: nullKey)])
            case .greater, .greaterOrEqual: return Constraint(points: nil, ranges: [KeyRange(lower: nil, upper: high)])
            case .notEqual: return nil
            }
        }
    }

    /// The constraint conjunct `p` puts on column `n` encoded in `mode`, if any.
    private func constraint(_ p: ResolvedPredicate, column n: Int, mode: Mode) -> Constraint? {
        let type = schema.columns[n].type
        // Case-insensitive comparisons can use only NOCASE-ordered keys (the primary key of a
        // string id, or a NOCASE component for equality).
        switch p {
        case .compare(.column(let c, _, _), let op, .literal(let v, _), let noCase) where c == n:
            return comparison(op, v, noCase: noCase, type: type, mode: mode)
        case .compare(.literal(let v, _), let op, .column(let c, _, _), let noCase) where c == n:
            return comparison(op.mirrored, v, noCase: noCase, type: type, mode: mode)
        case .in(.column(let c, _, _), let vs, let noCase) where c == n:
            if (mode == .value || mode == .descending) && noCase { return nil }
            var points: [[UInt8]]? = []
            var ranges: [KeyRange] = []
            var exact = true
            for v in vs {
                guard let r = comparison(.equal, v, noCase: noCase, type: type, mode: mode) else { return nil }
                if let p = r.points { points?.append(contentsOf: p) } else { points = nil }
                ranges.append(contentsOf: r.ranges)
                exact = exact && r.exact
            }
            return Constraint(points: points, ranges: ranges, exact: exact)
        case .isNull(.column(let c, _, _)) where c == n && mode != .primary:
            let key: [UInt8] = [mode == .descending ? ~KeyCodec.Tag.null : KeyCodec.Tag.null]
            return Constraint(points: [key], ranges: [KeyRange(lower: key, upper: KeyCodec.successor(key))], exact: true)
        case .string(.startsWith, .column(let c, _, _), .literal(.string(let prefix), _), let noCase) where c == n:
            switch mode {
            case .value, .descending:
                guard !noCase, type == .string else { return nil }
                var key: [UInt8] = [KeyCodec.Tag.string]
                KeyCodec.appendEscaped(prefix.utf8, terminated: false, into: &key)
                // Complementing keeps "starts with": the descending keys of these strings start with ~key.
                if mode == .descending { key = key.map { ~$0 } }
                return Constraint(points: nil, ranges: [KeyRange(lower: key, upper: KeyCodec.successor(key))], exact: true)
            case .primary:
                // NOCASE keys hold the folded bytes up to the first NUL: the folded prefix up to
                // its first NUL bounds every id that starts with the pattern.
                guard type == .string else { return nil }
                let folded = Array(ASCII.lowercased(prefix).utf8.prefix { $0 != 0 })
                guard !folded.isEmpty else { return nil }
                return Constraint(points: nil, ranges: [KeyRange(lower: folded, upper: KeyCodec.successor(folded))])
            case .noCase:
                return nil
            }
        default:
            return nil
        }
    }

    private func comparison(
        _ op: QueryPredicate.ComparisonOperator, _ v: Value, noCase: Bool, type: ColumnType, mode: Mode
    ) -> Constraint? {
        switch mode {
        case .value, .descending:
            // A byte-ordered component answers only case-sensitive comparisons.
            if noCase { return nil }
            return range(op, v, type: type, mode: mode)
        case .noCase:
            // NOCASE keys answer equality, case-sensitive or not (a superset for the former).
            guard op == .equal, case .string = v else { return nil }
            var c = range(.equal, v, type: type, mode: mode)
            c?.exact = noCase
            return c
        case .primary:
            // String ids always compare with NOCASE, which is the primary key's order.
            return range(op, v, type: type, mode: mode)
        }
    }

    /// Combines the constraints on one component: exact points win; otherwise single ranges are
    /// intersected. `used` lists the conjuncts (positions in `parts`) the result stands for; `exact`
    /// is set only when its ranges are exactly the rows those conjuncts match.
    private func combined(_ parts: [ResolvedPredicate], column n: Int, mode: Mode) -> (Constraint, used: [Int])? {
        let found = parts.indices.compactMap { i in constraint(parts[i], column: n, mode: mode).map { (i, $0) } }
        if let (i, points) = found.first(where: { $0.1.points != nil }) { return (points, [i]) }
        let singles = found.filter { $0.1.ranges.count == 1 }
        guard !singles.isEmpty else { return found.first.map { ($0.1, [$0.0]) } }
        var lower: [UInt8]? = nil
        var upper: [UInt8]? = nil
        for (_, c) in singles {
            if let l = c.ranges[0].lower, lower.map({ $0.lexicographicallyPrecedes(l) }) ?? true { lower = l }
            if let u = c.ranges[0].upper, upper.map({ u.lexicographicallyPrecedes($0) }) ?? true { upper = u }
        }
        return (
            Constraint(points: nil, ranges: [KeyRange(lower: lower, upper: upper)], exact: singles.allSatisfy(\.1.exact)),
            singles.map(\.0)
        )
    }

    struct Candidate {
        var ranges: [KeyRange]
        var equalities: Int
        var score: Int
        /// The number of leading components constrained.
        var leading: Int = 0
        /// Whether the ranges hold exactly the rows matching the whole predicate.
        var exact: Bool = false
    }

    /// The ranges of `index` the conjuncts allow: equalities on a prefix of its components, then
    /// one constraint on the next component. `partCount` is the number of conjuncts (for `exact`).
    private func candidate(index: IndexDefinition, parts: [ResolvedPredicate], partCount: Int) -> Candidate? {
        var prefixes: [[UInt8]] = [[]]
        var equalities = 0
        var used = Set<Int>()
        var exact = true
        for component in index.components {
            let mode: Mode = component.noCase ? .noCase : component.descending ? .descending : .value
            guard let (c, u) = combined(parts, column: component.column, mode: mode) else { break }
            if let points = c.points, prefixes.count * points.count <= QueryPlanner.maximumRanges {
                prefixes = prefixes.flatMap { p in points.map { p + $0 } }
                equalities += 1
                used.formUnion(u)
                exact = exact && c.exact
                continue
            }
            guard prefixes.count * c.ranges.count <= QueryPlanner.maximumRanges else { break }
            let ranges = prefixes.flatMap { p in
                c.ranges.map { r in
                    KeyRange(lower: p + (r.lower ?? []), upper: r.upper.map { p + $0 } ?? KeyCodec.successor(p))
                }
            }
            used.formUnion(u)
            exact = exact && c.exact
            return Candidate(
                ranges: ranges, equalities: equalities, score: equalities * 2 + 1, leading: equalities + 1,
                exact: exact && used.count == partCount)
        }
        guard equalities > 0 else { return nil }
        return Candidate(
            ranges: prefixes.map { KeyRange(lower: $0, upper: KeyCodec.successor($0)) }, equalities: equalities,
            score: equalities * 2, leading: equalities, exact: exact && used.count == partCount)
    }

    private func primaryCandidate(_ parts: [ResolvedPredicate]) -> Candidate? {
        guard let (c, _) = combined(parts, column: schema.idIndex, mode: .primary) else { return nil }
        return Candidate(ranges: c.ranges, equalities: 0, score: 1)
    }
}


/// The shapes of the system tables that the system-table shortcuts of LMDB and ``KVStore`` rely on,
/// found in a table's schema and planner indexes; `nil` when a table has another shape (the shortcut
/// then runs the generic call).
package enum SystemTableShapes {
    /// Whether an existing table can serve as the system table `system`: it has every column of it, with
    /// the same types, and the same id type (LMDB and ``KVStore`` refuse to open on one that cannot).
    package static func isCompatible(_ existing: TableSchema, _ system: TableSchema) -> Bool {
        system.columns.allSatisfy { c in existing.column(named: c.name)?.type == c.type } && existing.idType == system.idType
    }

    /// The operations table's item index: its `table` and `itemId` string columns, an integer id, and an
    /// index led by the byte-ordered `table` and the NOCASE `itemId`.
    package static func itemIndex(
        _ schema: TableSchema, _ indexes: [IndexDefinition]
    ) -> (tableColumn: Int, itemColumn: Int, index: IndexDefinition)? {
        guard let tableColumn = schema.index(ofColumn: "table"), let itemColumn = schema.index(ofColumn: "itemId"),
            schema.columns[tableColumn].type == .string, schema.columns[itemColumn].type == .string,
            schema.columns[schema.idIndex].type == .integer,
            let index = indexes.first(where: {
                $0.components.count >= 2 && $0.components[0] == .init(column: tableColumn, noCase: false)
                    && $0.components[1] == .init(column: itemColumn, noCase: true)
            })
        else { return nil }
        return (tableColumn, itemColumn, index)
    }

    /// The config table's delta-token columns: its `table` and `key` string columns and integer `keyType`.
    package static func deltaTokenColumns(_ schema: TableSchema) -> (tableColumn: Int, keyTypeColumn: Int, keyColumn: Int)? {
        guard let tableColumn = schema.index(ofColumn: "table"), let keyTypeColumn = schema.index(ofColumn: "keyType"),
            let keyColumn = schema.index(ofColumn: "key"), schema.columns[tableColumn].type == .string,
            schema.columns[keyTypeColumn].type == .integer, schema.columns[keyColumn].type == .string
        else { return nil }
        return (tableColumn, keyTypeColumn, keyColumn)
    }

    /// The config table's delta-token index: its ``deltaTokenColumns(_:)`` and an index led by the NOCASE
    /// `table`, then `keyType` and the byte-ordered `key`, ascending.
    package static func deltaTokenIndex(_ schema: TableSchema, _ indexes: [IndexDefinition]) -> IndexDefinition? {
        guard let (tableColumn, keyTypeColumn, keyColumn) = deltaTokenColumns(schema) else { return nil }
        return indexes.first {
            $0.components.count >= 3 && $0.components[0] == .init(column: tableColumn, noCase: true)
                && $0.components[1] == .init(column: keyTypeColumn, noCase: false)
                && $0.components[2] == .init(column: keyColumn, noCase: false)
        }
    }

    /// The errors table's index led by its integer `operationId` column (ascending, not NOCASE).
    package static func operationIdIndex(_ schema: TableSchema, _ indexes: [IndexDefinition]) -> IndexDefinition? {
        guard let column = schema.index(ofColumn: "operationId"), schema.columns[column].type == .integer else { return nil }
        return indexes.first { $0.components.first.map { $0.column == column && !$0.noCase && !$0.descending } ?? false }
    }
}

/// The test of a config row for one delta-token pair, as the generic query's record filter runs it
/// (`table` equal ignoring ASCII case, `keyType` 0, `key` the bytes of the query id; a null or another type
/// matching nothing), on the record's bytes: the delta-token lookups of LMDB and ``KVStore`` run it on each
/// record they read.
package struct DeltaTokenRowTest {
    private let schema: TableSchema
    private let columns: (tableColumn: Int, keyTypeColumn: Int, keyColumn: Int)
    private let fields: RecordFields
    private let tableBytes: [UInt8]
    private let keyBytes: [UInt8]

    /// The test of the pair's rows, or `nil` when the config table has another shape.
    package init?(schema: TableSchema, table: String, queryId: String) {
        guard let columns = SystemTableShapes.deltaTokenColumns(schema) else { return nil }
        self.schema = schema
        self.columns = columns
        fields = RecordFields(schema: schema, through: max(columns.tableColumn, columns.keyTypeColumn, columns.keyColumn, schema.idIndex))
        tableBytes = Array(table.utf8)
        keyBytes = Array(queryId.utf8)
    }

    /// The id of the row `record` holds when it is one of the pair's, else `nil`. The columns are tested in
    /// the generic predicate's order (table, keyType, key), so that a damaged value is reached (and reported)
    /// exactly when the record filter would reach it; a match is checked whole, as the generic query decodes
    /// the rows it returns (without building the row).
    package func id(of record: UnsafeRawBufferPointer) throws -> Value? {
        try fields.locate(record)
        guard let name = try fields.stringBytes(columns.tableColumn),
            tableBytes.withUnsafeBytes({ RawBytes.compareNoCase(name, $0) }) == 0
        else { return nil }
        if let keyType = fields.plainInt(columns.keyTypeColumn) {
            guard keyType == TableConfigEntry.deltaTokenKeyType else { return nil }
        } else {
            let v = try fields.value(columns.keyTypeColumn)
            guard !v.isNull, Collation.compare(v, .int(TableConfigEntry.deltaTokenKeyType)) == 0 else { return nil }
        }
        guard let key = try fields.stringBytes(columns.keyColumn), KeyCodec.equals(key, keyBytes) else { return nil }
        try RecordCodec.check(record, schema: schema, idIndex: schema.idIndex)
        return try fields.value(schema.idIndex)
    }
}
