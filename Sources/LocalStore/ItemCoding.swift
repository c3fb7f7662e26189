import Foundation

/// Encodes a `Codable` record as an ``Item``, one column per stored property.
///
/// The mapping follows the column types: `String`, `UUID` and `URL` → string; integers → int;
/// `Double`/`Float` → double; `Bool` → bool; `Date` → date (full precision); `Data` → binary; a type that
/// encodes through `singleValueContainer()` (an enum with a `String` or `Int` raw value, a wrapper) → its
/// scalar, by the same rules, and ``ItemDecoder`` decodes it back from that scalar; any other
/// nested type (structs, arrays, dictionaries, enums with payloads) → json, through Foundation's
/// `JSONEncoder` (which writes a whole `Double` such as `2.0` as the json integer `2`; ``ItemDecoder`` reads
/// it back as the `Double`). A `nil` optional becomes an explicit null (which clears the column on upsert) unless
/// ``omitsNilValues`` is set.
///
/// ```swift
/// struct Todo: Codable { var id: String; var text: String; var due: Date? }
/// try store.upsert([try ItemEncoder().encode(Todo(id: "a", text: "milk", due: nil))], into: "Todo")
/// ```
public struct ItemEncoder: Sendable {
    /// When `true`, `nil` optionals are left out of the item (so an upsert keeps the stored value)
    /// instead of being written as null.
    public var omitsNilValues: Bool

    /// Creates an encoder.
    public init(omitsNilValues: Bool = false) { self.omitsNilValues = omitsNilValues }

    /// Encodes `value`, which must encode as a keyed container (a struct or class with properties).
    public func encode<T: Encodable>(_ value: T) throws -> Item {
        let encoder = TopLevelItemEncoder(omitsNil: omitsNilValues)
        try value.encode(to: encoder)
        guard encoder.storage.isKeyed else {
            throw LocalStoreError(.invalidValue, "\(T.self) does not encode as a keyed container, so it cannot be an item")
        }
        return Item(encoder.storage.values)
    }
}

/// Decodes a `Codable` record from an ``Item``: the inverse of ``ItemEncoder``. Keys are matched
/// case-insensitively; a missing key reads as null.
public struct ItemDecoder: Sendable {
    /// Creates a decoder.
    public init() {}

    /// Decodes a `T` from `item`.
    public func decode<T: Decodable>(_ type: T.Type, from item: Item) throws -> T {
        try T(from: TopLevelItemDecoder(item: item, codingPath: []))
    }
}

extension LocalStoreAccess {
    /// Encodes `records` with ``ItemEncoder`` and upserts them with `options` (for example
    /// ``UpsertOptions/ignoringUnknownColumns`` for records pulled from a server).
    ///
    /// A string, integer, double or boolean property (a single-value type such as a `String` enum
    /// included) written to a `json` column is stored as that json scalar.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func upsert<T: Encodable>(
        records: [T], into table: String, options: UpsertOptions = .strict, encoder: ItemEncoder = ItemEncoder()
    ) throws {
        var items = try records.map { try encoder.encode($0) }
        if let schema = try schema(of: table) {
            for i in items.indices {
                for (key, value) in items[i].values where schema.column(named: key)?.type == .json {
                    if let scalar = JSON(scalar: value) { items[i].values[key] = .json(scalar) }
                }
            }
        }
        try upsert(items, into: table, options: options)
    }

    /// Reads the row `id` of `table` as a `T`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read<T: Decodable>(_ type: T.Type, table: String, id: String) throws -> T? {
        try read(table: table, id: .string(id)).map { try ItemDecoder().decode(T.self, from: $0) }
    }

    /// Runs `query` and decodes every returned item as a `T`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read<T: Decodable>(_ type: T.Type, _ query: Query) throws -> [T] {
        let decoder = ItemDecoder()
        return try read(query).items.map { try decoder.decode(T.self, from: $0) }
    }
}

// MARK: - Encoding

private final class ItemStorage {
    var values: [String: Value] = [:]
    var isKeyed = false
}

private struct TopLevelItemEncoder: Encoder {
    let storage = ItemStorage()
    let omitsNil: Bool
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(omitsNil: Bool) { self.omitsNil = omitsNil }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        storage.isKeyed = true
        return KeyedEncodingContainer(ItemKeyedEncoder<Key>(storage: storage, omitsNil: omitsNil))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { RefusingUnkeyedEncoder() }
    func singleValueContainer() -> any SingleValueEncodingContainer { RefusingSingleValueEncoder() }
}

