/// The comparison rules every backend shares, written once so that the in-memory and LMDB backends
/// agree bit for bit with SQLite.
public enum Collation {
    /// Case-insensitive comparison exactly as SQLite's built-in `NOCASE` collation, which the SQL
    /// backends use for ids and for the `[c]` flag: bytes compared after ASCII lower-casing over the
    /// shorter length, where a NUL byte in the left operand ends the comparison; equal prefixes are
    /// then ordered by byte length. Returns a negative number, zero or a positive number.
    @inlinable public static func compareNoCase(_ a: String, _ b: String) -> Int {
        var ia = a.utf8.makeIterator()
        var ib = b.utf8.makeIterator()
        let na = a.utf8.count
        let nb = b.utf8.count
        var remaining = min(na, nb)
        while remaining > 0 {
            remaining -= 1
            // `remaining` counts down like SQLite's N; both iterators have an element here.
            guard var x = ia.next(), var y = ib.next() else { break }
            if x >= 0x41 && x <= 0x5A { x |= 0x20 }
            if y >= 0x41 && y <= 0x5A { y |= 0x20 }
            if x == 0 {
                // SQLite stops at a NUL in the left operand and returns fold(0) - fold(y).
                if y != 0 { return -Int(y) }
                return na - nb
            }
            if x != y { return Int(x) - Int(y) }
        }
        return na - nb
    }

    /// A key that is equal for two strings exactly when ``compareNoCase(_:_:)`` says they are equal:
    /// the ASCII-lower-cased string, cut after its first NUL and followed by its byte length when it has one.
    @inlinable public static func noCaseKey(_ s: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            if b == 0 {
                bytes.append(0)
                bytes.append(contentsOf: String(s.utf8.count).utf8)
                return String(decoding: bytes, as: UTF8.self)
            }
            bytes.append(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Orders two non-null values of one column type as the store sorts them: numbers numerically
    /// (an integer against a double is converted to double), strings by UTF-8 bytes (or by
    /// ``compareNoCase(_:_:)`` when `noCase`), `false < true`, dates chronologically, binary by bytes
    /// then length. Null sorts before everything. Returns -1, 0 or 1 (sign only).
    public static func compare(_ a: Value, _ b: Value, noCase: Bool = false) -> Int {
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.int(let x), .int(let y)): return x < y ? -1 : (x == y ? 0 : 1)
        case (.int(let x), .double(let y)): return cmp(Double(x), y)
        case (.double(let x), .int(let y)): return cmp(x, Double(y))
        case (.double(let x), .double(let y)): return cmp(x, y)
        case (.string(let x), .string(let y)):
            if noCase { return sign(compareNoCase(x, y)) }
            return ASCII.compareBytes(x, y)
        case (.bool(let x), .bool(let y)): return x == y ? 0 : (x ? 1 : -1)
        case (.date(let x), .date(let y)):
            return cmp(x.timeIntervalSinceReferenceDate, y.timeIntervalSinceReferenceDate)
        case (.binary(let x), .binary(let y)):
            for (p, q) in zip(x, y) where p != q { return p < q ? -1 : 1 }
            return x.count < y.count ? -1 : (x.count == y.count ? 0 : 1)
        default:
            // Different kinds never meet after query resolution; order by kind for totality.
            return rank(a) < rank(b) ? -1 : (rank(a) == rank(b) ? 0 : 1)
        }
    }

    @inlinable static func sign(_ x: Int) -> Int { x < 0 ? -1 : (x > 0 ? 1 : 0) }

    @inlinable static func cmp(_ x: Double, _ y: Double) -> Int { x < y ? -1 : (x > y ? 1 : 0) }

    static func rank(_ v: Value) -> Int {
        switch v {
        case .null: return 0
        case .bool: return 1
        case .int, .double: return 2
        case .date: return 3
        case .string: return 4
        case .binary: return 5
        case .json: return 6
        }
    }
}
