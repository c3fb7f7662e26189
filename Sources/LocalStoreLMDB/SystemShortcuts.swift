import CLMDB
import LocalStore
import LocalStoreKV

// LMDB adopts the core's system-table shortcuts (`SystemTableReadShortcuts`, `SystemTableShortcuts`).
// Where LMDB has nothing faster than the generic call, the shortcut runs exactly that call (adopting
// once spared every typed convenience a failed dynamic cast, 3,300 instructions; since the core answers
// the casts once per type, `ShortcutCasts`, a cast costs about 300 either way). The faster paths read
// the system tables with a cursor instead of resolving, planning and running a `Query`: the queue's head
// and tail are the first record after a key and the last record of the operations table (whose primary
// key is the id in numeric order), a push's errors are looked for in the errors table's `operationId`
// index before a delete is planned, and the delta-token pair lookup tests the config table's records in
// place. Each falls back to the generic call when a system table does not
// have the shape it relies on, and answers what the generic call answers (`LMDBSystemShortcutTests`).

extension LMDBStore: SystemTableReadShortcuts {
    package func firstOperation(after id: Int64) throws -> TableOperation? {
        try checkOpen()
        let names = systemTableNames
        let found = try environment.read(tracker: changeTracker) { try $0.queueEdge(names.operations, after: id) }
        guard let found else { return try genericFirstOperation(after: id) }
        return found.operation
    }
    package func configValue(id: String) throws -> Value? { try genericConfigValue(id: id) }
    package func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        try checkOpen()
        let operations = systemTableNames.operations
        return try environment.read(tracker: changeTracker) { try $0.itemOperations(operations, table: table, itemId: itemId) }
    }
    package func pendingItems(table: String, itemIds: [String]) throws -> [Bool]? {
        try checkOpen()
        let operations = systemTableNames.operations
        return try environment.read(tracker: changeTracker) { try $0.pendingItems(operations, table: table, itemIds: itemIds) }
    }
}

extension LMDBTransaction: SystemTableShortcuts {
    func firstOperation(after id: Int64) throws -> TableOperation? {
        guard let found = try checkedContext().queueEdge(systemTableNames.operations, after: id) else {
            return try genericFirstOperation(after: id)
        }
        return found.operation
    }
    func configValue(id: String) throws -> Value? { try genericConfigValue(id: id) }
    func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        try checkedContext().itemOperations(systemTableNames.operations, table: table, itemId: itemId)
    }
    func pendingItems(table: String, itemIds: [String]) throws -> [Bool]? {
        try checkedContext().pendingItems(systemTableNames.operations, table: table, itemIds: itemIds)
    }
    func largestOperationId() throws -> Int64? {
        guard let found = try checkedContext().queueEdge(systemTableNames.operations, after: nil) else {
            return try genericLargestOperationId()
        }
        return found.id
    }
    func insertOperation(_ operation: TableOperation) throws { try genericInsertOperation(operation) }
    func rewriteOperation(_ operation: TableOperation) throws { try genericInsertOperation(operation) }
    func storeConfigEntry(_ entry: TableConfigEntry) throws { try genericStoreConfigEntry(entry) }

    /// Nothing to delete when the push left no errors (the common case: an edit collapsing into a queued
    /// operation), which an empty range of the errors table's `operationId` index answers; else the
    /// generic delete.
    func removeOperationErrors(operationId: Int64) throws {
        if try checkedContext().hasNoOperationErrors(systemTableNames.errors, operationId: operationId) != true {
            try genericRemoveOperationErrors(operationId: operationId)
        }
    }

    /// The generic removal — unless the push left no errors (the common case), which an empty range of the
    /// errors table's `operationId` index answers: then only the operation is deleted, no delete of its
    /// errors planned.
    func removeOperationAndErrors(id: Int64) throws {
        guard try checkedContext().hasNoOperationErrors(systemTableNames.errors, operationId: id) == true else {
            return try genericRemoveOperationAndErrors(id: id)
        }
        try delete(ids: [.int(id)], from: systemTableNames.operations)
    }

    /// The ids of the rows whose `table` equals `table` ignoring ASCII case, whose `keyType` is 0 and whose
    /// `key` is `queryId`, in id order: what the generic `Query` returns, tested as its record filter tests
    /// them (the bytes of the string columns, NOCASE for `table`; a null or another type matching nothing; a
    /// damaged record `corrupt`), over the config table's records read in place: no query resolved or
    /// planned, no row decoded but the matches' ids (each match checked whole, as the query decodes it).
    func deltaTokenRowIds(table: String, queryId: String) throws -> [Value] {
        let context = try checkedContext()
        let config = systemTableNames.config
        guard let t = context.catalog.table(config) else { throw LocalStoreError.unknownTable(config) }
        guard let test = DeltaTokenRowTest(schema: t.schema, table: table, queryId: queryId) else {
            // A config table of another shape: the generic query answers (or reports it).
            return try genericDeltaTokenRowIds(table: table, queryId: queryId)
        }
        var ids: [Value] = []
        try context.walkRaw(try context.handle(t.database), lower: nil, upper: nil, descending: false) { _, record in
            if let id = try test.id(of: record) { ids.append(id) }
            return true
        }
        return ids
    }
}

