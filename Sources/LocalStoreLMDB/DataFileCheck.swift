#if canImport(Glibc)
import Glibc
#endif
import LocalStore

/// Checks an existing `data.mdb` before liblmdb maps it: a file shorter than the pages its meta page
/// claims would make the first access to a missing page kill the process with SIGBUS. liblmdb reads the
/// meta pages with `pread`, so only the length needs checking here; a bad magic number is left to
/// liblmdb (`MDB_INVALID`).
enum DataFileCheck {
    static let magic: UInt32 = 0xBEEF_C0DE

    /// Throws `corrupt` when `dataPath` is shorter than its newest valid meta page says it is.
    static func verify(_ dataPath: String) throws {
        let fd = open(dataPath, O_RDONLY)
        guard fd >= 0 else { return }  // liblmdb reports the open failure itself
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        let size = UInt64(st.st_size)
        guard size > 0 else { return }
        guard let first = meta(fd, at: 0) else { return }
        let pageSize = UInt64(first.pageSize)
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return }
        var newest = first
        if let second = meta(fd, at: off_t(pageSize)), second.txnid > first.txnid { newest = second }
        let needed = (newest.lastPage &+ 1) &* pageSize
        // A meta page with an absurd page count is damage too, not a size to compare with.
        guard newest.lastPage < UInt64(1) << 40 else {
            throw LocalStoreError(.corrupt, "the store is damaged: '\(dataPath)' claims \(newest.lastPage) pages")
        }
        if size < needed {
            throw LocalStoreError(
                .corrupt,
                "the store is damaged: '\(dataPath)' is \(size) bytes but its last transaction needs \(needed) (truncated file)")
        }
    }

    struct Meta {
        let pageSize: UInt32
        let lastPage: UInt64
        let txnid: UInt64
    }

    /// The meta page at `offset`: page header (16 bytes), then `MDB_meta` (magic, version, address,
    /// mapsize, two `MDB_db` of 48 bytes — the first one's `md_pad` holds the page size —, last page,
    /// transaction id). `nil` when it cannot be read or its magic is wrong.
    static func meta(_ fd: Int32, at offset: off_t) -> Meta? {
        var buffer = [UInt8](repeating: 0, count: 152)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 152, offset) }
        guard n == 152 else { return nil }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 | UInt32(buffer[at + $1]) << (8 * UInt32($1)) } }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(buffer[at + $1]) << (8 * UInt64($1)) } }
        guard u32(16) == magic else { return nil }
        return Meta(pageSize: u32(40), lastPage: u64(136), txnid: u64(144))
    }
}
