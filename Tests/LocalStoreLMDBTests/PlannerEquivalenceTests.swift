import Foundation
import LocalStore
import LocalStoreKV
@testable import LocalStoreLMDB
import Testing

/// Random data and random queries: every plan the LMDB planner picks must return exactly what the
/// shared evaluator (`ResolvedQuery.apply`) returns over all rows — same items, same order, same
/// count. The data is chosen to hit the edges of the key encodings: long strings and ids beyond the
/// 480-byte key prefix that share that prefix, NULs, case variants, -0.0, integers beyond 2^53
/// compared with doubles.
@Suite("LMDB planner equivalence")
struct PlannerEquivalenceTests {
    static let longPrefix = String(repeating: "x", count: KeyCodec.prefixLimit + 20)

    static let schema = TableSchema(
        name: "P",
        columns: [
            Column("id", .string), Column("i", .integer, indexed: true), Column("d", .double, indexed: true),
            Column("s", .string, indexed: true), Column("t", .date, indexed: true), Column("b", .boolean, indexed: true),
            Column("bin", .binary, indexed: true), Column("u", .string), Column("n", .integer), Column("j", .json, indexed: true),
        ])

    static let strings: [String] = [
        "", "a", "A", "ab", "aB", "b", "a\u{0}", "a\u{0}b", "a\u{0}c", "é", "É", "😀", "z",
        longPrefix + "a", longPrefix + "b", longPrefix + "A", longPrefix, String(repeating: "x", count: 100),
    ]
    static let ints: [Int64] = [0, 1, -1, 2, 3, 1 << 53, (1 << 53) + 1, (1 << 53) - 1, .max, .min, 1 << 60, (1 << 60) + 1, 1000]
    static let doubles: [Double] = [0, -0.0, 0.5, 1, 2, 3, -1.5, 9007199254740992, 1e300, -1e300, 1152921504606846976, 1000.25]
    static let dates: [Date] = [0, 1, -1, 1e9, -1e9, 0.5].map { Date(timeIntervalSinceReferenceDate: $0) } + [.distantFuture, .distantPast]
    static let binaries: [[UInt8]] = [[], [0], [0, 0], [1], [255], Array(repeating: 7, count: 500), Array(repeating: 7, count: 500) + [1]]

    static func pick<T>(_ xs: [T], _ rng: inout SeededRNG) -> T { xs[Int(rng.next() % UInt64(xs.count))] }

    static func maybe(_ v: Value, _ rng: inout SeededRNG) -> Value { rng.next() % 6 == 0 ? .null : v }

    static func makeRows(_ rng: inout SeededRNG) -> [Item] {
        var items: [Item] = []
        for k in 0..<240 {
            let id: String
            switch k % 8 {
            case 0: id = longPrefix + "id\(k)"
            case 1: id = "R\(k)"
            case 2: id = "r\(k)\u{0}tail"
            default: id = "r\(k)"
            }
            items.append([
                "id": .string(id),
                "i": maybe(.int(pick(ints, &rng)), &rng),
                "d": maybe(rng.next() % 2 == 0 ? .double(pick(doubles, &rng)) : .int(pick(ints, &rng) >> 4), &rng),
                "s": maybe(.string(pick(strings, &rng)), &rng),
                "t": maybe(.date(pick(dates, &rng)), &rng),
                "b": maybe(.bool(rng.next() % 2 == 0), &rng),
                "bin": maybe(.binary(pick(binaries, &rng)), &rng),
                "u": maybe(.string(pick(strings, &rng)), &rng),
                "n": .int(Int64(k % 7)),
                "j": maybe(.json(["k": .int(Int64(k))]), &rng),
            ])
        }
        return items
    }

    static func literal(for column: String, _ rng: inout SeededRNG) -> Value {
        switch column {
        case "i", "d", "n":
            return rng.next() % 2 == 0 ? .int(pick(ints, &rng)) : .double(pick(doubles + [0.5, 9007199254740993.0, 1.5], &rng))
        case "s", "u": return .string(pick(strings, &rng))
        case "id": return .string(pick(["r3", "R3", "r10", longPrefix + "id8", longPrefix + "ID16", "r2\u{0}tail", "r2\u{0}TAIL", "", "s"], &rng))
        case "t": return .date(pick(dates, &rng))
        case "b": return .bool(rng.next() % 2 == 0)
        default: return .binary(pick(binaries, &rng))
        }
    }

    static let comparable = ["i", "d", "s", "t", "b", "bin", "u", "n", "id"]