/// The queue's first operation after an id, or its last one: the decoded row of the operations table,
/// or none.
struct QueueEdge {
    var row: [Value]?
    var schema: TableSchema

    /// The row's id (an integer: ``TxnContext/queueEdge(_:after:)`` checked it).
    var id: Int64? { row.flatMap { $0[schema.idIndex].intValue } }

    /// The row as a typed operation, read as from the generic query's item.
    var operation: TableOperation? {
        row.flatMap { TableOperation(TxnContext.item(row: $0, of: schema)) }
    }
}

extension TxnContext {
    /// With `after`, the operation with the smallest id greater than `after` (the generic
    /// `id > after`, sorted by id, top 1); without, the operation with the largest id. Read with one
    /// cursor over the operations table's primary database, whose keys are the integer ids in numeric
    /// order; the record is decoded (and checked) as a query's would be. `nil` when the table is not
    /// there or its id column is not an integer, or when the record found holds no integer id greater
    /// than `after` (a record that disagrees with its key): the caller then runs the generic query
    /// (which answers, or reports, the same way).
    func queueEdge(_ operations: String, after: Int64?) throws -> QueueEdge? {
        guard let t = catalog.table(operations) else { return nil }
        let schema = t.schema
        let idIndex = schema.idIndex
        guard schema.columns[idIndex].type == .integer else { return nil }
        var lower: [UInt8]? = nil
        if let after {
            guard after < Int64.max else { return QueueEdge(row: nil, schema: schema) }
            lower = KeyCodec.idKey(.int(after + 1))
        }
        var row: [Value]?
        try walkRaw(try handle(t.database), lower: lower, upper: nil, descending: after == nil) { _, record in
            row = try RecordCodec.decode(record, schema: schema, idIndex: idIndex).row
            return false
        }
        guard let row else { return QueueEdge(row: nil, schema: schema) }
        guard case .int(let id) = row[idIndex], after.map({ id > $0 }) ?? true else { return nil }
        return QueueEdge(row: row, schema: schema)
    }

    /// Whether the errors table has no row whose `operationId` is `operationId`, answered from the
    /// entries of an index led by `operationId` (as the system table's is): `true` when its range for
    /// the value is empty, `false` when it is not, `nil` when there is no such table, column or index
    /// (the caller then deletes through the generic query).
    func hasNoOperationErrors(_ errors: String, operationId: Int64) throws -> Bool? {
        guard let t = catalog.table(errors), let index = SystemTableShapes.operationIdIndex(t.schema, t.indexes) else { return nil }
        var lower: [UInt8] = []
        KeyCodec.appendComponent(.int(operationId), into: &lower)
        return try countKeys(try handle(index.database), lower: lower, upper: KeyCodec.successor(lower), limit: 1) == 0
    }

    /// What the item lookups of the operations table need, found once per call: the table, its `table` and
    /// `itemId` columns and the index led by them, and the handles. `nil` when the table does not have that
    /// shape (the caller then runs the generic query).
    private struct QueueItemIndex {
        let schema: TableSchema
        let tableColumn: Int
        let itemColumn: Int
        let primary: MDB_dbi
        let index: MDB_dbi
        /// The index `index` holds.
        let definition: IndexDefinition
    }

    private func queueItemIndex(_ operations: String) throws -> QueueItemIndex? {
        guard let t = catalog.table(operations), let shape = SystemTableShapes.itemIndex(t.schema, t.indexes) else { return nil }
        return QueueItemIndex(
            schema: t.schema, tableColumn: shape.tableColumn, itemColumn: shape.itemColumn, primary: try handle(t.database),
            index: try handle(shape.index.database), definition: shape.index)
    }

    /// Walks the index entries of `(table, itemId)` and calls `body` with each row whose `table` has
    /// `table`'s bytes and whose `itemId` equals `itemId` ignoring ASCII case (a truncated key can put
    /// another item's entry in the range), until `body` returns `false`.
    private func forEachItemOperation(
        _ q: QueueItemIndex, table tableBytes: [UInt8], tablePrefix: [UInt8], itemId: String, _ body: ([Value]) -> Bool
    ) throws {
        var lower = tablePrefix
        KeyCodec.appendNoCaseComponent(.string(itemId), into: &lower)
        let range = KeyRange(lower: lower, upper: KeyCodec.successor(lower)).stored
        try withRange(q.index, lower: range.lower, upper: range.upper, descending: false, index: q.definition) { cursor in
            while let (_, storedKey) = try cursor.next() {
                guard let row = try withValue(q.primary, raw: storedKey, { try RecordCodec.decode($0, schema: q.schema).row }) else {
                    throw LMDBErrors.danglingIndexEntry(table: q.schema.name)
                }
                guard case .string(let name) = row[q.tableColumn], name.utf8.elementsEqual(tableBytes),
                    case .string(let id) = row[q.itemColumn], Collation.compareNoCase(id, itemId) == 0
                else { continue }
                if !body(row) { return }
            }
        }
    }

