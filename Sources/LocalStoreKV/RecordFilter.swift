import Foundation
import LocalStore

/// The columns of one stored record, located in place: a tag and a payload range per column, found
/// by skipping (bounds-checked) over the record's bytes without building any value. One instance is
/// reused for every record of a walk, so locating allocates nothing.
///
/// Only the columns up to the highest one a filter reads are located; the bytes after them are not
/// looked at. A column's value is checked (tag, type, UTF-8, finiteness) when it is read — exactly
/// the checks of ``RecordCodec/decode(_:schema:)`` — so a damaged record read by a filter throws
/// `corrupt` as before; the rows a query returns are decoded (and checked) whole.
package final class RecordFields {
    package let schema: TableSchema
    /// The columns located per record: 0...`last`.
    package let last: Int
    private let tags: UnsafeMutablePointer<UInt8>
    private let starts: UnsafeMutablePointer<Int>
    private let ends: UnsafeMutablePointer<Int>
    /// The current record and how many of its columns were located. Behind a pointer rather than
    /// in stored `var`s: class properties pay a dynamic exclusivity check on every access, which
    /// cost more than the locating itself.
    ///
    /// `pending`: for a version-2 record, where its row number starts while the payloads of the
    /// located columns are not yet located (-1 once they are, and always for version 1). A version-2
    /// record's tags are read at ``locate(_:)``; its row number and payloads only when a payload is
    /// first read, so a test of booleans and nulls reads the header and the tags alone.
    private let current: UnsafeMutablePointer<(bytes: UnsafeRawBufferPointer, located: Int, pending: Int)>
    private let types: [ColumnType]

    /// How many columns the current record stores among 0...`last` (the others read as null).
    package var located: Int { current.pointee.located }
    package var bytes: UnsafeRawBufferPointer { current.pointee.bytes }

    package init(schema: TableSchema, through last: Int) {
        self.schema = schema
        self.last = last
        let n = max(1, last + 1)
        tags = .allocate(capacity: n)
        starts = .allocate(capacity: n)
        starts.initialize(repeating: 0, count: n)
        ends = .allocate(capacity: n)
        ends.initialize(repeating: 0, count: n)
        current = .allocate(capacity: 1)
        current.initialize(to: (UnsafeRawBufferPointer(start: nil, count: 0), 0, -1))
        types = schema.columns.map(\.type)
    }

    deinit {
        tags.deallocate()
        starts.deallocate()
        ends.deallocate()
        current.deallocate()
    }

    private func failure(_ what: String, at offset: Int) -> LocalStoreError {
        LocalStoreError(
            .corrupt, "the store is damaged: a record of table '\(schema.name)' is malformed (\(what) at byte \(offset))", table: schema.name)
    }

    /// Locates columns 0...`last` of `record` (valid until the next call). The same bounds and
    /// structure checks as ``ByteReader``, written over a raw pointer: this runs once per record
    /// of a scan. For a version-2 record only the header and the tags are read here (the payloads
    /// when one is first read: ``locatePayloads()``).
    package func locate(_ record: UnsafeRawBufferPointer) throws {
        current.pointee = (record, 0, -1)
        var i = 0
        do {
            guard let base = record.baseAddress else { throw ByteReader.Failure("unexpected end") }
            let end = record.count
            guard end > 0 else { throw ByteReader.Failure("unexpected end") }
            let recordVersion = base.load(as: UInt8.self)
            i = 1
            let width = schema.columns.count
            switch recordVersion {
            case RecordCodec.version:
                _ = try RecordFields.varint(base, &i, end)
                let count = try RecordFields.varint(base, &i, end)
                guard count <= UInt64(width) else { throw ByteReader.Failure("record has \(count) columns, the table \(width)") }
                let n = min(Int(count), last + 1)
                for c in 0..<n {
                    guard i < end else { throw ByteReader.Failure("unexpected end") }
                    let tag = base.load(fromByteOffset: i, as: UInt8.self)
                    i += 1
                    tags[c] = tag
                    try locatePayload(c, tag, base, &i, end)
                }
                current.pointee.located = n
            case RecordCodec.tagsFirstVersion:
                let count = try RecordFields.varint(base, &i, end)
                guard count <= UInt64(width) else { throw ByteReader.Failure("record has \(count) columns, the table \(width)") }
                guard count <= UInt64(end - i) else { throw ByteReader.Failure("unexpected end") }
                let n = min(Int(count), last + 1)
                for c in 0..<n { tags[c] = base.load(fromByteOffset: i + c, as: UInt8.self) }
                current.pointee.located = n
                current.pointee.pending = i + Int(count)
            default:
                throw ByteReader.Failure("unknown record version")
            }
        } catch let f as ByteReader.Failure {
            throw failure(f.what, at: i)
        }
    }

    /// Sets `starts[c]` and `ends[c]` for column `c`, whose payload (of tag `tag`) is at `i`; moves `i`
    /// past it.
    @inline(__always)
    private func locatePayload(_ c: Int, _ tag: UInt8, _ base: UnsafeRawPointer, _ i: inout Int, _ end: Int) throws {
        starts[c] = i
        switch tag {
        case RecordCodec.Tag.null, RecordCodec.Tag.false, RecordCodec.Tag.true: break
        case RecordCodec.Tag.int: _ = try RecordFields.varint(base, &i, end)
        case RecordCodec.Tag.double, RecordCodec.Tag.date:
            guard end - i >= 8 else { throw ByteReader.Failure("unexpected end") }
            i += 8
        case RecordCodec.Tag.string, RecordCodec.Tag.binary:
            let length = try RecordFields.varint(base, &i, end)
            guard length <= UInt64(end - i) else { throw ByteReader.Failure("length \(length) beyond the end") }
            starts[c] = i  // the payload, after its length
            i += Int(length)
        case RecordCodec.Tag.json:
            var r = ByteReader(UnsafeRawBufferPointer(start: base, count: end))
            r.seek(i)
            try r.skipJSON(depth: 0)
            i = r.offset
        default: throw ByteReader.Failure("unknown value tag \(tag)")
        }
        ends[c] = i
    }

    /// Locates the payloads of a version-2 record's located columns (after its row number), once;
    /// nothing for a version-1 record (located whole by ``locate(_:)``).
    @inline(__always) private func locatePayloads() throws {
        if current.pointee.pending >= 0 { try locatePendingPayloads() }
    }

    private func locatePendingPayloads() throws {
        var i = current.pointee.pending
        do {
            guard let base = bytes.baseAddress else { throw ByteReader.Failure("unexpected end") }
            let end = bytes.count
            _ = try RecordFields.varint(base, &i, end)
            for c in 0..<located { try locatePayload(c, tags[c], base, &i, end) }
            current.pointee.pending = -1
        } catch let f as ByteReader.Failure {
            throw failure(f.what, at: i)
        }
    }

    /// The row number of the current record (located already, so its header is known to be sound).
    package func rowId() throws -> UInt64 {
        guard let base = bytes.baseAddress else { throw failure("unexpected end", at: 0) }
        var i = 1
        do {
            if base.load(as: UInt8.self) == RecordCodec.tagsFirstVersion {
                // The column count, then as many tags.
                let count = try RecordFields.varint(base, &i, bytes.count)
                i += Int(count)
            }
            return try RecordFields.varint(base, &i, bytes.count)
        } catch let f as ByteReader.Failure {
            throw failure(f.what, at: i)
        }
    }

    /// ``ByteReader/varint()`` over a raw pointer.
    @inline(__always) package static func varint(_ base: UnsafeRawPointer, _ i: inout Int, _ end: Int) throws -> UInt64 {
        // One byte (lengths and counts below 128): the common case.
        if i < end {
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            if b < 0x80 {
                i += 1
                return UInt64(b)
            }
        }
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard i < end else { throw ByteReader.Failure("unexpected end") }
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            i += 1
            if shift == 63 && b > 1 { throw ByteReader.Failure("varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw ByteReader.Failure("varint too long") }
        }
    }

    /// The integer of column `n` when it holds an int in an integer column (no other check is
    /// needed for such a value), else `nil`.
    @inline(__always) package func plainInt(_ n: Int) -> Int64? {
        guard n < located, tags[n] == RecordCodec.Tag.int, types[n] == .integer, let base = bytes.baseAddress,
            (try? locatePayloads()) != nil
        else { return nil }
        var i = starts[n]
        guard let u = try? RecordFields.varint(base, &i, ends[n]) else { return nil }
        return RecordCodec.unzigzag(u)
    }

    /// The boolean of column `n` when it holds one in a boolean column, else `nil`.
    @inline(__always) package func plainBool(_ n: Int) -> Bool? {
        guard n < located, types[n] == .boolean else { return nil }
        switch tags[n] {
        case RecordCodec.Tag.true: return true
        case RecordCodec.Tag.false: return false
        default: return nil
        }
    }

    @inline(__always) package func tag(_ n: Int) -> UInt8 { n < located ? tags[n] : RecordCodec.Tag.null }

    @inline(__always) package func isNull(_ n: Int) -> Bool { tag(n) == RecordCodec.Tag.null }

    /// The value of column `n`, checked as the full decoder checks it.
    package func value(_ n: Int) throws -> Value {
        guard n < located else { return .null }
        let v: Value
        let tag = tags[n]
        // A null or a boolean is its tag alone.
        if tag > RecordCodec.Tag.true { try locatePayloads() }
        switch tag {
        case RecordCodec.Tag.string:
            let raw = UnsafeRawBufferPointer(rebasing: bytes[starts[n]..<ends[n]])
            if ByteReader.isASCII(raw) {
                v = .string(String(decoding: raw, as: UTF8.self))
            } else if let s = String(validating: raw, as: UTF8.self) {
                v = .string(s)
            } else {
                throw failure("invalid UTF-8", at: ends[n])
            }
        case RecordCodec.Tag.binary:
            v = .binary(Array(UnsafeRawBufferPointer(rebasing: bytes[starts[n]..<ends[n]])))
        default:
            var r = ByteReader(bytes)
            r.seek(starts[n])
            do {
                v = try r.value(tag: tags[n])
            } catch let f as ByteReader.Failure {
                throw failure(f.what, at: r.offset)
            }
        }
        let column = schema.columns[n]
        guard column.type.accepts(v) else { throw failure("column '\(column.name)' holds a \(v.kindName)", at: ends[n]) }
        if case .double(let d) = v, !d.isFinite { throw failure("column '\(column.name)' holds a non-finite number", at: ends[n]) }
        if case .int = v, column.type == .double { throw failure("double column '\(column.name)' holds an int", at: ends[n]) }
        return v
    }

    /// The UTF-8 bytes of string column `n` (checked: a string column holding valid UTF-8), or `nil`
    /// when it is null. Valid until the next ``locate(_:)``.
    package func stringBytes(_ n: Int) throws -> UnsafeRawBufferPointer? {
        guard n < located, tags[n] == RecordCodec.Tag.string, types[n] == .string else {
            _ = try value(n)  // null, or a damaged value: throws
            return nil
        }
        try locatePayloads()
        let raw = UnsafeRawBufferPointer(rebasing: bytes[starts[n]..<ends[n]])
        guard ByteReader.isASCII(raw) || String(validating: raw, as: UTF8.self) != nil else {
            throw failure("invalid UTF-8", at: ends[n])
        }
        return raw
    }
}

extension ByteReader {
    /// Skips the payload of a value whose tag was just read: bounds-checked, nothing built.
    package mutating func skipPayload(_ tag: UInt8) throws {
        switch tag {
        case RecordCodec.Tag.null, RecordCodec.Tag.false, RecordCodec.Tag.true: return
        case RecordCodec.Tag.int: _ = try varint()
        case RecordCodec.Tag.double, RecordCodec.Tag.date: try skip(8)
        case RecordCodec.Tag.string, RecordCodec.Tag.binary: try skip(try length())
        case RecordCodec.Tag.json: try skipJSON(depth: 0)
        case let t: throw Failure("unknown value tag \(t)")
        }
    }

    package mutating func skip(_ n: Int) throws {
        guard n <= remaining else { throw Failure("unexpected end") }
        offset += n
    }

    /// Skips one json value (the checks of ``json(depth:)`` on structure; its strings are not checked).
    package mutating func skipJSON(depth: Int) throws {
        switch try byte() {
        case RecordCodec.Tag.null, RecordCodec.Tag.false, RecordCodec.Tag.true: return
        case RecordCodec.Tag.int: _ = try varint()
        case RecordCodec.Tag.double: try skip(8)
        case RecordCodec.Tag.string: try skip(try length())
        case RecordCodec.Tag.jsonArray:
            guard depth < RecordCodec.maximumJSONDepth else { throw Failure("json nested too deeply") }
            let n = try varint()
            guard n <= UInt64(remaining) else { throw Failure("array count \(n) beyond the end") }
            for _ in 0..<Int(n) { try skipJSON(depth: depth + 1) }
        case RecordCodec.Tag.jsonObject:
            guard depth < RecordCodec.maximumJSONDepth else { throw Failure("json nested too deeply") }
            let n = try varint()
            guard n <= UInt64(remaining / 2) else { throw Failure("object count \(n) beyond the end") }
            for _ in 0..<Int(n) {
                try skip(try length())
                try skipJSON(depth: depth + 1)
            }
        case let t: throw Failure("unknown json tag \(t)")
        }
    }
}

/// A resolved predicate compiled to tests on a record's bytes (``RecordFields``): comparisons of a
/// column with a literal read the column in place (strings as bytes, numbers without building a
/// row); anything else is evaluated by ``ResolvedPredicate/matches(_:)`` over the columns it reads,
/// decoded into a row buffer reused from record to record. The result is the shared evaluator's,
/// by construction: the same `Collation` rules on the same values.
package indirect enum RecordTest {
    case constant(Bool)
    case and([RecordTest])
    case or([RecordTest])
    case not(RecordTest)
    case isNull(Int)
    case isNotNull(Int)
    /// `column op literal` (or `literal op column` when `!columnFirst`), for a non-string literal.
    case compare(Int, QueryPredicate.ComparisonOperator, Value, columnFirst: Bool, noCase: Bool)
    /// The same with a string literal, compared as bytes.
    case compareString(Int, QueryPredicate.ComparisonOperator, [UInt8], columnFirst: Bool, noCase: Bool)
    case `in`(Int, [Value], noCase: Bool)
    /// A string test of a column against a literal pattern (lower-cased already when `noCase`).
    case string(QueryPredicate.StringOperator, Int, [UInt8], noCase: Bool)
    /// Anything else, over the decoded columns it reads.
    case general(ResolvedPredicate, [Int])

    package init(_ p: ResolvedPredicate) {
        switch p {
        case .constant(let b): self = .constant(b)
        case .and(let ps): self = .and(ps.map(RecordTest.init))
        case .or(let ps): self = .or(ps.map(RecordTest.init))
        case .not(let q): self = .not(RecordTest(q))
        case .isNull(.column(let n, _, _)): self = .isNull(n)
        case .isNotNull(.column(let n, _, _)): self = .isNotNull(n)
        case .compare(.column(let n, _, _), let op, .literal(let v, _), let noCase):
            self = RecordTest.comparison(n, op, v, columnFirst: true, noCase: noCase)
        case .compare(.literal(let v, _), let op, .column(let n, _, _), let noCase):
            self = RecordTest.comparison(n, op, v, columnFirst: false, noCase: noCase)
        case .in(.column(let n, _, _), let values, let noCase): self = .in(n, values, noCase: noCase)
        case .string(let op, .column(let n, .string, _), .literal(.string(let pattern), _), let noCase):
            self = .string(op, n, Array((noCase ? ASCII.lowercased(pattern) : pattern).utf8), noCase: noCase)
        default:
            var set = ColumnSet()
            p.collectColumns(into: &set)
            self = .general(p, set.members)
        }
    }

    private static func comparison(
        _ n: Int, _ op: QueryPredicate.ComparisonOperator, _ v: Value, columnFirst: Bool, noCase: Bool
    ) -> RecordTest {
        if case .string(let s) = v { return .compareString(n, op, Array(s.utf8), columnFirst: columnFirst, noCase: noCase) }
        return .compare(n, op, v, columnFirst: columnFirst, noCase: noCase)
    }

    /// The highest column position a test reads (-1 for none).
    package var lastColumn: Int {
        switch self {
        case .constant: return -1
        case .and(let ts), .or(let ts): return ts.map(\.lastColumn).max() ?? -1
        case .not(let t): return t.lastColumn
        case .isNull(let n), .isNotNull(let n), .compare(let n, _, _, _, _), .compareString(let n, _, _, _, _),
            .in(let n, _, _), .string(_, let n, _, _):
            return n
        case .general(_, let columns): return columns.max() ?? -1
        }
    }

    /// Whether the located record satisfies the test; `row` is scratch space of the table's width.
    package func matches(_ f: RecordFields, row: inout [Value]) throws -> Bool {
        switch self {
        case .constant(let b): return b
        case .and(let ts):
            for t in ts where try !t.matches(f, row: &row) { return false }
            return true
        case .or(let ts):
            for t in ts where try t.matches(f, row: &row) { return true }
            return false
        case .not(let t): return try !t.matches(f, row: &row)
        case .isNull(let n): return try f.isNull(n) || f.value(n).isNull
        case .isNotNull(let n): return try !f.isNull(n) && !f.value(n).isNull
        case .compare(let n, let op, let literal, let columnFirst, let noCase):
            // Fast paths for the commonest shapes; the same order as `Collation.compare`.
            switch literal {
            case .bool(let y):
                if let x = f.plainBool(n) {
                    let c = x == y ? 0 : (x ? 1 : -1)
                    return op.holds(for: columnFirst ? c : -c)
                }
            case .int(let y):
                if let x = f.plainInt(n) {
                    let c = x < y ? -1 : (x == y ? 0 : 1)
                    return op.holds(for: columnFirst ? c : -c)
                }
            default: break
            }
            if f.isNull(n) { return false }
            let v = try f.value(n)
            let c = columnFirst ? Collation.compare(v, literal, noCase: noCase) : Collation.compare(literal, v, noCase: noCase)
            return op.holds(for: c)
        case .compareString(let n, let op, let literal, let columnFirst, let noCase):
            guard let s = try f.stringBytes(n) else { return false }
            let c = literal.withUnsafeBytes { l in
                if noCase {
                    return columnFirst ? RawBytes.compareNoCase(s, l) : RawBytes.compareNoCase(l, s)
                }
                return columnFirst ? RawBytes.compare(s, l) : RawBytes.compare(l, s)
            }
            return op.holds(for: c)
        case .in(let n, let values, let noCase):
            if f.isNull(n) { return false }
            let v = try f.value(n)
            for candidate in values where Collation.compare(v, candidate, noCase: noCase) == 0 { return true }
            return false
        case .string(let op, let n, let pattern, let noCase):
            guard let s = try f.stringBytes(n) else { return false }
            return pattern.withUnsafeBytes { p in
                switch op {
                case .startsWith: return RawStrings.hasPrefix(s, p, noCase: noCase)
                case .endsWith: return RawStrings.hasSuffix(s, p, noCase: noCase)
                case .contains: return RawStrings.contains(s, p, noCase: noCase)
                }
            }
        case .general(let p, let columns):
            for n in columns { row[n] = try f.value(n) }
            return p.matches(row)
        }
    }
}

/// Byte-level versions of the string rules of `Collation` and `ResolvedPredicate.matches`.
@usableFromInline package enum RawStrings {
    @inlinable @inline(__always) package static func fold(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

    @inlinable @inline(__always) package static func equalAt(
        _ s: UnsafeRawBufferPointer, _ at: Int, _ p: UnsafeRawBufferPointer, noCase: Bool
    ) -> Bool {
        if !noCase {
            guard let sb = s.baseAddress, let pb = p.baseAddress else { return true }
            return memcmp(sb + at, pb, p.count) == 0
        }
        for j in 0..<p.count where fold(s[at + j]) != p[j] { return false }
        return true
    }

    @inlinable package static func hasPrefix(_ s: UnsafeRawBufferPointer, _ p: UnsafeRawBufferPointer, noCase: Bool) -> Bool {
        p.count <= s.count && equalAt(s, 0, p, noCase: noCase)
    }

    @inlinable package static func hasSuffix(_ s: UnsafeRawBufferPointer, _ p: UnsafeRawBufferPointer, noCase: Bool) -> Bool {
        p.count <= s.count && equalAt(s, s.count - p.count, p, noCase: noCase)
    }

    /// Byte-wise substring search; the empty pattern is in every string. `p` is folded already when `noCase`.
    package static func contains(_ s: UnsafeRawBufferPointer, _ p: UnsafeRawBufferPointer, noCase: Bool) -> Bool {
        if p.isEmpty { return true }
        if p.count > s.count { return false }
        if !noCase { return ByteSearch.contains(s, p) }
        let first = p[0]
        let last = s.count - p.count
        var i = 0
        while i <= last {
            if fold(s[i]) == first, equalAt(s, i, p, noCase: true) { return true }
            i += 1
        }
        return false
    }
}

/// The commonest predicate shapes — one column of a record against a literal — tested straight on
/// the record's bytes in one pass: the columns before it are skipped (tag and length, bounds-checked)
/// without being recorded, and the column is compared in place. Anything unusual about the record (a
/// column it cannot skip cheaply, a value of another type, non-ASCII text, a malformed byte) makes
/// ``evaluate(_:)`` return `nil`, and the caller takes the general path (``RecordFields`` and
/// ``RecordTest``), which gives the answer or the `corrupt` error. So a non-`nil` answer is always the
/// general path's answer for the same bytes.
@usableFromInline package struct SimpleRecordTest {
    @usableFromInline package enum Kind {
        /// A boolean column compared with a boolean literal.
        case bool(Bool)
        /// An integer column compared with an integer literal.
        case int(Int64)
        /// A string column compared (case-sensitively) with a string literal, as bytes.
        case compareString
        /// A case-sensitive `startsWith` / `endsWith` / `contains` of a string column.
        case string(QueryPredicate.StringOperator)
    }

    @usableFromInline package let column: Int
    /// The table's width (a record never holds more columns).
    @usableFromInline package let width: Int
    @usableFromInline package let kind: Kind
    @usableFromInline package let op: QueryPredicate.ComparisonOperator
    @usableFromInline package let columnFirst: Bool
    /// The literal's bytes for the string kinds (owned by the ``RecordFilter``).
    @usableFromInline package let pattern: UnsafeRawBufferPointer
    /// For a boolean column: the answer when it holds true, and when it holds false.
    @usableFromInline package let ifTrue: Bool
    @usableFromInline package let ifFalse: Bool

    package init(
        column: Int, width: Int, kind: Kind, op: QueryPredicate.ComparisonOperator, columnFirst: Bool,
        pattern: UnsafeRawBufferPointer
    ) {
        self.column = column
        self.width = width
        self.kind = kind
        self.op = op
        self.columnFirst = columnFirst
        self.pattern = pattern
        if case .bool(let y) = kind {
            // false < true, as ``Collation`` orders booleans.
            func answer(_ x: Bool) -> Bool {
                let comparison = x == y ? 0 : (x ? 1 : -1)
                return op.holds(for: columnFirst ? comparison : -comparison)
            }
            ifTrue = answer(true)
            ifFalse = answer(false)
        } else {
            ifTrue = false
            ifFalse = false
        }
    }

    /// The fast form of `test`, or `nil` when it has none. `store` allocates the pattern's bytes.
    package static func make(_ test: RecordTest, schema: TableSchema, store: ([UInt8]) -> UnsafeRawBufferPointer) -> SimpleRecordTest? {
        let width = schema.columns.count
        // A record's column count is read as one byte.
        guard width < 0x80 else { return nil }
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        switch test {
        case .compare(let n, let op, .bool(let b), let columnFirst, _) where schema.columns[n].type == .boolean:
            return SimpleRecordTest(column: n, width: width, kind: .bool(b), op: op, columnFirst: columnFirst, pattern: none)
        case .compare(let n, let op, .int(let i), let columnFirst, _) where schema.columns[n].type == .integer:
            return SimpleRecordTest(column: n, width: width, kind: .int(i), op: op, columnFirst: columnFirst, pattern: none)
        case .compareString(let n, let op, let literal, let columnFirst, false) where schema.columns[n].type == .string:
            return SimpleRecordTest(
                column: n, width: width, kind: .compareString, op: op, columnFirst: columnFirst, pattern: store(literal))
        case .string(let stringOp, let n, let pattern, false) where schema.columns[n].type == .string:
            return SimpleRecordTest(
                column: n, width: width, kind: .string(stringOp), op: .equal, columnFirst: true, pattern: store(pattern))
        default:
            return nil
        }
    }

    /// The offset of the tested column's tag in `record` (whose bytes are `base..<base + end`), or -1
    /// when the record is unusual in any way (the general path decides): a header of another shape,
    /// a column that cannot be skipped cheaply (json, a long int), a length beyond the end.
    @inlinable @inline(__always) package func columnOffset(_ base: UnsafeRawPointer, _ end: Int) -> Int {
        var i: Int
        if end >= 9 {
            // The version byte and the row number (at most 7 bytes here) in one 8-byte load: the row
            // number ends at the first of its bytes without the continuation bit.
            let w = UInt64(littleEndian: base.loadUnaligned(as: UInt64.self))
            guard UInt8(truncatingIfNeeded: w) == RecordCodec.version else { return -1 }
            let stops = ~(w >> 8) & 0x0080_8080_8080_8080
            guard stops != 0 else { return -1 }
            i = (stops.trailingZeroBitCount &>> 3) &+ 2  // the column count: at most byte 8
        } else {
            guard end > 0, base.load(as: UInt8.self) == RecordCodec.version else { return -1 }
            // The row number (at most 10 bytes, the last one at most 1, as the decoder checks).
            i = 1
            while i < end && i < 10 && base.load(fromByteOffset: i, as: UInt8.self) >= 0x80 { i &+= 1 }
            guard i < end, i < 10 || base.load(fromByteOffset: i, as: UInt8.self) <= 1 else { return -1 }
            i &+= 1
            guard i < end else { return -1 }
        }
        // The column count, in one byte (the table has fewer than 128 columns): column < count <= width.
        let count = Int(base.load(fromByteOffset: i, as: UInt8.self))
        guard UInt(bitPattern: count &- column &- 1) < UInt(bitPattern: width &- column) else { return -1 }
        i &+= 1
        // The columns before the tested one, skipped tag by tag.
        var c = column
        while c > 0 {
            guard i < end else { return -1 }
            let tag = base.load(fromByteOffset: i, as: UInt8.self)
            i &+= 1
            guard SimpleRecordTest.skipPayload(tag, base, &i, end) else { return -1 }
            c &-= 1
        }
        // Past the end (a length or a fixed-size value that does not fit) is caught here.
        return i < end ? i : -1
    }

    /// For a version-2 record (tags first): the offset of the tested column's tag, or -1 when the
    /// header is of another shape (a column count of more than one byte, beyond the table's width, or
    /// with its tags past the end; a record too short to hold the column). The general path reads
    /// the same header, and a tag without payload (null, false, true) alone.
    @inlinable @inline(__always) package func tagOffsetInTagsFirst(_ base: UnsafeRawPointer, _ end: Int) -> Int {
        guard end >= 2 else { return -1 }
        let count = Int(base.load(fromByteOffset: 1, as: UInt8.self))
        // column < count <= width (so the count is a one-byte varint), and the tags within the end.
        guard UInt(bitPattern: count &- column &- 1) < UInt(bitPattern: width &- column), count &+ 2 <= end else { return -1 }
        return 2 &+ column
    }

    /// For a version-2 record: the offset of the tested column's payload, or -1 when the record is
    /// unusual in any way (see ``columnOffset(_:_:)``): past the tags, the row number, then the payloads
    /// of the columns before the tested one, skipped by their tags.
    @inlinable @inline(__always) package func payloadOffsetInTagsFirst(_ base: UnsafeRawPointer, _ end: Int) -> Int {
        guard tagOffsetInTagsFirst(base, end) >= 0 else { return -1 }
        var i = 2 &+ Int(base.load(fromByteOffset: 1, as: UInt8.self))
        guard RecordCodec.skipRawRowNumber(base, &i, end) else { return -1 }
        var c = 0
        while c < column {
            guard SimpleRecordTest.skipPayload(base.load(fromByteOffset: 2 &+ c, as: UInt8.self), base, &i, end) else { return -1 }
            c &+= 1
        }
        return i <= end ? i : -1
    }

    /// Moves `i` past the payload of a value whose tag is `tag` (null, false and true have none), as the
    /// one-pass test skips the columns before its own; `false` for a value it does not skip cheaply
    /// (json), an unknown tag, a malformed varint or a length that runs past the end. A one-byte length is not
    /// checked against the end here: whatever reads at `i` next checks it.
    @inlinable @inline(__always) package static func skipPayload(_ tag: UInt8, _ base: UnsafeRawPointer, _ i: inout Int, _ end: Int) -> Bool {
        if tag | 2 == RecordCodec.Tag.binary {
            // A string or binary value (tags 5 and 7): its length, then its bytes.
            guard i < end else { return false }
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            if b < 0x80 {
                i &+= 1 &+ Int(b)
            } else {
                guard let length = RecordCodec.rawVarint(base, &i, end), length <= UInt64(end &- i) else { return false }
                i &+= Int(length)
            }
            return true
        }
        if tag <= RecordCodec.Tag.true { return true }
        if tag == RecordCodec.Tag.double || tag == RecordCodec.Tag.date {
            guard end &- i >= 8 else { return false }
            i &+= 8
            return true
        }
        return tag == RecordCodec.Tag.int && RecordCodec.rawVarint(base, &i, end) != nil
    }

    /// ``evaluate(_:)`` for the `.bool` kind (what `count` runs per record): the answer for each of
    /// the column's tags is known before the walk. In a version-2 record the tag is read at its
    /// fixed offset.
    @inlinable @inline(__always) package func boolAnswer(_ base: UnsafeRawPointer, _ end: Int) -> Bool? {
        let at = end > 0 && base.load(as: UInt8.self) == RecordCodec.tagsFirstVersion
            ? tagOffsetInTagsFirst(base, end) : columnOffset(base, end)
        guard at >= 0 else { return nil }
        switch base.load(fromByteOffset: at, as: UInt8.self) {
        case RecordCodec.Tag.true: return ifTrue
        case RecordCodec.Tag.false: return ifFalse
        case RecordCodec.Tag.null: return false
        default: return nil
        }
    }

    /// Whether `record` matches, or `nil` when the general path must decide.
    @inlinable @inline(__always) package func evaluate(_ record: UnsafeRawBufferPointer) -> Bool? {
        guard let base = record.baseAddress else { return nil }
        let end = record.count
        if case .bool = kind { return boolAnswer(base, end) }
        var i: Int
        let tag: UInt8
        if end > 0 && base.load(as: UInt8.self) == RecordCodec.tagsFirstVersion {
            i = payloadOffsetInTagsFirst(base, end)
            guard i >= 0 else { return nil }
            tag = base.load(fromByteOffset: 2 &+ column, as: UInt8.self)
        } else {
            i = columnOffset(base, end)
            guard i >= 0 else { return nil }
            tag = base.load(fromByteOffset: i, as: UInt8.self)
            i &+= 1
        }
        // A null column matches no comparison and no string test (as in ``RecordTest``).
        if tag == RecordCodec.Tag.null { return false }
        let comparison: Int
        switch kind {
        case .bool:
            return nil  // answered by `boolAnswer` above
        case .int(let y):
            guard tag == RecordCodec.Tag.int, let u = RecordCodec.rawVarint(base, &i, end) else { return nil }
            let x = RecordCodec.unzigzag(u)
            comparison = x < y ? -1 : (x == y ? 0 : 1)
        case .compareString, .string:
            guard tag == RecordCodec.Tag.string, let length = RecordCodec.rawVarint(base, &i, end),
                length <= UInt64(end - i)
            else { return nil }
            let s = UnsafeRawBufferPointer(start: base + i, count: Int(length))
            // Non-ASCII text is checked for valid UTF-8 by the general path.
            guard ByteReader.isASCII(s) else { return nil }
            if case .string(let stringOp) = kind {
                switch stringOp {
                case .startsWith: return RawStrings.hasPrefix(s, pattern, noCase: false)
                case .endsWith: return RawStrings.hasSuffix(s, pattern, noCase: false)
                case .contains: return ByteSearch.contains(s, pattern)  // RawStrings.contains without NOCASE
                }
            }
            comparison = RawBytes.compare(s, pattern)
        }
        return op.holds(for: columnFirst ? comparison : -comparison)
    }
}

/// Filters stored records for a query: the predicate is tested on the record's bytes
/// (``RecordTest``, or ``SimpleRecordTest`` first for one comparison); only the rows that match and
/// are returned are decoded whole.
package final class RecordFilter {
    package let schema: TableSchema
    package let predicate: ResolvedPredicate
    package let test: RecordTest
    private let fields: RecordFields
    /// Whether the test reads any column.
    private let reads: Bool
    /// Scratch row for the general tests (behind a pointer: no exclusivity check per record).
    private let row: UnsafeMutablePointer<[Value]>
    /// The one-pass form of ``test``, when it has one.
    package let simple: SimpleRecordTest?
    private var patternStorage: UnsafeMutableRawBufferPointer?

    package init(_ predicate: ResolvedPredicate, schema: TableSchema) {
        self.schema = schema
        self.predicate = predicate
        let test = RecordTest(predicate)
        self.test = test
        let last = test.lastColumn
        reads = last >= 0
        fields = RecordFields(schema: schema, through: last)
        row = .allocate(capacity: 1)
        row.initialize(to: Array(repeating: .null, count: schema.columns.count))
        var storage: UnsafeMutableRawBufferPointer?
        simple = SimpleRecordTest.make(test, schema: schema) { bytes in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 8)
            buffer.copyBytes(from: bytes)
            storage = buffer
            return UnsafeRawBufferPointer(rebasing: buffer[0..<bytes.count])
        }
        patternStorage = storage
    }

    deinit {
        row.deinitialize(count: 1)
        row.deallocate()
        patternStorage?.deallocate()
    }

    package convenience init(_ query: ResolvedQuery) { self.init(query.predicate, schema: query.schema) }

    /// Whether the predicate has a one-pass form (``SimpleRecordTest``).
    package var hasOnePassTest: Bool { simple != nil }

    /// Whether the predicate is always true.
    package var isTrue: Bool {
        if case .constant(true) = test { return true }
        return false
    }

    /// Whether `record` matches the predicate.
    @inlinable @inline(__always) package func matches(_ record: UnsafeRawBufferPointer) throws -> Bool {
        if let simple, let answer = simple.evaluate(record) { return answer }
        return try matchesInGeneral(record)
    }

    /// ``matches(_:)`` with the one-pass test passed in (a local of the caller's loop).
    @inlinable @inline(__always) package func matches(_ record: UnsafeRawBufferPointer, _ simple: SimpleRecordTest?) throws -> Bool {
        if let simple, let answer = simple.evaluate(record) { return answer }
        return try matchesInGeneral(record)
    }

    /// ``matches(_:)`` without the one-pass test (also what the tests compare it with).
    package func matchesInGeneral(_ record: UnsafeRawBufferPointer) throws -> Bool {
        if case .constant(let b) = test { return b }
        if reads { try fields.locate(record) }
        return try test.matches(fields, row: &row.pointee)
    }
}

extension ResolvedPredicate {
    /// The columns the predicate reads.
    package var columns: ColumnSet {
        var set = ColumnSet()
        collectColumns(into: &set)
        return set
    }

    package func collectColumns(into set: inout ColumnSet) {
        switch self {
        case .constant: break
        case .and(let ps), .or(let ps): for p in ps { p.collectColumns(into: &set) }
        case .not(let p): p.collectColumns(into: &set)
        case .compare(let l, _, let r, _), .string(_, let l, let r, _):
            l.collectColumns(into: &set)
            r.collectColumns(into: &set)
        case .isNull(let e), .isNotNull(let e), .in(let e, _, _): e.collectColumns(into: &set)
        }
    }
}

extension ResolvedExpression {
    package func collectColumns(into set: inout ColumnSet) {
        switch self {
        case .column(let n, _, _): set.insert(n)
        case .literal: break
        case .arithmetic(_, let l, let r, _):
            l.collectColumns(into: &set)
            r.collectColumns(into: &set)
        case .toLower(let e), .toUpper(let e), .length(let e): e.collectColumns(into: &set)
        case .function(_, let args, _): for a in args { a.collectColumns(into: &set) }
        }
    }
}
