import Dispatch
import Foundation

/// Where the `async` variants of the store API run their blocking work: a concurrent dispatch queue
/// whose threads are not Swift concurrency's cooperative pool, so a store call waiting for a lock or
/// the disk never starves other tasks.
enum BlockingWork {
    static let queue = DispatchQueue(label: "LocalStore.blocking", qos: .userInitiated, attributes: .concurrent)

    static func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}

/// Carries a value received as `sending` (and therefore not shared with anyone) to another thread.
private final class SentValue<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

extension LocalStore {
    /// Defines a table without blocking the calling task's thread.
    public func defineTable(_ schema: TableSchema) async throws {
        try await BlockingWork.run { try self.defineTable(schema) }
    }

    /// The user tables' definitions.
    public func tableSchemas() async throws -> [TableSchema] {
        try await BlockingWork.run { try self.tableSchemas() }
    }

    /// Reads one row by id.
    public func read(table: String, id: Value) async throws -> Item? {
        try await BlockingWork.run { try self.read(table: table, id: id) }
    }

    /// Reads one row by string id.
    public func read(table: String, id: String) async throws -> Item? {
        try await BlockingWork.run { try self.read(table: table, id: .string(id)) }
    }

    /// Runs a query.
    public func read(_ query: Query) async throws -> ReadResult {
        try await BlockingWork.run { try self.read(query) }
    }

    /// Upserts items (merge semantics, all-or-nothing).
    public func upsert(_ items: [Item], into table: String, options: UpsertOptions = .strict) async throws {
        try await BlockingWork.run { try self.upsert(items, into: table, options: options) }
    }

    /// Deletes rows by id.
    public func delete(ids: [Value], from table: String) async throws {
        try await BlockingWork.run { try self.delete(ids: ids, from: table) }
    }

    /// Deletes the rows a query returns.
    public func delete(matching query: Query) async throws {
        try await BlockingWork.run { try self.delete(matching: query) }
    }

    /// Runs `body` in one write transaction on a thread of its own; the body itself is synchronous.
    ///
    /// The body is `sending`: it moves to the store's thread for the duration of the call, so it
    /// cannot share non-`Sendable` state with the calling task.
    public func write<R: Sendable>(_ body: sending @escaping (any LocalStoreTransaction) throws -> R) async throws -> R {
        // `sending` guarantees no other code holds the closure's state, so handing it to the queue is safe.
        let transfer = SentValue(body)
        return try await BlockingWork.run { try self.write(transfer.value) }
    }

    /// Appends an operation with the next id.
    public func appendOperation(table: String, tableKind: Int = 0, itemId: String, properties: [UInt8] = []) async throws
        -> TableOperation
    {
        try await BlockingWork.run {
            try self.appendOperation(table: table, tableKind: tableKind, itemId: itemId, properties: properties)
        }
    }

    /// The first operation after `id`.
    public func operation(after id: Int64) async throws -> TableOperation? {
        try await BlockingWork.run { try self.operation(after: id) }
    }

    /// Removes an operation and its errors.
    public func removeOperation(id: Int64) async throws {
        try await BlockingWork.run { try self.removeOperation(id: id) }
    }

    /// The number of pending operations.
    public func pendingOperationCount() async throws -> Int {
        try await BlockingWork.run { try self.pendingOperationCount() }
    }

    /// Closes the store.
    public func close() async throws {
        try await BlockingWork.run { try self.close() }
    }
}

// MARK: - Every other store operation

// The async form of every public synchronous store operation of the core (the conveniences of
// LocalStore.swift, delta tokens, the typed operation queue, push errors, pull and purge, Codable), so
// that async code never blocks a cooperative thread. Each runs the synchronous form on
// `BlockingWork.queue`. Backend-specific calls (`checkpoint()`, `explain(_:)`, `rekey(to:)`, ...) go
// through ``LocalStore/run(_:)``.
extension LocalStore {
    /// Runs `body` with this store on a thread outside Swift's cooperative pool and returns its result:
    /// the async form of any synchronous call, including a backend's own (`checkpoint()`,
    /// `explain(_:)`, `rekey(to:)`, `compact(to:)`, ...), or several calls in a row.
    ///
    /// ```swift
    /// let plan = try await store.run { try $0.explain(query) }
    /// ```
    ///
    /// Calls inside `body` are not one transaction (use `write { }` for that).
    public func run<R: Sendable>(_ body: @escaping @Sendable (Self) throws -> R) async throws -> R {
        try await BlockingWork.run { try body(self) }
    }

