import Foundation
import LocalStore

// Compound indexes: definition and validation, every query shape over them against the reference,
// maintenance on writes, adding one to a populated table, reopening.

extension ConformanceSuite {
    /// A compound index is stored with the table (`TableSchema.indexes`, column names in their
    /// defined spelling); an index naming an unknown or json column, a column twice, no column, an
    /// invalid name, or reusing a name for other keys is refused with a typed error naming the table
    /// (and the column) and changes nothing; redefining with the same index (under any name) is a no-op.
    public static func compoundIndexDefinition(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let index = TableIndex(("GRP", .ascending), ("score", .descending))
            try store.defineTable(compoundSchema(indexes: [index]))
            let schema = try unwrap(try store.schema(of: "Compound"), "schema")
            try expectEqual(schema.indexes, [TableIndex(("grp", .ascending), ("score", .descending))], "the stored compound index")
            try expectEqual(schema.indexes.first?.resolvedName, "grp_score_desc", "the default index name")
            try store.defineTable(compoundSchema(indexes: [TableIndex(name: "byGroup", ("grp", .ascending), ("score", .descending))]))
            try expectEqual(try store.schema(of: "Compound"), schema, "the same keys under another name are the same index")
            try store.defineTable(compoundSchema())
            try expectEqual(try store.schema(of: "Compound"), schema, "a definition without the index keeps it")

            let cases: [(String, TableIndex, LocalStoreError.Code, String?, Bool)] = [
                ("unknown column", TableIndex(("grp", .ascending), ("nope", .ascending)), .unknownColumn, "nope", true),
                ("json column", TableIndex(("grp", .ascending), ("doc", .ascending)), .invalidValue, "doc", true),
                ("column twice", TableIndex(("grp", .ascending), ("GRP", .descending)), .schemaConflict, "grp", true),
                ("no column", TableIndex([]), .invalidValue, nil, true),
                ("invalid name", TableIndex(name: "bad name", ("grp", .ascending)), .invalidIdentifier, nil, true),
                ("name reused for other keys", TableIndex(name: "grp_score_desc", ("name", .ascending)), .schemaConflict, nil, false),
            ]
            for (label, bad, code, column, invalidAlone) in cases {
                let error = try expectThrows(code: code, label) { try store.defineTable(compoundSchema(indexes: [bad])) }
                try expect(error.message.contains("Compound"), "\(label): the message names the table: \(error.message)")
                if let column {
                    try expectEqual(error.column.map(Identifier.fold), column, "\(label): the error's column")
                    try expect(error.message.lowercased().contains(column), "\(label): the message names the column: \(error.message)")
                }
                try expectEqual(try store.schema(of: "Compound"), schema, "\(label): the failed definition changes nothing")
                guard invalidAlone else { continue }
                _ = try expectThrows(code: code, "\(label) on a new table") {
                    try store.defineTable(compoundSchema(name: "Fresh", indexes: [bad]))
                }
                try expectNil(try store.schema(of: "Fresh"), "\(label): no table is created")
            }
            let tooMany = TableIndex(name: "wide", (0..<17).map { TableIndex.Key("c\($0)") })
            let wide = TableSchema(name: "Wide", columns: (0..<17).map { Column("c\($0)", .integer) }, indexes: [tooMany])
            _ = try expectThrows(code: .invalidValue, "an index of 17 columns") { try store.defineTable(wide) }
        }
    }

    /// Every query shape over compound indexes (equality prefixes, ranges on the next column, sorts in
    /// the index's direction and reversed, nulls, ties, skip/top, counts) returns exactly the reference's
    /// rows in its order — on a new table, after inserts, updates and deletes, after adding an index to
    /// the populated table, and (persistent backends) after reopening.
    public static func compoundIndexQueries(_ factory: StoreFactory) throws {
        try withWorkspace(factory) { workspace in
            var store = try workspace.open()
            try store.defineTable(compoundSchema(indexes: [TableIndex(("grp", .ascending), ("score", .descending))]))
            var rows = compoundRows(count: 120, seed: 1)
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 5), into: "Compound")
            try checkCompoundQueries(store, rows, "after inserts")

            // Updates that move rows within and across the indexes, and deletes.
            var updates: [Reference.Row] = []
            for (n, i) in stride(from: 0, to: rows.count, by: 7).enumerated() {
                var row = rows[i]
                row["grp"] = n % 3 == 0 ? .null : .int(Int64(n % 4))
                row["score"] = n % 4 == 0 ? .null : .double(Double(n % 5) / 2)
                row["name"] = n % 2 == 0 ? .string("m\(n % 3)") : .null
                rows[i] = row
                updates.append(row)
            }
            try store.upsert(updates.map { Item($0) }, into: "Compound")
            let deleted = stride(from: 3, to: rows.count, by: 11).map { rows[$0]["id"]?.stringValue ?? "" }
            try store.delete(ids: deleted.map { .string($0) }, from: "Compound")
            rows.removeAll { deleted.contains($0["id"]?.stringValue ?? "") }
            try checkCompoundQueries(store, rows, "after updates and deletes")
            let doomed = Field("grp") == 2 && Field("score") >= 1.5
            let doomedIds = Set(PredicateData.rowIds(try Reference.select(Reference.Table(schema: compoundSchema(), rows: rows), where: doomed, sort: [])))
            try store.delete(matching: Query("Compound", where: doomed))
            rows.removeAll { doomedIds.contains($0["id"]?.stringValue ?? "") }
            try checkCompoundQueries(store, rows, "after delete(matching:) over the index")

            // Indexes added to the populated table are built.
            let more = [TableIndex(("name", .descending), ("at", .ascending)), TableIndex(("flag", .ascending), ("grp", .descending), ("name", .ascending))]
            try store.defineTable(compoundSchema(indexes: more))
            let schema = try unwrap(try store.schema(of: "Compound"), "schema")
            try expectEqual(schema.indexes.count, 3, "indexes after adding two: \(schema.indexes)")
            try checkCompoundQueries(store, rows, "after adding indexes to the populated table")
            try store.defineTable(compoundSchema(indexes: more))
            try expectEqual(try store.schema(of: "Compound"), schema, "defining the same indexes again changes nothing")

            if let reopened = try workspace.reopen(store) {
                store = reopened
                try expectEqual(try store.schema(of: "Compound"), schema, "the indexes after reopening")
                try store.defineTable(compoundSchema(indexes: more))
                try expectEqual(try store.schema(of: "Compound"), schema, "defining the indexes again after reopening")
                try checkCompoundQueries(store, rows, "after reopening")
                var row = rows[0]
                row["grp"] = .int(0)
                row["score"] = .double(9)
                rows[0] = row
                try store.upsert([Item(row)], into: "Compound")
                try checkCompoundQueries(store, rows, "after an update in the reopened store")
            }
        }
    }

    /// `delete(matching:)` removes a row's entries from every index, not only from the one its plan walks:
    /// on a table with column indexes and compound indexes, deletes planned over each kind of access (a
    /// range of ids, a column index, a compound index's prefix, a scan, an `IN` list, skip and top) leave
    /// every index answering exactly the reference's rows and counts, in a write transaction too.
    public static func deleteMatchingUpdatesEveryIndex(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let compound = compoundSchema(indexes: [
                TableIndex(("grp", .ascending), ("score", .descending)), TableIndex(("name", .descending), ("at", .ascending)),
                TableIndex(("flag", .ascending), ("grp", .descending), ("name", .ascending)),
            ])
            let columns = compound.columns.map { Column($0.name, $0.type, indexed: ["score", "name", "at", "flag"].contains($0.name)) }
            try store.defineTable(TableSchema(name: compound.name, columns: columns, indexes: compound.indexes))
            var rows = compoundRows(count: 160, seed: 31)
            try store.upsert(rows.map { Item($0) }, into: "Compound")
            let grp = Field("grp")
            let score = Field("score")
            let name = Field("name")
            let at = Field("at")
            let flag = Field("flag")
            let deletes: [(QueryPredicate?, [SortKey], Int, Int?)] = [
                (Field("id") >= "k3" && Field("id") < "k5", [], 0, nil),  // a range of ids
                (score == 1.5, [], 0, nil),  // a column index
                (grp == 2 && score >= 1, [], 0, nil),  // a compound index's prefix and range
                (name == "m1", [], 0, nil),  // a column index on a string (or the compound one it leads)
                (at.isNull && flag == true, [], 0, nil),
                (grp.isIn([0, 3]) && score < 1, [], 0, nil),  // several ranges
                (flag == false, [SortKey("at", .descending)], 2, 5),  // skip and top
            ]
            let table = { Reference.Table(schema: compoundSchema(), rows: rows) }
            for (step, (predicate, sort, skip, top)) in deletes.enumerated() {
                let doomed = Set(PredicateData.rowIds(try Reference.select(table(), where: predicate, sort: sort, skip: skip, top: top)))
                try expectEqual(doomed.isEmpty, false, "delete \(step) matches rows")
                let query = Query("Compound", where: predicate, sort: sort, skip: skip, top: top)
                if step % 2 == 0 {
                    try store.delete(matching: query)
                } else {
                    try store.write { tx in try tx.delete(matching: query) }
                }
                rows.removeAll { doomed.contains($0["id"]?.stringValue ?? "") }
                try expectEqual(try store.count("Compound"), rows.count, "rows after delete \(step) (\(String(describing: predicate)))")
                for predicate in [grp == 1, score >= 1, name == "b", name.isNull, at > .literal(.date(date(120))), flag == true, grp == 2 && score < 2] as [QueryPredicate] {
                    let expected = try Reference.select(table(), where: predicate, sort: [])
                    try expectEqual(try store.count("Compound", where: predicate), expected.count, "after delete \(step): count where \(predicate)")
                    try expectSameIds(
                        try ids(try store.read(Query("Compound", where: predicate)).items), PredicateData.rowIds(expected),
                        "after delete \(step): rows where \(predicate)")
                }
            }
            try checkCompoundQueries(store, rows, "after every delete(matching:)")
            // The deleted rows' ids can be used again: no entry of theirs is left to shadow the new rows.
            let again = compoundRows(count: 160, seed: 31).filter { row in !rows.contains { $0["id"] == row["id"] } }
            try store.upsert(again.map { Item($0) }, into: "Compound")
            rows += again
            try checkCompoundQueries(store, rows, "after inserting the deleted ids again")
        }
    }

    /// Random rows and random queries over compound-indexed columns (equalities, ranges, null tests,
    /// `IN`, sorts in any direction, skip/top, counts): the store returns exactly the reference's rows.
    public static func compoundIndexRandomQueries(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(compoundSchema(indexes: [
                TableIndex(("grp", .ascending), ("score", .descending)), TableIndex(("name", .descending), ("at", .ascending)),
                TableIndex(("flag", .ascending), ("grp", .descending), ("name", .ascending)),
            ]))
            let rows = compoundRows(count: 150, seed: 77)
            try store.upsert(rows.map { Item($0) }, into: "Compound")
            let table = Reference.Table(schema: compoundSchema(), rows: rows)
            var g = SeededGenerator(seed: 2024)
            func pick<T>(_ xs: [T]) -> T { xs[Int(g.next() % UInt64(xs.count))] }
            let columns = ["grp", "score", "name", "at", "flag"]
            func literal(_ column: String) -> Value {
                switch column {
                case "grp": return .int(Int64(g.next() % 5))
                case "score": return .double(Double(g.next() % 6) / 2)
                case "name": return .string(pick(["a", "B", "b", "m1", "c", "m0"]))
                case "at": return .date(date(Double(g.next() % 8) * 60))
                default: return .bool(g.next() % 2 == 0)
                }
            }
            func conjunct() -> QueryPredicate {
                let c = pick(columns)
                switch g.next() % 8 {
                case 0, 1, 2: return Field(c) == .literal(literal(c))
                case 3: return Field(c) < .literal(literal(c))
                case 4: return Field(c) >= .literal(literal(c))
                case 5: return Field(c).isNull
                case 6: return Field(c).isIn([literal(c), literal(c)])
                default: return Field(c) > .literal(literal(c)) && Field(c) <= .literal(literal(c))
                }
            }
            for n in 0..<300 {
                let parts = (0..<Int(1 + g.next() % 3)).map { _ in conjunct() }
                let predicate: QueryPredicate = parts.count == 1 ? parts[0] : .and(parts)
                let sort = (0..<Int(g.next() % 3)).map { _ in SortKey(pick(columns), g.next() % 2 == 0 ? .ascending : .descending) }
                let skip = Int(g.next() % 3) * 2
                let top: Int? = g.next() % 4 == 0 ? nil : Int(g.next() % 12)
                let query = Query("Compound", where: predicate, sort: sort, skip: skip, top: top, includeTotalCount: n % 3 == 0)
                let expected = try Reference.select(table, where: predicate, sort: sort, skip: skip, top: top)
                let result = try store.read(query)
                try expectSameIds(try ids(result.items), PredicateData.rowIds(expected), "random query \(n): \(query)")
                if n % 3 == 0 {
                    let all = try Reference.select(table, where: predicate, sort: [])
                    try expectEqual(result.totalCount, all.count, "random query \(n): total count of \(query)")
                }
                if n % 5 == 0 {
                    let all = try Reference.select(table, where: predicate, sort: [])
                    try expectEqual(try store.count("Compound", where: predicate), all.count, "random count \(n): \(predicate)")
                }
            }
        }
    }
}

