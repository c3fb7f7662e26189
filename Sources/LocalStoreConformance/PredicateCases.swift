import Foundation
import LocalStore

/// One predicate (with an optional sort) of the suite, checked against the reference evaluator.
///
/// ``check(_:)`` opens a fresh store, fills the `Sample` table with a fixed data set (nulls in every
/// column, mixed numbers, case variants, unicode, ties) in a seeded shuffled order, and compares
/// what the store returns with the suite's own evaluator: the ids in order, the items, the total
/// count, the negated predicate, a skip/top window and a `delete(matching:)` of a window.
public struct PredicateCase: Sendable, CustomStringConvertible {
    /// A readable, unique name.
    public let name: String
    /// The predicate.
    public let predicate: QueryPredicate
    /// The sort keys (the `id` tie-break is implied).
    public let sort: [SortKey]

    /// Creates a case.
    public init(_ name: String, _ predicate: QueryPredicate, sort: [SortKey] = []) {
        self.name = name
        self.predicate = predicate
        self.sort = sort
    }

    /// Runs the case against a fresh store of `factory`.
    public func check(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let table = try PredicateData.seed(store)
            try PredicateData.compare(store, table, predicate, sort: sort, context: name)
        }
    }

    /// The name.
    public var description: String { name }
}

/// The `Sample` data set of the predicate cases.
enum PredicateData {
    static let schema = TableSchema(
        name: "Sample",
        columns: [
            Column("id", .string), Column("name", .string, indexed: true), Column("tag", .string), Column("n", .integer, indexed: true),
            Column("d", .double), Column("flag", .boolean), Column("at", .date, indexed: true), Column("bin", .binary),
            Column("doc", .json),
        ])

    static let d0 = date(0)
    static let d1 = date(0.000_5)  // half a millisecond after d0
    static let d2 = date(86_400)
    static let d3 = date(-0.25)
    static let d4 = Date(timeIntervalSince1970: -300_000_000)  // 1960

    static let names: [String?] = [
        "alpha", "Alpha", "ALPHA", "beta", "Beta", nil, "gamma", "", "Zeta", "zeta", "éclair", "Éclair", "straße", "日本語",
        "👨‍👩‍👧 family", "O'Brien", "100% _done_", "nul\u{0}byte", "שלום",
    ]
    static let tags: [String?] = ["x", "y", "X", nil]
    static let ns: [Int64?] = [3, -2, 0, nil, 7, 3, 10, -7, 2, Int64.max, 1, nil, Int64.min, 5, -3]
    static let ds: [Double?] = [1.5, nil, 2.0, -0.5, 0.1, 3.0, 1e300, -2.0, 2.5, nil, 7.0, 0.0, -1e300]
    static let flags: [Bool?] = [true, false, nil]
    static let dates: [Date?] = [d0, d1, nil, d2, d0, d3, d4]
    static let bins: [[UInt8]?] = [[], [0], [0, 1], nil, [1], [255, 0]]
    static let docs: [JSON?] = [["a": 1], nil, [1, 2.5], "s", ["n": nil]]

    /// 48 rows; ids in three case variants (`row-01`, `Row-04`, `ROW-02`…) plus `Ärger` and `_under`.
    static let rows: [Reference.Row] = (1...48).map { i in
        let prefix = ["row-", "Row-", "ROW-"][i % 3]
        var id = prefix + (i < 10 ? "0\(i)" : "\(i)")
        if i == 47 { id = "Ärger" }
        if i == 48 { id = "_under" }
        var row: Reference.Row = [
            "id": .string(id),
            "name": Value(names[i % names.count]),
            "tag": Value(tags[i % tags.count]),
            "n": Value(ns[i % ns.count]),
            "d": Value(ds[i % ds.count]),
            "flag": Value(flags[(i / 2) % flags.count]),
            "at": Value(dates[i % dates.count]),
            "bin": bins[i % bins.count].map(Value.binary) ?? .null,
            "doc": docs[i % docs.count].map(Value.json) ?? .null,
        ]
        if i == 5 { row["name"] = "row-05" }  // equals its id "ROW-05" case-insensitively
        if i == 20 { row["name"] = "x" }  // equals its tag "x"
        if i == 21 { row["name"] = "Y" }  // equals its tag "y" case-insensitively
        if i == 30 {
            row["n"] = .int(9_007_199_254_740_993)  // 2^53 + 1: equal to 2^53 once converted to double
            row["d"] = .double(9_007_199_254_740_992)
        }
        if i == 31 {
            row["n"] = .int(Int64.max)
            row["d"] = .double(9.223_372_036_854_775_808e18)
        }
        return row
    }

