import Foundation
import LocalStore

// Hand-written predicate expectations (keeping the reference honest), invalid queries, nesting
// limits, delete(matching:) and paging stability.

extension ConformanceSuite {
    /// A small table with hand-computed answers: both the reference evaluator and the store must give
    /// exactly these ids.
    public static func predicateHandWrittenExpectations(_ factory: StoreFactory) throws {
        let schema = TableSchema("Hand", ["s": .string, "i": .integer, "x": .double, "b": .boolean])
        let rows: [Reference.Row] = [
            ["id": "a", "s": "apple", "i": 1, "x": 1.5, "b": true],
            ["id": "B", "s": "Banana", "i": 2, "x": 2.0, "b": false],
            ["id": "c", "s": nil, "i": nil, "x": 0.5, "b": nil],
            ["id": "D", "s": "cherry", "i": 3, "x": nil, "b": true],
            ["id": "e", "s": "", "i": -1, "x": -1.0, "b": false],
            ["id": "F", "s": "APPLE", "i": 10, "x": 10.0, "b": nil],
        ]
        let s = Field("s")
        let i = Field("i")
        let x = Field("x")
        let b = Field("b")
        let all = ["a", "B", "c", "D", "e", "F"]
        typealias E = HandExpectation
        let expectations: [HandExpectation] = [
            E("i == 2", i == 2, ["B"]),
            E("i != 2 skips null", i != 2, ["a", "D", "e", "F"]),
            E("NOT i == 2 keeps null", !(i == 2), ["a", "c", "D", "e", "F"]),
            E("i > 1", i > 1, ["B", "D", "F"]),
            E("i isNull", i.isNull, ["c"]),
            E("i == nil", i == nil, ["c"]),
            E("i < nil", i < nil, []),
            E("s ==[c] apple", .compare(s, .equal, "apple", caseInsensitive: true), ["a", "F"]),
            E("s == apple", s == "apple", ["a"]),
            E("s startsWith[c] A", s.starts(with: "A", caseInsensitive: true), ["a", "F"]),
            E("s contains an", s.contains("an"), ["B"]),
            E("s contains empty", s.contains(""), ["a", "B", "D", "e", "F"]),
            E("NOT s contains a", !s.contains("a"), ["c", "D", "e", "F"]),
            E("i IN [1, 3, nil]", i.isIn([1, 3, nil]), ["a", "D"]),
            E("i BETWEEN 2 AND 10", i.isBetween(2, and: 10), ["B", "D", "F"]),
            E("x == i", x == i, ["B", "e", "F"]),
            E("x > i", x > i, ["a"]),
            E("i / 2 == 0 truncates", i / 2 == 0, ["a", "e"]),
            E("i % 3 == 1", i % 3 == 1, ["a", "F"]),
            E("i / 0 isNull", (i / 0).isNull, all),
            E("x % 2 == 0 truncates", x % 2 == 0, ["B", "c", "F"]),
            E("i + x == 4", i + x == 4, ["B"]),
            E("length(s) == 5", s.length == 5, ["a", "F"]),
            E("toUpper(s) == APPLE", s.uppercased == "APPLE", ["a", "F"]),
            E("b == false", b == false, ["B", "e"]),
            E("NOT b == true", !(b == true), ["B", "c", "e", "F"]),
            E("id == d", Field("id") == "d", ["D"]),
            E("id < C", Field("id") < "C", ["a", "B"]),
            E("id startsWith d", Field("id").starts(with: "d"), ["D"]),
            E("empty OR", .or([]), []),
            E("empty AND", .and([]), all),
            E("sort i descending", .true, sort: [SortKey("i", .descending)], ["F", "D", "B", "a", "e", "c"]),
            E("sort s ascending", .true, sort: [SortKey("s")], ["c", "e", "F", "B", "a", "D"]),
            E("sort b descending then x", .true, sort: [SortKey("b", .descending), SortKey("x")], ["D", "a", "e", "B", "c", "F"]),
            E("sort id descending", .true, sort: [SortKey("id", .descending)], ["F", "e", "D", "c", "B", "a"]),
        ]
        let table = Reference.Table(schema: schema, rows: rows)
        for e in expectations {
            try expectSameIds(
                PredicateData.rowIds(try Reference.select(table, where: e.predicate, sort: e.sort)), e.expected,
                "suite bug: the reference disagrees with the hand-written answer for \(e.label)")
        }
        try withStore(factory) { store in
            try store.defineTable(schema)
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 5), into: "Hand")
            for e in expectations {
                try expectSameIds(try readIds(store, Query("Hand", where: e.predicate, sort: e.sort)), e.expected, e.label)
            }
        }
    }

    /// Queries the table cannot answer fail with the documented code (`invalidQuery` for type errors,
    /// json comparisons and sorts, `[c]` on non-strings, nesting deeper than 200; `unknownColumn` for
    /// unknown fields), for reads and deletes alike, and delete nothing.
    public static func invalidQueriesAreRejected(_ factory: StoreFactory) throws {
        let n = Field("n")
        let name = Field("name")
        let flag = Field("flag")
        let at = Field("at")
        let bin = Field("bin")
        let doc = Field("doc")
        func deepNot(_ depth: Int) -> QueryPredicate { (0..<depth).reduce(n == 3) { p, _ in .not(p) } }
        func deepAnd(_ depth: Int) -> QueryPredicate { (0..<depth).reduce(n == 3) { p, _ in .and([p, .true]) } }
        func deepSum(_ depth: Int) -> QueryExpression { (0..<depth).reduce(n) { e, _ in e + 0 } }
        func deepLower(_ depth: Int) -> QueryExpression { (0..<depth).reduce(name) { e, _ in .toLower(e) } }
        func deepRound(_ depth: Int) -> QueryExpression { (0..<depth).reduce(Field("d")) { e, _ in e.rounded } }
        let d = Field("d")
        func deepFloorSum(_ depth: Int) -> QueryExpression { (0..<depth).reduce(d) { e, _ in (e + 0.5).floor } }
        let cases: [(String, Query, LocalStoreError.Code)] = [
            ("int column == string", Query("Sample", where: n == "3"), .invalidQuery),
            ("string column > int", Query("Sample", where: name > 3), .invalidQuery),
            ("bool column == int", Query("Sample", where: flag == 1), .invalidQuery),
            ("date column == string", Query("Sample", where: at == "2020-01-01"), .invalidQuery),
            ("date column < double", Query("Sample", where: at < 1.5), .invalidQuery),
            ("date column == a NaN date", Query("Sample", where: at == .literal(.date(Date(timeIntervalSinceReferenceDate: .nan)))), .invalidQuery),
            ("date column > an infinite date", Query("Sample", where: at > .literal(.date(Date(timeIntervalSinceReferenceDate: .infinity)))), .invalidQuery),
            ("date column IN with -infinity", Query("Sample", where: at.isIn([.date(Date(timeIntervalSinceReferenceDate: -.infinity))])), .invalidQuery),
            ("binary column == string", Query("Sample", where: bin == "x"), .invalidQuery),
            ("string column == int column", Query("Sample", where: name == n), .invalidQuery),
            ("bool column < date column", Query("Sample", where: flag < at), .invalidQuery),
            ("json column == json column", Query("Sample", where: doc == doc), .invalidQuery),
            ("json column == json literal", Query("Sample", where: doc == .literal(.json(["a": 1]))), .invalidQuery),
            ("json column == string", Query("Sample", where: doc == "s"), .invalidQuery),
            ("json column != string", Query("Sample", where: doc != "s"), .invalidQuery),
            ("string column == json literal", Query("Sample", where: name == .literal(.json("x"))), .invalidQuery),
            ("json column IN", Query("Sample", where: doc.isIn(["s"])), .invalidQuery),
            ("json literal in IN", Query("Sample", where: name.isIn([.json("x")])), .invalidQuery),
            ("json column BETWEEN", Query("Sample", where: doc.isBetween("a", and: "z")), .invalidQuery),
            ("sort on json", Query("Sample", sort: [SortKey("doc")]), .invalidQuery),
            ("sort on json descending after a valid key", Query("Sample", sort: [SortKey("n"), SortKey("DOC", .descending)]), .invalidQuery),
            ("[c] on ints", Query("Sample", where: .compare(n, .equal, 3, caseInsensitive: true)), .invalidQuery),
            ("[c] on dates", Query("Sample", where: .compare(at, .less, .literal(.date(date(0))), caseInsensitive: true)), .invalidQuery),
            ("[c] on booleans", Query("Sample", where: .compare(flag, .equal, true, caseInsensitive: true)), .invalidQuery),
            ("[c] string test on binary", Query("Sample", where: .string(.contains, bin, .literal(.binary([0])), caseInsensitive: true)), .invalidQuery),
            ("startsWith on a date column", Query("Sample", where: at.starts(with: "3")), .invalidQuery),
            ("contains on binary", Query("Sample", where: .string(.contains, bin, .literal(.binary([0])), caseInsensitive: false)), .invalidQuery),
            ("contains with a date pattern", Query("Sample", where: name.contains(.literal(.date(date(0))))), .invalidQuery),
            ("endsWith on json", Query("Sample", where: doc.ends(with: "s")), .invalidQuery),
            ("toLower of binary", Query("Sample", where: bin.lowercased == "3"), .invalidQuery),
            ("toUpper of a date", Query("Sample", where: at.uppercased == "X"), .invalidQuery),
            ("length of binary", Query("Sample", where: bin.length == 1), .invalidQuery),
            ("length compared with a string", Query("Sample", where: name.length == "6"), .invalidQuery),
            ("arithmetic on strings", Query("Sample", where: name + 1 == 2), .invalidQuery),
            ("arithmetic on booleans", Query("Sample", where: flag * 2 == 2), .invalidQuery),
            ("arithmetic on dates", Query("Sample", where: at + 1 > 0), .invalidQuery),
            ("arithmetic result compared with a string", Query("Sample", where: n + 1 == "2"), .invalidQuery),
            ("IN with a mismatching literal", Query("Sample", where: n.isIn(["3"])), .invalidQuery),
            ("IN mixing types", Query("Sample", where: name.isIn(["a", 1])), .invalidQuery),
            ("BETWEEN with mismatching bounds", Query("Sample", where: n.isBetween("a", and: "z")), .invalidQuery),
            ("BETWEEN a date with numbers", Query("Sample", where: at.isBetween(0, and: 1)), .invalidQuery),
            ("NOT over an invalid comparison", Query("Sample", where: !(flag == "true")), .invalidQuery),
            ("invalid comparison inside OR", Query("Sample", where: n == 1 || bin > 1), .invalidQuery),
            ("NOT nested 250 deep", Query("Sample", where: deepNot(250)), .invalidQuery),
            ("AND nested 250 deep", Query("Sample", where: deepAnd(250)), .invalidQuery),
            ("arithmetic nested 250 deep", Query("Sample", where: deepSum(250) == 3), .invalidQuery),
            ("toLower nested 250 deep", Query("Sample", where: deepLower(250) == "x"), .invalidQuery),
            ("NOT nested 1000 deep", Query("Sample", where: deepNot(1000)), .invalidQuery),
            ("indexof of a date", Query("Sample", where: at.indexOf("3") == 0), .invalidQuery),
            ("indexof with a binary pattern", Query("Sample", where: name.indexOf(.literal(.binary([0]))) == 0), .invalidQuery),
            ("indexof compared with a string", Query("Sample", where: name.indexOf("a") == "1"), .invalidQuery),
            ("concat of a string and a date", Query("Sample", where: name.concat(at) == "a"), .invalidQuery),
            ("concat of json", Query("Sample", where: doc.concat(name) == "a"), .invalidQuery),
            ("concat with a null literal", Query("Sample", where: name.concat(nil) == "a"), .invalidQuery),
            ("replace with a date", Query("Sample", where: name.replacing("a", with: at) == "x"), .invalidQuery),
            ("replace with two arguments", Query("Sample", where: .function(.replace, [name, "a"]) == "x"), .invalidQuery),
            ("substring with a double start", Query("Sample", where: name.substring(from: 1.5) == "x"), .invalidQuery),
            ("substring with a string length", Query("Sample", where: name.substring(from: 1, length: "2") == "x"), .invalidQuery),
            ("substring of binary", Query("Sample", where: bin.substring(from: 1) == "x"), .invalidQuery),
            ("substring without a start", Query("Sample", where: .function(.substring, [name]) == "x"), .invalidQuery),
            ("substring with four arguments", Query("Sample", where: .function(.substring, [name, 1, 2, 3]) == "x"), .invalidQuery),
            ("trim of a date", Query("Sample", where: at.trimmed == "x"), .invalidQuery),
            ("year of a string", Query("Sample", where: name.year == 2020), .invalidQuery),
            ("hour of an int", Query("Sample", where: n.hour == 1), .invalidQuery),
            ("second of a double", Query("Sample", where: d.second == 1), .invalidQuery),
            ("year compared with a date", Query("Sample", where: at.year == .literal(.date(date(0)))), .invalidQuery),
            ("year with two arguments", Query("Sample", where: .function(.year, [at, at]) == 1), .invalidQuery),
            ("round of a string", Query("Sample", where: name.rounded == 1), .invalidQuery),
            ("floor of a date", Query("Sample", where: at.floor == 1), .invalidQuery),
            ("ceiling of a boolean", Query("Sample", where: flag.ceiling == 1), .invalidQuery),
            ("ceiling compared with a string", Query("Sample", where: d.ceiling == "1"), .invalidQuery),
            ("round nested 250 deep", Query("Sample", where: deepRound(250) == 3), .invalidQuery),
            ("unknown field inside a function", Query("Sample", where: Field("nope").year == 1), .unknownColumn),
            ("unknown field", Query("Sample", where: Field("nope") == 1), .unknownColumn),
            ("unknown field inside arithmetic", Query("Sample", where: !(n + Field("nope") == 1)), .unknownColumn),
            ("unknown field in a null test", Query("Sample", where: Field("nope").isNull), .unknownColumn),
            ("unknown field compared with null", Query("Sample", where: Field("nope") == nil), .unknownColumn),
            ("unknown field in IN", Query("Sample", where: Field("nope").isIn([1])), .unknownColumn),
            ("unknown field in a string test", Query("Sample", where: Field("nope").contains("x")), .unknownColumn),
            ("unknown sort field", Query("Sample", sort: [SortKey("nope")]), .unknownColumn),
            ("unknown selected field", Query("Sample", select: ["name", "nope"]), .unknownColumn),
        ]
        try withStore(factory) { store in
            let table = try PredicateData.seed(store)
            for (label, query, code) in cases {
                try expectThrows(code: code, "read: \(label)") { try store.read(query) }
                var counted = query
                counted.includeTotalCount = true
                counted.top = 0
                try expectThrows(code: code, "count: \(label)") { try store.read(counted) }
                if query.select == nil {
                    try expectThrows(code: code, "delete(matching:): \(label)") { try store.delete(matching: query) }
                    try expectThrows(code: code, "delete(matching:) in a transaction: \(label)") {
                        try store.write { tx in try tx.delete(matching: query) }
                    }
                }
            }
            try expectEqual(try store.count("Sample"), table.rows.count, "invalid deletes delete nothing")
            // Nesting within the limit works and evaluates like the reference.
            for (label, predicate) in [("NOT nested 150 deep", deepNot(150)), ("AND nested 150 deep", deepAnd(150)),
                                       ("arithmetic nested 150 deep", deepSum(150) == 3), ("toLower nested 150 deep", deepLower(150) == "alpha"),
                                       ("round nested 150 deep", deepRound(150) == 3), ("floor nested 20 deep in sums", deepFloorSum(20) > 3)] {
                try expectSameIds(
                    try readIds(store, Query("Sample", where: predicate)), PredicateData.rowIds(try Reference.select(table, where: predicate, sort: [])),
                    label)
            }
        }
    }

    /// `delete(matching:)` deletes exactly the rows the same query returns, honouring predicate, order,
    /// skip and top, also inside a transaction.
    public static func deleteMatchingHonoursQuery(_ factory: StoreFactory) throws {
        let queries: [(String, Query)] = [
            ("predicate only", Query("Sample", where: Field("n") > 2)),
            ("predicate, sort, skip and top", Query("Sample", where: Field("n") >= 0, sort: [SortKey("d", .descending)], skip: 2, top: 4)),
            ("sort on a string, top only", Query("Sample", sort: [SortKey("name")], top: 5)),
            ("skip only, descending id", Query("Sample", sort: [SortKey("id", .descending)], skip: 40)),
            ("two keys with ties", Query("Sample", where: Field("tag").isNotNull, sort: [SortKey("tag"), SortKey("flag", .descending)], skip: 3, top: 7)),
            ("top 0 deletes nothing", Query("Sample", top: 0)),
            ("skip past the end deletes nothing", Query("Sample", skip: 100)),
            ("everything", Query("Sample")),
            ("select and count are irrelevant", Query("Sample", where: Field("flag") == true, top: 3, select: ["name"], includeTotalCount: true)),
        ]
        for (label, query) in queries {
            for inTransaction in [false, true] {
                try withStore(factory) { store in
                    _ = try PredicateData.seed(store)
                    var reading = query
                    reading.select = nil
                    let doomed = try readIds(store, reading)
                    let all = try readIds(store, Query("Sample"))
                    if inTransaction {
                        try store.write { tx in try tx.delete(matching: query) }
                    } else {
                        try store.delete(matching: query)
                    }
                    let doomedKeys = Set(doomed.map { Array($0.utf8) })
                    try expectSameIds(
                        try readIds(store, Query("Sample")), all.filter { !doomedKeys.contains(Array($0.utf8)) },
                        "\(label)\(inTransaction ? " (in a transaction)" : ""): rows left")
                }
            }
        }
    }

    /// Every skip/top window of an ascending sort with many ties equals the same slice of the full result.
    public static func pagingStableAscending(_ factory: StoreFactory) throws {
        try checkPaging(factory, sorts: [[], [SortKey("grp")], [SortKey("name")], [SortKey("score")], [SortKey("flag")]])
    }

    /// Every skip/top window of a descending sort with many ties equals the same slice of the full result.
    public static func pagingStableDescending(_ factory: StoreFactory) throws {
        try checkPaging(
            factory,
            sorts: [[SortKey("grp", .descending)], [SortKey("name", .descending)], [SortKey("score", .descending)], [SortKey("id", .descending)]])
    }

    /// Every skip/top window of a multi-key sort (and of a filtered sort) equals the same slice of the
    /// full result.
    public static func pagingStableMultiKey(_ factory: StoreFactory) throws {
        try checkPaging(
            factory,
            sorts: [
                [SortKey("grp"), SortKey("score", .descending)], [SortKey("flag", .descending), SortKey("name"), SortKey("grp", .descending)],
                [SortKey("score"), SortKey("id", .descending)],
            ])
        try checkPaging(factory, sorts: [[SortKey("name", .descending), SortKey("grp")]], predicate: Field("grp") != 1)
    }
}

