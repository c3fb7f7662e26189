import Foundation
import LocalStore

/// Order-preserving byte encodings for ordered key-value keys (LMDB's: see docs/lmdb.md, "Key encodings").
///
/// LMDB orders keys by `memcmp` (shorter first on a common prefix). Every encoding here is
/// self-delimiting (no encoding is a proper prefix of another) and its byte order equals the
/// order of `Collation.compare` on the values it encodes, so an index cursor walks rows in query
/// order.
public enum KeyCodec {
    /// Keys longer than this are stored as their first `prefixLimit` bytes followed by the row's
    /// 8-byte row number (LMDB's default key limit is 511 bytes). A format constant: never change it.
    public static let prefixLimit = 480
    /// The length of every truncated ("long") stored key.
    public static let longKeyLength = prefixLimit + 8

    /// Component tags. Only one kind besides null ever occurs in one index component (a column
    /// has one type), so the relative order of the kinds does not matter; null sorts first.
    public enum Tag {
        /// The tag of a null component (sorts first).
        public static let null: UInt8 = 0x00
        /// The tag of a boolean component.
        public static let bool: UInt8 = 0x10
        /// The tag of a number component (an integer or a double; a column holds one kind).
        public static let number: UInt8 = 0x20
        /// The tag of a date component.
        public static let date: UInt8 = 0x30
        /// The tag of a case-sensitive string component.
        public static let string: UInt8 = 0x40
        /// The tag of a binary component.
        public static let binary: UInt8 = 0x50
        /// The tag of a json component (not orderable: it only separates null from non-null).
        public static let json: UInt8 = 0x60
        /// The tag of a NOCASE string component.
        public static let noCase: UInt8 = 0x70
    }

    // MARK: Key order

