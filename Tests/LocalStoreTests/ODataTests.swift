import Foundation
import LocalStore
import LocalStoreReliability
import Testing

@Suite("OData rendering")
struct ODataTests {
    @Test func fullQuery() throws {
        let q = Query(
            "TodoItem", where: Field("complete") == false && Field("priority") >= 2,
            sort: [SortKey("priority", .descending), SortKey("text")], skip: 20, top: 10, select: ["text", "priority"],
            includeTotalCount: true)
        #expect(
            try OData.parameters(for: q).map { "\($0.name)=\($0.value)" } == [
                "$filter=(complete eq false and priority ge 2)", "$orderby=priority desc,text asc", "$skip=20", "$top=10",
                "$select=text,priority", "$inlinecount=allpages",
            ])
        #expect(
            try OData.queryString(for: q)
                == "$filter=(complete%20eq%20false%20and%20priority%20ge%202)&$orderby=priority%20desc,text%20asc&$skip=20&$top=10&$select=text,priority&$inlinecount=allpages"
        )
    }

    @Test func emptyQueryHasNoParameters() throws {
        #expect(try OData.queryString(for: Query("TodoItem")) == "")
    }

    @Test func stringsAreQuotedWithDoubledQuotes() throws {
        #expect(try OData.filter(Field("text") == "it's") == "text eq 'it''s'")
        #expect(try OData.literal("''") == "''''''")
    }

    @Test func datesRenderAsDatetimeoffsetWithMilliseconds() throws {
        let d = Date(timeIntervalSince1970: 1_700_000_000.123)
        #expect(try OData.literal(.date(d)) == "datetimeoffset'2023-11-14T22:13:20.123Z'")
        #expect(try OData.literal(.date(Date(timeIntervalSince1970: 0))) == "datetimeoffset'1970-01-01T00:00:00.000Z'")
        #expect(try OData.literal(.date(Date(timeIntervalSince1970: 253_402_300_799.999))) == "datetimeoffset'9999-12-31T23:59:59.999Z'")
        #expect(try OData.literal(.date(Date(timeIntervalSince1970: -62_167_219_200))) == "datetimeoffset'0000-01-01T00:00:00.000Z'")
        // Outside the years 0000 to 9999 the text would not parse back; NaN and infinity trapped once.
        for t in [253_402_300_800.0, -62_167_219_200.001, .infinity, -.infinity, .nan] {
            #expect(throws: LocalStoreError.self) { try OData.literal(.date(Date(timeIntervalSince1970: t))) }
        }
    }

    @Test func stringFunctions() throws {
        #expect(try OData.filter(Field("text").contains("milk")) == "substringof('milk',text)")
        #expect(try OData.filter(Field("text").starts(with: "a")) == "startswith(text,'a')")
        #expect(try OData.filter(Field("text").ends(with: "z")) == "endswith(text,'z')")
        #expect(
            try OData.filter(Field("text").contains("Milk", caseInsensitive: true))
                == "substringof(tolower('Milk'),tolower(text))")
        #expect(try OData.filter(Field("text").equalsIgnoringCase("A")) == "tolower(text) eq tolower('A')")
        #expect(try OData.filter(Field("text").length > 3) == "length(text) gt 3")
        #expect(try OData.filter(Field("text").uppercased == "A") == "toupper(text) eq 'A'")
    }

    @Test func logicNullsListsAndArithmetic() throws {
        #expect(try OData.filter(!(Field("a") == 1)) == "not (a eq 1)")
        #expect(try OData.filter(Field("a").isNull) == "a eq null")
        #expect(try OData.filter(Field("a").isNotNull) == "a ne null")
        #expect(try OData.filter(Field("a").isIn([1, 2])) == "(a eq 1 or a eq 2)")
        #expect(try OData.filter(Field("a").isIn([])) == "false")
        #expect(try OData.filter(Field("a").isBetween(1, and: 5)) == "(a ge 1 and a le 5)")
        #expect(try OData.filter((Field("a") + 1) * 2 % 3 == 0) == "(((a add 1) mul 2) mod 3) eq 0")
        #expect(try OData.filter(Field("a") / 2.5 - 1 < 0) == "((a div 2.5) sub 1) lt 0")
        #expect(try OData.filter(.true) == "true")
        #expect(try OData.filter(.or([Field("a") == 1, Field("b") != "x"])) == "(a eq 1 or b ne 'x')")
    }

    @Test func literalsOfEveryKind() throws {
        #expect(try OData.literal(.double(1)) == "1.0")
        #expect(try OData.literal(.int(-5)) == "-5")
        #expect(try OData.literal(.bool(true)) == "true")
        #expect(try OData.literal(.null) == "null")
        #expect(try OData.literal(.binary([0x00, 0xAB])) == "X'00AB'")
        #expect(throws: LocalStoreError.self) { try OData.literal(.json(["a": 1])) }
        #expect(throws: LocalStoreError.self) { try OData.literal(.double(.nan)) }
    }
}