private struct ItemKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: ItemStorage
    let omitsNil: Bool
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { storage.values[key.stringValue] = .null }
    mutating func encode(_ value: Bool, forKey key: Key) throws { storage.values[key.stringValue] = .bool(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { storage.values[key.stringValue] = .string(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { storage.values[key.stringValue] = .double(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { storage.values[key.stringValue] = .double(Double(value)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { storage.values[key.stringValue] = .int(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { storage.values[key.stringValue] = .int(Int64(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws {
        guard let v = Int64(exactly: value) else { throw tooLarge(key, value) }
        storage.values[key.stringValue] = .int(v)
    }
    mutating func encode(_ value: UInt64, forKey key: Key) throws {
        guard let v = Int64(exactly: value) else { throw tooLarge(key, value) }
        storage.values[key.stringValue] = .int(v)
    }

    func tooLarge(_ key: Key, _ value: some BinaryInteger) -> LocalStoreError {
        LocalStoreError(.invalidValue, "property '\(key.stringValue)' holds \(value), which does not fit in Int64", column: key.stringValue)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        storage.values[key.stringValue] = try ItemValueMapping.value(of: value, key: key.stringValue)
    }

    // Synthesised Codable calls encodeIfPresent for optionals: write an explicit null unless omitted.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else if !omitsNil { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeOptional(value, key) }

    private mutating func encodeOptional<T: Encodable>(_ value: T?, _ key: Key) throws {
        try encodeIfPresent(value, forKey: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        // Only reached by hand-written `encode(to:)` that nests containers; such values belong in a json
        // column and should be wrapped in a Codable type of their own.
        storage.values[key.stringValue] = .null
        return KeyedEncodingContainer(ItemKeyedEncoder<NestedKey>(storage: ItemStorage(), omitsNil: omitsNil))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { RefusingUnkeyedEncoder() }
    mutating func superEncoder() -> any Encoder { TopLevelItemEncoder(omitsNil: omitsNil) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { TopLevelItemEncoder(omitsNil: omitsNil) }
}

enum ItemValueMapping {
    static func value<T: Encodable>(of value: T, key: String) throws -> Value {
        switch value {
        case let d as Date: return .date(d)
        case let d as Data: return .binary([UInt8](d))
        case let u as UUID: return .string(u.uuidString)
        case let u as URL: return .string(u.absoluteString)
        case let s as String: return .string(s)
        case let b as Bool: return .bool(b)
        case let i as Int: return .int(Int64(i))
        case let i as Int64: return .int(i)
        case let d as Double: return .double(d)
        case let v as Value: return v
        case let j as JSON: return .json(j)
        default:
            // A type that encodes through `singleValueContainer()` (a `String`/`Int`-backed enum, a wrapper)
            // is stored as its scalar, so it fits string, integer, double, boolean and date columns.
            if let scalar = try SingleValueProbe.scalar(of: value, key: key) { return scalar }
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var c = encoder.singleValueContainer()
                try c.encode(date.timeIntervalSinceReferenceDate)
            }
            encoder.nonConformingFloatEncodingStrategy = .throw
            do {
                return .json(try JSON(parsing: [UInt8](try encoder.encode(value))))
            } catch let error as LocalStoreError {
                throw error
            } catch {
                throw LocalStoreError(.invalidValue, "property '\(key)' cannot be encoded as json: \(error)", column: key)
            }
        }
    }
}

/// Encodes a value with an `Encoder` that only accepts `singleValueContainer()`. `scalar(of:key:)` gives the
/// value's scalar, or `nil` when the value asks for a keyed or unkeyed container (it then goes to json).
private final class SingleValueProbe: Encoder, SingleValueEncodingContainer {
    /// Thrown by the stand-in containers to stop encoding a value that is not a single value.
    struct NotASingleValue: Error {}

    let key: String
    var result: Value?
    var isSingleValue = true
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(key: String) { self.key = key }

    static func scalar<T: Encodable>(of value: T, key: String) throws -> Value? {
        let probe = SingleValueProbe(key: key)
        do {
            try value.encode(to: probe)
        } catch is NotASingleValue {
            return nil
        }
        guard probe.isSingleValue, let result = probe.result else { return nil }
        return result
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        isSingleValue = false
        return KeyedEncodingContainer(NotASingleValueKeyedEncoder<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        isSingleValue = false
        return NotASingleValueUnkeyedEncoder()
    }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    private func set(_ value: Value) throws {
        guard result == nil else {
            throw LocalStoreError(.invalidValue, "property '\(key)' encodes more than one value in a single-value container", column: key)
        }
        result = value
    }
    func encodeNil() throws { try set(.null) }
    func encode(_ value: Bool) throws { try set(.bool(value)) }
    func encode(_ value: String) throws { try set(.string(value)) }
    func encode(_ value: Double) throws { try set(.double(value)) }
    func encode(_ value: Float) throws { try set(.double(Double(value))) }
    func encode(_ value: Int) throws { try set(.int(Int64(value))) }
    func encode(_ value: Int8) throws { try set(.int(Int64(value))) }
    func encode(_ value: Int16) throws { try set(.int(Int64(value))) }
    func encode(_ value: Int32) throws { try set(.int(Int64(value))) }
    func encode(_ value: Int64) throws { try set(.int(value)) }
    func encode(_ value: UInt8) throws { try set(.int(Int64(value))) }
    func encode(_ value: UInt16) throws { try set(.int(Int64(value))) }
    func encode(_ value: UInt32) throws { try set(.int(Int64(value))) }
    func encode(_ value: UInt) throws { try set(try exact(value)) }
    func encode(_ value: UInt64) throws { try set(try exact(value)) }
    func encode<T: Encodable>(_ value: T) throws {
        // A nested single value (a wrapper of a wrapper, a wrapped Date); a nested keyed or unkeyed
        // value makes the whole value json.
        guard let inner = try Self.known(value) ?? SingleValueProbe.scalar(of: value, key: key) else {
            throw NotASingleValue()
        }
        try set(inner)
    }

    private static func known<T: Encodable>(_ value: T) -> Value? {
        switch value {
        case let d as Date: return .date(d)
        case let d as Data: return .binary([UInt8](d))
        case let u as UUID: return .string(u.uuidString)
        case let u as URL: return .string(u.absoluteString)
        default: return nil
        }
    }

    private func exact(_ value: some BinaryInteger) throws -> Value {
        guard let v = Int64(exactly: value) else {
            throw LocalStoreError(.invalidValue, "property '\(key)' holds \(value), which does not fit in Int64", column: key)
        }
        return .int(v)
    }
}

private struct NotASingleValueKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws { throw SingleValueProbe.NotASingleValue() }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw SingleValueProbe.NotASingleValue() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    { KeyedEncodingContainer(NotASingleValueKeyedEncoder<NestedKey>()) }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { NotASingleValueUnkeyedEncoder() }
    mutating func superEncoder() -> any Encoder { SingleValueProbe(key: "") }
    mutating func superEncoder(forKey key: Key) -> any Encoder { SingleValueProbe(key: "") }
}

private struct NotASingleValueUnkeyedEncoder: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws { throw SingleValueProbe.NotASingleValue() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw SingleValueProbe.NotASingleValue() }
    mutating func nestedContainer<K: CodingKey>(keyedBy keyType: K.Type) -> KeyedEncodingContainer<K> {
        KeyedEncodingContainer(NotASingleValueKeyedEncoder<K>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { SingleValueProbe(key: "") }
}

private struct RefusingUnkeyedEncoder: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws { throw refusal() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw refusal() }
    mutating func nestedContainer<K: CodingKey>(keyedBy keyType: K.Type) -> KeyedEncodingContainer<K> {
        KeyedEncodingContainer(ItemKeyedEncoder<K>(storage: ItemStorage(), omitsNil: false))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { TopLevelItemEncoder(omitsNil: false) }
    func refusal() -> LocalStoreError {
        LocalStoreError(.invalidValue, "an item must encode as a keyed container (a struct with properties), not an array")
    }
}

private struct RefusingSingleValueEncoder: SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil() throws { throw refusal() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw refusal() }
    func refusal() -> LocalStoreError {
        LocalStoreError(.invalidValue, "an item must encode as a keyed container (a struct with properties), not a single value")
    }
}

extension JSON {
    /// The json scalar for a string, integer, double or boolean value; `nil` for any other value.
    fileprivate init?(scalar value: Value) {
        switch value {
        case .string(let s): self = .string(s)
        case .int(let i): self = .int(i)
        case .double(let d): self = .double(d)
        case .bool(let b): self = .bool(b)
        default: return nil
        }
    }

    /// The value of a json string, integer, double or boolean; `nil` for null, arrays and objects.
    fileprivate var scalarValue: Value? {
        switch self {
        case .string(let s): return .string(s)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .bool(let b): return .bool(b)
        default: return nil
        }
    }
}

// MARK: - Decoding

private struct TopLevelItemDecoder: Decoder {
    let item: Item
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ItemKeyedDecoder<Key>(item: item))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch(
            [Any].self, .init(codingPath: codingPath, debugDescription: "an item decodes as a keyed container"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(
            Any.self, .init(codingPath: codingPath, debugDescription: "an item decodes as a keyed container"))
    }
}

private struct ItemKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let item: Item
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { item.values.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { item.value(forColumn: key.stringValue) != nil }

    /// The stored value, a json scalar read as the scalar (so a property written to a json column reads back).
    func value(_ key: Key) -> Value {
        let v = item.value(forColumn: key.stringValue) ?? .null
        if case .json(let j) = v, let scalar = j.scalarValue { return scalar }
        return v
    }

    func decodeNil(forKey key: Key) throws -> Bool { value(key).isNull }

    func mismatch<T>(_ type: T.Type, _ key: Key, _ v: Value) -> DecodingError {
        if v.isNull {
            return .valueNotFound(type, .init(codingPath: [key], debugDescription: "column '\(key.stringValue)' is null or absent"))
        }
        return .typeMismatch(
            type, .init(codingPath: [key], debugDescription: "column '\(key.stringValue)' holds \(v.kindName) \(v), not \(type)"))
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        guard case .bool(let b) = value(key) else { throw mismatch(type, key, value(key)) }
        return b
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        guard case .string(let s) = value(key) else { throw mismatch(type, key, value(key)) }
        return s
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        guard let d = value(key).doubleValue else { throw mismatch(type, key, value(key)) }
        return d
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }

    func integer<T: FixedWidthInteger>(_ type: T.Type, _ key: Key) throws -> T {
        guard case .int(let i) = value(key) else { throw mismatch(type, key, value(key)) }
        guard let v = T(exactly: i) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [key], debugDescription: "\(i) does not fit in \(T.self)"))
        }
        return v
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let stored = item.value(forColumn: key.stringValue) ?? .null
        if T.self == Value.self, let r = stored as? T { return r }
        if T.self == JSON.self {
            guard case .json(let j) = stored, let r = j as? T else { throw mismatch(type, key, stored) }
            return r
        }
        if case .json(let j) = stored, j.scalarValue == nil {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom { decoder in
                Date(timeIntervalSinceReferenceDate: try decoder.singleValueContainer().decode(Double.self))
            }
            return try decoder.decode(T.self, from: Data(j.jsonText.utf8))
        }
        // Scalars, and single-value types (enums with raw values, wrappers) stored as their scalar.
        return try ScalarDecoder(value: value(key), column: key).decode(T.self)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        throw DecodingError.typeMismatch(
            type, .init(codingPath: [key], debugDescription: "nested containers are stored as json; decode a Codable type"))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch(
            [Any].self, .init(codingPath: [key], debugDescription: "nested containers are stored as json; decode a Codable type"))
    }

    func superDecoder() throws -> any Decoder { TopLevelItemDecoder(item: item, codingPath: []) }
    func superDecoder(forKey key: Key) throws -> any Decoder { TopLevelItemDecoder(item: item, codingPath: [key]) }
}

/// Decodes one column's scalar value: the primitives, `Date`, `Data`, `UUID`, `URL`, and any type that
/// decodes through `singleValueContainer()`.
private struct ScalarDecoder: Decoder, SingleValueDecodingContainer {
    let value: Value
    let column: any CodingKey
    var codingPath: [any CodingKey] { [column] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func mismatch<T>(_ type: T.Type) -> DecodingError {
        if value.isNull {
            return .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "column '\(column.stringValue)' is null or absent"))
        }
        return .typeMismatch(
            type,
            .init(codingPath: codingPath, debugDescription: "column '\(column.stringValue)' holds \(value.kindName) \(value), not \(type)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw mismatch([String: Any].self) }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = value else { throw mismatch(type) }
        return b
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = value else { throw mismatch(type) }
        return s
    }
    func decode(_ type: Double.Type) throws -> Double {
        guard let d = value.doubleValue else { throw mismatch(type) }
        return d
    }
    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .int(let i) = value else { throw mismatch(type) }
        guard let v = T(exactly: i) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(i) in column '\(column.stringValue)' does not fit in \(T.self)"))
        }
        return v
    }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == Date.self {
            guard case .date(let d) = value, let r = d as? T else { throw mismatch(type) }
            return r
        }
        if T.self == Data.self {
            guard case .binary(let b) = value, let r = Data(b) as? T else { throw mismatch(type) }
            return r
        }
        if T.self == UUID.self {
            guard case .string(let s) = value, let u = UUID(uuidString: s), let r = u as? T else { throw mismatch(type) }
            return r
        }
        if T.self == URL.self {
            guard case .string(let s) = value, let u = URL(string: s), let r = u as? T else { throw mismatch(type) }
            return r
        }
        return try T(from: self)
    }
}
