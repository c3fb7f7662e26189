import Foundation
import HeapModule

/// A ``Query`` checked against a table's schema: names resolved to column positions, types checked,
/// null literals turned into null tests, sort keys completed with the `id` tie-break.
///
/// Every backend resolves a query with ``init(_:schema:)`` before running it, so every backend rejects
/// the same queries with the same errors. Rows are `[Value]` arrays indexed by column position.
public struct ResolvedQuery: Sendable {
    /// The deepest nesting of predicates and expressions a query may have.
    public static let maximumDepth = 200

    /// The schema the query was resolved against.
    public let schema: TableSchema
    /// The resolved filter (``ResolvedPredicate/constant(_:)`` `true` when the query has none).
    public let predicate: ResolvedPredicate
    /// The sort keys, ending with the `id` tie-break unless `id` is already a key.
    public let sort: [ResolvedSortKey]
    /// Rows to skip.
    public let skip: Int
    /// Rows to return at most.
    public let top: Int?
    /// The column positions to return, in schema order.
    public let projection: [Int]
    /// Whether the total count is wanted.
    public let includeTotalCount: Bool

    /// Resolves `query` against `schema`; throws `invalidQuery` or `unknownColumn` for a query the
    /// table cannot answer.
    public init(_ query: Query, schema: TableSchema) throws {
        self.schema = schema
        guard query.skip >= 0 else {
            throw LocalStoreError(.invalidQuery, "skip must not be negative (got \(query.skip)) in a query on '\(schema.name)'", table: schema.name)
        }
        if let top = query.top, top < 0 {
            throw LocalStoreError(.invalidQuery, "top must not be negative (got \(top)) in a query on '\(schema.name)'", table: schema.name)
        }
        self.skip = query.skip
        self.top = query.top
        self.includeTotalCount = query.includeTotalCount
        var resolver = Resolver(schema: schema)
        self.predicate = try query.predicate.map { try resolver.resolve($0, depth: 0) } ?? .constant(true)
        var sort: [ResolvedSortKey] = []
        var hasId = false
        for key in query.sort {
            guard let n = schema.index(ofColumn: key.field) else { throw LocalStoreError.unknownColumn(key.field, table: schema.name) }
            guard schema.columns[n].type.isOrderable else {
                throw LocalStoreError(
                    .invalidQuery, "cannot sort table '\(schema.name)' on json column '\(schema.columns[n].name)'",
                    table: schema.name, column: schema.columns[n].name)
            }
            if sort.contains(where: { $0.column == n }) { continue }
            if n == schema.idIndex { hasId = true }
            sort.append(ResolvedSortKey(column: n, descending: key.direction == .descending, noCase: resolver.isStringId(n)))
        }
        if !hasId {
            sort.append(ResolvedSortKey(column: schema.idIndex, descending: false, noCase: resolver.isStringId(schema.idIndex)))
        }
        self.sort = sort
        if let select = query.select {
            var wanted = Set<Int>()
            for field in select {
                guard let n = schema.index(ofColumn: field) else { throw LocalStoreError.unknownColumn(field, table: schema.name) }
                wanted.insert(n)
            }
            if let v = schema.index(ofColumn: SystemProperty.version.columnName) { wanted.insert(v) }
            self.projection = wanted.sorted()
        } else {
            self.projection = Array(schema.columns.indices)
        }
    }

    /// Whether row `a` sorts before row `b` under ``sort``.
    @inlinable public func areInIncreasingOrder(_ a: [Value], _ b: [Value]) -> Bool {
        compareRows(a, b) < 0
    }

    /// Compares two rows under ``sort``: negative, zero or positive.
    public func compareRows(_ a: [Value], _ b: [Value]) -> Int { Self.compare(a, b, by: sort) }

    /// Orders two rows by `keys` (as ``compareRows(_:_:)`` does with the query's sort keys).
    public static func compare(_ a: [Value], _ b: [Value], by keys: [ResolvedSortKey]) -> Int {
        for key in keys {
            let c = Collation.compare(a[key.column], b[key.column], noCase: key.noCase)
            if c != 0 { return key.descending ? -c : c }
        }
        return 0
    }

    /// The item returned for `row`: the projected columns under their defined names.
    public func project(_ row: [Value]) -> Item {
        var values: [String: Value] = Dictionary(minimumCapacity: projection.count)
        for n in projection { values[schema.columns[n].name] = row[n] }
        return Item(values)
    }

