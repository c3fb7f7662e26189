import Foundation
import LocalStore
import Testing

/// The OData v4 dialect (issue 39): what it renders, what it parses, what v3 parsing accepts of it, and
/// the errors of bad input.
@Suite("OData v4 dialect")
struct ODataV4Tests {
    static func utc(_ text: String) -> Date {
        guard let d = DeltaTokenFormat.date(from: text) else { fatalError("bad test date \(text)") }
        return d
    }

    @Test func renderingWritesTheV4Forms() throws {
        let q = Query(
            "Movies", where: Field("title").contains("the") && Field("updatedAt") > Self.utc("2024-05-01T10:20:30.123Z")
                && Field("rating").isIn([1, 2, 3]),
            sort: [SortKey("title")], skip: 5, top: 10, select: ["title"], includeTotalCount: true)
        #expect(
            try OData.parameters(for: q, dialect: .v4).map { "\($0.name)=\($0.value)" } == [
                "$filter=(contains(title,'the') and updatedAt gt cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset) and rating in (1,2,3))",
                "$orderby=title asc", "$skip=5", "$top=10", "$select=title", "$count=true",
            ])
        #expect(
            try OData.queryString(for: q, dialect: .v4)
                == "$filter=(contains(title,'the')%20and%20updatedAt%20gt%20cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)%20and%20rating%20in%20(1,2,3))&$orderby=title%20asc&$skip=5&$top=10&$select=title&$count=true"
        )
        // The default is v3, as before.
        #expect(try OData.queryString(for: q) == (try OData.queryString(for: q, dialect: .v3)))
        #expect(try OData.queryString(for: q).hasSuffix("&$inlinecount=allpages"))
        #expect(try OData.filter(Field("t").contains("x", caseInsensitive: true), dialect: .v4) == "contains(tolower(t),tolower('x'))")
        #expect(try OData.filter(Field("a").isIn([]), dialect: .v4) == "false")
        #expect(try OData.filter(Field("a").isIn(["x"]), dialect: .v4) == "a in ('x')")
        #expect(try OData.filter(!Field("a").isIn([.null, 2.5]), dialect: .v4) == "not (a in (null,2.5))")
        #expect(try OData.literal(.date(Self.utc("1970-01-01T00:00:00.000Z")), dialect: .v4) == "cast(1970-01-01T00:00:00.000Z,Edm.DateTimeOffset)")
        #expect(try OData.literal(.binary([0x00, 0xFF]), dialect: .v4) == "binary'AP8'")
        #expect(try OData.literal(.binary([]), dialect: .v4) == "binary''")
        #expect(try OData.literal(.binary([0xFB, 0xFF, 0xBF]), dialect: .v4) == "binary'-_-_'")
        #expect(try OData.literal(.string("it's"), dialect: .v4) == "'it''s'")
        let day = QueryExpression.dateOnly(Self.utc("1994-10-14T00:00:00Z"))
        #expect(try OData.filter(Field("releaseDate") == day, dialect: .v4) == "releaseDate eq cast(1994-10-14,Edm.Date)")
        #expect(try OData.filter(Field("releaseDate") == day) == "releaseDate eq datetimeoffset'1994-10-14T00:00:00.000Z'")
        // A day that is not a midnight UTC has no literal; neither has a date outside 0000–9999.
        for bad in [Self.utc("1994-10-14T00:00:00.001Z"), Date(timeIntervalSince1970: 253_402_300_800), Date(timeIntervalSinceReferenceDate: .nan)] {
            for dialect in [ODataDialect.v3, .v4] {
                let error = try #require(throws: LocalStoreError.self) { try OData.filter(Field("d") == .dateOnly(bad), dialect: dialect) }
                #expect(error.code == .invalidQuery)
                #expect(error.message.contains("midnight UTC"), "\(error.message)")
            }
        }
    }

    @Test func parsingReadsTheV4Forms() throws {
        let cases: [(String, QueryPredicate)] = [
            ("releaseDate eq cast(1994-10-14,Edm.Date)", Field("releaseDate") == .dateOnly(Self.utc("1994-10-14T00:00:00Z"))),
            ("releaseDate eq 1994-10-14", Field("releaseDate") == .dateOnly(Self.utc("1994-10-14T00:00:00Z"))),
            ("updatedAt gt cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)", Field("updatedAt") > Self.utc("2024-05-01T10:20:30.123Z")),
            ("updatedAt gt 2024-05-01T10:20:30.123Z", Field("updatedAt") > Self.utc("2024-05-01T10:20:30.123Z")),
            ("updatedAt gt cast( '2024-05-01T10:20:30.123Z' , Edm.DateTimeOffset )", Field("updatedAt") > Self.utc("2024-05-01T10:20:30.123Z")),
            ("updatedAt gt 2024-05-01T10:20Z", Field("updatedAt") > Self.utc("2024-05-01T10:20:00Z")),
            ("updatedAt gt 2024-05-01T12:20:30+02:00", Field("updatedAt") > Self.utc("2024-05-01T10:20:30Z")),
            ("updatedAt gt 2024-05-01T00:20:30-01:30", Field("updatedAt") > Self.utc("2024-05-01T01:50:30Z")),
            ("contains(title,'the')", Field("title").contains("the")),
            ("contains(title,'the') eq false", !Field("title").contains("the")),
            ("priority in (1,2,3)", Field("priority").isIn([1, 2, 3])),
            ("priority in ( -1 , 2.5 ,null)", Field("priority").isIn([.int(-1), .double(2.5), .null])),
            ("(priority add 1) in (2)", (Field("priority") + 1).isIn([2])),
            ("not (text in ('a','b''c')) and done", !Field("text").isIn(["a", "b'c"]) && .isTrue("done")),
            ("releaseDate in (1994-10-14,cast(2000-01-01T00:00:00.000Z,Edm.DateTimeOffset))",
             Field("releaseDate").isIn([.date(Self.utc("1994-10-14T00:00:00Z")), .date(Self.utc("2000-01-01T00:00:00Z"))])),
            ("id eq cast(D9C8BCF9-9C85-42E6-967B-C686D92F32CB,Edm.Guid)", Field("id") == "d9c8bcf9-9c85-42e6-967b-c686d92f32cb"),
            ("id eq d9c8bcf9-9c85-42e6-967b-C686D92F32CB", Field("id") == "d9c8bcf9-9c85-42e6-967b-c686d92f32cb"),
            ("id eq 12345678-9c85-42e6-967b-c686d92f32cb", Field("id") == "12345678-9c85-42e6-967b-c686d92f32cb"),
            ("data eq binary'AP8'", Field("data") == .literal(.binary([0x00, 0xFF]))),
            ("data eq binary'AP8='", Field("data") == .literal(.binary([0x00, 0xFF]))),
            ("data eq binary'-_-_'", Field("data") == .literal(.binary([0xFB, 0xFF, 0xBF]))),
            ("concat(concat(col1,'ies'),col2) eq 'brownies1'", Field("col1").concat("ies").concat(Field("col2")) == "brownies1"),
        ]
        for (text, expected) in cases {
            #expect(try OData.parseFilter(text, dialect: .v4) == expected, "\(text)")
        }
        let q = try OData.parseQuery("$count=true&$filter=releaseDate eq cast(1994-10-14,Edm.Date)&$top=5", table: "Movies", dialect: .v4)
        #expect(q.includeTotalCount)
        #expect(q.top == 5)
        #expect(try OData.parseQuery("$count=false", table: "Movies", dialect: .v4).includeTotalCount == false)
        // Options come back in the canonical order ($filter … $count), as the toolkit's client writes them.
        #expect(try OData.queryString(for: q, dialect: .v4) == "$filter=releaseDate%20eq%20cast(1994-10-14,Edm.Date)&$top=5&$count=true")
    }

    /// v3 parsing (the default) also reads every v4 form: none of them meant anything in v3 before.
    @Test func v3ParsingAcceptsTheV4Forms() throws {
        for text in [
            "releaseDate eq cast(1994-10-14,Edm.Date)", "updatedAt gt 2024-05-01T10:20:30.123Z", "contains(title,'the')",
            "priority in (1,2,3)", "id eq cast(d9c8bcf9-9c85-42e6-967b-c686d92f32cb,Edm.Guid)", "id eq d9c8bcf9-9c85-42e6-967b-c686d92f32cb",
        ] {
            #expect(try OData.parseFilter(text) == (try OData.parseFilter(text, dialect: .v4)), "\(text)")
        }
        #expect(try OData.parseQuery("$count=true", table: "T").includeTotalCount)
        // binary'…' keeps its v3 meaning there: hex digits.
        #expect(try OData.parseFilter("data eq binary'00FF'") == (Field("data") == .literal(.binary([0x00, 0xFF]))))
        #expect(try OData.parseFilter("data eq binary'00FF'", dialect: .v4) == (Field("data") == .literal(.binary([0xD3, 0x41, 0x45]))))
    }

    /// v4 parsing refuses the v3-only forms, naming them and their v4 spelling.
    @Test(arguments: [
        ("$filter=substringof('a',text)", "substringof() is OData v3"),
        ("$filter=d eq datetimeoffset'2024-05-01T10:20:30.123Z'", "datetimeoffset'…' is OData v3"),
        ("$filter=d eq datetime'2024-05-01T10:20:30.123Z'", "datetime'…' is OData v3"),
        ("$filter=id eq guid'd9c8bcf9-9c85-42e6-967b-c686d92f32cb'", "guid'…' is OData v3"),
        ("$filter=data eq X'00FF'", "X'…' is OData v3"),
        ("$inlinecount=allpages", "$inlinecount=allpages is OData v3; OData v4 writes $count=true"),
    ])
    func v4ParsingRefusesTheV3Forms(text: String, message: String) throws {
        #expect(throws: Never.self) { try OData.parseQuery(text, table: "T") }
        let error = try #require(throws: LocalStoreError.self) { try OData.parseQuery(text, table: "T", dialect: .v4) }
        #expect(error.code == .invalidQuery)
        #expect(error.message.contains(message), "\(error.message)")
    }

    /// Bad v4 input is `invalidQuery` naming the value at fault (and its position).
    @Test(arguments: [
        ("d eq cast(1994-02-29,Edm.Date)", "bad Edm.Date '1994-02-29'"),
        ("d eq cast(1994-13-01,Edm.Date)", "bad Edm.Date '1994-13-01'"),
        ("d eq cast(1994-10-14T00:00:00Z,Edm.Date)", "bad Edm.Date '1994-10-14T00:00:00Z'"),
        ("d eq cast(1994-10-14,Edm.DateTimeOffset)", "bad Edm.DateTimeOffset '1994-10-14'"),
        ("d eq cast(2024-05-01T24:00:00Z,Edm.DateTimeOffset)", "bad Edm.DateTimeOffset '2024-05-01T24:00:00Z'"),
        ("d eq cast(updatedAt,Edm.DateTimeOffset)", "bad Edm.DateTimeOffset 'updatedAt'"),
        ("d eq cast(10:20:30,Edm.TimeOfDay)", "the time of day '10:20:30' (Edm.TimeOfDay) has no LocalStore value type"),
        ("d eq cast(1,Edm.Int32)", "cast to 'Edm.Int32' is not supported"),
        ("d eq cast(1994-10-14)", "cast takes a value and a type"),
        ("d eq cast(1994-10-14,Edm.Date", "expected ) to close cast("),
        ("id eq cast(xyz,Edm.Guid)", "bad guid 'xyz'"),
        ("d eq 2023-02-29", "bad date '2023-02-29'"),
        ("d eq 2024-05-01T10:20:30.123", "bad date '2024-05-01T10:20:30.123'"),
        ("d eq 2024-05-01T10:20:30.123Zx", "unexpected text"),
        ("data eq binary'AP9'", "bad binary literal 'AP9' (base64url)"),
        ("data eq binary'A'", "bad binary literal 'A' (base64url)"),
        ("data eq binary'A+8'", "bad binary literal 'A+8' (base64url)"),
        ("n in ()", "an in list needs at least one value"),
        ("n in (1,m)", "an in list holds values (literals) only"),
        ("n in (1,(2))", "an in list holds values (literals) only"),
        ("n in 1", "expected ( after in"),
        ("n in (1,2", "expected ) to close the in list"),
        ("n in (1 2)", "expected , or ) in the in list"),
        ("length(n in (1)) eq 1", "a condition (in) is not a value"),
        ("cast(1994-10-14,Edm.Date)", "a value is not a condition"),
    ])
    func badInputNamesTheValue(filter: String, message: String) throws {
        let error = try #require(throws: LocalStoreError.self) { try OData.parseFilter(filter, dialect: .v4) }
        #expect(error.code == .invalidQuery)
        #expect(error.message.contains(message), "\(error.message)")
        #expect(error.message.contains("position "), "\(error.message)")
    }

    @Test func dayLiteralsMustBeMidnightsUTC() throws {
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("M", ["releaseDate": .date]))
        let error = try #require(throws: LocalStoreError.self) {
            try store.read(Query("M", where: Field("releaseDate") == .dateOnly(Self.utc("1994-10-14T12:00:00Z"))))
        }
        #expect(error.code == .invalidQuery)
        #expect(error.message.contains("not a midnight UTC"), "\(error.message)")
    }

    @Test func pullRequestsInV4() throws {
        let token = Date(timeIntervalSince1970: 1_700_000_000)
        let request = PullRequest(
            query: PullRequest.incremental(Query("TodoItem", where: Field("text").contains("a"), top: 50, includeTotalCount: true), since: token),
            parameters: [.init("tenant", "7")], dialect: .v4)
        let text = try request.queryString()
        #expect(
            text
                == "$filter=(contains(text,'a')%20and%20updatedAt%20ge%20cast(2023-11-14T22:13:20.000Z,Edm.DateTimeOffset))&$orderby=updatedAt%20asc&$skip=0&$top=50&$count=true&__includeDeleted=true&tenant=7"
        )
        let parsed = try PullRequest.parse(text, table: "TodoItem", dialect: .v4)
        #expect(parsed == request)
        #expect(try parsed.queryString() == text)
        // The toolkit's client spells the flag in lower case.
        let toolkit = try PullRequest.parse("$filter=done&$count=true&__includedeleted=true", table: "TodoItem", dialect: .v4)
        #expect(toolkit.includeDeleted)
        #expect(toolkit.parameters.isEmpty)
        #expect(toolkit.dialect == .v4)
        #expect(throws: LocalStoreError.self) { try PullRequest.parse("$inlinecount=allpages", table: "T", dialect: .v4) }
        // Existing calls keep v3.
        #expect(PullRequest(query: Query("T")).dialect == .v3)
        #expect(try PullRequest.parse("$skip=0", table: "T").dialect == .v3)
        #expect(ODataDialect.v3.description == "v3" && ODataDialect.v4.description == "v4")
    }

    /// .NET Core's `Double.ToString(CultureInfo.InvariantCulture)`, as the string functions read numbers.
    @Test(arguments: [
        (1.0, "1"), (-2.5, "-2.5"), (0.1, "0.1"), (100.0, "100"), (12345.678, "12345.678"), (1e14, "100000000000000"),
        (123_456_789_012_345.0, "123456789012345"), (1_234_567_890_123_456.0, "1234567890123456"), (1e15, "1E+15"), (1e16, "1E+16"),
        (1.5e300, "1.5E+300"), (0.0001, "0.0001"), (0.000123, "0.000123"), (0.00001, "1E-05"), (1.0 / 3, "0.3333333333333333"),
        (0.30000000000000004, "0.30000000000000004"), (-0.0, "-0"), (0.0, "0"), (Double.greatestFiniteMagnitude, "1.7976931348623157E+308"),
        (Double.leastNonzeroMagnitude, "5E-324"), (-1.2345678901234566e-7, "-1.2345678901234566E-07"), (9_007_199_254_740_992.0, "9007199254740992"),
        (Double.infinity, "Infinity"), (-Double.infinity, "-Infinity"),
    ])
    func doublesReadAsDotNetText(value: Double, text: String) throws {
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("N", ["x": .double, "s": .string]))
        try store.upsert([["id": "a", "s": "n="]], into: "N")
        // The literal goes through the same conversion as a column would; an infinity comes from
        // arithmetic that overflows (a non-finite literal is refused).
        let number: QueryExpression = value.isFinite ? .literal(.double(value)) : .literal(.double(value < 0 ? -1e308 : 1e308)) * 10.0
        let q = Query("N", where: Field("s").concat(number) == .literal(.string("n=" + text)))
        #expect(try store.read(q).items.count == 1, "\(value)")
    }

    @Test func stringFunctionsReadNumbersAndBooleansAsText() throws {
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("C", ["col1": .string, "col2": .integer, "x": .double, "b": .boolean]))
        try store.upsert(
            [
                ["id": "a", "col1": "brown", "col2": 1, "x": 2.5, "b": true], ["id": "b", "col1": "brown", "col2": 12, "x": 1e15, "b": false],
                ["id": "c", "col1": "fox", "col2": -7, "x": -0.0, "b": nil], ["id": "d", "col1": nil, "col2": nil, "x": nil, "b": true],
            ], into: "C")
        func ids(_ filter: String) throws -> [String] {
            try store.read(try OData.parseQuery("$filter=\(filter)&$orderby=id", table: "C", dialect: .v4)).items.compactMap(\.stringId)
        }
        #expect(try ids("concat(concat(col1,'ies'),col2) eq 'brownies1'") == ["a"])
        #expect(try ids("concat(col1,x) eq 'brown1E+15'") == ["b"])
        #expect(try ids("concat(col1,x) eq 'fox-0'") == ["c"])
        #expect(try ids("concat(col1,b) eq 'brownTrue'") == ["a"])
        #expect(try ids("concat(b,col2) eq 'False12'") == ["b"])
        #expect(try ids("length(col2) eq 2") == ["b", "c"])
        #expect(try ids("indexof(x,'.') eq 1") == ["a"])
        #expect(try ids("startswith(col2,'1')") == ["a", "b"])
        #expect(try ids("contains(x,'E+')") == ["b"])
        #expect(try ids("tolower(b) eq 'true'") == ["a", "d"])
        #expect(try ids("substring(col2,1) eq '7'") == ["c"])
        #expect(try ids("replace(x,'.5','½') eq '2½'") == ["a"])
        #expect(try ids("trim(col2) eq '12'") == ["b"])
        // Dates, binaries and json are still no text.
        try store.defineTable(TableSchema("D", ["t": .date]))
        #expect(throws: LocalStoreError.self) { try store.read(Query("D", where: Field("t").concat("x") == "y")) }
        #expect(throws: LocalStoreError.self) { try store.read(Query("D", where: Field("t").contains("x"))) }
    }
}
