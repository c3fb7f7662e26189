import Foundation
import LocalStore

/// A small but complete offline-sync client for ``Todo`` items on any ``LocalStore``:
///
/// - **local edits** write the item and queue its operation in one transaction
///   (``LocalStoreAccess/enqueue(_:_:into:)``), with the Azure Mobile Apps SDKs' collapse rules: an
///   update of a not-yet-pushed insert stays one insert, a delete of a not-yet-pushed insert removes both;
/// - **push** sends the queue in order, one transaction per operation
///   (``LocalStoreAccess/completeAndBeginNext(_:serverItem:)``); a rejected operation gets an error
///   record (``LocalStoreAccess/recordPushError(for:statusCode:message:serverItem:item:code:domain:)``)
///   and stays queued until ``resolveConflicts()`` settles it;
/// - **pull** is incremental: it asks only for items changed since the table's delta token, a page at a
///   time, and applies each page with its token in one transaction
///   (``LocalStoreAccess/applyPulledPage(_:into:queryId:)``), skipping items that have local changes.
///
/// The store does the bookkeeping; this type only decides what to send and how to settle conflicts.
public struct TodoSyncClient: Sendable {
    /// The local store.
    public let store: any LocalStore
    /// The server.
    public let server: FakeTodoServer
    /// Items per pulled page (the SDKs' default is 50; the demo uses a small page to show paging).
    public let pageSize: Int
    /// Settles a 412 conflict on an update: given the local item and the server's, the item to push
    /// again (it is sent with the server's version), or `nil` to take the server's item and drop the
    /// local change.
    public let resolveUpdateConflict: @Sendable (_ local: Todo, _ server: Todo) -> Todo?

    /// The delta token's query id: one incremental pull of the whole table.
    public static let queryId = "allTodos"

    /// Creates a client and defines the local table (idempotent).
    public init(
        store: any LocalStore, server: FakeTodoServer, pageSize: Int = 50,
        resolveUpdateConflict: @escaping @Sendable (_ local: Todo, _ server: Todo) -> Todo? = TodoSyncClient.keepServerTextAndAnyCompletion
    ) throws {
        self.store = store
        self.server = server
        self.pageSize = pageSize
        self.resolveUpdateConflict = resolveUpdateConflict
        try store.defineTable(Todo.schema)
    }

    /// The demo's merge: the server's text, and done when it is done on either side.
    public static let keepServerTextAndAnyCompletion: @Sendable (Todo, Todo) -> Todo? = { local, server in
        var merged = server
        merged.complete = local.complete || server.complete
        return merged
    }

    // MARK: Local edits

    /// Adds a new item (queued as an insert).
    @discardableResult
    public func add(_ text: String) throws -> Todo {
        let outcome = try store.enqueue(.insert, ["text": .string(text), "complete": .bool(false)], into: Todo.table)
        guard let id = outcome.operation?.itemId, let todo = try todo(id) else {
            throw LocalStoreError(.internal, "the new item is not in \(Todo.table)", table: Todo.table)
        }
        return todo
    }

    /// Changes an item's text and/or completion (queued as an update, or folded into a pending insert
    /// or update).
    @discardableResult
    public func edit(_ id: String, text: String? = nil, complete: Bool? = nil) throws -> EnqueueOutcome {
        var item: Item = ["id": .string(id)]
        if let text { item["text"] = .string(text) }
        if let complete { item["complete"] = .bool(complete) }
        return try store.enqueue(.update, item, into: Todo.table)
    }

    /// Deletes an item (queued as a delete; a pending insert of it is removed instead).
    @discardableResult
    public func remove(_ id: String) throws -> EnqueueOutcome {
        try store.enqueue(.delete, ["id": .string(id)], into: Todo.table)
    }

    /// One item.
    public func todo(_ id: String) throws -> Todo? {
        try store.read(Todo.self, table: Todo.table, id: id)
    }

    /// Every item, by text.
    public func todos() throws -> [Todo] {
        try store.read(Todo.self, Query(Todo.table, sort: [SortKey("text"), SortKey("id")]))
    }

    // MARK: Push

    /// What a push did.
    public struct PushReport: Sendable, Hashable {
        /// Operations the server accepted.
        public var sent = 0
        /// Operations the server rejected (each has an error record until resolved).
        public var rejected = 0
        /// Conflicts settled by ``resolveConflicts()``.
        public var resolved = 0
        /// Rounds (a round pushes the queue once, then settles its errors).
        public var rounds = 0
    }

