import Foundation
import LocalStore
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
    struct RNG: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

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
        switch depth > 2 ? r.next() % 2 : r.next() % 6 {
        case 0: return .field(["text", "priority", "complete", "updatedAt", "id"][Int(r.next() % 5)])
        case 1: return .literal(literal(&r))
        case 2: return .toLower(expression(&r, depth + 1))
        case 3: return .length(expression(&r, depth + 1))
        case 4: return .toUpper(expression(&r, depth + 1))
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

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func renderParseRenderIsTheIdentity(seed: UInt64) throws {
        var r = RNG(state: seed)
        for _ in 0..<500 {
            var q = Query("TodoItem", where: Self.predicate(&r, 0))
            if r.next() % 2 == 0 { q.sort = [SortKey("priority", .descending), SortKey("text")] }
            if r.next() % 2 == 0 { q.skip = Int(r.next() % 100) }
            if r.next() % 2 == 0 { q.top = Int(r.next() % 100) }
            if r.next() % 2 == 0 { q.select = ["text", "id"] }
            q.includeTotalCount = r.next() % 2 == 0
            let text = try OData.queryString(for: q)
            let parsed = try OData.parseQuery(text, table: "TodoItem")
            #expect(try OData.queryString(for: parsed) == text)
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
