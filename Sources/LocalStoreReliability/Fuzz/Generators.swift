import Foundation
import LocalStore

/// Random rows and queries over the fuzz table, biased toward the edges of every rule in
/// docs/semantics.md (NOCASE ids, NUL bytes, -0.0, integer/double mixing, long keys, nulls).
public struct FuzzGenerator {
    public var rng: SplitMix

    public init(seed: UInt64) { rng = SplitMix(seed: seed) }

    public static let table = "F"
    public static let schema = TableSchema(
        name: table,
        columns: [
            Column("id", .string), Column("i", .integer, indexed: true), Column("i2", .integer), Column("d", .double, indexed: true),
            Column("s", .string, indexed: true), Column("s2", .string), Column("b", .boolean, indexed: true),
            Column("t", .date, indexed: true), Column("bin", .binary), Column("j", .json),
        ],
        // Compound indexes, so that the planners' compound walks (grouped, and taken as they come when
        // the index order is the query's) and index-only counts meet the same random queries.
        indexes: [TableIndex(("i", .ascending), ("t", .descending)), TableIndex(("b", .ascending), ("s", .ascending), ("d", .descending))])
    static let orderable = ["id", "i", "i2", "d", "s", "s2", "b", "t", "bin"]
    static let numeric = ["i", "i2", "d"]
    static let strings = ["id", "s", "s2"]

    // MARK: Values

    static let intEdges: [Int64] = [.min, .max, 0, 1, -1, 2, 3, 7, -7, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1, 1 << 62, Int64.max - 1]
    static let doubleEdges: [Double] = [
        0, -0.0, 0.5, 1, -1, 2, 3, 7, -7.5, 1e300, -1e300, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 9_007_199_254_740_992, 9_007_199_254_740_994, 9.223372036854775807e18,
        -9.223372036854775808e18, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 0.1, 1.0 / 3,
    ]
    static let pieces = [
        "", "a", "A", "b", "B", "ab", "aB", "Ab", "z", "Z", "é", "É", "e\u{301}", "\u{0}", "😀", " ", "%", "_", "'", "\"", "ß", "ı",
        "\u{7F}", "~", "0", "9", "[c]", "\u{202E}", "ab\u{0}c",
    ]

    public mutating func int() -> Int64 {
        switch rng.below(4) {
        case 0: return rng.pick(Self.intEdges)
        case 1: return Int64(bitPattern: rng.next()) >> Int64(rng.below(64))
        default: return Int64(rng.below(21)) - 10
        }
    }

    public mutating func double() -> Double {
        switch rng.below(4) {
        case 0: return rng.pick(Self.doubleEdges)
        case 1:
            let d = Double(bitPattern: rng.next())
            return d.isFinite ? d : 1.25
        default: return Double(rng.below(41) - 20) / 2
        }
    }

    public mutating func string() -> String {
        if rng.oneIn(40) { return String(repeating: rng.pick(["a", "B", "é"]), count: 490 + rng.below(40)) + rng.pick(["", "x", "Y"]) }
        return (0..<rng.below(4)).map { _ in rng.pick(Self.pieces) }.joined()
    }

    public mutating func date() -> Date {
        switch rng.below(3) {
        case 0:
            // Ordinary instants, and the edges: −0, beyond the years 0000–9999, beyond date parts (±9·10^18 s).
            return Date(
                timeIntervalSinceReferenceDate: rng.pick([
                    0, -1, 1, 0.001, 1e9, -1e9, 1e9 + 0.0005, 86_400, -0.0, 3e11, -7e10, 1e15, -1e15, 8.9e18, -9.1e18, 1e300,
                    -.greatestFiniteMagnitude,
                ]))
        case 1: return Date(timeIntervalSinceReferenceDate: Double(rng.below(20)) * 1000)
        default: return Date(timeIntervalSinceReferenceDate: Double(Int64(bitPattern: rng.next()) % 4_000_000_000_000) / 1000)
        }
    }

    public mutating func binary() -> [UInt8] { (0..<rng.below(5)).map { _ in rng.pick([0, 1, 0x7F, 0x80, 0xFF, 0x61]) } }

