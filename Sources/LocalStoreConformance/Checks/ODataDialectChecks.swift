import Foundation
import LocalStore

// The OData v4 dialect (the Datasync Community Toolkit's query strings): queries parsed from text,
// rendered back, and run on the backend, each answer hand-written and checked against the reference.

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
}
