import LocalStore
import LocalStoreSync
import Testing

/// The README's sync example, verbatim (after the README's first example, whose store holds "a1").
@Test func readmeSyncExampleRuns() async throws {
    let store = try InMemoryStore()
    try await store.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean, "priority": .integer,
                                                         "updatedAt": .date, "version": .string], indexed: ["priority"]))
    try await store.upsert([["id": "a1", "text": "buy milk", "complete": false, "priority": 2]], into: "TodoItem")

    let service = try InMemoryTableService()   // a table service with the back ends' rules, in this process
    try await service.defineTable(TableSchema("TodoItem", ["text": .string, "complete": .boolean]))
    let sync = SyncContext(store: store, transport: service, conflicts: ConflictPolicy.clientWins)
    try await store.enqueue(.insert, ["id": "a2", "text": "call mum", "complete": false], into: "TodoItem")
    let pulled = try await sync.pull("TodoItem", queryId: "all")   // pushes the queue first, then what changed
    print(pulled.push?.pushedCount ?? 0, pulled.upserted)           // 1 1

    #expect(pulled.push?.pushedCount == 1 && pulled.upserted == 1)
    #expect(try await service.items(in: "TodoItem").map(\.stringId) == ["a2"])
    #expect(try await store.read(table: "TodoItem", id: "a2")?["version"] != nil)
}
