import Foundation
import LocalStore

// The OData v4 dialect (the Datasync Community Toolkit's query strings) and the string functions'
// reading of numbers and booleans as text: queries parsed from text, rendered back, and run on the
// backend, each answer hand-written and checked against the reference.

extension ConformanceSuite {
    /// OData v4 query strings (`cast(1994-10-14,Edm.Date)`, `cast(…,Edm.DateTimeOffset)`, bare dates,
    /// `contains`, `in`, `$count=true`) parse with `ODataDialect.v4`, render back to the same text, read
    /// the same with v3's lenient parsing, and return the hand-computed rows and counts (the reference
    /// agrees with each answer).
    public static func odataV4Queries(_ factory: StoreFactory) throws {
        let schema = TableSchema(
            "Movies",
            ["title": .string, "releaseDate": .date, "rating": .double, "year": .integer, "bestPicture": .boolean, "updatedAt": .date])
        func utc(_ text: String) throws -> Value {
            guard let d = DeltaTokenFormat.date(from: text) else { throw ConformanceFailure("suite bug: bad date \(text)") }
            return .date(d)
        }
        let rows: [Reference.Row] = [
            ["id": "a", "title": "The Shawshank Redemption", "releaseDate": try utc("1994-10-14T00:00:00.000Z"), "rating": 9.3, "year": 1994,
             "bestPicture": false, "updatedAt": try utc("2024-05-01T10:20:30.123Z")],
            ["id": "b", "title": "Pulp Fiction", "releaseDate": try utc("1994-10-14T00:00:00.001Z"), "rating": 8.9, "year": 1994,
             "bestPicture": false, "updatedAt": try utc("2024-05-01T10:20:30.124Z")],
            ["id": "c", "title": "Forrest Gump", "releaseDate": try utc("1994-07-06T00:00:00.000Z"), "rating": 8.8, "year": 1994,
             "bestPicture": true, "updatedAt": try utc("2024-05-01T10:20:30.122Z")],
            ["id": "d", "title": "The Godfather", "releaseDate": try utc("1972-03-24T00:00:00.000Z"), "rating": 9.2, "year": 1972,
             "bestPicture": true, "updatedAt": try utc("2023-01-01T00:00:00.000Z")],
            ["id": "e", "title": "the room", "releaseDate": try utc("1994-10-13T23:59:59.999Z"), "rating": 3.6, "year": 2003,
             "bestPicture": nil, "updatedAt": nil],
            ["id": "f", "title": nil, "releaseDate": nil, "rating": nil, "year": nil, "bestPicture": nil, "updatedAt": nil],
        ]
        // Each filter as the v4 renderer writes it, so that it must render back identically.
        let examples: [(String, [String])] = [
            ("releaseDate eq cast(1994-10-14,Edm.Date)", ["a"]),
            ("releaseDate ge cast(1994-10-14,Edm.Date)", ["a", "b"]),
            ("releaseDate lt cast(1994-10-14,Edm.Date)", ["c", "d", "e"]),
            ("updatedAt gt cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)", ["b"]),
            ("updatedAt ge cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)", ["a", "b"]),
            ("contains(title,'The')", ["a", "d"]),
            ("contains(tolower(title),tolower('THE'))", ["a", "d", "e"]),
            ("year in (1972,2003)", ["d", "e"]),
            ("not (year in (1994))", ["d", "e", "f"]),
            ("(bestPicture eq true and year in (1994,1995))", ["c"]),
            ("releaseDate in (cast(1994-10-14T00:00:00.000Z,Edm.DateTimeOffset),cast(1972-03-24T00:00:00.000Z,Edm.DateTimeOffset))", ["a", "d"]),
            ("rating in (8.8,9.2)", ["c", "d"]),
            ("(year(releaseDate) eq 1994 and month(releaseDate) eq 10)", ["a", "b", "e"]),
            ("(contains(title,'The') or releaseDate eq cast(1994-07-06,Edm.Date))", ["a", "c", "d"]),
        ]
        // Other spellings a v4 client may send, with the canonical text each renders back to.
        let spellings: [(String, String)] = [
            ("releaseDate eq 1994-10-14", "releaseDate eq cast(1994-10-14,Edm.Date)"),
            ("updatedAt gt 2024-05-01T10:20:30.123Z", "updatedAt gt cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)"),
            ("updatedAt gt 2024-05-01T12:20:30.123+02:00", "updatedAt gt cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)"),
            ("bestPicture and year in ( 1994 , 1995 )", "(bestPicture eq true and year in (1994,1995))"),
        ]
        let table = Reference.Table(schema: schema, rows: rows)
        var queries: [(String, Query, [String])] = []
        for (text, expected) in examples {
            let encoded = "$filter=" + (text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text) + "&$count=true"
            let query = try OData.parseQuery(encoded, table: "Movies", dialect: .v4)
            try expect(query.includeTotalCount, "$count=true sets includeTotalCount: \(text)")
            try expectEqual(try query.predicate.map { try OData.filter($0, dialect: .v4) }, text, "the v4 filter renders back identically")
            let rendered = try OData.queryString(for: query, dialect: .v4)
            try expect(rendered.hasSuffix("&$count=true"), "the count renders as $count=true: \(rendered)")
            let again = try OData.parseQuery(rendered, table: "Movies", dialect: .v4)
            try expectEqual(again, query, "the rendered v4 query parses back: \(rendered)")
            try expectEqual(try OData.queryString(for: again, dialect: .v4), rendered, "render → parse → render in v4")
            // The options in another order read the same; v3's lenient parsing reads the same query.
            try expectEqual(try OData.parseQuery("$count=true&" + encoded.dropLast(12), table: "Movies", dialect: .v4), query, "$count first: \(text)")
            try expectEqual(try OData.parseQuery(encoded, table: "Movies"), query, "v3 parsing reads the v4 forms: \(text)")
            // In v3 the same query renders in v3's forms, which parse back to the same text.
            let v3 = try OData.queryString(for: query)
            try expect(v3.hasSuffix("&$inlinecount=allpages") && !v3.contains("cast("), "v3 forms: \(v3)")
            try expectEqual(try OData.queryString(for: try OData.parseQuery(v3, table: "Movies")), v3, "render → parse → render in v3")
            try expectSameIds(
                PredicateData.rowIds(try Reference.select(table, where: query.predicate, sort: [])), expected,
                "suite bug: the reference disagrees with the hand-written answer for \(text)")
            queries.append((text, query, expected))
        }
        for (text, canonical) in spellings {
            let query = try OData.parseQuery("$filter=\(text)", table: "Movies", dialect: .v4)
            try expectEqual(try query.predicate.map { try OData.filter($0, dialect: .v4) }, canonical, "\(text) renders as")
        }
        try withStore(factory) { store in
            try store.defineTable(schema)
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 39), into: "Movies")
            for (text, query, expected) in queries {
                let result = try store.read(query.sorted(by: "id"))
                try expectSameIds(try ids(result.items), expected, "v4 $filter=\(text)")
                try expectEqual(result.totalCount, expected.count, "$count=true of $filter=\(text)")
            }
        }
    }

    /// The string functions read a number or boolean argument as text, as the services' .NET servers
    /// convert it: integers in decimal, doubles as .NET's invariant `ToString()`, booleans `True` and
    /// `False`. `concat(concat(col1,'ies'),col2) eq 'brownies1'` with the integer `col2` = 1 finds the
    /// row. Every example in both dialects, with hand-written answers the reference agrees with.
    public static func stringFunctionsReadNumbersAsText(_ factory: StoreFactory) throws {
        let schema = TableSchema("Texts", ["col1": .string, "col2": .integer, "x": .double, "b": .boolean])
        let rows: [Reference.Row] = [
            ["id": "a", "col1": "brown", "col2": 1, "x": 2.5, "b": true],
            ["id": "b", "col1": "brown", "col2": 12, "x": 1e15, "b": false],
            ["id": "c", "col1": "fox", "col2": -7, "x": -0.0, "b": nil],
            ["id": "d", "col1": "fox", "col2": .int(.min), "x": 0.1, "b": true],
            ["id": "e", "col1": "jumps", "col2": 100_000_000_000_000, "x": 0.00001, "b": false],
            ["id": "f", "col1": nil, "col2": nil, "x": .double(1.0 / 3), "b": nil],
            ["id": "g", "col1": "over", "col2": 0, "x": 123_456_789_012_345.0, "b": true],
            ["id": "h", "col1": "the", "col2": 2, "x": 1.0, "b": false],
        ]
        // v4 text; the v3 text is the same with contains(a,b) written substringof(b,a).
        let examples: [(String, [String])] = [
            ("concat(concat(col1,'ies'),col2) eq 'brownies1'", ["a"]),
            ("concat(col1,col2) eq 'fox-9223372036854775808'", ["d"]),
            ("concat(col1,x) eq 'brown2.5'", ["a"]),
            ("concat(col1,x) eq 'brown1E+15'", ["b"]),
            ("concat(col1,x) eq 'fox-0'", ["c"]),
            ("concat(col1,x) eq 'fox0.1'", ["d"]),
            ("concat(col1,x) eq 'jumps1E-05'", ["e"]),
            ("concat(col1,x) eq 'over123456789012345'", ["g"]),
            ("concat(col1,x) eq 'the1'", ["h"]),
            ("concat('x',x) eq 'x0.3333333333333333'", ["f"]),
            ("concat(col1,b) eq 'brownTrue'", ["a"]),
            ("concat(b,col2) eq 'False12'", ["b"]),
            ("concat(col2,x) eq '22.5'", []),
            ("concat(col2,x) eq '12.5'", ["a"]),
            ("concat(col2,1.5) eq '21.5'", ["h"]),
            ("concat(col2,true) eq '0True'", ["g"]),
            ("length(col2) eq 2", ["b", "c"]),
            ("length(x) eq 5", ["b", "e"]),
            ("indexof(x,'.') eq 1", ["a", "d", "f"]),
            ("startswith(col2,'1')", ["a", "b", "e"]),
            ("endswith(x,'5')", ["a", "b", "e", "g"]),
            ("contains(x,'E')", ["b", "e"]),
            ("contains(col1,col2)", []),
            ("tolower(b) eq 'true'", ["a", "d", "g"]),
            ("toupper(b) eq 'FALSE'", ["b", "e", "h"]),
            ("substring(col2,1) eq '7'", ["c"]),
            ("replace(x,'.5','½') eq '2½'", ["a"]),
            ("trim(col2) eq '12'", ["b"]),
            ("concat((x mul 10),'') eq '25'", ["a"]),
        ]
        let table = Reference.Table(schema: schema, rows: rows)
        var parsed: [(String, Query, [String])] = []
        for (text, expected) in examples {
            let query = try OData.parseQuery("$filter=\(text)", table: "Texts", dialect: .v4)
            try expectEqual(try query.predicate.map { try OData.filter($0, dialect: .v4) }, text, "the v4 filter renders back identically")
            let v3 = try OData.filter(try unwrap(query.predicate), dialect: .v3)
            try expectEqual(try OData.parseFilter(v3), query.predicate, "the v3 text \(v3) parses to the same predicate")
            try expectSameIds(
                PredicateData.rowIds(try Reference.select(table, where: query.predicate, sort: [])), expected,
                "suite bug: the reference disagrees with the hand-written answer for \(text)")
            parsed.append((text, query, expected))
        }
        try withStore(factory) { store in
            try store.defineTable(schema)
            try store.upsert(shuffled(rows.map { Item($0) }, seed: 40), into: "Texts")
            for (text, query, expected) in parsed {
                try expectSameIds(try readIds(store, query.sorted(by: "id")), expected, "$filter=\(text)")
                try expectEqual(try store.count("Texts", where: query.predicate), expected.count, "count of $filter=\(text)")
                try expectSameIds(
                    try readIds(store, Query("Texts", where: .not(try unwrap(query.predicate)), sort: [SortKey("id")])),
                    PredicateData.rowIds(try Reference.select(table, where: .not(try unwrap(query.predicate)), sort: [])),
                    "NOT ($filter=\(text))")
            }
            // A date, binary or json argument is no text: invalidQuery naming the argument.
            for bad in ["concat(col1,cast(1994-10-14,Edm.Date)) eq 'x'", "contains(col1,binary'AA') eq true"] {
                let query = try OData.parseQuery("$filter=\(bad)", table: "Texts", dialect: .v4)
                let error = try expectThrows(code: .invalidQuery, "\(bad)") { try store.read(query) }
                try expect(error.message.contains("argument 2") || error.message.contains("binary"), "the error names the argument: \(error.message)")
            }
        }
    }
}

private func unwrap(_ p: QueryPredicate?) throws -> QueryPredicate {
    guard let p else { throw ConformanceFailure("suite bug: no predicate") }
    return p
}
