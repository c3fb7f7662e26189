import Foundation

/// The JSON form of items in the operation queue's `properties` and in error records, as the Azure
/// Mobile Apps SDKs serialise them: dates as `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` strings (UTC), binary as
/// base64 strings, json values nested as they are.
public enum ItemJSON {
    /// The item as a JSON object (keys as spelled in the item).
    public static func object(_ item: Item) -> JSON {
        var out: [String: JSON] = [:]
        for (key, value) in item { out[key] = json(value) }
        return .object(out)
    }

    /// One value as JSON.
    public static func json(_ value: Value) -> JSON {
        switch value {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .date(let d): return .string(DeltaTokenFormat.string(from: d))
        case .binary(let b): return .string(Data(b).base64EncodedString())
        case .json(let j): return j
        }
    }

    /// A JSON object as an item. With `schema`, values are converted to the column types where the
    /// SDK's serialisation changed them (date strings to dates, base64 strings to bytes, integers to
    /// doubles, anything to json for json columns); keys the schema does not know are kept as they are.
    /// `nil` when `json` is not an object.
    public static func item(_ json: JSON, schema: TableSchema? = nil) -> Item? {
        guard case .object(let members) = json else { return nil }
        var out = Item()
        for (key, member) in members { out.values[key] = value(member, type: schema?.column(named: key)?.type) }
        return out
    }

    static func value(_ json: JSON, type: ColumnType?) -> Value {
        switch (json, type) {
        case (.null, _): return .null
        case (.string(let s), .some(.date)): return DeltaTokenFormat.date(from: s).map(Value.date) ?? .string(s)
        case (.string(let s), .some(.binary)): return Data(base64Encoded: s).map { .binary(Array($0)) } ?? .string(s)
        case (.int(let i), .some(.double)): return .double(Double(i))
        case (_, .some(.json)): return .json(json)
        case (.bool(let b), _): return .bool(b)
        case (.int(let i), _): return .int(i)
        case (.double(let d), _): return .double(d)
        case (.string(let s), _): return .string(s)
        case (.array, _), (.object, _): return .json(json)
        }
    }
}
