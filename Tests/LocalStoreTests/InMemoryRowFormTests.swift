import Foundation
import Testing

@testable import LocalStore

/// The in-memory store returns row-form items (``ItemLayout``): whole rows under the table's one layout,
/// a projection under one layout per query, the same items as the dictionary form would be.
@Suite("In-memory store: row-form items")
struct InMemoryRowFormTests {
    static let schema = TableSchema("T", ["s": .string, "Score": .integer, "d": .double])

    static func store() throws -> InMemoryStore {
        let store = try InMemoryStore()
        try store.defineTable(schema)
        try store.upsert(
            (0..<30).map { n -> Item in
                var item: Item = ["id": .string("r\(n)"), "score": .int(Int64(n % 4))]
                if n % 3 != 0 { item["s"] = .string("s\(n)") }
                if n % 2 == 0 { item["D"] = .double(Double(n) / 4) }
                return item
            }, into: "T")
        return store
    }

    /// What a read returns for row `n`: every column under its defined spelling, null when unset.
    static func expected(_ n: Int) -> [String: Value] {
        ["id": .string("r\(n)"), "s": n % 3 != 0 ? .string("s\(n)") : .null, "Score": .int(Int64(n % 4)),
         "d": n % 2 == 0 ? .double(Double(n) / 4) : .null]
    }

    @Test("reads by id and queries of all columns share the table's layout; values as written")
    func wholeRows() throws {
        let store = try Self.store()
        let all = try store.read(Query("T", sort: [SortKey("id")])).items
        #expect(all.count == 30)
        let layout = try #require(all.first?.layout)
        #expect(layout.names == Self.schema.columns.map(\.name))
        for item in all {
            #expect(item.layout === layout)
            let n = Int(try #require(item.stringId?.dropFirst()))!
            #expect(item.values == Self.expected(n))
            #expect(item == Item(Self.expected(n)))
            let byId = try #require(try store.read(table: "T", id: "r\(n)"))
            #expect(byId.layout === layout)
            #expect(byId == item && byId.hashValue == item.hashValue)
            #expect(byId.value(forColumn: "score") == .int(Int64(n % 4)))
        }
    }

    @Test("a projection's items share one layout of the selected columns")
    func projection() throws {
        let store = try Self.store()
        let items = try store.read(Query("T", where: Field("Score") == .literal(.int(1)), select: ["d", "id"])).items
        #expect(items.count == 8)
        let layout = try #require(items.first?.layout)
        #expect(Set(layout.names) == ["id", "d"])
        for item in items {
            #expect(item.layout === layout)
            let n = Int(try #require(item.stringId?.dropFirst()))!
            #expect(item.values == Self.expected(n).filter { $0.key == "id" || $0.key == "d" })
        }
    }

    @Test("a redefined table's items have the new column; items read before keep theirs")
    func redefinedTable() throws {
        let store = try Self.store()
        let before = try #require(try store.read(table: "T", id: "r1"))
        try store.defineTable(TableSchema("T", ["s": .string, "Score": .integer, "d": .double, "extra": .string]))
        let after = try #require(try store.read(table: "T", id: "r1"))
        #expect(after.values == Self.expected(1).merging(["extra": .null]) { a, _ in a })
        #expect(after.layout !== before.layout)
        #expect(try store.read(Query("T")).items.allSatisfy { $0.layout === after.layout && $0.count == 5 })
        #expect(before.values == Self.expected(1))
        try store.upsert([["id": "r1", "extra": "x"]], into: "T")
        #expect(try store.read(table: "T", id: "r1")?["extra"] == .string("x"))
        #expect(before["extra"] == nil)
    }
}

/// A query in id order with `top` walks the id order and gives up past a budget (a sixteenth of `top`'s
/// worth, or an eighth of the table), then scans in memory order with a top-k heap: the answer is the
/// same either way, the matches near the end of the id order included.
@Suite("In-memory store: id-order walk and its fallback scan")
struct InMemoryIdWalkTests {
    @Test("matches past the walk's budget are found, in both directions")
    func pastBudget() throws {
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("W", ["text": .string]))
        // 2,000 rows; the budget is 250 rows. Matches: the first 2 ids and the last 10.
        let ids = (0..<2000).map { String(format: "r%04d", $0) }
        let matching = Set(ids.prefix(2) + ids.suffix(10))
        try store.upsert(
            ids.map { id -> Item in ["id": .string(id), "text": .string(matching.contains(id) ? "a needle here" : "hay")] },
            into: "W")
        let needle = Field("text").contains(.literal(.string("needle")))
        let ascending = ids.filter(matching.contains)
        for top in [1, 2, 3, 5, 12, 20] {
            let up = try store.read(Query("W", where: needle, top: top)).items.compactMap(\.stringId)
            #expect(up == Array(ascending.prefix(top)), "top \(top)")
            let down = try store.read(Query("W", where: needle, sort: [SortKey("id", .descending)], top: top)).items
                .compactMap(\.stringId)
            #expect(down == Array(ascending.reversed().prefix(top)), "top \(top), descending")
        }
    }
}
