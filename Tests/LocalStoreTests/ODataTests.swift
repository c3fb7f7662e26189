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
