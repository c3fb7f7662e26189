import LocalStore
import LocalStoreConformance
import LocalStoreLMDB
import LocalStoreSQLite

/// Every backend the conformance suite runs against. One line per backend.
enum Backends {
    static let all: [StoreFactory] = [
        StoreFactory(name: "memory", isPersistent: false) { _ in try InMemoryStore() },
        StoreFactory(name: "lmdb", isPersistent: true) { dir in try LMDBStore(path: dir.appendingPathComponent("store.lmdb").path) },
        StoreFactory(name: "sqlite", isPersistent: true) { dir in try SQLiteStore(path: dir.appendingPathComponent("store.sqlite").path) },
    ]
}
