import LocalStore

/// How ``KVStore`` finds a query's candidate rows; the shared evaluator (`ResolvedQuery.apply(to:)`)
/// then filters, orders, pages and projects them, so every plan returns exactly the evaluator's answer
/// over all rows as long as it yields a superset of the matches (for ``walk``: every match up to the
/// last group of the sort key it reached).
enum KVPlan: Sendable {
    case noRows
    case ids([Value])
    /// Key ranges `[lower, upper)` of an index.
    case ranges(KVIndexSpec, [KeyRange])
    /// One range of an index walked in key order (reversed when `reverse`), stopping once `need` matches
    /// are out and the group they end in is complete: a group is the entries equal in the first
    /// `groupComponents` components (the range's equalities, then the component the sort is on).
    /// `exact`: every entry of the range matches the predicate (it is the range's equalities and
    /// nothing else), so the entries need no test.
    case walk(KVIndexSpec, KeyRange, reverse: Bool, need: Int, groupComponents: Int, exact: Bool)
    /// Rows of a table with integer ids, stored in id order: a range of row keys, read in order (reversed
    /// when `reverse`) until `need` matches are out (all of the range when `nil`).
    case idRange(KeyRange, reverse: Bool, need: Int?)
    case scan

    struct KeyRange: Hashable, Sendable {
        var lower: [UInt8]
        var upper: [UInt8]
    }

    var accessPath: QueryAccessPath {
        switch self {
        case .noRows: return .noRows
        case .ids, .idRange: return .primaryKey
        case .ranges(let spec, _), .walk(let spec, _, _, _, _, _): return .index(spec.name)
        case .scan: return .fullScan
        }
    }

    /// At most this many ranges from the Cartesian product of `in` lists.
    static let maximumRanges = 256

    /// `value` as a bound on a column of `type`, with whether it had to be converted (a converted bound
    /// is made inclusive, so that rounding never drops a match); `nil` when the index cannot be used.
    static func bound(_ value: Value, on type: ColumnType) -> (Value, converted: Bool)? {
        switch (type, value) {
        case (.double, .double), (.integer, .int), (.string, .string), (.date, .date), (.boolean, .bool), (.binary, .binary):
            return (value, false)
        case (.double, .int(let i)): return (.double(Double(i)), true)
        default: return nil
        }
    }

    static func append(_ value: Value, descending: Bool, to key: inout [UInt8]) {
        if descending { KeyCodec.appendDescendingComponent(value, into: &key) } else { KeyCodec.appendComponent(value, into: &key) }
    }

    static func end(of prefix: [UInt8]) -> [UInt8] { KVKeys.end(of: prefix) ?? prefix + [0xFF] }