    public mutating func json(depth: Int = 0) -> JSON {
        switch rng.below(depth > 2 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(rng.oneIn(2))
        case 2: return .int(int())
        case 3: return .double(double())
        case 4: return .string(string())
        case 5: return .array((0..<rng.below(3)).map { _ in json(depth: depth + 1) })
        default:
            var o: [String: JSON] = [:]
            for _ in 0..<rng.below(3) { o[rng.pick(["k", "K", "a", "", "é"])] = json(depth: depth + 1) }
            return .object(o)
        }
    }

    /// A value for `column` (null one time in eight, except for `id`).
    public mutating func value(_ column: String) -> Value {
        if column != "id" && rng.oneIn(8) { return .null }
        switch column {
        case "i", "i2": return .int(int())
        case "d": return .double(double())
        case "s", "s2": return .string(string())
        case "b": return .bool(rng.oneIn(2))
        case "t": return .date(date())
        case "bin": return .binary(binary())
        case "j": return .json(json())
        default: return .string(string())
        }
    }

    /// The id of row `n`: unique under NOCASE thanks to the number, in a random case, sometimes longer
    /// than LMDB's 480-byte key prefix.
    public mutating func id(_ n: Int) -> String {
        let base = "r\(n)" + (rng.oneIn(30) ? String(repeating: "x", count: 500) : "") + rng.pick(["", "a", "b", "é", "_z"])
        return respell(base)
    }

    /// The same id in another ASCII case.
    public mutating func respell(_ id: String) -> String {
        String(decoding: id.utf8.map { b in (0x61...0x7A).contains(b) || (0x41...0x5A).contains(b) ? (rng.oneIn(2) ? b ^ 0x20 : b) : b }, as: UTF8.self)
    }

    /// A complete row (every column present, nulls explicit).
    public mutating func row(_ n: Int) -> [String: Value] {
        var row: [String: Value] = [:]
        for c in Self.schema.columns { row[c.name] = c.name == "id" ? .string(id(n)) : value(c.name) }
        return row
    }

    // MARK: Queries

    /// A literal for `column`: half the time a value some row has.
    mutating func literal(_ column: String, rows: [[String: Value]]) -> Value {
        if !rows.isEmpty && rng.oneIn(2), let v = rng.pick(rows)[column], !v.isNull {
            if case .string(let s) = v, rng.oneIn(3) { return .string(respell(s)) }
            return v
        }
        if column == "d" && rng.oneIn(3) { return .int(int()) }  // an integer meeting a double column
        if column == "i" && rng.oneIn(4) { return .double(double()) }
        return value(column == "id" ? "s" : column)
    }

    mutating func numericExpression(rows: [[String: Value]], depth: Int) -> QueryExpression {
        if depth > 2 || rng.oneIn(2) {
            return rng.oneIn(3) ? .literal(rng.oneIn(2) ? .int(int()) : .double(double())) : .field(rng.pick(Self.numeric))
        }
        switch rng.below(8) {
        case 0:
            // OData rounding of a numeric expression.
            return .function(rng.pick([.round, .floor, .ceiling]), [numericExpression(rows: rows, depth: depth + 1)])
        case 1:
            // An integer from a string or a date.
            if rng.oneIn(2) { return .function(rng.pick([.year, .month, .day, .hour, .minute, .second]), [.field("t")]) }
            return .function(.indexOf, [stringExpression(), .literal(.string(string()))])
        default:
            let op = rng.pick([QueryExpression.ArithmeticOperator.add, .subtract, .multiply, .divide, .modulo])
            return .arithmetic(op, numericExpression(rows: rows, depth: depth + 1), numericExpression(rows: rows, depth: depth + 1))
        }
    }

    /// A number or boolean the string functions read as text (docs/semantics.md): a column, an edge
    /// literal, or integer arithmetic that may overflow into a double.
    mutating func textualNumber() -> QueryExpression {
        switch rng.below(5) {
        case 0: return .field(rng.pick(Self.numeric))
        case 1: return .field("b")
        case 2: return .literal(rng.oneIn(2) ? .int(int()) : .double(double()))
        case 3: return .literal(.bool(rng.oneIn(2)))
        default: return .arithmetic(.multiply, .field("i"), .field("i2"))
        }
    }

