import Foundation
import LocalStore
import Testing

@testable import LocalStoreSQLite

/// Two store instances on one file (the same as two processes for the engine): a schema change made
/// through one is seen by the other without reopening, because the engine reloads its catalog when
/// `PRAGMA schema_version` changed.
@Suite("SQL engine: schema changes made elsewhere")
struct SchemaChangeTests {
    @Test(arguments: Library.available)
    func tablesAndColumnsDefinedByAnotherInstanceAreSeen(_ library: Library) throws {
        try library.withTwoInstances { a, b in try tablesAndColumnsAreSeen(a, b) }
    }

    private func tablesAndColumnsAreSeen(_ a: SQLiteStore, _ b: SQLiteStore) throws {
        #expect(try a.tableSchemas().isEmpty)

        // A new table, defined by b after a opened: listed, readable and writable through a.
        try b.defineTable(TableSchema("T", ["text": .string]))
        try b.upsert([["id": "x", "text": "from b"]], into: "T")
        #expect(try a.tableSchemas().map(\.name) == ["T"])
        #expect(try a.read(table: "T", id: "x")?["text"] == "from b")
        try a.upsert([["id": "y", "text": "from a"]], into: "T")
        #expect(try b.count("T") == 2)

        // A column b adds: a sees it in the schema and in rows, and a's writes keep it.
        try b.defineTable(TableSchema("T", ["text": .string, "extra": .integer]))
        try b.upsert([["id": "x", "text": "from b", "extra": 7]], into: "T")
        #expect(try a.schema(of: "T")?.index(ofColumn: "extra") != nil)
        #expect(try a.read(table: "T", id: "x")?["extra"] == 7)
        try a.upsert([["id": "x", "text": "changed by a", "extra": 8]], into: "T")
        #expect(try b.read(table: "T", id: "x")?["extra"] == 8)
        #expect(try b.read(table: "T", id: "x")?["text"] == "changed by a")

        // a defining the same table again with the column it already has changes nothing.
        try a.defineTable(TableSchema("T", ["text": .string, "extra": .integer]))
        #expect(try b.read(table: "T", id: "x")?["extra"] == 8)
    }

    /// Short reads (by id, `top` 1) run on the idle writer connection without reading `PRAGMA
    /// schema_version` first: a table the catalog does not know makes it look, so a table another
    /// instance defined is readable at once, before any other call reloaded the catalog.
    @Test(arguments: Library.available)
    func aTableDefinedByAnotherInstanceIsReadableByIdAtOnce(_ library: Library) throws {
        try library.withTwoInstances { a, b in try tableIsReadableAtOnce(a, b) }
    }

    private func tableIsReadableAtOnce(_ a: SQLiteStore, _ b: SQLiteStore) throws {
        try a.defineTable(TableSchema("First", ["text": .string]))
        #expect(try a.read(table: "First", id: "none") == nil)

        try b.defineTable(TableSchema("Second", ["text": .string]))
        try b.upsert([["id": "x", "text": "from b"]], into: "Second")
        #expect(try a.read(table: "Second", id: "x")?["text"] == "from b")
        try b.defineTable(TableSchema("Third", ["text": .string]))
        try b.upsert([["id": "y", "text": "from b"]], into: "Third")
        #expect(try a.read(Query("Third", top: 1)).items.first?["text"] == "from b")
        #expect(throws: LocalStoreError.self) { try a.read(table: "Fourth", id: "x") }
    }
}