    /// Chooses the plan of `query` on `table`.
    static func make(_ table: KVTable, _ query: ResolvedQuery) -> KVPlan {
        let parts = query.predicate.conjuncts
        if parts.contains(where: { if case .constant(false) = $0 { return true } else { return false } }) { return .noRows }
        let schema = table.schema
        if let ids = schema.idLookup(parts) { return .ids(ids) }
        var equal: [Int: [Value]] = [:]
        // Equalities ignoring case (string columns): only a NOCASE component answers them.
        var equalNoCase: [Int: [Value]] = [:]
        var lower: [Int: (Value, inclusive: Bool)] = [:]
        var upper: [Int: (Value, inclusive: Bool)] = [:]
        func record(_ n: Int, _ type: ColumnType, _ op: QueryPredicate.ComparisonOperator, _ v: Value) {
            guard let (b, converted) = bound(v, on: type) else { return }
            switch op {
            case .equal: if equal[n] == nil { equal[n] = [b] }
            case .greater, .greaterOrEqual: if lower[n] == nil { lower[n] = (b, op == .greaterOrEqual || converted) }
            case .less, .lessOrEqual: if upper[n] == nil { upper[n] = (b, op == .lessOrEqual || converted) }
            case .notEqual: break
            }
        }
        for p in parts {
            switch p {
            case .compare(.column(let n, let type, false), let op, .literal(let v, _), false):
                record(n, type, op, v)
            case .compare(.literal(let v, _), let op, .column(let n, let type, false), false):
                record(n, type, op.mirrored, v)
            case .in(.column(let n, let type, false), let vs, false) where equal[n] == nil:
                let bounds = vs.compactMap { bound($0, on: type)?.0 }
                if bounds.count == vs.count { equal[n] = bounds }
            case .isNull(.column(let n, _, _)) where equal[n] == nil:
                equal[n] = [.null]
            case .compare(.column(let n, .string, false), .equal, .literal(.string(let v), _), true),
                .compare(.literal(.string(let v), _), .equal, .column(let n, .string, false), true):
                if equalNoCase[n] == nil { equalNoCase[n] = [.string(v)] }
            default:
                continue
            }
        }

        var best: (spec: KVIndexSpec, ranges: [KeyRange], score: Int, equalities: Int, hasRange: Bool)?
        for spec in table.specs {
            var prefixes = [KVKeys.index(table.number, spec.number)]
            var equalities = 0
            var range: (lower: (Value, inclusive: Bool)?, upper: (Value, inclusive: Bool)?, descending: Bool)?
            for (i, (column, descending)) in zip(spec.columns, spec.descending).enumerated() {
                // A NOCASE component answers an equality ignoring case, and a case-sensitive one as a superset.
                let wanted = spec.isNoCase(i) ? (equalNoCase[column] ?? equal[column]) : equal[column]
                if let values = wanted, prefixes.count * values.count <= maximumRanges {
                    prefixes = prefixes.flatMap { p in
                        values.map { v in
                            var key = p
                            append(spec.component(v, i), descending: descending, to: &key)
                            return key
                        }
                    }
                    equalities += 1
                    continue
                }
                if !spec.isNoCase(i), lower[column] != nil || upper[column] != nil { range = (lower[column], upper[column], descending) }
                break
            }
            // Between equal constraints, an index whose order answers the sort (a walk that stops early) wins.
            let walkable = range == nil && prefixes.count == 1 && walk(query, spec, KeyRange(lower: [], upper: []), equalities: equalities) != nil
            let score = (equalities * 2 + (range != nil ? 1 : 0)) * 2 + (walkable ? 1 : 0)
            guard score > 1, score > (best?.score ?? 0) else { continue }
            var ranges: Set<KeyRange> = []
            for p in prefixes {
                guard let range else {
                    ranges.insert(KeyRange(lower: p, upper: end(of: p)))
                    continue
                }
                func key(_ v: Value) -> [UInt8] {
                    var k = p
                    append(v, descending: range.descending, to: &k)
                    return k
                }
                // A descending component is complemented: a lower bound on the value bounds the key from above.
                let (low, high) = range.descending ? (range.upper, range.lower) : (range.lower, range.upper)
                let from = low.map { $0.inclusive ? key($0.0) : end(of: key($0.0)) } ?? p
                let to = high.map { $0.inclusive ? end(of: key($0.0)) : key($0.0) } ?? end(of: p)
                ranges.insert(KeyRange(lower: from, upper: to))
            }
            best = (spec, ranges.sorted { $0.lower.lexicographicallyPrecedes($1.lower) }, score, equalities, range != nil)
        }
        if let best {
            if best.ranges.count == 1, let walk = walk(query, best.spec, best.ranges[0], equalities: best.equalities) {
                // Exact when every conjunct is one of the range's equalities (no conversion, no other value).
                let fixed = Set(best.spec.columns.prefix(best.equalities))
                let exact = !best.hasRange && best.spec.noCase == nil && parts.allSatisfy { p in
                    switch p {
                    case .compare(.column(let n, let type, false), .equal, .literal(let v, _), false),
                        .compare(.literal(let v, _), .equal, .column(let n, let type, false), false):
                        guard fixed.contains(n), let (b, converted) = bound(v, on: type), !converted else { return false }
                        return equal[n] == [b]
                    case .isNull(.column(let n, _, _)):
                        return fixed.contains(n) && equal[n] == [.null]
                    default:
                        return false
                    }
                }
                return exact ? walk.exactly : walk
            }
            return .ranges(best.spec, best.ranges)
        }
        // Integer ids (the operations queue's): rows are stored in id order, so a range on the id, or a
        // top list sorted on it, reads them in order (the queue's head and its largest id, one row each).
        let id = schema.idIndex
        if schema.columns[id].type == .integer {
            let sortedById = query.sort.first?.column == id
            var need: Int?
            if sortedById, !query.includeTotalCount, let top = query.top {
                let n = query.skip.addingReportingOverflow(top)
                if !n.overflow { need = n.partialValue }
            }
            if lower[id] != nil || upper[id] != nil || need != nil {
                let prefix = KVKeys.rows(table.number)
                func key(_ v: Value) -> [UInt8] {
                    var k = prefix
                    KeyCodec.appendId(v, into: &k)
                    return k
                }
                let from = lower[id].map { $0.inclusive ? key($0.0) : end(of: key($0.0)) } ?? prefix
                let to = upper[id].map { $0.inclusive ? end(of: key($0.0)) : key($0.0) } ?? end(of: prefix)
                return .idRange(KeyRange(lower: from, upper: to), reverse: sortedById && query.sort[0].descending, need: need)
            }
        }
        // A top list sorted on the first column of an index: walk the whole index.
        for spec in table.specs {
            let prefix = KVKeys.index(table.number, spec.number)
            if let walk = walk(query, spec, KeyRange(lower: prefix, upper: end(of: prefix)), equalities: 0) { return walk }
        }
        return .scan
    }

