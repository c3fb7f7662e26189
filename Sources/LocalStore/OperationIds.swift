import Foundation

// Operation ids that strictly increase for the life of a store: a high-water mark kept in the config
// table and written in the same transaction as every append.

extension TableConfigEntry {
    /// The key type of the entries LocalStore itself keeps in the config table (not a delta token: the
    /// SDKs only read and delete entries of key type 0).
    public static let localStoreKeyType: Int64 = 100

    /// The id of the config row holding the highest operation id ever given out by
    /// ``LocalStoreAccess/appendOperation(table:tableKind:itemId:properties:)``.
    public static let operationIdHighWaterId = "localstore|operationIdHighWater"

    /// The high-water mark's entry holding `value` (every other column is a constant).
    package static func operationIdHighWater(_ value: String) -> TableConfigEntry {
        TableConfigEntry(id: operationIdHighWaterId, table: "", key: "operationIdHighWater", keyType: localStoreKeyType, value: value)
    }
}

extension LocalStoreAccess {
    /// The highest operation id ever given out by `appendOperation` in this store (0 when none was),
    /// read by primary key from the config table. A damaged value is a `corrupt` error naming the row.
    public func operationIdHighWaterMark() throws -> Int64 {
        try operationIdHighWaterMark(shortcuts: ShortcutCasts.readShortcuts(self))
    }

    /// ``operationIdHighWaterMark()`` read through `shortcuts` (`self`'s, cast by the caller) or, when it
    /// is `nil`, with `read(table:id:)`.
    func operationIdHighWaterMark(shortcuts: (any SystemTableReadShortcuts)?) throws -> Int64 {
        let config = systemTableNames.config
        guard let value = try ConfigValueReading.value(self, id: TableConfigEntry.operationIdHighWaterId, shortcuts: shortcuts) else {
            return 0
        }
        guard let text = value.stringValue, let mark = Int64(text), mark >= 0 else {
            throw LocalStoreError(
                .corrupt,
                "the operation id high-water mark in \(config) (row '\(TableConfigEntry.operationIdHighWaterId)') is \(value), not a non-negative integer",
                table: config, column: "value")
        }
        return mark
    }

    /// Stores `operation` (its `id` ignored) in `tx` under the next operation id and records that id as the
    /// high-water mark; returns the id. The backend's shortcut does it in one step when it can
    /// (``SystemTableShortcuts/appendAtNextOperationId(_:)``), else the general steps run: the next id, the
    /// insert, the new mark. What `appendOperation` and `enqueue` append through.
    func appendOperationRecord(_ operation: TableOperation, in tx: any LocalStoreTransaction) throws -> Int64 {
        let shortcuts = ShortcutCasts.shortcuts(tx)
        if let shortcuts, let id = try shortcuts.appendAtNextOperationId(operation) { return id }
        var op = operation
        op.id = try nextOperationId(tx, shortcuts)
        // The store's first operation ever: no operation can carry a mark from before the tracking rows,
        // so they are authoritative from now on (SentTracking.swift) and no push will read the queue for
        // old marks.
        if op.id == 1 { try tx.declareSentTrackingStarted() }
        if let shortcuts {
            try shortcuts.insertOperation(op)
        } else {
            try tx.genericInsertOperation(op)
        }
        try recordOperationIdHighWater(op.id, tx, shortcuts)
        return op.id
    }

    /// The id the next appended operation gets: one more than both the largest id in the operations
    /// table and the high-water mark. Must run inside the appending transaction; `shortcuts` is `tx`'s
    /// (``ShortcutCasts/shortcuts(_:)``, cast once by the caller for all its steps).
    func nextOperationId(_ tx: any LocalStoreTransaction, _ shortcuts: (any SystemTableShortcuts)?) throws -> Int64 {
        let ops = tx.systemTableNames.operations
        let last: Int64?
        if let shortcuts {
            last = try shortcuts.largestOperationId()
        } else {
            last = try tx.genericLargestOperationId()
        }
        let base = max(last ?? 0, try tx.operationIdHighWaterMark(shortcuts: shortcuts))
        guard base < Int64.max else {
            throw LocalStoreError(
                .full, "the operation ids of \(ops) are exhausted: id \(base) is in use or was given out, no larger id exists",
                table: ops, column: "id")
        }
        return base + 1
    }

    /// Records `id` as the highest operation id given out. Must run inside the appending transaction;
    /// `shortcuts` as for ``nextOperationId(_:_:)``.
    func recordOperationIdHighWater(_ id: Int64, _ tx: any LocalStoreTransaction, _ shortcuts: (any SystemTableShortcuts)?) throws {
        let entry = TableConfigEntry.operationIdHighWater(String(id))
        if let shortcuts {
            try shortcuts.storeConfigEntry(entry)
        } else {
            try tx.genericStoreConfigEntry(entry)
        }
    }
}