extension ConformanceSuite {
    /// Compound-index queries on string keys longer than an index entry may hold whole (names sharing
    /// their first 600 bytes, differing after them or only in case): an equality or range on the long
    /// column, with the sort the index answers, returns exactly the reference's rows, as do counts.
    public static func compoundIndexLongKeys(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(compoundSchema(indexes: [
                TableIndex(("name", .ascending), ("score", .descending)), TableIndex(("grp", .ascending), ("name", .descending)),
            ]))
            let shared = String(repeating: "p", count: 600)
            let names: [String?] = [shared + "a", shared + "b", shared + "A", shared, shared + "a" + shared, "short", nil]
            var g = SeededGenerator(seed: 600)
            let rows: [Reference.Row] = (0..<84).map { i in
                var row: Reference.Row = [:]
                row["id"] = .string("L\(i)")
                row["grp"] = .int(Int64(i % 3))
                row["score"] = g.next() % 6 == 0 ? .null : .double(Double(g.next() % 5))
                row["name"] = Value(names[(i / 3) % names.count])
                row["at"] = .null
                row["flag"] = .null
                row["doc"] = .null
                return row
            }
            try store.upsert(rows.map { Item($0) }, into: "Compound")
            let table = Reference.Table(schema: compoundSchema(), rows: rows)
            let name = Field("name")
            var predicates: [QueryPredicate] = []
            for n in names.compactMap({ $0 }) {
                let v = QueryExpression.literal(.string(n))
                predicates += [name == v, name == v && Field("score") >= 2, name > v, name <= v, Field("grp") == 1 && name == v, Field("grp") == 2 && name < v]
            }
            let sorts: [[SortKey]] = [[SortKey("score", .descending)], [SortKey("score")], [SortKey("name"), SortKey("score", .descending)], [SortKey("name", .descending)]]
            for predicate in predicates {
                let all = try Reference.select(table, where: predicate, sort: [])
                try expectEqual(try store.count("Compound", where: predicate), all.count, "long keys: count where \(predicate)")
                for sort in sorts {
                    try checkCompoundWindows(store, table, predicate, sort, [(0, 1), (0, 3), (1, 50), (0, nil)], "long keys")
                }
            }
        }
    }
}

