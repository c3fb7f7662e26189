/// An item checked against its table's schema, ready for a backend to write with merge semantics.
///
/// Every backend prepares items with ``TableSchema/prepare(_:options:)`` before writing anything, so
/// invalid input is rejected identically everywhere and before any byte is written.
public struct PreparedItem: Sendable, Hashable {
    /// One column to set.
    public struct Assignment: Sendable, Hashable {
        /// The column position in the schema.
        public let column: Int
        /// The value, already converted to the column's type (`int` → `double` for double columns).
        public let value: Value
    }

    /// The item's id, in the spelling of this write.
    public let id: Value
    /// The columns the item sets (the id included), in schema order. Columns not listed keep their
    /// stored values; a new row gets null for them.
    public let assignments: [Assignment]

    /// A full row for a new record: null everywhere but the assigned columns.
    public func newRow(columnCount: Int) -> [Value] {
        var row = [Value](repeating: .null, count: columnCount)
        for a in assignments { row[a.column] = a.value }
        return row
    }

    /// Applies the assignments to an existing row (merge semantics).
    public func merge(into row: inout [Value]) {
        if row.count < assignments.last.map({ $0.column + 1 }) ?? 0 {
            row.append(contentsOf: repeatElement(.null, count: (assignments.last?.column ?? 0) + 1 - row.count))
        }
        for a in assignments { row[a.column] = a.value }
    }
}

extension TableSchema {
    /// The largest string, binary or json value a store accepts, in bytes: 256 MiB (268,435,456).
    ///
    /// Every backend refuses a larger value in ``prepare(_:options:)`` with `invalidValue`, before it
    /// writes anything, so a store that one backend holds can be copied to any other. The bound comes
    /// from SQLite (and SQLCipher): `SQLITE_LIMIT_LENGTH` is 1,000,000,000 bytes on both builds and caps
    /// a whole row record, not only one value; see ``maximumItemBytes``.
    public static let maximumValueBytes = 268_435_456

    /// The largest item a store accepts, in bytes: 512 MiB (536,870,912), the sum of
    /// ``byteCount(of:)`` over the item's values.
    ///
    /// SQLite's record of a row is its values plus a header of at most 9 bytes per column and 9 for
    /// its own size, under 10 KB for the 1000 columns a table may have, so an item of this size makes
    /// a record far below SQLite's 1,000,000,000-byte limit (as does any index entry, which holds a
    /// subset of the values plus the rowid).
    public static let maximumItemBytes = 536_870_912

    /// The size of `value` counted against ``maximumValueBytes`` and ``maximumItemBytes``: the UTF-8
    /// bytes of a string, the bytes of a binary, the UTF-8 bytes of a json value's ``JSON/jsonText``
    /// (the form the SQL backends store), 0 for null and 8 for any other value.
    public static func byteCount(of value: Value) -> Int {
        switch value {
        case .null: return 0
        case .string(let s): return s.utf8.count
        case .binary(let b): return b.count
        case .json(let j): return j.textByteCount
        default: return 8
        }
    }

