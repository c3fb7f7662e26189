import Foundation

// Applying a pulled page and purging a table, with the SDKs' rules, each in one transaction.
// docs/semantics.md, "Pull and purge".

/// What ``LocalStoreAccess/applyPulledPage(_:into:queryId:)`` did.
public struct PulledPageResult: Sendable, Hashable {
    /// Items upserted into the table.
    public var upserted: Int
    /// Soft-deleted items (`deleted == true`) removed from the table.
    public var deleted: Int
    /// Ids of items left alone because the item has a queued operation (a local change wins).
    public var skipped: [String]
    /// The largest `updatedAt` of the page (all items, skipped ones included), if any.
    public var maxUpdatedAt: Date?
    /// The delta token after the page, when a query id was given: advanced to ``maxUpdatedAt`` when
    /// that is later than the stored token.
    public var deltaToken: Date?

    /// Creates a result.
    public init(upserted: Int, deleted: Int, skipped: [String], maxUpdatedAt: Date?, deltaToken: Date?) {
        self.upserted = upserted
        self.deleted = deleted
        self.skipped = skipped
        self.maxUpdatedAt = maxUpdatedAt
        self.deltaToken = deltaToken
    }
}

extension LocalStoreAccess {
    /// Applies one page of a pull to `table` in one transaction, as the SDKs do:
    ///
    /// - an item with a queued operation for its id (case-insensitive) is skipped;
    /// - an item whose `deleted` is `true` is deleted locally (null or absent means false);
    /// - every other item is upserted with unknown columns ignored; values in the SDK's JSON form are
    ///   converted to the column's type (a timestamp string into a date column, base64 into binary);
    /// - with `queryId`, the delta token of `(table, queryId)` advances to the page's largest
    ///   `updatedAt` when that is later than the stored token.
    ///
    /// An item without a string id, a `deleted` that is not a boolean, or an `updatedAt` that is not a
    /// date is an error naming the item; nothing of the page is written.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func applyPulledPage(_ items: [Item], into table: String, queryId: String? = nil) throws -> PulledPageResult {
        if let queryId { try DeltaTokenKey.validate(table: table, queryId: queryId) }
        return try compositeWrite { tx in
            let schema = try tx.queueTableSchema(table)
            // Each item's operations are looked up through (table, itemId), all of the page's ids in one
            // call where the backend serves it: a page costs the same with ten or a million queued
            // operations.
            // An id the page repeats (the services never do) is looked up again: no per-item dictionary.
            var checked: [(id: String, item: Item, isDeleted: Bool)] = []
            checked.reserveCapacity(items.count)
            var ids: [String] = []
            ids.reserveCapacity(items.count)
            var maxDate: Date? = nil
            for (n, raw) in items.enumerated() {
                guard case .string(let id)? = raw.id, !id.isEmpty else {
                    throw LocalStoreError(
                        .missingId, "pulled item \(n) of \(schema.name) has no string id (\(raw.id.map { "\($0)" } ?? "none"))", table: schema.name,
                        column: "id")
                }
                let item = Self.coerced(raw, schema: schema)
                if let updated = item.value(forColumn: "updatedAt"), !updated.isNull {
                    guard let date = updated.dateValue else {
                        throw LocalStoreError(
                            .typeMismatch, "pulled item '\(id)' of \(schema.name) has updatedAt \(updated), not a date", table: schema.name,
                            column: "updatedAt")
                    }
                    maxDate = max(maxDate ?? date, date)
                }
                var isDeleted = false
                if let deleted = item.value(forColumn: "deleted"), !deleted.isNull {
                    guard let flag = deleted.boolValue else {
                        throw LocalStoreError(
                            .typeMismatch, "pulled item '\(id)' of \(schema.name) has deleted \(deleted), not a boolean", table: schema.name,
                            column: "deleted")
                    }
                    isDeleted = flag
                }
                checked.append((id, item, isDeleted))
                ids.append(id)
            }
            let pending = try tx.pendingFlags(table: schema.name, itemIds: ids)
            var upserts: [Item] = []
            var deletes: [Value] = []
            var skipped: [String] = []
            for (c, isPending) in zip(checked, pending) {
                if isPending {
                    skipped.append(c.id)
                } else if c.isDeleted {
                    deletes.append(.string(c.id))
                } else {
                    upserts.append(c.item)
                }
            }
            try tx.delete(ids: deletes, from: schema.name)
            try tx.upsert(upserts, into: schema.name, options: .ignoringUnknownColumns)
            var token: Date? = nil
            if let queryId {
                token = try tx.deltaToken(table: schema.name, queryId: queryId)
                if let maxDate, token.map({ $0 < maxDate }) ?? true {
                    try tx.setDeltaToken(maxDate, table: schema.name, queryId: queryId)
                    token = try tx.deltaToken(table: schema.name, queryId: queryId)
                }
            }
            return PulledPageResult(upserted: upserts.count, deleted: deletes.count, skipped: skipped, maxUpdatedAt: maxDate, deltaToken: token)
        }
    }

    /// `item` with values in the SDK's JSON form converted to the column types of `schema`.
    static func coerced(_ item: Item, schema: TableSchema) -> Item {
        var out = item
        for (key, value) in item {
            // Only strings and integers are ever converted: other values skip the column lookup.
            switch value {
            case .string, .int: break
            default: continue
            }
            guard let type = schema.column(named: key)?.type else { continue }
            switch (value, type) {
            case (.string(let s), .date): if let d = DeltaTokenFormat.date(from: s) { out.values[key] = .date(d) }
            case (.string(let s), .binary): if let b = Data(base64Encoded: s) { out.values[key] = .binary(Array(b)) }
            case (.int(let i), .double): out.values[key] = .double(Double(i))
            default: break
            }
        }
        return out
    }

    /// Deletes the rows of `table` matching `predicate` (all rows when `nil`) and returns how many —
    /// refused with `constraint` while the table has queued operations (the SDKs' purge). With
    /// `queryId`, that query's delta token is removed too (as .NET's `PurgeAsync(queryId, …)`), so the
    /// next pull of the query fetches its items again; other tokens are not touched. One transaction.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func purge(_ table: String, where predicate: QueryPredicate? = nil, queryId: String? = nil) throws -> Int {
        if let queryId { try DeltaTokenKey.validate(table: table, queryId: queryId) }
        return try compositeWrite { tx in
            let schema = try tx.queueTableSchema(table)
            let pending = try tx.pendingOperations(table: schema.name).count
            guard pending == 0 else {
                throw LocalStoreError(
                    .constraint, "\(schema.name) cannot be purged because it has \(pending) pending operation(s)", table: schema.name)
            }
            let n = try tx.count(schema.name, where: predicate)
            try tx.delete(matching: Query(schema.name, where: predicate))
            if let queryId { try tx.removeDeltaToken(table: schema.name, queryId: queryId) }
            return n
        }
    }

    /// Force purge (the SDKs' `forcePurge`): in one transaction removes every queued operation of
    /// `table` with its errors, every delta token of the table, and every row. Refused with
    /// `constraint`, changing nothing, while a push has one of the table's operations in flight.
    /// Returns the number of rows deleted.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func forcePurge(_ table: String) throws -> Int {
        try compositeWrite { tx in
            let schema = try tx.queueTableSchema(table)
            let ops = try tx.pendingOperations(table: schema.name)
            for record in ops {
                let op = try QueuedOperation(record)
                if op.isInFlight {
                    throw LocalStoreError(
                        .constraint,
                        "\(schema.name) cannot be purged: operation #\(op.id) (\(op.itemId)) was sent to the server and has not been completed",
                        table: schema.name)
                }
            }
            if !ops.isEmpty {
                let ids = ops.map { Value.int($0.id) }
                try tx.delete(ids: ids, from: tx.systemTableNames.operations)
                try tx.delete(matching: Query(tx.systemTableNames.errors, where: Field("operationId").isIn(ids)))
            }
            try tx.removeDeltaTokens(table: schema.name)
            let n = try tx.count(schema.name)
            try tx.delete(matching: Query(schema.name))
            return n
        }
    }
}