    /// Runs the whole query over `rows` (in any order): filter, count, order, skip, top, project.
    ///
    /// With `top` set only `skip + top` rows are kept while scanning (a bounded heap), so the cost is
    /// O(n log(skip + top)) rather than a full sort.
    public func apply<S: Sequence>(to rows: S) -> ReadResult where S.Element == [Value] {
        let matches = select(rows)
        return ReadResult(items: items(matches.rows), totalCount: includeTotalCount ? matches.count : nil)
    }

    /// The items of `rows` (``project(_:)`` of each), in row form: one layout and one buffer of values
    /// for the whole result, no dictionary per item.
    public func items(_ rows: [[Value]]) -> [Item] {
        guard !rows.isEmpty, !projection.isEmpty, let layout = ItemLayout(names: projection.map { schema.columns[$0].name }) else {
            return rows.map(project)
        }
        let width = projection.count
        let values = ValueRows.make(count: rows.count * width) { base in
            var next = base
            for row in rows {
                for n in projection {
                    next.initialize(to: row[n])
                    next += 1
                }
            }
        }
        var items: [Item] = []
        items.reserveCapacity(rows.count)
        for i in 0..<rows.count { items.append(Item(layout: layout, values: values, start: i * width)) }
        return items
    }

    /// The rows of `rows` this query returns (filtered, ordered, skipped and cut, not projected) and
    /// the number of all matches.
    public func select<S: Sequence>(_ rows: S) -> (rows: [[Value]], count: Int) where S.Element == [Value] {
        order(rows.lazy.filter { predicate.matches($0) })
    }

    /// ``apply(to:)`` for rows a backend already filtered: every row of `matching` matches the predicate.
    package func apply(toMatching matching: [[Value]]) -> ReadResult {
        let selected = order(matching)
        return ReadResult(items: items(selected.rows), totalCount: includeTotalCount ? selected.count : nil)
    }

    /// Orders, skips and cuts `matching` (rows that match), with their count.
    ///
    /// With `top` set only `skip + top` rows are kept: while the rows arrive in order (an index walked
    /// in the sort's order) they are kept as they come and compared once each; from the first row out
    /// of order on, in a bounded heap.
    package func order<S: Sequence>(_ matching: S) -> (rows: [[Value]], count: Int) where S.Element == [Value] {
        var count = 0
        if let top {
            let limit = skip.addingReportingOverflow(top)
            if !limit.overflow, limit.partialValue == 0 {
                if includeTotalCount { for _ in matching { count += 1 } }
                return ([], count)
            }
            if !limit.overflow {
                let k = limit.partialValue
                var inOrder: [[Value]] = []
                var heap = Heap<HeapEntry>()
                var ordered = true
                for row in matching {
                    defer { count += 1 }
                    if ordered {
                        // A row not before the last kept one cannot displace it (ties keep arrival order).
                        guard let last = inOrder.last, compareRows(row, last) < 0 else {
                            if inOrder.count < k { inOrder.append(row) }
                            continue
                        }
                        ordered = false
                        for (i, r) in inOrder.enumerated() { heap.insert(HeapEntry(row: r, sort: sort, sequence: i)) }
                    }
                    let entry = HeapEntry(row: row, sort: sort, sequence: count)
                    if heap.count < k {
                        heap.insert(entry)
                    } else if let worst = heap.max, entry < worst {
                        _ = heap.replaceMax(with: entry)
                    }
                }
                if ordered { return (Array(inOrder.dropFirst(skip)), count) }
                var kept: [[Value]] = []
                kept.reserveCapacity(heap.count)
                while let e = heap.popMin() { kept.append(e.row) }
                return (Array(kept.dropFirst(skip)), count)
            }
        }
        var matched = Array(matching)
        count = matched.count
        matched.sort { compareRows($0, $1) < 0 }
        var result = matched.dropFirst(skip)
        if let top { result = result.prefix(top) }
        return (Array(result), count)
    }

    /// A row in the top-k heap. Holds the sort keys, not the query: an entry is copied on every heap move.
    struct HeapEntry: Comparable {
        let row: [Value]
        let sort: [ResolvedSortKey]
        let sequence: Int
        static func < (l: HeapEntry, r: HeapEntry) -> Bool {
            let c = ResolvedQuery.compare(l.row, r.row, by: l.sort)
            return c != 0 ? c < 0 : l.sequence < r.sequence
        }
        static func == (l: HeapEntry, r: HeapEntry) -> Bool { l.sequence == r.sequence }
    }
}