    /// Checks `item` against this schema and converts it for writing.
    ///
    /// - Throws: `missingId` when the id is absent or null; `typeMismatch` when a value does not fit
    ///   its column; `unknownColumn` for a key that is not a column (unless
    ///   ``UpsertOptions/ignoreUnknownColumns``); `invalidValue` for a non-finite double, a key given
    ///   twice in different case, a value larger than ``maximumValueBytes`` or an item larger than
    ///   ``maximumItemBytes`` (or the lower limits of `options`).
    public func prepare(_ item: Item, options: UpsertOptions = .strict) throws -> PreparedItem {
        let valueLimit = min(max(0, options.maximumValueBytes), Self.maximumValueBytes)
        let itemLimit = Self.itemLimit(options)
        var itemBytes = 0
        var assignments: [PreparedItem.Assignment] = []
        assignments.reserveCapacity(item.count)
        var id: Value?
        for (key, value) in item.values {
            guard let n = index(ofColumn: key) else {
                if options.ignoreUnknownColumns { continue }
                throw LocalStoreError.unknownColumn(key, table: name)
            }
            let column = columns[n]
            var stored = value
            switch (column.type, value) {
            case (.double, .int(let i)): stored = .double(Double(i))
            case (_, .double(let d)) where !d.isFinite:
                throw LocalStoreError(
                    .invalidValue, "column '\(column.name)' of table '\(name)' cannot store the non-finite number \(d)",
                    table: name, column: column.name)
            case (_, .date(let d)) where !d.timeIntervalSinceReferenceDate.isFinite:
                // SQLite binds a NaN as NULL: no backend stores a date without a finite time.
                throw LocalStoreError(
                    .invalidValue,
                    "column '\(column.name)' of table '\(name)' cannot store a date \(d.timeIntervalSinceReferenceDate) seconds from 2001-01-01 (not a finite time)",
                    table: name, column: column.name)
            case (.json, .json(let j)) where j.isNested(deeperThan: JSON.maximumDepth):
                throw LocalStoreError(
                    .invalidValue,
                    "column '\(column.name)' of table '\(name)' cannot store json nested deeper than \(JSON.maximumDepth) levels",
                    table: name, column: column.name)
            case (.json, .json(let j)) where j.containsNonFiniteNumber:
                throw LocalStoreError(
                    .invalidValue, "column '\(column.name)' of table '\(name)' cannot store json with a non-finite number",
                    table: name, column: column.name)
            default:
                guard column.type.accepts(value) else {
                    throw LocalStoreError(
                        .typeMismatch,
                        "column '\(column.name)' of table '\(name)' has type \(column.type); got \(value.kindName) \(value)",
                        table: name, column: column.name)
                }
            }
            let bytes = Self.byteCount(of: stored)
            guard bytes <= valueLimit else {
                throw LocalStoreError(
                    .invalidValue,
                    "column '\(column.name)' of table '\(name)' cannot store a \(stored.kindName) of \(bytes) bytes (at most \(valueLimit))",
                    table: name, column: column.name)
            }
            itemBytes += bytes
            if n == idIndex {
                guard !value.isNull else {
                    throw LocalStoreError(.missingId, "an item for table '\(name)' has a null id", table: name, column: "id")
                }
                if case .string(let s) = stored, s.isEmpty {
                    throw LocalStoreError(.invalidValue, "the id of an item for table '\(name)' must not be empty", table: name, column: "id")
                }
                id = stored
            }
            assignments.append(PreparedItem.Assignment(column: n, value: stored))
        }
        guard let id else {
            throw LocalStoreError(.missingId, "an item for table '\(name)' has no id: \(item)", table: name, column: "id")
        }
        assignments.sort { $0.column < $1.column }
        for k in assignments.indices.dropFirst() where assignments[k].column == assignments[k - 1].column {
            let c = columns[assignments[k].column].name
            throw LocalStoreError(
                .invalidValue, "an item for table '\(name)' sets column '\(c)' twice (keys differing only in case)",
                table: name, column: c)
        }
        if itemBytes > itemLimit {
            // Name the column where the sum passes the limit in schema order, the same on every run.
            var sum = 0
            for a in assignments {
                sum += Self.byteCount(of: a.value)
                guard sum <= itemLimit else {
                    let c = columns[a.column].name
                    throw LocalStoreError(
                        .invalidValue,
                        "an item for table '\(name)' takes \(itemBytes) bytes, more than the \(itemLimit) an item may take (passed at column '\(c)')",
                        table: name, column: c)
                }
            }
        }
        return PreparedItem(id: id, assignments: assignments)
    }

    /// The item limit a write with `options` enforces: ``UpsertOptions/maximumItemBytes``, at most
    /// ``maximumItemBytes``.
    public static func itemLimit(_ options: UpsertOptions) -> Int {
        min(max(0, options.maximumItemBytes), maximumItemBytes)
    }

