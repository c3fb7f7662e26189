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

    @Test("the items of one result share one buffer and stay independent values", arguments: Library.available)
    func resultItemsShareOneBuffer(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        let store = try library.open(path)
        defer { try? store.close() }
        try store.defineTable(Self.schema)
        // More rows than the reader makes room for up front (64 rows without a top, at most 256 with one).
        let written: [Item] = (0..<300).map { n in
            ["id": .string("r\(1000 + n)"), "s": .string("text \(n) " + String(repeating: "x", count: n % 40)),
             "i": .int(Int64(n)), "b": .bool(n % 3 == 0)]
        }
        try store.upsert(written, into: "T")
        let columns = ["id", "s", "i", "b"]
        let all = try store.read(Query("T", sort: [SortKey("id")], select: columns)).items
        #expect(all == written)
        let top = try store.read(Query("T", sort: [SortKey("i", .descending)], top: 270, select: columns)).items
        #expect(top == Array(written.reversed().prefix(270)))
        let page = try store.read(Query("T", where: Field("i") >= 100, sort: [SortKey("i")], skip: 3, top: 50, select: columns)).items
        #expect(page == Array(written[103..<153]))

        // Changing one item changes no other, and not the result it came from.
        var changed = all
        changed[5]["s"] = "changed"
        changed[6]["i"] = nil
        #expect(changed[5]["s"] == "changed")
        #expect(changed[6]["i"] == nil)
        #expect(Array(changed[0..<5]) == Array(written[0..<5]))
        #expect(Array(changed[7...]) == Array(written[7...]))
        #expect(all == written)
        // One item kept alone (its slice keeps the buffer) reads the same after the rest is gone.
        let kept: Item = try {
            let result = try store.read(Query("T", where: Field("i") < 60, sort: [SortKey("i")], select: columns)).items
            return result[42]
        }()
        #expect(kept == written[42])

        // A projection naming a column twice (in another case too): dictionary items, one key per column.
        let twice = try store.read(Query("T", where: Field("i") == 7, select: ["s", "S", "i"])).items
        #expect(twice == [["s": written[7]["s"]!, "i": 7]])

        // A row that cannot be read (text in a json column that is not JSON) fails the whole read: no
        // partial result, and the store reads as before once the row is repaired.
        try store.upsert([["id": "r1010", "j": .json(["ok": true])]], into: "T")
        try runRawSQL(try #require(library.api), path, ["UPDATE T SET j = '{not json' WHERE id = 'r1010'"])
        #expect(throws: LocalStoreError.self) { try store.read(Query("T", sort: [SortKey("id")])) }
        let error = try #require(throws: LocalStoreError.self) { try store.read(Query("T", top: 100)) }
        #expect(error.code == .corrupt)
        try runRawSQL(try #require(library.api), path, ["UPDATE T SET j = NULL WHERE id = 'r1010'"])
        #expect(try store.read(Query("T", sort: [SortKey("id")], select: columns)).items == written)
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
