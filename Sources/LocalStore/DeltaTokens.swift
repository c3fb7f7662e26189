import Foundation

// Delta tokens: validated (table, query id) pairs, row ids that cannot collide, one row per pair even
// when other code wrote it, damaged values as typed errors. docs/semantics.md, "Delta tokens".

/// The rules for the `(table, queryId)` pair of a delta token, and the config row id it is stored under.
public enum DeltaTokenKey {
    /// The longest query id, in UTF-8 bytes (the .NET SDK's limit).
    public static let maximumQueryIdLength = 255

    /// Checks the pair: the table must be a valid table name (`^[A-Za-z_][A-Za-z0-9_]{0,127}$`,
    /// `invalidIdentifier`); the query id must be 1...255 UTF-8 bytes without control characters
    /// (U+0000–U+001F, U+007F) (`invalidValue`). Any other character, `|` included, is allowed.
    public static func validate(table: String, queryId: String) throws {
        guard Identifier.isValid(table) else {
            throw LocalStoreError(
                .invalidIdentifier, "'\(table)' is not a valid table name for a delta token (query id '\(queryId)')", table: table)
        }
        let bytes = queryId.utf8
        guard !bytes.isEmpty, bytes.count <= maximumQueryIdLength, !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw LocalStoreError(
                .invalidValue,
                "the query id \(Value.string(queryId)) of a delta token of \(table) must be 1 to \(maximumQueryIdLength) UTF-8 bytes without control characters",
                table: table, column: "key")
        }
    }

    /// The config row id of the pair's token: `deltaToken|<table, lower-cased>|<query id's UTF-8 bytes
    /// in upper-case hex>`. Table names match case-insensitively and contain no `|`; the hex form keeps
    /// query ids that differ only in case (ids compare case-insensitively) or contain `|` apart.
    public static func rowId(table: String, queryId: String) -> String {
        var table = table
        var queryId = queryId
        let prefix: StaticString = "deltaToken|"
        let capacity = prefix.utf8CodeUnitCount + table.utf8.count + 1 + 2 * queryId.utf8.count
        // Written in place: the table's bytes with A–Z lowered (as `ASCII.lowercased`), the query id's
        // bytes as hex digits.
        return table.withUTF8 { tableBytes in
            queryId.withUTF8 { queryBytes in
                String(unsafeUninitializedCapacity: capacity) { out in
                    var i = 0
                    for b in UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount) {
                        out[i] = b
                        i += 1
                    }
                    for b in tableBytes {
                        out[i] = b >= 0x41 && b <= 0x5A ? b | 0x20 : b
                        i += 1
                    }
                    out[i] = UInt8(ascii: "|")
                    i += 1
                    for b in queryBytes {
                        out[i] = hexDigit(b >> 4)
                        out[i + 1] = hexDigit(b & 0xF)
                        i += 2
                    }
                    return i
                }
            }
        }
    }

    @inline(__always) private static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 48 + v : 55 + v }

    /// Checks the date of a token: its stored form holds the years 0000 to 9999
    /// (``DeltaTokenFormat/isStorable(_:)``); any other date is `invalidValue`, naming the pair.
    static func validate(_ date: Date, table: String, queryId: String) throws {
        guard DeltaTokenFormat.isStorable(date) else {
            throw LocalStoreError(
                .invalidValue,
                "the delta token of table '\(table)', query id \(Value.string(queryId)) must be a date from 0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z; got \(date.timeIntervalSince1970) seconds since 1970",
                table: table, column: "value")
        }
    }
}

extension LocalStoreAccess {
    /// The predicate of every token row of `table` (case-insensitive), optionally of one query id.
    func deltaTokenPredicate(table: String, queryId: String?) -> QueryPredicate {
        var p: QueryPredicate = Field("table").equalsIgnoringCase(.literal(.string(table)))
            && Field("keyType") == .literal(.int(TableConfigEntry.deltaTokenKeyType))
        if let queryId { p = p && Field("key") == .literal(.string(queryId)) }
        return p
    }