    /// A walk of `range` in the query's order, when the query wants a top list without its count, and its
    /// first sort key not fixed by the range's `equalities` is the index's next component.
    static func walk(_ query: ResolvedQuery, _ spec: KVIndexSpec, _ range: KeyRange, equalities: Int) -> KVPlan? {
        guard let top = query.top, !query.includeTotalCount, equalities < spec.columns.count else { return nil }
        let fixed = Set(spec.columns.prefix(equalities))
        // A NOCASE component's keys are not in the column's order.
        guard let key = query.sort.first(where: { !fixed.contains($0.column) }), !key.noCase,
            key.column == spec.columns[equalities], !spec.isNoCase(equalities)
        else { return nil }
        let need = query.skip.addingReportingOverflow(top)
        guard !need.overflow else { return nil }
        return .walk(
            spec, range, reverse: key.descending != spec.descending[equalities], need: need.partialValue, groupComponents: equalities + 1,
            exact: false)
    }

    /// This walk, marked exact.
    var exactly: KVPlan {
        guard case .walk(let spec, let range, let reverse, let need, let groupComponents, _) = self else { return self }
        return .walk(spec, range, reverse: reverse, need: need, groupComponents: groupComponents, exact: true)
    }
}

/// The reads of ``KVStore`` over a snapshot or a write transaction.
struct KVReads<Reader: OrderedKeyValueReader> {
    let reader: Reader
    let catalog: KVCatalog

    func row(_ table: KVTable, idKey: [UInt8]) throws -> [Value]? {
        try reader.get(KVKeys.row(table.number, idKey: idKey)).map(table.decode)
    }

    func schema(of name: String) -> TableSchema? { catalog.tables[Identifier.fold(name)]?.schema }

    func read(table name: String, id: Value) throws -> Item? {
        let table = try catalog.table(name)
        try table.schema.checkId(id)
        guard let record = try reader.get(KVKeys.row(table.number, idKey: KeyCodec.idKey(id))) else { return nil }
        return try record.withUnsafeBytes { try table.wholeRows.item($0) }
    }

    func read(_ query: Query) throws -> ReadResult {
        let table = try catalog.table(query.table)
        let entry = try catalog.plans.entry(query, version: catalog.version) {
            let resolved = try ResolvedQuery(query, schema: table.schema)
            let plan = KVPlan.make(table, resolved)
            var items: RecordItemBuilder?
            if case .walk(_, _, _, _, _, exact: true) = plan { items = RecordItemBuilder(resolved) }
            return KVPlanCache.Entry(resolved: resolved, plan: plan, items: items)
        }
        if case .walk(let spec, let range, let reverse, let need, let groupComponents, exact: true) = entry.plan, let builder = entry.items,
            let items = try exactWalk(table, builder, spec, range, reverse: reverse, need: need, groupComponents: groupComponents, skip: entry.resolved.skip)
        {
            return ReadResult(items: items, totalCount: nil)
        }
        return entry.resolved.apply(toMatching: try matches(table, entry.resolved, entry.plan))
    }

