import CLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import LocalStore

/// Thrown inside the backend when LMDB reports `MDB_MAP_FULL`: the transaction layer catches it,
/// grows the map and replays. It never reaches a caller (the public entry points translate it).
struct MapFullSignal: Error {
    /// The map size in force when the write failed.
    let mapSize: Int
}

/// Thrown when a map growth could not replay a transaction because another process committed in
/// between: the `write {}` body must run again on the new state.
struct RestartSignal: Error {}

/// Thrown while loading the catalog when a table created by another process has no database
/// handle in this process yet.
struct MissingHandlesSignal: Error {
    let names: [String]
}

enum LMDBErrors {
    /// Maps an LMDB (or errno) return code to the store's error.
    static func map(_ rc: Int32, _ what: String) -> LocalStoreError {
        let text = String(cString: mdb_strerror(rc))
        let message = "\(what): \(text) (LMDB \(rc))"
        let code: LocalStoreError.Code
        switch rc {
        case MDB_INVALID:
            code = .notADatabase
        case MDB_VERSION_MISMATCH:
            code = .versionMismatch
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_PANIC:
            code = .corrupt
        case MDB_MAP_FULL, MDB_DBS_FULL, MDB_TXN_FULL:
            code = .full
        case MDB_READERS_FULL:
            code = .readersFull
        case MDB_INCOMPATIBLE:
            code = .notADatabase
        case MDB_BAD_RSLOT, MDB_BAD_TXN:
            code = .misuse
        case ENOSPC, EDQUOT, ENOMEM, EFBIG:
            code = .full
        case EIO:
            code = .ioError
        case EACCES, EPERM, EROFS:
            code = .readOnly
        case EAGAIN, EBUSY:
            code = .busy
        case ENOTDIR, EISDIR:
            code = .notADatabase
        case ENOENT:
            code = .ioError
        default:
            code = .internal
        }
        return LocalStoreError(code, message, engineResultCode: rc)
    }

    /// Throws the mapped error for a non-zero return code; `MDB_MAP_FULL` becomes ``MapFullSignal``
    /// when `env` is given, so the caller can grow the map.
    @inline(__always)
    static func check(_ rc: Int32, _ what: @autoclosure () -> String, env: OpaquePointer? = nil) throws {
        guard rc != 0 else { return }
        if rc == MDB_MAP_FULL, let env {
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            throw MapFullSignal(mapSize: info.me_mapsize)
        }
        throw map(rc, what())
    }

    /// Commits `txn`. liblmdb reports a short write of a full filesystem as `EIO`; when the
    /// filesystem holding `path` has (almost) no free space left, that is reported as `full`.
    static func commit(_ txn: OpaquePointer?, path: String, env: OpaquePointer? = nil) throws {
        let rc = mdb_txn_commit(txn)
        if rc == EIO, filesystemIsFull(path) {
            throw LocalStoreError(.full, "cannot commit: the filesystem holding '\(path)' is full (LMDB reported EIO)")
        }
        try check(rc, "cannot commit", env: env)
    }

    /// Whether the filesystem holding `path` has less than 1 MiB free for unprivileged writers.
    static func filesystemIsFull(_ path: String) -> Bool {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return false }
        return UInt64(fs.f_bavail) * UInt64(fs.f_frsize) < 1 << 20
    }

    static func corrupt(_ what: String, table: String? = nil) -> LocalStoreError {
        LocalStoreError(.corrupt, "the store is damaged: \(what)", table: table)
    }

    /// An index entry of `table` whose primary key has no row.
    static func danglingIndexEntry(table: String) -> LocalStoreError {
        corrupt("an index of table '\(table)' names a row that does not exist", table: table)
    }
}
