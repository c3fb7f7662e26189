import Foundation
import LocalStore
import LocalStoreSync

/// JSON ↔ `Item` and the headers of both protocols (docs/sync-http.md, "Wire format").
enum WireFormat {
    /// The names of the system columns (lowercased) a client never sends in a body: the server sets
    /// them (2.0.0 back ends refuse a body holding `createdAt`, `updatedAt` or `deleted`), and the
    /// version travels in `If-Match`.
    static let systemColumns: Set<String> = Set(SystemProperty.allCases.map { ASCII.lowercased($0.columnName) })

    /// The body of an insert or a replace: every column of `item` but the system columns, dates as
    /// `yyyy-MM-ddTHH:mm:ss.SSSZ`, binary as base64.
    static func body(_ item: Item) -> [UInt8] {
        var members: [String: JSON] = [:]
        for (key, value) in item where !systemColumns.contains(ASCII.lowercased(key)) { members[key] = ItemJSON.json(value) }
        var out: [UInt8] = []
        JSON.object(members).write(into: &out)
        return out
    }

    /// An item of a response: converted to `schema`'s column types when there is one (dates, binary,
    /// doubles), the system columns always (`updatedAt`/`createdAt` to dates, `deleted` to a boolean,
    /// `version` to a string). `nil` when `json` is not an object.
    static func item(_ json: JSON, schema: TableSchema?) -> Item? {
        guard var item = ItemJSON.item(json, schema: schema) else { return nil }
        for (key, value) in item.values {
            switch ASCII.lowercased(key) {
            case "updatedat", "createdat":
                if case .string(let s) = value, let d = DeltaTokenFormat.date(from: s) { item.values[key] = .date(d) }
            case "deleted":
                if case .int(let i) = value { item.values[key] = .bool(i != 0) }
            case "version":
                switch value {
                case .int(let i): item.values[key] = .string(String(i))
                case .binary(let b): item.values[key] = .string(Data(b).base64EncodedString())
                default: break
                }
            default: break
            }
        }
        return item
    }

    /// `If-Match` for `version`: `"version"`; 2.0.0 escapes an inner `"` as `\"` (as its SDKs do),
    /// 3.0.0 refuses such a version (its client does): `nil` then.
    static func ifMatch(_ version: String, _ p: SyncServiceProtocol) -> String? {
        if p == .azureMobileApps { return "\"" + version.replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
        return version.contains("\"") ? nil : "\"" + version + "\""
    }

    /// The version an `ETag` header carries: quotes stripped, `\"` unescaped, a weak `W/` prefix dropped.
    static func version(fromETag etag: String) -> String? {
        var tag = Substring(etag.trimmingCharacters(in: .whitespaces))
        if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
        guard tag.count >= 2, tag.first == "\"", tag.last == "\"" else { return tag.isEmpty ? nil : String(tag) }
        return String(tag.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
    }

    /// Whether a `Link` header names a next page (`<url>; rel=next`, or the 2.0.0 servers' form
    /// without angle brackets).
    static func hasNextLink(_ link: String) -> Bool {
        link.split(separator: ",").contains { part in
            part.split(separator: ";").dropFirst().contains { param in
                let p = param.trimmingCharacters(in: .whitespaces).lowercased()
                return p == "rel=next" || p == "rel=\"next\""
            }
        }
    }

    /// The server's message in an error body: the `error`, `message`, `title` or `detail` member of a
    /// JSON object (2.0.0 back ends, ASP.NET problem details), else the body as text (at most 4,096
    /// characters), else `fallback`.
    static func message(_ body: [UInt8], fallback: String) -> String {
        if let json = try? JSON(parsing: body), case .object(let members) = json {
            for key in ["error", "message", "title", "detail", "description"] {
                if case .string(let s)? = members[key], !s.isEmpty { return s }
            }
        }
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return fallback }
        return text.count > 4096 ? String(text.prefix(4096)) + "…" : text
    }

    /// A path segment: RFC 3986 unreserved characters kept, every other byte percent-encoded (so an id
    /// holding `/`, `?`, `#` or `%` stays one segment).
    static func pathSegment(_ s: String) -> String { OData.percentEncode(s, keeping: "") }
}