@Suite("OData parsing")
struct ODataParsingTests {
    typealias RNG = SplitMix

    static func literal(_ r: inout RNG) -> Value {
        switch r.next() % 7 {
        case 0: return .int(Int64(bitPattern: r.next()) >> Int64(r.next() % 63))
        case 1: return .double(Double(Int64(r.next() % 20000) - 10000) / 8)
        case 2: return .string(["", "it's", "a b", "é😀", "''", "x&y=z", "%41"][Int(r.next() % 7)])
        case 3: return .bool(r.next() % 2 == 0)
        case 4: return .date(Date(timeIntervalSince1970: Double(r.next() % 4_000_000_000_000) / 1000))
        case 5: return .binary((0..<Int(r.next() % 4)).map { _ in UInt8(truncatingIfNeeded: r.next()) })
        default: return .null
        }
    }

    static func expression(_ r: inout RNG, _ depth: Int) -> QueryExpression {
        switch depth > 2 ? r.next() % 2 : r.next() % 7 {
        case 0: return .field(["text", "priority", "complete", "updatedAt", "id"][Int(r.next() % 5)])
        case 1:
            // Now and then an Edm.Date day (a midnight UTC of the years 0000 to 9999).
            if r.next() % 8 == 0 { return .dateOnly(Date(timeIntervalSince1970: Double(Int64(r.next() % 3_652_424) - 719_528) * 86_400)) }
            return .literal(literal(&r))
        case 2: return .toLower(expression(&r, depth + 1))
        case 3: return .length(expression(&r, depth + 1))
        case 4: return .toUpper(expression(&r, depth + 1))
        case 5:
            let f = QueryFunction.allCases[Int(r.next() % UInt64(QueryFunction.allCases.count))]
            let count = f.argumentCounts.lowerBound + Int(r.next() % UInt64(f.argumentCounts.count))
            return .function(f, (0..<count).map { _ in expression(&r, depth + 1) })
        default:
            let ops: [QueryExpression.ArithmeticOperator] = [.add, .subtract, .multiply, .divide, .modulo]
            return .arithmetic(ops[Int(r.next() % 5)], expression(&r, depth + 1), expression(&r, depth + 1))
        }
    }

    static func predicate(_ r: inout RNG, _ depth: Int) -> QueryPredicate {
        let ci = r.next() % 3 == 0
        switch depth > 3 ? 5 + r.next() % 5 : r.next() % 10 {
        case 0: return .and((0..<Int(r.next() % 4)).map { _ in predicate(&r, depth + 1) })
        case 1: return .or((0..<Int(r.next() % 4)).map { _ in predicate(&r, depth + 1) })
        case 2: return .not(predicate(&r, depth + 1))
        case 3: return .in(expression(&r, depth), (0..<Int(r.next() % 3)).map { _ in literal(&r) })
        case 4: return .between(expression(&r, depth), literal(&r), literal(&r))
        case 5: return r.next() % 2 == 0 ? .true : .false
        case 6: return .isNull(expression(&r, depth))
        case 7: return .isNotNull(expression(&r, depth))
        case 8:
            let ops: [QueryPredicate.StringOperator] = [.startsWith, .endsWith, .contains]
            return .string(ops[Int(r.next() % 3)], expression(&r, depth), expression(&r, depth), caseInsensitive: ci)
        default:
            return .compare(
                expression(&r, depth), QueryPredicate.ComparisonOperator.allCases[Int(r.next() % 6)],
                expression(&r, depth), caseInsensitive: ci)
        }
    }

