import Foundation
import LocalStore
import Testing

@testable import LocalStoreSQLite

/// The system-table shortcuts of the SQL engine (statements prepared once per connection for the queue
/// head, appending, the operation-id high-water mark, delta tokens and removing an operation) leave the
/// store exactly as the generic calls do: each case runs the same calls on the in-memory store, which has
/// no shortcuts, and compares every row of the three system tables.
@Suite("SQL engine: system-table shortcuts")
struct SystemShortcutTests {
    private static let config = SystemTableNames.default.config
    private static let operations = SystemTableNames.default.operations
    private static let errors = SystemTableNames.default.errors

    /// Every row of the three system tables, sorted by id: what two stores are compared by.
    private func systemRows(_ store: some LocalStore) throws -> [[String: Value]] {
        var rows: [[String: Value]] = []
        for table in [Self.operations, Self.errors, Self.config] {
            rows += try store.read(Query(table, sort: [SortKey("id")])).items.map { item in
                item.values.merging(["_table": .string(table)]) { a, _ in a }
            }
        }
        return rows
    }

    /// Runs `body` on a SQLite store of `library` and on an in-memory store, then compares them.
    private func sameAsGeneric(
        _ library: Library, _ body: (any LocalStore) throws -> Void
    ) throws {
        let dir = try TemporaryDirectory()
        let sql = try library.open(dir.path("store.sqlite"))
        defer { try? sql.close() }
        let memory = try InMemoryStore()
        try body(sql)
        try body(memory)
        #expect(try systemRows(sql) == systemRows(memory))
    }

    private static let date = Date(timeIntervalSinceReferenceDate: 700_000_000.5)

    @Test(arguments: Library.available)
    func queueHeadAfterRemovals(_ library: Library) throws {
        try sameAsGeneric(library) { store in
            try store.defineTable(TableSchema("T", ["text": .string]))
            for n in 1...6 { _ = try store.appendOperation(table: "T", itemId: "i\(n)", properties: Array("{\"type\":\(n % 3)}".utf8)) }
            try store.recordError(TableOperationError(id: "e1", operationId: 1))
            try store.recordError(TableOperationError(id: "e3a", operationId: 3))
            try store.recordError(TableOperationError(id: "e3b", operationId: 3))
            try store.recordError(TableOperationError(id: "e4", operationId: 4))
            try store.removeOperation(id: 1)
            try store.removeOperation(id: 3)
            #expect(try store.operation(after: 0)?.id == 2)
            #expect(try store.operation(after: 2)?.id == 4)
            #expect(try store.operation(after: 2)?.itemId == "i4")
            #expect(try store.operation(after: 2)?.properties == Array("{\"type\":1}".utf8))
            #expect(try store.operation(after: 6) == nil)
            #expect(try store.operationErrors().map(\.id) == ["e4"])
            // Inside one transaction: read the head, remove it, read the next head.
            try store.write { tx in
                let head = try #require(try tx.operation(after: 0))
                #expect(head.id == 2)
                try tx.removeOperation(id: head.id)
                #expect(try tx.operation(after: 0)?.id == 4)
                try tx.removeOperation(id: 4)
                #expect(try tx.operationErrors(operationId: 4).isEmpty)
            }
            // Removing a missing operation changes nothing; removing the newest does not free its id.
            try store.removeOperation(id: 99)
            try store.removeOperation(id: 6)
            #expect(try store.appendOperation(table: "T", itemId: "i7").id == 7)
            #expect(try store.operationIdHighWaterMark() == 7)
            #expect(try store.pendingOperations().map(\.id) == [5, 7])
        }
    }