/// A resolved sort key.
public struct ResolvedSortKey: Sendable, Hashable {
    /// The column position.
    public let column: Int
    /// `true` for descending.
    public let descending: Bool
    /// `true` when the column is a string `id`, which sorts case-insensitively (SQLite `NOCASE`).
    public let noCase: Bool
}

/// A resolved, type-checked expression. Its static type is ``type``.
public indirect enum ResolvedExpression: Sendable, Hashable {
    /// A column: position, type, and whether it is a string id (compared case-insensitively).
    case column(Int, ColumnType, isStringId: Bool)
    /// A non-null literal of the given type (integers in double contexts stay integers).
    case literal(Value, ColumnType)
    /// Arithmetic; the type is `integer` when both operands are, otherwise `double`.
    case arithmetic(QueryExpression.ArithmeticOperator, ResolvedExpression, ResolvedExpression, ColumnType)
    /// ASCII lower-casing.
    case toLower(ResolvedExpression)
    /// ASCII upper-casing.
    case toUpper(ResolvedExpression)
    /// Length in Unicode scalars.
    case length(ResolvedExpression)
    /// An OData function with its checked arguments and its result type.
    case function(QueryFunction, [ResolvedExpression], ColumnType)

    /// The static type of the expression's value.
    public var type: ColumnType {
        switch self {
        case .column(_, let t, _): return t
        case .literal(_, let t): return t
        case .arithmetic(_, _, _, let t): return t
        case .toLower, .toUpper: return .string
        case .length: return .integer
        case .function(_, _, let t): return t
        }
    }

    /// Whether this is a string `id` column itself (comparisons with it are case-insensitive).
    public var isStringIdColumn: Bool {
        if case .column(_, _, true) = self { return true }
        return false
    }

    /// The value for `row`; `.null` propagates.
    public func evaluate(_ row: [Value]) -> Value {
        switch self {
        case .column(let n, _, _): return row[n]
        case .literal(let v, _): return v
        case .toLower(let e):
            if let s = QueryFunctions.text(e.evaluate(row)) { return .string(ASCII.lowercased(s)) }
            return .null
        case .toUpper(let e):
            if let s = QueryFunctions.text(e.evaluate(row)) { return .string(ASCII.uppercased(s)) }
            return .null
        case .length(let e):
            if let s = QueryFunctions.text(e.evaluate(row)) { return .int(Int64(s.unicodeScalars.count)) }
            return .null
        case .arithmetic(let op, let l, let r, _):
            return Arithmetic.apply(op, l.evaluate(row), r.evaluate(row))
        case .function(let f, let args, _):
            switch args.count {
            case 1: return QueryFunctions.apply(f, args[0].evaluate(row))
            case 2: return QueryFunctions.apply(f, args[0].evaluate(row), args[1].evaluate(row))
            default: return QueryFunctions.apply(f, args.map { $0.evaluate(row) })
            }
        }
    }
}

/// A resolved predicate, evaluated with two-valued logic (a comparison involving null is `false`).
public indirect enum ResolvedPredicate: Sendable, Hashable {
    /// Always `true` or always `false`.
    case constant(Bool)
    /// All of.
    case and([ResolvedPredicate])
    /// Any of.
    case or([ResolvedPredicate])
    /// Negation.
    case not(ResolvedPredicate)
    /// Comparison; `noCase` when the `[c]` flag is set or an operand is the string id column.
    case compare(ResolvedExpression, QueryPredicate.ComparisonOperator, ResolvedExpression, noCase: Bool)
    /// Null test.
    case isNull(ResolvedExpression)
    /// Not-null test.
    case isNotNull(ResolvedExpression)
    /// Membership in a list of non-null literals of the expression's type family.
    case `in`(ResolvedExpression, [Value], noCase: Bool)
    /// String test; `noCase` folds ASCII case on both sides (plain folding, no NUL rule).
    case string(QueryPredicate.StringOperator, ResolvedExpression, ResolvedExpression, noCase: Bool)

    /// Whether `row` satisfies the predicate.
    public func matches(_ row: [Value]) -> Bool {
        switch self {
        case .constant(let b): return b
        case .and(let ps):
            for p in ps where !p.matches(row) { return false }
            return true
        case .or(let ps):
            for p in ps where p.matches(row) { return true }
            return false
        case .not(let p): return !p.matches(row)
        case .isNull(let e): return e.evaluate(row).isNull
        case .isNotNull(let e): return !e.evaluate(row).isNull
        case .compare(let l, let op, let r, let noCase):
            let a = l.evaluate(row)
            if a.isNull { return false }
            let b = r.evaluate(row)
            if b.isNull { return false }
            return op.holds(for: Collation.compare(a, b, noCase: noCase))
        case .in(let e, let values, let noCase):
            let a = e.evaluate(row)
            if a.isNull { return false }
            for v in values where Collation.compare(a, v, noCase: noCase) == 0 { return true }
            return false
        case .string(let op, let l, let r, let noCase):
            guard var s = QueryFunctions.text(l.evaluate(row)), var p = QueryFunctions.text(r.evaluate(row)) else { return false }
            if noCase {
                s = ASCII.lowercased(s)
                p = ASCII.lowercased(p)
            }
            switch op {
            case .startsWith: return s.utf8.starts(with: p.utf8)
            case .endsWith: return s.utf8.reversed().starts(with: p.utf8.reversed())
            case .contains: return StringSearch.contains(s, p)
            }
        }
    }
}