extension ConformanceSuite {
    /// Ties broken by long ids: rows equal on every column of a compound index, whose ids share their first
    /// 600 bytes (longer than an index entry may hold whole) and differ after them, in letters of either
    /// case, written against their order, next to short ids in the same groups. Every walk of the index — in its order,
    /// reversed, under an equality prefix or a range, cut by skip and top — returns the reference's rows
    /// in the reference's order: `id` breaks the ties, compared as the id column compares (NOCASE), however
    /// the index stores long ids.
    public static func compoundIndexLongIdTies(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(compoundSchema(indexes: [TableIndex(("grp", .ascending), ("score", .descending))]))
            let shared = String(repeating: "q", count: 600)
            var rows: [Reference.Row] = []
            // Written in descending id order, so that the order of writing is never the answer.
            for i in (0..<24).reversed() {
                let id: String
                switch i % 4 {
                case 0: id = shared + "id\(i)"
                case 1: id = shared + "ID\(i)x"
                case 2: id = shared + String(repeating: "z", count: i) + "\(i)"
                default: id = "s\(i)"
                }
                var row: Reference.Row = [:]
                row["id"] = .string(id)
                row["grp"] = .int(Int64(i % 2))
                row["score"] = i % 3 == 0 ? .null : .double(i % 3 == 1 ? 1 : 2)
                row["name"] = .null
                row["at"] = .null
                row["flag"] = .null
                row["doc"] = .null
                rows.append(row)
            }
            for row in rows { try store.upsert([Item(row)], into: "Compound") }
            let table = Reference.Table(schema: compoundSchema(), rows: rows)
            let grp = Field("grp")
            let score = Field("score")
            let predicates: [QueryPredicate?] = [nil, grp == 0, grp == 1, grp == 1 && score == 2, grp >= 0, grp == 0 && score.isNull, grp == 1 && score < 2]
            let sorts: [[SortKey]] = [[SortKey("score", .descending)], [SortKey("score")], [SortKey("grp"), SortKey("score", .descending)], [SortKey("grp", .descending), SortKey("score")]]
            for predicate in predicates {
                for sort in sorts {
                    try checkCompoundWindows(store, table, predicate, sort, [(0, 1), (0, 4), (2, 5), (0, nil)], "long id ties")
                }
            }
        }
    }
}

