import Foundation
import LocalStore
import LocalStoreConformance
import LMDBKVExample
import LocalStoreKV
import RocksDBStore
import Testing

/// The example backends (Examples/RocksDBStore): the whole conformance suite, persistent — reopening, and a
/// second store object on the same directory while the first is open. RocksDB; and KVStore over LMDB as a
/// complete backend — a map opened at 64 KiB that grows, keys of any length through `KeyLengthLimitedEngine`
/// at LMDB's 511 bytes (the engine objects of one directory share one LMDB environment).
@Suite("The example backends (RocksDB; KVStore over LMDB, growing, long keys): the whole conformance suite")
struct RocksDBStoreConformanceTests {
    // Commits are not flushed to disk here: the suite makes thousands of them, and no check cuts the power.
    static let factories = [
        StoreFactory(name: "rocksdb", isPersistent: true) { directory in
            try RocksDBStore.open(directory: directory.appendingPathComponent("rocksdb").path, sync: false)
        },
        StoreFactory(name: "kv-lmdb-grow", isPersistent: true) { directory in
            let engine = try LMDBKVEngine(directory: directory.appendingPathComponent("kv-lmdb").path, mapSize: 64 << 10, sync: false)
            return try KVStore(engine: KeyLengthLimitedEngine(engine, maximumKeyLength: 511))
        },
    ]

    @Test("conformance check", arguments: factories, ConformanceSuite.completeSuite)
    func conforms(_ factory: StoreFactory, _ check: ConformanceCheck) throws {
        try check.run(factory)
    }

    @Test("observation check", arguments: factories, ConformanceSuite.observationChecks)
    func observationConforms(_ factory: StoreFactory, _ check: AsyncConformanceCheck) async throws {
        try await check.run(factory)
    }
}

@Suite("RocksDBStore (example): store objects on one directory")
struct RocksDBStoreSharingTests {
    @Test("a second store object on the directory called inside the first's write body is misuse, not a wait for itself")
    func reentryFromTheWritingThreadIsMisuse() throws {
        try secondStoreInsideWriteBodyIsMisuse(name: "RocksDBStoreTests") { try RocksDBStore.open(directory: $0, sync: false) }
    }
}

/// Two store objects open on one directory (`open` opens one on the path it is given): the second called
/// inside the first's write body is `misuse` and leaves nothing written; outside it, each sees the other's
/// commits; the files stay open while one of them is (the first's close leaves the second working).
func secondStoreInsideWriteBodyIsMisuse(name: String, _ open: (String) throws -> some LocalStore) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let first = try open(directory)
    let second = try open(directory)
    defer {
        try? second.close()
        try? first.close()
    }
    try first.defineTable(TableSchema("T", ["n": .integer]))
    let error = #expect(throws: LocalStoreError.self) {
        try first.write { tx in
            try tx.upsert([["id": "a", "n": 1]], into: "T")
            try second.upsert([["id": "b", "n": 2]], into: "T")
        }
    }
    #expect(error?.code == .misuse)
    #expect(try first.count("T") == 0)
    try second.upsert([["id": "b", "n": 2]], into: "T")
    #expect(try first.count("T") == 1)
    try first.close()
    try second.upsert([["id": "c", "n": 3]], into: "T")
    #expect(try second.count("T") == 2)
}
