import LocalStore

// LMDB adopts the core's system-table shortcuts (`SystemTableReadShortcuts`, `SystemTableShortcuts`).
// Where LMDB has nothing faster than the generic call, the shortcut runs exactly that call: adopting
// still spares every typed convenience (append, remove, the high-water mark, delta tokens) a failed
// dynamic cast to these protocols, about 3,300 instructions each (callgrind; a successful one costs about
// 1,300). The delta-token pair lookup is the one with a faster path: it tests the config table's records
// in place instead of resolving, planning and filtering a `Query` with a case-insensitive test.

extension LMDBStore: SystemTableReadShortcuts {
    package func firstOperation(after id: Int64) throws -> TableOperation? { try genericFirstOperation(after: id) }
    package func configRow(id: String) throws -> ConfigRow? { try genericConfigRow(id: id) }
}

extension LMDBTransaction: SystemTableShortcuts {
    func firstOperation(after id: Int64) throws -> TableOperation? { try genericFirstOperation(after: id) }
    func configRow(id: String) throws -> ConfigRow? { try genericConfigRow(id: id) }
    func largestOperationId() throws -> Int64? { try genericLargestOperationId() }
    func insertOperation(_ operation: TableOperation) throws { try genericInsertOperation(operation) }
    func storeConfigEntry(_ entry: TableConfigEntry) throws { try genericStoreConfigEntry(entry) }
    func removeOperationAndErrors(id: Int64) throws { try genericRemoveOperationAndErrors(id: id) }

    /// The ids of the rows whose `table` equals `table` ignoring ASCII case, whose `keyType` is 0 and whose
    /// `key` is `queryId`, in id order: what the generic `Query` returns, tested as its record filter tests
    /// them (the bytes of the string columns, NOCASE for `table`; a null or another type matching nothing; a
    /// damaged record `corrupt`), over the config table's records read in place: no query resolved or
    /// planned, no row decoded but the matches' ids.
    func deltaTokenRowIds(table: String, queryId: String) throws -> [Value] {
        let context = try checkedContext()
        let config = systemTableNames.config
        guard let t = context.catalog.table(config) else { throw LocalStoreError.unknownTable(config) }
        let schema = t.schema
        guard let tableColumn = schema.index(ofColumn: "table"), let keyColumn = schema.index(ofColumn: "key"),
            let keyTypeColumn = schema.index(ofColumn: "keyType"), schema.columns[tableColumn].type == .string,
            schema.columns[keyColumn].type == .string, schema.columns[keyTypeColumn].type == .integer
        else {
            // A config table of another shape: the generic query answers (or reports it).
            return try genericDeltaTokenRowIds(table: table, queryId: queryId)
        }
        let idIndex = schema.idIndex
        let fields = RecordFields(schema: schema, through: max(tableColumn, keyColumn, keyTypeColumn, idIndex))
        let tableBytes = Array(table.utf8)
        let keyBytes = Array(queryId.utf8)
        var ids: [Value] = []
        try context.walkRaw(try context.handle(t.database), lower: nil, upper: nil, descending: false) { _, record in
            // In the generic predicate's order (table, keyType, key), so that a damaged value is reached
            // (and reported) exactly when the record filter would reach it.
            try fields.locate(record)
            guard let name = try fields.stringBytes(tableColumn),
                tableBytes.withUnsafeBytes({ RawBytes.compareNoCase(name, $0) }) == 0
            else { return true }
            if let keyType = fields.plainInt(keyTypeColumn) {
                guard keyType == TableConfigEntry.deltaTokenKeyType else { return true }
            } else {
                let v = try fields.value(keyTypeColumn)
                guard !v.isNull, Collation.compare(v, .int(TableConfigEntry.deltaTokenKeyType)) == 0 else { return true }
            }
            guard let key = try fields.stringBytes(keyColumn), key.elementsEqual(keyBytes) else { return true }
            ids.append(try fields.value(idIndex))
            return true
        }
        return ids
    }
}
