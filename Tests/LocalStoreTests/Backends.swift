import LocalStore
import LocalStoreConformance
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite

/// Every backend the conformance suite runs against. One line per backend.
enum Backends {
    static let all: [StoreFactory] = [
        StoreFactory(name: "memory", isPersistent: false) { _ in try InMemoryStore() },
        StoreFactory(name: "lmdb", isPersistent: true) { dir in try LMDBStore(path: dir.appendingPathComponent("store.lmdb").path) },
        StoreFactory(name: "sqlite", isPersistent: true) { dir in try SQLiteStore(path: dir.appendingPathComponent("store.sqlite").path) },
        StoreFactory(name: "sqlcipher", isPersistent: true) { dir in try SQLCipherStore(path: dir.appendingPathComponent("store.db").path, key: conformanceKey) },
    ].filter { $0.name != "sqlcipher" || SQLCipherLibrary.processRefusal == nil }  // sanitizer runs: localstore-sqlcipher-suite
}

/// A fixed raw key for the SQLCipher conformance run (raw keys skip PBKDF2, keeping the suite fast).
let conformanceKey: SQLCipherKey = {
    do { return try SQLCipherKey.raw((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }) } catch {
        preconditionFailure("a 32-byte raw key is always valid: \(error)")
    }
}()
