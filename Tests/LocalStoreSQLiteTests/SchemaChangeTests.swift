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
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        let a = try library.open(path)
        defer { try? a.close() }
        let b = try library.open(path)
        defer { try? b.close() }
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
}
