import Foundation
import LocalStore
import Testing

@testable import LocalStoreSQLite

/// A small deterministic generator (SplitMix64).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random queries over rows full of edge cases, answered by SQLite and by the core's reference evaluator
/// (`ResolvedQuery.apply`), which must agree exactly: same rows, same order, same count, same errors.
@Suite("SQL compiler agrees with the core evaluator")
struct DifferentialTests {
    static let schema = TableSchema(
        name: "Fuzz",
        columns: [
            Column("id", .string), Column("i", .integer, indexed: true), Column("j", .integer), Column("d", .double, indexed: true),
            Column("e", .double), Column("s", .string, indexed: true), Column("t", .string), Column("b", .boolean),
            Column("dt", .date), Column("bin", .binary), Column("js", .json),
        ])

    static let ints: [Int64] = [
        0, 1, -1, 2, 3, 7, -7, 100, .max, .min, .max - 1, .min + 1, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1, 3_037_000_500,
        -3_037_000_500, 4_611_686_018_427_387_904,
    ]
    static let doubles: [Double] = [
        0, -0.0, 1.5, -2.5, 2, 7, 0.1, 9_007_199_254_740_992, 9_007_199_254_740_994, 9.3e18, -9.3e18, 9.223372036854775807e18,
        1e300, -1e300, .leastNonzeroMagnitude, 3.0000000000000004,
    ]
    static let strings: [String] = [
        "", "a", "A", "ab", "aB", "Ab", "b", "B", "\u{0}", "a\u{0}b", "a\u{0}c", "A\u{0}B", "é", "É", "ß", "🙂 smile", "Z", "zeta",
        "%", "_", "a%b", "a_b", "abc", "ABC", "xyzabc", "ab\u{0}", "[", "`", "@",
    ]
    static let blobs: [[UInt8]] = [[], [0], [0, 1], [1], [255], [0, 0]]
    static let dates: [Double] = [0, -1, 1.25, 1e9, -1e9, 700_000_000.5, -978_307_200.25, -5e10 - 0.5, 4.7e12]

    static func rows(_ g: inout SplitMix) -> [Item] {
        func pick<T>(_ a: [T]) -> T { a[Int.random(in: 0..<a.count, using: &g)] }
        func maybe(_ v: Value) -> Value { Int.random(in: 0..<5, using: &g) == 0 ? .null : v }
        var used = Set<String>()
        var items: [Item] = []
        let idStems = ["row", "ROW", "Row", "x", "X", "é", "É", "a\u{0}b", "a\u{0}c", "_", "z"]
        while items.count < 70 {
            let id = pick(idStems) + (Bool.random(using: &g) ? String(Int.random(in: 0..<40, using: &g)) : "")
            guard used.insert(Collation.noCaseKey(id)).inserted else { continue }
            items.append([
                "id": .string(id),
                "i": maybe(.int(pick(ints))), "j": maybe(.int(pick(ints))),
                "d": maybe(.double(pick(doubles))), "e": maybe(.double(pick(doubles))),
                "s": maybe(.string(pick(strings))), "t": maybe(.string(pick(strings))),
                "b": maybe(.bool(Bool.random(using: &g))),
                "dt": maybe(.date(Date(timeIntervalSinceReferenceDate: pick(dates)))),
                "bin": maybe(.binary(pick(blobs))),
                "js": maybe(.json(["k": .int(Int64(items.count))])),
            ])
        }
        return items
    }

    // MARK: Random queries

    struct Generator {
        var g: SplitMix

        mutating func pick<T>(_ a: [T]) -> T { a[Int.random(in: 0..<a.count, using: &g)] }
        mutating func chance(_ n: Int) -> Bool { Int.random(in: 0..<n, using: &g) == 0 }

        enum Family: CaseIterable { case numeric, string, boolean, date, binary }

        mutating func literal(_ f: Family) -> Value {
            switch f {
            case .numeric: return chance(2) ? .int(pick(DifferentialTests.ints)) : .double(pick(DifferentialTests.doubles))
            case .string: return .string(pick(DifferentialTests.strings))
            case .boolean: return .bool(chance(2))
            case .date: return .date(Date(timeIntervalSinceReferenceDate: pick(DifferentialTests.dates)))
            case .binary: return .binary(pick(DifferentialTests.blobs))
            }
        }

