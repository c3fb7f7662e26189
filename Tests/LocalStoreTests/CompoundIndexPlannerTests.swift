import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreLMDB
import Testing

/// The in-memory and LMDB planners over compound indexes: the plan `explain` names, and random queries
/// whose results must equal the shared evaluator's over all rows (whatever plan is chosen).
@Suite("Compound index planners")
struct CompoundIndexPlannerTests {
    /// A store under test and its `explain`.
    struct Subject {
        let store: any LocalStore
        let explain: (Query) throws -> String
        let directory: URL?
    }

    static func subjects() throws -> [(String, Subject)] {
        let memory = try InMemoryStore()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("CompoundPlanner-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let lmdb = try LMDBStore(path: dir.appendingPathComponent("store.lmdb").path)
        return [
            ("memory", Subject(store: memory, explain: memory.explain, directory: nil)),
            ("lmdb", Subject(store: lmdb, explain: lmdb.explain, directory: dir)),
        ]
    }

    static let long = String(repeating: "x", count: 500)

    static let schema = TableSchema(
        name: "C",
        columns: [
            Column("id", .string), Column("g", .integer, indexed: true), Column("s", .string), Column("t", .date),
            Column("b", .boolean), Column("d", .double), Column("bin", .binary), Column("u", .string),
        ],
        indexes: [
            TableIndex(("g", .ascending), ("t", .descending)), TableIndex(name: "bySD", ("s", .descending), ("d", .ascending)),
            TableIndex(("b", .ascending), ("g", .descending), ("bin", .ascending)),
        ])

    @Test("explain names the compound index and the columns used")
    func explainNamesCompoundPlans() throws {
        for (name, subject) in try Self.subjects() {
            defer {
                try? subject.store.close()
                if let d = subject.directory { try? FileManager.default.removeItem(at: d) }
            }
            try subject.store.defineTable(Self.schema)
            try subject.store.upsert(
                (0..<300).map { i in
                    ["id": .string("r\(i)"), "g": .int(Int64(i % 3)), "t": .date(Date(timeIntervalSinceReferenceDate: Double(i))), "s": .string("s\(i % 7)"), "d": .double(Double(i % 11))]
                }, into: "C")
            let t0 = Date(timeIntervalSinceReferenceDate: 100)
            let cases: [(Query, String)] = [
                (Query("C", where: Field("g") == 2, sort: [SortKey("t", .descending)], top: 50), "ordered index g_t_desc(g, t desc) using 2 of 2 columns"),
                (Query("C", where: Field("g") == 2, sort: [SortKey("t")], top: 5), "ordered index g_t_desc(g, t desc) using 2 of 2 columns"),
                (Query("C", where: Field("g") == 2 && Field("t") < .literal(.date(t0)), sort: [SortKey("t", .descending)], top: 5),
                 "ordered index g_t_desc(g, t desc) using 2 of 2 columns"),
                (Query("C", where: Field("g") == 2 && Field("t") >= .literal(.date(t0))), "index g_t_desc(g, t desc) using 2 of 2 columns"),
                (Query("C", where: Field("g") == 2 && Field("t") >= .literal(.date(t0)), top: 0, includeTotalCount: true),
                 "index-only count g_t_desc(g, t desc) using 2 of 2 columns"),
                (Query("C", where: Field("s") == "s3", top: 0, includeTotalCount: true), "index-only count bySD(s desc, d) using 1 of 2 columns"),
                (Query("C", where: Field("s") == "s3", sort: [SortKey("d", .descending)], top: 3), "ordered index bySD(s desc, d) using 2 of 2 columns"),
                (Query("C", sort: [SortKey("s", .descending), SortKey("d")], top: 3), "ordered index bySD(s desc, d) using 2 of 2 columns"),
                (Query("C", where: Field("b") == true && Field("g") == 1, sort: [SortKey("g"), SortKey("bin", .descending)], top: 3),
                 "ordered index b_g_desc_bin(b, g desc, bin) using 3 of 3 columns"),
            ]
            for (query, expected) in cases {
                #expect(try subject.explain(query) == expected, "[\(name)] \(query)")
            }
        }
    }

    static func randomRows(_ g: inout SeededGenerator) -> [Item] {
        let strings = ["", "a", "A", "ab", "b", "a\u{0}", "a\u{0}b", "é", "😀", long + "a", long + "b", long, "z"]
        let binaries: [[UInt8]] = [[], [0], [0, 0], [1], [255], Array(repeating: 7, count: 500), Array(repeating: 7, count: 500) + [1]]
        func maybe(_ v: Value) -> Value { g.next() % 6 == 0 ? .null : v }
        return (0..<260).map { k in
            let id = k % 9 == 0 ? Self.long + "id\(k)" : (k % 2 == 0 ? "r\(k)" : "R\(k)")
            return [
                "id": .string(id),
                "g": maybe(.int(Int64(g.next() % 4) - 1)),
                "s": maybe(.string(strings[Int(g.next() % UInt64(strings.count))])),
                "t": maybe(.date(Date(timeIntervalSinceReferenceDate: Double(Int(g.next() % 5) - 2) * 0.5))),
                "b": maybe(.bool(g.next() % 2 == 0)),
                "d": maybe(g.next() % 5 == 0 ? .double(-0.0) : .double(Double(Int(g.next() % 7) - 3) / 2)),
                "bin": maybe(.binary(binaries[Int(g.next() % UInt64(binaries.count))])),
                "u": .string("u\(k % 3)"),
            ]
        }
    }

    @Test("random queries over compound indexes return what the shared evaluator returns", arguments: [31, 32, 33])
    func randomEquivalence(seed: UInt64) throws {
        var g = SeededGenerator(seed: seed)
        let rowsToWrite = Self.randomRows(&g)
        for (name, subject) in try Self.subjects() {
            defer {
                try? subject.store.close()
                if let d = subject.directory { try? FileManager.default.removeItem(at: d) }
            }
            var g = SeededGenerator(seed: seed &* 7)
            let store = subject.store
            try store.defineTable(Self.schema)
            try store.upsert(rowsToWrite, into: "C")
            // Updates move index entries; deletes remove them.
            try store.upsert(rowsToWrite.prefix(40).map { ["id": $0["id"] ?? .null, "g": .int(Int64(g.next() % 3)), "t": .null] }, into: "C")
            try store.delete(ids: rowsToWrite.suffix(15).compactMap { $0["id"] }, from: "C")
            let rows = try store.read(Query("C")).items.map { item in Self.schema.columns.map { item[$0.name] ?? .null } }
            #expect(rows.count == 245)
            func literal(_ column: String) -> Value {
                let all = rows.map { $0[Self.schema.index(ofColumn: column) ?? 0] }
                let v = all[Int(g.next() % UInt64(all.count))]
                if v.isNull || g.next() % 5 == 0 {
                    switch column {
                    case "g": return .int(Int64(g.next() % 5) - 2)
                    case "d": return g.next() % 2 == 0 ? .double(0.25) : .int(1)
                    case "t": return .date(Date(timeIntervalSinceReferenceDate: 0.25))
                    case "b": return .bool(true)
                    case "bin": return .binary([0, 1])
                    default: return .string("a")
                    }
                }
                return v
            }
            let columns = ["g", "s", "t", "b", "d", "bin"]
            var plans: [String: Int] = [:]
            var indexOnlyCounts = 0
            for n in 0..<400 {
                var parts: [QueryPredicate] = []
                for _ in 0..<(1 + g.next() % 3) {
                    let c = columns[Int(g.next() % UInt64(columns.count))]
                    switch g.next() % 9 {
                    case 0, 1, 2: parts.append(Field(c) == .literal(literal(c)))
                    case 3: parts.append(Field(c) < .literal(literal(c)))
                    case 4: parts.append(.literal(literal(c)) <= Field(c))
                    case 5: parts.append(Field(c).isNull)
                    case 6: parts.append(Field(c).isIn([literal(c), literal(c)]))
                    case 7: parts.append(c == "s" ? Field(c).starts(with: .literal(.string(g.next() % 2 == 0 ? "a" : Self.long))) : Field(c) > .literal(literal(c)))
                    default: parts.append(Field(c) != .literal(literal(c)))
                    }
                }
                var sort: [SortKey] = []
                for _ in 0..<(g.next() % 3) { sort.append(SortKey(columns[Int(g.next() % UInt64(columns.count))], g.next() % 2 == 0 ? .ascending : .descending)) }
                let top: Int? = g.next() % 4 == 0 ? nil : Int(g.next() % 10)
                let q = Query(
                    "C", where: parts.count == 1 ? parts[0] : .and(parts), sort: sort, skip: g.next() % 3 == 0 ? Int(g.next() % 5) : 0,
                    top: top, includeTotalCount: g.next() % 3 == 0)
                let expected = try ResolvedQuery(q, schema: Self.schema).apply(to: rows)
                let plan = try subject.explain(q)
                plans[plan.components(separatedBy: " using").first ?? plan, default: 0] += 1
                #expect(try store.read(q) == expected, "[\(name)] query \(n) (\(plan)): \(q)")
                if n % 4 == 0 {
                    let count = Query("C", where: q.predicate, top: 0, includeTotalCount: true)
                    let expectedCount = try ResolvedQuery(count, schema: Self.schema).apply(to: rows).totalCount
                    let countPlan = try subject.explain(count)
                    if countPlan.hasPrefix("index-only count") { indexOnlyCounts += 1 }
                    #expect(try store.read(count).totalCount == expectedCount, "[\(name)] count \(n) (\(countPlan)): \(q)")
                }
            }
            // The random queries reach the compound plans.
            #expect(indexOnlyCounts > 3, "[\(name)] index-only counts: \(indexOnlyCounts)")
            #expect(plans.keys.contains { $0.hasPrefix("ordered index") && $0.contains("(") }, "[\(name)] \(plans)")
            #expect(plans.keys.contains { $0.hasPrefix("index g_t_desc") || $0.hasPrefix("index bySD") || $0.hasPrefix("index b_g_desc_bin") }, "[\(name)] \(plans)")
        }
    }
}