    /// A midnight UTC of the years 0000 to 9999 (an `Edm.Date` day): half the time the day of a row's date.
    mutating func day(rows: [[String: Value]]) -> Date {
        if !rows.isEmpty, rng.oneIn(2), case .date(let d)? = rng.pick(rows)["t"], d.timeIntervalSinceReferenceDate.isFinite,
            abs(d.timeIntervalSinceReferenceDate) < 6e10
        {
            let days = (d.timeIntervalSinceReferenceDate / 86_400).rounded(.down)
            return Date(timeIntervalSinceReferenceDate: days * 86_400)
        }
        return Date(timeIntervalSinceReferenceDate: Double(Int(rng.below(3_652_424)) - 730_851) * 86_400)
    }

    mutating func stringExpression() -> QueryExpression {
        let field = QueryExpression.field(rng.pick(Self.strings))
        switch rng.below(12) {
        case 0: return .toLower(field)
        case 1: return .toUpper(field)
        case 2: return .function(.trim, [field])
        case 3:
            let start = QueryExpression.literal(.int(Int64(rng.below(8)) - 2))
            return .function(.substring, rng.oneIn(2) ? [field, start] : [field, start, .literal(.int(Int64(rng.below(6)) - 1))])
        case 4: return .function(.concat, [field, .literal(.string(string()))])
        case 5: return .function(.replace, [field, .literal(.string(rng.pick(["a", "é", " ", ""]))), .literal(.string(string()))])
        // Numbers and booleans read as text.
        case 6: return .function(.concat, rng.oneIn(2) ? [field, textualNumber()] : [textualNumber(), textualNumber()])
        case 7: return rng.oneIn(2) ? .toLower(textualNumber()) : .function(.trim, [textualNumber()])
        case 8: return .function(.substring, [textualNumber(), .literal(.int(Int64(rng.below(6)) - 1))])
        default: return field
        }
    }

    static let ops = QueryPredicate.ComparisonOperator.allCases
    static let stringOps = QueryPredicate.StringOperator.allCases

    /// A valid leaf predicate.
    mutating func leaf(rows: [[String: Value]]) -> QueryPredicate {
        let column = rng.pick(Self.orderable + ["j"])
        switch rng.below(14) {
        case 0, 1, 2:
            if column == "j" { return .isNull(.field("j")) }
            let ci = Self.strings.contains(column) && rng.oneIn(4)
            // A date column against an Edm.Date day now and then.
            if column == "t" && rng.oneIn(4) { return .compare(.field("t"), rng.pick(Self.ops), .dateOnly(day(rows: rows)), caseInsensitive: false) }
            return .compare(.field(column), rng.pick(Self.ops), .literal(literal(column, rows: rows)), caseInsensitive: ci)
        case 3:
            // Two columns of compatible types.
            if Self.numeric.contains(column) {
                return .compare(.field(column), rng.pick(Self.ops), .field(rng.pick(Self.numeric)), caseInsensitive: false)
            }
            return .compare(.field(rng.pick(Self.strings)), rng.pick(Self.ops), .field(rng.pick(Self.strings)), caseInsensitive: rng.oneIn(3))
        case 4:
            return .compare(numericExpression(rows: rows, depth: 0), rng.pick(Self.ops), numericExpression(rows: rows, depth: 1), caseInsensitive: false)
        case 5:
            let rhs: QueryExpression = rng.oneIn(2) ? .literal(.string(string())) : stringExpression()
            return .compare(stringExpression(), rng.pick(Self.ops), rhs, caseInsensitive: rng.oneIn(4))
        case 6:
            return .compare(.length(.field(rng.pick(Self.strings))), rng.pick(Self.ops), .literal(.int(Int64(rng.below(6)))), caseInsensitive: false)
        case 7:
            return rng.oneIn(2) ? .isNull(.field(column)) : .isNotNull(.field(column))
        case 8:
            if column == "j" { return .isNotNull(.field("j")) }
            return .in(.field(column), (0..<rng.below(4)).map { _ in rng.oneIn(6) ? .null : literal(column, rows: rows) })
        case 9:
            if column == "j" { return .true }
            return .between(.field(column), literal(column, rows: rows), literal(column, rows: rows))
        case 10:
            let pattern: String = {
                if !rows.isEmpty, rng.oneIn(2), case .string(let s)? = rng.pick(rows)[rng.pick(["s", "s2", "id"])] {
                    let u = Array(s.utf8)
                    let a = rng.below(u.count + 1)
                    let b = a + rng.below(u.count - a + 1)
                    return String(decoding: u[a..<b], as: UTF8.self)
                }
                return string()
            }()
            return .string(rng.pick(Self.stringOps), stringExpression(), .literal(.string(pattern)), caseInsensitive: rng.oneIn(3))
        case 11:
            // Against a null literal: a null test, or nothing for ordering operators.
            return .compare(.field(column), rng.pick(Self.ops), .literal(.null), caseInsensitive: false)
        case 12:
            return rng.oneIn(2) ? .true : .false
        default:
            // The id, in another spelling.
            let id = rows.isEmpty ? "r1" : (rng.pick(rows)["id"]?.stringValue ?? "r1")
            return rng.oneIn(2)
                ? .compare(.field("id"), rng.pick(Self.ops), .literal(.string(respell(id))), caseInsensitive: false)
                : .in(.field("id"), [.string(respell(id)), .string(string())])
        }
    }

