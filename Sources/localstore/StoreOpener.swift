import Foundation
import LocalStore
import LocalStoreOpener
import LocalStoreSQLCipher

/// The commands' way to open a store: the library's ``StoreOpener`` with the key taken from a key file
/// or the environment.
extension StoreOpener {
    /// Opens `url`. With `mustExist`, a path that does not exist is an error instead of a new store.
    static func open(
        _ url: StoreURL, key: KeyOptions, mustExist: Bool, environmentKey: String = "LOCALSTORE_KEY"
    ) throws -> any LocalStore {
        if mustExist, url.scheme != .memory, !FileManager.default.fileExists(atPath: url.path) {
            throw CommandFailure("no store at '\(url.path)' (\(url))")
        }
        var cipherKey: SQLCipherKey?
        if url.scheme == .sqlcipher {
            guard let bytes = try key.keyBytes(required: true, environment: environmentKey) else {
                throw CommandFailure("a sqlcipher: store needs a key")
            }
            cipherKey = try Self.cipherKey(bytes)
        }
        return try open(url, key: cipherKey)
    }

    /// 32 bytes (64 hex digits) are a raw 256-bit key; anything else is a passphrase.
    static func cipherKey(_ bytes: [UInt8]) throws -> SQLCipherKey {
        bytes.count == 32 ? try SQLCipherKey.raw(bytes) : try SQLCipherKey.passphrase(bytes)
    }
}
