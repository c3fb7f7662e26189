import Foundation
import LocalStore

/// The binary record formats (see docs/lmdb.md, "Record format").
///
/// ```
/// record1 := version(0x01) varint(rowId) varint(columnCount) value*
/// record2 := version(0x02) varint(columnCount) tag[columnCount] varint(rowId) payload[columnCount]
/// value   := tag payload
/// tag payload := 0x00 null | 0x01 false | 0x02 true | 0x03 zigzag-varint int
///          | 0x04 double(8 bytes, bit pattern, little-endian)
///          | 0x05 varint(length) utf8 | 0x06 date(8 bytes: timeIntervalSinceReferenceDate bits)
///          | 0x07 varint(length) bytes | 0x08 json
/// json    := 0x00 null | 0x01 false | 0x02 true | 0x03 zigzag-varint | 0x04 double(8)
///          | 0x05 varint(length) utf8 | 0x06 varint(count) json* | 0x07 varint(count) (varint(length) utf8 json)*
/// ```
///
/// Version 2 (``Layout/tagsFirst``, written by stores of format 3) keeps the column tags together
/// before the payloads: a boolean or a null (a tag without payload) is read at a fixed offset, without
/// skipping the columns before it. Version 1 (``Layout/inline``) is what stores of formats 1 and 2
/// write; every reader accepts both.
///
/// Columns are stored by position (columns are only ever appended, so positions are stable); a
/// record shorter than the schema reads null for the missing columns. The decoder checks every
/// length against the bytes left and every value against its column's type, and throws `corrupt`
/// on anything else: it never traps on arbitrary input.
public enum RecordCodec {
    /// The version byte of a record whose tags are inline with their payloads.
    public static let version: UInt8 = 1
    /// The version byte of a record whose tags come first.
    public static let tagsFirstVersion: UInt8 = 2

    /// How a store writes its records.
    public enum Layout: Sendable, CaseIterable {
        /// Version 1: each value's tag before its payload (stores of format 1 and 2).
        case inline
        /// Version 2: all the tags, then the row number, then the payloads (stores of format 3).
        case tagsFirst
    }
    /// The deepest json nesting stored (the same limit as the core's JSON parser).
    public static let maximumJSONDepth = 512

    /// The value tags of a record.
    public enum Tag {
        /// Null.
        public static let null: UInt8 = 0
        /// The boolean `false`.
        public static let `false`: UInt8 = 1
        /// The boolean `true`.
        public static let `true`: UInt8 = 2
        /// An integer (zigzag varint).
        public static let int: UInt8 = 3
        /// A double (8 bytes, bit pattern, little-endian).
        public static let double: UInt8 = 4
        /// A string (varint length, UTF-8).
        public static let string: UInt8 = 5
        /// A date (8 bytes: the bits of `timeIntervalSinceReferenceDate`).
        public static let date: UInt8 = 6
        /// Bytes (varint length).
        public static let binary: UInt8 = 7
        /// A json value.
        public static let json: UInt8 = 8
        /// Inside json: an array (varint count, then the elements).
        public static let jsonArray: UInt8 = 6
        /// Inside json: an object (varint count, then key and value pairs).
        public static let jsonObject: UInt8 = 7
    }

    // MARK: Encoding

