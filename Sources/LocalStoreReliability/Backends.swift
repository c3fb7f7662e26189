import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLite
#if canImport(LocalStoreSQLCipher)
import LocalStoreSQLCipher
#endif

/// The persistent backends the reliability harness drives, by the name used on command lines.
public enum ReliabilityBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case sqlcipher
    case lmdb

    public var description: String { rawValue }

    /// The backends compiled into this build (SQLCipher only when its module is linked).
    public static var available: [ReliabilityBackend] {
        allCases.filter(\.isCompiledIn)
    }

    /// Whether this build can open stores of this backend.
    public var isCompiledIn: Bool {
        switch self {
        case .sqlite, .lmdb: return true
        case .sqlcipher:
            #if canImport(LocalStoreSQLCipher)
            // Under a sanitizer a process linking libsqlite3 refuses SQLCipher (docs/reliability.md).
            return SQLCipherLibrary.processRefusal == nil
            #else
            return false
            #endif
        }
    }

    /// Where the store lives inside a directory the harness owns: a file for the SQL backends, a
    /// directory (environment) for LMDB.
    public func storePath(in directory: URL) -> String {
        switch self {
        case .sqlite: return directory.appendingPathComponent("store.sqlite").path
        case .sqlcipher: return directory.appendingPathComponent("store.db").path
        case .lmdb: return directory.appendingPathComponent("store.lmdb").path
        }
    }

    /// The main file holding the data (the one hostile-input tests damage).
    public func dataFile(storePath: String) -> String {
        self == .lmdb ? storePath + "/data.mdb" : storePath
    }

    /// The fixed raw key of the harness's encrypted stores (a test key, not a secret).
    public static let sqlcipherKeyBytes: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0xA0 + $0 * 7) }

    /// Opens (or creates) the store at `path` with the default options except the time a write waits
    /// for another process's write (`busy` after it).
    public func open(path: String, busyTimeout: Duration) throws -> any LocalStore {
        switch self {
        case .sqlite:
            return try SQLiteStore(path: path, options: SQLiteStore.Options(busyTimeout: busyTimeout))
        case .lmdb:
            return try LMDBStore(path: path, options: LMDBStoreOptions(busyTimeout: busyTimeout))
        case .sqlcipher:
            #if canImport(LocalStoreSQLCipher)
            return try SQLCipherStore(
                path: path, key: try SQLCipherKey.raw(Self.sqlcipherKeyBytes), options: .init(busyTimeout: busyTimeout))
            #else
            throw LocalStoreError(.unsupported, "this build does not include LocalStoreSQLCipher")
            #endif
        }
    }

    /// Opens (or creates) the store at `path` with the backend's default, documented options.
    public func open(path: String) throws -> any LocalStore {
        switch self {
        case .sqlite:
            return try SQLiteStore(path: path)
        case .lmdb:
            return try LMDBStore(path: path)
        case .sqlcipher:
            #if canImport(LocalStoreSQLCipher)
            return try SQLCipherStore(path: path, key: try SQLCipherKey.raw(Self.sqlcipherKeyBytes))
            #else
            throw LocalStoreError(.unsupported, "this build does not include LocalStoreSQLCipher")
            #endif
        }
    }
}
