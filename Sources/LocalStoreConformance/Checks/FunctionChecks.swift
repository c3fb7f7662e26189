import Foundation
import LocalStore

// The OData v3 functions: the examples clients send (parsed from OData text, hand-written answers) and
// every function's value on seeded random rows, checked row by row against the reference.

extension ConformanceSuite {
    /// The `$filter` examples of the .NET/Android/JS SDKs, parsed with `OData.parseQuery`, return the
    /// hand-computed rows (and the reference agrees with each answer).
    public static func odataFunctionExamples(_ factory: StoreFactory) throws {
        let schema = TableSchema(
            "Examples",
            ["col1": .string, "col2": .string, "col4": .date, "val": .double, "expected": .double, "col6": .string, "done": .boolean])
        func utc(_ text: String) throws -> Value {
            guard let d = DeltaTokenFormat.date(from: text) else { throw ConformanceFailure("suite bug: bad date \(text)") }
            return .date(d)
        }
        let guid = "d9c8bcf9-9c85-42e6-967b-c686d92f32cb"
        let rows: [Reference.Row] = [
            ["id": "a", "col1": "jumped", "col2": "2", "col4": try utc("1979-12-31T23:59:59.999Z"), "val": 1.5, "expected": 2.0,
             "col6": .string(guid), "done": true],
            ["id": "b", "col1": "brown", "col2": "1", "col4": try utc("1980-01-01T00:00:00.000Z"), "val": -1.5, "expected": -2.0,
             "col6": "6f1a3c2e-0000-4000-8000-000000000001", "done": false],
            ["id": "c", "col1": "fox", "col2": nil, "col4": try utc("1960-01-15T08:30:00.000Z"), "val": 1.99, "expected": 1.0,
             "col6": nil, "done": nil],
            ["id": "d", "col1": "quick", "col2": "1", "col4": try utc("2024-02-29T12:00:00.000Z"), "val": -0.5, "expected": -1.0,
             "col6": .string(guid.uppercased()), "done": true],
            ["id": "e", "col1": "  fox ", "col2": "x", "col4": nil, "val": 2.5, "expected": 3.0, "col6": nil, "done": false],
            ["id": "f", "col1": nil, "col2": "1", "col4": .date(Date(timeIntervalSince1970: -0.5)), "val": nil, "expected": 0.0,
             "col6": nil, "done": nil],
            ["id": "g", "col1": "jump", "col2": nil, "col4": nil, "val": 0.499_999_999_999_999_94, "expected": 0.0, "col6": nil,
             "done": nil],
            ["id": "h", "col1": "umpire", "col2": nil, "col4": nil, "val": -1.2, "expected": -1.0, "col6": nil, "done": nil],
        ]
        let examples: [(String, [String])] = [
            ("indexof(col1,'ump') eq 1", ["a", "g"]),
            ("indexof(col1,'ump') eq 0", ["h"]),
            ("indexof(col1,'zz') eq -1", ["a", "b", "c", "d", "e", "g", "h"]),
            ("concat(concat(col1,'ies'),col2) eq 'brownies1'", ["b"]),
            ("replace(col1,'j','p') eq 'pumped'", ["a"]),
            ("substring(col1,1) eq 'ox'", ["c"]),
            ("substring(col1,1,3) eq 'uic'", ["d"]),
            ("trim(col1) eq 'fox'", ["c", "e"]),
            ("year(col4) ge 1980", ["b", "d"]),
            ("month(col4) eq 1", ["b", "c"]),
            ("day(col4) eq 31", ["a", "f"]),
            ("hour(col4) eq 23 and minute(col4) eq 59 and second(col4) eq 59", ["a", "f"]),
            ("year(col4) eq 1969", ["f"]),
            ("month(col4) eq 2 and day(col4) eq 29", ["d"]),
            ("round(val) eq expected", ["a", "b", "d", "e", "g", "h"]),
            ("floor(val) eq 1", ["a", "c"]),
            ("ceiling(val) eq -1", ["b", "h"]),
            ("col6 eq guid'\(guid)'", ["a"]),
            ("col6 eq guid'\(guid.uppercased())'", ["a"]),
            ("tolower(col6) eq guid'\(guid)'", ["a", "d"]),
            ("done", ["a", "d"]),
            ("not done", ["b", "c", "e", "f", "g", "h"]),
            ("done eq false", ["b", "e"]),
            ("length(col1) eq 4", ["g"]),
            ("length(col1) add 1 eq 5", ["g"]),
            ("toupper(col1) eq 'FOX'", ["c"]),
            ("startswith(col1,'ju')", ["a", "g"]),
            ("endswith(col1,'ed')", ["a"]),
            ("substringof('ox',col1)", ["c", "e"]),
            ("substringof('ox',col1) eq true", ["c", "e"]),
            ("startswith(col1,'ju') eq false", ["b", "c", "d", "e", "f", "h"]),
            ("not startswith(col1,'ju')", ["b", "c", "d", "e", "f", "h"]),
            ("(val mul 2) mod 2 eq 1", ["a", "c", "e"]),
            ("floor(val div 2) eq -1", ["b", "d", "h"]),
        ]
        let table = Reference.Table(schema: schema, rows: rows)
        let parsed = try examples.map { (text, expected) -> (String, Query, [String]) in
            (text, try OData.parseQuery("$filter=\(text)", table: "Examples"), expected)
        }
        for (text, query, expected) in parsed {
            try expectSameIds(
                PredicateData.rowIds(try Reference.select(table, where: query.predicate, sort: [])), expected,
                "suite bug: the reference disagrees with the hand-written answer for \(text)")
        }
        try withStore(factory) { store in
            try store.defineTable(schema)
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 11), into: "Examples")
            for (text, query, expected) in parsed {
                try expectSameIds(try readIds(store, query), expected, "$filter=\(text)")
                try expectEqual(try store.read(query.top(0).includingTotalCount()).totalCount, expected.count, "count of $filter=\(text)")
            }
        }
    }

    /// Every OData function on seeded random rows (strings with non-ASCII letters, NUL and spaces;
    /// dates before and after 1970 with fractions of a second; doubles with halves, negatives and huge
    /// magnitudes; random integer arguments; numbers read as text by the string functions), checked
    /// value by value: for each function one query
    /// whose terms pin the reference's value of that function for each row. Every row must match it,
    /// and its negation must match none.
    public static func queryFunctionsOnRandomRows(_ factory: StoreFactory) throws {
        let schema = TableSchema("Fn", ["s": .string, "t": .string, "i": .integer, "x": .double, "at": .date])
        var g = SeededGenerator(seed: 20_261_123)
        func below(_ n: Int) -> Int { Int(g.next() % UInt64(n)) }
        let alphabet: [String] = ["a", "b", "A", " ", "é", "ß", "日", "😀", "\u{0}", "o", "x", "👨‍👩‍👧", "\u{301}", "\t"]
        func randomString() -> String { (0..<below(9)).map { _ in alphabet[below(alphabet.count)] }.joined() }
        func randomDouble() -> Double {
            switch below(6) {
            case 0: return Double(below(41) - 20) / 2  // halves, negatives, zero
            case 1: return Double(below(2_000_001) - 1_000_000) / 1000
            case 2: return (below(2) == 0 ? 1 : -1) * (Double(below(1000)) + 0.5)
            case 3: return Double(bitPattern: 0x3FDF_FFFF_FFFF_FFFF) * (below(2) == 0 ? 1 : -1)  // 0.49999999999999994
            case 4: return (below(2) == 0 ? 1 : -1) * Double(below(1 << 20)) * 1e10  // whole, beyond 2^52
            default: return Double(below(1_000_000)) / 7 - 70_000
            }
        }
        func randomDate() -> Date {
            switch below(4) {
            case 0: return Date(timeIntervalSince1970: Double(below(8_000_000_001)) - 4_000_000_000 + Double(below(1000)) / 1000)
            case 1: return Date(timeIntervalSince1970: Double(below(200_001) - 100_000) * 86_400 - Double(below(3)) * 0.25)
            case 2: return Date(timeIntervalSince1970: -Double(below(10_000)) / 1000)  // just before 1970
            default: return Date(timeIntervalSinceReferenceDate: Double(below(1 << 30)) * 1e5 - 5e13)  // ±1.5 million years
            }
        }
        let rows: [Reference.Row] = (0..<100).map { n in
            let s = randomString()
            return [
                "id": .string("r\(n)"),
                "s": below(10) == 0 ? .null : .string(below(4) == 0 ? "  \(s) " : s),
                "t": below(10) == 0 ? .null : .string(alphabet[below(alphabet.count)] + (below(2) == 0 ? alphabet[below(alphabet.count)] : "")),
                "i": below(10) == 0 ? .null : .int(below(8) == 0 ? [Int64.max, Int64.min, 1 << 40][below(3)] : Int64(below(21) - 10)),
                "x": below(10) == 0 ? .null : .double(randomDouble()),
                "at": below(10) == 0 ? .null : .date(randomDate()),
            ]
        }
        let s = Field("s")
        let t = Field("t")
        let i = Field("i")
        let x = Field("x")
        let at = Field("at")
        // A random string argument: often a piece of the row's own string, so that searches hit.
        func piece(of row: Reference.Row) -> QueryExpression {
            guard below(3) != 0, case .string(let text)? = row["s"] else { return lit(randomString()) }
            let scalars = Array(text.unicodeScalars)
            let from = below(scalars.count + 1)
            let to = from + below(scalars.count - from + 1)
            var out = ""
            out.unicodeScalars.append(contentsOf: scalars[from..<to])
            return lit(out)
        }
        func int(_ v: Int64) -> QueryExpression { .literal(.int(v)) }
        func randomInt() -> QueryExpression { int([-3, -1, 0, 1, 2, 3, 5, 9, 100, .max, .min][below(11)]) }
        let makers: [(String, (Reference.Row) -> QueryExpression)] = [
            ("indexof", { row in s.indexOf(piece(of: row)) }),
            ("indexof of a column", { _ in s.indexOf(t) }),
            ("concat", { row in s.concat(piece(of: row)) }),
            ("concat of columns", { _ in t.concat(s) }),
            ("replace", { row in s.replacing(piece(of: row), with: lit(randomString())) }),
            ("replace with a column", { _ in s.replacing(t, with: lit("_")) }),
            ("substring from", { _ in s.substring(from: randomInt()) }),
            ("substring from, length", { _ in s.substring(from: randomInt(), length: randomInt()) }),
            ("substring with column arguments", { _ in s.substring(from: i, length: i + 2) }),
            ("substring with overflowing arithmetic", { _ in s.substring(from: i * 2, length: i) }),
            ("trim", { _ in s.trimmed }),
            ("length", { _ in s.length }),
            ("tolower", { _ in s.lowercased }),
            ("toupper", { _ in s.uppercased }),
            ("year", { _ in at.year }),
            ("month", { _ in at.month }),
            ("day", { _ in at.day }),
            ("hour", { _ in at.hour }),
            ("minute", { _ in at.minute }),
            ("second", { _ in at.second }),
            ("round", { _ in x.rounded }),
            ("floor", { _ in x.floor }),
            ("ceiling", { _ in x.ceiling }),
            ("round of an integer", { _ in i.rounded }),
            ("floor of integer arithmetic", { _ in (i * 3).floor }),
            ("ceiling of a quotient", { _ in (x / 3).ceiling }),
            ("round of a sum", { _ in (x + i).rounded }),
            ("nested", { row in s.trimmed.substring(from: 1).concat(piece(of: row)).indexOf(lit("a")) }),
            // Numbers read as text (.NET's invariant ToString): doubles of every magnitude, integers
            // to Int64.min, integer arithmetic that overflowed into a double.
            ("concat of numbers", { _ in x.concat(i) }),
            ("concat of a string and a double", { _ in t.concat(x) }),
            ("length of a double's text", { _ in x.length }),
            ("indexof in a double's text", { _ in x.indexOf(lit(["E", ".", "-", "5"][below(4)])) }),
            ("substring of an integer's text", { _ in i.substring(from: int(1)) }),
            ("toupper of overflowing arithmetic", { _ in (i * i).uppercased }),
            ("replace in a double's text", { _ in x.replacing(lit("0"), with: lit("o")) }),
        ]
        let table = Reference.Table(schema: schema, rows: rows)
        try withStore(factory) { store in
            try store.defineTable(schema)
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 3), into: "Fn")
            for (label, make) in makers {
                var terms: [QueryPredicate] = []
                var distinct = Set<Value>()
                for row in rows {
                    let e = make(row)
                    let value = try Reference.evaluate(e, row, table)
                    distinct.insert(value)
                    let pin: QueryPredicate = value.isNull ? e.isNull : .compare(e, .equal, .literal(value), caseInsensitive: false)
                    terms.append(Field("id") == .literal(row["id"] ?? .null) && pin)
                }
                try expect(distinct.count > 2, "suite bug: \(label) gives too few distinct values to test anything")
                let all = try readIds(store, Query("Fn", where: .or(terms), sort: [SortKey("id")]))
                try expectSameIds(
                    all, PredicateData.rowIds(try Reference.select(table, where: nil, sort: [SortKey("id")])),
                    "\(label): every row must have the reference's value (a missing row has another)")
                try expectSameIds(try readIds(store, Query("Fn", where: .not(.or(terms)))), [], "\(label): NOT")
            }
        }
    }
}
