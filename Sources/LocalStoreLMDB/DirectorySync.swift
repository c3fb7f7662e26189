import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Makes a new store's directory entries durable. liblmdb fsyncs the data file at every commit but
/// never a directory, so without this a power loss (or OS crash) after the first commits of a new
/// store could lose `data.mdb`'s entry in the store directory, or the store directory's in its parent,
/// and with them every commit (found by the power-loss simulation, docs/reliability.md).
enum DirectorySync {
    /// The nearest ancestor of `path` (or `path` itself) that exists.
    static func existingAncestor(of path: String) -> String {
        var current = (path as NSString).standardizingPath
        var st = stat()
        while stat(current, &st) != 0 {
            let parent = (current as NSString).deletingLastPathComponent
            if parent == current || parent.isEmpty { return "." }
            current = parent
        }
        return current
    }

    /// fsyncs `directory` and every directory above it up to and including `top` (best effort: a file
    /// system that cannot sync directories, or a directory that cannot be opened, is skipped).
    static func sync(_ directory: String, upTo top: String) {
        var current = (directory as NSString).standardizingPath
        let last = (top as NSString).standardizingPath
        for _ in 0..<64 {
            let fd = open(current.isEmpty ? "." : current, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if fd >= 0 {
                _ = fsync(fd)
                _ = close(fd)
            }
            if current == last || current.isEmpty || current == "/" { return }
            let parent = (current as NSString).deletingLastPathComponent
            if parent == current { return }
            current = parent.isEmpty ? "." : parent
        }
    }
}
