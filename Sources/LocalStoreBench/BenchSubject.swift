import Foundation
import Synchronization
import LocalStore

/// One row of the benchmark's table, shaped like the Azure Mobile Apps docs' `TodoItem`.
public struct TodoRecord: Sendable, Hashable {
    public var id: String
    public var text: String
    public var complete: Bool
    public var priority: Int64
    public var createdAt: Date
    public var updatedAt: Date
    public var version: String
    public var deleted: Bool

    public init(
        id: String, text: String, complete: Bool, priority: Int64, createdAt: Date, updatedAt: Date, version: String,
        deleted: Bool
    ) {
        self.id = id
        self.text = text
        self.complete = complete
        self.priority = priority
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
        self.deleted = deleted
    }

    /// The record as a ``LocalStore`` item.
    public var item: Item {
        Item([
            "id": .string(id), "text": .string(text), "complete": .bool(complete), "priority": .int(priority),
            "createdAt": .date(createdAt), "updatedAt": .date(updatedAt), "version": .string(version),
            "deleted": .bool(deleted),
        ])
    }

    /// The list query of `query-indexed`: `priority == p`, sorted by updatedAt descending, top 50.
    public static func listQuery(priority: Int64) -> Query {
        Query("TodoItem", where: Field("priority") == .literal(.int(priority)), sort: [SortKey("updatedAt", .descending)], top: 50)
    }

    /// The table's schema: priority and updatedAt indexed, and the compound index (priority, updatedAt
    /// descending) that answers the list query (`priority == p` sorted by updatedAt descending, top 50).
    public static let schema = TableSchema(
        name: "TodoItem",
        columns: [
            Column("id", .string), Column("text", .string), Column("complete", .boolean),
            Column("priority", .integer, indexed: true), Column("createdAt", .date),
            Column("updatedAt", .date, indexed: true), Column("version", .string), Column("deleted", .boolean),
        ],
        indexes: [TableIndex(("priority", .ascending), ("updatedAt", .descending))])
}

/// What the benchmark drives: a backend through the `LocalStore` API, or a baseline written directly
/// against an engine's C API. Every method is one unit of a workload's work.
public protocol BenchSubject: AnyObject {
    /// Creates the TodoItem table.
    func setUp() throws
    /// Writes one page of records in one transaction (insert or merge-update by id).
    func upsert(_ page: [TodoRecord]) throws
    /// Reads one row by id; returns whether it was found.
    func read(id: String) throws -> Bool
    /// `priority == p`, sorted by `updatedAt` descending, top 50; returns the row count.
    func queryIndexed(priority: Int64) throws -> Int
    /// `text contains needle` (not indexed), top 50, sorted by id; returns the row count.
    func queryScan(textContains needle: String) throws -> Int
    /// `count(*) where complete == true`.
    func countComplete() throws -> Int
    /// Deletes the rows with `priority == p`; returns how many were deleted.
    func deleteWhere(priority: Int64) throws -> Int
    /// One transaction: upsert one record and append one operation for it.
    func localWrite(_ record: TodoRecord) throws
    /// One transaction: takes the first pending operation, removes it and its errors; returns false when
    /// the queue was empty.
    func drainOne() throws -> Bool
    /// Closes the store, opens it again and reads the row `id`.
    func reopen(andRead id: String) throws -> Bool
    /// Sets, then gets, a delta token.
    func deltaTokenRoundTrip(_ date: Date, queryId: String) throws -> Date?
    /// Closes the store.
    func close() throws
    /// Starts `count` query observers of the TodoItem table (as list screens would); returns what
    /// stops them and tells how many results they received, or `nil` when the subject cannot observe.
    func startObservers(_ count: Int) throws -> BenchObservers?
}

extension BenchSubject {
    /// A subject without observation support (the C-API baselines).
    public func startObservers(_ count: Int) throws -> BenchObservers? { nil }
}

/// Query observers running during a workload.
public final class BenchObservers: Sendable {
    private let tasks: [Task<Void, Never>]
    private let counter: Counter

    init(tasks: [Task<Void, Never>], counter: Counter) {
        self.tasks = tasks
        self.counter = counter
    }

    /// Results the observers received so far.
    public var resultCount: Int { counter.value.withLock { $0 } }

    /// Cancels the observers.
    public func stop() { for t in tasks { t.cancel() } }
}