        mutating func expression(_ f: Family, depth: Int) -> QueryExpression {
            if chance(3) { return .literal(literal(f)) }
            switch f {
            case .numeric:
                if depth < 3 && chance(3) {
                    let op: QueryExpression.ArithmeticOperator = pick([.add, .subtract, .multiply, .divide, .modulo])
                    return .arithmetic(op, expression(.numeric, depth: depth + 1), expression(.numeric, depth: depth + 1))
                }
                if depth < 3 && chance(8) { return .length(expression(.string, depth: depth + 1)) }
                if depth < 3 && chance(6) { return .function(pick([.round, .floor, .ceiling]), [expression(.numeric, depth: depth + 1)]) }
                if depth < 3 && chance(10) { return .function(pick([.year, .month, .day, .hour, .minute, .second]), [expression(.date, depth: depth + 1)]) }
                if depth < 3 && chance(10) { return .function(.indexOf, [expression(.string, depth: depth + 1), expression(.string, depth: depth + 1)]) }
                return .field(pick(["i", "j", "d", "e", "I", "D"]))
            case .string:
                if depth < 3 && chance(6) { return .toLower(expression(.string, depth: depth + 1)) }
                if depth < 3 && chance(6) { return .toUpper(expression(.string, depth: depth + 1)) }
                if depth < 3 && chance(10) { return .function(.trim, [expression(.string, depth: depth + 1)]) }
                if depth < 3 && chance(10) {
                    return .function(.concat, [expression(.string, depth: depth + 1), expression(.string, depth: depth + 1)])
                }
                if depth < 3 && chance(10) {
                    let args = [expression(.string, depth: depth + 1), expression(.string, depth: depth + 1), expression(.string, depth: depth + 1)]
                    return .function(.replace, args)
                }
                if depth < 3 && chance(8) {
                    // Integer positions: columns, literals, or integer arithmetic that may overflow.
                    func position() -> QueryExpression {
                        chance(2) ? .literal(.int(pick([-2, -1, 0, 1, 2, 3, 100, .max, .min]))) : (chance(2) ? .field("i") : .field("i") * .field("j"))
                    }
                    let args = chance(2) ? [expression(.string, depth: depth + 1), position()] : [expression(.string, depth: depth + 1), position(), position()]
                    return .function(.substring, args)
                }
                return .field(pick(["s", "t", "id", "S", "ID"]))
            case .boolean: return .field("b")
            case .date: return .field("dt")
            case .binary: return .field("bin")
            }
        }

        mutating func predicate(depth: Int) -> QueryPredicate {
            let roll = Int.random(in: 0..<(depth < 3 ? 14 : 10), using: &g)
            let f: Family = chance(3) ? pick(Family.allCases) : pick([.numeric, .numeric, .string])
            switch roll {
            case 0, 1, 2, 3:
                let op: QueryPredicate.ComparisonOperator = pick(QueryPredicate.ComparisonOperator.allCases)
                let ci = f == .string && chance(3)
                let rhs: QueryExpression = chance(12) ? .literal(.null) : expression(f, depth: 1)
                return .compare(expression(f, depth: 1), op, rhs, caseInsensitive: ci)
            case 4:
                return chance(2) ? .isNull(expression(f, depth: 1)) : .isNotNull(.field(pick(["i", "s", "js", "bin", "b"])))
            case 5:
                var values: [Value] = (0..<Int.random(in: 0..<6, using: &g)).map { _ in literal(f) }
                if chance(4) { values.append(.null) }
                return .in(expression(f, depth: 1), values)
            case 6:
                return .between(expression(f, depth: 1), chance(10) ? .null : literal(f), literal(f))
            case 7, 8:
                let op: QueryPredicate.StringOperator = pick(QueryPredicate.StringOperator.allCases)
                let pattern: QueryExpression = chance(3) ? expression(.string, depth: 1) : .literal(.string(pick(["", "a", "A", "b", "\u{0}", "a\u{0}", "%", "_", "bc", "é", "abc"])))
                return .string(op, expression(.string, depth: 1), pattern, caseInsensitive: chance(2))
            case 9:
                return pick([.true, .false])
            case 10:
                return .not(predicate(depth: depth + 1))
            case 11, 12:
                return .and((0..<Int.random(in: 0..<4, using: &g)).map { _ in predicate(depth: depth + 1) })
            default:
                return .or((0..<Int.random(in: 0..<4, using: &g)).map { _ in predicate(depth: depth + 1) })
            }
        }