    /// The definition of `table`, or `nil` when it is not defined (system tables included).
    public func schema(of table: String) async throws -> TableSchema? {
        try await BlockingWork.run { try self.schema(of: table) }
    }

    /// The system properties `table` has as columns; empty for an unknown table.
    public func systemProperties(for table: String) async throws -> Set<SystemProperty> {
        try await BlockingWork.run { try self.systemProperties(for: table) }
    }

    /// Deletes the rows with these string ids.
    public func delete(ids: [String], from table: String) async throws {
        try await BlockingWork.run { try self.delete(ids: ids, from: table) }
    }

    /// The number of rows matching `predicate` in `table`.
    public func count(_ table: String, where predicate: QueryPredicate? = nil) async throws -> Int {
        try await BlockingWork.run { try self.count(table, where: predicate) }
    }

    // MARK: Operations and errors

    /// Every pending operation, in id order.
    public func pendingOperations() async throws -> [TableOperation] {
        try await BlockingWork.run { try self.pendingOperations() }
    }

    /// The pending operations of `table`, in id order.
    public func pendingOperations(table: String) async throws -> [TableOperation] {
        try await BlockingWork.run { try self.pendingOperations(table: table) }
    }

    /// The pending operations of one item of `table`, in id order.
    public func pendingOperations(table: String, itemId: String) async throws -> [TableOperation] {
        try await BlockingWork.run { try self.pendingOperations(table: table, itemId: itemId) }
    }

    /// Whether an operation of one item of `table` is queued (one index lookup).
    public func hasPendingOperation(table: String, itemId: String) async throws -> Bool {
        try await BlockingWork.run { try self.hasPendingOperation(table: table, itemId: itemId) }
    }

    /// The operation with id `id`.
    public func operation(id: Int64) async throws -> TableOperation? {
        try await BlockingWork.run { try self.operation(id: id) }
    }

    /// Records a push failure.
    public func recordError(_ error: TableOperationError) async throws {
        try await BlockingWork.run { try self.recordError(error) }
    }

    /// Every recorded error, ordered by operation id then id.
    public func operationErrors() async throws -> [TableOperationError] {
        try await BlockingWork.run { try self.operationErrors() }
    }

    /// The errors recorded for operation `operationId`.
    public func operationErrors(operationId: Int64) async throws -> [TableOperationError] {
        try await BlockingWork.run { try self.operationErrors(operationId: operationId) }
    }

    /// Removes one error.
    public func removeError(id: String) async throws {
        try await BlockingWork.run { try self.removeError(id: id) }
    }

    /// Removes every error.
    public func clearErrors() async throws {
        try await BlockingWork.run { try self.clearErrors() }
    }

    /// Every config entry, ordered by table then key.
    public func configEntries() async throws -> [TableConfigEntry] {
        try await BlockingWork.run { try self.configEntries() }
    }

    // MARK: Delta tokens

    /// The delta token of (`table`, `queryId`), or `nil`.
    public func deltaToken(table: String, queryId: String) async throws -> Date? {
        try await BlockingWork.run { try self.deltaToken(table: table, queryId: queryId) }
    }

    /// Stores the delta token of (`table`, `queryId`).
    public func setDeltaToken(_ date: Date, table: String, queryId: String) async throws {
        try await BlockingWork.run { try self.setDeltaToken(date, table: table, queryId: queryId) }
    }

