import Foundation
import LocalStore
import LocalStoreSync
import Testing

// MARK: The client: everything a TodoItem app writes on top of LocalStoreSync (the 40 lines).

struct TodoClient {
    static let schema = TableSchema(
        "TodoItem",
        ["id": .string, "text": .string, "complete": .boolean, "version": .string, "updatedAt": .date, "createdAt": .date, "deleted": .boolean])
    let store: any LocalStore
    let sync: SyncContext

    init(store: any LocalStore, service: any SyncTransport, policy: ConflictPolicy) async throws {
        try await store.defineTable(Self.schema)
        self.store = store
        sync = SyncContext(store: store, transport: service, conflicts: policy)
    }

    func save(_ id: String, _ text: String) async throws {
        let exists = try await store.read(table: "TodoItem", id: id) != nil
        try await store.enqueue(exists ? .update : .insert, ["id": .string(id), "text": .string(text)], into: "TodoItem")
    }

    func delete(_ id: String) async throws {
        try await store.enqueue(.delete, ["id": .string(id)], into: "TodoItem")
    }

    /// Push (implicitly, before the pull) and pull incrementally.
    @discardableResult
    func sync() async throws -> PullResult { try await sync.pull("TodoItem", queryId: "all") }

    func text(_ id: String) async throws -> String? { try await store.read(table: "TodoItem", id: id)?["text"]?.stringValue }
}

// MARK: The scenario

@Suite("Sync scenario: two clients, one service")
struct ScenarioTests {
    enum Policy: String, CaseIterable, Sendable { case serverWins, clientWins }

    static let cases: [(SyncBackend, Policy, Wire)] = SyncBackend.all.flatMap { b in
        Policy.allCases.flatMap { p in Wire.allCases.map { (b, p, $0) } }
    }

    @Test("offline edits, 409, 412, a delete conflict, an edit during its push, a pull that keeps a pending edit, a restart in flight",
          arguments: cases)
    func scenario(_ backend: SyncBackend, _ policy: Policy, _ wire: Wire) async throws {
        let dirA = try temporaryDirectory("a"), dirB = try temporaryDirectory("b")
        defer { for d in [dirA, dirB] { try? FileManager.default.removeItem(at: d) } }
        let service = try InMemoryTableService()
        try await service.defineTable(TodoClient.schema)
        // Directly, or over HTTP through the loopback service in one of the two protocols.
        let network = try await wire.connect(service)
        let conflictPolicy = policy == .serverWins ? ConflictPolicy.serverWins : ConflictPolicy.clientWins
        // A's transport lets the test edit an item while its push is on the wire.
        let duringPush = Box<(@Sendable (String) async throws -> Void)?>(nil)
        var storeA = try backend.open(dirA)
        var hooked = HookedTransport(inner: network.transport(storeA)) { _, id in try await duringPush.value?(id) }
        var a = try await TodoClient(store: storeA, service: hooked, policy: conflictPolicy)
        let storeB = try backend.open(dirB)
        let b = try await TodoClient(store: storeB, service: network.transport(storeB), policy: conflictPolicy)

        // Both start from the same items.
        for id in ["t1", "t2", "t5", "t6"] { try await a.save(id, "\(id)-0") }
        try await a.sync()
        try await b.sync()
        #expect(try await b.text("t1") == "t1-0")

        // Offline, both edit: the same item (412), an item one edits and the other deletes, the same new id (409).
        await service.setOffline(true)
        try await a.save("t1", "t1-A")
        try await b.save("t1", "t1-B")
        try await a.delete("t2")
        try await b.save("t2", "t2-B")
        try await a.save("t3", "t3-A")
        try await b.save("t3", "t3-B")
        await #expect(throws: SyncTransportError.self) { try await a.sync() }
        let queued = try await storeA.queuedOperations()
        #expect(queued.count == 3 && queued.allSatisfy { !$0.isInFlight }, "offline: every operation still queued, none in flight")
        await service.setOffline(false)

        // B syncs first; A meets a 412 on t1, a 412 on its delete of t2, a 409 on t3.
        try await b.sync()
        try await a.sync()
        let winner = policy == .serverWins ? "B" : "A"
        #expect(try await a.text("t1") == "t1-\(winner)")
        #expect(try await a.text("t3") == "t3-\(winner)")
        #expect((try await a.text("t2")) == (policy == .serverWins ? "t2-B" : nil), "client wins keeps the delete")
        #expect(try await storeA.pushErrors().isEmpty)

        // An edit made while its item's update is on the wire reaches the service.
        let editor = a
        duringPush.value = { id in
            guard id == "t5" else { return }
            duringPush.value = nil
            try await editor.save("t5", "t5-newest")
        }
        try await a.save("t5", "t5-sent")
        try await a.sync()
        #expect(try await service.items(in: "TodoItem").first { $0.stringId == "t5" }?["text"] == "t5-newest")

        // A pull does not overwrite a pending edit (no implicit push here).
        try await a.save("t6", "t6-A")
        try await b.save("t6", "t6-B")
        try await b.sync()
        let pullOnly = SyncContext(
            store: storeA, transport: network.transport(storeA), conflicts: conflictPolicy, settings: SyncSettings(pushBeforePull: false))
        let pulled = try await pullOnly.pull("TodoItem", queryId: "all")
        #expect(pulled.skipped == ["t6"])
        #expect(try await a.text("t6") == "t6-A")
        try await a.sync()
        #expect(try await a.text("t6") == "t6-\(winner)")

        // A restart with an operation in flight whose request the service applied: pushed once, no conflict.
        try await a.save("t1", "t1-restart")
        let inFlight = try #require(try await storeA.beginPush())
        let sent = try #require(try await storeA.pushItem(for: inFlight))
        _ = try await service.replace(sent, in: "TodoItem", ifVersion: sent["version"]?.stringValue)
        if backend.isPersistent {
            try await storeA.close()
            storeA = try backend.open(dirA)
        }
        hooked = HookedTransport(inner: network.transport(storeA)) { _, id in try await duringPush.value?(id) }
        a = try await TodoClient(store: storeA, service: hooked, policy: ConflictPolicy.manual)
        let afterRestart = try await a.sync()
        #expect(afterRestart.push?.isComplete == true)
        #expect(try await storeA.pendingOperationCount() == 0)

        // Convergence: both clients and the service hold the same items and versions.
        try await b.sync()
        try await a.sync()
        let server = replica(try await service.items(in: "TodoItem"))
        #expect(replica(try await storeA.read(Query("TodoItem")).items) == server)
        #expect(replica(try await b.store.read(Query("TodoItem")).items) == server)
        #expect(server["t1"]?["text"] == "t1-restart")
        try await storeA.close()
        try await b.store.close()
        // Every request the transport sent has the protocol's documented form.
        if let loopback = network.loopback {
            #expect(loopback.requests.count > 20)
            for request in loopback.requests { checkDocumentedForm(request, loopback.serviceProtocol) }
            // The engine's pulls ask for deleted items, in the protocol's spelling.
            let flag = wire == .azureMobileApps ? "__includeDeleted=true" : "__includedeleted=true"
            let pages = loopback.requests.filter { $0.method == "GET" && !$0.path.dropFirst("/tables/".count).contains("/") }
            #expect(!pages.isEmpty && pages.allSatisfy { $0.query?.contains(flag) == true })
        }
        await network.stop()
    }
}
