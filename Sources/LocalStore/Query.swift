import Foundation

/// A read (or delete) request against one table: predicate, order, paging, projection and count.
///
/// ```swift
/// let query = Query("TodoItem", where: Field("complete") == false && Field("priority") >= 2)
///     .sorted(by: "priority", .descending)
///     .top(50)
/// ```
public struct Query: Sendable, Hashable {
    /// The table to read.
    public var table: String
    /// The filter; `nil` matches every row.
    public var predicate: QueryPredicate?
    /// Sort keys, most significant first. Ties are always broken by `id` ascending.
    public var sort: [SortKey]
    /// Rows to skip after sorting.
    public var skip: Int
    /// The largest number of rows to return; `nil` for all. `0` returns no rows but still the count.
    public var top: Int?
    /// The columns to return; `nil` for all. `version` is added when the table has it.
    public var select: [String]?
    /// Whether ``ReadResult/totalCount`` is filled with the number of matches ignoring skip and top.
    public var includeTotalCount: Bool

    /// Creates a query.
    public init(
        _ table: String, where predicate: QueryPredicate? = nil, sort: [SortKey] = [], skip: Int = 0, top: Int? = nil,
        select: [String]? = nil, includeTotalCount: Bool = false
    ) {
        self.table = table
        self.predicate = predicate
        self.sort = sort
        self.skip = skip
        self.top = top
        self.select = select
        self.includeTotalCount = includeTotalCount
    }

    /// A copy with one more sort key.
    public func sorted(by field: String, _ direction: SortKey.Direction = .ascending) -> Query {
        var q = self
        q.sort.append(SortKey(field, direction))
        return q
    }

    /// A copy with `skip` set.
    public func skip(_ n: Int) -> Query {
        var q = self
        q.skip = n
        return q
    }

    /// A copy with `top` set.
    public func top(_ n: Int?) -> Query {
        var q = self
        q.top = n
        return q
    }

    /// A copy that selects `fields`.
    public func selecting(_ fields: [String]) -> Query {
        var q = self
        q.select = fields
        return q
    }

    /// A copy that asks for the total count.
    public func includingTotalCount(_ include: Bool = true) -> Query {
        var q = self
        q.includeTotalCount = include
        return q
    }
}

/// One sort key of a ``Query``.
public struct SortKey: Sendable, Hashable {
    /// Sort direction.
    public enum Direction: Sendable, Hashable {
        /// Smallest first; nulls first.
        case ascending
        /// Largest first; nulls last.
        case descending
    }
    /// The column to sort on.
    public var field: String
    /// The direction.
    public var direction: Direction

    /// Creates a sort key.
    public init(_ field: String, _ direction: Direction = .ascending) {
        self.field = field
        self.direction = direction
    }
}

/// A value-producing expression inside a ``QueryPredicate``.
public indirect enum QueryExpression: Sendable, Hashable {
    /// A column of the queried table.
    case field(String)
    /// A constant.
    case literal(Value)
    /// Arithmetic on two numeric expressions.
    case arithmetic(ArithmeticOperator, QueryExpression, QueryExpression)
    /// ASCII lower-casing of a string expression (SQLite's `lower()`); a number or boolean is read as
    /// text first (as ``QueryFunction/concat`` reads it).
    case toLower(QueryExpression)
    /// ASCII upper-casing of a string expression (SQLite's `upper()`); a number or boolean is read as
    /// text first.
    case toUpper(QueryExpression)
    /// The number of Unicode scalars of a string expression; a number or boolean is read as text first.
    case length(QueryExpression)
    /// One of the OData v3 functions applied to its arguments (see ``QueryFunction`` for each one's
    /// arguments, result and rules). Any null argument gives null.
    case function(QueryFunction, [QueryExpression])
    /// A calendar day: OData v4's `Edm.Date` literal (`cast(1994-10-14,Edm.Date)`, or bare `1994-10-14`).
    ///
    /// The date must be a midnight UTC (a whole number of days from 1970) in the years 0000 to 9999
    /// (`invalidQuery` otherwise). It is compared and evaluated exactly as `.literal(.date(date))`; it is a
    /// case of its own so that OData renders it as a day: `cast(1994-10-14,Edm.Date)` in
    /// ``ODataDialect/v4`` (what a v4 server compares with an `Edm.Date` property),
    /// `datetimeoffset'1994-10-14T00:00:00.000Z'` in ``ODataDialect/v3``, which has no day type.
    case dateOnly(Date)

    /// Arithmetic operators. Integer operands give integer results (division truncates, overflow
    /// falls back to double as in SQLite); division or modulo by zero gives null.
    public enum ArithmeticOperator: String, Sendable, Hashable {
        /// `+`
        case add
        /// `-`
        case subtract
        /// `*`
        case multiply
        /// `/`
        case divide
        /// `mod` (operands truncated to integers, as SQLite's `%`).
        case modulo
    }
}

