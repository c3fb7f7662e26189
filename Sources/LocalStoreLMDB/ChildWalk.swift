import CLMDB
import CLMDBChildWalk
import LocalStore
#if canImport(Glibc)
import Glibc
#endif

/// The page walk of ``LMDBStore/checkIntegrity()`` in a forked child process (`CLMDBChildWalk`), so a
/// damaged page that makes liblmdb abort or fault kills the child, not the caller.
enum ChildWalk {
    /// How long the child may walk before it is killed (a store of many gigabytes walks in minutes).
    static let timeoutSeconds: Int32 = 600

    /// Returns when the walk finished (or could not open the environment for a reason that is not
    /// damage, e.g. a lock file this process may not write: then the in-process checks run as before);
    /// throws `corrupt` when the child died or liblmdb reported damage.
    static func run(path: String, maximumDatabases: Int) throws {
        var detail: Int32 = 0
        var message = [CChar](repeating: 0, count: 2048)
        let outcome = localstore_lmdb_child_walk(
            path, UInt32(clamping: max(8, maximumDatabases)), timeoutSeconds, &detail, &message, message.count)
        let output = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let lines = output.split(separator: "\n").map(String.init)
        let database = lines.last { $0.hasPrefix("walking database ") }.map { String($0.dropFirst("walking database ".count)) } ?? "?"
        let said = lines.filter { !$0.hasPrefix("walking database ") && !$0.hasPrefix("result ") }.joined(separator: " ")
        switch outcome {
        case LOCALSTORE_WALK_OK:
            return
        case LOCALSTORE_WALK_ERROR:
            switch detail {
            case MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_PANIC, MDB_INVALID, MDB_BAD_VALSIZE:
                throw LMDBErrors.corrupt(
                    "walking database \(database) of '\(path)': \(String(cString: mdb_strerror(detail))) (LMDB \(detail))")
            default:
                return
            }
        case LOCALSTORE_WALK_SIGNAL:
            let name = strsignal(detail).map { String(cString: $0) } ?? "signal \(detail)"
            throw LMDBErrors.corrupt(
                "liblmdb crashed (\(name), signal \(detail)) walking database \(database) of '\(path)' in a separate process"
                    + (said.isEmpty ? "" : ": \(said)")
                    + "; reading that part of the store in this process would crash it too")
        case LOCALSTORE_WALK_TIMEOUT:
            throw LocalStoreError(
                .ioError,
                "the integrity walk of '\(path)' did not finish in \(detail) s (it was at database \(database))"
                    + (said.isEmpty ? "" : "; \(said)"))
        case LOCALSTORE_WALK_NO_RESULT:
            throw LocalStoreError(.ioError, "the integrity walk of '\(path)' ended without a result (exit status \(detail))")
        default:
            throw LocalStoreError(
                .ioError, "cannot run the integrity walk of '\(path)' in a child process: \(String(cString: strerror(detail)))")
        }
    }
}