    /// Checks the row that merging `item` into a stored row leaves against the item limit of `options`.
    ///
    /// ``prepare(_:options:)`` checks the values an item sets; an item that leaves some columns unset keeps
    /// their stored values, so the updated row can pass the limit even though the item alone does not.
    /// Every backend calls this before it writes such an update (a new row's unset columns are null), so
    /// the limit holds for stored rows, identically everywhere.
    ///
    /// - Parameters:
    ///   - item: the prepared item.
    ///   - options: the write's options.
    ///   - storedByteCount: the ``byteCount(of:)`` of the stored value of a column `item` does not set
    ///     (called with the column's position, in schema order, only for those columns).
    /// - Throws: `invalidValue` naming the table and the column where the sum passes the limit in schema
    ///   order; whatever `storedByteCount` throws.
    public func checkMergedSize(
        _ item: PreparedItem, options: UpsertOptions, storedByteCount: (Int) throws -> Int
    ) throws {
        let assignments = item.assignments
        guard assignments.count < columns.count else { return }
        let limit = Self.itemLimit(options)
        var sum = 0
        var next = 0
        var passedAt: Int?
        for c in columns.indices {
            if next < assignments.count, assignments[next].column == c {
                sum += Self.byteCount(of: assignments[next].value)
                next += 1
            } else {
                sum += try storedByteCount(c)
            }
            if sum > limit, passedAt == nil { passedAt = c }
        }
        if let passedAt {
            let c = columns[passedAt].name
            throw LocalStoreError(
                .invalidValue,
                "an update of item \(item.id) of table '\(name)' would leave a row of \(sum) bytes (the item's values and the stored values of the columns it does not set), more than the \(limit) an item may take (passed at column '\(c)')",
                table: name, column: c)
        }
    }

    /// Checks the rows a batch of prepared items leaves, in order, with ``checkMergedSize(_:options:storedByteCount:)``:
    /// an item whose id an earlier item of the batch wrote merges into that row, any other into the stored
    /// row (`storedByteCounts` of its id: the ``byteCount(of:)`` of each column of the stored row in schema
    /// order, `nil` when there is none). Does nothing when every item sets every column.
    ///
    /// Backends call it before writing anything of the batch, so a refused batch changes nothing.
    public func checkMergedSizes(
        _ items: [PreparedItem], options: UpsertOptions, storedByteCounts: (Value) throws -> [Int]?
    ) throws {
        guard items.contains(where: { $0.assignments.count < columns.count }) else { return }
        var written: [Value: [Int]] = [:]
        for item in items {
            let key: Value
            if case .string(let s) = item.id { key = .string(Collation.noCaseKey(s)) } else { key = item.id }
            var row: [Int]
            if item.assignments.count == columns.count {
                row = [Int](repeating: 0, count: columns.count)
            } else {
                row = try written[key] ?? storedByteCounts(item.id) ?? [Int](repeating: 0, count: columns.count)
                let stored = row
                try checkMergedSize(item, options: options) { $0 < stored.count ? stored[$0] : 0 }
            }
            if row.count < columns.count { row.append(contentsOf: repeatElement(0, count: columns.count - row.count)) }
            for a in item.assignments { row[a.column] = Self.byteCount(of: a.value) }
            written[key] = row
        }
    }

    /// Whether `id` is plainly an id of a column of type `idType` (a string for a string id, an int for an
    /// integer one), so ``checkId(_:)`` has nothing to refuse. Backends that keep the id type of a table
    /// ask this before calling ``checkId(_:)`` (which they need only otherwise, for its error).
    @inlinable package static func isPlainId(_ id: Value, ofType idType: ColumnType) -> Bool {
        switch (idType, id) {
        case (.string, .string), (.integer, .int): return true
        default: return false
        }
    }

    /// Checks an id given to a read or delete call: it must have the id column's type.
    public func checkId(_ id: Value) throws {
        guard !id.isNull, columns[idIndex].type.accepts(id), !(idType == .double) else {
            throw LocalStoreError(
                .typeMismatch, "ids of table '\(name)' have type \(idType); got \(id.kindName) \(id)", table: name,
                column: "id")
        }
    }
}