/// The OData v3 `$filter` functions beyond `tolower`, `toupper` and `length` (which have their own
/// ``QueryExpression`` cases). The raw value is the OData name.
///
/// Strings are counted in Unicode scalars (code points), never in UTF-8 bytes or grapheme clusters;
/// positions are 0-based. Any null argument makes the result null. Argument types are checked when the
/// query is resolved (`invalidQuery` otherwise). `docs/semantics.md` pins every rule.
public enum QueryFunction: String, Sendable, Hashable, CaseIterable {
    /// `indexof(s, part)`: the 0-based position (in Unicode scalars) of the first occurrence of `part` in
    /// `s`, `-1` when absent, `0` for the empty `part`. Integer.
    case indexOf = "indexof"
    /// `concat(a, b)`: the two strings joined. Like every string argument of these functions (and of
    /// `tolower`, `toupper`, `length` and the string tests), `a` and `b` may also be numbers or booleans,
    /// read as the text .NET's `ToString(CultureInfo.InvariantCulture)` gives them (the services' servers
    /// convert them): integers in decimal (`-12`), doubles in the shortest form that reads back
    /// (`1.5`, `0.1`, `-0`, `1E+15`, `1E-05`, `Infinity`), booleans `True` and `False`.
    case concat
    /// `replace(s, find, with)`: every non-overlapping occurrence of `find`, left to right, replaced;
    /// an empty `find` leaves `s` as it is.
    case replace
    /// `substring(s, start)` and `substring(s, start, length)`: the Unicode scalars of `s` at positions
    /// `start ..< start + length` (to the end without `length`) that exist; positions outside `s` are
    /// dropped, a negative `length` gives the empty string. `start` and `length` are integers.
    case substring
    /// `trim(s)`: `s` without its leading and trailing spaces (U+0020 only, as SQL's `TRIM`).
    case trim
    /// `year(date)` in UTC, proleptic Gregorian, astronomical numbering (1 BC is year 0). Integer.
    case year
    /// `month(date)`, 1–12, UTC. Integer.
    case month
    /// `day(date)`, day of the month 1–31, UTC. Integer.
    case day
    /// `hour(date)`, 0–23, UTC. Integer.
    case hour
    /// `minute(date)`, 0–59. Integer.
    case minute
    /// `second(date)`, 0–59: the whole seconds (the fraction is dropped, rounding toward the past). Integer.
    case second
    /// `round(x)`: to the nearest whole number, halves away from zero. An integer stays as it is; a
    /// double gives a double.
    case round
    /// `floor(x)`: the largest whole number ≤ `x` (same type as `x`).
    case floor
    /// `ceiling(x)`: the smallest whole number ≥ `x` (same type as `x`).
    case ceiling

    /// The numbers of arguments the function takes.
    public var argumentCounts: ClosedRange<Int> {
        switch self {
        case .indexOf, .concat: return 2...2
        case .replace: return 3...3
        case .substring: return 2...3
        case .trim, .year, .month, .day, .hour, .minute, .second, .round, .floor, .ceiling: return 1...1
        }
    }
}

