import Foundation
import LocalStore
import LocalStoreSync

/// The scripted session `todo-sync` runs: two devices, one server, every path of the sync.
///
/// 1. The server already holds three items made on another device; the first pull brings them in
///    (in pages of two) and sets the delta token.
/// 2. Offline edits: a new item and an edit of it (one insert in the queue), an item added and deleted
///    again (nothing queued), one pulled item marked done (an update), one deleted (a delete).
/// 3. Meanwhile the other device renames the item this client marked done, and adds an item.
/// 4. Push: the insert and the delete go through; the update is refused with 412 (stale version), merged
///    by the client's conflict policy (the server's text, done on either side) and pushed again.
/// 5. Pull: only what changed since the token comes back (the rename, the new item, the soft delete).
///
/// The service is an ``InMemoryTableService`` whose clock advances one second per change.
///
/// At the end the local store holds exactly the server's live items, nothing is queued, no push
/// error is recorded, and the delta token is the server's latest change; ``verify(_:)`` checks that.
public enum TodoSyncDemo {
    /// The final state of a run.
    public struct Outcome: Sendable {
        /// The local items, by text.
        public var todos: [Todo]
        /// Operations still queued.
        public var pendingOperations: Int
        /// Push errors still recorded.
        public var pushErrors: Int
        /// The table's delta token.
        public var deltaToken: Date?
        /// The server's live items, by text.
        public var serverTodos: [Todo]
        /// The server's latest change.
        public var serverLatestChange: Date?
        /// The last push.
        public var push: PushResult
        /// The last pull.
        public var pull: PullResult
    }

    /// The texts the local store holds after a run, sorted.
    public static let expectedTexts = ["Buy oat milk", "Call the plumber", "Walk the dog", "Write the report"]

    /// Runs the session on `store` (which must not hold the demo's table yet), printing what happens
    /// with `log`. `service`: the service to sync with — by default an in-process ``InMemoryTableService``
    /// (``DemoService/inProcess()``); ``DemoService/http(_:other:)`` talks to a real back end over HTTP, whose
    /// table must start empty.
    public static func run(
        store: any LocalStore, service: DemoService? = nil, log: @Sendable (String) -> Void = { print($0) }
    ) async throws -> Outcome {
        if try await store.schema(of: Todo.table) != nil, try await store.count(Todo.table) > 0 {
            throw LocalStoreError(.constraint, "\(Todo.table) already has items: run the demo on a new store", table: Todo.table)
        }
        let server: DemoService
        if let service { server = service } else { server = try await DemoService.inProcess() }
        if !(try await server.items(true)).isEmpty {
            throw LocalStoreError(.constraint, "the service's \(Todo.table) already has items: run the demo on an empty table", table: Todo.table)
        }
        let otherDeviceSaves = server.otherDeviceSaves
        try await otherDeviceSaves("milk", "Buy milk")
        try await otherDeviceSaves("dog", "Walk the dog")
        try await otherDeviceSaves("rent", "Pay the rent")
        let client = try TodoSyncClient(store: store, service: server.transport, pageSize: 2)

        let first = try await client.pull()
        log("pull: \(first.upserted) items in \(first.pages) pages, delta token \(describe(first.deltaToken))")

        let report = try client.add("Write a report")
        try client.edit(report.id, text: "Write the report")  // folds into the pending insert
        let temporary = try client.add("Temporary")
        try client.remove(temporary.id)  // removes the pending insert: nothing to push
        try client.edit("milk", complete: true)
        try client.remove("rent")
        let queued = try await store.queuedOperations()
        log("offline edits: \(queued.map { "\($0.kind) \($0.itemId == report.id ? "new item" : $0.itemId)" }.joined(separator: ", ")) queued")

        try await otherDeviceSaves("milk", "Buy oat milk")
        try await otherDeviceSaves("plumber", "Call the plumber")
        log("other device: renamed 'milk', added 'plumber'")

        let push = try await client.push()
        log("push: \(push.pushedCount) sent, \(resolvedConflicts(push)) conflict resolved, \(push.errors.count) failed")

        let pull = try await client.pull()
        log("pull: \(pull.pages) pages (\(pull.upserted) upserted, \(pull.deleted) deleted, \(pull.skipped.count) skipped), delta token \(describe(pull.deltaToken))")

        let serverItems = try await server.items(false)
        let serverTodos = try serverItems.map { try ItemDecoder().decode(Todo.self, from: $0) }
        let latest = try await server.items(true).compactMap { $0["updatedAt"]?.dateValue }.max()
        return Outcome(
            todos: try client.todos(), pendingOperations: try await store.pendingOperationCount(), pushErrors: try await store.pushErrors().count,
            deltaToken: try await store.deltaToken(table: Todo.table, queryId: TodoSyncClient.queryId),
            serverTodos: serverTodos.sorted { ($0.text, $0.id) < ($1.text, $1.id) }, serverLatestChange: latest,
            push: push, pull: pull)
    }