    /// The memoized casts answer as `as?` does, for the value's dynamic type, every time: the SQL store
    /// and its transaction are their own shortcuts; the in-memory store and its transaction have none.
    @Test(arguments: Library.available)
    func shortcutCastsAnswerAsTheRuntimeDoes(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let sql = try library.open(dir.path("store.sqlite"))
        defer { try? sql.close() }
        let memory = try InMemoryStore()
        for _ in 0..<3 {
            #expect(ShortcutCasts.readShortcuts(sql).map { $0 as AnyObject } === sql)
            #expect(ShortcutCasts.shortcuts(sql) == nil && (sql as Any as? any SystemTableShortcuts) == nil)
            #expect(ShortcutCasts.readShortcuts(memory) == nil && ShortcutCasts.shortcuts(memory) == nil)
            try sql.write { tx in
                #expect(ShortcutCasts.shortcuts(tx).map { $0 as AnyObject } === (tx as AnyObject))
                #expect(ShortcutCasts.readShortcuts(tx).map { $0 as AnyObject } === (tx as AnyObject))
            }
            try memory.write { tx in #expect(ShortcutCasts.shortcuts(tx) == nil) }
            // Through an existential of the protocol: the dynamic type answers.
            let any: any LocalStore = sql
            #expect(ShortcutCasts.readShortcuts(any).map { $0 as AnyObject } === sql)
        }
    }

    /// Appending reads the high-water mark in one statement when its value is the canonical decimal form
    /// of a mark below Int64.max and the largest id is below Int64.max, and leaves every other value to
    /// the general path: each value below, with operation ids written by other code around it, gives the
    /// id (or the error) and the rows the generic calls give, through `appendOperation` and `enqueue`.
    @Test(arguments: Library.available)
    func appendingAtEveryHighWaterValue(_ library: Library) throws {
        let values = [
            "0", "1", "7", "41", "007", "+7", "-7", " 7", "7 ", "7.0", "1e3", "0x7", "", "x", "7\u{0}", "٧",
            "9223372036854775805", "9223372036854775806", "9223372036854775807", "9223372036854775808", "99999999999999999999",
        ]
        let foreignIds: [Int64?] = [nil, 40, 9_223_372_036_854_775_806, .max]
        for value in values {
            for foreign in foreignIds {
                var outcomes: [[String]] = []
                try sameAsGeneric(library) { store in
                    var outcome: [String] = []
                    try store.defineTable(TableSchema("T", ["text": .string]))
                    outcome.append("\(try store.appendOperation(table: "T", itemId: "a").id)")
                    if let foreign {
                        try store.upsert([TableOperation(id: foreign, table: "T", itemId: "other").item], into: Self.operations)
                    }
                    try store.upsert([["id": .string(TableConfigEntry.operationIdHighWaterId), "value": .string(value)]], into: Self.config)
                    for item in ["b", "c"] {
                        do {
                            let op = try store.appendOperation(table: "T", tableKind: 1, itemId: item, properties: [1, 2])
                            outcome.append("\(op.id)")
                            #expect(try store.operation(id: op.id) == op)
                        } catch let error as LocalStoreError {
                            outcome.append("\(error.code)")
                        }
                    }
                    // The typed queue's enqueue appends the same way.
                    do {
                        let op = try #require(try store.enqueue(.insert, ["id": "d", "text": "x"], into: "T").operation)
                        outcome.append("\(op.id)")
                        #expect(try store.operation(id: op.id) == op.record)
                    } catch let error as LocalStoreError {
                        outcome.append("\(error.code)")
                    }
                    outcomes.append(outcome)
                }
                #expect(outcomes.count == 2 && outcomes[0] == outcomes[1], "mark \(value.debugDescription), other id \(foreign.map(String.init) ?? "none"): \(outcomes)")
            }
        }
    }

    @Test(arguments: Library.available)
    func tokenAndHighWaterUpdatesAfterRedefinitionAndReopen(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        var store = try library.open(path)
        try store.defineTable(TableSchema("T", ["text": .string]))
        #expect(try store.appendOperation(table: "T", itemId: "a").id == 1)
        try store.setDeltaToken(Self.date, table: "T", queryId: "q")
        // A redefinition (a new column) makes new table definitions in the catalog.
        try store.defineTable(TableSchema("T", ["text": .string, "n": .integer]))
        try store.defineTable(TableSchema("U", ["text": .string]))
        #expect(try store.appendOperation(table: "U", itemId: "b").id == 2)
        try store.setDeltaToken(Self.date.addingTimeInterval(1), table: "T", queryId: "q")
        #expect(try store.deltaToken(table: "T", queryId: "q") == Self.date.addingTimeInterval(1))
        #expect(try store.operationIdHighWaterMark() == 2)
        try store.close()
        // After the close every call fails: no statement outlives its connection.
        #expect(throws: LocalStoreError.self) { try store.operation(after: 0) }
        #expect(throws: LocalStoreError.self) { try store.deltaToken(table: "T", queryId: "q") }
        #expect(throws: LocalStoreError.self) { try store.appendOperation(table: "T", itemId: "c") }

        store = try library.open(path)
        defer { try? store.close() }
        #expect(try store.operationIdHighWaterMark() == 2)
        try store.removeOperation(id: 2)
        #expect(try store.appendOperation(table: "T", itemId: "c").id == 3)
        try store.setDeltaToken(Self.date.addingTimeInterval(2), table: "T", queryId: "q")
        #expect(try store.deltaToken(table: "T", queryId: "q") == Self.date.addingTimeInterval(2))
        let entries = try store.configEntries()
        // The high-water mark, the token, and the row the store's first operation wrote: marks are tracked.
        #expect(entries.count == 3)
        #expect(entries.contains { $0.id == "localstore|sentTracking" && $0.keyType == TableConfigEntry.localStoreKeyType })
        #expect(entries.first { $0.id == TableConfigEntry.operationIdHighWaterId }?.value == "3")
        #expect(entries.first { $0.keyType == TableConfigEntry.deltaTokenKeyType }?.id == DeltaTokenKey.rowId(table: "T", queryId: "q"))
    }

    /// Rows of the config table written by other code: another spelling of a row id, other columns, other
    /// rows of the same pair. The value-only update must not apply to them; the result is the generic one.
    @Test(arguments: Library.available)
    func configRowsWrittenByOtherCode(_ library: Library) throws {
        try sameAsGeneric(library) { store in
            let config = Self.config
            let mark = TableConfigEntry.operationIdHighWaterId
            // The high-water row with another id spelling and another table column.
            try store.upsert(
                [["id": .string(mark.uppercased()), "table": "x", "key": "operationIdHighWater", "keyType": 100, "value": "5"]],
                into: config)
            #expect(try store.appendOperation(table: "T", itemId: "a").id == 6)
            // Now in this store's own spelling: later appends update the value only.
            #expect(try store.appendOperation(table: "T", itemId: "b").id == 7)
            // A row of the same token pair under another id, and the token row with another key type.
            let rowId = DeltaTokenKey.rowId(table: "T", queryId: "q")
            try store.upsert(
                [
                    ["id": "legacy-token", "table": "t", "key": "q", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": "other-pair", "table": "T", "key": "Q", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": .string(rowId), "table": "T", "key": "q", "keyType": 7, "value": "x"],
                ], into: config)
            try store.setDeltaToken(Self.date, table: "T", queryId: "q")
            #expect(try store.deltaToken(table: "T", queryId: "q") == Self.date)
            // A longer table name: rows of its pair in every case (removed), rows of names that sort between
            // its upper- and lower-case spellings but are other tables (kept).
            try store.upsert(
                [
                    ["id": "v1", "table": "TODOITEM", "key": "q2", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": "v2", "table": "todoitem", "key": "q2", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": "v3", "table": "tODOiTEM", "key": "q2", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": "k1", "table": "TodoItems", "key": "q2", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": "k2", "table": "Tags", "key": "q2", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                    ["id": "k3", "table": "TodoItem", "key": "q3", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"],
                ], into: config)
            try store.setDeltaToken(Self.date, table: "TodoItem", queryId: "q2")
            #expect(try store.deltaToken(table: "todoITEM", queryId: "q2") == Self.date)
            #expect(try store.read(table: config, id: "v1") == nil)
            #expect(try store.read(table: config, id: "k2") != nil)
            // The pair's only row under another id, its table, key and key type spelled as the token's: it
            // is not the token's row, so it goes and the token is stored under its own id.
            try store.upsert([["id": "sdk-token", "table": "T", "key": "q4", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"]], into: config)
            try store.setDeltaToken(Self.date, table: "T", queryId: "q4")
            #expect(try store.read(table: config, id: "sdk-token") == nil)
            #expect(try store.read(table: config, id: .string(DeltaTokenKey.rowId(table: "T", queryId: "q4")))?["value"] != nil)
            #expect(try store.deltaToken(table: "T", queryId: "q4") == Self.date)
            // A damaged value is the same typed error.
            try store.upsert([["id": .string(mark), "value": "not a number"]], into: config)
            #expect(throws: LocalStoreError.self) { try store.appendOperation(table: "T", itemId: "c") }
            try store.upsert([["id": .string(mark), "value": "9"]], into: config)
            #expect(try store.appendOperation(table: "T", itemId: "c").id == 10)
        }
    }

    /// Another store instance on the same file (another connection, as another process) edits the config
    /// table and defines a table between this store's calls.
    @Test(arguments: Library.available)
    func configEditedByAnotherConnectionBetweenCalls(_ library: Library) throws {
        try library.withTwoInstances { a, b in
            try a.setDeltaToken(Self.date, table: "T", queryId: "q")
            #expect(try a.deltaToken(table: "T", queryId: "q") == Self.date)
            try b.setDeltaToken(Self.date.addingTimeInterval(5), table: "T", queryId: "q")
            #expect(try a.deltaToken(table: "T", queryId: "q") == Self.date.addingTimeInterval(5))

            #expect(try a.appendOperation(table: "T", itemId: "x").id == 1)
            #expect(try b.appendOperation(table: "T", itemId: "y").id == 2)
            // b changes the schema (PRAGMA schema_version moves) and the high-water row's other columns.
            try b.defineTable(TableSchema("T", ["text": .string]))
            try b.upsert([["id": .string(TableConfigEntry.operationIdHighWaterId), "key": "edited", "value": "40"]], into: Self.config)
            #expect(try a.appendOperation(table: "T", itemId: "z").id == 41)
            let row = try #require(try b.read(table: Self.config, id: .string(TableConfigEntry.operationIdHighWaterId)))
            #expect(row["key"] == "operationIdHighWater")
            #expect(row["value"] == "41")
            #expect(try b.operation(after: 2)?.itemId == "z")
            try b.removeOperation(id: 1)
            #expect(try a.operation(after: 0)?.id == 2)
            try a.write { tx in try tx.removeOperation(id: 2) }
            #expect(try b.operation(after: 0)?.id == 41)
            #expect(try a.pendingOperationCount() == 1)
        }
    }

    /// Every system-table statement that looks rows up searches the primary key or an index; the
    /// delta-token pair lookup, which ignores the case of table names, searches the config table's
    /// `(table COLLATE NOCASE, key, keyType)` index.
    @Test(arguments: Library.available)
    func systemStatementsSearchIndexes(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        let plans = try store.engine.systemStatementQueryPlans()
        #expect(plans.count == 14, "\(plans)")
        // An item's operations: a search of the (table, itemId COLLATE NOCASE) index, already in id order.
        #expect(plans["itemOperations"]?.contains { $0.hasPrefix("SEARCH") && $0.contains("table_itemId") } == true, "\(plans["itemOperations"] ?? [])")
        #expect(plans["itemOperations"]?.contains { $0.contains("TEMP B-TREE") } == false, "\(plans["itemOperations"] ?? [])")
        #expect(plans["updateSoleDeltaToken"]?.contains { $0.contains("pair_nocase") } == true, "\(plans["updateSoleDeltaToken"] ?? [])")
        // The row itself by rowid, the value the pair-index search gave (not a second search by id).
        #expect(plans["updateSoleDeltaToken"]?.contains { $0.hasPrefix("SEARCH") && $0.contains("INTEGER PRIMARY KEY (rowid=?)") } == true, "\(plans["updateSoleDeltaToken"] ?? [])")
        #expect(plans["updateSoleDeltaToken"]?.contains { $0.contains("sqlite_autoindex") } == false, "\(plans["updateSoleDeltaToken"] ?? [])")
        #expect(plans["deltaTokenRowIds"]?.contains { $0.hasPrefix("SEARCH") && $0.contains("pair_nocase") } == true, "\(plans["deltaTokenRowIds"] ?? [])")
        for (kind, lines) in plans where kind != "insertOperation" {
            if kind == "largestOperationId" {
                // The last rowid: a backwards walk of the table that stops at its first row.
                #expect(lines.count == 1 && lines[0].contains("MS_TableOperations"), "\(kind): \(lines)")
                continue
            }
            if kind == "advanceHighWater" {
                // The mark's row by primary key; the largest id as `largestOperationId` reads it.
                #expect(lines.first?.hasPrefix("SEARCH") == true && lines.first?.contains("MS_TableConfig") == true, "\(kind): \(lines)")
                #expect(lines.allSatisfy { !$0.hasPrefix("SCAN") || $0.contains("MS_TableOperations") }, "\(kind): \(lines)")
                continue
            }
            #expect(lines.contains { $0.hasPrefix("SEARCH") }, "\(kind): \(lines)")
            #expect(!lines.contains { $0.hasPrefix("SCAN") }, "\(kind): \(lines)")
        }
    }

    /// A store made before the config table's pair index gets it when it is opened (and the metadata row
    /// that records it); without it (dropped by another connection while the store is open) the pair
    /// lookup scans the table and finds the same rows. A store whose metadata records the index is not
    /// searched for it on opening: an index dropped by other code stays dropped, and lookups scan.
    @Test(arguments: Library.available)
    func pairIndexAddedToOlderStores(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        let pairIndex = "localstore:index:\(Self.config):pair_nocase"
        let api = try #require(library.api)
        func hasIndex(_ store: SQLiteStore) throws -> Bool {
            try !store.query(sql: "SELECT name FROM sqlite_master WHERE name = ?1", arguments: [.string(pairIndex)]).isEmpty
        }
        func addOtherRow(_ store: SQLiteStore) throws {
            // Another spelling of the table's name, under another id (as other code may write it).
            try store.upsert(
                [["id": "other", "table": "t", "key": "q", "keyType": .int(TableConfigEntry.deltaTokenKeyType), "value": "2001-01-01T00:00:00.000Z"]],
                into: Self.config)
        }
        let tokenId = Value.string(DeltaTokenKey.rowId(table: "T", queryId: "q"))
        do {
            let store = try library.open(path)
            defer { try? store.close() }
            #expect(try hasIndex(store))
            try store.setDeltaToken(Self.date, table: "T", queryId: "q")
            try runRawSQL(api, path, ["DROP INDEX \"\(pairIndex)\""])
            #expect(try !hasIndex(store))
            #expect(try store.engine.systemStatementQueryPlans()["deltaTokenRowIds"]?.contains { $0.hasPrefix("SCAN") } == true)
            try addOtherRow(store)
            #expect(try store.deltaTokens(table: "T") == ["q": Date(timeIntervalSinceReferenceDate: 0)])
            try store.setDeltaToken(Self.date, table: "T", queryId: "q")
            #expect(try store.read(Query(Self.config, where: Field("key") == "q")).items.map { $0["id"] } == [tokenId])
            try addOtherRow(store)
        }
        func recordsIndex(_ store: SQLiteStore) throws -> Bool {
            try !store.query(sql: "SELECT 1 FROM \"localstore:meta\" WHERE key = 'configPairIndex' AND value = 1").isEmpty
        }
        // The metadata still records the index: opening does not look for it.
        do {
            let store = try library.open(path)
            defer { try? store.close() }
            #expect(try recordsIndex(store))
            #expect(try !hasIndex(store))
            #expect(try store.deltaTokens(table: "t") == ["q": Date(timeIntervalSinceReferenceDate: 0)])
        }
        // As a store made before the index: neither the index nor the row.
        try runRawSQL(api, path, ["DELETE FROM \"localstore:meta\" WHERE key = 'configPairIndex'"])
        let store = try library.open(path)
        defer { try? store.close() }
        #expect(try recordsIndex(store))
        #expect(try hasIndex(store))
        #expect(try store.engine.systemStatementQueryPlans()["deltaTokenRowIds"]?.contains { $0.contains("pair_nocase") } == true)
        #expect(try store.deltaTokens(table: "t") == ["q": Date(timeIntervalSinceReferenceDate: 0)])
        try store.setDeltaToken(Self.date, table: "T", queryId: "q")
        #expect(try store.read(Query(Self.config, where: Field("key") == "q")).items.map { $0["id"] } == [tokenId])
        #expect(try store.deltaToken(table: "t", queryId: "q") == Self.date)
    }

    /// A transaction that fails after the shortcuts wrote leaves nothing behind.
    @Test(arguments: Library.available)
    func aRolledBackTransactionUndoesTheShortcuts(_ library: Library) throws {
        try sameAsGeneric(library) { store in
            _ = try store.appendOperation(table: "T", itemId: "a")
            try store.setDeltaToken(Self.date, table: "T", queryId: "q")
            struct Stop: Error {}
            #expect(throws: Stop.self) {
                try store.write { tx in
                    _ = try tx.appendOperation(table: "T", itemId: "b")
                    try tx.setDeltaToken(Self.date.addingTimeInterval(9), table: "T", queryId: "q")
                    try tx.removeOperation(id: 1)
                    throw Stop()
                }
            }
            #expect(try store.operation(after: 0)?.id == 1)
            #expect(try store.deltaToken(table: "T", queryId: "q") == Self.date)
            #expect(try store.appendOperation(table: "T", itemId: "c").id == 2)
        }
    }
}