        mutating func query() -> Query {
            var q = Query("Fuzz", where: chance(8) ? nil : predicate(depth: 0))
            for _ in 0..<Int.random(in: 0..<3, using: &g) {
                q.sort.append(SortKey(pick(["i", "j", "d", "e", "s", "t", "b", "dt", "bin", "id"]), chance(2) ? .ascending : .descending))
            }
            if chance(3) { q.skip = Int.random(in: 0..<10, using: &g) }
            if chance(2) { q.top = Int.random(in: 0..<15, using: &g) }
            if chance(4) { q.select = [pick(["i", "s", "t"]), pick(["d", "b"])] }
            q.includeTotalCount = chance(2)
            return q
        }
    }

    /// The reference answer, or the error the store must throw.
    static func reference(_ query: Query, _ rows: [[Value]]) -> Result<ReadResult, LocalStoreError> {
        do {
            return .success(try ResolvedQuery(query, schema: schema).apply(to: rows))
        } catch let e as LocalStoreError {
            return .failure(e)
        } catch {
            return .failure(LocalStoreError(.internal, "\(error)"))
        }
    }

    @Test("random queries", arguments: Library.available)
    func randomQueries(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("fuzz.sqlite"))
        defer { try? store.close() }
        try store.defineTable(Self.schema)
        var g = SplitMix(state: 20_261_122)
        let items = Self.rows(&g)
        try store.upsert(items, into: "Fuzz")
        // Everything round-trips.
        let stored = try store.read(Query("Fuzz")).items
        #expect(Set(stored) == Set(items.map { i in Item(i.values.mapValues { $0 }) }))
        let rows = stored.map { item in Self.schema.columns.map { item[$0.name] ?? .null } }

        var gen = Generator(g: SplitMix(state: 7))
        var checked = 0
        var mismatches = 0
        for n in 0..<1500 {
            let query = gen.query()
            let expected = Self.reference(query, rows)
            let actual: Result<ReadResult, LocalStoreError>
            do { actual = .success(try store.read(query)) } catch let e as LocalStoreError { actual = .failure(e) }
            switch (expected, actual) {
            case (.success(let a), .success(let b)):
                checked += 1
                if a != b {
                    mismatches += 1
                    if mismatches <= 5 {
                        Issue.record("query \(n) \(query): expected \(a.items.map(\.stringId)) / \(a.totalCount as Any), got \(b.items.map(\.stringId)) / \(b.totalCount as Any)")
                    }
                }
            case (.failure(let a), .failure(let b)):
                #expect(a.code == b.code, "query \(n) \(query)")
            default:
                mismatches += 1
                if mismatches <= 5 { Issue.record("query \(n) \(query): expected \(expected), got \(actual)") }
            }
        }
        #expect(mismatches == 0)
        #expect(checked > 800, "too few valid queries were generated")
        #expect(store.engine.fallbackCount == 0, "some random queries were not run in SQL")
    }

    @Test("random delete(matching:)", arguments: Library.available)
    func randomDeletes(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("fuzz.sqlite"))
        defer { try? store.close() }
        try store.defineTable(Self.schema)
        var g = SplitMix(state: 99)
        try store.upsert(Self.rows(&g), into: "Fuzz")
        let rows = try store.read(Query("Fuzz")).items.map { item in Self.schema.columns.map { item[$0.name] ?? .null } }
        var gen = Generator(g: SplitMix(state: 1234))
        struct Undo: Error {}
        var deleted = 0
        for n in 0..<200 {
            var query = gen.query()
            query.select = nil
            guard case .success(let selected) = Self.reference(query, rows) else { continue }
            let resolved = try ResolvedQuery(query, schema: Self.schema)
            let gone = Set(resolved.select(rows).rows.map { Collation.noCaseKey($0[0].stringValue ?? "") })
            deleted += gone.count
            do {
                try store.write { tx in
                    try tx.delete(matching: query)
                    let left = try tx.read(Query("Fuzz")).items.compactMap(\.stringId)
                    let expected = rows.compactMap { $0[0].stringValue }.filter { !gone.contains(Collation.noCaseKey($0)) }
                    #expect(Set(left) == Set(expected), "query \(n) \(query) (\(selected.items.count) selected)")
                    throw Undo()
                }
            } catch is Undo {}
        }
        #expect(deleted > 100)
        #expect(try store.count("Fuzz") == rows.count)
    }
}
