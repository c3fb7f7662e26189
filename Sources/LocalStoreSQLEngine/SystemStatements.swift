import LocalStore

/// The statements of the system-table shortcuts (``SystemTableShortcuts``), prepared once per connection
/// and kept with it: no `Query` resolved or compiled, no SQL text built or hashed per call.
///
/// A set belongs to one connection (``Connection/systemStatements``) and is finalized when the connection
/// closes. It is made for the catalog's `TableInfo` objects of the three system tables and checked against
/// them whenever the catalog's generation moved: a reload (the file's `PRAGMA schema_version` changed) or a
/// redefinition that gives a system table another definition replaces the set; the same stored definitions
/// give the same (memoized) objects and keep it. SQLite itself re-prepares a kept `sqlite3_prepare_v2`
/// statement after any schema change.
final class SystemStatements {
    enum Kind: Int, CaseIterable {
        case firstOperation, largestOperationId, insertOperation, deleteOperation, deleteErrors
        case configRow, updateConfigValue, deltaTokenRowIds, updateSoleDeltaToken
        case advanceHighWater, insertOperationAtMark, itemOperations, operationById, updateOperationProperties
    }

    let operations: TableInfo
    let errors: TableInfo
    let config: TableInfo
    /// The catalog generation the three tables were last checked in (see ``SQLEngine/tableInfo(_:on:)``).
    var generation: Int
    private let sql: [String]
    /// Written only by the connection's one user at a time (a set belongs to one connection), so no
    /// dynamic exclusivity check per statement use.
    @exclusivity(unchecked) private var handles: [OpaquePointer?]

