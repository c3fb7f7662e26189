import Foundation

/// Renders a ``Query`` as the OData query string a sync service accepts, so a sync client can send the
/// same query to the server when it pulls; ``parseQuery(_:table:dialect:)`` reads such a string back.
///
/// Every call takes an ``ODataDialect``: ``ODataDialect/v3`` (the default, Azure Mobile Apps 2.0.0) or
/// ``ODataDialect/v4`` (Datasync Community Toolkit 3.0.0).
///
/// ```swift
/// let q = Query("TodoItem", where: Field("text").contains("milk"), top: 10)
/// try OData.queryString(for: q)                 // "$filter=substringof('milk',text)&$top=10"
/// try OData.queryString(for: q, dialect: .v4)   // "$filter=contains(text,'milk')&$top=10"
/// ```
public enum OData {
    /// The query's OData parameters, in the order `$filter`, `$orderby`, `$skip`, `$top`, `$select`, then
    /// the count (`$inlinecount=allpages` in v3, `$count=true` in v4), with values not yet
    /// percent-encoded. Parameters the query does not use are left out.
    ///
    /// - Parameters:
    ///   - query: The query to render; its table is not part of the text.
    ///   - dialect: The OData version to write.
    public static func parameters(for query: Query, dialect: ODataDialect = .v3) throws -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        if let p = query.predicate { out.append(("$filter", try filter(p, dialect: dialect))) }
        if !query.sort.isEmpty {
            out.append(("$orderby", query.sort.map { "\($0.field) \($0.direction == .ascending ? "asc" : "desc")" }.joined(separator: ",")))
        }
        if query.skip != 0 { out.append(("$skip", String(query.skip))) }
        if let top = query.top { out.append(("$top", String(top))) }
        if let select = query.select { out.append(("$select", select.joined(separator: ","))) }
        if query.includeTotalCount { out.append(dialect == .v4 ? ("$count", "true") : ("$inlinecount", "allpages")) }
        return out
    }

    /// The parameters joined as a URL query string, values percent-encoded (RFC 3986 unreserved
    /// characters and `$ ' ( ) , :` are kept as they are).
    ///
    /// - Parameters:
    ///   - query: The query to render.
    ///   - dialect: The OData version to write.
    public static func queryString(for query: Query, dialect: ODataDialect = .v3) throws -> String {
        try parameters(for: query, dialect: dialect).map { "\($0.name)=\(percentEncode($0.value))" }.joined(separator: "&")
    }

    /// The `$filter` expression of a predicate.
    ///
    /// The dialects differ in `contains` (v3 `substringof('x',text)`, v4 `contains(text,'x')`), in
    /// ``QueryPredicate/in(_:_:)`` (v3 `(a eq 1 or a eq 2)`, v4 `a in (1,2)`) and in the literals of
    /// dates and binary values (``literal(_:dialect:)``).
    ///
    /// - Parameters:
    ///   - p: The predicate.
    ///   - dialect: The OData version to write.
    public static func filter(_ p: QueryPredicate, dialect: ODataDialect = .v3) throws -> String {
        func sub(_ q: QueryPredicate) throws -> String { try filter(q, dialect: dialect) }
        func value(_ e: QueryExpression, lower: Bool = false) throws -> String { try expression(e, lower: lower, dialect: dialect) }
        switch p {
        case .true: return "true"
        case .false: return "false"
        case .and(let ps):
            if ps.isEmpty { return "true" }
            return ps.count == 1 ? try sub(ps[0]) : "(" + (try ps.map(sub).joined(separator: " and ")) + ")"
        case .or(let ps):
            if ps.isEmpty { return "false" }
            return ps.count == 1 ? try sub(ps[0]) : "(" + (try ps.map(sub).joined(separator: " or ")) + ")"
        case .not(let inner): return "not (\(try sub(inner)))"
        case .compare(let l, let op, let r, let ci):
            let ops: [QueryPredicate.ComparisonOperator: String] = [
                .equal: "eq", .notEqual: "ne", .less: "lt", .lessOrEqual: "le", .greater: "gt", .greaterOrEqual: "ge",
            ]
            return "\(try value(l, lower: ci)) \(ops[op] ?? "eq") \(try value(r, lower: ci))"
        case .isNull(let e): return "\(try value(e)) eq null"
        case .isNotNull(let e): return "\(try value(e)) ne null"
        case .in(let e, let values):
            if values.isEmpty { return "false" }
            let subject = try value(e)
            if dialect == .v4 {
                return "\(subject) in (\(try values.map { try literal($0, dialect: dialect) }.joined(separator: ",")))"
            }
            let parts = try values.map { "\(subject) eq \(try literal($0, dialect: dialect))" }
            return parts.count == 1 ? parts[0] : "(" + parts.joined(separator: " or ") + ")"
        case .between(let e, let low, let high):
            let subject = try value(e)
            return "(\(subject) ge \(try literal(low, dialect: dialect)) and \(subject) le \(try literal(high, dialect: dialect)))"
        case .string(let op, let s, let pattern, let ci):
            let a = try value(s, lower: ci)
            let b = try value(pattern, lower: ci)
            switch op {
            case .startsWith: return "startswith(\(a),\(b))"
            case .endsWith: return "endswith(\(a),\(b))"
            case .contains: return dialect == .v4 ? "contains(\(a),\(b))" : "substringof(\(b),\(a))"
            }
        }
    }

    static func expression(_ e: QueryExpression, lower: Bool = false, dialect: ODataDialect) throws -> String {
        let text: String
        switch e {
        case .field(let name): text = name
        case .literal(let v): text = try literal(v, dialect: dialect)
        case .dateOnly(let d): text = try dateOnlyLiteral(d, dialect: dialect)
        case .arithmetic(let op, let l, let r):
            let ops: [QueryExpression.ArithmeticOperator: String] = [
                .add: "add", .subtract: "sub", .multiply: "mul", .divide: "div", .modulo: "mod",
            ]
            text = "(\(try expression(l, dialect: dialect)) \(ops[op] ?? "add") \(try expression(r, dialect: dialect)))"
        case .toLower(let inner): text = "tolower(\(try expression(inner, dialect: dialect)))"
        case .toUpper(let inner): text = "toupper(\(try expression(inner, dialect: dialect)))"
        case .length(let inner): text = "length(\(try expression(inner, dialect: dialect)))"
        case .function(let f, let args):
            text = "\(f.rawValue)(\(try args.map { try expression($0, dialect: dialect) }.joined(separator: ",")))"
        }
        return lower ? "tolower(\(text))" : text
    }

    /// An OData literal: `'text'` with `'` doubled, numbers, `true`/`false`, `null`, and in each dialect:
    ///
    /// | value  | ``ODataDialect/v3``                        | ``ODataDialect/v4``                                  |
    /// |--------|--------------------------------------------|------------------------------------------------------|
    /// | date   | `datetimeoffset'2024-05-01T10:20:30.123Z'` | `cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)`  |
    /// | binary | `X'00FF'` (hex)                            | `binary'AP8'` (base64url, no padding)                |
    ///
    /// Dates are UTC with milliseconds, years 0000 to 9999. Json, a non-finite number and a date outside
    /// those years have no literal form (`invalidQuery`, naming the value).
    ///
    /// - Parameters:
    ///   - v: The value.
    ///   - dialect: The OData version to write.
    public static func literal(_ v: Value, dialect: ODataDialect = .v3) throws -> String {
        switch v {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d):
            guard d.isFinite else { throw LocalStoreError(.invalidQuery, "the number \(d) has no OData literal") }
            var out: [UInt8] = []
            JSON.writeDouble(d, into: &out)
            return String(decoding: out, as: UTF8.self)
        case .string(let s): return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .date(let d):
            // The literal's form holds the years 0000 to 9999 (what the parser reads back).
            guard DeltaTokenFormat.isStorable(d) else {
                throw LocalStoreError(
                    .invalidQuery, "the date \(d.timeIntervalSinceReferenceDate) seconds from 2001-01-01 has no OData literal (years 0000 to 9999)")
            }
            let text = DeltaTokenFormat.string(from: d)
            return dialect == .v4 ? "cast(\(text),Edm.DateTimeOffset)" : "datetimeoffset'\(text)'"
        case .binary(let b):
            if dialect == .v4 { return "binary'\(Base64URL.encode(b))'" }
            let hex = Array("0123456789ABCDEF".utf8)
            var out = "X'"
            for byte in b {
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0xF)]))
            }
            return out + "'"
        case .json: throw LocalStoreError(.invalidQuery, "json values have no OData literal")
        }
    }

    /// The literal of a ``QueryExpression/dateOnly(_:)``: `cast(yyyy-MM-dd,Edm.Date)` in v4, the
    /// midnight as a v3 `datetimeoffset'…'`. A date that is not a midnight UTC of the years 0000 to 9999
    /// is `invalidQuery`.
    static func dateOnlyLiteral(_ d: Date, dialect: ODataDialect) throws -> String {
        guard let day = ODataDates.day(of: d) else {
            throw LocalStoreError(
                .invalidQuery,
                "the day \(d.timeIntervalSinceReferenceDate) seconds from 2001-01-01 is not a midnight UTC of the years 0000 to 9999")
        }
        return dialect == .v4 ? "cast(\(day),Edm.Date)" : try literal(.date(d), dialect: dialect)
    }

    static func percentEncode(_ s: String) -> String { percentEncode(s, keeping: "$'(),:") }

    /// `s` with every byte percent-encoded (uppercase hex) but RFC 3986's unreserved characters and the
    /// ASCII characters of `extra` (the query strings keep `$'(),:`; a URL path segment keeps none).
    package static func percentEncode(_ s: String, keeping extra: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        let kept = Set(extra.utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(b)
            case _ where kept.contains(b):
                out.append(b)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