/// A boolean filter over the rows of one table, evaluated identically by every backend.
///
/// Logic is two-valued: a comparison with a null operand is `false` (only ``isNull(_:)`` and
/// ``isNotNull(_:)`` match nulls), and ``not(_:)`` negates that `false`. Comparing `==`/`!=` with a
/// literal null is a null test.
public indirect enum QueryPredicate: Sendable, Hashable {
    /// Matches every row.
    case `true`
    /// Matches no row.
    case `false`
    /// All of the predicates (an empty list matches every row).
    case and([QueryPredicate])
    /// Any of the predicates (an empty list matches no row).
    case or([QueryPredicate])
    /// The negation.
    case not(QueryPredicate)
    /// A comparison; `caseInsensitive` (the `[c]` flag) compares strings after ASCII case folding.
    case compare(QueryExpression, ComparisonOperator, QueryExpression, caseInsensitive: Bool)
    /// The expression is null.
    case isNull(QueryExpression)
    /// The expression is not null.
    case isNotNull(QueryExpression)
    /// The expression equals one of the values (null values in the list never match).
    case `in`(QueryExpression, [Value])
    /// `low <= expression <= high`.
    case between(QueryExpression, Value, Value)
    /// A string test; `caseInsensitive` folds ASCII case first.
    case string(StringOperator, QueryExpression, QueryExpression, caseInsensitive: Bool)

    /// Comparison operators.
    public enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
        /// `==`
        case equal
        /// `!=`
        case notEqual
        /// `<`
        case less
        /// `<=`
        case lessOrEqual
        /// `>`
        case greater
        /// `>=`
        case greaterOrEqual

        /// Whether the operator holds for a three-way comparison result (`< 0`, `0`, `> 0`) of its operands.
        @inlinable @inline(__always)
        package func holds(for comparison: Int) -> Bool {
            switch self {
            case .equal: return comparison == 0
            case .notEqual: return comparison != 0
            case .less: return comparison < 0
            case .lessOrEqual: return comparison <= 0
            case .greater: return comparison > 0
            case .greaterOrEqual: return comparison >= 0
            }
        }

        /// The operator with its operands swapped: `a < b` is `b > a` (planners read `literal op column`
        /// as `column mirrored literal`).
        package var mirrored: ComparisonOperator {
            switch self {
            case .less: return .greater
            case .lessOrEqual: return .greaterOrEqual
            case .greater: return .less
            case .greaterOrEqual: return .lessOrEqual
            case .equal, .notEqual: return self
            }
        }
    }

    /// String operators.
    public enum StringOperator: String, Sendable, Hashable, CaseIterable {
        /// The subject begins with the pattern.
        case startsWith
        /// The subject ends with the pattern.
        case endsWith
        /// The subject contains the pattern.
        case contains
    }
}

// MARK: - A small DSL

/// Refers to a column in a predicate: `Field("priority") > 3`.
public func Field(_ name: String) -> QueryExpression { .field(name) }