    /// Defines `Sample` in `store`, inserts the rows in a seeded shuffled order (in three batches) and
    /// returns the reference table.
    static func seed(_ store: any LocalStore) throws -> Reference.Table {
        try store.defineTable(schema)
        let items = shuffled(rows, seed: 2024).map { Item($0) }
        try store.upsert(Array(items[..<16]), into: "Sample")
        try store.upsert(Array(items[16..<30]), into: "Sample")
        try store.upsert(Array(items[30...]), into: "Sample")
        return Reference.Table(schema: schema, rows: rows)
    }

    static func rowIds(_ rows: [Reference.Row]) -> [String] { rows.map { $0["id"]?.stringValue ?? "?" } }

    /// Compares the store with the reference for `predicate` under `sort`: ids in order, items,
    /// total count, the negation, two windows, then deletes a window and compares what is left.
    static func compare(
        _ store: any LocalStore, _ table: Reference.Table, _ predicate: QueryPredicate, sort: [SortKey], context: String
    ) throws {
        let expected = try Reference.select(table, where: predicate, sort: sort)
        let result = try store.read(Query("Sample", where: predicate, sort: sort, includeTotalCount: true))
        try expectSameIds(try ids(result.items), rowIds(expected), "\(context): ids in order")
        try expectEqual(result.totalCount, expected.count, "\(context): total count")
        for (item, row) in zip(result.items, expected) {
            try expectIdentical(item, Item(row), "\(context): item values")
        }

        let negated = try Reference.select(table, where: .not(predicate), sort: sort)
        try expectSameIds(try readIds(store, Query("Sample", where: .not(predicate), sort: sort)), rowIds(negated), "\(context): NOT")
        try expectEqual(expected.count + negated.count, table.rows.count, "suite bug in \(context): two-valued logic")

        for (skip, top) in [(2, 5), (0, 1)] {
            let window = try Reference.select(table, where: predicate, sort: sort, skip: skip, top: top)
            try expectSameIds(
                try readIds(store, Query("Sample", where: predicate, sort: sort, skip: skip, top: top)), rowIds(window),
                "\(context): skip \(skip) top \(top)")
        }

        let doomed = try Reference.select(table, where: predicate, sort: sort, skip: 1, top: 3)
        try store.delete(matching: Query("Sample", where: predicate, sort: sort, skip: 1, top: 3))
        let doomedKeys = Set(rowIds(doomed).map { Array($0.utf8) })
        let remaining = table.rows.filter { !doomedKeys.contains(Array(($0["id"]?.stringValue ?? "").utf8)) }
        let expectedRemaining = try Reference.select(Reference.Table(schema: schema, rows: remaining), where: nil, sort: [])
        try expectSameIds(try readIds(store, Query("Sample")), rowIds(expectedRemaining), "\(context): rows left after delete(matching:) skip 1 top 3")
    }
}

extension ConformanceSuite {
    /// The predicate cases: every comparison operator on every type, logic, null tests, IN, BETWEEN,
    /// string tests, functions, arithmetic, id comparisons and sorts. Each is checked against the
    /// suite's reference evaluator by ``PredicateCase/check(_:)``.
    public static let predicateCases: [PredicateCase] = makePredicateCases()
}