    /// Pushes the queue in id order until it is empty or `maximumRounds` rounds have run; after each
    /// round, the rejected operations are settled (``resolveConflicts()``) and pushed again.
    @discardableResult
    public func push(maximumRounds: Int = 3) async throws -> PushReport {
        var report = PushReport()
        try await store.releaseInFlightOperations()  // a push that died (crash, lost connection) left marks
        while report.rounds < maximumRounds, try await store.pendingOperationCount() > 0 {
            report.rounds += 1
            var next = try await store.beginPush()
            while let op = next {
                do {
                    let answer = try await send(op)
                    next = try await store.completeAndBeginNext(op, serverItem: answer).next
                    report.sent += 1
                } catch let error as ServerError {
                    try await store.recordPushError(for: op, statusCode: error.statusCode, message: error.message, serverItem: error.serverItem)
                    report.rejected += 1
                    next = try await store.beginPush(after: op.id)
                }
            }
            report.resolved += try resolveConflicts()
        }
        return report
    }

    /// Sends one operation; the server's item for an insert or update.
    private func send(_ op: QueuedOperation) async throws -> Item? {
        guard let item = try await store.pushItem(for: op) else {
            return nil  // the row is gone (deleted with no delete queued): nothing to send
        }
        switch op.kind {
        case .insert: return try await server.insert(item)
        case .update: return try await server.update(item)
        case .delete:
            do { try await server.delete(item) } catch let error as ServerError where error.statusCode == 404 {}  // already gone
            return nil
        }
    }

    /// Settles every recorded push error, each in one transaction, and returns how many:
    /// - 412 on an update: ``resolveUpdateConflict`` merges; the merged item is kept queued with the
    ///   server's version (``LocalStoreAccess/keepAndUpdate(_:with:)``), or the server's item replaces
    ///   the local one (``LocalStoreAccess/cancelAndUpdate(_:with:)``);
    /// - 409 on an insert (the id exists): the server's item replaces the local one;
    /// - 404 on an update (deleted on the server): the local item is discarded
    ///   (``LocalStoreAccess/cancelAndDiscard(_:)``);
    /// - anything else stays recorded, and the operation stays queued.
    public func resolveConflicts() throws -> Int {
        var resolved = 0
        for error in try store.pushErrors() {
            let serverTodo = try error.serverItem.flatMap { ItemJSON.item($0, schema: Todo.schema) }.map {
                try ItemDecoder().decode(Todo.self, from: $0)
            }
            switch (error.statusCode, error.operationKind) {
            case (412?, .update):
                guard let serverTodo, let local = try todo(error.itemId) else { continue }
                if var merged = resolveUpdateConflict(local, serverTodo) {
                    merged.version = serverTodo.version
                    try store.keepAndUpdate(error, with: try ItemEncoder().encode(merged))
                } else {
                    try store.cancelAndUpdate(error, with: try ItemEncoder().encode(serverTodo))
                }
            case (409?, .insert):
                guard let serverTodo else { continue }
                try store.cancelAndUpdate(error, with: try ItemEncoder().encode(serverTodo))
            case (404?, .update):
                try store.cancelAndDiscard(error)
            default:
                continue
            }
            resolved += 1
        }
        return resolved
    }

    // MARK: Pull

    /// What a pull did.
    public struct PullReport: Sendable, Hashable {
        /// Pages received (the last, empty one not counted).
        public var pages = 0
        /// Items received.
        public var received = 0
        /// Items upserted.
        public var upserted = 0
        /// Items deleted because the server soft-deleted them.
        public var deleted = 0
        /// Items skipped because they have local changes queued.
        public var skipped = 0
        /// The delta token after the pull.
        public var deltaToken: Date?
    }

    /// Pulls what changed on the server since the delta token, as the SDKs do: pending operations are
    /// pushed first (a pull never overwrites an unpushed change); each page asks for
    /// `updatedAt ge <token>` ordered by `updatedAt`, and is applied with the new token in one
    /// transaction; when a page moves the token the next request starts again at `$skip=0`, otherwise it
    /// skips what it has seen.
    @discardableResult
    public func pull() async throws -> PullReport {
        if try await store.pendingOperationCount() > 0 {
            try await push()
        }
        var report = PullReport()
        var token = try await store.deltaToken(table: Todo.table, queryId: Self.queryId)
        var seenSinceToken = 0
        while true {
            let query = PullRequest.incremental(Query(Todo.table), since: token).skip(seenSinceToken).top(pageSize)
            let page = try await server.get(try PullRequest(query: query).queryString())
            if page.isEmpty { break }
            let result = try await store.applyPulledPage(page, into: Todo.table, queryId: Self.queryId)
            report.pages += 1
            report.received += page.count
            report.upserted += result.upserted
            report.deleted += result.deleted
            report.skipped += result.skipped.count
            if let newToken = result.deltaToken, newToken > (token ?? .distantPast) {
                token = newToken
                seenSinceToken = 0
            } else {
                seenSinceToken += page.count
            }
        }
        report.deltaToken = token
        return report
    }
}
