import Foundation
import LocalStore
import LocalStoreConformance
import Testing

let factory = StoreFactory(name: "mine", isPersistent: false) { directory in try MyStore(directory: directory) }

@Test func myStoreConforms() throws {
    for check in ConformanceSuite.completeSuite {
        do { try check.run(factory) } catch { Issue.record("\(check): \(error)") }
    }
}

@Test func myStoreObservationConforms() async throws {
    for check in ConformanceSuite.observationChecks {
        do { try await check.run(factory) } catch { Issue.record("\(check): \(error)") }
    }
}

// The snippets of "Writing your own backend" (Sources/LocalStore/LocalStore.docc/WritingYourOwnBackend.md),
// verbatim (ArticleSnippetTests checks that): the two tests that run the whole conformance suite against the
// skeleton backend, and the skeleton.

/// A backend of your own. This one keeps its rows in an InMemoryStore to show the shape;
/// replace each forwarded call with your engine.
final class MyStore: LocalStore {
    private let engine: InMemoryStore

    init(directory: URL) throws { engine = try InMemoryStore() }

    var systemTableNames: SystemTableNames { engine.systemTableNames }
    var changeCenter: ChangeCenter { engine.changeCenter }
    func defineTable(_ schema: TableSchema) throws { try engine.defineTable(schema) }
    func tableSchemas() throws -> [TableSchema] { try engine.tableSchemas() }
    func schema(of table: String) throws -> TableSchema? { try engine.schema(of: table) }
    func read(table: String, id: Value) throws -> Item? { try engine.read(table: table, id: id) }
    func read(_ query: Query) throws -> ReadResult { try engine.read(query) }
    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try engine.upsert(items, into: table, options: options)
    }
    func delete(ids: [Value], from table: String) throws { try engine.delete(ids: ids, from: table) }
    func delete(matching query: Query) throws { try engine.delete(matching: query) }
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try engine.performWrite(body)
    }
    func close() throws { try engine.close() }
}

/// The suite is not vacuous: a backend that breaks one rule (here, upserts that replace instead of
/// merge) fails it.
@Test func aBrokenBackendFailsTheSuite() throws {
    final class ReplacingStore: LocalStore {
        private let engine: InMemoryStore
        init() throws { engine = try InMemoryStore() }
        var systemTableNames: SystemTableNames { engine.systemTableNames }
        var changeCenter: ChangeCenter { engine.changeCenter }
        func defineTable(_ schema: TableSchema) throws { try engine.defineTable(schema) }
        func tableSchemas() throws -> [TableSchema] { try engine.tableSchemas() }
        func schema(of table: String) throws -> TableSchema? { try engine.schema(of: table) }
        func read(table: String, id: Value) throws -> Item? { try engine.read(table: table, id: id) }
        func read(_ query: Query) throws -> ReadResult { try engine.read(query) }
        func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
            try engine.write { tx in
                try tx.delete(ids: items.compactMap(\.id), from: table)
                try tx.upsert(items, into: table, options: options)
            }
        }
        func delete(ids: [Value], from table: String) throws { try engine.delete(ids: ids, from: table) }
        func delete(matching query: Query) throws { try engine.delete(matching: query) }
        func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R { try engine.performWrite(body) }
        func close() throws { try engine.close() }
    }
    let broken = StoreFactory(name: "broken", isPersistent: false) { _ in try ReplacingStore() }
    #expect(throws: (any Error).self) { try ConformanceSuite.upsertMergesAbsentKeys(broken) }
}
