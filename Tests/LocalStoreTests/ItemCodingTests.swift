import Foundation
import LocalStore
import Testing

@Suite("Codable items")
struct ItemCodingTests {
    struct Tag: Codable, Equatable { var name: String; var weight: Double }
    struct Todo: Codable, Equatable {
        var id: String
        var text: String
        var complete: Bool
        var priority: Int
        var due: Date?
        var attachment: Data?
        var tags: [Tag]
        var owner: UUID
    }

    static let schema = TableSchema(
        "Todo",
        ["text": .string, "complete": .boolean, "priority": .integer, "due": .date, "attachment": .binary,
         "tags": .json, "owner": .string])

    static let sample = Todo(
        id: "t1", text: "buy milk", complete: false, priority: 3,
        due: Date(timeIntervalSinceReferenceDate: 812_345_678.123_456_7), attachment: Data([0, 1, 255]),
        tags: [Tag(name: "home", weight: 0.5), Tag(name: "x", weight: 2)],
        owner: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)

    @Test func encodesByColumnType() throws {
        let item = try ItemEncoder().encode(Self.sample)
        #expect(item["due"] == .date(Self.sample.due!))
        #expect(item["attachment"] == .binary([0, 1, 255]))
        #expect(item["priority"] == .int(3))
        #expect(item["owner"] == .string("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        // Nested values go through Foundation's JSONEncoder, which writes a whole double without a
        // fraction; decoding gives the Double back (see roundTripsThroughAStore).
        #expect(item["tags"] == .json([["name": "home", "weight": 0.5], ["name": "x", "weight": 2]]))
    }

    @Test func roundTripsThroughAStore() throws {
        let store = try InMemoryStore()
        try store.defineTable(Self.schema)
        try store.upsert(records: [Self.sample], into: "Todo")
        #expect(try store.read(Todo.self, table: "Todo", id: "T1") == Self.sample)
        #expect(try store.read(Todo.self, Query("Todo", where: Field("priority") == 3)) == [Self.sample])
    }

    @Test func nilClearsTheColumnUnlessOmitted() throws {
        let store = try InMemoryStore()
        try store.defineTable(Self.schema)
        try store.upsert(records: [Self.sample], into: "Todo")
        var cleared = Self.sample
        cleared.due = nil
        try store.upsert(records: [cleared], into: "Todo", encoder: ItemEncoder(omitsNilValues: true))
        #expect(try store.read(Todo.self, table: "Todo", id: "t1")?.due == Self.sample.due)
        try store.upsert(records: [cleared], into: "Todo")
        #expect(try store.read(Todo.self, table: "Todo", id: "t1")?.due == nil)
    }

    @Test func decodingAMismatchNamesTheColumn() throws {
        let item: Item = ["id": "a", "text": 5, "complete": true, "priority": 1, "tags": .json([]), "owner": "x"]
        #expect {
            try ItemDecoder().decode(Todo.self, from: item)
        } throws: { error in
            "\(error)".contains("text")
        }
    }

    @Test func nonKeyedValuesAreRefused() throws {
        #expect(throws: LocalStoreError.self) { try ItemEncoder().encode([1, 2, 3]) }
        #expect(throws: LocalStoreError.self) { try ItemEncoder().encode("plain") }
    }
}
