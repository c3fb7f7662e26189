import LocalStore
import Testing

/// The README's usage example, verbatim, so it cannot rot.
@Test func readmeExampleRuns() throws {
    let store = try InMemoryStore()
    try store.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean, "priority": .integer,
                                                   "updatedAt": .date, "version": .string], indexed: ["priority"]))
    // The item and its queued insert commit together; a later update or delete collapses into it.
    try store.enqueue(.insert, ["id": "a1", "text": "buy milk", "complete": false, "priority": 2], into: "TodoItem")
    let open = try store.read(Query("TodoItem", where: Field("complete") == false).sorted(by: "priority", .descending).top(50))
    #expect(open.items.map(\.stringId) == ["a1"])
    #expect(try store.pendingOperationCount() == 1)
    #expect(try store.queuedOperations().map(\.kind) == [.insert])

    if let op = try store.beginPush() {              // the head of the queue, marked in flight
        let item = try store.pushItem(for: op)        // send op.kind and item to the server, then:
        #expect(op.kind == .insert && item?["text"] == "buy milk")
        try store.complete(op, serverItem: item)      // removed only if nobody changed it meanwhile
    }
    #expect(try store.pendingOperationCount() == 0)
    #expect(try store.explain(Query("TodoItem", where: Field("priority") == 2)) == "index priority")
}

/// The README's compound-index example, verbatim.
@Test func readmeCompoundIndexExampleRuns() throws {
    let store = try InMemoryStore()
    try store.defineTable(TableSchema(name: "TodoItem", columns: [Column("text", .string), Column("priority", .integer),
                                                                  Column("updatedAt", .date)],
                                      indexes: [TableIndex(("priority", .ascending), ("updatedAt", .descending))]))
    let page = Query("TodoItem", where: Field("priority") == 3, sort: [SortKey("updatedAt", .descending)], top: 50)
    #expect(try store.explain(page) == "ordered index priority_updatedAt_desc(priority, updatedAt desc) using 2 of 2 columns")
}
