import Foundation
import LocalStore

// The OData v3 functions: every function's value on seeded random rows, checked row by row against the
// reference.

extension ConformanceSuite {
    /// Every OData function on seeded random rows (strings with non-ASCII letters, NUL and spaces;
    /// dates before and after 1970 with fractions of a second; doubles with halves, negatives and huge
    /// magnitudes; random integer arguments), checked value by value: for each function one query
    /// whose terms pin the reference's value of that function for each row. Every row must match it,
    /// and its negation must match none.
    public static func queryFunctionsOnRandomRows(_ factory: StoreFactory) throws {
        let schema = TableSchema("Fn", ["s": .string, "t": .string, "i": .integer, "x": .double, "at": .date])
        var g = SeededGenerator(seed: 20_261_123)
        func below(_ n: Int) -> Int { Int(g.next() % UInt64(n)) }
        let alphabet: [String] = ["a", "b", "A", " ", "é", "ß", "日", "😀", "\u{0}", "o", "x", "👨‍👩‍👧"]
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