/// The paging table: 50 rows, few distinct values per column (many ties), nulls, ids in two cases.
let pagingSchema = TableSchema("Paging", ["grp": .integer, "name": .string, "score": .double, "flag": .boolean], indexed: ["grp"])

let pagingRows: [Reference.Row] = (0..<50).map { (i: Int) -> Reference.Row in
    let names: [String?] = ["a", "B", "b", nil, "c"]
    let scores: [Double?] = [1.0, nil, 2.5, 1]
    let flags: [Bool?] = [true, false, nil]
    let id: String = (i % 2 == 0 ? "p" : "P") + (i < 10 ? "0\(i)" : "\(i)")
    var row: Reference.Row = [:]
    row["id"] = .string(id)
    row["grp"] = .int(Int64(i % 4))
    row["name"] = Value(names[i % 5])
    row["score"] = Value(scores[(i / 3) % 4])
    row["flag"] = Value(flags[(i / 7) % 3])
    return row
}

/// One hand-computed answer of ``ConformanceSuite/predicateHandWrittenExpectations(_:)``.
struct HandExpectation {
    let label: String
    let predicate: QueryPredicate
    let sort: [SortKey]
    let expected: [String]

    init(_ label: String, _ predicate: QueryPredicate, sort: [SortKey] = [], _ expected: [String]) {
        self.label = label
        self.predicate = predicate
        self.sort = sort
        self.expected = expected
    }
}

