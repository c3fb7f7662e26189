#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Substring search over contiguous bytes. The empty needle is found everywhere.
package enum ByteSearch {
    package static func contains(_ hay: UnsafeRawBufferPointer, _ needle: UnsafeRawBufferPointer) -> Bool {
        if needle.isEmpty { return true }
        guard needle.count <= hay.count, let h = hay.baseAddress, let n = needle.baseAddress else { return false }
        let m = needle.count
        let last = hay.count - m
        let first = n.load(as: UInt8.self)
        @inline(__always) func matches(at i: Int) -> Bool {
            var j = 0
            while j < m, h.load(fromByteOffset: i + j, as: UInt8.self) == n.load(fromByteOffset: j, as: UInt8.self) { j += 1 }
            return j == m
        }
        if hay.count >= 256 {
            // Long text: memchr finds the candidates for the first byte.
            var i = 0
            while i <= last {
                guard let hit = memchr(h + i, Int32(first), last - i + 1) else { return false }
                i = h.distance(to: UnsafeRawPointer(hit))
                if matches(at: i) { return true }
                i += 1
            }
            return false
        }
        // Eight candidate positions at a time: the bytes equal to the first byte of the needle are
        // the zero bytes of `word ^ pattern` (the lowest flag is exact; higher ones may be false
        // positives, and every flagged position is checked).
        let ones: UInt64 = 0x0101_0101_0101_0101
        let pattern = UInt64(first) &* ones
        var i = 0
        while i + 8 <= last + 1 {
            let w = h.loadUnaligned(fromByteOffset: i, as: UInt64.self).littleEndian ^ pattern
            var flags = (w &- ones) & ~w & 0x8080_8080_8080_8080
            while flags != 0 {
                if matches(at: i + flags.trailingZeroBitCount >> 3) { return true }
                flags &= flags &- 1
            }
            i += 8
        }
        while i <= last {
            if h.load(fromByteOffset: i, as: UInt8.self) == first, matches(at: i) { return true }
            i += 1
        }
        return false
    }
}
