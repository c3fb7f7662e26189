import LocalStore

// KVStore's system-table shortcuts (the core's `SystemTableReadShortcuts` and `SystemTableShortcuts`).
//
// The lookups a sync makes most often read the system tables' keys directly instead of resolving,
// planning and running a `Query`, each answering exactly what its query answers (the conformance check
// `queueLookupsAnswerAsTheirQueries`):
//
// - the queue's head after an id: the first row key of the operations table from that id on (integer
//   ids are keyed in numeric order);
// - an item's operations and a pulled page's pending flags: the range of the `itemOperations` index
//   (table, NOCASE itemId) for the item, each entry's row checked (its `table` the bytes asked for, its
//   `itemId` equal ignoring ASCII case); a page's flags first ask whether the table has any entry at all;
// - a push's errors: an empty range of the errors table's `operationId` index, and no delete is planned;
// - a delta token's rows: the range of the config table's `deltaTokens` index (NOCASE table, keyType, key)
//   for the pair, each entry's row checked.
//
// Each falls back to the generic call when the system table does not have the shape it relies on.
//
// The queue's largest id is read once per transaction and then kept exact
// (`KVTransaction.knownLargestOperationId`). The generic read walks back from the end of the operations
// table's keys, and on an LSM engine such as RocksDB a queue that was pushed and emptied leaves one
// tombstone per deleted row there, which every walk inside a write transaction steps over again: 10,000
// enqueues in one write after a full push spent 79 G instructions in that walk. The transaction's value
// is raised by every appended or rewritten operation, and forgotten by any other upsert or delete of the
// operations table (any spelling of its name) and by a nested write that rolled back; no other writer
// can change the table meanwhile (`appendOperationIdsInsideOneWrite` holds it to the generic answer).

/// The operations table's item index, found once per call.
struct KVQueueItemIndex {
    let table: KVTable
    let index: IndexDefinition
    let spec: KVIndexSpec
    let prefix: [UInt8]
    let tableColumn: Int
    let itemColumn: Int
}

extension KVReads {
    /// The operations table and its index led by the byte-ordered `table` and the NOCASE `itemId`, or
    /// `nil` when the table does not have that shape.
    func queueItemIndex(_ operations: String) -> KVQueueItemIndex? {
        guard let t = catalog.lookup(operations), let shape = SystemTableShapes.itemIndex(t.schema, t.indexes) else { return nil }
        return KVQueueItemIndex(
            table: t, index: shape.index, spec: t.specs[shape.index.slot], prefix: t.prefix(.index(shape.index)), tableColumn: shape.tableColumn,
            itemColumn: shape.itemColumn)
    }

