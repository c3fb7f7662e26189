import Foundation
import LocalStore
import LocalStoreConformance
import Testing

let factory = StoreFactory(name: "mine", isPersistent: false) { directory in try MyStore(directory: directory) }

@Test(arguments: ConformanceSuite.completeSuite)
func myStoreConforms(_ check: ConformanceCheck) throws {
    try check.run(factory)
}

@Test(arguments: ConformanceSuite.observationChecks)
func myStoreObservationConforms(_ check: AsyncConformanceCheck) async throws {
    try await check.run(factory)
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

/// The suite is not vacuous: the same skeleton, claimed persistent (it forgets everything when it is
/// reopened), fails the persistence check.
@Test func aFalsePersistenceClaimFailsTheSuite() throws {
    let forgetful = StoreFactory(name: "forgetful", isPersistent: true) { directory in try MyStore(directory: directory) }
    #expect(throws: (any Error).self) { try ConformanceSuite.persistenceAcrossReopen(forgetful) }
    try ConformanceSuite.persistenceAcrossReopen(factory)
}
