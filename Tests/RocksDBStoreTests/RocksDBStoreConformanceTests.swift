import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreKV
import RocksDBStore
import Testing

/// The example backend (Examples/RocksDBStore): the whole conformance suite, persistent — reopening, and a
/// second store object on the same directory while the first is open.
@Suite("RocksDBStore (example): the whole conformance suite")
struct RocksDBStoreConformanceTests {
    // Commits are not flushed to disk here: the suite makes thousands of them, and no check cuts the power.
    static let factory = StoreFactory(name: "rocksdb", isPersistent: true) { directory in
        try RocksDBStore.open(directory: directory.appendingPathComponent("rocksdb").path, sync: false)
    }

    @Test("conformance check", arguments: ConformanceSuite.completeSuite)
    func conforms(_ check: ConformanceCheck) throws {
        try check.run(Self.factory)
    }

    @Test("observation check", arguments: ConformanceSuite.observationChecks)
    func observationConforms(_ check: AsyncConformanceCheck) async throws {
        try await check.run(Self.factory)
    }
}
