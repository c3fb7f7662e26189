import Foundation
import LocalStore
import LocalStoreSync

/// A small but complete offline-sync client for ``Todo`` items on any ``LocalStore``, on the
/// `LocalStoreSync` engine:
///
/// - **local edits** write the item and queue its operation in one transaction
///   (``LocalStoreAccess/enqueue(_:_:into:)``), with the Azure Mobile Apps SDKs' collapse rules: an
///   update of a not-yet-pushed insert stays one insert, a delete of a not-yet-pushed insert removes both;
/// - **sync** is the engine's: ``push()`` sends the queue (conflicts go to ``conflictPolicy``), ``pull()``
///   pushes what is pending and fetches what changed since the table's delta token, a page at a time.
///
/// The engine and the store do the bookkeeping; this type only says what an edit is and how to merge.
public struct TodoSyncClient: Sendable {
    /// The local store.
    public let store: any LocalStore
    /// The sync engine.
    public let sync: SyncContext

    /// The delta token's query id: one incremental pull of the whole table.
    public static let queryId = "allTodos"

    /// Creates a client over `service` and defines the local table (idempotent). `pageSize`: items per
    /// pulled page (the SDKs' default is 50; the demo uses a small page to show paging).
    public init(store: any LocalStore, service: any SyncTransport, pageSize: Int = 50) throws {
        self.store = store
        sync = SyncContext(store: store, transport: service, conflicts: Self.conflictPolicy, settings: SyncSettings(pageSize: pageSize))
        try store.defineTable(Todo.schema)
    }

    /// The demo's conflict policy: for an update, the server's text and done when it is done on either
    /// side; anything else, the server's item.
    public static let conflictPolicy = ConflictPolicy { conflict in
        guard conflict.operation.kind == .update, var merged = conflict.localItem else { return .serverWins }
        merged["text"] = conflict.serverItem["text"]
        merged["complete"] = .bool(merged["complete"] == true || conflict.serverItem["complete"] == true)
        return .merge(merged)
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

    // MARK: Sync

    /// Pushes the queue.
    @discardableResult
    public func push() async throws -> PushResult { try await sync.push() }

    /// Pushes what is pending, then pulls what changed since the delta token.
    @discardableResult
    public func pull() async throws -> PullResult { try await sync.pull(Todo.table, queryId: Self.queryId) }
}