enum StringSearch {
    /// Byte-wise substring search (the empty pattern is contained in every string).
    static func contains(_ s: String, _ p: String) -> Bool {
        // Native strings are contiguous UTF-8: search them in place, without copying.
        if let found = s.utf8.withContiguousStorageIfAvailable({ hay in
            p.utf8.withContiguousStorageIfAvailable { needle in ByteSearch.contains(UnsafeRawBufferPointer(hay), UnsafeRawBufferPointer(needle)) }
        }), let found {
            return found
        }
        return search(Array(s.utf8), Array(p.utf8))
    }

    private static func search<H: RandomAccessCollection, N: RandomAccessCollection>(_ hay: H, _ needle: N) -> Bool
    where H.Element == UInt8, N.Element == UInt8, H.Index == Int, N.Index == Int {
        if needle.isEmpty { return true }
        if needle.count > hay.count { return false }
        let first = needle[0]
        var i = 0
        let last = hay.count - needle.count
        while i <= last {
            if hay[i] == first {
                var j = 1
                while j < needle.count, hay[i + j] == needle[j] { j += 1 }
                if j == needle.count { return true }
            }
            i += 1
        }
        return false
    }
}

/// SQLite's arithmetic, reproduced: integer operations stay integers unless they overflow (then
/// they are done in double); division and modulo by zero give null; a NaN result gives null;
/// modulo truncates both operands to integers first.
public enum Arithmetic {
    /// Applies `op` to two values (null in, null out).
    public static func apply(_ op: QueryExpression.ArithmeticOperator, _ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.int(let x), .int(let y)):
            switch op {
            case .add:
                let r = x.addingReportingOverflow(y)
                return r.overflow ? real(Double(x) + Double(y)) : .int(r.partialValue)
            case .subtract:
                let r = x.subtractingReportingOverflow(y)
                return r.overflow ? real(Double(x) - Double(y)) : .int(r.partialValue)
            case .multiply:
                let r = x.multipliedReportingOverflow(by: y)
                return r.overflow ? real(Double(x) * Double(y)) : .int(r.partialValue)
            case .divide:
                if y == 0 { return .null }
                if y == -1 && x == .min { return real(Double(x) / Double(y)) }
                return .int(x / y)
            case .modulo:
                if y == 0 { return .null }
                let d = y == -1 ? 1 : y
                return .int(x % d)
            }
        default:
            guard let x = a.doubleValue, let y = b.doubleValue else { return .null }
            switch op {
            case .add: return real(x + y)
            case .subtract: return real(x - y)
            case .multiply: return real(x * y)
            case .divide:
                if y == 0 { return .null }
                return real(x / y)
            case .modulo:
                let ix = toInt64(a)
                var iy = toInt64(b)
                if iy == 0 { return .null }
                if iy == -1 { iy = 1 }
                return real(Double(ix % iy))
            }
        }
    }

    static func real(_ d: Double) -> Value { d.isNaN ? .null : .double(d) }

    /// SQLite's conversion of a number to an integer: doubles are truncated and saturate at the
    /// `Int64` bounds.
    public static func toInt64(_ v: Value) -> Int64 {
        switch v {
        case .int(let i): return i
        case .double(let d):
            if d.isNaN { return 0 }
            if d <= -9223372036854775808.0 { return .min }
            if d >= 9223372036854775807.0 { return .max }
            return Int64(d)
        default: return 0
        }
    }
}

/// Type checking and name resolution of a ``QueryPredicate``.
struct Resolver {
    let schema: TableSchema

    func isStringId(_ n: Int) -> Bool { n == schema.idIndex && schema.columns[n].type == .string }

