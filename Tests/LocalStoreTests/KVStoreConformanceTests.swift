import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreKV
import Testing

/// The toolkit's generic store on its in-memory reference engine, held to the whole conformance suite.
@Suite("KVStore on InMemoryKVEngine: the whole conformance suite")
struct KVStoreConformanceTests {
    static let factory = StoreFactory(name: "kv-memory", isPersistent: false) { _ in try KVStore(engine: InMemoryKVEngine()) }

    @Test("conformance check", arguments: ConformanceSuite.completeSuite)
    func conforms(_ check: ConformanceCheck) throws {
        try check.run(Self.factory)
    }

    @Test("observation check", arguments: ConformanceSuite.observationChecks)
    func observationConforms(_ check: AsyncConformanceCheck) async throws {
        try await check.run(Self.factory)
    }
}

/// The same with the engine's savepoints (``OrderedKeyValueWriter/hasSavepoints``): `KVStore` keeps no undo
/// log, and every failed call, rolled-back nested write and refused input is undone by the engine.
@Suite("KVStore on InMemoryKVEngine with savepoints: the whole conformance suite")
struct KVStoreSavepointConformanceTests {
    static let factory = StoreFactory(name: "kv-memory-savepoints", isPersistent: false) { _ in
        try KVStore(engine: InMemoryKVEngine(savepoints: true))
    }

    @Test("conformance check", arguments: ConformanceSuite.completeSuite)
    func conforms(_ check: ConformanceCheck) throws {
        try check.run(Self.factory)
    }
}

/// The same with restarts (``OrderedKeyValueWriter/canRestart``, no savepoints): `KVStore` keeps what the
/// transaction wrote, and a failed call, rolled-back nested write or refused input restarts the engine's
/// transaction and replays the writes made before it.
@Suite("KVStore on InMemoryKVEngine with restarts: the whole conformance suite")
struct KVStoreRestartConformanceTests {
    static let factory = StoreFactory(name: "kv-memory-restarts", isPersistent: false) { _ in
        try KVStore(engine: InMemoryKVEngine(restarts: true))
    }

    @Test("conformance check", arguments: ConformanceSuite.completeSuite)
    func conforms(_ check: ConformanceCheck) throws {
        try check.run(Self.factory)
    }
}