    /// Removes the delta token of (`table`, `queryId`).
    public func removeDeltaToken(table: String, queryId: String) async throws {
        try await BlockingWork.run { try self.removeDeltaToken(table: table, queryId: queryId) }
    }

    /// Every delta token of `table`, by query id.
    public func deltaTokens(table: String) async throws -> [String: Date] {
        try await BlockingWork.run { try self.deltaTokens(table: table) }
    }

    /// Removes every delta token of `table` and returns how many there were.
    @discardableResult
    public func removeDeltaTokens(table: String) async throws -> Int {
        try await BlockingWork.run { try self.removeDeltaTokens(table: table) }
    }

    /// Rewrites delta-token rows of the old id format; returns how many were rewritten.
    @discardableResult
    public func migrateDeltaTokenRows() async throws -> Int {
        try await BlockingWork.run { try self.migrateDeltaTokenRows() }
    }

    // MARK: Typed operation queue

    /// Every queued operation, in id order.
    public func queuedOperations() async throws -> [QueuedOperation] {
        try await BlockingWork.run { try self.queuedOperations() }
    }

    /// The queued operations of one item of `table`, in id order.
    public func queuedOperations(table: String, itemId: String) async throws -> [QueuedOperation] {
        try await BlockingWork.run { try self.queuedOperations(table: table, itemId: itemId) }
    }

    /// The queued operation with id `id`.
    public func queuedOperation(id: Int64) async throws -> QueuedOperation? {
        try await BlockingWork.run { try self.queuedOperation(id: id) }
    }

    /// The first queued operation whose id is greater than `id`.
    public func nextOperation(after id: Int64 = 0) async throws -> QueuedOperation? {
        try await BlockingWork.run { try self.nextOperation(after: id) }
    }

    /// Enqueues an operation on `item`, collapsing it with a pending one (see the synchronous form).
    @discardableResult
    public func enqueue(_ kind: OperationKind, _ item: Item, into table: String) async throws -> EnqueueOutcome {
        try await BlockingWork.run { try self.enqueue(kind, item, into: table) }
    }

    /// Marks the next operation after `id` in flight and returns it.
    public func beginPush(after id: Int64 = 0) async throws -> QueuedOperation? {
        try await BlockingWork.run { try self.beginPush(after: id) }
    }

    /// Marks the next operation after `id` in flight, records what is sent and returns it with the
    /// item (see the synchronous form).
    public func beginSending(after id: Int64 = 0) async throws -> (operation: QueuedOperation, item: Item?)? {
        try await BlockingWork.run { try self.beginSending(after: id) }
    }

    /// The item a push sends for `op` (see the synchronous form).
    public func pushItem(for op: QueuedOperation) async throws -> Item? {
        try await BlockingWork.run { try self.pushItem(for: op) }
    }

    /// Completes a pushed operation.
    @discardableResult
    public func complete(_ op: QueuedOperation, serverItem: Item? = nil) async throws -> CompletionOutcome {
        try await BlockingWork.run { try self.complete(op, serverItem: serverItem) }
    }

    /// Completes a pushed operation and begins the next one, atomically.
    public func completeAndBeginNext(_ op: QueuedOperation, serverItem: Item? = nil) async throws
        -> (outcome: CompletionOutcome, next: QueuedOperation?)
    {
        let result = try await BlockingWork.run {
            let (outcome, next) = try self.completeAndBeginNext(op, serverItem: serverItem)
            return CompletedAndNext(outcome: outcome, next: next)
        }
        return (result.outcome, result.next)
    }

    /// Releases every in-flight operation; returns how many there were.
    @discardableResult
    public func releaseInFlightOperations() async throws -> Int {
        try await BlockingWork.run { try self.releaseInFlightOperations() }
    }

    /// The operations a push marked that may be on the server (in flight, or sent and never completed).
    public func operationsMayBeOnServer() async throws -> [QueuedOperation] {
        try await BlockingWork.run { try self.operationsMayBeOnServer() }
    }

    // MARK: Push errors