    /// The set for these tables, or `nil` when a table's columns are not exactly the system schema's (a
    /// damaged or foreign definition: the generic calls then serve it).
    init?(operations: TableInfo, errors: TableInfo, config: TableInfo, names: SystemTableNames, generation: Int) {
        func matches(_ t: TableInfo, _ expected: TableSchema) -> Bool {
            t.schema.columns.count == expected.columns.count
                && zip(t.schema.columns, expected.columns).allSatisfy { $0.name == $1.name && $0.type == $1.type }
                && t.schema.columns[t.schema.idIndex].name == "id"
        }
        guard matches(operations, names.operationsSchema), matches(errors, names.errorsSchema), matches(config, names.configSchema)
        else { return nil }
        self.operations = operations
        self.errors = errors
        self.config = config
        self.generation = generation
        // Columns in the system schemas' order (checked above).
        let op = operations.quotedColumns  // id, table, tableKind, itemId, properties
        let er = errors.quotedColumns  // id, operationId, tableKind, properties
        let cf = config.quotedColumns  // id, table, key, keyType, value
        let ops = operations.quotedName
        sql = Kind.allCases.map { kind in
            switch kind {
            case .firstOperation:
                return "SELECT \(op.joined(separator: ", ")) FROM \(ops) WHERE \(op[0]) > ?1 ORDER BY \(op[0]) LIMIT 1"
            case .largestOperationId:
                return "SELECT \(op[0]) FROM \(ops) ORDER BY \(op[0]) DESC LIMIT 1"
            case .updateOperationProperties:
                // Only `properties`, of the row that already holds the operation's table, kind and item id
                // (compared byte for byte): its (table, itemId) index entry is not rewritten.
                return """
                    UPDATE OR FAIL \(ops) SET \(op[4]) = ?2 WHERE \(op[0]) = ?1 AND \(op[1]) COLLATE BINARY = ?3 \
                    AND \(op[2]) = ?4 AND \(op[3]) COLLATE BINARY = ?5
                    """
            case .operationById:
                return "SELECT \(op.joined(separator: ", ")) FROM \(ops) WHERE \(op[0]) = ?1"
            case .itemOperations:
                // What SQLCompiler makes of `table == t && itemId equalsIgnoringCase i` sorted by id: a search
                // of the `(table, itemId COLLATE NOCASE)` index.
                return """
                    SELECT \(op.joined(separator: ", ")) FROM \(ops) WHERE \(op[1]) = ?1 AND \(op[3]) COLLATE NOCASE = ?2 \
                    ORDER BY \(op[0])
                    """
            case .insertOperation:
                return operations.insertAllSQL
            case .deleteOperation:
                return "DELETE FROM \(ops) WHERE \(op[0]) = ?1"
            case .deleteErrors:
                return "DELETE FROM \(errors.quotedName) WHERE \(er[1]) = ?1"
            case .configRow:
                return "SELECT \(cf[4]) FROM \(config.quotedName) WHERE \(cf[0]) = ?1"
            case .advanceHighWater:
                // The next operation id, written as the new high-water mark: one more than both the mark and
                // the largest id. Only when the mark's row is the entry `storeConfigEntry` writes, as
                // `.updateConfigValue` requires it (its constant columns in the text), and its value the
                // canonical decimal form of a mark below Int64.max (no sign, no leading zero, no other
                // byte: `Int64(text)` reads it as SQLite's CAST does), and the largest id is below
                // Int64.max. Any other row — damaged, exhausted, missing, spelled otherwise — is left to the
                // general path, which answers it (or throws) as before.
                let mark = TableConfigEntry.operationIdHighWater("")
                let largest = "coalesce((SELECT \(op[0]) FROM \(ops) ORDER BY \(op[0]) DESC LIMIT 1), 0)"
                return """
                    UPDATE OR FAIL \(config.quotedName) SET \(cf[4]) = CAST(max(\(largest), CAST(\(cf[4]) AS INTEGER)) + 1 AS TEXT) \
                    WHERE \(cf[0]) = \(SQLNames.literal(mark.id)) AND \(cf[0]) COLLATE BINARY = \(SQLNames.literal(mark.id)) \
                    AND \(cf[1]) COLLATE BINARY = \(SQLNames.literal(mark.table)) AND \(cf[2]) COLLATE BINARY = \(SQLNames.literal(mark.key)) \
                    AND \(cf[3]) = \(mark.keyType) AND typeof(\(cf[4])) = 'text' \
                    AND \(cf[4]) COLLATE BINARY = CAST(CAST(\(cf[4]) AS INTEGER) AS TEXT) \
                    AND CAST(\(cf[4]) AS INTEGER) BETWEEN 0 AND 9223372036854775806 AND \(largest) < 9223372036854775807
                    """
            case .insertOperationAtMark:
                // The operation under the mark `.advanceHighWater` just wrote (parameters: table, table kind,
                // item id, properties). Its id is the connection's last inserted rowid: an integer id column
                // is the table's `INTEGER PRIMARY KEY` (`TableInfo.createSQL`; the columns are checked above).
                let mark = TableConfigEntry.operationIdHighWater("")
                return """
                    INSERT INTO \(ops) (\(op.joined(separator: ", "))) VALUES (CAST((SELECT \(cf[4]) FROM \(config.quotedName) \
                    WHERE \(cf[0]) = \(SQLNames.literal(mark.id))) AS INTEGER), ?1, ?2, ?3, ?4)
                    """
            case .updateConfigValue:
                // Only the value column of the row that already holds the entry's id (same spelling), table,
                // key and key type: SQLite rewrites the table's page only, not the id's and the
                // (table, key, keyType) index entries an update of every column deletes and inserts again.
                return """
                    UPDATE OR FAIL \(config.quotedName) SET \(cf[4]) = ?1 WHERE \(cf[0]) = ?2 AND \(cf[0]) COLLATE BINARY = ?2 \
                    AND \(cf[1]) COLLATE BINARY = ?3 AND \(cf[2]) COLLATE BINARY = ?4 AND \(cf[3]) = ?5
                    """
            case .updateSoleDeltaToken:
                // `.updateConfigValue` when no other row has the pair: the row is found through the pair
                // index — the rowid of the pair's entries when there is exactly one — and must then hold the
                // entry's id, table, key and key type, so it is updated exactly when `.deltaTokenRowIds`
                // would find it alone. One search of the pair index and one of the table by rowid (a search
                // by id, then the table, then the pair index for others before: 2.6 k more of the
                // statement's 28 k instructions). Every table LocalStore makes has a rowid, and the set exists
                // only for exactly the system columns, so no column is named `rowid`.
                return """
                    UPDATE OR FAIL \(config.quotedName) SET \(cf[4]) = ?1 WHERE rowid = (SELECT CASE WHEN count(*) = 1 THEN rowid END \
                    FROM \(config.quotedName) WHERE \(cf[1]) COLLATE NOCASE = ?3 AND \(cf[2]) COLLATE BINARY = ?4 AND \(cf[3]) = ?5) \
                    AND \(cf[0]) = ?2 AND \(cf[0]) COLLATE BINARY = ?2 \
                    AND \(cf[1]) COLLATE BINARY = ?3 AND \(cf[2]) COLLATE BINARY = ?4 AND \(cf[3]) = ?5
                    """
            case .deltaTokenRowIds:
                // What SQLCompiler makes of `table equalsIgnoringCase t && keyType == 0 && key == q`: a search
                // of the config table's pair index, `(table COLLATE NOCASE, key COLLATE BINARY, keyType)`
                // (the `(table, key, keyType)` index compares `table` as bytes). A store whose index could
                // not be added when it was opened scans the table (the same rows).
                return """
                    SELECT \(cf[0]) FROM \(config.quotedName) WHERE (\(cf[1]) COLLATE NOCASE = ?1 AND \(cf[3]) = ?2 \
                    AND \(cf[2]) COLLATE BINARY = ?3)
                    """
            }
        }
        handles = Array(repeating: nil, count: Kind.allCases.count)
    }