    /// The length of the first `components` components of an index entry's key, after the index's prefix
    /// (`start` bytes).
    static func groupEnd(_ key: UnsafeRawBufferPointer, start: Int, _ spec: KVIndexSpec, components: Int) -> Int {
        var end = start
        for descending in spec.descending.prefix(components) {
            end += KeyCodec.componentLength(key, at: end, descending: descending) ?? (key.count - end)
        }
        return min(key.count, end)
    }

    /// The items of an exact walk (every entry matches), built from its entries' records without a
    /// decoded row, or `nil` when two of the entries it reads tie on the sort's component: the walk
    /// orders those by id key, which is not the evaluator's id order in every case (a reversed walk,
    /// NOCASE ids holding a NUL), so the shared evaluator orders them instead.
    func exactWalk(
        _ table: KVTable, _ builder: RecordItemBuilder, _ spec: KVIndexSpec, _ range: KVPlan.KeyRange, reverse: Bool, need: Int,
        groupComponents: Int, skip: Int
    ) throws -> [Item]? {
        let start = KVKeys.index(table.number, spec.number).count
        var records: [UInt8] = []
        var spans: [Range<Int>] = []
        var group: [UInt8] = []
        var tie = false
        try reader.scan(from: range.lower, to: range.upper, reverse: reverse) { key, value in
            let current = UnsafeRawBufferPointer(rebasing: key[start..<Self.groupEnd(key, start: start, spec, components: groupComponents)])
            if current.elementsEqual(group) {
                tie = true
                return false
            }
            if spans.count >= need { return false }
            group = Array(current)
            try table.withEntryRecord(spec, value, read: reader.get) { record in
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
        return KVPlan.make(table, try ResolvedQuery(query, schema: table.schema)).accessPath
    }

    /// The rows matching `query` that its plan yields: all of them, except that a walk stops after the
    /// group in which `need` matches are out (see ``KVPlan``).
    func matches(_ table: KVTable, _ query: ResolvedQuery, _ plan: KVPlan) throws -> [[Value]] {
        var rows: [[Value]] = []
        // Records are tested in place (the columns the predicate reads, located without decoding) and
        // decoded only when they match.
        let filter = RecordFilter(query)
        func add(_ record: UnsafeRawBufferPointer) throws {
            if try filter.matches(record) { rows.append(try table.decode(record)) }
        }
        func addEntry(_ spec: KVIndexSpec, _ value: UnsafeRawBufferPointer) throws {
            try table.withEntryRecord(spec, value, read: reader.get) { try add($0) }
        }
        switch plan {
        case .noRows:
            break
        case .ids(let ids):
            var seen = Set<[UInt8]>()
            for id in ids {
                let key = KeyCodec.idKey(id)
                guard seen.insert(key).inserted, let record = try reader.get(KVKeys.row(table.number, idKey: key)) else { continue }
                try record.withUnsafeBytes { try add($0) }
            }
        case .ranges(let spec, let ranges):
            for range in ranges {
                try reader.scan(from: range.lower, to: range.upper, reverse: false) { _, value in
                    try addEntry(spec, value)
                    return true
                }
            }
        case .walk(let spec, let range, let reverse, let need, let groupComponents, _):
            let start = KVKeys.index(table.number, spec.number).count
            var group: [UInt8] = []
            try reader.scan(from: range.lower, to: range.upper, reverse: reverse) { key, value in
                let current = UnsafeRawBufferPointer(rebasing: key[start..<Self.groupEnd(key, start: start, spec, components: groupComponents)])
                if !current.elementsEqual(group) {
                    if rows.count >= need { return false }
                    group = Array(current)
                }
                try addEntry(spec, value)
                return true
            }
        case .idRange(let range, let reverse, let need):
            try reader.scan(from: range.lower, to: range.upper, reverse: reverse) { _, value in
                try add(value)
                return need.map { rows.count < $0 } ?? true
            }
        case .scan:
            let prefix = KVKeys.rows(table.number)
            try reader.scan(from: prefix, to: KVPlan.end(of: prefix), reverse: false) { _, value in
                try add(value)
                return true
            }
        }
        return rows
    }
}