    /// Records a failed push of `op`.
    @discardableResult
    public func recordPushError(
        for op: QueuedOperation, statusCode: Int?, message: String, serverItem: Item? = nil, item: Item? = nil, code: Int? = nil,
        domain: String? = nil
    ) async throws -> PushError {
        try await BlockingWork.run {
            try self.recordPushError(
                for: op, statusCode: statusCode, message: message, serverItem: serverItem, item: item, code: code, domain: domain)
        }
    }

    /// Every recorded push error.
    public func pushErrors() async throws -> [PushError] {
        try await BlockingWork.run { try self.pushErrors() }
    }

    /// Cancels the failed operation and discards the local item.
    public func cancelAndDiscard(_ error: PushError) async throws {
        try await BlockingWork.run { try self.cancelAndDiscard(error) }
    }

    /// Cancels the failed operation and stores `item` as the local item.
    public func cancelAndUpdate(_ error: PushError, with item: Item) async throws {
        try await BlockingWork.run { try self.cancelAndUpdate(error, with: item) }
    }

    /// Keeps the failed operation with `item` as its payload.
    @discardableResult
    public func keepAndUpdate(_ error: PushError, with item: Item) async throws -> QueuedOperation {
        try await BlockingWork.run { try self.keepAndUpdate(error, with: item) }
    }

    /// Changes the failed operation to `kind` with `item`.
    @discardableResult
    public func changeOperation(_ error: PushError, to kind: OperationKind, item: Item) async throws -> QueuedOperation {
        try await BlockingWork.run { try self.changeOperation(error, to: kind, item: item) }
    }

    // MARK: Pull and purge

    /// Applies one page of pulled items (see the synchronous form).
    @discardableResult
    public func applyPulledPage(_ items: [Item], into table: String, queryId: String? = nil) async throws -> PulledPageResult {
        try await BlockingWork.run { try self.applyPulledPage(items, into: table, queryId: queryId) }
    }

    /// Purges the rows of `table` matching `predicate` (refused while operations are pending).
    @discardableResult
    public func purge(_ table: String, where predicate: QueryPredicate? = nil, queryId: String? = nil) async throws -> Int {
        try await BlockingWork.run { try self.purge(table, where: predicate, queryId: queryId) }
    }

    /// Purges `table` and its pending operations, errors and delta tokens.
    @discardableResult
    public func forcePurge(_ table: String) async throws -> Int {
        try await BlockingWork.run { try self.forcePurge(table) }
    }

    // MARK: Codable

    /// Encodes `records` with `encoder` and upserts them with `options`.
    public func upsert<T: Encodable & Sendable>(
        records: [T], into table: String, options: UpsertOptions = .strict, encoder: ItemEncoder = ItemEncoder()
    ) async throws {
        try await BlockingWork.run { try self.upsert(records: records, into: table, options: options, encoder: encoder) }
    }

    /// Reads the row `id` of `table` as a `T`.
    public func read<T: Decodable & Sendable>(_ type: T.Type, table: String, id: String) async throws -> T? {
        try await BlockingWork.run { try self.read(T.self, table: table, id: id) }
    }

    /// Runs `query` and decodes every returned item as a `T`.
    public func read<T: Decodable & Sendable>(_ type: T.Type, _ query: Query) async throws -> [T] {
        try await BlockingWork.run { try self.read(T.self, query) }
    }
}

extension IntegrityChecking where Self: LocalStore {
    /// Checks the store's files without blocking the calling task's thread.
    public func checkIntegrity() async throws -> [String] {
        try await BlockingWork.run { try self.checkIntegrity() }
    }

    /// Checks the store's files without blocking the calling task's thread, and throws `corrupt` when
    /// they are damaged (the async form of the blocking `verifyIntegrity()`).
    public func verifyIntegrity() async throws {
        try await BlockingWork.run { try self.verifyIntegrity() }
    }
}

/// The result of ``LocalStore/completeAndBeginNext(_:serverItem:)`` carried across threads.
private struct CompletedAndNext: Sendable {
    let outcome: CompletionOutcome
    let next: QueuedOperation?
}
