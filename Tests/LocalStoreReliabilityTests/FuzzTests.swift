import Foundation
import LocalStore
import LocalStoreReliability
import Testing

/// The short version of `make fuzz` (the same engines as `localstore-fuzz`, fewer executions).
@Suite("Fuzzing (short run; `make fuzz` runs 1,000,000+ executions)")
struct FuzzTests {
    @Test("random queries over random rows: every backend agrees with the reference evaluator")
    func queries() throws {
        let dir = try TempDirectory("fuzz")
        var backends: [(name: String, store: any LocalStore)] = [("memory", try InMemoryStore())]
        for backend in ReliabilityBackend.available {
            backends.append((backend.rawValue, try backend.open(path: backend.storePath(in: dir.url))))
        }
        defer { for (_, store) in backends { try? store.close() } }
        let fuzzer = try QueryFuzzer(backends: backends, seed: Settings.uint64("LOCALSTORE_FUZZ_SEED", 1))
        let stats = try fuzzer.run(queries: Settings.fuzzQueries)
        #expect(stats.disagreements.isEmpty, "\(stats.disagreements.joined(separator: "\n"))")
        report("fuzz queries (\(backends.map(\.name).joined(separator: ", "))): \(stats)")
    }

    /// The comparison must be able to fail: a store that swaps the first two rows of some answers
    /// is caught.
    @Test("self-test: a store that returns rows out of order is caught")
    func faultyStoreIsCaught() throws {
        let fuzzer = try QueryFuzzer(backends: [("memory", try InMemoryStore()), ("faulty", try SwappingStore())], seed: 5)
        let stats = try fuzzer.run(queries: 400)
        #expect(stats.disagreements.contains { $0.contains("faulty returned") }, "400 queries on a store with wrong answers went unnoticed")
        #expect(!stats.disagreements.contains { $0.contains("memory") }, "\(stats.disagreements)")
    }

    @Test("damaged LMDB records and catalog entries: a row of the schema's types or a LocalStoreError")
    func lmdbRecords() throws {
        let dir = try TempDirectory("fuzz-records")
        let fuzzer = try RecordFuzzer(directory: dir.path, seed: Settings.uint64("LOCALSTORE_FUZZ_SEED", 1))
        for _ in 0..<10 { try fuzzer.recordBatch(2000) }
        try fuzzer.catalogBatch(200)
        // A damaged catalog entry either still decodes to a valid definition (opened) or is corrupt.
        #expect(Set(fuzzer.stats.catalogRefused.keys).isSubset(of: ["opened", "corrupt"]), "\(fuzzer.stats.catalogRefused)")
        #expect(fuzzer.stats.disagreements.isEmpty, "\(fuzzer.stats.disagreements.joined(separator: "\n"))")
        #expect(fuzzer.stats.decoded > 0 && !fuzzer.stats.refused.isEmpty, "the fuzzer exercised only one outcome: \(fuzzer.stats)")
        report("fuzz lmdb records: \(fuzzer.stats)")
    }

    @Test("OData render → parse → render, and damaged query strings")
    func odata() throws {
        var fuzzer = ODataFuzzer(seed: Settings.uint64("LOCALSTORE_FUZZ_SEED", 1))
        let stats = fuzzer.run(3000)
        #expect(stats.disagreements.isEmpty, "\(stats.disagreements.joined(separator: "\n"))")
        report("fuzz odata: \(stats)")
    }
}

/// An in-memory store whose sorted answers of three rows or more come back with the first two swapped.
final class SwappingStore: LocalStore {
    let inner: InMemoryStore
    init() throws { inner = try InMemoryStore() }
    var systemTableNames: SystemTableNames { inner.systemTableNames }
    func defineTable(_ schema: TableSchema) throws { try inner.defineTable(schema) }
    func tableSchemas() throws -> [TableSchema] { try inner.tableSchemas() }
    func close() throws { try inner.close() }
    var changeCenter: ChangeCenter { inner.changeCenter }
    func schema(of table: String) throws -> TableSchema? { try inner.schema(of: table) }
    func read(table: String, id: Value) throws -> Item? { try inner.read(table: table, id: id) }
    func read(_ query: Query) throws -> ReadResult {
        var result = try inner.read(query)
        if result.items.count >= 3 && !query.sort.isEmpty { result.items.swapAt(0, 1) }
        return result
    }
    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws { try inner.upsert(items, into: table, options: options) }
    func delete(ids: [Value], from table: String) throws { try inner.delete(ids: ids, from: table) }
    func delete(matching query: Query) throws { try inner.delete(matching: query) }
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R { try inner.performWrite(body) }
}