/// Reads `predicate` under `sort` from the compound-index table through each (skip, top) window and compares
/// the ids, in order, with the reference's; `label` starts the failure message.
func checkCompoundWindows(
    _ store: any LocalStore, _ table: Reference.Table, _ predicate: QueryPredicate?, _ sort: [SortKey], _ windows: [(Int, Int?)],
    _ label: String
) throws {
    for (skip, top) in windows {
        let expected = try Reference.select(table, where: predicate, sort: sort, skip: skip, top: top)
        let result = try store.read(Query("Compound", where: predicate, sort: sort, skip: skip, top: top))
        try expectSameIds(
            try ids(result.items), PredicateData.rowIds(expected),
            "\(label): where \(predicate.map { "\($0)" } ?? "nil") sort \(sort.map { "\($0.field)\($0.direction == .descending ? " desc" : "")" }) skip \(skip) top \(String(describing: top))")
    }
}

/// The compound-index table: few distinct values per column (ties), nulls everywhere, ids in two cases.
func compoundSchema(name: String = "Compound", indexes: [TableIndex] = []) -> TableSchema {
    TableSchema(
        name: name,
        columns: [
            Column("id", .string), Column("grp", .integer), Column("score", .double), Column("name", .string),
            Column("at", .date), Column("flag", .boolean), Column("doc", .json),
        ],
        indexes: indexes)
}