    /// Encodes `row` (values in schema order) with its row number, in `layout`.
    @inlinable public static func encode(_ row: [Value], rowId: UInt64, layout: Layout) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + row.count * 8)
        switch layout {
        case .inline:
            out.append(version)
            appendVarint(rowId, into: &out)
            appendVarint(UInt64(row.count), into: &out)
            for v in row { appendValue(v, into: &out) }
        case .tagsFirst:
            out.append(tagsFirstVersion)
            appendVarint(UInt64(row.count), into: &out)
            for v in row { out.append(tag(of: v)) }
            appendVarint(rowId, into: &out)
            for v in row { appendPayload(v, into: &out) }
        }
        return out
    }

    /// Appends `v` as a LEB128 varint.
    @inlinable public static func appendVarint(_ v: UInt64, into out: inout [UInt8]) {
        var x = v
        while x >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: x) | 0x80)
            x >>= 7
        }
        out.append(UInt8(x))
    }

    /// Maps a signed integer to an unsigned one, small magnitudes to small numbers.
    @inlinable @inline(__always) public static func zigzag(_ i: Int64) -> UInt64 { UInt64(bitPattern: (i << 1) ^ (i >> 63)) }
    @inlinable @inline(__always) public static func unzigzag(_ u: UInt64) -> Int64 { Int64(bitPattern: u >> 1) ^ -Int64(bitPattern: u & 1) }

    /// Appends `v` as 8 little-endian bytes.
    @inlinable public static func appendFixed(_ v: UInt64, into out: inout [UInt8]) {
        var x = v.littleEndian
        withUnsafeBytes(of: &x) { out.append(contentsOf: $0) }
    }

    /// Appends a varint length and the bytes.
    @inlinable public static func appendBytes<C: Collection>(_ bytes: C, into out: inout [UInt8]) where C.Element == UInt8 {
        appendVarint(UInt64(bytes.count), into: &out)
        out.append(contentsOf: bytes)
    }

    /// The tag of a value.
    @inlinable public static func tag(of v: Value) -> UInt8 {
        switch v {
        case .null: return Tag.null
        case .bool(let b): return b ? Tag.true : Tag.false
        case .int: return Tag.int
        case .double: return Tag.double
        case .string: return Tag.string
        case .date: return Tag.date
        case .binary: return Tag.binary
        case .json: return Tag.json
        }
    }

    /// Appends a tag and its payload (the inline layout).
    @inlinable public static func appendValue(_ v: Value, into out: inout [UInt8]) {
        out.append(tag(of: v))
        appendPayload(v, into: &out)
    }

    /// A value's bytes after its tag (nothing for null and booleans).
    @inlinable public static func appendPayload(_ v: Value, into out: inout [UInt8]) {
        switch v {
        case .null, .bool: break
        case .int(let i): appendVarint(zigzag(i), into: &out)
        case .double(let d): appendFixed(d.bitPattern, into: &out)
        case .string(let s): appendBytes(s.utf8, into: &out)
        case .date(let d): appendFixed(d.timeIntervalSinceReferenceDate.bitPattern, into: &out)
        case .binary(let b): appendBytes(b, into: &out)
        case .json(let j): appendJSON(j, into: &out)
        }
    }

    /// Appends a json value in the record format.
    @inlinable public static func appendJSON(_ j: JSON, into out: inout [UInt8]) {
        switch j {
        case .null: out.append(Tag.null)
        case .bool(let b): out.append(b ? Tag.true : Tag.false)
        case .int(let i):
            out.append(Tag.int)
            appendVarint(zigzag(i), into: &out)
        case .double(let d):
            out.append(Tag.double)
            appendFixed(d.bitPattern, into: &out)
        case .string(let s):
            out.append(Tag.string)
            appendBytes(s.utf8, into: &out)
        case .array(let a):
            out.append(Tag.jsonArray)
            appendVarint(UInt64(a.count), into: &out)
            for e in a { appendJSON(e, into: &out) }
        case .object(let o):
            out.append(Tag.jsonObject)
            appendVarint(UInt64(o.count), into: &out)
            // Sorted keys: equal documents give equal bytes.
            for key in o.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                appendBytes(key.utf8, into: &out)
                appendJSON(o[key] ?? .null, into: &out)
            }
        }
    }

    /// The nesting depth of arrays and objects in `j` (0 for a scalar), stopping early past `limit`.
    @inlinable public static func depth(_ j: JSON, limit: Int = maximumJSONDepth) -> Int {
        switch j {
        case .array(let a):
            if limit <= 0 { return 1 }
            return 1 + (a.lazy.map { depth($0, limit: limit - 1) }.max() ?? 0)
        case .object(let o):
            if limit <= 0 { return 1 }
            return 1 + (o.values.lazy.map { depth($0, limit: limit - 1) }.max() ?? 0)
        default: return 0
        }
    }

    // MARK: Decoding

    /// A decoded record: the row (padded with nulls to the schema's width) and its row number.
    public struct Decoded {
        /// The values, padded with nulls to the schema's width.
        public var row: [Value]
        /// The row number stored with the record.
        public var rowId: UInt64
        /// A decoded record.
        @inlinable public init(row: [Value], rowId: UInt64) {
            self.row = row
            self.rowId = rowId
        }
    }

    /// Decodes a record, checking every value (see `RecordFilter` (LMDB) for testing a record without
    /// decoding it).
    @inlinable public static func decode(_ bytes: UnsafeRawBufferPointer, schema: TableSchema) throws -> Decoded {
        try decode(bytes, schema: schema, idIndex: schema.idIndex)
    }

    /// `decode(_:schema:)` with the position of the schema's id column given (looking it up
    /// hashes the name: a query decoding many rows looks it up once).
    @inlinable public static func decode(_ bytes: UnsafeRawBufferPointer, schema: TableSchema, idIndex: Int) throws -> Decoded {
        let width = schema.columns.count
        var row: [Value] = []
        row.reserveCapacity(width)
        let rowId = try forEachValue(bytes, schema: schema, idIndex: idIndex) { _, v in row.append(v) }
        while row.count < width { row.append(.null) }
        return Decoded(row: row, rowId: rowId)
    }

    /// Checks a record as `decode(_:schema:)` does (`corrupt` when it does not decode) without
    /// building its row.
    @inlinable public static func check(_ bytes: UnsafeRawBufferPointer, schema: TableSchema, idIndex: Int) throws {
        _ = try forEachValue(bytes, schema: schema, idIndex: idIndex) { _, _ in }
    }

    /// Decodes a record value by value, checking each exactly as `decode(_:schema:)` does, and hands
    /// every stored column's value to `body` with its position (in order; the columns a short record
    /// lacks are null and not handed over). Returns the record's row number. Callers that build
    /// something other than a `[Value]` row (an item, `RecordItemBuilder` (LMDB)) decode without the row.
    @inlinable @inline(__always) public static func forEachValue(
        _ bytes: UnsafeRawBufferPointer, schema: TableSchema, idIndex: Int, _ body: (Int, Value) -> Void
    ) throws -> UInt64 {
        var r = ByteReader(bytes)
        do {
            let recordVersion = try r.byte()
            let rowId: UInt64
            let count: UInt64
            let columns = schema.columns
            let width = columns.count
            // Version 2: where the tags are (read one by one below, the reader at the payloads).
            var tagAt = -1
            switch recordVersion {
            case version:
                rowId = try r.varint()
                count = try r.varint()
            case tagsFirstVersion:
                count = try r.varint()
                guard count <= UInt64(width) else { throw ByteReader.Failure("record has \(count) columns, the table \(width)") }
                guard count <= UInt64(r.remaining) else { throw ByteReader.Failure("unexpected end") }
                tagAt = r.offset
                r.seek(r.offset + Int(count))
                rowId = try r.varint()
            default:
                throw ByteReader.Failure("unknown record version")
            }
            guard count <= UInt64(width) else { throw ByteReader.Failure("record has \(count) columns, the table \(width)") }
            var hasId = false
            for n in 0..<Int(count) {
                let v = try tagAt < 0 ? r.value() : r.value(tag: bytes[tagAt + n])
                let type = columns[n].type
                guard type.accepts(v) else {
                    throw ByteReader.Failure("column '\(columns[n].name)' holds a \(v.kindName)")
                }
                switch v {
                case .null:
                    break
                case .double(let d) where !d.isFinite:
                    throw ByteReader.Failure("column '\(columns[n].name)' holds a non-finite number")
                case .int where type == .double:
                    throw ByteReader.Failure("double column '\(columns[n].name)' holds an int")
                default:
                    if n == idIndex { hasId = true }
                }
                body(n, v)
            }
            guard r.isAtEnd else { throw ByteReader.Failure("trailing bytes") }
            guard hasId else { throw ByteReader.Failure("record without id") }
            return rowId
        } catch let f as ByteReader.Failure {
            throw LocalStoreError(.corrupt, "the store is damaged: a record of table '\(schema.name)' is malformed (\(f.what) at byte \(r.offset))", table: schema.name)
        }
    }

    /// Decodes a record held in an array (see the buffer form).
    @inlinable public static func decode(_ bytes: [UInt8], schema: TableSchema) throws -> Decoded {
        try bytes.withUnsafeBytes { try decode($0, schema: schema) }
    }

    /// A varint of at most 10 bytes within `end`, or `nil`: ``ByteReader/varint()`` over a raw pointer,
    /// the same value for the same bytes, `nil` where it throws .
    @inlinable @inline(__always) public static func rawVarint(_ base: UnsafeRawPointer, _ i: inout Int, _ end: Int) -> UInt64? {
        // One byte (lengths, counts and small numbers): the common case.
        if i < end {
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            if b < 0x80 {
                i += 1
                return UInt64(b)
            }
        }
        return longVarint(base, &i, end)
    }

    /// Moves `i` past the record's row number (a varint at `i`); `false` when it is malformed (as
    /// ``rawVarint(_:_:_:)`` would find it). A row number in the eight bytes from `i` is found with one
    /// load: it ends at the first of them without the continuation bit.
    @inlinable @inline(__always) public static func skipRawRowNumber(_ base: UnsafeRawPointer, _ i: inout Int, _ end: Int) -> Bool {
        if end &- i >= 8 {
            let stops = ~UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) & 0x8080_8080_8080_8080
            if stops != 0 {
                i &+= (stops.trailingZeroBitCount &>> 3) &+ 1
                return true
            }
        }
        return rawVarint(base, &i, end) != nil
    }

    @usableFromInline static func longVarint(_ base: UnsafeRawPointer, _ i: inout Int, _ end: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while i < end {
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            i += 1
            if shift == 63 && b > 1 { return nil }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }
}

