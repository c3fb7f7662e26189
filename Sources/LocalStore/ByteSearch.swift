#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Substring search over contiguous bytes: `memchr` finds each candidate for the first byte,
/// `memcmp` checks the rest. The empty needle is found everywhere.
package enum ByteSearch {
    package static func contains(_ hay: UnsafeRawBufferPointer, _ needle: UnsafeRawBufferPointer) -> Bool {
        if needle.isEmpty { return true }
        guard needle.count <= hay.count, let h = hay.baseAddress, let n = needle.baseAddress else { return false }
        let first = Int32(n.load(as: UInt8.self))
        let last = hay.count - needle.count
        var i = 0
        while i <= last {
            guard let hit = memchr(h + i, first, last - i + 1) else { return false }
            i = h.distance(to: UnsafeRawPointer(hit))
            if memcmp(h + i, n, needle.count) == 0 { return true }
            i += 1
        }
        return false
    }
}