/// For each sort: the full result equals the reference, and every window (skip 0…50, several tops)
/// equals the same slice of it, with the total count.
func checkPaging(_ factory: StoreFactory, sorts: [[SortKey]], predicate: QueryPredicate? = nil) throws {
    try withStore(factory) { store in
        try store.defineTable(pagingSchema)
        try store.upsert(shuffled(pagingRows.map { Item($0) }, seed: 99), into: "Paging")
        let table = Reference.Table(schema: pagingSchema, rows: pagingRows)
        for sort in sorts {
            let label = sort.map { "\($0.field)\($0.direction == .descending ? " desc" : "")" }.joined(separator: ", ")
            let full = try readIds(store, Query("Paging", where: predicate, sort: sort))
            try expectSameIds(full, PredicateData.rowIds(try Reference.select(table, where: predicate, sort: sort)), "full result sorted by [\(label)]")
            for skip in 0...(full.count + 1) {
                for top in [1, 2, 3, 4, 5, 7, 10, 49, 50, 100] {
                    let page = try store.read(Query("Paging", where: predicate, sort: sort, skip: skip, top: top, includeTotalCount: skip % 2 == 0))
                    let expected = Array(full.dropFirst(skip).prefix(top))
                    try expectSameIds(try ids(page.items), expected, "sort [\(label)] skip \(skip) top \(top)")
                    if skip % 2 == 0 { try expectEqual(page.totalCount, full.count, "total count with skip \(skip) top \(top)") }
                }
            }
        }
    }
}
