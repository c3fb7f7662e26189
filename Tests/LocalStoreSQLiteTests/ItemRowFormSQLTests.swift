import Foundation
import LocalStore
import Testing

@testable import LocalStore
@testable import LocalStoreSQLite

/// Items read from SQLite keep their values by position under the table's shared ``ItemLayout``; they
/// must be the very items that were written, to every caller (equality, hashing, Codable, writing back).
@Suite("SQLite: items in row form")
struct ItemRowFormSQLTests {
    static let schema = TableSchema(
        "T",
        ["s": .string, "i": .integer, "b": .boolean, "d": .double, "t": .date, "x": .binary, "j": .json],
        indexed: ["i"])

    static func items() -> [Item] {
        [
            ["id": "a", "s": "plain", "i": 1, "b": true, "d": .double(-0.0), "t": .date(Date(timeIntervalSinceReferenceDate: 1.25)),
             "x": .binary([0, 1, 2]), "j": .json(["k": [1, 2.5, "v"]])],
            ["id": "b", "s": "", "i": .null, "b": false, "d": .null, "t": .null, "x": .binary([]), "j": .null],
            ["id": "c", "s": "nul\u{0}inside ü", "i": .int(Int64.min), "b": .null, "d": .double(1e300), "t": .null, "x": .null,
             "j": .json("scalar")],
            ["id": "d", "s": .null, "i": 3, "b": true, "d": 2, "t": .date(Date(timeIntervalSinceReferenceDate: -5e8)), "x": .null,
             "j": .json(.int(7))],
        ]
    }

    /// What a read returns for `item`: every column (ints written to a double column read as doubles).
    static func expected(_ item: Item) -> Item {
        var values = item.values
        if case .int(let n)? = values["d"] { values["d"] = .double(Double(n)) }
        return Item(values)
    }

    @Test("reads return row-form items equal to the written ones", arguments: Library.available)
    func readsReturnTheWrittenItems(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(Self.schema)
        try store.upsert(Self.items(), into: "T")

        var layouts: [ItemLayout] = []
        for written in Self.items() {
            let read = try #require(try store.read(table: "T", id: written.id!))
            let want = Self.expected(written)
            #expect(read.layout != nil, "a read by id is in row form")
            #expect(read == want)
            #expect(want == read)
            #expect(read.hashValue == want.hashValue)
            #expect(read.values == want.values)
            layouts.append(try #require(read.layout))
        }
        #expect(try store.read(table: "T", id: "b")?["s"] == .string(""), "an empty string is not null")
        #expect(try store.read(table: "T", id: "d")?["s"] == .null)

        let all = try store.read(Query("T", sort: [SortKey("id")])).items
        #expect(all == Self.items().map(Self.expected))
        #expect(Set(all) == Set(Self.items().map(Self.expected)))
        // Every whole-row read of the table shares one layout.
        for item in all { #expect(item.layout === layouts[0]) }
        for layout in layouts { #expect(layout === layouts[0]) }

        // A projection has a layout of its own columns.
        let projected = try store.read(Query("T", where: Field("i") == 3, select: ["s", "i"])).items
        #expect(projected == [["s": .null, "i": 3]])
        #expect(projected.first?.layout != nil)
        #expect(projected.first?.layout !== layouts[0])

        // Changed in place and written back.
        var changed = try #require(try store.read(table: "T", id: "a"))
        changed["i"] = 42
        changed["s"] = "changed"
        #expect(changed.layout != nil)
        try store.upsert([changed], into: "T")
        var want = Self.expected(Self.items()[0])
        want["i"] = 42
        want["s"] = "changed"
        #expect(try store.read(table: "T", id: "a") == want)
    }

    struct Row: Codable, Equatable {
        var id: String
        var s: String?
        var i: Int64?
        var b: Bool?
        var t: Date?
        var x: Data?
    }

    @Test("row-form items decode with ItemDecoder", arguments: Library.available)
    func rowFormItemsDecode(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(Self.schema)
        try store.upsert(Self.items(), into: "T")
        let rows = try store.read(Query("T", sort: [SortKey("id")])).items.map { try ItemDecoder().decode(Row.self, from: $0) }
        #expect(rows.map(\.id) == ["a", "b", "c", "d"])
        #expect(rows[0] == Row(id: "a", s: "plain", i: 1, b: true, t: Date(timeIntervalSinceReferenceDate: 1.25), x: Data([0, 1, 2])))
        #expect(rows[1] == Row(id: "b", s: "", i: nil, b: false, t: nil, x: Data()))
        #expect(rows[3].s == nil)
        let reencoded = try rows.map { try ItemEncoder(omitsNilValues: true).encode($0) }
        try store.upsert(reencoded, into: "T")
        #expect(try store.read(Query("T", sort: [SortKey("id")])).items == Self.items().map(Self.expected))
    }
}