    /// The operations of one item (``SystemTableReadShortcuts/itemOperations(table:itemId:)``), read from
    /// the range of an index led by the byte-ordered `table` and the NOCASE `itemId` (as the system
    /// table's is): each entry's row is decoded (and so checked) as the generic query's would be and kept
    /// when its `table` has `table`'s bytes and its `itemId` equals `itemId` ignoring ASCII case (a
    /// truncated key can put another item's entry in the range), then put in id order. `nil` when there
    /// is no such table, column or index: the caller then runs the generic query.
    func itemOperations(_ operations: String, table: String, itemId: String) throws -> [TableOperation]? {
        guard let q = try queueItemIndex(operations) else { return nil }
        var prefix: [UInt8] = []
        KeyCodec.appendComponent(.string(table), into: &prefix)
        var rows: [[Value]] = []
        try forEachItemOperation(q, table: Array(table.utf8), tablePrefix: prefix, itemId: itemId) { row in
            rows.append(row)
            return true
        }
        if rows.count > 1 {
            rows.sort { Collation.compare($0[q.schema.idIndex], $1[q.schema.idIndex]) < 0 }
        }
        return rows.compactMap { TableOperation(TxnContext.item(row: $0, of: q.schema)) }
    }

    /// ``SystemTableReadShortcuts/pendingItems(table:itemIds:)``: the operations table, its index and
    /// handles found once; when no index entry at all starts with `table`'s key (no operation of the
    /// table is queued: one seek), every flag is `false`; otherwise each id's range is read until one
    /// row passes the checks of ``itemOperations(_:table:itemId:)``.
    func pendingItems(_ operations: String, table: String, itemIds: [String]) throws -> [Bool]? {
        guard let q = try queueItemIndex(operations) else { return nil }
        var prefix: [UInt8] = []
        KeyCodec.appendComponent(.string(table), into: &prefix)
        let whole = KeyRange(lower: prefix, upper: KeyCodec.successor(prefix)).stored
        if let lower = whole.lower, !lower.isEmpty,
            try countKeys(q.index, lower: lower, upper: whole.upper, limit: 1) == 0
        {
            return Array(repeating: false, count: itemIds.count)
        }
        let tableBytes = Array(table.utf8)
        // One cursor seeks each id's range. The first entry at or after `(table, itemId)` answers when its
        // key is whole (not truncated) and starts with those two components: the encoding is exact and
        // prefix-free there, so the entry is an operation of that item. A truncated key, or an id whose
        // components pass the stored-key limit, is checked on its rows as ``itemOperations`` does.
        let txn = try activeTxn()
        var cursor: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, q.index, &cursor), "cannot open a cursor")
        defer { mdb_cursor_close(cursor) }
        var lower: [UInt8] = []
        lower.reserveCapacity(prefix.count + 64)
        var flags: [Bool] = []
        flags.reserveCapacity(itemIds.count)
        for itemId in itemIds {
            lower.removeAll(keepingCapacity: true)
            lower.append(contentsOf: prefix)
            KeyCodec.appendNoCaseComponent(.string(itemId), into: &lower)
            var answer: Bool?
            if lower.count <= KeyCodec.prefixLimit {
                var kv = MDB_val()
                var dv = MDB_val()
                let rc = lower.withUnsafeMutableBytes { k -> Int32 in
                    kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    return mdb_cursor_get(cursor, &kv, &dv, MDB_SET_RANGE)
                }
                if rc == MDB_NOTFOUND {
                    answer = false
                } else {
                    try LMDBErrors.check(rc, "cannot read")
                    let key = UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size)
                    let starts = key.count >= lower.count && lower.withUnsafeBytes { l in QueryRunner.equal(UnsafeRawBufferPointer(rebasing: key[..<l.count]), l) }
                    if !starts {
                        // Past every key of the item: no stored key, whole or truncated, is in its range.
                        answer = false
                    } else if key.count <= KeyCodec.prefixLimit {
                        answer = true
                    }
                }
            }
            if let answer {
                flags.append(answer)
                continue
            }
            var found = false
            try forEachItemOperation(q, table: tableBytes, tablePrefix: prefix, itemId: itemId) { _ in
                found = true
                return false
            }
            flags.append(found)
        }
        return flags
    }
}