    func fail(_ message: String) -> LocalStoreError {
        LocalStoreError(.invalidQuery, "\(message) in a query on '\(schema.name)'", table: schema.name)
    }

    func depthCheck(_ depth: Int) throws {
        if depth > ResolvedQuery.maximumDepth {
            throw fail("the predicate is nested deeper than \(ResolvedQuery.maximumDepth) levels")
        }
    }

    mutating func resolve(_ p: QueryPredicate, depth: Int) throws -> ResolvedPredicate {
        try depthCheck(depth)
        switch p {
        case .true: return .constant(true)
        case .false: return .constant(false)
        case .and(let ps):
            if ps.isEmpty { return .constant(true) }
            let parts = try ps.map { try resolve($0, depth: depth + 1) }
            return parts.count == 1 ? parts[0] : .and(parts)
        case .or(let ps):
            if ps.isEmpty { return .constant(false) }
            let parts = try ps.map { try resolve($0, depth: depth + 1) }
            return parts.count == 1 ? parts[0] : .or(parts)
        case .not(let inner):
            return .not(try resolve(inner, depth: depth + 1))
        case .isNull(let e):
            let r = try resolveNullable(e, depth: depth + 1)
            return r.map { .isNull($0) } ?? .constant(true)
        case .isNotNull(let e):
            let r = try resolveNullable(e, depth: depth + 1)
            return r.map { .isNotNull($0) } ?? .constant(false)
        case .compare(let l, let op, let r, let ci):
            let rl = try resolveNullable(l, depth: depth + 1)
            let rr = try resolveNullable(r, depth: depth + 1)
            guard let a = rl, let b = rr else {
                // A null literal on at least one side.
                let other = rl ?? rr
                switch op {
                case .equal: return other.map { .isNull($0) } ?? .constant(true)
                case .notEqual: return other.map { .isNotNull($0) } ?? .constant(false)
                default: return .constant(false)
                }
            }
            try checkComparable(a, b, what: "compare")
            if ci {
                guard a.type == .string, b.type == .string else {
                    throw fail("case-insensitive comparison needs strings, not \(a.type) and \(b.type)")
                }
            }
            return .compare(a, op, b, noCase: ci || a.isStringIdColumn || b.isStringIdColumn)
        case .in(let e, let values):
            let a = try resolveExpression(e, depth: depth + 1)
            var kept: [Value] = []
            for v in values where !v.isNull {
                let lit = try literal(v)
                try checkComparable(a, lit, what: "match with IN")
                if case .literal(let value, _) = lit { kept.append(value) }
            }
            if kept.isEmpty { return .constant(false) }
            return .in(a, kept, noCase: a.isStringIdColumn)
        case .between(let e, let low, let high):
            let a = try resolveExpression(e, depth: depth + 1)
            if low.isNull || high.isNull { return .constant(false) }
            let lo = try literal(low)
            let hi = try literal(high)
            try checkComparable(a, lo, what: "compare with BETWEEN")
            try checkComparable(a, hi, what: "compare with BETWEEN")
            let noCase = a.isStringIdColumn
            return .and([.compare(a, .greaterOrEqual, lo, noCase: noCase), .compare(a, .lessOrEqual, hi, noCase: noCase)])
        case .string(let op, let s, let pattern, let ci):
            let rs = try resolveNullable(s, depth: depth + 1)
            let rp = try resolveNullable(pattern, depth: depth + 1)
            guard let a = rs, let b = rp else { return .constant(false) }
            guard a.type.isTextual, b.type.isTextual else {
                throw fail("\(op.rawValue) needs strings (or numbers or booleans, read as text), not \(describe(a)) and \(describe(b))")
            }
            return .string(op, a, b, noCase: ci || a.isStringIdColumn)
        }
    }

    func literal(_ v: Value) throws -> ResolvedExpression {
        switch v {
        case .null: throw fail("null cannot be used here")
        case .bool: return .literal(v, .boolean)
        case .int: return .literal(v, .integer)
        case .double(let d):
            guard d.isFinite else { throw fail("the number \(d) cannot be used in a query") }
            return .literal(v, .double)
        case .string: return .literal(v, .string)
        case .date(let d):
            guard d.timeIntervalSinceReferenceDate.isFinite else {
                throw fail("the date \(d.timeIntervalSinceReferenceDate) seconds from 2001-01-01 cannot be used in a query")
            }
            return .literal(v, .date)
        case .binary: return .literal(v, .binary)
        case .json: throw fail("json values cannot be compared")
        }
    }