    static func predicate(_ rng: inout SeededRNG, depth: Int = 0) -> QueryPredicate {
        let choice = rng.next() % (depth > 2 ? 8 : 11)
        let column = pick(comparable, &rng)
        let ops: [QueryPredicate.ComparisonOperator] = [.equal, .equal, .less, .lessOrEqual, .greater, .greaterOrEqual, .notEqual]
        switch choice {
        case 0, 1, 2:
            let op = pick(ops, &rng)
            let v = literal(for: column, &rng)
            return rng.next() % 4 == 0
                ? .compare(.literal(v), op, .field(column), caseInsensitive: false)
                : .compare(.field(column), op, .literal(v), caseInsensitive: false)
        case 3:
            return Field(column).isIn((0..<(1 + rng.next() % 4)).map { _ in literal(for: column, &rng) } + (rng.next() % 5 == 0 ? [.null] : []))
        case 4:
            let a = literal(for: column, &rng)
            let b = literal(for: column, &rng)
            return Field(column).isBetween(a, and: b)
        case 5:
            let c = pick(["s", "u", "id"], &rng)
            let prefix = pick(["", "a", "A", "r1", "R1", "x", longPrefix, String(longPrefix.prefix(KeyCodec.prefixLimit + 5)), "a\u{0}"], &rng)
            let ci = rng.next() % 3 == 0
            // All three string tests (evaluated on the record's bytes by the LMDB filter), and one
            // with the column on the right (evaluated by the general path).
            switch rng.next() % 5 {
            case 0: return Field(c).ends(with: .literal(.string(prefix)), caseInsensitive: ci)
            case 1: return Field(c).contains(.literal(.string(pick(strings + ["b", "B", "\u{0}", "x"], &rng))), caseInsensitive: ci)
            case 2: return QueryExpression.literal(.string(prefix)).contains(Field(c), caseInsensitive: ci)
            default: return Field(c).starts(with: .literal(.string(prefix)), caseInsensitive: ci)
            }
        case 6 where rng.next() % 3 == 0:
            // Expressions the filter evaluates over decoded columns.
            let c = pick(["i", "d", "n"], &rng)
            return .compare(Field(c) + Field("n"), pick(ops, &rng), .literal(literal(for: c, &rng)), caseInsensitive: false)
        case 6:
            let c = pick(comparable.filter { $0 != "id" } + ["j"], &rng)
            return rng.next() % 2 == 0 ? Field(c).isNull : Field(c).isNotNull
        case 7:
            let c = pick(["s", "u"], &rng)
            return .compare(.field(c), pick(ops, &rng), .literal(.string(pick(strings, &rng))), caseInsensitive: true)
        case 8:
            return .and((0..<(1 + rng.next() % 3)).map { _ in predicate(&rng, depth: depth + 1) })
        case 9:
            return .or((0..<(1 + rng.next() % 3)).map { _ in predicate(&rng, depth: depth + 1) })
        default:
            return .not(predicate(&rng, depth: depth + 1))
        }
    }

    static func query(_ rng: inout SeededRNG) -> Query {
        var sort: [SortKey] = []
        for _ in 0..<(rng.next() % 3) {
            sort.append(SortKey(pick(comparable, &rng), rng.next() % 2 == 0 ? .ascending : .descending))
        }
        let top: Int? = rng.next() % 3 == 0 ? nil : Int(rng.next() % 12)
        return Query(
            "P", where: rng.next() % 8 == 0 ? nil : predicate(&rng), sort: sort, skip: rng.next() % 3 == 0 ? Int(rng.next() % 6) : 0,
            top: top, select: rng.next() % 5 == 0 ? ["s", "i"] : nil, includeTotalCount: rng.next() % 3 == 0)
    }

    @Test("every plan returns what the shared evaluator returns", arguments: [11, 12, 13, 14])
    func equivalence(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(Self.schema)
        let items = Self.makeRows(&rng)
        try store.upsert(items, into: "P")
        // Updates move index entries; deletes remove them.
        try store.upsert(items.prefix(60).map { ["id": $0.id ?? .null, "s": .string(Self.pick(Self.strings, &rng)), "i": .int(Self.pick(Self.ints, &rng))] }, into: "P")
        try store.delete(ids: items.suffix(20).compactMap(\.id), from: "P")
        let all = try store.read(Query("P")).items
        #expect(all.count == 220)
        let rows = all.map { item in Self.schema.columns.map { item[$0.name] ?? .null } }
        var plans: [String: Int] = [:]
        var traded = 0
        for n in 0..<600 {
            var q = Self.query(&rng)
            if n % 4 == 0 {
                // The cost choice: an equality (or IN / isNull) on an indexed column with many rows,
                // sorted by another indexed column, with top: often walked in sort order instead.
                let c = Self.pick(["b", "n", "i", "j"], &rng)
                let constraint: QueryPredicate
                switch c {
                case "b": constraint = Field("b") == .literal(.bool(rng.next() % 2 == 0))
                case "j": constraint = rng.next() % 2 == 0 ? Field("j").isNull : Field("b").isIn([.bool(true), .bool(false)])
                default: constraint = rng.next() % 2 == 0 ? Field("b").isNull : Field("i") >= 0
                }
                q.predicate = rng.next() % 2 == 0 ? constraint : constraint && Self.predicate(&rng)
                q.sort = [SortKey(Self.pick(["t", "s", "d", "bin", "id"], &rng), rng.next() % 2 == 0 ? .ascending : .descending)]
                    + (rng.next() % 2 == 0 ? [SortKey(Self.pick(Self.comparable, &rng))] : [])
                q.top = Int(rng.next() % 12)
                q.includeTotalCount = rng.next() % 6 == 0
            }
            let resolved: ResolvedQuery
            do {
                resolved = try ResolvedQuery(q, schema: Self.schema)
            } catch {
                // An invalid query must be rejected by the store with the same error.
                #expect(errorCode { _ = try store.read(q) } == (error as? LocalStoreError)?.code)
                continue
            }
            let expected = resolved.apply(to: rows)
            let plan = try store.explain(q)
            plans[plan, default: 0] += 1
            if n % 4 == 0, plan.hasPrefix("ordered ") { traded += 1 }
            let got = try store.read(q)
            #expect(got == expected, "query \(n) (\(plan)): \(q)")
            if n % 10 == 0 {
                let inTransaction = try store.write { tx in try tx.read(q) }
                #expect(inTransaction == expected, "query \(n) in a transaction (\(plan))")
            }
        }
        // The random queries exercise every kind of plan.
        for kind in ["primary key", "primary key range", "full scan", "ordered primary key"] {
            #expect(plans[kind, default: 0] > 0, "no query used '\(kind)': \(plans)")
        }
        #expect(plans.keys.contains { $0.hasPrefix("index ") }, "\(plans)")
        #expect(plans.keys.contains { $0.hasPrefix("ordered index ") }, "\(plans)")
        #expect(traded > 20, "the cost choice never walked in sort order: \(traded)")
    }