    /// Whether key `a` sorts before key `b` in the order the toolkit's keys are built for: `memcmp` on the
    /// common length, then the shorter first (LMDB's, RocksDB's and LevelDB's default order). An engine's
    /// ``OrderedKeyValueReader/scan(from:to:reverse:_:)`` can check its bounds with it: one `memcmp`, where
    /// `lexicographicallyPrecedes` compares byte by byte through the generic sequence code.
    @inlinable @inline(__always) public static func precedes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let n = min(a.count, b.count)
        if n > 0, let pa = a.baseAddress, let pb = b.baseAddress {
            let c = memcmp(pa, pb, n)
            if c != 0 { return c < 0 }
        }
        return a.count < b.count
    }

    /// Whether `a` and `b` hold the same bytes: one `memcmp`, where `elementsEqual` compares byte by byte
    /// through the generic sequence code (about 280 instructions for a short key).
    @inlinable @inline(__always) public static func equals(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard let pa = a.baseAddress, a.count > 0 else { return true }
        return b.withUnsafeBytes { pb in pb.baseAddress.map { memcmp(pa, $0, a.count) == 0 } ?? false }
    }

    /// ``precedes(_:_:)`` with `b` in an array.
    @inlinable @inline(__always) public static func precedes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        b.withUnsafeBytes { precedes(a, $0) }
    }

    // MARK: Scalars

    /// Appends `v` as 8 big-endian bytes (byte order equals numeric order).
    @inlinable @inline(__always) public static func appendBigEndian(_ v: UInt64, into out: inout [UInt8]) {
        appendBigEndian(width: v, into: &out)
    }

    /// Appends `v` as big-endian bytes, as many as its type has (a `UInt32`: 4, a `UInt16`: 2).
    @inlinable @inline(__always) public static func appendBigEndian<T: FixedWidthInteger & UnsignedInteger>(width v: T, into out: inout [UInt8]) {
        var x = v.bigEndian
        withUnsafeBytes(of: &x) { out.append(contentsOf: $0) }
    }

    /// Reads up to 8 big-endian bytes as a number (from an array slice, or bytes lent by an engine).
    @inlinable public static func readBigEndian<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var v: UInt64 = 0
        for b in bytes.prefix(8) { v = v << 8 | UInt64(b) }
        return v
    }

    /// Int64 with the sign bit flipped, big-endian: byte order equals numeric order.
    @inlinable public static func appendInt(_ i: Int64, into out: inout [UInt8]) {
        appendBigEndian(UInt64(bitPattern: i) ^ (1 << 63), into: &out)
    }

    /// Doubles: positive numbers get the sign bit set, negative numbers have all bits inverted, so
    /// byte order equals numeric order. -0.0 is encoded as +0.0 because the two compare equal.
    @inlinable public static func appendDouble(_ d: Double, into out: inout [UInt8]) {
        let bits = (d == 0 ? 0.0 : d).bitPattern
        appendBigEndian(bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63), into: &out)
    }

    /// Bytes escaped so that byte order, including prefix order, is kept: 0x00 becomes 0x00 0xFF
    /// and the end is 0x00 0x01.
    @inlinable public static func appendEscaped<C: Collection>(_ bytes: C, terminated: Bool, into out: inout [UInt8]) where C.Element == UInt8 {
        for b in bytes {
            out.append(b)
            if b == 0 { out.append(0xFF) }
        }
        if terminated {
            out.append(0x00)
            out.append(0x01)
        }
    }

    /// SQLite's NOCASE order as bytes: the ASCII-lower-cased bytes up to the first NUL, then
    /// `00 00` when the string has no NUL, or `00 01` and the 8-byte total length when it has one.
    /// Equal exactly when `Collation.compareNoCase` says equal; ordered exactly like it.
    @inlinable public static func appendNoCase(_ s: String, into out: inout [UInt8]) {
        let count = s.utf8.count
        out.reserveCapacity(out.count + count + 10)
        let start = out.count
        // Copied in one go (native strings are contiguous), then folded in place.
        if s.utf8.withContiguousStorageIfAvailable({ out.append(contentsOf: $0) }) == nil {
            out.append(contentsOf: s.utf8)
        }
        var end = out.count
        out.withUnsafeMutableBufferPointer { buffer in
            // Folded in place, eight bytes at a time while they are ASCII without a NUL.
            guard let base = buffer.baseAddress else { return }
            end = start + foldNoCase(UnsafePointer(base + start), count: buffer.count - start, into: UnsafeMutableRawPointer(base + start))
        }
        if end < out.count {
            // Cut at the first NUL, then the total length.
            out.removeSubrange(end...)
            out.append(0x00)
            out.append(0x01)
            appendBigEndian(UInt64(count), into: &out)
            return
        }
        out.append(0x00)
        out.append(0x00)
    }

    // MARK: Index components

    /// Appends one value as an index component ordered like `Collation.compare` (case-sensitive).
    ///
    /// Integers and doubles use different encodings: a column holds only one of them (an `int`
    /// written to a `double` column is stored as a double), and query bounds are converted to the
    /// column's type by the planner.
    @inlinable public static func appendComponent(_ v: Value, into out: inout [UInt8]) {
        switch v {
        case .null: out.append(Tag.null)
        case .bool(let b):
            out.append(Tag.bool)
            out.append(b ? 1 : 0)
        case .int(let i):
            out.append(Tag.number)
            appendInt(i, into: &out)
        case .double(let d):
            out.append(Tag.number)
            appendDouble(d, into: &out)
        case .date(let d):
            out.append(Tag.date)
            appendDouble(d.timeIntervalSinceReferenceDate, into: &out)
        case .string(let s):
            out.append(Tag.string)
            appendEscaped(s.utf8, terminated: true, into: &out)
        case .binary(let b):
            out.append(Tag.binary)
            appendEscaped(b, terminated: true, into: &out)
        case .json:
            // Json is not orderable; the index only separates null from non-null.
            out.append(Tag.json)
        }
    }

    /// Appends a string as a case-insensitive (NOCASE) component; null stays null.
    @inlinable public static func appendNoCaseComponent(_ v: Value, into out: inout [UInt8]) {
        if case .string(let s) = v {
            out.append(Tag.noCase)
            appendNoCase(s, into: &out)
        } else {
            out.append(Tag.null)
        }
    }

    /// Whether `a` and `b` certainly have the same index-component bytes in every encoding (ascending,
    /// descending, NOCASE): the same case and the same bits — strings compared by their UTF-8 bytes
    /// (`==` on `String` would call canonically equivalent spellings equal), doubles and dates by their
    /// bit patterns. `false` whenever that is not certain (then the keys are built and compared).
    @inlinable @inline(__always) public static func encodesAlike(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
        case (.date(let x), .date(let y)):
            return x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
        case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
        case (.binary(let x), .binary(let y)): return x == y
        default: return false
        }
    }

    /// Appends a component for a descending index key: the ascending encoding with every byte
    /// complemented. The encodings are prefix-free, so complementing reverses their order exactly
    /// (nulls, first ascending, come last) and keeps them prefix-free.
    @inlinable public static func appendDescendingComponent(_ v: Value, into out: inout [UInt8]) {
        let start = out.count
        appendComponent(v, into: &out)
        for i in start..<out.count { out[i] = ~out[i] }
    }

    /// The length of the component starting at `offset` in `key`, or `nil` when the key ends
    /// before the component does (a truncated long key). `descending` reads a complemented component.
    @inlinable public static func componentLength<K: RandomAccessCollection>(_ key: K, at offset: Int, descending: Bool = false) -> Int?
    where K.Element == UInt8, K.Index == Int {
        guard offset < key.count else { return nil }
        let flip: UInt8 = descending ? 0xFF : 0
        let fixed: Int
        switch key[offset] ^ flip {
        case Tag.null, Tag.json: fixed = 1
        case Tag.bool: fixed = 2
        case Tag.number, Tag.date: fixed = 9
        case Tag.string, Tag.binary:
            var i = offset + 1
            while i + 1 < key.count {
                if key[i] ^ flip == 0 {
                    if key[i + 1] ^ flip == 0x01 { return i + 2 - offset }
                    i += 2
                } else {
                    i += 1
                }
            }
            return nil
        case Tag.noCase:
            var i = offset + 1
            while i + 1 < key.count {
                if key[i] ^ flip == 0 {
                    if key[i + 1] ^ flip == 0x00 { return i + 2 - offset }
                    return i + 10 <= key.count ? i + 10 - offset : nil
                }
                i += 1
            }
            return nil
        default:
            return nil
        }
        return offset + fixed <= key.count ? fixed : nil
    }

    // MARK: Ids and stored keys

    /// The full primary-key encoding of an id: NOCASE bytes for a string id, the order-preserving
    /// 8 bytes for an integer id.
    @inlinable public static func idKey(_ id: Value) -> [UInt8] {
        var out: [UInt8] = []
        appendId(id, into: &out)
        return out
    }

    /// Appends the primary-key encoding of an id (see ``idKey(_:)``).
    @inlinable public static func appendId(_ id: Value, into out: inout [UInt8]) {
        switch id {
        case .int(let i): appendInt(i, into: &out)
        case .string(let s): appendNoCase(s, into: &out)
        default: appendComponent(id, into: &out)  // unreachable: ids are checked before
        }
    }

    /// Calls `body` with the key of `id` (``appendId(_:into:)``'s bytes) built in stack memory, or with
    /// `nil` when the key is longer than ``prefixLimit`` (a long id: looked up by its stored prefix).
    /// Reads by id use it: no array is allocated per read, and ASCII letters are folded eight bytes at
    /// a time.
    @inlinable @inline(__always) public static func withIdKey<R>(_ id: Value, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        switch id {
        case .int(let i):
            var key = (UInt64(bitPattern: i) ^ (1 << 63)).bigEndian
            return try withUnsafeBytes(of: &key) { try body($0) }
        case .string(let s):
            // At most 470 bytes: the key (with a NUL: the bytes before it, `00 01` and 8 bytes of
            // length) is then at most 480 bytes.
            let done = try s.utf8.withContiguousStorageIfAvailable { bytes -> R? in
                guard bytes.count <= prefixLimit - 10, let source = bytes.baseAddress else { return nil }
                return try withUnsafeTemporaryAllocation(byteCount: prefixLimit, alignment: 8) { buffer -> R? in
                    guard let out = buffer.baseAddress else { return nil }
                    let n = foldNoCase(source, count: bytes.count, into: out)
                    var length = n
                    out.storeBytes(of: 0, toByteOffset: length, as: UInt8.self)
                    if n < bytes.count {
                        // A NUL at `n`: `00 01` and the total length.
                        out.storeBytes(of: 1, toByteOffset: length + 1, as: UInt8.self)
                        out.storeBytes(of: UInt64(bytes.count).bigEndian, toByteOffset: length + 2, as: UInt64.self)
                        length += 10
                    } else {
                        out.storeBytes(of: 0, toByteOffset: length + 1, as: UInt8.self)
                        length += 2
                    }
                    return try body(UnsafeRawBufferPointer(start: out, count: length))
                }
            }
            if let done, let result = done { return result }
        default:
            break
        }
        var key: [UInt8] = []
        appendId(id, into: &key)
        guard key.count <= prefixLimit else { return try body(nil) }
        return try key.withUnsafeBytes { try body($0) }
    }

    /// Copies `source` into `out` with ASCII letters lower-cased, up to its first NUL; returns the
    /// number of bytes copied (`count` when there is no NUL). Eight bytes at a time while they are
    /// ASCII without a NUL, then byte by byte.
    @inlinable @inline(__always) public static func foldNoCase(_ source: UnsafePointer<UInt8>, count: Int, into out: UnsafeMutableRawPointer) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var i = 0
        while i + 8 <= count {
            let w = UnsafeRawPointer(source + i).loadUnaligned(as: UInt64.self)
            // A byte ≥ 0x80 or a zero byte ends the fast path.
            if w & highs != 0 || (w &- ones) & ~w & highs != 0 { break }
            // High bit of each byte: set when the byte is ≥ 'A' and not > 'Z' (bytes are < 0x80, so
            // the additions do not carry into the next byte).
            let upper = (w &+ 0x3F3F_3F3F_3F3F_3F3F) & ~(w &+ 0x2525_2525_2525_2525) & highs
            out.storeBytes(of: w | (upper >> 2), toByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < count {
            let b = source[i]
            if b == 0 { return i }
            out.storeBytes(of: b &- 0x41 < 26 ? b | 0x20 : b, toByteOffset: i, as: UInt8.self)
            i += 1
        }
        return count
    }

    /// The key stored in LMDB for a full key: the key itself when it fits, otherwise its first
    /// ``prefixLimit`` bytes and the row number (which keeps it unique).
    @inlinable public static func storedKey(_ full: [UInt8], rowId: UInt64) -> [UInt8] {
        if full.count <= prefixLimit { return full }
        var out = Array(full[0..<prefixLimit])
        appendBigEndian(rowId, into: &out)
        return out
    }

    /// Whether a stored key is a truncated one.
    @inlinable @inline(__always) public static func isLong(_ stored: [UInt8]) -> Bool { stored.count > prefixLimit }

    /// The part of a stored key that carries order: the key without the row number of a long key.
    @inlinable public static func orderedPart(_ stored: [UInt8]) -> ArraySlice<UInt8> {
        stored.count > prefixLimit ? stored[0..<prefixLimit] : stored[...]
    }

    /// The smallest byte string greater than every string that starts with `p`, or `nil` when
    /// there is none (`p` is empty or all 0xFF).
    @inlinable public static func successor<C: Collection>(_ p: C) -> [UInt8]? where C.Element == UInt8 {
        var q = Array(p)
        while let last = q.last, last == 0xFF { q.removeLast() }
        guard !q.isEmpty else { return nil }
        q[q.count - 1] += 1
        return q
    }

    /// Maps a bound on full keys to a bound on stored keys that keeps every row inside.
    ///
    /// Truncation is monotone, so `full >= lower` implies `stored >= lower[..<L]`, and
    /// `full < upper` implies `stored < upper` (when `upper` fits) or `stored < succ(upper[..<L])`.
    @inlinable public static func storedLower(_ lower: [UInt8]) -> [UInt8] {
        lower.count > prefixLimit ? Array(lower[0..<prefixLimit]) : lower
    }

    /// Maps an upper bound on full keys to one on stored keys that keeps every row inside (see ``storedLower(_:)``).
    @inlinable public static func storedUpper(_ upper: [UInt8]) -> [UInt8]? {
        upper.count <= prefixLimit ? upper : successor(upper[0..<prefixLimit])
    }
}

extension Array where Element == UInt8 {
    /// `memcmp` order with the shorter array first on a common prefix (LMDB's default key order).
    @inlinable @inline(__always) public func precedes(_ other: [UInt8]) -> Bool { lexicographicallyPrecedes(other) }
}
