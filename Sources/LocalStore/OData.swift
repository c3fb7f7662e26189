import Foundation

/// Renders a ``Query`` as the OData query string an Azure Mobile Apps server accepts, so a sync
/// client can send the same query to the server when it pulls.
///
/// ```swift
/// let q = Query("TodoItem", where: Field("text").contains("milk"), top: 10)
/// try OData.queryString(for: q)   // "$filter=substringof('milk',text)&$top=10"
/// ```
public enum OData {
    /// The query's OData parameters, in the order `$filter`, `$orderby`, `$skip`, `$top`, `$select`,
    /// `$inlinecount`, with values not yet percent-encoded. Parameters the query does not use are left out.
    public static func parameters(for query: Query) throws -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        if let p = query.predicate { out.append(("$filter", try filter(p))) }
        if !query.sort.isEmpty {
            out.append(("$orderby", query.sort.map { "\($0.field) \($0.direction == .ascending ? "asc" : "desc")" }.joined(separator: ",")))
        }
        if query.skip != 0 { out.append(("$skip", String(query.skip))) }
        if let top = query.top { out.append(("$top", String(top))) }
        if let select = query.select { out.append(("$select", select.joined(separator: ","))) }
        if query.includeTotalCount { out.append(("$inlinecount", "allpages")) }
        return out
    }

    /// The parameters joined as a URL query string, values percent-encoded (RFC 3986 unreserved
    /// characters and `$ ' ( ) , :` are kept as they are).
    public static func queryString(for query: Query) throws -> String {
        try parameters(for: query).map { "\($0.name)=\(percentEncode($0.value))" }.joined(separator: "&")
    }

    /// The `$filter` expression of a predicate.
    public static func filter(_ p: QueryPredicate) throws -> String {
        switch p {
        case .true: return "true"
        case .false: return "false"
        case .and(let ps):
            if ps.isEmpty { return "true" }
            return ps.count == 1 ? try filter(ps[0]) : "(" + (try ps.map(filter).joined(separator: " and ")) + ")"
        case .or(let ps):
            if ps.isEmpty { return "false" }
            return ps.count == 1 ? try filter(ps[0]) : "(" + (try ps.map(filter).joined(separator: " or ")) + ")"
        case .not(let inner): return "not (\(try filter(inner)))"
        case .compare(let l, let op, let r, let ci):
            let ops: [QueryPredicate.ComparisonOperator: String] = [
                .equal: "eq", .notEqual: "ne", .less: "lt", .lessOrEqual: "le", .greater: "gt", .greaterOrEqual: "ge",
            ]
            return "\(try expression(l, lower: ci)) \(ops[op] ?? "eq") \(try expression(r, lower: ci))"
        case .isNull(let e): return "\(try expression(e)) eq null"
        case .isNotNull(let e): return "\(try expression(e)) ne null"
        case .in(let e, let values):
            if values.isEmpty { return "false" }
            let subject = try expression(e)
            let parts = try values.map { "\(subject) eq \(try literal($0))" }
            return parts.count == 1 ? parts[0] : "(" + parts.joined(separator: " or ") + ")"
        case .between(let e, let low, let high):
            let subject = try expression(e)
            return "(\(subject) ge \(try literal(low)) and \(subject) le \(try literal(high)))"
        case .string(let op, let s, let pattern, let ci):
            let a = try expression(s, lower: ci)
            let b = try expression(pattern, lower: ci)
            switch op {
            case .startsWith: return "startswith(\(a),\(b))"
            case .endsWith: return "endswith(\(a),\(b))"
            case .contains: return "substringof(\(b),\(a))"
            }
        }
    }

    static func expression(_ e: QueryExpression, lower: Bool = false) throws -> String {
        let text: String
        switch e {
        case .field(let name): text = name
        case .literal(let v): text = try literal(v)
        case .arithmetic(let op, let l, let r):
            let ops: [QueryExpression.ArithmeticOperator: String] = [
                .add: "add", .subtract: "sub", .multiply: "mul", .divide: "div", .modulo: "mod",
            ]
            text = "(\(try expression(l)) \(ops[op] ?? "add") \(try expression(r)))"
        case .toLower(let inner): text = "tolower(\(try expression(inner)))"
        case .toUpper(let inner): text = "toupper(\(try expression(inner)))"
        case .length(let inner): text = "length(\(try expression(inner)))"
        case .function(let f, let args):
            text = "\(f.rawValue)(\(try args.map { try expression($0) }.joined(separator: ",")))"
        }
        return lower ? "tolower(\(text))" : text
    }

    /// An OData literal: `'text'` with `'` doubled, numbers, `true`/`false`, `null`,
    /// `datetimeoffset'yyyy-MM-ddTHH:mm:ss.SSSZ'` (years 0000 to 9999), `X'hex'` for binary. Json, a
    /// non-finite number and a date outside those years have no literal form (`invalidQuery`).
    public static func literal(_ v: Value) throws -> String {
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
            return "datetimeoffset'\(DeltaTokenFormat.string(from: d))'"
        case .binary(let b):
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

    static func percentEncode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "$"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
                UInt8(ascii: ","), UInt8(ascii: ":"):
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