    /// The date of a token row; a value that is not a timestamp is `corrupt`, naming table and query id.
    func deltaTokenDate(_ row: Item, table: String, queryId: String) throws -> Date {
        try deltaTokenDate(row["value"] ?? .null, rowId: row["id"]?.stringValue ?? "?", table: table, queryId: queryId)
    }

    /// ``deltaTokenDate(_:table:queryId:)`` for a value read by ``ConfigValueReading`` from the row `rowId`
    /// (the id it was looked up by).
    func deltaTokenDate(_ value: Value, rowId: String, table: String, queryId: String) throws -> Date {
        guard let text = value.stringValue, let date = DeltaTokenFormat.date(from: text) else {
            let config = systemTableNames.config
            throw LocalStoreError(
                .corrupt,
                "the delta token of table '\(table)', query id '\(queryId)' in \(config) (row '\(rowId)') is \(value), not a yyyy-MM-ddTHH:mm:ss.SSSZ timestamp",
                table: config, column: "value")
        }
        return date
    }

    /// The delta token of `(table, queryId)`, or `nil` when there is none. Validates the pair (see
    /// ``DeltaTokenKey/validate(table:queryId:)``); reads the row by primary key, and only when it is
    /// absent looks for a row another writer stored under another id. A stored value that is not a
    /// timestamp is a `corrupt` error naming the table and query id.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func deltaToken(table: String, queryId: String) throws -> Date? {
        try DeltaTokenKey.validate(table: table, queryId: queryId)
        let config = systemTableNames.config
        let rowId = DeltaTokenKey.rowId(table: table, queryId: queryId)
        if let value = try ConfigValueReading.value(self, id: rowId) {
            return try deltaTokenDate(value, rowId: rowId, table: table, queryId: queryId)
        }
        guard let row = try read(Query(config, where: deltaTokenPredicate(table: table, queryId: queryId), top: 1)).items.first else {
            return nil
        }
        return try deltaTokenDate(row, table: table, queryId: queryId)
    }

    /// Stores the delta token of `(table, queryId)` (millisecond precision) under its row id
    /// (``DeltaTokenKey/rowId(table:queryId:)``), removing any other row of the same pair (written by
    /// other code or an older version), in one transaction: one row per pair. A date outside the years
    /// 0000 to 9999, which the stored form cannot hold, is `invalidValue` (nothing is written).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func setDeltaToken(_ date: Date, table: String, queryId: String) throws {
        try DeltaTokenKey.validate(table: table, queryId: queryId)
        try DeltaTokenKey.validate(date, table: table, queryId: queryId)
        let id = DeltaTokenKey.rowId(table: table, queryId: queryId)
        let entry = TableConfigEntry(
            id: id, table: table, key: queryId, keyType: TableConfigEntry.deltaTokenKeyType, value: DeltaTokenFormat.string(from: date))
        // The usual case on SQL stores: the pair's row, alone, already holds the entry — one statement that
        // commits by itself.
        if let store = ShortcutCasts.storeShortcuts(self), try store.updateSoleDeltaTokenRowAlone(entry) { return }
        try compositeWrite { tx in
            let config = tx.systemTableNames.config
            let shortcuts = ShortcutCasts.shortcuts(tx)
            // The usual case: the pair's row, alone, already holds the entry (one statement on SQL stores).
            if let shortcuts, try shortcuts.updateSoleDeltaTokenRow(entry) { return }
            let pairIds = try shortcuts?.deltaTokenRowIds(table: table, queryId: queryId)
                ?? tx.genericDeltaTokenRowIds(table: table, queryId: queryId)
            let others = pairIds.filter { other in other.stringValue.map { ASCII.compareFolded($0, id) != 0 } ?? true }
            if !others.isEmpty { try tx.delete(ids: others, from: config) }
            if let shortcuts {
                try shortcuts.storeConfigEntry(entry)
            } else {
                try tx.genericStoreConfigEntry(entry)
            }
        }
    }

    /// Removes the delta token of `(table, queryId)`, under whatever id it is stored.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func removeDeltaToken(table: String, queryId: String) throws {
        try DeltaTokenKey.validate(table: table, queryId: queryId)
        try compositeWrite { tx in
            let config = tx.systemTableNames.config
            try tx.delete(ids: [.string(DeltaTokenKey.rowId(table: table, queryId: queryId))], from: config)
            try tx.delete(matching: Query(config, where: tx.deltaTokenPredicate(table: table, queryId: queryId)))
        }
    }

    /// Every delta token of `table` (matched case-insensitively), by query id. A damaged value is a
    /// `corrupt` error naming the table and query id.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func deltaTokens(table: String) throws -> [String: Date] {
        guard Identifier.isValid(table) else {
            throw LocalStoreError(.invalidIdentifier, "'\(table)' is not a valid table name for delta tokens", table: table)
        }
        var out: [String: Date] = [:]
        for row in try read(Query(configTableName, where: deltaTokenPredicate(table: table, queryId: nil))).items {
            let queryId = row["key"]?.stringValue ?? ""
            let date = try deltaTokenDate(row, table: table, queryId: queryId)
            out[queryId] = min(out[queryId] ?? date, date)
        }
        return out
    }

    /// Removes every delta token of `table` (as a force purge does); returns how many rows went.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func removeDeltaTokens(table: String) throws -> Int {
        guard Identifier.isValid(table) else {
            throw LocalStoreError(.invalidIdentifier, "'\(table)' is not a valid table name for delta tokens", table: table)
        }
        return try compositeWrite { tx in
            let q = Query(tx.systemTableNames.config, where: tx.deltaTokenPredicate(table: table, queryId: nil))
            let n = try tx.count(q.table, where: q.predicate)
            try tx.delete(matching: q)
            return n
        }
    }

    /// Moves every delta token row whose pair is valid but whose id is not its row id
    /// (``DeltaTokenKey/rowId(table:queryId:)``: rows of older versions or other code) to its row id,
    /// in one transaction. When a pair has several rows, one stays: the row already at the row id, else
    /// the first found; its value becomes the earliest of the rows' timestamps when all parse (pulling
    /// again is safe, skipping changes is not). Rows with an invalid pair are left as they are. Returns
    /// the number of rows moved or merged.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func migrateDeltaTokenRows() throws -> Int {
        try compositeWrite { tx in
            let config = tx.systemTableNames.config
            let rows = try tx.read(Query(config, where: Field("keyType") == .literal(.int(TableConfigEntry.deltaTokenKeyType)))).items
            var byId: [String: TableConfigEntry] = [:]
            for row in rows {
                guard let e = TableConfigEntry(row) else { continue }
                byId[ASCII.lowercased(e.id)] = e
            }
            var changed = 0
            for row in rows {
                guard let e = TableConfigEntry(row), Identifier.isValid(e.table),
                    (try? DeltaTokenKey.validate(table: e.table, queryId: e.key)) != nil
                else { continue }
                let target = DeltaTokenKey.rowId(table: e.table, queryId: e.key)
                guard ASCII.lowercased(e.id) != ASCII.lowercased(target) else { continue }
                var kept = byId[ASCII.lowercased(target)] ?? TableConfigEntry(id: target, table: e.table, key: e.key, keyType: e.keyType, value: e.value)
                if let a = DeltaTokenFormat.date(from: kept.value), let b = DeltaTokenFormat.date(from: e.value), b < a { kept.value = e.value }
                try tx.delete(ids: [.string(e.id)], from: config)
                try tx.upsert([kept.item], into: config, options: .strict)
                byId[ASCII.lowercased(target)] = kept
                byId[ASCII.lowercased(e.id)] = nil
                changed += 1
            }
            return changed
        }
    }
}