    /// In each dialect: random queries (every predicate, expression and literal kind) render, parse back
    /// in the same dialect and render to the same text.
    @Test(arguments: [UInt64(1), 2, 3, 4], [ODataDialect.v3, .v4])
    func renderParseRenderIsTheIdentity(seed: UInt64, dialect: ODataDialect) throws {
        var r = RNG(seed: seed)
        for _ in 0..<500 {
            var q = Query("TodoItem", where: Self.predicate(&r, 0))
            if r.next() % 2 == 0 { q.sort = [SortKey("priority", .descending), SortKey("text")] }
            if r.next() % 2 == 0 { q.skip = Int(r.next() % 100) }
            if r.next() % 2 == 0 { q.top = Int(r.next() % 100) }
            if r.next() % 2 == 0 { q.select = ["text", "id"] }
            q.includeTotalCount = r.next() % 2 == 0
            let text = try OData.queryString(for: q, dialect: dialect)
            let parsed = try OData.parseQuery(text, table: "TodoItem", dialect: dialect)
            #expect(try OData.queryString(for: parsed, dialect: dialect) == text)
        }
    }

    @Test func parsesWhatAServerClientWrites() throws {
        let q = try OData.parseQuery(
            "$filter=(complete eq false) and startswith(text,'buy')&$orderby=updatedAt desc&$top=50&$inlinecount=allpages",
            table: "TodoItem")
        #expect(q.predicate == .and([
            .compare(.field("complete"), .equal, .literal(.bool(false)), caseInsensitive: false),
            .string(.startsWith, .field("text"), .literal(.string("buy")), caseInsensitive: false),
        ]))
        #expect(q.sort == [SortKey("updatedAt", .descending)])
        #expect(q.top == 50)
        #expect(q.includeTotalCount)
    }

    /// The `$filter` examples of issue 11 parse to the Swift spelling of each function.
    @Test func functionExamplesParseToTheSwiftSpelling() throws {
        let col1 = Field("col1")
        let col4 = Field("col4")
        let val = Field("val")
        let examples: [(String, QueryPredicate)] = [
            ("indexof(col1,'ump') eq 1", col1.indexOf("ump") == 1),
            ("concat(concat(col1,'ies'),col2) eq 'brownies1'", col1.concat("ies").concat(Field("col2")) == "brownies1"),
            ("replace(col1,'j','p') eq 'pumped'", col1.replacing("j", with: "p") == "pumped"),
            ("substring(col1,1) eq 'ox'", col1.substring(from: 1) == "ox"),
            ("substring(col1,1,3) eq 'uic'", col1.substring(from: 1, length: 3) == "uic"),
            ("trim(col1) eq 'fox'", col1.trimmed == "fox"),
            ("year(col4) ge 1980", col4.year >= 1980),
            ("month(col4) eq 1", col4.month == 1),
            ("day(col4) eq 2", col4.day == 2),
            ("hour(col4) lt 12", col4.hour < 12),
            ("minute(col4) gt 0", col4.minute > 0),
            ("second(col4) ne 0", col4.second != 0),
            ("round(val) eq expected", val.rounded == Field("expected")),
            ("floor(val) eq 1", val.floor == 1),
            ("ceiling(val) eq -1", val.ceiling == -1),
            ("length(col1) eq 3", col1.length == 3),
            ("tolower(col1) eq 'a'", col1.lowercased == "a"),
            ("toupper(col1) eq 'A'", col1.uppercased == "A"),
            ("startswith(col1,'a')", col1.starts(with: "a")),
            ("endswith(col1,'a')", col1.ends(with: "a")),
            ("substringof('a',col1)", col1.contains("a")),
            ("substringof('a',col1) eq true", col1.contains("a")),
            ("startswith(col1,'a') eq false", !col1.starts(with: "a")),
            ("true eq endswith(col1,'a')", col1.ends(with: "a")),
            ("endswith(col1,'a') ne true", !col1.ends(with: "a")),
            ("col6 eq guid'd9c8bcf9-9c85-42e6-967b-c686d92f32cb'", Field("col6") == "d9c8bcf9-9c85-42e6-967b-c686d92f32cb"),
            ("col6 eq guid'D9C8BCF9-9C85-42E6-967B-C686D92F32CB'", Field("col6") == "d9c8bcf9-9c85-42e6-967b-c686d92f32cb"),
            ("done", .isTrue("done")),
            ("not done", !.isTrue("done")),
            ("(val add 1) mul 2 sub 3 div 4 mod 5 eq 0", (val + 1) * 2 - 3 / 4 % 5 == 0),
        ]
        for (text, expected) in examples {
            #expect(try OData.parseFilter(text) == expected, "\(text)")
        }
        // Rendering gives the canonical text back.
        #expect(try OData.filter(col1.indexOf("ump") == 1) == "indexof(col1,'ump') eq 1")
        #expect(try OData.filter(col1.substring(from: 1, length: 3) == "uic") == "substring(col1,1,3) eq 'uic'")
        #expect(try OData.filter(col1.concat("ies").concat(Field("col2")) == "brownies1") == "concat(concat(col1,'ies'),col2) eq 'brownies1'")
        #expect(try OData.filter(val.rounded == Field("expected")) == "round(val) eq expected")
        #expect(try OData.filter(col4.year >= 1980) == "year(col4) ge 1980")
    }

    @Test(arguments: [
        ("frobnicate(col1) eq 1", "unknown function frobnicate()"),
        ("frobnicate(col1)", "unknown function frobnicate()"),
        ("substring(col1) eq 'a'", "substring takes 2 or 3 arguments, not 1"),
        ("indexof(col1) eq 1", "indexof takes 2 arguments, not 1"),
        ("year(col4,col4) eq 1", "year takes 1 argument, not 2"),
        ("tolower(col1,col2) eq 'a'", "tolower takes 1 argument, not 2"),
        ("startswith(col1) eq true", "startswith takes 2 arguments, not 1"),
        ("year(col4)", "year() gives a value, not a condition"),
        ("length(startswith(col1,'a')) eq 1", "startswith() is a condition, not a value"),
        ("col6 eq guid'd9c8bcf9-9c85-42e6-967b'", "bad guid"),
        ("col6 eq guid'd9c8bcf9x9c85-42e6-967b-c686d92f32cb'", "bad guid"),
    ])
    func functionErrorsNameTheFault(filter: String, message: String) throws {
        #expect {
            try OData.parseFilter(filter)
        } throws: { error in
            guard let e = error as? LocalStoreError, e.code == .invalidQuery else { return false }
            return e.message.contains(message)
        }
    }

    @Test func parsedQueriesRunOnAStore() throws {
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("T", ["n": .integer, "s": .string]))
        try store.upsert([["id": "a", "n": 1, "s": "Milk"], ["id": "b", "n": 2, "s": "bread"]], into: "T")
        let q = try OData.parseQuery("$filter=substringof('milk',tolower(s)) or n gt 1&$orderby=n desc", table: "T")
        #expect(try store.read(q).items.compactMap(\.stringId) == ["b", "a"])
    }

    @Test(arguments: [
        ("n eq", 5), ("n eq 'abc", 6), ("(n eq 1", 8), ("n eq 1 )", 8), ("foo(n)", 1), ("n eq 1 and", 11),
        ("n add 1", 3), ("'x'", 1), ("n eq datetimeoffset'nope'", 20),
    ])
    func errorsGiveThePosition(filter: String, position: Int) throws {
        #expect {
            try OData.parseFilter(filter)
        } throws: { error in
            guard let e = error as? LocalStoreError, e.code == .invalidQuery else { return false }
            return e.message.contains("position \(position):")
        }
    }
}
