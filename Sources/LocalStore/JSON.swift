/// A JSON document stored in a `json` column.
///
/// Integers and doubles are kept apart so that a document round-trips exactly: `1` stays ``int(_:)``
/// and `1.0` stays ``double(_:)``. Objects compare as dictionaries (key order is not significant);
/// ``jsonText`` writes their keys sorted by UTF-8 bytes, so equal documents have equal text.
public indirect enum JSON: Sendable, Hashable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits in `Int64`.
    case int(Int64)
    /// Any other finite number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object.
    case object([String: JSON])
}

extension JSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// Creates ``null``.
    public init(nilLiteral: ()) { self = .null }
    /// Creates ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// Creates ``int(_:)``.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// Creates ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// Creates ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
    /// Creates ``array(_:)``.
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    /// Creates ``object(_:)``; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, new in new }))
    }
}

// MARK: - Serialisation

extension JSON {
    /// The document as compact JSON text with object keys sorted by their UTF-8 bytes.
    public var jsonText: String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON text of the document to `out`.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): JSON.writeDouble(d, into: &out)
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (n, element) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                element.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            let keys = o.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (n, key) in keys.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                o[key, default: .null].write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// The number of UTF-8 bytes of ``jsonText``, computed without building the text.
    public var textByteCount: Int {
        switch self {
        case .null: return 4
        case .bool(let b): return b ? 4 : 5
        case .int(let i): return String(i).utf8.count
        case .double(let d):
            guard d.isFinite else { return 4 }
            let text = String(d)
            return text.utf8.count + (text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) ? 0 : 2)
        case .string(let s): return JSON.quotedByteCount(s)
        case .array(let a):
            var n = 2 + max(0, a.count - 1)
            for element in a { n += element.textByteCount }
            return n
        case .object(let o):
            var n = 2 + max(0, o.count - 1)
            for (key, element) in o { n += JSON.quotedByteCount(key) + 1 + element.textByteCount }
            return n
        }
    }

    /// The UTF-8 bytes ``writeString(_:into:)`` writes for `s`, quotes included.
    static func quotedByteCount(_ s: String) -> Int {
        var n = 2
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09: n += 2
            case 0..<0x20: n += 6
            default: n += 1
            }
        }
        return n
    }

    static func writeDouble(_ d: Double, into out: inout [UInt8]) {
        guard d.isFinite else {
            // Not representable in JSON; validation refuses these before they reach storage.
            out.append(contentsOf: "null".utf8)
            return
        }
        var text = String(d)  // shortest representation that round-trips
        if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) { text += ".0" }
        out.append(contentsOf: text.utf8)
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
            case 0x0A: out.append(contentsOf: "\\n".utf8)
            case 0x0D: out.append(contentsOf: "\\r".utf8)
            case 0x09: out.append(contentsOf: "\\t".utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The deepest nesting of arrays and objects a stored document may have (the parser's limit, so
    /// that everything written can be read back).
    public static let maximumDepth = 512

    /// Whether the document nests arrays/objects deeper than `limit` (recursion stops at `limit + 1`).
    public func isNested(deeperThan limit: Int) -> Bool {
        switch self {
        case .array(let a):
            if limit <= 0 { return true }
            return a.contains { $0.isNested(deeperThan: limit - 1) }
        case .object(let o):
            if limit <= 0 { return true }
            return o.values.contains { $0.isNested(deeperThan: limit - 1) }
        default:
            return false
        }
    }

    /// `true` when the document holds a non-finite double anywhere (which JSON cannot represent).
    public var containsNonFiniteNumber: Bool {
        switch self {
        case .double(let d): return !d.isFinite
        case .array(let a): return a.contains { $0.containsNonFiniteNumber }
        case .object(let o): return o.values.contains { $0.containsNonFiniteNumber }
        default: return false
        }
    }
}

// MARK: - Parsing

extension JSON {
    /// Parses JSON text. Throws ``LocalStoreError`` with code `invalidValue` on malformed input.
    public init(parsing text: String) throws {
        var copy = text
        self = try copy.withUTF8 { try JSON(parsing: $0) }
    }

    /// Parses UTF-8 JSON bytes. Throws ``LocalStoreError`` with code `invalidValue` on malformed input.
    public init(parsing bytes: UnsafeBufferPointer<UInt8>) throws {
        var parser = JSONParser(bytes: bytes)
        self = try parser.parseDocument()
    }

    /// Parses UTF-8 JSON bytes.
    public init(parsing bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBufferPointer { try JSON(parsing: $0) }
    }
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0
    static let maximumDepth = JSON.maximumDepth

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    func failure(_ what: String) -> LocalStoreError {
        LocalStoreError(.invalidValue, "malformed JSON: \(what) at byte \(index)")
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseDocument() throws -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw failure("trailing characters") }
        return value
    }

    mutating func expect(_ literal: String, _ value: JSON) throws -> JSON {
        for byte in literal.utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw failure("invalid literal") }
            index += 1
        }
        return value
    }

    mutating func parseValue() throws -> JSON {
        guard index < bytes.count else { throw failure("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "["):
            depth += 1
            defer { depth -= 1 }
            guard depth <= JSONParser.maximumDepth else { throw failure("nesting deeper than \(JSONParser.maximumDepth)") }
            index += 1
            var elements: [JSON] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            while true {
                skipWhitespace()
                elements.append(try parseValue())
                skipWhitespace()
                guard index < bytes.count else { throw failure("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
                throw failure("expected , or ]")
            }
        case UInt8(ascii: "{"):
            depth += 1
            defer { depth -= 1 }
            guard depth <= JSONParser.maximumDepth else { throw failure("nesting deeper than \(JSONParser.maximumDepth)") }
            index += 1
            var members: [String: JSON] = [:]
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected object key") }
                let key = try parseString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected :") }
                index += 1
                skipWhitespace()
                members[key] = try parseValue()
                skipWhitespace()
                guard index < bytes.count else { throw failure("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                throw failure("expected , or }")
            }
        default:
            return try parseNumber()
        }
    }

    mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            index += 1
            v <<= 4
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v |= UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v |= UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v |= UInt32(c - UInt8(ascii: "A") + 10)
            default: throw failure("bad \\u escape")
            }
        }
        return v
    }

    mutating func parseString() throws -> String {
        index += 1  // opening quote
        var out: [UInt8] = []
        while index < bytes.count {
            let c = bytes[index]
            index += 1
            switch c {
            case UInt8(ascii: "\""):
                guard let s = String(validating: out, as: UTF8.self) else { throw failure("invalid UTF-8 in string") }
                return s
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw failure("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw failure("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw failure("invalid code point") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw failure("invalid escape")
                }
            case 0..<0x20:
                throw failure("control character in string")
            default:
                out.append(c)
            }
        }
        throw failure("unterminated string")
    }

    mutating func parseNumber() throws -> JSON {
        let start = index
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        var digits = 0
        let firstDigit = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1; digits += 1 }
        guard digits > 0 else { throw failure("unexpected character") }
        guard digits == 1 || bytes[firstDigit] != UInt8(ascii: "0") else { throw failure("leading zero in number") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            var fraction = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1; fraction += 1 }
            guard fraction > 0 else { throw failure("bad number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            var exponent = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1; exponent += 1 }
            guard exponent > 0 else { throw failure("bad number") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { throw failure("number out of range") }
        return .double(d)
    }
}
