#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Comparisons of stored string bytes with the rules of ``ASCII/compareBytes(_:_:)`` and
/// ``Collation/compareNoCase(_:_:)``, shared by the backends that test values in place (the in-memory
/// store's columns, LMDB's record filter).
@usableFromInline package enum RawBytes {
    /// Byte order, then length (``ASCII/compareBytes(_:_:)`` on bytes); -1, 0 or 1.
    @inlinable package static func compare(_ x: UnsafeRawBufferPointer, _ y: UnsafeRawBufferPointer) -> Int {
        let n = min(x.count, y.count)
        if n > 0, let px = x.baseAddress, let py = y.baseAddress {
            let c = memcmp(px, py, n)
            if c != 0 { return c < 0 ? -1 : 1 }
        }
        return x.count < y.count ? -1 : (x.count == y.count ? 0 : 1)
    }

    /// ``Collation/compareNoCase(_:_:)`` on bytes (sign only). Eight bytes at a time while the left operand
    /// has no NUL in them, then byte by byte.
    @inlinable package static func compareNoCase(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        var i = 0
        if let pa = a.baseAddress, let pb = b.baseAddress {
            while i + 8 <= n {
                let x = UInt64(littleEndian: pa.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                if hasZeroByte(x) { break }
                let y = UInt64(littleEndian: pb.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                let fx = foldASCII(x)
                let fy = foldASCII(y)
                // The first differing byte decides: compare with the first byte most significant.
                if fx != fy { return fx.byteSwapped < fy.byteSwapped ? -1 : 1 }
                i += 8
            }
        }
        while i < n {
            var x = a[i]
            var y = b[i]
            if x >= 0x41 && x <= 0x5A { x |= 0x20 }
            if y >= 0x41 && y <= 0x5A { y |= 0x20 }
            if x == 0 {
                if y != 0 { return -1 }
                return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
            }
            if x != y { return x < y ? -1 : 1 }
            i += 1
        }
        return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
    }

    /// Whether one of the eight bytes of `w` is zero.
    @inlinable @inline(__always) package static func hasZeroByte(_ w: UInt64) -> Bool {
        (w &- 0x0101_0101_0101_0101) & ~w & 0x8080_8080_8080_8080 != 0
    }

    /// The eight bytes of `w` with ASCII upper-case letters lower-cased (others unchanged).
    @inlinable @inline(__always) package static func foldASCII(_ w: UInt64) -> UInt64 {
        let low7 = w & 0x7F7F_7F7F_7F7F_7F7F
        // High bit of each byte: at least 0x41, at least 0x5B (no carry crosses bytes: each sum < 0x100).
        let atLeastA = low7 &+ 0x3F3F_3F3F_3F3F_3F3F
        let pastZ = low7 &+ 0x2525_2525_2525_2525
        let upper = atLeastA & ~pastZ & ~w & 0x8080_8080_8080_8080
        return w | (upper >> 2)
    }
}
