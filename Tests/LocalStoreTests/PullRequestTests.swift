import Foundation
import LocalStore
import Testing

@Suite("Pull query strings")
struct PullRequestTests {
    @Test("the first page: explicit $skip=0, __includeDeleted=true, user parameters verbatim")
    func firstPage() throws {
        let q = PullRequest.incremental(Query("TodoItem", where: Field("complete") == false, top: 50), since: nil)
        let request = PullRequest(query: q, parameters: [.init("key1", "someValue"), .init("key2", "14")])
        #expect(
            try request.queryString()
                == "$filter=(complete%20eq%20false%20and%20updatedAt%20ge%20datetimeoffset'1970-01-01T00:00:00.000Z')&$orderby=updatedAt%20asc&$skip=0&$top=50&__includeDeleted=true&key1=someValue&key2=14"
        )
        var next = request
        next.query.skip = 50
        #expect(try next.queryString().contains("&$skip=50&$top=50&"))
        let plain = PullRequest(query: Query("TodoItem"), includeDeleted: false)
        #expect(try plain.queryString() == "$skip=0")
        let token = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(
            try PullRequest(query: PullRequest.incremental(Query("TodoItem", top: 50), since: token), parameters: [.init("tenant", "7")]).queryString()
                == "$filter=updatedAt%20ge%20datetimeoffset'2023-11-14T22:13:20.000Z'&$orderby=updatedAt%20asc&$skip=0&$top=50&__includeDeleted=true&tenant=7")
    }

    static let requests: [PullRequest] = [
        PullRequest(query: Query("T")),
        PullRequest(query: Query("T", skip: 100, top: 0), includeDeleted: false),
        PullRequest(
            query: Query("T", where: Field("text").contains("a&b=c d'e") || Field("n") > 3, sort: [SortKey("n", .descending)], skip: 7, top: 10,
                select: ["text", "n"], includeTotalCount: true),
            parameters: [.init("a", ""), .init("x.y", "1,2;3"), .init("a", "again"), .init("key%20", "%41")]),
        PullRequest(query: PullRequest.incremental(Query("T", where: Field("n").isIn([1, 2])), since: Date(timeIntervalSince1970: 1.5)), parameters: [.init("p", "q")]),
    ]

    @Test("render → parse → render is the identity, in each dialect", arguments: requests, [ODataDialect.v3, .v4])
    func roundTrip(_ original: PullRequest, dialect: ODataDialect) throws {
        var request = original
        request.dialect = dialect
        let text = try request.queryString()
        let parsed = try PullRequest.parse(text, table: "T", dialect: dialect)
        #expect(try parsed.queryString() == text)
        #expect(parsed.dialect == dialect)
        #expect(parsed.parameters == request.parameters)
        #expect(parsed.includeDeleted == request.includeDeleted)
        #expect(parsed.query.skip == request.query.skip)
        #expect(parsed.query.top == request.query.top)
    }

    @Test("a parameter that cannot be sent verbatim is invalidQuery naming it")
    func badParameters() throws {
        let bad: [PullRequest.Parameter] = [
            .init("", "x"), .init("$filter", "x"), .init("__includeDeleted", "false"), .init("__INCLUDEDELETED", "x"), .init("a&b", "x"),
            .init("a=b", "x"), .init("a", "b&c"), .init("a", "b c"), .init("a", "b#c"), .init("a\u{0}", "x"), .init("a", "line\nbreak"),
        ]
        for p in bad {
            let request = PullRequest(query: Query("T"), parameters: [p])
            let error = try #require(throws: LocalStoreError.self) { try request.queryString() }
            #expect(error.code == .invalidQuery)
            #expect(error.message.contains(p.name.isEmpty ? "\"\"" : String(p.name.prefix(1))), "\(error.message)")
        }
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("__includeDeleted=maybe", table: "T") }
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("$bogus=1", table: "T") }
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("a b=1", table: "T") }
    }

    /// Issue 38, point 5: whitespace and control characters beyond ASCII, and a combining mark that
    /// would join the `&` before it into one Character, are refused; `$select` reads back only what
    /// renders the same.
    @Test("non-ASCII whitespace, controls and combining marks are invalidQuery; render → parse → render holds")
    func unicodeParameters() throws {
        for value in ["a\u{85}b", "a\u{2028}b", "a\u{A0}b", "a\u{200B}b", "\u{301}x"] {
            let request = PullRequest(query: Query("T"), parameters: [.init("p", value)])
            #expect(throws: LocalStoreError.self, "value \(value.unicodeScalars.map { String($0.value, radix: 16) })") { try request.queryString() }
        }
        #expect(throws: LocalStoreError.self) { try PullRequest(query: Query("T"), parameters: [.init("\u{301}", "x")]).queryString() }
        // `&` followed by a combining mark: split on the byte, so the mark starts the next name, which is refused.
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("$skip=0&a=1&\u{301}b=2", table: "T") }
        let two = try PullRequest.parse("$skip=0&a=1&b\u{301}=2", table: "T")
        #expect(two.parameters == [.init("a", "1"), .init("b\u{301}", "2")])
        #expect(try two.queryString() == "$skip=0&__includeDeleted=false&a=1&b\u{301}=2" || (try two.queryString()).hasSuffix("a=1&b\u{301}=2"))
        // `$select` with an empty or padded name is refused rather than read as something that renders differently.
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("$select=text, ", table: "T") }
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("$select=text,,n", table: "T") }
        let select = try PullRequest.parse("$skip=0&$select=text,n", table: "T")
        #expect(try select.queryString() == "$skip=0&$select=text,n")
    }
}
