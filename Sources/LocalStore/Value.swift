import Foundation

/// A single value stored in a column of a ``LocalStore`` table.
///
/// Every backend stores and returns these values exactly: integers as `Int64`, doubles bit for bit
/// (except that `NaN` is refused on write), dates with full `Date` precision, binary byte for byte and
/// json as the same nested structure.
public enum Value: Sendable, Hashable {
    /// The absence of a value (SQL `NULL`).
    case null
    /// A boolean. Sorts `false` before `true`.
    case bool(Bool)
    /// A 64-bit signed integer.
    case int(Int64)
    /// A double-precision number. `NaN` cannot be stored.
    case double(Double)
    /// A string, compared by its UTF-8 bytes unless a comparison asks for case-insensitivity.
    case string(String)
    /// A point in time, kept with full `Date` precision.
    case date(Date)
    /// Raw bytes.
    case binary([UInt8])
    /// A nested JSON document (object, array or scalar).
    case json(JSON)

    /// `true` for ``null``.
    @inlinable public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The string payload, or `nil` when this is not a ``string(_:)``.
    @inlinable public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer payload, or `nil` when this is not an ``int(_:)``.
    @inlinable public var intValue: Int64? {
        if case .int(let i) = self { return i }
        return nil
    }

    /// The numeric payload of an ``int(_:)`` or ``double(_:)`` as a `Double`.
    @inlinable public var doubleValue: Double? {
        switch self {
        case .double(let d): return d
        case .int(let i): return Double(i)
        default: return nil
        }
    }

    /// The boolean payload, or `nil` when this is not a ``bool(_:)``.
    @inlinable public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The date payload, or `nil` when this is not a ``date(_:)``.
    @inlinable public var dateValue: Date? {
        if case .date(let d) = self { return d }
        return nil
    }

    /// The bytes of a ``binary(_:)`` value.
    @inlinable public var binaryValue: [UInt8]? {
        if case .binary(let b) = self { return b }
        return nil
    }

    /// The document of a ``json(_:)`` value.
    @inlinable public var jsonValue: JSON? {
        if case .json(let j) = self { return j }
        return nil
    }

    /// A short name of the value's kind, used in error messages ("string", "int", ...).
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .int: return "int"
        case .double: return "double"
        case .string: return "string"
        case .date: return "date"
        case .binary: return "binary"
        case .json: return "json"
        }
    }
}

extension Value: CustomStringConvertible {
    /// A readable rendering, used in error messages. Long strings and binaries are abbreviated.
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .string(let s):
            let limit = 64
            if s.unicodeScalars.count > limit {
                return "\"" + String(String.UnicodeScalarView(s.unicodeScalars.prefix(limit))) + "…\" (\(s.utf8.count) bytes)"
            }
            return "\"" + s + "\""
        case .date(let d): return "date(\(d.timeIntervalSince1970))"
        case .binary(let b): return "binary(\(b.count) bytes)"
        case .json(let j):
            let text = j.jsonText
            return text.count > 64 ? "json(\(text.prefix(64))…)" : "json(\(text))"
        }
    }
}

extension Value: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral
{
    /// Creates ``null``.
    public init(nilLiteral: ()) { self = .null }
    /// Creates a ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// Creates an ``int(_:)``.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// Creates a ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// Creates a ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension Value {
    /// Wraps an optional string; `nil` becomes ``null``.
    public init(_ value: String?) { self = value.map(Value.string) ?? .null }
    /// Wraps an optional integer; `nil` becomes ``null``.
    public init(_ value: Int?) { self = value.map { .int(Int64($0)) } ?? .null }
    /// Wraps an optional 64-bit integer; `nil` becomes ``null``.
    public init(_ value: Int64?) { self = value.map(Value.int) ?? .null }
    /// Wraps an optional double; `nil` becomes ``null``.
    public init(_ value: Double?) { self = value.map(Value.double) ?? .null }
    /// Wraps an optional boolean; `nil` becomes ``null``.
    public init(_ value: Bool?) { self = value.map(Value.bool) ?? .null }
    /// Wraps an optional date; `nil` becomes ``null``.
    public init(_ value: Date?) { self = value.map(Value.date) ?? .null }
}
