import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite

/// Opens the store a ``StoreURL`` names.
enum StoreOpener {
    /// Opens `url`. With `mustExist`, a path that does not exist is an error instead of a new store.
    static func open(
        _ url: StoreURL, key: KeyOptions, mustExist: Bool, environmentKey: String = "LOCALSTORE_KEY"
    ) throws -> any LocalStore {
        if mustExist, url.scheme != .memory, !FileManager.default.fileExists(atPath: url.path) {
            throw CommandFailure("no store at '\(url.path)' (\(url))")
        }
        switch url.scheme {
        case .memory:
            return try InMemoryStore()
        case .sqlite:
            return try SQLiteStore(path: url.path)
        case .lmdb:
            return try LMDBStore(path: url.path)
        case .sqlcipher:
            guard let bytes = try key.keyBytes(required: true, environment: environmentKey) else {
                throw CommandFailure("a sqlcipher: store needs a key")
            }
            return try SQLCipherStore(path: url.path, key: try cipherKey(bytes))
        }
    }

    /// 32 bytes (64 hex digits) are a raw 256-bit key; anything else is a passphrase.
    static func cipherKey(_ bytes: [UInt8]) throws -> SQLCipherKey {
        bytes.count == 32 ? try SQLCipherKey.raw(bytes) : try SQLCipherKey.passphrase(bytes)
    }
}