    /// The problems with `outcome`, empty when the run ended as it must.
    public static func verify(_ outcome: Outcome) -> [String] {
        var problems: [String] = []
        if outcome.todos != outcome.serverTodos {
            problems.append("local items \(outcome.todos) differ from the server's \(outcome.serverTodos)")
        }
        if outcome.todos.map(\.text) != expectedTexts {
            problems.append("local texts \(outcome.todos.map(\.text)), expected \(expectedTexts)")
        }
        if outcome.todos.first(where: { $0.id == "milk" })?.complete != true {
            problems.append("'milk' lost its completion in the conflict")
        }
        if outcome.pendingOperations != 0 { problems.append("\(outcome.pendingOperations) operations still queued") }
        if outcome.pushErrors != 0 { problems.append("\(outcome.pushErrors) push errors still recorded") }
        if outcome.deltaToken == nil || outcome.deltaToken != outcome.serverLatestChange {
            problems.append("delta token \(describe(outcome.deltaToken)), server's latest change \(describe(outcome.serverLatestChange))")
        }
        if resolvedConflicts(outcome.push) != 1 || !outcome.push.isComplete {
            problems.append("push resolved \(resolvedConflicts(outcome.push)) conflicts (expected 1), complete: \(outcome.push.isComplete)")
        }
        return problems
    }

    /// The server's clock starts here.
    public static let epoch = Date(timeIntervalSince1970: 1_790_000_000)

    /// Conflicts the push resolved.
    static func resolvedConflicts(_ push: PushResult) -> Int {
        push.entries.filter { if case .resolved = $0.outcome { return true } else { return false } }.count
    }

    static func describe(_ date: Date?) -> String {
        guard let date else { return "none" }
        return date.formatted(.iso8601)
    }
}

/// The demo service's clock: 1, 2, 3, … seconds after the epoch, one tick per change.
final class Ticks: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func next() -> Int { lock.withLock { count += 1; return count } }
}

/// The service a demo run syncs with: the client's transport, the other device's edits, and the
/// service's items (to check the run).
public struct DemoService: Sendable {
    /// The client's transport.
    public var transport: any SyncTransport
    /// The other device saves an item (creates it, or renames it).
    public var otherDeviceSaves: @Sendable (_ id: String, _ text: String) async throws -> Void
    /// The service's items of the demo table, deleted ones too when the argument is `true`.
    public var items: @Sendable (_ includeDeleted: Bool) async throws -> [Item]

    /// Creates a service from its three parts.
    public init(
        transport: any SyncTransport, otherDeviceSaves: @escaping @Sendable (String, String) async throws -> Void,
        items: @escaping @Sendable (Bool) async throws -> [Item]
    ) {
        self.transport = transport
        self.otherDeviceSaves = otherDeviceSaves
        self.items = items
    }

    /// An ``InMemoryTableService`` whose clock advances one second per change from ``TodoSyncDemo/epoch``.
    public static func inProcess() async throws -> DemoService {
        let ticks = Ticks()
        let server = try InMemoryTableService(clock: { TodoSyncDemo.epoch.addingTimeInterval(Double(ticks.next())) })
        try await server.defineTable(Todo.schema)
        return DemoService(
            transport: server,
            otherDeviceSaves: { id, text in
                try await server.serverSave(["id": .string(id), "text": .string(text), "complete": false], in: Todo.table)
            },
            items: { includeDeleted in try await server.items(in: Todo.table, includeDeleted: includeDeleted) })
    }

    /// A real back end over HTTP: the client syncs through `transport`; the other device is a second
    /// client of the same service (`other`, a transport of its own) that inserts an item, or replaces it
    /// with the version the service holds.
    public static func http(_ transport: any SyncTransport, other: any SyncTransport) -> DemoService {
        @Sendable func all(_ includeDeleted: Bool) async throws -> [Item] {
            var out: [Item] = []
            while true {
                let page = try await other.page(
                    PullRequest(query: Query(Todo.table, sort: [SortKey("id")], skip: out.count, top: 50), includeDeleted: includeDeleted))
                out += page.items
                if page.items.isEmpty || page.hasMore == false || (page.hasMore == nil && page.items.count < 50) { return out }
            }
        }
        return DemoService(
            transport: transport,
            otherDeviceSaves: { id, text in
                let item: Item = ["id": .string(id), "text": .string(text), "complete": false]
                if let current = try await all(false).first(where: { $0.stringId == id }) {
                    _ = try await other.replace(item, in: Todo.table, ifVersion: current["version"]?.stringValue)
                } else {
                    _ = try await other.insert(item, into: Todo.table)
                }
            },
            items: all)
    }
}