    func checkComparable(_ a: ResolvedExpression, _ b: ResolvedExpression, what: String) throws {
        if a.type == .json || b.type == .json { throw fail("cannot \(what) json values") }
        if a.type == b.type || (a.type.isNumeric && b.type.isNumeric) { return }
        throw fail("cannot \(what) \(describe(a)) with \(describe(b))")
    }

    func describe(_ e: ResolvedExpression) -> String {
        switch e {
        case .column(let n, let t, _): return "column '\(schema.columns[n].name)' (\(t))"
        case .literal(let v, _): return "\(v.kindName) \(v)"
        default: return "a \(e.type) expression"
        }
    }

    /// Resolves an expression; `nil` for the null literal.
    mutating func resolveNullable(_ e: QueryExpression, depth: Int) throws -> ResolvedExpression? {
        if case .literal(.null) = e { return nil }
        return try resolveExpression(e, depth: depth)
    }

    mutating func resolveExpression(_ e: QueryExpression, depth: Int) throws -> ResolvedExpression {
        try depthCheck(depth)
        switch e {
        case .field(let name):
            guard let n = schema.index(ofColumn: name) else { throw LocalStoreError.unknownColumn(name, table: schema.name) }
            return .column(n, schema.columns[n].type, isStringId: isStringId(n))
        case .literal(let v):
            return try literal(v)
        case .dateOnly(let d):
            guard ODataDates.isDay(d) else {
                throw fail("the day \(d.timeIntervalSinceReferenceDate) seconds from 2001-01-01 is not a midnight UTC of the years 0000 to 9999")
            }
            return .literal(.date(d), .date)
        case .arithmetic(let op, let l, let r):
            let a = try resolveExpression(l, depth: depth + 1)
            let b = try resolveExpression(r, depth: depth + 1)
            guard a.type.isNumeric, b.type.isNumeric else {
                throw fail("arithmetic needs numbers, not \(describe(a)) and \(describe(b))")
            }
            let t: ColumnType = (a.type == .integer && b.type == .integer) ? .integer : .double
            return .arithmetic(op, a, b, t)
        case .toLower(let inner), .toUpper(let inner), .length(let inner):
            let a = try resolveExpression(inner, depth: depth + 1)
            guard a.type.isTextual else { throw fail("string function applied to \(describe(a))") }
            switch e {
            case .toLower: return .toLower(a)
            case .toUpper: return .toUpper(a)
            default: return .length(a)
            }
        case .function(let f, let args):
            guard f.argumentCounts.contains(args.count) else {
                let counts = f.argumentCounts
                let wanted = counts.count == 1 ? "\(counts.lowerBound)" : "\(counts.lowerBound) or \(counts.upperBound)"
                throw fail("\(f.rawValue) takes \(wanted) arguments, not \(args.count)")
            }
            var resolved: [ResolvedExpression] = []
            for arg in args {
                guard let a = try resolveNullable(arg, depth: depth + 1) else {
                    throw fail("\(f.rawValue) cannot take a null literal")
                }
                resolved.append(a)
            }
            func need(_ n: Int, _ ok: Bool, _ what: String) throws {
                if !ok { throw fail("\(f.rawValue) needs \(what) as argument \(n + 1), not \(describe(resolved[n]))") }
            }
            let type: ColumnType
            switch f {
            case .indexOf, .concat, .replace, .trim:
                for n in resolved.indices { try need(n, resolved[n].type.isTextual, "a string (or a number or boolean)") }
                type = f == .indexOf ? .integer : .string
            case .substring:
                try need(0, resolved[0].type.isTextual, "a string (or a number or boolean)")
                for n in resolved.indices.dropFirst() { try need(n, resolved[n].type == .integer, "an integer") }
                type = .string
            case .year, .month, .day, .hour, .minute, .second:
                try need(0, resolved[0].type == .date, "a date")
                type = .integer
            case .round, .floor, .ceiling:
                try need(0, resolved[0].type.isNumeric, "a number")
                type = resolved[0].type
            }
            return .function(f, resolved, type)
        }
    }
}