/// Drives any ``LocalStore`` through its public API.
public final class LocalStoreSubject: BenchSubject {
    /// Replaced only by ``reopen(andRead:)``; a subject is driven by one thread at a time, so the
    /// harness does not pay a dynamic exclusivity check per call (~75 instructions: a tenth of the gap
    /// between `lmdb` and `lmdb-c` on read-by-id), which the C baselines' subjects do not pay either.
    @exclusivity(unchecked) private var store: any LocalStore
    private let reopenStore: (() throws -> any LocalStore)?

    /// `open` creates the store; `reopen` (persistent backends only) opens it again after a close.
    public init(store: any LocalStore, reopen: (() throws -> any LocalStore)?) {
        self.store = store
        self.reopenStore = reopen
    }

    public func setUp() throws { try store.defineTable(TodoRecord.schema) }

    public func upsert(_ page: [TodoRecord]) throws {
        try store.upsert(page.map(\.item), into: "TodoItem")
    }

    public func read(id: String) throws -> Bool { try store.read(table: "TodoItem", id: id) != nil }

    public func queryIndexed(priority: Int64) throws -> Int {
        try store.read(TodoRecord.listQuery(priority: priority)).items.count
    }

    public func queryScan(textContains needle: String) throws -> Int {
        try store.read(Query("TodoItem", where: Field("text").contains(.literal(.string(needle))), top: 50)).items.count
    }

    public func countComplete() throws -> Int { try store.count("TodoItem", where: Field("complete") == true) }

    public func deleteWhere(priority: Int64) throws -> Int {
        try store.write { tx in
            let n = try tx.count("TodoItem", where: Field("priority") == .literal(.int(priority)))
            try tx.delete(matching: Query("TodoItem", where: Field("priority") == .literal(.int(priority))))
            return n
        }
    }

