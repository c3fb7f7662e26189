import Foundation
import LocalStore
import Testing

/// The in-memory store finds an item's operations through a `(table, itemId NOCASE)` index of the
/// operations table, as the SQL and LMDB backends do: enqueue, complete and a pulled page's skip test cost
/// the same with ten or a hundred thousand queued operations.
@Suite("In-memory: the operations table's (table, itemId NOCASE) index")
struct InMemoryQueueIndexTests {
    private func store() throws -> InMemoryStore {
        let s = try InMemoryStore()
        try s.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        try s.defineTable(TableSchema("U", ["id": .string, "n": .integer]))
        return s
    }

    @Test func itemLookupsUseTheIndexAndMatchIgnoringCase() throws {
        let s = try store()
        for n in 0..<200 {
            try s.enqueue(.insert, Item(["id": .string("Item-\(n)"), "n": .int(Int64(n))]), into: n % 2 == 0 ? "T" : "U")
        }
        let ops = SystemTableNames.default.operations
        let byItem: QueryPredicate = Field("table") == "T" && Field("itemId").equalsIgnoringCase("ITEM-42")
        let plan = try s.explain(Query(ops, where: byItem, sort: [SortKey("id")]))
        #expect(plan.contains("table_itemId"), "\(plan)")
        #expect(try s.queuedOperations(table: "T", itemId: "item-42").map(\.itemId) == ["Item-42"])
        #expect(try s.queuedOperations(table: "U", itemId: "item-42").isEmpty)  // another table's item
        #expect(try s.hasPendingOperation(table: "U", itemId: "ITEM-43"))
        #expect(try !s.hasPendingOperation(table: "T", itemId: "item-43"))
        // A case-sensitive equality on itemId reads the index's NOCASE range and tests each row.
        let exact: QueryPredicate = Field("table") == "T" && Field("itemId") == "item-42"
        #expect(try s.read(Query(ops, where: exact)).items.isEmpty)
        #expect(try s.read(Query(ops, where: Field("table") == "T" && Field("itemId") == "Item-42")).items.count == 1)
        // Collapsing, completing and removing keep the index exact.
        #expect(try s.enqueue(.update, Item(["id": "ITEM-42", "n": 1]), into: "T").operation?.version == 2)
        #expect(try s.enqueue(.delete, Item(["id": "item-42"]), into: "T") == .removed(operationId: 43))
        #expect(try !s.hasPendingOperation(table: "T", itemId: "Item-42"))
        let head = try #require(try s.beginPush())
        #expect(try s.complete(head) == .removed)
        #expect(try !s.hasPendingOperation(table: head.table, itemId: head.itemId))
        #expect(try s.pendingOperationCount() == 198)
    }

    @Test func aRolledBackWriteLeavesTheIndexAsItWas() throws {
        let s = try store()
        try s.enqueue(.insert, Item(["id": "a", "n": 1]), into: "T")
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try s.write { tx in
                try tx.enqueue(.insert, Item(["id": "b", "n": 2]), into: "T")
                try tx.enqueue(.delete, Item(["id": "A"]), into: "T")
                throw Stop()
            }
        }
        #expect(try s.hasPendingOperation(table: "T", itemId: "a"))
        #expect(try !s.hasPendingOperation(table: "T", itemId: "b"))
        #expect(try s.queuedOperations(table: "T", itemId: "A").map(\.kind) == [.insert])
    }
}