extension QueryExpression: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    /// A string literal is a *value*, not a field: use ``Field(_:)`` for columns.
    public init(stringLiteral value: String) { self = .literal(.string(value)) }
    /// An integer literal value.
    public init(integerLiteral value: Int64) { self = .literal(.int(value)) }
    /// A double literal value.
    public init(floatLiteral value: Double) { self = .literal(.double(value)) }
    /// A boolean literal value.
    public init(booleanLiteral value: Bool) { self = .literal(.bool(value)) }
    /// The null literal.
    public init(nilLiteral: ()) { self = .literal(.null) }

    /// `self` lower-cased (ASCII).
    public var lowercased: QueryExpression { .toLower(self) }
    /// `self` upper-cased (ASCII).
    public var uppercased: QueryExpression { .toUpper(self) }
    /// The length of `self` in Unicode scalars.
    public var length: QueryExpression { .length(self) }

    /// OData `indexof`: the 0-based position of `part` in `self` (Unicode scalars), `-1` when absent.
    public func indexOf(_ part: QueryExpression) -> QueryExpression { .function(.indexOf, [self, part]) }
    /// OData `concat`: `self` followed by `other`.
    public func concat(_ other: QueryExpression) -> QueryExpression { .function(.concat, [self, other]) }
    /// OData `replace`: every occurrence of `find` in `self` replaced by `replacement`.
    public func replacing(_ find: QueryExpression, with replacement: QueryExpression) -> QueryExpression {
        .function(.replace, [self, find, replacement])
    }
    /// OData `substring`: the Unicode scalars from position `start` (0-based), `length` of them or to the end.
    public func substring(from start: QueryExpression, length: QueryExpression? = nil) -> QueryExpression {
        .function(.substring, length.map { [self, start, $0] } ?? [self, start])
    }
    /// OData `trim`: without leading and trailing spaces.
    public var trimmed: QueryExpression { .function(.trim, [self]) }
    /// OData `year` of a date (UTC).
    public var year: QueryExpression { .function(.year, [self]) }
    /// OData `month` of a date (UTC), 1–12.
    public var month: QueryExpression { .function(.month, [self]) }
    /// OData `day` of a date (UTC), 1–31.
    public var day: QueryExpression { .function(.day, [self]) }
    /// OData `hour` of a date (UTC), 0–23.
    public var hour: QueryExpression { .function(.hour, [self]) }
    /// OData `minute` of a date, 0–59.
    public var minute: QueryExpression { .function(.minute, [self]) }
    /// OData `second` of a date, 0–59 (whole seconds).
    public var second: QueryExpression { .function(.second, [self]) }
    /// OData `round`: the nearest whole number, halves away from zero.
    public var rounded: QueryExpression { .function(.round, [self]) }
    /// OData `floor`: rounded toward negative infinity.
    public var floor: QueryExpression { .function(.floor, [self]) }
    /// OData `ceiling`: rounded toward positive infinity.
    public var ceiling: QueryExpression { .function(.ceiling, [self]) }

    /// `self` starts with `prefix`.
    public func starts(with prefix: QueryExpression, caseInsensitive: Bool = false) -> QueryPredicate {
        .string(.startsWith, self, prefix, caseInsensitive: caseInsensitive)
    }
    /// `self` ends with `suffix`.
    public func ends(with suffix: QueryExpression, caseInsensitive: Bool = false) -> QueryPredicate {
        .string(.endsWith, self, suffix, caseInsensitive: caseInsensitive)
    }
    /// `self` contains `part`.
    public func contains(_ part: QueryExpression, caseInsensitive: Bool = false) -> QueryPredicate {
        .string(.contains, self, part, caseInsensitive: caseInsensitive)
    }
    /// `self` is one of `values`.
    public func isIn(_ values: [Value]) -> QueryPredicate { .in(self, values) }
    /// `low <= self <= high`.
    public func isBetween(_ low: Value, and high: Value) -> QueryPredicate { .between(self, low, high) }
    /// `self` is null.
    public var isNull: QueryPredicate { .isNull(self) }
    /// `self` is not null.
    public var isNotNull: QueryPredicate { .isNotNull(self) }
    /// Case-insensitive equality (the `==[c]` of NSPredicate).
    public func equalsIgnoringCase(_ other: QueryExpression) -> QueryPredicate {
        .compare(self, .equal, other, caseInsensitive: true)
    }

    /// `lhs == rhs`
    public static func == (lhs: QueryExpression, rhs: QueryExpression) -> QueryPredicate { .compare(lhs, .equal, rhs, caseInsensitive: false) }
    /// `lhs != rhs`
    public static func != (lhs: QueryExpression, rhs: QueryExpression) -> QueryPredicate { .compare(lhs, .notEqual, rhs, caseInsensitive: false) }
    /// `lhs < rhs`
    public static func < (lhs: QueryExpression, rhs: QueryExpression) -> QueryPredicate { .compare(lhs, .less, rhs, caseInsensitive: false) }
    /// `lhs <= rhs`
    public static func <= (lhs: QueryExpression, rhs: QueryExpression) -> QueryPredicate { .compare(lhs, .lessOrEqual, rhs, caseInsensitive: false) }
    /// `lhs > rhs`
    public static func > (lhs: QueryExpression, rhs: QueryExpression) -> QueryPredicate { .compare(lhs, .greater, rhs, caseInsensitive: false) }
    /// `lhs >= rhs`
    public static func >= (lhs: QueryExpression, rhs: QueryExpression) -> QueryPredicate { .compare(lhs, .greaterOrEqual, rhs, caseInsensitive: false) }
    /// `lhs + rhs`
    public static func + (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression { .arithmetic(.add, lhs, rhs) }
    /// `lhs - rhs`
    public static func - (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression { .arithmetic(.subtract, lhs, rhs) }
    /// `lhs * rhs`
    public static func * (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression { .arithmetic(.multiply, lhs, rhs) }
    /// `lhs / rhs`
    public static func / (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression { .arithmetic(.divide, lhs, rhs) }
    /// `lhs mod rhs`
    public static func % (lhs: QueryExpression, rhs: QueryExpression) -> QueryExpression { .arithmetic(.modulo, lhs, rhs) }
}

extension QueryExpression {
    /// Wraps a value as a literal.
    public static func value(_ v: Value) -> QueryExpression { .literal(v) }
}

/// A Swift value usable directly as a literal in a predicate, on the right of a comparison or in
/// ``QueryExpression/isIn(_:)-([T])`` and ``QueryExpression/isBetween(_:and:)-(T,_)``:
///
/// ```swift
/// Query("TodoItem", where: Field("updatedAt") >= lastSync && Field("complete") == done && Field("priority") > minimum)
/// ```
///
/// `String`, `Int`, `Int64`, `Double`, `Bool` and `Date` conform. An enum whose raw value conforms can
/// conform with an empty extension (`extension Priority: QueryValueConvertible {}`); it is compared as its
/// raw value, which is how ``ItemEncoder`` stores it.
public protocol QueryValueConvertible: Sendable {
    /// The value as a query literal.
    var queryValue: Value { get }
}

extension QueryValueConvertible where Self: RawRepresentable, RawValue: QueryValueConvertible {
    /// The raw value as a query literal.
    public var queryValue: Value { rawValue.queryValue }
}

extension String: QueryValueConvertible {
    /// ``Value/string(_:)``.
    public var queryValue: Value { .string(self) }
}
extension Int: QueryValueConvertible {
    /// ``Value/int(_:)``.
    public var queryValue: Value { .int(Int64(self)) }
}
extension Int64: QueryValueConvertible {
    /// ``Value/int(_:)``.
    public var queryValue: Value { .int(self) }
}
extension Double: QueryValueConvertible {
    /// ``Value/double(_:)``.
    public var queryValue: Value { .double(self) }
}
extension Bool: QueryValueConvertible {
    /// ``Value/bool(_:)``.
    public var queryValue: Value { .bool(self) }
}
extension Date: QueryValueConvertible {
    /// ``Value/date(_:)``.
    public var queryValue: Value { .date(self) }
}

extension QueryExpression {
    /// `lhs == rhs` with a Swift value.
    public static func == <T: QueryValueConvertible>(lhs: QueryExpression, rhs: T) -> QueryPredicate {
        .compare(lhs, .equal, .literal(rhs.queryValue), caseInsensitive: false)
    }
    /// `lhs != rhs` with a Swift value.
    public static func != <T: QueryValueConvertible>(lhs: QueryExpression, rhs: T) -> QueryPredicate {
        .compare(lhs, .notEqual, .literal(rhs.queryValue), caseInsensitive: false)
    }
    /// `lhs < rhs` with a Swift value.
    public static func < <T: QueryValueConvertible>(lhs: QueryExpression, rhs: T) -> QueryPredicate {
        .compare(lhs, .less, .literal(rhs.queryValue), caseInsensitive: false)
    }
    /// `lhs <= rhs` with a Swift value.
    public static func <= <T: QueryValueConvertible>(lhs: QueryExpression, rhs: T) -> QueryPredicate {
        .compare(lhs, .lessOrEqual, .literal(rhs.queryValue), caseInsensitive: false)
    }
    /// `lhs > rhs` with a Swift value.
    public static func > <T: QueryValueConvertible>(lhs: QueryExpression, rhs: T) -> QueryPredicate {
        .compare(lhs, .greater, .literal(rhs.queryValue), caseInsensitive: false)
    }
    /// `lhs >= rhs` with a Swift value.
    public static func >= <T: QueryValueConvertible>(lhs: QueryExpression, rhs: T) -> QueryPredicate {
        .compare(lhs, .greaterOrEqual, .literal(rhs.queryValue), caseInsensitive: false)
    }
    /// `self` is one of `values` (Swift values).
    public func isIn<T: QueryValueConvertible>(_ values: [T]) -> QueryPredicate { .in(self, values.map(\.queryValue)) }
    /// `low <= self <= high` (Swift values).
    public func isBetween<T: QueryValueConvertible>(_ low: T, and high: T) -> QueryPredicate {
        .between(self, low.queryValue, high.queryValue)
    }
}

extension QueryPredicate {
    /// A boolean column used as a condition (OData's bare `$filter=done`): `Field(name) == true`.
    public static func isTrue(_ field: String) -> QueryPredicate {
        .compare(.field(field), .equal, .literal(.bool(true)), caseInsensitive: false)
    }

    /// Both.
    public static func && (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate {
        if case .and(let l) = lhs { return .and(l + [rhs]) }
        return .and([lhs, rhs])
    }
    /// Either.
    public static func || (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate {
        if case .or(let l) = lhs { return .or(l + [rhs]) }
        return .or([lhs, rhs])
    }
    /// Negation.
    public static prefix func ! (p: QueryPredicate) -> QueryPredicate { .not(p) }
}
