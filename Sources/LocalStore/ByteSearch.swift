#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Substring search over contiguous bytes. The empty needle is found everywhere.
@usableFromInline package enum ByteSearch {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// The high bit of every zero byte of `x`, and no other bit (exact, unlike the shorter
    /// `(x - ones) & ~x` form, whose borrows flag some bytes above a zero byte).
    @inline(__always) private static func zeroBytes(_ x: UInt64) -> UInt64 {
        ~(((x & low7) &+ low7) | x | low7)
    }

    @usableFromInline package static func contains(_ hay: UnsafeRawBufferPointer, _ needle: UnsafeRawBufferPointer) -> Bool {
        if needle.isEmpty { return true }
        guard needle.count <= hay.count, let h = hay.baseAddress, let n = needle.baseAddress else { return false }
        let m = needle.count
        let last = hay.count &- m  // the last position the needle can start at
        let first = n.load(as: UInt8.self)
        /// Whether the needle is at `i`, its bytes before `j` known to be there.
        @inline(__always) func matches(at i: Int, from j: Int) -> Bool {
            var j = j
            while j < m, h.load(fromByteOffset: i &+ j, as: UInt8.self) == n.load(fromByteOffset: j, as: UInt8.self) { j &+= 1 }
            return j == m
        }
        if hay.count >= 256 {
            // Long text: memchr finds the candidates for the first byte.
            var i = 0
            while i <= last {
                guard let hit = memchr(h + i, Int32(first), last - i + 1) else { return false }
                i = h.distance(to: UnsafeRawPointer(hit))
                if matches(at: i, from: 1) { return true }
                i += 1
            }
            return false
        }
        guard last >= 7 else {
            // Fewer than eight places to look: byte by byte.
            for i in 0...last where h.load(fromByteOffset: i, as: UInt8.self) == first {
                if matches(at: i, from: 1) { return true }
            }
            return false
        }
        // Eight candidate positions at a time. A candidate starts with the needle's first byte and,
        // for needles of two bytes or more, is followed by its second: the zero bytes of
        // `word(i) ^ first` (or'ed with `word(i + 1) ^ second`). The second word ends at byte
        // `i + 8 <= last + 1 < hay.count` because `m >= 2`.
        let p1 = UInt64(first) &* ones
        let two = m >= 2
        let p2 = two ? UInt64(n.load(fromByteOffset: 1, as: UInt8.self)) &* ones : 0
        let verified = two ? 2 : 1
        @inline(__always) func candidates(_ i: Int) -> UInt64 {
            var x = h.loadUnaligned(fromByteOffset: i, as: UInt64.self).littleEndian ^ p1
            if two { x |= h.loadUnaligned(fromByteOffset: i &+ 1, as: UInt64.self).littleEndian ^ p2 }
            return zeroBytes(x)
        }
        @inline(__always) func anyMatch(_ flags: UInt64, base i: Int) -> Bool {
            var flags = flags
            while flags != 0 {
                if matches(at: i &+ flags.trailingZeroBitCount &>> 3, from: verified) { return true }
                flags &= flags &- 1
            }
            return false
        }
        var i = 0
        while i &+ 7 <= last {
            if anyMatch(candidates(i), base: i) { return true }
            i &+= 8
        }
        guard i <= last else { return false }
        // The last fewer-than-eight positions: the word of positions `last - 7 ... last`, without
        // the ones already looked at (`i - s` is 1 to 7 here).
        let s = last &- 7
        return anyMatch(candidates(s) & (~UInt64(0) &<< UInt64((i &- s) &* 8)), base: s)
    }
}
