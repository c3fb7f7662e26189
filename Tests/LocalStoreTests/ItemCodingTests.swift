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

    // MARK: Single-value types

    enum Priority: String, Codable, Equatable { case low, high }
    enum Level: Int, Codable, Equatable { case one = 1, two = 2 }
    /// A wrapper encoding through `singleValueContainer()`.
    struct Celsius: Codable, Equatable {
        var degrees: Double
        init(_ degrees: Double) { self.degrees = degrees }
        init(from decoder: any Decoder) throws { degrees = try decoder.singleValueContainer().decode(Double.self) }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(degrees)
        }
    }
    /// A wrapper of a `Date`, and a wrapper of a wrapper.
    struct Stamp: Codable, Equatable {
        var date: Date
        init(_ date: Date) { self.date = date }
        init(from decoder: any Decoder) throws { date = try decoder.singleValueContainer().decode(Date.self) }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(date)
        }
    }
    struct Flag: Codable, Equatable {
        var on: Bool
        init(_ on: Bool) { self.on = on }
        init(from decoder: any Decoder) throws { on = try decoder.singleValueContainer().decode(Bool.self) }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(on)
        }
    }
    struct Wrapped: Codable, Equatable {
        var inner: Priority
        init(_ inner: Priority) { self.inner = inner }
        init(from decoder: any Decoder) throws { inner = try decoder.singleValueContainer().decode(Priority.self) }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(inner)
        }
    }
    enum Shape: Codable, Equatable { case circle(radius: Double), square }

    struct Job: Codable, Equatable {
        var id: String
        var priority: Priority
        var level: Level
        var temperature: Celsius
        var stamp: Stamp
        var flag: Flag
        var wrapped: Wrapped
        var backup: Priority?
        var shape: Shape
        var tags: [Tag]
        var meta: [String: Int]
    }

    static let taskSchema = TableSchema(
        "Task",
        ["priority": .string, "level": .integer, "temperature": .double, "stamp": .date, "flag": .boolean,
         "wrapped": .string, "backup": .string, "shape": .json, "tags": .json, "meta": .json])

    static let task = Job(
        id: "k1", priority: .high, level: .two, temperature: Celsius(21.5),
        stamp: Stamp(Date(timeIntervalSinceReferenceDate: 812_345_678.25)), flag: Flag(true), wrapped: Wrapped(.low),
        backup: nil, shape: .circle(radius: 2.5), tags: [Tag(name: "a", weight: 1.5)], meta: ["n": 1])

    @Test func singleValueTypesEncodeAsTheirScalar() throws {
        let item = try ItemEncoder().encode(Self.task)
        #expect(item["priority"] == .string("high"))
        #expect(item["level"] == .int(2))
        #expect(item["temperature"] == .double(21.5))
        #expect(item["stamp"] == .date(Self.task.stamp.date))
        #expect(item["flag"] == .bool(true))
        #expect(item["wrapped"] == .string("low"))
        #expect(item["backup"] == .null)
        // Keyed and unkeyed values stay json.
        #expect(item["shape"] == .json(["circle": ["radius": 2.5]]))
        #expect(item["tags"] == .json([["name": "a", "weight": 1.5]]))
        #expect(item["meta"] == .json(["n": 1]))
        #expect(try ItemDecoder().decode(Job.self, from: item) == Self.task)
    }

    @Test func singleValueTypesRoundTripThroughTypedColumns() throws {
        let store = try InMemoryStore()
        try store.defineTable(Self.taskSchema)
        var other = Self.task
        other.id = "k2"
        other.priority = .low
        other.backup = .high
        try store.upsert(records: [Self.task, other], into: "Task")
        #expect(try store.read(Job.self, table: "Task", id: "k1") == Self.task)
        #expect(try store.read(Job.self, Query("Task", where: Field("priority") == "low")) == [other])
        #expect(try store.read(Job.self, Query("Task", where: Field("backup") == "high")) == [other])
        #expect(try store.read(table: "Task", id: "k2")?["level"] == .int(2))
    }

    @Test func aSingleValueTypeInAJsonColumnIsAJsonScalar() throws {
        struct Loose: Codable, Equatable { var id: String; var priority: Priority; var level: Level; var name: String }
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("Loose", ["priority": .json, "level": .json, "name": .json]))
        let record = Loose(id: "a", priority: .high, level: .one, name: "n")
        try store.upsert(records: [record], into: "Loose")
        let stored = try #require(try store.read(table: "Loose", id: "a"))
        #expect(stored["priority"] == .json("high"))
        #expect(stored["level"] == .json(1))
        #expect(try store.read(Loose.self, table: "Loose", id: "a") == record)
    }

    @Test func anInvalidRawValueNamesTheColumn() throws {
        let item: Item = [
            "id": "k", "priority": "urgent", "level": 2, "temperature": 1.0, "stamp": .date(Date()), "flag": true,
            "wrapped": "low", "shape": .json(["square": [:]]), "tags": .json([]), "meta": .json([:]),
        ]
        #expect {
            try ItemDecoder().decode(Job.self, from: item)
        } throws: { error in
            "\(error)".contains("priority")
        }
        var wrongKind = item
        wrongKind["priority"] = "high"
        wrongKind["level"] = "two"
        #expect {
            try ItemDecoder().decode(Job.self, from: wrongKind)
        } throws: { error in
            "\(error)".contains("level")
        }
    }

    @Test func upsertOfRecordsTakesOptions() throws {
        struct Pulled: Codable { var id: String; var text: String; var serverOnly: Int }
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("Pulled", ["text": .string]))
        let record = Pulled(id: "p", text: "t", serverOnly: 7)
        #expect(throws: LocalStoreError.self) { try store.upsert(records: [record], into: "Pulled") }
        #expect(try store.read(table: "Pulled", id: "p") == nil)
        try store.upsert(records: [record], into: "Pulled", options: .ignoringUnknownColumns)
        #expect(try store.read(table: "Pulled", id: "p")?["text"] == .string("t"))
        try store.write { tx in
            try tx.upsert(records: [Pulled(id: "q", text: "u", serverOnly: 1)], into: "Pulled", options: .ignoringUnknownColumns)
        }
        #expect(try store.read(table: "Pulled", id: "q")?["text"] == .string("u"))
    }
}