    public func localWrite(_ record: TodoRecord) throws {
        try store.write { tx in
            try tx.upsert([record.item], into: "TodoItem")
            _ = try tx.appendOperation(table: "TodoItem", itemId: record.id, properties: Array(#"{"type":"insert"}"#.utf8))
        }
    }

    /// Reads the head of the queue and removes it in one write transaction, as `sqlite-c` and `lmdb-c` do.
    public func drainOne() throws -> Bool {
        try store.write { tx in
            guard let op = try tx.operation(after: 0) else { return false }
            try tx.removeOperation(id: op.id)
            return true
        }
    }

    public func reopen(andRead id: String) throws -> Bool {
        guard let reopenStore else { throw LocalStoreError(.unsupported, "this backend cannot be reopened") }
        try store.close()
        store = try reopenStore()
        return try store.read(table: "TodoItem", id: id) != nil
    }

    public func deltaTokenRoundTrip(_ date: Date, queryId: String) throws -> Date? {
        try store.setDeltaToken(date, table: "TodoItem", queryId: queryId)
        return try store.deltaToken(table: "TodoItem", queryId: queryId)
    }

    public func close() throws { try store.close() }

    /// `count` observers of `priority == k % 10` (sorted by `updatedAt` descending, top 50); returns
    /// once each has registered and received its first result.
    public func startObservers(_ count: Int) throws -> BenchObservers? {
        let store = self.store
        let counter = Counter()
        let before = store.changeCenter.observerCount
        let tasks = (0..<count).map { k in
            Task.detached {
                let query = Query(
                    "TodoItem", where: Field("priority") == .literal(.int(Int64(k % 10))),
                    sort: [SortKey("updatedAt", .descending)], top: 50)
                do {
                    for try await _ in store.observe(query) { counter.value.withLock { $0 += 1 } }
                } catch {}
            }
        }
        let deadline = Date().addingTimeInterval(30)
        while store.changeCenter.observerCount < before + count || counter.value.withLock({ $0 }) < count {
            guard Date() < deadline else { throw LocalStoreError(.internal, "the benchmark's observers did not start") }
            usleep(1000)
        }
        return BenchObservers(tasks: tasks, counter: counter)
    }
}

/// A count shared with observer tasks.
final class Counter: Sendable {
    let value = LockedValue<Int>(0)
}

/// A local change of the `enqueue` workload.
public enum BenchEdit: Sendable, Hashable {
    /// A new item (its row must not exist).
    case insert
    /// A change to an existing item (the row is merged).
    case update
    /// The item's removal (the operation keeps a snapshot of the row).
    case delete
}

/// What ``BenchSyncSubject/enqueue(_:_:)`` did to the queue, with the SDKs' collapse rules.
public enum BenchEnqueueOutcome: Sendable, Hashable {
    /// A new operation was appended.
    case added
    /// The item's queued operation absorbed the change (an update after an insert or update).
    case kept
    /// The item's queued operation became a delete.
    case changedToDelete
    /// The item's queued insert was cancelled by the delete.
    case removed
}

/// What ``BenchSyncSubject/applyPulledPage(_:into:queryId:)`` did.
public struct BenchPulledPage: Sendable, Hashable {
    public var upserted: Int
    public var deleted: Int
    public var skipped: Int

    public init(upserted: Int, deleted: Int, skipped: Int) {
        self.upserted = upserted
        self.deleted = deleted
        self.skipped = skipped
    }
}

/// The calls of the sync workloads (`enqueue`, `push-cycle`, `pull-page`, `initial-pull`, `purge`): what a
/// sync client's store does for the Azure Mobile Apps SDKs' queue, push, pull and purge
/// (docs/semantics.md), each in the transactions the `LocalStore` API uses. A C-API baseline implements the
/// same steps with the same statements and indexes (the operations table's `(table, itemId NOCASE)` index,
/// the errors table's `operationId` index) and the same `properties` JSON.
public protocol BenchSyncSubject: BenchSubject {
    /// Creates the table the `initial-pull` and `purge` workloads fill: `TodoPulled`, the TodoItem schema.
    func setUpSync() throws
    /// One transaction: each record inserted as a local change (its row and an insert operation), in order.
    func seedQueue(_ records: [TodoRecord]) throws
    /// One local change of TodoItem through the queue, in one transaction: the item's newest operation
    /// looked up by `(table, itemId)`, the SDKs' collapse rule applied (a change to an item whose
    /// operation is in flight or was sent is queued as a new operation), the row written or deleted (a
    /// delete stores the row as its operation's item), the operation appended or rewritten and a
    /// rewritten operation's errors removed.
    func enqueue(_ edit: BenchEdit, _ record: TodoRecord) throws -> BenchEnqueueOutcome
    /// Pushes the head of the queue as a sync engine does, in two transactions: the first takes the head
    /// operation, reads its item and marks the operation in flight with what is sent (the `sent` record);
    /// the second completes it with the server's answer (the item with `version` = `serverVersion`): the
    /// operation and its errors removed and, no other change of the item being queued, the server's item
    /// stored. Returns the operation's item id; `nil` when the queue is empty.
    func pushOne(serverVersion: String) throws -> String?
    /// Applies one page of a pull to `table` in one transaction: an item with a queued operation is
    /// skipped, a `deleted` item is deleted, every other item upserted; the delta token of
    /// `(table, queryId)` advances to the page's largest `updatedAt`.
    func applyPulledPage(_ records: [TodoRecord], into table: String, queryId: String) throws -> BenchPulledPage
    /// Purges the rows of `table` with `priority == p` in one transaction (refused while the table has
    /// queued operations) and removes the delta token of `(table, queryId)`; returns the rows deleted.
    func purge(_ table: String, priority: Int64, queryId: String) throws -> Int
}

extension LocalStoreSubject: BenchSyncSubject {
    public func setUpSync() throws {
        try store.defineTable(TableSchema(name: "TodoPulled", columns: TodoRecord.schema.columns, indexes: TodoRecord.schema.indexes))
    }

    public func seedQueue(_ records: [TodoRecord]) throws {
        try store.write { tx in
            for r in records { try tx.enqueue(.insert, r.item, into: "TodoItem") }
        }
    }

    public func enqueue(_ edit: BenchEdit, _ record: TodoRecord) throws -> BenchEnqueueOutcome {
        let kind: OperationKind
        switch edit {
        case .insert: kind = .insert
        case .update: kind = .update
        case .delete: kind = .delete
        }
        let item = edit == .delete ? Item(["id": .string(record.id)]) : record.item
        switch try store.enqueue(kind, item, into: "TodoItem") {
        case .added: return .added
        case .kept: return .kept
        case .changedToDelete: return .changedToDelete
        case .removed: return .removed
        }
    }

    public func pushOne(serverVersion: String) throws -> String? {
        guard let (op, item) = try store.beginSending() else { return nil }
        var answer = item
        answer?.values["version"] = .string(serverVersion)
        try store.complete(op, serverItem: answer)
        return op.itemId
    }

    public func applyPulledPage(_ records: [TodoRecord], into table: String, queryId: String) throws -> BenchPulledPage {
        let r = try store.applyPulledPage(records.map(\.item), into: table, queryId: queryId)
        return BenchPulledPage(upserted: r.upserted, deleted: r.deleted, skipped: r.skipped.count)
    }

    public func purge(_ table: String, priority: Int64, queryId: String) throws -> Int {
        try store.purge(table, where: Field("priority") == .literal(.int(priority)), queryId: queryId)
    }
}