/// A bounds-checked reader over untrusted bytes.
public struct ByteReader {
    /// Why the bytes do not parse.
    public struct Failure: Error {
        /// What was malformed.
        public let what: String
        /// A failure.
        @inlinable public init(_ what: String) { self.what = what }
    }

    /// The bytes read.
    public let bytes: UnsafeRawBufferPointer
    /// The position of the next byte.
    public var offset = 0

    /// A reader at the start of `bytes`.
    @inlinable public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Moves to byte `to`.
    @inlinable public mutating func seek(_ to: Int) { offset = to }

    /// Whether every byte was read.
    @inlinable public var isAtEnd: Bool { offset == bytes.count }
    @inlinable public var remaining: Int { bytes.count - offset }

    /// Reads one byte.
    @inlinable public mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw Failure("unexpected end") }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads a LEB128 varint (at most 10 bytes).
    @inlinable public mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            if shift == 63 && b > 1 { throw Failure("varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw Failure("varint too long") }
        }
    }

    /// Reads 8 little-endian bytes.
    @inlinable public mutating func fixed64() throws -> UInt64 {
        guard remaining >= 8 else { throw Failure("unexpected end") }
        var v: UInt64 = 0
        for k in 0..<8 { v |= UInt64(bytes[offset + k]) << (8 * UInt64(k)) }
        offset += 8
        return v
    }

    /// Reads a varint length no longer than the bytes left.
    @inlinable public mutating func length() throws -> Int {
        let n = try varint()
        guard n <= UInt64(remaining) else { throw Failure("length \(n) beyond the end") }
        return Int(n)
    }

    /// The next `n` bytes (checked by the caller), and moves past them.
    @inlinable public mutating func rawBytes(_ n: Int) -> UnsafeRawBufferPointer {
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
    }

    /// Reads a varint length and that many bytes of UTF-8.
    @inlinable public mutating func string() throws -> String {
        let n = try length()
        let raw = rawBytes(n)
        // ASCII (the common case) is valid UTF-8: built without the generic validating path.
        if ByteReader.isASCII(raw) { return String(decoding: raw, as: UTF8.self) }
        guard let s = String(validating: raw, as: UTF8.self) else { throw Failure("invalid UTF-8") }
        return s
    }

    /// Whether every byte of `raw` is ASCII (then it is valid UTF-8 as it is).
    @inlinable @inline(__always) public static func isASCII(_ raw: UnsafeRawBufferPointer) -> Bool {
        let n = raw.count
        guard let p = raw.baseAddress else { return true }
        if n >= 8 {
            // Eight bytes at a time, the last eight read as one (overlapping) word. (`i + 8 < n` for
            // every `i` reached: no overflow.)
            var i = 0
            while i &+ 8 < n {
                if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
                i &+= 8
            }
            return p.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
        }
        var i = 0
        while i < n {
            if p.load(fromByteOffset: i, as: UInt8.self) & 0x80 != 0 { return false }
            i &+= 1
        }
        return true
    }

    /// Reads a tag and its value.
    @inlinable public mutating func value() throws -> Value {
        try value(tag: try byte())
    }

    /// The value whose tag is `tag` and whose payload is at the reader.
    @inlinable public mutating func value(tag: UInt8) throws -> Value {
        switch tag {
        case RecordCodec.Tag.null: return .null
        case RecordCodec.Tag.false: return .bool(false)
        case RecordCodec.Tag.true: return .bool(true)
        case RecordCodec.Tag.int: return .int(RecordCodec.unzigzag(try varint()))
        case RecordCodec.Tag.double: return .double(Double(bitPattern: try fixed64()))
        case RecordCodec.Tag.string: return .string(try string())
        case RecordCodec.Tag.date:
            return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try fixed64())))
        case RecordCodec.Tag.binary:
            let n = try length()
            return .binary(Array(rawBytes(n)))
        case RecordCodec.Tag.json: return .json(try json(depth: 0))
        case let t: throw Failure("unknown value tag \(t)")
        }
    }

    /// Reads a json value nested at most `depth` deep.
    @inlinable public mutating func json(depth: Int) throws -> JSON {
        switch try byte() {
        case RecordCodec.Tag.null: return .null
        case RecordCodec.Tag.false: return .bool(false)
        case RecordCodec.Tag.true: return .bool(true)
        case RecordCodec.Tag.int: return .int(RecordCodec.unzigzag(try varint()))
        case RecordCodec.Tag.double:
            let d = Double(bitPattern: try fixed64())
            guard d.isFinite else { throw Failure("non-finite number in json") }
            return .double(d)
        case RecordCodec.Tag.string: return .string(try string())
        case RecordCodec.Tag.jsonArray:
            guard depth < RecordCodec.maximumJSONDepth else { throw Failure("json nested too deeply") }
            let n = try varint()
            // Every element takes at least one byte: a count beyond the bytes left is damage.
            guard n <= UInt64(remaining) else { throw Failure("array count \(n) beyond the end") }
            var elements: [JSON] = []
            elements.reserveCapacity(Int(n))
            for _ in 0..<Int(n) { elements.append(try json(depth: depth + 1)) }
            return .array(elements)
        case RecordCodec.Tag.jsonObject:
            guard depth < RecordCodec.maximumJSONDepth else { throw Failure("json nested too deeply") }
            let n = try varint()
            guard n <= UInt64(remaining / 2) else { throw Failure("object count \(n) beyond the end") }
            var members: [String: JSON] = Dictionary(minimumCapacity: Int(n))
            for _ in 0..<Int(n) {
                let key = try string()
                let value = try json(depth: depth + 1)
                guard members.updateValue(value, forKey: key) == nil else { throw Failure("duplicate json key") }
            }
            return .object(members)
        case let t: throw Failure("unknown json tag \(t)")
        }
    }
}

/// A set of column positions (a bitmap).
public struct ColumnSet {
    /// One bit per column position.
    public var bits: [UInt64] = []

    /// An empty set.
    @inlinable public init() {}

    /// Whether position `n` is in the set.
    @inlinable @inline(__always) public func contains(_ n: Int) -> Bool {
        let w = n >> 6
        return w < bits.count && bits[w] & (1 << UInt64(n & 63)) != 0
    }

    /// The positions in the set, ascending.
    @inlinable public var members: [Int] {
        var out: [Int] = []
        for (w, word) in bits.enumerated() where word != 0 {
            for b in 0..<64 where word & (1 << UInt64(b)) != 0 { out.append(w * 64 + b) }
        }
        return out
    }

    /// Adds position `n`.
    @inlinable public mutating func insert(_ n: Int) {
        let w = n >> 6
        while bits.count <= w { bits.append(0) }
        bits[w] |= 1 << UInt64(n & 63)
    }
}
