import Foundation
import LocalStore
import LocalStoreConformance
import Testing

/// The size limits at their real values on every backend: an item of exactly `maximumItemBytes` (a
/// string of `maximumValueBytes` and a binary filling the rest) and a json value of exactly
/// `maximumValueBytes` are stored and read back identically; one byte more is refused. Opt-in
/// (`LOCALSTORE_BIG_VALUES=1`): it takes about 2 minutes and 2.5 GB in a debug build, so `make test`
/// checks the same boundary with lowered limits (conformance check `upsertValueSizeLimit`).
@Suite("Value size limits at their real values", .serialized, .enabled(if: ProcessInfo.processInfo.environment["LOCALSTORE_BIG_VALUES"] == "1"))
struct ValueSizeLimitTests {
    @Test(arguments: Backends.all) func itemAndValueAtTheRealLimits(_ backend: StoreFactory) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("localstore-big-\(backend.name)-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try backend.open(in: dir)
        defer { try? store.close() }
        let schema = TableSchema(
            name: "Big", columns: [Column("id", .string), Column("text", .string), Column("blob", .binary), Column("doc", .json)])
        try store.defineTable(schema)
        let text = String(repeating: "a", count: TableSchema.maximumValueBytes)
        let blob = [UInt8](repeating: 7, count: TableSchema.maximumItemBytes - TableSchema.maximumValueBytes - 3)  // id "big": 3 bytes
        try store.upsert([["id": "big", "text": .string(text), "blob": .binary(blob)]], into: "Big")
        let back = try store.read(table: "Big", id: "big")
        #expect(back?["text"] == .string(text))
        #expect(back?["blob"] == .binary(blob))
        let doc = JSON.string(String(repeating: "b", count: TableSchema.maximumValueBytes - 2))
        try store.upsert([["id": "doc", "doc": .json(doc)]], into: "Big")
        #expect(try store.read(table: "Big", id: "doc")?["doc"] == .json(doc))
        for (label, item) in [
            ("a value one byte over", ["id": "o", "text": .string(text + "x")] as Item),
            ("an item one byte over", ["id": "big", "text": .string(text), "blob": .binary(blob + [0])]),
        ] {
            let error = #expect(throws: LocalStoreError.self, "\(label)") { try store.upsert([item], into: "Big") }
            #expect(error?.code == .invalidValue, "\(label)")
        }
        #expect(try store.count("Big") == 2)
        #expect(try store.read(table: "Big", id: "big")?["blob"] == .binary(blob))
    }
}