    /// Calls `body` with the record of each entry of `(table, itemId)` in `q`'s index whose row's `table`
    /// has `table`'s bytes and whose `itemId` equals `itemId` ignoring ASCII case, in id key order, until
    /// `body` returns `false`. The record is lent: valid until `body` returns.
    func forEachItemOperation(
        _ q: KVQueueItemIndex, table: String, itemId: String, _ body: (UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var lower = q.prefix
        q.spec.appendComponent(.string(table), 0, into: &lower)
        q.spec.appendComponent(.string(itemId), 1, into: &lower)
        var rowKey: [UInt8] = []
        try reader.scan(from: lower, to: KVKeyRange.end(of: lower), reverse: false) { _, value in
            try q.table.withEntryRecord(q.spec, value, reader: reader, rowKey: &rowKey) { record in
                let row = try q.table.decode(record)
                guard case .string(let name) = row[q.tableColumn], name.utf8.elementsEqual(table.utf8),
                    case .string(let id) = row[q.itemColumn], Collation.compareNoCase(id, itemId) == 0
                else { return true }
                return try body(record)
            }
        }
    }

    /// ``SystemTableReadShortcuts/itemOperations(table:itemId:)``; `nil` when the operations table has
    /// another shape.
    func itemOperations(_ operations: String, table: String, itemId: String) throws -> [TableOperation]? {
        guard let q = queueItemIndex(operations) else { return nil }
        var items: [Item] = []
        try forEachItemOperation(q, table: table, itemId: itemId) { record in
            items.append(try q.table.wholeRows.item(record))
            return true
        }
        // In id key order already (the ids are integers); sorted as the query sorts them all the same.
        if items.count > 1 {
            items.sort { Collation.compare($0.id ?? .null, $1.id ?? .null) < 0 }
        }
        return items.compactMap(TableOperation.init)
    }

    /// ``SystemTableReadShortcuts/pendingItems(table:itemIds:)``: every flag `false` when no entry of the
    /// index starts with `table` (one seek), else each item's range read until one row passes.
    func pendingItems(_ operations: String, table: String, itemIds: [String]) throws -> [Bool]? {
        guard let q = queueItemIndex(operations) else { return nil }
        var tableComponent: [UInt8] = []
        q.spec.appendComponent(.string(table), 0, into: &tableComponent)
        guard try hasEntry(q.table, q.index, startingWith: tableComponent) else { return Array(repeating: false, count: itemIds.count) }
        return try itemIds.map { itemId in
            var found = false
            try forEachItemOperation(q, table: table, itemId: itemId) { _ in
                found = true
                return false
            }
            return found
        }
    }

    /// The operation with the smallest id greater than `id`, read as the first row key from `id + 1` on:
    /// `.some(nil)` when there is none; `nil` when the operations table's id is not an integer or the row
    /// found holds no integer id greater than `id` (the caller then runs the generic query).
    func firstOperation(_ operations: String, after id: Int64) throws -> TableOperation?? {
        guard let t = catalog.lookup(operations), t.schema.columns[t.schema.idIndex].type == .integer else { return nil }
        guard id < .max else { return .some(nil) }
        var item: Item?
        try reader.scan(from: KVKeys.row(t.number, id: .int(id + 1)), to: KVKeyRange.end(of: KVKeys.rows(t.number)), reverse: false) { _, record in
            item = try t.wholeRows.item(record)
            return false
        }
        guard let item else { return .some(nil) }
        guard case .int(let found)? = item.id, found > id else { return nil }
        return .some(TableOperation(item))
    }

    /// ``SystemTableShortcuts/deltaTokenRowIds(table:queryId:)``: the range of the config table's
    /// `deltaTokens` index (NOCASE `table`, `keyType`, `key`) for the pair, each entry's row checked as the
    /// generic query's record filter checks it (its `table` equal to `table` ignoring ASCII case, its
    /// `keyType` 0, its `key` the bytes of `queryId`), the ids in id key order; `nil` when the config table
    /// has another shape.
    func deltaTokenRowIds(_ config: String, table: String, queryId: String) throws -> [Value]? {
        guard let t = catalog.lookup(config), let index = SystemTableShapes.deltaTokenIndex(t.schema, t.indexes),
            let test = DeltaTokenRowTest(schema: t.schema, table: table, queryId: queryId)
        else { return nil }
        let spec = t.specs[index.slot]
        var lower = t.prefix(.index(index))
        spec.appendComponent(.string(table), 0, into: &lower)
        spec.appendComponent(.int(TableConfigEntry.deltaTokenKeyType), 1, into: &lower)
        spec.appendComponent(.string(queryId), 2, into: &lower)
        var ids: [Value] = []
        var rowKey: [UInt8] = []
        try reader.scan(from: lower, to: KVKeyRange.end(of: lower), reverse: false) { _, value in
            if let id = try t.withEntryRecord(spec, value, reader: reader, rowKey: &rowKey, test.id(of:)) { ids.append(id) }
            return true
        }
        return ids
    }

    /// Whether the errors table has no row whose `operationId` is `operationId`, answered by an empty range
    /// of an index led by `operationId`; `nil` when there is no such column or index.
    func hasNoOperationErrors(_ errors: String, operationId: Int64) throws -> Bool? {
        guard let t = catalog.lookup(errors), let index = SystemTableShapes.operationIdIndex(t.schema, t.indexes) else { return nil }
        var component: [UInt8] = []
        t.specs[index.slot].appendComponent(.int(operationId), 0, into: &component)
        return try !hasEntry(t, index, startingWith: component)
    }

    /// Whether `index` of `table` has an entry whose key (after the index's prefix) starts with `bytes`.
    private func hasEntry(_ table: KVTable, _ index: IndexDefinition, startingWith bytes: [UInt8]) throws -> Bool {
        try countEntries(table, .index(index), [KeyRange(lower: bytes, upper: KeyCodec.successor(bytes))], limit: 1) > 0
    }
}

extension KVStore: SystemTableReadShortcuts {
    package func firstOperation(after id: Int64) throws -> TableOperation? {
        let operations = systemTableNames.operations
        if let found = try reading({ try $0.firstOperation(operations, after: id) }) { return found }
        return try genericFirstOperation(after: id)
    }
    package func configValue(id: String) throws -> Value? { try genericConfigValue(id: id) }
    package func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        let operations = systemTableNames.operations
        return try reading { try $0.itemOperations(operations, table: table, itemId: itemId) }
    }
    package func pendingItems(table: String, itemIds: [String]) throws -> [Bool]? {
        let operations = systemTableNames.operations
        return try reading { try $0.pendingItems(operations, table: table, itemIds: itemIds) }
    }
}

extension KVTransaction: SystemTableShortcuts {
    private var reads: KVReads {
        get throws {
            try check()
            return writes.reads
        }
    }

    func firstOperation(after id: Int64) throws -> TableOperation? {
        if let found = try reads.firstOperation(systemTableNames.operations, after: id) { return found }
        return try genericFirstOperation(after: id)
    }
    func configValue(id: String) throws -> Value? { try genericConfigValue(id: id) }
    func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        try reads.itemOperations(systemTableNames.operations, table: table, itemId: itemId)
    }
    func pendingItems(table: String, itemIds: [String]) throws -> [Bool]? {
        try reads.pendingItems(systemTableNames.operations, table: table, itemIds: itemIds)
    }

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
        if let ids = try reads.deltaTokenRowIds(systemTableNames.config, table: table, queryId: queryId) { return ids }
        return try genericDeltaTokenRowIds(table: table, queryId: queryId)
    }

    /// Only the operation is deleted when the push left no errors (the common case), which an empty range
    /// of the errors table's `operationId` index answers; else the generic removal.
    func removeOperationAndErrors(id: Int64) throws {
        guard try reads.hasNoOperationErrors(systemTableNames.errors, operationId: id) == true else {
            return try genericRemoveOperationAndErrors(id: id)
        }
        try delete(ids: [.int(id)], from: systemTableNames.operations)
    }

    func removeOperationErrors(operationId: Int64) throws {
        if try reads.hasNoOperationErrors(systemTableNames.errors, operationId: operationId) != true {
            try genericRemoveOperationErrors(operationId: operationId)
        }
    }
}
