import LocalStore
import Testing

/// The README's usage example, verbatim, so it cannot rot.
@Test func readmeExampleRuns() throws {
    let store = try InMemoryStore()
    try store.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean, "priority": .integer,
                                                   "updatedAt": .date, "version": .string], indexed: ["priority"]))
    try store.write { tx in   // the item and its queued operation commit together or not at all
        try tx.upsert([["id": "a1", "text": "buy milk", "complete": false, "priority": 2]], into: "TodoItem")
        _ = try tx.appendOperation(table: "TodoItem", itemId: "a1", properties: Array(#"{"type":"insert"}"#.utf8))
    }
    let open = try store.read(Query("TodoItem", where: Field("complete") == false).sorted(by: "priority", .descending).top(50))
    #expect(open.items.map(\.stringId) == ["a1"])
    #expect(try store.pendingOperationCount() == 1)
    #expect(try store.explain(Query("TodoItem", where: Field("priority") == 2)) == "index priority")
}