/// The OData functions' values, shared by the core evaluator and the SQL engine's `localstore_call`.
/// Any null argument gives null; so does an argument of the wrong kind (the resolver rules that out).
package enum QueryFunctions {
    /// `f` applied to one argument.
    package static func apply(_ f: QueryFunction, _ a: Value) -> Value {
        switch f {
        case .trim:
            guard let s = text(a) else { return .null }
            return .string(trim(s))
        case .year, .month, .day, .hour, .minute, .second:
            guard case .date(let d) = a else { return .null }
            let t = d.timeIntervalSinceReferenceDate.rounded(.down)
            guard t.isFinite, abs(t) < DateParts.limit else { return .null }
            return datePart(f, wholeSecondsSinceReferenceDate: Int64(t))
        case .round, .floor, .ceiling:
            switch a {
            case .int: return a
            case .double(let x):
                switch f {
                case .round: return .double(x.rounded(.toNearestOrAwayFromZero))
                case .floor: return .double(x.rounded(.down))
                default: return .double(x.rounded(.up))
                }
            default: return .null
            }
        default:
            return apply(f, [a])
        }
    }

    /// `f` applied to two arguments.
    package static func apply(_ f: QueryFunction, _ a: Value, _ b: Value) -> Value {
        switch f {
        case .indexOf:
            guard let s = text(a), let p = text(b) else { return .null }
            return .int(indexOf(p, in: s))
        case .concat:
            guard let s = text(a), let t = text(b) else { return .null }
            return .string(s + t)
        case .substring:
            guard let s = text(a), let start = integer(b) else { return .null }
            return .string(substring(s, start: start, length: nil))
        default:
            return apply(f, [a, b])
        }
    }

    /// `f` applied to any number of arguments; `null` when the count is not one `f` takes.
    package static func apply(_ f: QueryFunction, _ args: [Value]) -> Value {
        guard f.argumentCounts.contains(args.count) else { return .null }
        if args.count == 1, f.argumentCounts == 1...1 { return apply(f, args[0]) }
        if args.count == 2, f != .replace, f.argumentCounts.lowerBound == 2 { return apply(f, args[0], args[1]) }
        switch f {
        case .replace:
            guard let s = text(args[0]), let find = text(args[1]), let with = text(args[2]) else { return .null }
            return .string(replace(s, find, with))
        case .substring:
            guard let s = text(args[0]), let start = integer(args[1]) else { return .null }
            if args.count == 2 { return .string(substring(s, start: start, length: nil)) }
            guard let length = integer(args[2]) else { return .null }
            return .string(substring(s, start: start, length: length))
        default:
            return .null
        }
    }

    /// The text a string function reads from a value: a string as it is; an integer in decimal; a
    /// double as .NET's `Double.ToString(CultureInfo.InvariantCulture)` writes it (`DotNetText`); a
    /// boolean `True` or `False`. `nil` for null and every other kind.
    package static func text(_ v: Value) -> String? {
        switch v {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return DotNetText.double(d)
        case .bool(let b): return b ? "True" : "False"
        default: return nil
        }
    }

    /// An integer argument; a double (integer arithmetic that overflowed) is truncated, saturating.
    static func integer(_ v: Value) -> Int64? {
        switch v {
        case .int(let i): return i
        case .double: return Arithmetic.toInt64(v)
        default: return nil
        }
    }

    static func trim(_ s: String) -> String {
        let u = s.utf8
        guard let first = u.firstIndex(where: { $0 != 0x20 }) else { return "" }
        guard let last = u.lastIndex(where: { $0 != 0x20 }) else { return "" }
        if first == u.startIndex && last == u.index(before: u.endIndex) { return s }
        // Cut the bytes (a space is one byte, so both ends are scalar boundaries), never Characters.
        return String(decoding: u[first...last], as: UTF8.self)
    }

    /// 0-based position in Unicode scalars of the first occurrence of `p` in `s` (byte match; a match
    /// of valid UTF-8 always starts on a scalar boundary), `-1` when absent.
    static func indexOf(_ p: String, in s: String) -> Int64 {
        let hay = Array(s.utf8)
        let needle = Array(p.utf8)
        guard let offset = firstOffset(of: needle, in: hay, from: 0) else { return -1 }
        var scalars: Int64 = 0
        for b in hay[..<offset] where b & 0xC0 != 0x80 { scalars += 1 }
        return scalars
    }

    static func firstOffset(of needle: [UInt8], in hay: [UInt8], from start: Int) -> Int? {
        if needle.isEmpty { return start <= hay.count ? start : nil }
        if needle.count > hay.count - start { return nil }
        let first = needle[0]
        var i = start
        let last = hay.count - needle.count
        while i <= last {
            if hay[i] == first {
                var j = 1
                while j < needle.count, hay[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }

    static func replace(_ s: String, _ find: String, _ with: String) -> String {
        if find.isEmpty { return s }
        let hay = Array(s.utf8)
        let needle = Array(find.utf8)
        let replacement = Array(with.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(hay.count)
        var i = 0
        while let found = firstOffset(of: needle, in: hay, from: i) {
            out += hay[i..<found]
            out += replacement
            i = found + needle.count
        }
        if i == 0 { return s }
        out += hay[i...]
        return String(decoding: out, as: UTF8.self)
    }

    /// The scalars at positions `start ..< start + length` (to the end when `length` is nil) that exist.
    static func substring(_ s: String, start: Int64, length: Int64?) -> String {
        if let length, length <= 0 { return "" }
        let scalars = s.unicodeScalars
        let count = Int64(scalars.count)
        let lower = min(max(start, 0), count)
        var upper = count
        if let length {
            let end = start.addingReportingOverflow(length)
            // `length` > 0, so an overflow means past every position.
            if !end.overflow { upper = min(max(end.partialValue, 0), count) }
        }
        if lower >= upper { return "" }
        let from = scalars.index(scalars.startIndex, offsetBy: Int(lower))
        let to = scalars.index(from, offsetBy: Int(upper - lower))
        return String(scalars[from..<to])
    }

    /// The date part `f` of the date `seconds` whole seconds after 2001-01-01T00:00:00Z (the date
    /// rounded down to the whole second); null when `|seconds|` ≥ 9·10^18 (about 2.9 × 10^11 years).
    package static func datePart(_ f: QueryFunction, wholeSecondsSinceReferenceDate seconds: Int64) -> Value {
        guard let parts = DateParts(wholeSecondsSinceReferenceDate: seconds) else { return .null }
        switch f {
        case .year: return .int(parts.year)
        case .month: return .int(parts.month)
        case .day: return .int(parts.day)
        case .hour: return .int(parts.hour)
        case .minute: return .int(parts.minute)
        case .second: return .int(parts.second)
        default: return .null
        }
    }

    /// A date's UTC calendar fields, proleptic Gregorian.
    struct DateParts {
        /// Dates at least this many seconds from 2001 have no date parts.
        static let limit = 9.0e18

        let year, month, day, hour, minute, second: Int64

        init?(wholeSecondsSinceReferenceDate t: Int64) {
            guard t > -9_000_000_000_000_000_000 && t < 9_000_000_000_000_000_000 else { return nil }
            // Whole seconds since 1970, exact: the floor was taken before the epoch shift.
            let seconds = t + 978_307_200
            var days = seconds / 86_400
            var secondOfDay = seconds % 86_400
            if secondOfDay < 0 {
                secondOfDay += 86_400
                days -= 1
            }
            hour = secondOfDay / 3600
            minute = secondOfDay / 60 % 60
            second = secondOfDay % 60
            // Civil date from days since 1970-01-01 (H. Hinnant's algorithm, as delta tokens format it).
            let (y, m, d) = DeltaTokenFormat.civil(fromDays: days)
            year = Int64(y)
            month = Int64(m)
            day = Int64(d)
        }
    }
}

extension TableSchema {
    /// The ids a key lookup answers a query with, from its `conjuncts`: the literal of the first `id ==`
    /// conjunct, or the literals of the first `id in` one, when they have the id's own kind (a string for a
    /// string id, an integer for an integer one: `id == 1.0` on an integer id matches 1 numerically, which
    /// a key lookup would miss); `nil` when no conjunct qualifies. Shared by the backends' planners.
    package func idLookup(_ conjuncts: [ResolvedPredicate]) -> [Value]? {
        let idIndex = self.idIndex
        let idType = self.idType
        func isIdKind(_ v: Value) -> Bool {
            switch (idType, v) {
            case (.string, .string), (.integer, .int): return true
            default: return false
            }
        }
        for p in conjuncts {
            switch p {
            case .compare(.column(let n, _, _), .equal, .literal(let v, _), _) where n == idIndex && isIdKind(v): return [v]
            case .compare(.literal(let v, _), .equal, .column(let n, _, _), _) where n == idIndex && isIdKind(v): return [v]
            case .in(.column(let n, _, _), let vs, _) where n == idIndex && vs.allSatisfy(isIdKind): return vs
            default: continue
            }
        }
        return nil
    }
}

extension ResolvedPredicate {
    /// The conjuncts of the predicate: nested `and`s flattened, `true` dropped (a planner looks for
    /// constraints among them). Shared by the LMDB and key-value planners.
    package var conjuncts: [ResolvedPredicate] {
        switch self {
        case .and(let ps): return ps.flatMap(\.conjuncts)
        case .constant(true): return []
        default: return [self]
        }
    }
}
