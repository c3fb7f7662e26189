import Dispatch

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
