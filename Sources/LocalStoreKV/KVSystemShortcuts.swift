import LocalStore

// KVStore's transactions adopt the core's system-table shortcuts for one thing the generic calls cannot
// do well on an engine with tombstones: finding the queue's largest id once per append.
//
// The generic read of the largest id is a reverse walk from the end of the operations table's keys. On
// an LSM engine such as RocksDB, a queue that was pushed and emptied leaves one tombstone per deleted
// row there, and every walk inside a write transaction steps over all of them again (the engine's view
// of the committed data is re-positioned on each walk): 10,000 enqueues in one write after a full push
// cost 79 G instructions in that walk alone. The transaction therefore keeps the largest id it read or
// wrote (`KVTransaction.knownLargestOperationId`) for its length, exact at every step:
//
// - an appended or rewritten operation raises it to the operation's id;
// - any other upsert or delete of the operations table (under any spelling of its name), and a nested
//   write that rolled back, forget it, and the next append reads it again.
//
// No other writer can change the table meanwhile: the transaction is the store's one writer. Every other
// shortcut runs the generic call it stands for. `appendOperationIdsInsideOneWrite` in the conformance
// suite holds the cache to the generic answer.

extension KVTransaction: SystemTableShortcuts {
    func firstOperation(after id: Int64) throws -> TableOperation? { try genericFirstOperation(after: id) }
    func configValue(id: String) throws -> Value? { try genericConfigValue(id: id) }

    func largestOperationId() throws -> Int64? {
        try check()
        if let known = knownLargestOperationId { return known }
        let found = try genericLargestOperationId()
        knownLargestOperationId = .some(found)
        return found
    }

    func insertOperation(_ operation: TableOperation) throws {
        try storeOperation(operation)
    }

    func rewriteOperation(_ operation: TableOperation) throws {
        try storeOperation(operation)
    }

    /// Upserts `operation`'s row; the largest id known before it stays known, raised to the row's id.
    private func storeOperation(_ operation: TableOperation) throws {
        let known = knownLargestOperationId
        try genericInsertOperation(operation)  // forgets the largest id: it writes the operations table
        if let known { knownLargestOperationId = .some(max(known ?? operation.id, operation.id)) }
    }

    func storeConfigEntry(_ entry: TableConfigEntry) throws { try genericStoreConfigEntry(entry) }
    func deltaTokenRowIds(table: String, queryId: String) throws -> [Value] {
        try genericDeltaTokenRowIds(table: table, queryId: queryId)
    }
    func removeOperationAndErrors(id: Int64) throws { try genericRemoveOperationAndErrors(id: id) }
    func removeOperationErrors(operationId: Int64) throws { try genericRemoveOperationErrors(operationId: operationId) }
}