/// `count` rows for ``compoundSchema(name:indexes:)``, shuffled by `seed`.
func compoundRows(count: Int, seed: UInt64) -> [Reference.Row] {
    var g = SeededGenerator(seed: seed)
    return (0..<count).map { i in
        let names: [String?] = ["a", "B", "b", nil, "c", "m1"]
        var row: Reference.Row = [:]
        row["id"] = .string((i % 2 == 0 ? "k" : "K") + String(i, radix: 10))
        row["grp"] = g.next() % 6 == 0 ? .null : .int(Int64(g.next() % 4))
        row["score"] = g.next() % 5 == 0 ? .null : .double(Double(g.next() % 6) / 2)
        row["name"] = Value(names[Int(g.next() % UInt64(names.count))])
        row["at"] = g.next() % 7 == 0 ? .null : .date(date(Double(g.next() % 8) * 60))
        row["flag"] = g.next() % 4 == 0 ? .null : .bool(g.next() % 2 == 0)
        row["doc"] = .null
        return row
    }
}

/// Runs the fixed query shapes over the compound-index columns and compares each with the reference.
func checkCompoundQueries(_ store: any LocalStore, _ rows: [Reference.Row], _ stage: String) throws {
    let table = Reference.Table(schema: compoundSchema(), rows: rows)
    let grp = Field("grp")
    let score = Field("score")
    let name = Field("name")
    let at = Field("at")
    let flag = Field("flag")
    let predicates: [QueryPredicate?] = [
        nil, grp == 2, grp == 0, grp.isNull, grp == 1 && score > 1, grp == 1 && score <= 1.5, grp == 3 && score >= 0.5 && score < 2.5,
        grp == 2 && score.isNull, grp == 1 && score == 1, grp > 1, grp <= 1, grp.isIn([1, 3]), name == "b", name == "b" && at >= .literal(.date(date(120))),
        name.isNull && at < .literal(.date(date(300))), name > "a", flag == true && grp == 2, flag == false && grp == 1 && name == "c",
        flag == true && grp < 2, flag.isNull && grp.isNull, grp == 2 && name.starts(with: "m"), grp == 2.0, score == 1 && grp == 1,
    ]
    let sorts: [[SortKey]] = [
        [], [SortKey("score", .descending)], [SortKey("score")], [SortKey("grp"), SortKey("score", .descending)],
        [SortKey("grp", .descending), SortKey("score")], [SortKey("at")], [SortKey("name", .descending), SortKey("at")],
        [SortKey("grp", .descending), SortKey("name")], [SortKey("score", .descending), SortKey("id", .descending)],
    ]
    for predicate in predicates {
        let all = try Reference.select(table, where: predicate, sort: [])
        try expectEqual(try store.count("Compound", where: predicate), all.count, "\(stage): count where \(String(describing: predicate))")
        for sort in sorts {
            let label = "\(stage): where \(predicate.map { "\($0)" } ?? "-") sort \(sort.map { "\($0.field)\($0.direction == .descending ? " desc" : "")" })"
            for (skip, top) in [(0, nil), (0, 1), (0, 5), (3, 4), (0, 0), (10, 50)] as [(Int, Int?)] {
                let expected = try Reference.select(table, where: predicate, sort: sort, skip: skip, top: top)
                let result = try store.read(Query("Compound", where: predicate, sort: sort, skip: skip, top: top, includeTotalCount: skip == 3))
                try expectSameIds(try ids(result.items), PredicateData.rowIds(expected), "\(label) skip \(skip) top \(String(describing: top))")
                if skip == 3 { try expectEqual(result.totalCount, all.count, "\(label): total count") }
            }
        }
    }
}