private func makePredicateCases() -> [PredicateCase] {
    let n = Field("n")
    let d = Field("d")
    let name = Field("name")
    let tag = Field("tag")
    let flag = Field("flag")
    let at = Field("at")
    let bin = Field("bin")
    let doc = Field("doc")
    let id = Field("id")
    let null = QueryExpression.literal(.null)
    func ci(_ l: QueryExpression, _ op: QueryPredicate.ComparisonOperator, _ r: QueryExpression) -> QueryPredicate {
        .compare(l, op, r, caseInsensitive: true)
    }
    func day(_ date: Date) -> QueryExpression { .literal(.date(date)) }
    func bytes(_ b: [UInt8]) -> QueryExpression { .literal(.binary(b)) }
    func asc(_ f: String) -> SortKey { SortKey(f) }
    func desc(_ f: String) -> SortKey { SortKey(f, .descending) }
    typealias C = PredicateCase
    let D = PredicateData.self

    return [
        // Integers.
        C("int ==", n == 3), C("int !=", n != 3), C("int <", n < 3), C("int <=", n <= 3), C("int >", n > 3), C("int >=", n >= 3),
        C("int == negative", n == -7), C("int == Int64.max", n == .literal(.int(.max))), C("int == Int64.min", n == .literal(.int(.min))),
        C("int < Int64.min matches nothing", n < .literal(.int(.min))), C("int literal on the left", 3 < n),
        // Integers meeting doubles (the integer is converted to double).
        C("int == double literal 3.0", n == 3.0), C("int >= double literal 2.5", n >= 2.5), C("int < double literal -2.5", n < -2.5),
        C("int == double column", n == d), C("int < double column", n < d), C("int >= double column", n >= d),
        C("double column > int column", d > n), C("int == 2^63 as double (converted)", n == 9.223_372_036_854_775_808e18),
        C("int 2^53+1 == double 2^53 (converted)", n == 9_007_199_254_740_992.0), C("int > 2^53 as double", n > 9_007_199_254_740_992.0),
        // Doubles.
        C("double == int literal", d == 2), C("double == 2.0", d == 2.0), C("double != 2.0", d != 2.0), C("double < 1.5", d < 1.5),
        C("double <= 1.5", d <= 1.5), C("double > 0.1", d > 0.1), C("double >= 0.1", d >= 0.1), C("double == 0.1", d == 0.1),
        C("double == 0", d == 0), C("double > 1e299", d > 1e299), C("double < -1e299", d < -1e299),
        // Strings (UTF-8 byte order).
        C("string ==", name == "alpha"), C("string !=", name != "alpha"), C("string <", name < "beta"), C("string <=", name <= "beta"),
        C("string > (upper case sorts first)", name > "Zeta"), C("string >=", name >= "zeta"), C("string == empty", name == ""),
        C("string > z (non-ASCII after ASCII)", name > "z"), C("string with NUL ==", name == "nul\u{0}byte"),
        C("string with NUL <", name < "nul\u{0}c"), C("string > its prefix before NUL", name > "nul"), C("string == apostrophe", name == "O'Brien"),
        C("string == percent and underscores", name == "100% _done_"), C("string column == string column", name == tag),
        C("string column < string column", tag < name),
        // Case-insensitive comparisons ([c], NOCASE).
        C("[c] ==", ci(name, .equal, "ALPHA")), C("[c] !=", ci(name, .notEqual, "alpha")), C("[c] <", ci(name, .less, "BETA")),
        C("[c] <=", ci(name, .lessOrEqual, "BETA")), C("[c] >", ci(name, .greater, "ZETA")), C("[c] >=", ci(name, .greaterOrEqual, "Gamma")),
        C("[c] == folds only ASCII", ci(name, .equal, "ÉCLAIR")), C("[c] == does not expand ß", ci(name, .equal, "STRASSE")),
        C("[c] == stops at NUL (NOCASE rule)", ci(name, .equal, "NUL\u{0}XXXX")), C("[c] column vs column", ci(name, .equal, tag)),
        C("[c] equalsIgnoringCase", name.equalsIgnoringCase("BeTa")), C("[c] < with NUL", ci(name, .less, "NUL\u{0}")),
        // Booleans.
        C("bool == true", flag == true), C("bool == false", flag == false), C("bool != true", flag != true), C("bool < true", flag < true),
        C("bool >= false", flag >= false), C("bool > false", flag > false),
        // Dates.
        C("date ==", at == day(D.d0)), C("date !=", at != day(D.d0)), C("date <", at < day(D.d1)),
        C("date > (sub-millisecond apart)", at > day(D.d0)), C("date >=", at >= day(D.d3)), C("date <= far past", at <= day(D.d4)),
        C("date BETWEEN", at.isBetween(.date(D.d3), and: .date(D.d1))),
        // Binary (bytes, then length).
        C("binary ==", bin == bytes([0, 1])), C("binary == empty", bin == bytes([])), C("binary <", bin < bytes([1])),
        C("binary >=", bin >= bytes([0])), C("binary > [255]", bin > bytes([255])), C("binary != [0]", bin != bytes([0])),
        // Logic (two-valued).
        C("AND", n > 0 && flag == true), C("OR", n > 0 || name == "beta"), C("NOT", !(n > 0)), C("NOT over null", !(n == 3)),
        C("NOT !=", !(n != 3)), C("empty AND is true", .and([])), C("empty OR is false", .or([])), C("TRUE", .true), C("FALSE", .false),
        C("NOT TRUE", .not(.true)), C("NOT empty AND", .not(.and([]))), C("single-element AND", .and([n == 3])),
        C("single-element OR", .or([n == 3])), C("nested AND, OR, NOT", (n > 0 || d > 0) && !(flag == false)),
        C("OR of AND and NOT OR", .or([.and([n >= 0, tag == "x"]), .not(.or([d < 2, d.isNull, name.isNull]))])),
        C("double NOT", .not(.not(n == 3))), C("NOT null test", !n.isNull), C("NOT contains (nulls match)", !name.contains("a")),
        C("NOT IN", !n.isIn([3, 7])), C("NOT BETWEEN", !n.isBetween(0, and: 5)), C("NOT (< null) matches all", !(n < nil)),
        C("AND with FALSE", n > 0 && .false), C("OR with TRUE", .or([n > 0, .true])), C("NOT AND of comparisons on nulls", !(n > 0 && d > 0)),
        // Null tests.
        C("isNull", n.isNull), C("isNotNull", name.isNotNull), C("== nil", n == nil), C("!= nil", n != nil),
        C("nil == field", null == d), C("nil != field", null != d), C("< nil matches nothing", n < nil), C(">= nil matches nothing", n >= nil),
        C("json isNull", doc.isNull), C("json isNotNull", doc.isNotNull), C("json == nil", doc == nil), C("bool isNull", flag.isNull),
        C("binary isNotNull", bin.isNotNull), C("date == nil", at == nil), C("string != nil", name != nil),
        C("arithmetic isNull", (n + 1).isNull), C("toLower isNotNull", name.lowercased.isNotNull), C("nil == nil", null == nil),
        C("nil != nil", null != nil),
        // IN.
        C("IN ints", n.isIn([1, 3, 5])), C("IN with null", n.isIn([1, nil])), C("IN only null", n.isIn([nil])), C("IN empty", n.isIn([])),
        C("IN strings", name.isIn(["alpha", "Beta", ""])), C("IN ids (case-insensitive)", id.isIn(["row-01", "ROW-02", "rOw-03", "nope"])),
        C("IN doubles with an int", d.isIn([2, 1.5, 0.1])), C("IN ints with doubles", n.isIn([3.0, 2.5])),
        C("IN dates", at.isIn([.date(D.d0), .date(D.d4)])), C("IN booleans", flag.isIn([false])), C("IN binary", bin.isIn([.binary([]), .binary([1])])),
        // BETWEEN.
        C("BETWEEN ints", n.isBetween(0, and: 5)), C("BETWEEN ints with double bounds", n.isBetween(-2.5, and: 2.5)),
        C("BETWEEN doubles", d.isBetween(1, and: 2.5)), C("BETWEEN strings", name.isBetween("a", and: "c")),
        C("BETWEEN null low bound", n.isBetween(nil, and: 5)), C("BETWEEN null high bound", n.isBetween(0, and: nil)),
        C("BETWEEN reversed bounds", n.isBetween(5, and: 0)), C("BETWEEN ids (case-insensitive)", id.isBetween("row-10", and: "ROW-20")),
        C("BETWEEN binary", bin.isBetween(.binary([0]), and: .binary([1]))),
        // String tests.
        C("startsWith", name.starts(with: "al")), C("startsWith [c]", name.starts(with: "AL", caseInsensitive: true)),
        C("endsWith", name.ends(with: "a")), C("endsWith [c]", name.ends(with: "A", caseInsensitive: true)), C("contains", name.contains("ph")),
        C("contains [c]", name.contains("PH", caseInsensitive: true)), C("contains empty pattern", name.contains("")),
        C("startsWith empty pattern", name.starts(with: "")), C("endsWith empty pattern [c]", name.ends(with: "", caseInsensitive: true)),
        C("contains % literally", name.contains("%")), C("contains _ literally", name.contains("_")), C("startsWith apostrophe", name.starts(with: "O'")),
        C("contains NUL", name.contains("\u{0}")), C("endsWith after NUL", name.ends(with: "byte")),
        C("contains [c] folds only ASCII", name.contains("É", caseInsensitive: true)), C("endsWith multi-byte", name.ends(with: "ße")),
        C("contains part of a ZWJ sequence", name.contains("👩")), C("startsWith longer than the subject", name.starts(with: "alphabet")),
        C("startsWith on id (case-insensitive)", id.starts(with: "row-1")), C("contains [c] on id", id.contains("W-2", caseInsensitive: true)),
        C("endsWith on id", id.ends(with: "R")), C("contains a column pattern", name.contains(tag)),
        C("startsWith [c] a column pattern", name.starts(with: tag, caseInsensitive: true)),
        // Functions.
        C("toLower ==", name.lowercased == "alpha"), C("toUpper == maps only ASCII", name.uppercased == "éCLAIR"),
        C("toUpper == ÉCLAIR", name.uppercased == "ÉCLAIR"), C("toUpper keeps ß", name.uppercased == "STRAßE"),
        C("length == 6", name.length == 6), C("length > 8 (Unicode scalars)", name.length > 8), C("length of empty string", name.length == 0),
        C("length counts past NUL", name.length == 8), C("length of a ZWJ family", name.length == 12),
        C("toLower of id compares bytes", id.lowercased == "row-01"), C("toUpper < literal", tag.uppercased < "Y"),
        C("length of toLower", name.lowercased.length == 5), C("toLower [c] startsWith", name.lowercased.starts(with: "A", caseInsensitive: true)),
        // OData string functions (positions and lengths in Unicode scalars, 0-based).
        C("indexOf == 2", name.indexOf("ph") == 2), C("indexOf absent is -1", name.indexOf("q") == -1),
        C("indexOf of the empty string is 0", name.indexOf("") == 0), C("indexOf counts scalars, not bytes", name.indexOf("本") == 1),
        C("indexOf after a ZWJ sequence", name.indexOf("f") == 6), C("indexOf past NUL", name.indexOf("byte") == 4),
        C("indexOf of an accented letter", name.indexOf("ß") == 4), C("indexOf is case-sensitive", name.indexOf("A") == 0),
        C("indexOf with a column pattern", name.indexOf(tag) >= 0), C("indexOf on id compares bytes", id.indexOf("W") == 2),
        C("indexOf isNull on null", name.indexOf("a").isNull), C("indexOf in arithmetic", name.indexOf("a") + 1 == 1),
        C("concat ==", name.concat(tag) == "alphax"), C("concat with empty", name.concat("") == name),
        C("concat keeps NUL", name.concat("!") == "nul\u{0}byte!"), C("concat of concat", name.concat("-").concat(tag) == "beta-y"),
        C("concat null is null", name.concat(tag).isNull), C("length of concat", name.concat(tag).length == 6),
        C("replace all occurrences", name.replacing("a", with: "o") == "olpho"), C("replace with empty", name.replacing("l", with: "") == "apha"),
        C("replace empty find keeps the string", name.replacing("", with: "x") == name), C("replace ß", name.replacing("ß", with: "ss") == "strasse"),
        C("replace is case-sensitive", name.replacing("A", with: "a") == "alpha"), C("replace NUL", name.replacing("\u{0}", with: " ") == "nul byte"),
        C("replace with a column", name.replacing("a", with: tag) == "xlphx"), C("replace removes every match", name.replacing("_", with: "") == "100% done"),
        C("substring from 1", name.substring(from: 1) == "lpha"), C("substring from 0", name.substring(from: 0) == name),
        C("substring from a negative start", name.substring(from: -3) == name), C("substring from past the end", name.substring(from: 100) == ""),
        C("substring from, length", name.substring(from: 1, length: 2) == "lp"), C("substring length 0", name.substring(from: 1, length: 0) == ""),
        C("substring negative length", name.substring(from: 1, length: -1) == ""),
        C("substring negative start with length", name.substring(from: -1, length: 3) == "al"),
        C("substring of scalars", name.substring(from: 1, length: 1) == "本"), C("substring splits a ZWJ sequence", name.substring(from: 0, length: 1) == "👨"),
        C("substring huge length", name.substring(from: 2, length: .literal(.int(.max))) == "pha"),
        C("substring Int64.min start", name.substring(from: .literal(.int(.min)), length: .literal(.int(.max))) == ""),
        C("substring with a column start", name.substring(from: n) == ""), C("substring with overflowing start", name.substring(from: n * 2) == ""),
        C("substring with column start and length", name.substring(from: n, length: n) == "ha"),
        C("substring past NUL", name.substring(from: 4) == "byte"),
        C("trim keeps an untrimmed string", name.trimmed == name), C("trim spaces", lit(" ").concat(name).concat("  ").trimmed == name),
        C("trim of spaces", QueryExpression.literal(.string("  ")).concat(tag).trimmed == "x"),
        C("trim only spaces, not NUL", name.trimmed.length == 8),
        // Numbers and booleans read as text by the string functions (integers in decimal, doubles as
        // .NET's invariant ToString, booleans True/False).
        C("startsWith on an int column (its text)", n.starts(with: "3")), C("contains with an int pattern", name.contains(3)),
        C("toLower of an int", n.lowercased == "3"), C("indexof of an int", n.indexOf("3") == 0),
        C("concat of a string and an int", name.concat(n).length > 3), C("substring of an int", n.substring(from: 1) == "7"),
        C("trim of a boolean", flag.trimmed == "True"), C("concat of a double", d.concat("").contains("E")),
        C("length of a double's text", d.length == 3), C("endsWith of overflowing int arithmetic", (n * 2).ends(with: "E+19")),
        C("toUpper of a boolean, [c]", flag.uppercased.equalsIgnoringCase("false")), C("concat of an infinity", (d * d).concat("") == "Infinity"),
        C("string test on a double, [c]", .string(.contains, d, lit("e"), caseInsensitive: true)),
        C("concat of two numbers", n.concat(d).starts(with: "3")),
        // OData date parts (UTC; before 1970 by floor division).
        C("year == 2020", at.year == 2020), C("year == 1960", at.year == 1960), C("year < 1970", at.year < 1970),
        C("month == 9", at.month == 9), C("month == 6", at.month == 6), C("day == 13", at.day == 13), C("day == 14", at.day == 14),
        C("hour == 12", at.hour == 12), C("hour == 4", at.hour == 4), C("minute == 26", at.minute == 26), C("minute == 20", at.minute == 20),
        C("second == 40", at.second == 40), C("second == 39 (a quarter second before)", at.second == 39),
        C("date parts combined", at.year * 10000 + at.month * 100 + at.day == 19_600_628),
        C("year isNull on null", at.year.isNull), C("second in IN", at.second.isIn([39, 40])),
        // OData rounding (halves away from zero).
        C("round == 2", d.rounded == 2), C("round == 3 (2.5 away from zero)", d.rounded == 3), C("round == -1 (-0.5)", d.rounded == -1),
        C("round == 0", d.rounded == 0), C("round > 1e299", d.rounded > 1e299), C("floor == -1", d.floor == -1), C("floor == 1", d.floor == 1),
        C("floor == 0", d.floor == 0), C("ceiling == 0", d.ceiling == 0), C("ceiling == 1", d.ceiling == 1), C("ceiling == 3", d.ceiling == 3),
        C("round of an integer", n.rounded == 3), C("floor of an integer", n.floor == -7), C("ceiling of Int64.max", n.ceiling == .literal(.int(.max))),
        C("round of int / double", (n / 2.0).rounded == 2), C("round of a negative half", (n / 2.0).rounded == -1),
        C("floor of int + 0.5", (n + 0.5).floor == n), C("round of overflowing int arithmetic", (n * 2).rounded > 1e18),
        C("floor of integer arithmetic stays integer", (n + 1).floor / 2 == 2), C("round isNull on null", d.rounded.isNull),
        C("round compared with a column", d.rounded == n), C("ceiling in IN", d.ceiling.isIn([2, 3])),
        C("floor of mod", (d % 2).floor == 1), C("floor of an infinity", (d * d).floor > 1e300),
        C("ceiling of a negative infinity", (d * d * -1).ceiling < -1e300),
        // Arithmetic.
        C("+", n + 1 == 4), C("- of columns", n - d > 0), C("*", n * 2 > 10), C("/ truncates", n / 2 == 1),
        C("/ truncates toward zero", n / 2 == -1), C("int / 0 is null", (n / 0).isNull), C("double / 0 is null", (d / 0).isNull),
        C("int / 0.0 is null", (n / 0.0).isNull), C("double /", d / 2 == 0.75), C("int / double", n / 2.0 == 1.5),
        C("mod", n % 3 == 1), C("mod by a negative", n % -3 == -1), C("mod of a negative", n % 3 == -1), C("mod of doubles", d % 2 == 1),
        C("mod by 0 is null", (n % 0).isNull), C("mod truncates a double divisor", n % 2.5 == 1), C("mod by 0.5 is null", (n % 0.5).isNull),
        C("mod by -1", n % -1 == 0), C("mod of huge doubles saturates", d % 7 == 0), C("mod result is double", d % 2 == 1.0),
        C("* overflow becomes double", n * 2 > 1e18), C("- overflow becomes double", n - 1 < -1e18), C("+ overflow", n + n > 1e18),
        C("Int64.min / -1 becomes double", n / -1 > 1e18), C("int + double", n + d == 5.0), C("int + 0.5", n + 0.5 > 3),
        C("double * double overflows to infinity", d * d > 1e300), C("infinity - infinity is null", (d * d - d * d).isNull),
        C("int * int overflow is positive", n * n > 0), C("arithmetic on literals", QueryExpression.literal(.int(7)) / 2 == 3),
        C("nested arithmetic", (n + 1) * (n - 1) == 8), C("arithmetic on both sides", n * 2 == d + d), C("subtract to zero", n - n == 0),
        // Ids (compared with NOCASE).
        C("id == lower case", id == "row-01"), C("id == upper case", id == "ROW-01"), C("id !=", id != "row-01"), C("id <", id < "ROW-10"),
        C("id >= with field in another case", Field("ID") >= "row-40"), C("id <= underscore", id <= "_zzz"), C("id [c]", id.equalsIgnoringCase("rOw-07")),
        C("string column == id (case-insensitive)", name == id), C("id > z (non-ASCII)", id > "z"), C("id literal on the left", "ROW-45" < id),
        // Sorts.
        C("sort int ascending", .true, sort: [asc("n")]), C("sort int descending", .true, sort: [desc("n")]),
        C("sort string ascending (bytes)", .true, sort: [asc("name")]), C("sort string descending", .true, sort: [desc("name")]),
        C("sort double ascending", .true, sort: [asc("d")]), C("sort double descending", .true, sort: [desc("d")]),
        C("sort bool ascending", .true, sort: [asc("flag")]), C("sort bool descending", .true, sort: [desc("flag")]),
        C("sort date ascending", .true, sort: [asc("at")]), C("sort date descending", .true, sort: [desc("at")]),
        C("sort binary ascending", .true, sort: [asc("bin")]), C("sort binary descending", .true, sort: [desc("bin")]),
        C("sort two keys", .true, sort: [asc("tag"), desc("n")]), C("sort three keys", .true, sort: [desc("tag"), asc("name"), asc("d")]),
        C("sort id descending", .true, sort: [desc("id")]), C("sort id ascending then name", .true, sort: [asc("id"), asc("name")]),
        C("sort field named in another case", .true, sort: [asc("NAME")]), C("sort repeated key", .true, sort: [asc("n"), desc("n")]),
        C("sort bool, date, binary", .true, sort: [desc("flag"), asc("at"), desc("bin")]),
        C("filter and sort descending", n > 0, sort: [desc("d")]), C("string test and two sorts", name.contains("a"), sort: [desc("name"), asc("n")]),
        C("sort string column then id descending", tag.isNotNull, sort: [asc("tag"), desc("id")]),
    ]
}