    /// Runs `body` with the statement of `kind` on `connection` (prepared on first use).
    func with<R>(_ kind: Kind, on connection: Connection, _ body: (Statement) throws -> R) throws -> R {
        let handle: OpaquePointer
        if let h = handles[kind.rawValue] {
            handle = h
        } else {
            handle = try connection.prepareKept(sql[kind.rawValue])
            handles[kind.rawValue] = handle
        }
        return try connection.withPrepared(handle, sql: sql[kind.rawValue], body)
    }

    /// SQLite's query plan (`EXPLAIN QUERY PLAN` detail lines) of each statement, by kind name.
    func queryPlans(on connection: Connection) throws -> [String: [String]] {
        var plans: [String: [String]] = [:]
        for kind in Kind.allCases { plans["\(kind)"] = try connection.queryPlan(sql[kind.rawValue]) }
        return plans
    }

    /// Finalizes every prepared statement (the connection closes, or the set is replaced).
    func finalize(_ api: SQLiteAPI) {
        for case let h? in handles { _ = api.finalize(h) }
        handles = Array(repeating: nil, count: handles.count)
    }
}

// MARK: - The shortcuts on a session

extension Session {
    /// The connection's system statements for the current catalog; `nil` when the system tables'
    /// definitions are not the expected ones (the callers then run the generic calls).
    func systemStatements() throws -> SystemStatements? {
        let generation = engine.currentCatalogGeneration
        if let s = connection.systemStatements, s.generation == generation { return s }
        let names = engine.systemTableNames
        let operations = try table(names.operations)
        let errors = try table(names.errors)
        let config = try table(names.config)
        if let s = connection.systemStatements, s.operations === operations, s.errors === errors, s.config === config {
            s.generation = generation
            return s
        }
        connection.systemStatements?.finalize(connection.api)
        connection.systemStatements = SystemStatements(
            operations: operations, errors: errors, config: config, names: names, generation: generation)
        return connection.systemStatements
    }

    /// The operation in the current row of `s` (columns id, table, tableKind, itemId, properties), as
    /// `TableOperation.init` reads the whole-row item (values as `Statement.value(_:as:)` reads them).
    static func operation(_ s: Statement) throws -> TableOperation {
        TableOperation(
            id: s.int64(0), table: try s.value(1, as: .string).stringValue ?? "",
            tableKind: Int(try s.value(2, as: .integer).intValue ?? 0), itemId: try s.value(3, as: .string).stringValue ?? "",
            properties: try s.value(4, as: .binary).binaryValue ?? [])
    }

    /// The first operation after `id` (see ``SystemTableReadShortcuts/firstOperation(after:)``).
    func firstOperation(after id: Int64) throws -> TableOperation? {
        guard let system = try systemStatements() else {
            let ops = engine.systemTableNames.operations
            return try read(Query(ops, where: Field("id") > .literal(.int(id)), sort: [SortKey("id")], top: 1))
                .items.first.flatMap(TableOperation.init)
        }
        return try system.with(.firstOperation, on: connection) { s in
            try s.bind(.int(id), at: 1)
            guard try s.step() else { return nil }
            return try Self.operation(s)
        }
    }

