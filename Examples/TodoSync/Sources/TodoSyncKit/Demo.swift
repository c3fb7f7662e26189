import Foundation
import LocalStore

/// The scripted session `todo-sync` runs: two devices, one server, every path of the sync.
///
/// 1. The server already holds three items made on another device; the first pull brings them in
///    (in pages of two) and sets the delta token.
/// 2. Offline edits: a new item and an edit of it (one insert in the queue), an item added and deleted
///    again (nothing queued), one pulled item marked done (an update), one deleted (a delete).
/// 3. Meanwhile the other device renames the item this client marked done, and adds an item.
/// 4. Push: the insert and the delete go through; the update is rejected with 412 (stale version),
///    recorded as a push error, merged (the server's text, done on either side) and pushed again.
/// 5. Pull: only what changed since the token comes back (the rename, the new item, the soft delete).
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
        public var push: TodoSyncClient.PushReport
        /// The last pull.
        public var pull: TodoSyncClient.PullReport
    }

    /// The texts the local store holds after a run, sorted.
    public static let expectedTexts = ["Buy oat milk", "Call the plumber", "Walk the dog", "Write the report"]

    /// Runs the session on `store` (which must not hold the demo's table yet), printing what happens
    /// with `log`.
    public static func run(store: any LocalStore, log: @Sendable (String) -> Void = { print($0) }) async throws -> Outcome {
        if try await store.schema(of: Todo.table) != nil, try await store.count(Todo.table) > 0 {
            throw LocalStoreError(.constraint, "\(Todo.table) already has items: run the demo on a new store", table: Todo.table)
        }
        let server = try FakeTodoServer()
        try await server.otherDeviceSaves(id: "milk", text: "Buy milk")
        try await server.otherDeviceSaves(id: "dog", text: "Walk the dog")
        try await server.otherDeviceSaves(id: "rent", text: "Pay the rent")
        let client = try TodoSyncClient(store: store, server: server, pageSize: 2)

        let first = try await client.pull()
        log("pull: \(first.received) items in \(first.pages) pages, delta token \(describe(first.deltaToken))")

        let report = try client.add("Write a report")
        try client.edit(report.id, text: "Write the report")  // folds into the pending insert
        let temporary = try client.add("Temporary")
        try client.remove(temporary.id)  // removes the pending insert: nothing to push
        try client.edit("milk", complete: true)
        try client.remove("rent")
        let queued = try await store.queuedOperations()
        log("offline edits: \(queued.map { "\($0.kind) \($0.itemId == report.id ? "new item" : $0.itemId)" }.joined(separator: ", ")) queued")

        try await server.otherDeviceSaves(id: "milk", text: "Buy oat milk")
        try await server.otherDeviceSaves(id: "plumber", text: "Call the plumber")
        log("other device: renamed 'milk', added 'plumber'")

        let push = try await client.push()
        log("push: \(push.sent) sent, \(push.rejected) rejected, \(push.resolved) resolved, \(push.rounds) rounds")

        let pull = try await client.pull()
        log("pull: \(pull.received) items in \(pull.pages) pages (\(pull.upserted) upserted, \(pull.deleted) deleted, \(pull.skipped) skipped), delta token \(describe(pull.deltaToken))")

        let serverTodos = try await server.liveItems().map { try ItemDecoder().decode(Todo.self, from: $0) }
        return Outcome(
            todos: try client.todos(), pendingOperations: try await store.pendingOperationCount(), pushErrors: try await store.pushErrors().count,
            deltaToken: try await store.deltaToken(table: Todo.table, queryId: TodoSyncClient.queryId),
            serverTodos: serverTodos.sorted { ($0.text, $0.id) < ($1.text, $1.id) }, serverLatestChange: await server.latestChange(),
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
        if outcome.push.rejected != 1 || outcome.push.resolved != 1 {
            problems.append("push rejected \(outcome.push.rejected) and resolved \(outcome.push.resolved) operations, expected 1 and 1")
        }
        return problems
    }

    static func describe(_ date: Date?) -> String {
        guard let date else { return "none" }
        return date.formatted(.iso8601)
    }
}