    @Test("delete(matching:) removes exactly the rows the query returns", arguments: [21, 22])
    func deleteMatchingEquivalence(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        for _ in 0..<12 {
            let dir = try TempDirectory()
            let store = try LMDBStore(path: dir.storePath)
            try store.defineTable(Self.schema)
            try store.upsert(Self.makeRows(&rng), into: "P")
            var q = Self.query(&rng)
            q.select = nil
            q.includeTotalCount = false
            guard (try? ResolvedQuery(q, schema: Self.schema)) != nil else {
                try store.close()
                continue
            }
            let doomed = Set(try store.read(q).items.compactMap { $0.id.map { Collation.noCaseKey($0.stringValue ?? "") } })
            let before = try store.read(Query("P")).items
            try store.delete(matching: q)
            let after = try store.read(Query("P")).items
            let expected = before.filter { !doomed.contains(Collation.noCaseKey($0.id?.stringValue ?? "")) }
            #expect(after == expected, "\(q)")
            // Every index still answers consistently with a full scan.
            for column in ["i", "d", "s", "t", "b", "bin"] {
                #expect(try store.count("P", where: Field(column).isNotNull) == after.filter { !($0[column]?.isNull ?? true) }.count)
            }
            try store.close()
        }
    }
    /// A walk of a compound index whose order is the query's order takes whole keys as they come; a
    /// truncated key (a long id) must send it back to the grouping walk, because long keys that share
    /// their first 480 bytes are ordered by row number, not by id. Long ids inserted against their
    /// order, in one group with short ones, ascending and descending sorts, exact and tested ranges.
    @Test("an ordered compound walk puts the long ids of one group in id order")
    func compoundWalkLongKeys() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        let schema = TableSchema(
            name: "W", columns: [Column("id", .string), Column("g", .integer), Column("t", .date), Column("n", .integer)],
            indexes: [TableIndex(("g", .ascending), ("t", .descending))])
        try store.defineTable(schema)
        let t0 = Date(timeIntervalSinceReferenceDate: 5)
        var items: [Item] = []
        for k in (0..<12).reversed() {
            items.append(["id": .string(Self.longPrefix + "id\(k)"), "g": 1, "t": .date(t0), "n": .int(Int64(k % 3))])
        }
        for k in 0..<6 {
            items.append(["id": .string("s\(k)"), "g": 1, "t": .date(k % 2 == 0 ? t0 : Date(timeIntervalSinceReferenceDate: 9)), "n": 1])
            items.append(["id": .string("o\(k)"), "g": 2, "t": .date(t0), "n": 1])
        }
        try store.upsert(items, into: "W")
        let rows = try store.read(Query("W")).items.map { item in schema.columns.map { item[$0.name] ?? .null } }
        for predicate: QueryPredicate in [Field("g") == 1, Field("g") == 1 && Field("n") == 1, Field("g") >= 1] {
            for direction in [SortKey.Direction.descending, .ascending] {
                for top in [3, 10, 30] {
                    let q = Query("W", where: predicate, sort: [SortKey("t", direction)], top: top)
                    let expected = try ResolvedQuery(q, schema: schema).apply(to: rows)
                    let plan = try store.explain(q)
                    #expect(try store.read(q) == expected, "\(plan): \(q)")
                }
            }
        }
    }
}
