import Foundation
import LocalStore

// Declared indexes are used (QueryPlanReporting): a query an index answers reads that index, a query
// on an unindexed column reads every row, and what each returns is the reference's answer.

extension ConformanceSuite {
    /// The table of the index-use check: `category` has a column index, `(priority, due desc)` is the
    /// compound index `byPriorityDue`; `note` and `score` have none (until `score` gets one).
    static func indexUseSchema(scoreIndexed: Bool = false) -> TableSchema {
        TableSchema(
            "IndexUse", ["category": .string, "priority": .integer, "due": .date, "note": .string, "score": .double],
            indexed: scoreIndexed ? ["category", "score"] : ["category"],
            indexes: [TableIndex(name: "byPriorityDue", ("priority", .ascending), ("due", .descending))])
    }

    /// What a query's access path must be.
    enum ExpectedPath: CustomStringConvertible {
        /// Through one of these indexes.
        case index([String])
        case primaryKey
        case fullScan

        func accepts(_ path: QueryAccessPath) -> Bool {
            switch self {
            case .index(let names): return names.contains { path.isIndex(named: $0) }
            case .primaryKey: return path == .primaryKey
            case .fullScan: return path == .fullScan
            }
        }

        var description: String {
            switch self {
            case .index(let names): return names.map { "index \($0)" }.joined(separator: " or ")
            case .primaryKey: return "primary key"
            case .fullScan: return "full scan"
            }
        }
    }

    /// A store uses the indexes its tables declare, and says so (`QueryPlanReporting`): on a table of
    /// 400 rows, an equality, `in`, range or count on a column index, an equality or range on the leading
    /// columns of a compound index (with a sort the index answers, too) and a `top` list sorted on an
    /// indexed column report that index; `id ==` and `id in` the primary key; a query on a column no
    /// index leads — an unindexed column, the second column of a compound index — a full scan. An index
    /// added to the populated table by a redefinition is used at once, and after reopening. Every query
    /// also returns the reference's rows. A store that does not report its plans fails: every backend
    /// accepts index declarations, so every backend must show that it uses them.
    public static func queriesUseDeclaredIndexes(_ factory: StoreFactory) throws {
        try withWorkspace(factory) { workspace in
            var store = try workspace.open()
            try store.defineTable(indexUseSchema())
            var rows: [Reference.Row] = []
            for n in 0..<400 {
                rows.append([
                    "id": .string("r\(n)"), "category": .string("c\(n % 40)"), "priority": .int(Int64(n % 8)),
                    "due": n % 9 == 0 ? .null : .date(date(Double(n * 37 % 400))), "note": .string("n\(n % 50)"),
                    "score": .double(Double(n % 10) / 10),
                ])
            }
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 3), into: "IndexUse")

            let category = Field("category")
            let priority = Field("priority")
            let due = Field("due")
            let note = Field("note")
            let score = Field("score")
            let dueAt: QueryExpression = .literal(.date(date(200)))
            let compound = ExpectedPath.index(["byPriorityDue"])
            var cases: [(label: String, query: Query, expected: ExpectedPath)] = [
                ("category == 'c7'", Query("IndexUse", where: category == "c7"), .index(["category"])),
                ("category in ('c1', 'c2')", Query("IndexUse", where: category.isIn(["c1", "c2"])), .index(["category"])),
                ("'c3' < category < 'c5'", Query("IndexUse", where: category > "c3" && category < "c5"), .index(["category"])),
                ("category == 'c7' and note == 'n7'", Query("IndexUse", where: category == "c7" && note == "n7"), .index(["category"])),
                (
                    "count where category == 'c9'", Query("IndexUse", where: category == "c9", top: 0, includeTotalCount: true),
                    .index(["category"])
                ),
                ("priority == 3", Query("IndexUse", where: priority == 3), compound),
                ("4 < priority < 7", Query("IndexUse", where: priority > 4 && priority < 7), compound),
                ("priority == 3 and due > t", Query("IndexUse", where: priority == 3 && due > dueAt), compound),
                (
                    "priority == 2 sorted by due desc, top 5",
                    Query("IndexUse", where: priority == 2, sort: [SortKey("due", .descending)], top: 5), compound
                ),
                ("top 10 sorted by category", Query("IndexUse", sort: [SortKey("category")], top: 10), .index(["category"])),
                ("id == 'r17'", Query("IndexUse", where: Field("id") == "r17"), .primaryKey),
                ("id in ('r1', 'r300')", Query("IndexUse", where: Field("id").isIn(["r1", "r300"])), .primaryKey),
                ("note == 'n5' (no index)", Query("IndexUse", where: note == "n5"), .fullScan),
                ("0.4 < score < 0.7 (no index)", Query("IndexUse", where: score > 0.4 && score < 0.7), .fullScan),
                ("due > t (second column of a compound index)", Query("IndexUse", where: due > dueAt), .fullScan),
                ("top 5 sorted by note (no index)", Query("IndexUse", sort: [SortKey("note")], top: 5), .fullScan),
            ]
            try expectPaths(store, cases, rows, "")

            // An index added to the populated table is used at once, and after reopening.
            try store.defineTable(indexUseSchema(scoreIndexed: true))
            cases = [("0.4 < score < 0.7 (index added)", Query("IndexUse", where: score > 0.4 && score < 0.7), .index(["score"]))]
            try expectPaths(store, cases, rows, "after adding an index on score: ")
            if let reopened = try workspace.reopen(store) {
                store = reopened
                cases = [
                    ("0.4 < score < 0.7 (index added)", Query("IndexUse", where: score > 0.4 && score < 0.7), .index(["score"])),
                    ("priority == 3 and due > t", Query("IndexUse", where: priority == 3 && due > dueAt), compound),
                    ("note == 'n5' (no index)", Query("IndexUse", where: note == "n5"), .fullScan),
                ]
                try expectPaths(store, cases, rows, "after reopening: ")
            }
        }
    }

    /// Checks each case's reported access path, and its rows against the reference.
    private static func expectPaths(
        _ store: any LocalStore, _ cases: [(label: String, query: Query, expected: ExpectedPath)], _ rows: [Reference.Row],
        _ stage: String
    ) throws {
        guard let reporting = store as? any QueryPlanReporting else {
            throw ConformanceFailure(
                "\(type(of: store)) does not conform to QueryPlanReporting: every backend accepts index declarations, and the "
                    + "suite needs the access path of a query to check that the declared indexes are used")
        }
        let table = Reference.Table(schema: indexUseSchema(), rows: rows)
        for (label, query, expected) in cases {
            let path = try reporting.accessPath(for: query)
            try expect(expected.accepts(path), "\(stage)\(label): expected \(expected), the store reports \(path)")
            let reference = try Reference.select(table, where: query.predicate, sort: query.sort, skip: query.skip, top: query.top)
            let result = try store.read(query)
            try expectSameIds(try ids(result.items), PredicateData.rowIds(reference), "\(stage)\(label): the rows")
            if query.includeTotalCount {
                let all = try Reference.select(table, where: query.predicate, sort: [])
                try expectEqual(result.totalCount, all.count, "\(stage)\(label): the total count")
            }
        }
    }
}