    public mutating func predicate(rows: [[String: Value]], depth: Int = 0) -> QueryPredicate {
        if depth >= 4 || rng.oneIn(3) { return leaf(rows: rows) }
        switch rng.below(4) {
        case 0: return .and((0..<rng.below(4)).map { _ in predicate(rows: rows, depth: depth + 1) })
        case 1: return .or((0..<rng.below(4)).map { _ in predicate(rows: rows, depth: depth + 1) })
        case 2: return .not(predicate(rows: rows, depth: depth + 1))
        default: return leaf(rows: rows)
        }
    }

    /// A predicate the core must refuse (or, rarely, an odd but valid one): wrong types, json
    /// comparisons, unknown columns, non-finite literals, `[c]` on non-strings, too deep.
    mutating func invalidPredicate(rows: [[String: Value]]) -> QueryPredicate {
        switch rng.below(8) {
        case 0: return .compare(.field("i"), .equal, .literal(.string("1")), caseInsensitive: false)
        case 1: return .compare(.field("j"), rng.pick(Self.ops), .literal(.json(json())), caseInsensitive: false)
        case 2: return .compare(.field("nope"), .equal, .literal(.int(1)), caseInsensitive: false)
        case 3:
            let d = rng.pick([Double.nan, .infinity, -.infinity])
            if rng.oneIn(2) { return .compare(.field("t"), rng.pick(Self.ops), .literal(.date(Date(timeIntervalSinceReferenceDate: d))), caseInsensitive: false) }
            return .compare(.field("d"), .less, .literal(.double(d)), caseInsensitive: false)
        case 4: return .compare(.field("i"), .equal, .literal(.int(1)), caseInsensitive: true)
        case 5: return .string(.contains, .field("i"), .literal(.string("1")), caseInsensitive: false)
        case 6:
            var p = leaf(rows: rows)
            for _ in 0..<(190 + rng.below(30)) { p = .not(p) }
            return p
        default: return .and([predicate(rows: rows), .compare(.field("b"), .greater, .literal(.date(date())), caseInsensitive: false)])
        }
    }

    public mutating func query(rows: [[String: Value]], invalid: Bool) -> Query {
        var q = Query(Self.table)
        q.predicate = invalid ? invalidPredicate(rows: rows) : (rng.oneIn(10) ? nil : predicate(rows: rows))
        q.sort = (0..<rng.below(4)).map { _ in SortKey(rng.pick(Self.orderable), rng.oneIn(2) ? .ascending : .descending) }
        if invalid && rng.oneIn(4) { q.sort.append(SortKey("j")) }
        q.skip = rng.oneIn(3) ? rng.below(6) : 0
        q.top = rng.oneIn(2) ? nil : rng.below(12)
        if invalid && rng.oneIn(6) { q.skip = -1 }
        q.includeTotalCount = rng.oneIn(2)
        return q
    }
}