    /// The operations of one item (see ``SystemTableReadShortcuts/itemOperations(table:itemId:)``); `nil`
    /// without the system statements.
    func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        guard let system = try systemStatements() else { return nil }
        return try system.with(.itemOperations, on: connection) { s in
            try s.bind(.string(table), at: 1)
            try s.bind(.string(itemId), at: 2)
            var out: [TableOperation] = []
            while try s.step() {
                out.append(try Self.operation(s))
            }
            return out
        }
    }

    /// The operation `id` (see ``SystemTableReadShortcuts/operationRow(id:)``); `nil` without the system
    /// statements.
    func operationRow(id: Int64) throws -> [TableOperation]? {
        guard let system = try systemStatements() else { return nil }
        return try system.with(.operationById, on: connection) { s in
            try s.bind(.int(id), at: 1)
            guard try s.step() else { return [] }
            return [try Self.operation(s)]
        }
    }

    /// The largest operation id (see ``SystemTableShortcuts/largestOperationId()``).
    func largestOperationId() throws -> Int64? {
        guard let system = try systemStatements() else {
            let ops = engine.systemTableNames.operations
            return try read(Query(ops, sort: [SortKey("id", .descending)], top: 1)).items.first?["id"]?.intValue
        }
        return try system.with(.largestOperationId, on: connection) { s in try s.step() ? s.int64(0) : nil }
    }

    /// The value of the config row `id` (see ``SystemTableReadShortcuts/configValue(id:)``).
    func configValue(id: String) throws -> Value? {
        guard let system = try systemStatements() else {
            guard let item = try read(table: engine.systemTableNames.config, id: .string(id)) else { return nil }
            return item["value"] ?? .null
        }
        return try system.with(.configRow, on: connection) { s in
            try s.bind(text: id, at: 1)
            guard try s.step() else { return nil }
            return try s.value(0, as: .string)
        }
    }

    /// The ids of the delta token rows of a pair (see ``SystemTableShortcuts/deltaTokenRowIds(table:queryId:)``).
    func deltaTokenRowIds(table: String, queryId: String) throws -> [Value] {
        guard let system = try systemStatements() else {
            let p: QueryPredicate = Field("table").equalsIgnoringCase(.literal(.string(table)))
                && Field("keyType") == .literal(.int(TableConfigEntry.deltaTokenKeyType))
                && Field("key") == .literal(.string(queryId))
            return try read(Query(engine.systemTableNames.config, where: p)).items.compactMap(\.id)
        }
        return try system.with(.deltaTokenRowIds, on: connection) { s in
            try s.bind(text: table, at: 1)
            try s.bind(.int(TableConfigEntry.deltaTokenKeyType), at: 2)
            try s.bind(text: queryId, at: 3)
            var ids: [Value] = []
            while try s.step() { ids.append(try s.value(0, as: .string)) }
            return ids
        }
    }

    /// Whether values of `bytes` bytes in all make a row that cannot meet a size limit: the one-item
    /// upsert's guard (`upsertOne`: less than half of `SQLITE_LIMIT_LENGTH`) and the item limits of
    /// ``TableSchema/prepare(_:options:)`` with `.strict` options, so no check of the generic path can fail.
    private func fitsEveryLimit(_ bytes: Int) -> Bool {
        bytes < connection.lengthLimit / 2 && bytes < min(TableSchema.maximumItemBytes, TableSchema.maximumValueBytes) / 2
    }

    /// The bytes counted for an operation's row by ``fitsEveryLimit(_:)``: its strings and properties, and 18
    /// for each of its five values (as for a config entry's row below).
    private static func rowBytes(_ op: TableOperation) -> Int {
        op.table.utf8.count + op.itemId.utf8.count + op.properties.count + 5 * 18
    }

    /// Stores a new operation (see ``SystemTableShortcuts/insertOperation(_:)``): the `INSERT OR IGNORE` of
    /// every column that `upsertOne` runs for the item; when a row had the id, the generic upsert.
    func insertOperation(_ op: TableOperation) throws {
        let bytes = Self.rowBytes(op)
        guard let system = try systemStatements(), fitsEveryLimit(bytes) else {
            try upsertOne(op.item, into: engine.systemTableNames.operations, options: .strict)
            return
        }
        let inserted = try system.with(.insertOperation, on: connection) { s in
            try s.bind(.int(op.id), at: 1)
            try s.bind(text: op.table, at: 2)
            try s.bind(.int(Int64(op.tableKind)), at: 3)
            try s.bind(text: op.itemId, at: 4)
            try s.bind(.binary(op.properties), at: 5)
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
        if !inserted { try upsertOne(op.item, into: engine.systemTableNames.operations, options: .strict) }
    }

    /// Writes `op` over its row (see ``SystemTableShortcuts/rewriteOperation(_:)``): `properties` alone when
    /// the row holds the same table, kind and item id, the upsert otherwise.
    func rewriteOperation(_ op: TableOperation) throws {
        let bytes = Self.rowBytes(op)
        guard let system = try systemStatements(), fitsEveryLimit(bytes) else {
            try upsertOne(op.item, into: engine.systemTableNames.operations, options: .strict)
            return
        }
        let updated = try system.with(.updateOperationProperties, on: connection) { s in
            try s.bind(.int(op.id), at: 1)
            try s.bind(.binary(op.properties), at: 2)
            try s.bind(text: op.table, at: 3)
            try s.bind(.int(Int64(op.tableKind)), at: 4)
            try s.bind(text: op.itemId, at: 5)
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
        if !updated { try upsertOne(op.item, into: engine.systemTableNames.operations, options: .strict) }
    }

    /// Appends `op` at the next operation id (see ``SystemTableShortcuts/appendAtNextOperationId(_:)``):
    /// `.advanceHighWater`, then `.insertOperationAtMark`; `nil` when the first changed nothing.
    func appendAtNextOperationId(_ op: TableOperation) throws -> Int64? {
        let bytes = Self.rowBytes(op)
        guard let system = try systemStatements(), fitsEveryLimit(bytes) else { return nil }
        let advanced = try system.with(.advanceHighWater, on: connection) { s in
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
        guard advanced else { return nil }
        return try system.with(.insertOperationAtMark, on: connection) { s in
            try s.bind(text: op.table, at: 1)
            try s.bind(.int(Int64(op.tableKind)), at: 2)
            try s.bind(text: op.itemId, at: 3)
            try s.bind(.binary(op.properties), at: 4)
            try s.run()
            return connection.api.last_insert_rowid(connection.db)
        }
    }

    /// Stores a config entry (see ``SystemTableShortcuts/storeConfigEntry(_:)``): only the value of the row
    /// that already holds the entry (every other column equal byte for byte, so the row ends as an update of
    /// every column would leave it); otherwise the generic one-item upsert.
    func storeConfigEntry(_ entry: TableConfigEntry) throws {
        if try updateValue(.updateConfigValue, entry) != true {
            try upsertOne(entry.item, into: engine.systemTableNames.config, options: .strict)
        }
    }

    /// Writes the value of a delta-token entry whose row is the only one of its pair (see
    /// ``SystemTableShortcuts/updateSoleDeltaTokenRow(_:)``) in one statement; `false` when it wrote nothing.
    func updateSoleDeltaTokenRow(_ entry: TableConfigEntry) throws -> Bool {
        try updateValue(.updateSoleDeltaToken, entry) ?? false
    }

    /// Runs `kind`, a value-only update of the row holding `entry` (parameters: value, id, table, key, key
    /// type); returns whether it changed a row, or `nil` when the prepared statements cannot serve the
    /// entry (no statement set, or a row too large for the guard) and the generic path must.
    private func updateValue(_ kind: SystemStatements.Kind, _ entry: TableConfigEntry) throws -> Bool? {
        let bytes = entry.id.utf8.count + entry.table.utf8.count + entry.key.utf8.count + entry.value.utf8.count + 5 * 18
        guard let system = try systemStatements(), fitsEveryLimit(bytes) else { return nil }
        return try system.with(kind, on: connection) { s in
            try s.bind(text: entry.value, at: 1)
            try s.bind(text: entry.id, at: 2)
            try s.bind(text: entry.table, at: 3)
            try s.bind(text: entry.key, at: 4)
            try s.bind(.int(entry.keyType), at: 5)
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
    }

    /// Deletes an operation and its errors with the prepared statements (see
    /// ``SystemTableShortcuts/removeOperationAndErrors(id:)``); returns whether an error row was deleted.
    func removeOperationAndErrors(id: Int64, _ system: SystemStatements) throws -> Bool {
        try system.with(.deleteOperation, on: connection) { s in
            try s.bind(.int(id), at: 1)
            try s.run()
        }
        return try system.with(.deleteErrors, on: connection) { s in
            try s.bind(.int(id), at: 1)
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
    }
}
