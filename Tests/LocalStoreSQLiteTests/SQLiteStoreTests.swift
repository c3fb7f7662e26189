import Foundation
import LocalStore
import LocalStoreSQLEngine
import Synchronization
import Testing

@testable import LocalStoreSQLite

private let todo = TableSchema(
    "TodoItem", ["text": .string, "priority": .integer, "done": .boolean, "due": .date], indexed: ["priority"])

private func todoRows() -> [Item] {
    [
        ["id": "a", "text": "milk", "priority": 1, "done": false, "due": .date(Date(timeIntervalSinceReferenceDate: 0))],
        ["id": "B", "text": "eggs", "priority": 3, "done": true],
        ["id": "c", "text": "bread", "priority": 2],
    ]
}

/// Runs SQL on a file through the raw C API (to make files LocalStore did not create).
func runRawSQL(_ api: SQLiteAPI, _ path: String, key: String? = nil, _ statements: [String]) throws {
    var handle: OpaquePointer?
    guard api.open_v2(path, &handle, SQLite.OPEN_READWRITE | SQLite.OPEN_CREATE, nil) == SQLite.OK, let db = handle else {
        throw LocalStoreError(.ioError, "cannot open \(path)")
    }
    defer { _ = api.close_v2(db) }
    if let key {
        guard let setKey = api.key else { throw LocalStoreError(.unsupported, "no sqlite3_key") }
        _ = key.withCString { setKey(db, $0, Int32(key.utf8.count)) }
    }
    for sql in statements {
        var stmt: OpaquePointer?
        guard api.prepare_v2(db, sql, -1, &stmt, nil) == SQLite.OK else {
            throw LocalStoreError(.internal, api.errmsg(db).map { String(cString: $0) } ?? "prepare failed")
        }
        while api.step(stmt) == SQLite.ROW {}
        _ = api.finalize(stmt)
    }
}

@Suite("SQLiteStore")
struct SQLiteStoreTests {
    @Test("a store reopens without defining its tables again", arguments: Library.available)
    func reopenWithoutRedefining(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        do {
            let store = try library.open(path)
            try store.defineTable(todo)
            try store.defineTable(TableSchema("sqlite_things", ["n": .integer]))
            try store.upsert(todoRows(), into: "TodoItem")
            try store.upsert([["id": "x", "n": 7]], into: "SQLITE_THINGS")
            _ = try store.appendOperation(table: "TodoItem", itemId: "a")
            try store.setDeltaToken(Date(timeIntervalSince1970: 1_700_000_000.123), table: "TodoItem", queryId: "q")
            try store.close()
        }
        let store = try library.open(path)
        defer { try? store.close() }
        #expect(try store.tableSchemas() == [todo, TableSchema("sqlite_things", ["n": .integer])])
        #expect(try store.read(table: "todoitem", id: "b")?["text"] == "eggs")
        #expect(try store.read(table: "TodoItem", id: "a") == todoRows()[0])
        let sorted = try store.read(Query("TodoItem", where: Field("priority") >= 2, sort: [SortKey("priority", .descending)]))
        #expect(sorted.items.map(\.stringId) == ["B", "c"])
        #expect(try store.read(table: "sqlite_things", id: "X")?["n"] == 7)
        #expect(try store.pendingOperationCount() == 1)
        #expect(try store.appendOperation(table: "TodoItem", itemId: "b").id == 2)
        #expect(try store.deltaToken(table: "TodoItem", queryId: "q") == Date(timeIntervalSince1970: 1_700_000_000.123))
        // A table named sqlite_* is stored under a prefixed SQL name.
        #expect(try store.query(sql: #"SELECT n FROM "localstore:sqlite_things""#) == [["n": 7]])
    }

    @Test("defineTable migrates a file written by an earlier open", arguments: Library.available)
    func migration(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        do {
            let store = try library.open(path)
            try store.defineTable(TableSchema("Note", ["title": .string]))
            try store.upsert([["id": "n1", "title": "one"], ["id": "n2", "title": "two"]], into: "Note")
            try store.close()
        }
        let expected = TableSchema(
            name: "Note",
            columns: [Column("id", .string), Column("title", .string, indexed: true), Column("RANK", .double, indexed: true)])
        do {
            let store = try library.open(path)
            try store.defineTable(TableSchema("NOTE", ["RANK": .double, "Title": .string], indexed: ["rank", "title"]))
            #expect(try store.schema(of: "note") == expected)
            #expect(try store.read(table: "Note", id: "n1") == ["id": "n1", "title": "one", "RANK": nil])
            try store.upsert([["id": "n2", "rank": 2.5]], into: "Note")
            #expect(try store.read(table: "Note", id: "n2") == ["id": "n2", "title": "two", "RANK": 2.5])
            let indexes = try store.query(
                sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 AND name LIKE 'localstore:%' ORDER BY name",
                arguments: ["Note"])
            #expect(indexes.compactMap { $0["name"]?.stringValue } == ["localstore:index:Note:RANK", "localstore:index:Note:title"])
            // A conflicting redefinition changes nothing.
            expectError(.schemaConflict) { try store.defineTable(TableSchema("Note", ["title": .integer])) }
            try store.close()
        }
        let store = try library.open(path)
        defer { try? store.close() }
        #expect(try store.tableSchemas() == [expected])
        #expect(try store.read(Query("Note", where: Field("rank") > 2)).items.map(\.stringId) == ["n2"])
    }

    @Test("a file that is not a LocalStore store is refused with notADatabase and left untouched")
    func notADatabase() throws {
        let dir = try TemporaryDirectory()
        func expectUntouched(_ path: String, _ what: String, open: () throws -> SQLiteStore) throws {
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            expectError(.notADatabase, Comment(rawValue: what)) { try open() }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(what): the file changed")
            for suffix in ["-wal", "-shm", "-journal"] {
                #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(what): \(suffix) was created")
            }
            #expect(openDescriptors(for: path).isEmpty, "\(what): the file is still open")
        }
        // Garbage.
        let garbage = dir.path("garbage.sqlite")
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let bytes = (0..<16384).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: garbage))
        try expectUntouched(garbage, "garbage") { try SQLiteStore(path: garbage) }
        // A text file.
        let text = dir.path("notes.txt")
        try Data("hello, this is not a database\n".utf8).write(to: URL(fileURLWithPath: text))
        try expectUntouched(text, "text file") { try SQLiteStore(path: text) }
        // A SQLite database some other program made.
        let foreign = dir.path("foreign.sqlite")
        try runRawSQL(SQLiteAPI.system, foreign, ["CREATE TABLE other (x)", "INSERT INTO other VALUES (1)"])
        try expectUntouched(foreign, "foreign SQLite database") { try SQLiteStore(path: foreign) }
        // An encrypted (SQLCipher) database.
        if let cipher = LegacySQLite.api, cipher.key != nil {
            let encrypted = dir.path("encrypted.sqlite")
            try runRawSQL(cipher, encrypted, key: "secret", ["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"])
            try expectUntouched(encrypted, "encrypted database") { try SQLiteStore(path: encrypted) }
        }
        // A directory.
        expectError(.notADatabase) { try SQLiteStore(path: dir.url.path) }
        // Paths that are not files.
        expectError(.unsupported) { try SQLiteStore(path: ":memory:") }
        expectError(.unsupported) { try SQLiteStore(path: "") }
    }

    @Test("after close every call fails with closed and the file is released", arguments: Library.available)
    func closed(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        let store = try library.open(path)
        try store.defineTable(todo)
        try store.upsert(todoRows(), into: "TodoItem")
        _ = try store.read(Query("TodoItem"))  // opens a reader too
        #expect(!openDescriptors(for: path).isEmpty)
        try store.close()
        #expect(openDescriptors(for: path).isEmpty, "files still open after close")
        expectError(.closed) { try store.schema(of: "TodoItem") }
        expectError(.closed) { try store.tableSchemas() }
        expectError(.closed) { try store.read(table: "TodoItem", id: "a") }
        expectError(.closed) { try store.read(Query("TodoItem")) }
        expectError(.closed) { try store.upsert([["id": "z"]], into: "TodoItem") }
        expectError(.closed) { try store.delete(ids: ["a"], from: "TodoItem") }
        expectError(.closed) { try store.delete(ids: [String](), from: "TodoItem") }
        expectError(.closed) { try store.delete(matching: Query("TodoItem")) }
        expectError(.closed) { try store.write { _ in 1 } }
        expectError(.closed) { try store.defineTable(TableSchema("Other", ["x": .string])) }
        expectError(.closed) { try store.query(sql: "SELECT 1") }
        expectError(.closed) { try store.pendingOperationCount() }
        try store.close()  // twice is fine
        let again = try library.open(path)
        #expect(try again.count("TodoItem") == 3)
        try again.close()
    }

    @Test("readers run while a long write transaction is open on another thread", arguments: Library.available)
    func readersDuringWrite(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(todo)
        try store.upsert([["id": "before", "priority": 1]], into: "TodoItem")

        let inTransaction = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        let writerError = LockedValue<String?>(nil)
        let writer = Thread {
            do {
                try store.write { tx in
                    try tx.upsert([["id": "during", "priority": 2]], into: "TodoItem")
                    try tx.delete(ids: ["before"], from: "TodoItem")
                    inTransaction.signal()
                    // Hold the transaction open until the readers are done (or a generous timeout).
                    _ = release.wait(timeout: .now() + 60)
                }
            } catch {
                writerError.withLock { $0 = "\(error)" }
            }
            writerDone.signal()
        }
        writer.start()
        #expect(inTransaction.wait(timeout: .now() + 30) == .success)

        // Readers on several threads, while the writer holds its transaction open.
        let results = LockedValue<[[String]]>([])
        let readersDone = DispatchSemaphore(value: 0)
        let readers = Thread {
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                let ids = (try? store.read(Query("TodoItem", includeTotalCount: true)).items.compactMap(\.stringId)) ?? ["error"]
                results.withLock { $0.append(ids) }
            }
            readersDone.signal()
        }
        readers.start()
        let finished = readersDone.wait(timeout: .now() + 30) == .success
        #expect(finished, "readers blocked by the write transaction")
        release.signal()
        #expect(writerDone.wait(timeout: .now() + 30) == .success)
        if finished {
            #expect(results.withLock { $0 } == Array(repeating: ["before"], count: 8), "readers saw uncommitted data")
        }
        #expect(writerError.withLock { $0 } == nil)
        #expect(try store.read(Query("TodoItem")).items.map(\.stringId) == ["during"])
    }

    @Test("a batch larger than the bound-variable limit", arguments: Library.available)
    func largeBatch(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(todo)
        let limit = try store.engine.connectionLimits().variables
        #expect(limit >= 999)
        let n = limit * 2 + 3
        let items: [Item] = (0..<n).map { ["id": .string("item\($0)"), "priority": .int(Int64($0))] }
        try store.upsert(items, into: "TodoItem")
        #expect(try store.count("TodoItem") == n)
        #expect(try store.read(table: "TodoItem", id: "ITEM\(n - 1)")?["priority"] == .int(Int64(n - 1)))
        // Merge over every row, in one batch, with a failure at the very end: nothing is written.
        var failing: [Item] = (0..<n).map { ["id": .string("Item\($0)"), "text": "updated"] }
        failing.append(["id": "bad", "priority": "not a number"])
        expectError(.typeMismatch) { try store.upsert(failing, into: "TodoItem") }
        #expect(try store.count("TodoItem", where: Field("text") == "updated") == 0)
        failing.removeLast()
        try store.upsert(failing, into: "TodoItem")
        #expect(try store.count("TodoItem", where: Field("text") == "updated" && Field("priority") >= 0) == n)
        #expect(try store.read(table: "TodoItem", id: "item5")?["id"] == "Item5")
        // Deleting more ids than the limit.
        try store.delete(ids: (0..<(n - 1)).map { "ITEM\($0)" }, from: "TodoItem")
        #expect(try store.read(Query("TodoItem")).items.map(\.stringId) == ["Item\(n - 1)"])
    }

    @Test("an item with more columns than the bound-variable limit", arguments: Library.available)
    func wideItem(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        let columns = [Column("id", .string)] + (1..<TableSchema.maximumColumnCount).map { Column("c\($0)", .integer) }
        try store.defineTable(TableSchema(name: "Wide", columns: columns))
        var item: Item = ["id": "w"]
        for n in 1..<TableSchema.maximumColumnCount { item["c\(n)"] = .int(Int64(n)) }
        try store.upsert([item], into: "Wide")
        #expect(try store.read(table: "Wide", id: "W") == item)
        #expect(try store.count("Wide", where: Field("c999") == 999 && Field("c1") == 1) == 1)
    }

    @Test("an IN list larger than the bound-variable limit is evaluated in Swift", arguments: Library.available)
    func largeInList(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(todo)
        try store.upsert((0..<60).map { ["id": .string("r\($0)"), "priority": .int(Int64($0 % 30))] }, into: "TodoItem")
        let limit = try store.engine.connectionLimits().variables
        let values: [Value] = (0..<(limit + 10)).map { .int(Int64($0 * 7)) }
        let ids: [Value] = (0..<(limit + 10)).map { .string($0 % 2 == 0 ? "R\($0)" : "missing\($0)") }
        let before = store.engine.fallbackCount
        let query = Query("TodoItem", where: Field("priority").isIn(values), sort: [SortKey("priority", .descending)], skip: 3, top: 20, includeTotalCount: true)
        let result = try store.read(query)
        #expect(store.engine.fallbackCount > before, "the query did not fall back")
        // The reference: the core's evaluator over every row.
        let schema = try #require(try store.schema(of: "TodoItem"))
        let rows = try store.read(Query("TodoItem")).items.map { item in schema.columns.map { item[$0.name] ?? .null } }
        #expect(result == (try ResolvedQuery(query, schema: schema)).apply(to: rows))
        #expect(result.totalCount == 5 * 2)  // priorities 0, 7, 14, 21, 28, twice each
        let byId = try store.read(Query("TodoItem", where: Field("id").isIn(ids)))
        #expect(byId.items.count == 30)
        #expect(byId.items.allSatisfy { ($0.stringId ?? "").hasPrefix("r") })
        // delete(matching:) falls back the same way.
        try store.delete(matching: Query("TodoItem", where: Field("id").isIn(ids), sort: [SortKey("id")], top: 10))
        #expect(try store.count("TodoItem") == 50)
    }

    @Test("raw SQL: read-only SELECTs only", arguments: Library.available)
    func rawSQL(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(todo)
        try store.defineTable(TableSchema("Doc", ["body": .json, "weight": .double, "blob": .binary]))
        try store.upsert(todoRows(), into: "TodoItem")
        try store.upsert([["id": "d", "body": .json(["k": [1, 2.5]]), "weight": -0.0, "blob": .binary([0, 1])]], into: "Doc")

        let rows = try store.query(
            sql: "SELECT id, text, done, due, priority FROM TodoItem WHERE priority >= ? ORDER BY priority", arguments: [2])
        #expect(rows == [
            ["id": "c", "text": "bread", "done": nil, "due": nil, "priority": 2],
            ["id": "B", "text": "eggs", "done": true, "due": nil, "priority": 3],
        ])
        let doc = try store.query(sql: "SELECT body, weight, blob FROM Doc")
        #expect(doc == [["body": .json(["k": [1, 2.5]]), "weight": -0.0, "blob": .binary([0, 1])]])
        #expect(doc.first?["weight"]?.doubleValue?.sign == .minus)
        #expect(try store.query(sql: "SELECT count(*) AS n, 1.5 AS x, 'a' AS s, NULL AS z FROM TodoItem;") == [
            ["n": 3, "x": 1.5, "s": "a", "z": nil],
        ])
        #expect(try store.query(sql: "SELECT ?1 AS a, ?1 AS b -- trailing comment", arguments: ["x"]) == [["a": "x", "b": "x"]])
        #expect(try store.query(sql: "SELECT localstore_length(?) AS n", arguments: ["a\u{0}bé"]) == [["n": 4]])

        for sql in [
            "INSERT INTO TodoItem (id) VALUES ('new')",
            "UPDATE TodoItem SET text = 'x'",
            "DELETE FROM TodoItem",
            "CREATE TABLE evil (x)",
            "DROP TABLE TodoItem",
            "PRAGMA query_only = 0",
            "PRAGMA journal_mode = DELETE",
            "ATTACH DATABASE ':memory:' AS other",
            "BEGIN",
            "SELECT 1; DELETE FROM TodoItem",
            "SELECT 1; SELECT 2",
            "SELECT * FROM no_such_table",
            "SELEKT 1",
            "",
        ] {
            expectError(.invalidQuery, Comment(rawValue: sql)) { try store.query(sql: sql) }
        }
        expectError(.invalidQuery) { try store.query(sql: "SELECT ?1, ?2", arguments: [1]) }
        #expect(try store.count("TodoItem") == 3)
        #expect(try store.read(table: "TodoItem", id: "a")?["text"] == "milk")
        // The reader connections are still usable and still read-only.
        #expect(try store.query(sql: "SELECT count(*) AS n FROM TodoItem") == [["n": 3]])
    }

    @Test("calling the store inside its own write body is misuse, not a deadlock", arguments: Library.available)
    func misuseInsideWrite(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(todo)
        try store.write { tx in
            try tx.upsert([["id": "a"]], into: "TodoItem")
            expectError(.misuse) { try store.read(table: "TodoItem", id: "a") }
            expectError(.misuse) { try store.read(Query("TodoItem")) }
            expectError(.misuse) { try store.upsert([["id": "b"]], into: "TodoItem") }
            expectError(.misuse) { try store.write { _ in 1 } }
            expectError(.misuse) { try store.query(sql: "SELECT 1") }
            expectError(.misuse) { try store.defineTable(todo) }
            expectError(.misuse) { try store.close() }
            #expect(try tx.read(table: "TodoItem", id: "A")?["id"] == "a")
        }
        #expect(try store.count("TodoItem") == 1)
        // A transaction used after its block ended.
        var leaked: (any LocalStoreTransaction)?
        try store.write { leaked = $0 }
        expectError(.misuse) { try leaked?.read(Query("TodoItem")) }
    }

    @Test("a failed call inside write {} is undone alone; the rest commits", arguments: Library.available)
    func failedCallInsideWrite(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(todo)
        try store.write { tx in
            try tx.upsert([["id": "a", "priority": 1]], into: "TodoItem")
            expectError(.typeMismatch) { try tx.upsert([["id": "b"], ["id": "c", "priority": "x"]], into: "TodoItem") }
            #expect(try tx.read(table: "TodoItem", id: "b") == nil)
            try tx.upsert([["id": "d"]], into: "TodoItem")
        }
        #expect(try store.read(Query("TodoItem")).items.map(\.stringId) == ["a", "d"])
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try store.write { tx in
                try tx.delete(ids: ["a"], from: "TodoItem")
                throw Stop()
            }
        }
        #expect(try store.read(Query("TodoItem")).items.map(\.stringId) == ["a", "d"])
    }

    @Test("a SQLite failure in the middle of a batch leaves nothing of it behind", arguments: Library.available)
    func engineFailureMidBatch(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let api = try #require(library.api)
        // Every connection refuses values longer than 1000 bytes (SQLITE_TOOBIG when binding).
        let store = try SQLiteStore(path: dir.path("store.sqlite"), api: api) { db, api in
            _ = api.limit(db, SQLite.LIMIT_LENGTH, 1000)
        }
        defer { try? store.close() }
        try store.defineTable(TableSchema("Note", ["text": .string]))
        let long = String(repeating: "x", count: 2000)
        expectError(.invalidValue) {
            try store.upsert([["id": "a", "text": "ok"], ["id": "b", "text": "ok"], ["id": "c", "text": .string(long)]], into: "Note")
        }
        #expect(try store.count("Note") == 0)
        try store.write { tx in
            try tx.upsert([["id": "a", "text": "kept"]], into: "Note")
            expectError(.invalidValue) {
                try tx.upsert([["id": "a", "text": "changed"], ["id": "b"], ["id": "c", "text": .string(long)]], into: "Note")
            }
            #expect(try tx.read(table: "Note", id: "a")?["text"] == "kept")
            #expect(try tx.read(table: "Note", id: "b") == nil)
            try tx.upsert([["id": "d"]], into: "Note")
        }
        #expect(try store.read(Query("Note")).items.compactMap(\.stringId) == ["a", "d"])
        #expect(try store.read(table: "Note", id: "a")?["text"] == "kept")
    }

    /// One-item upserts and single `DELETE`s run without a savepoint inside `write {}`; a statement SQLite
    /// refuses while running must still leave the transaction exactly as it was.
    @Test("a one-item call that SQLite refuses while running leaves the transaction as it was", arguments: Library.available)
    func singleStatementFailureInsideWrite(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let api = try #require(library.api)
        // Values up to 1000 bytes bind, but a row holding two 600-byte values is refused when its record is
        // built (SQLITE_TOOBIG while the statement runs, not when binding).
        let store = try SQLiteStore(path: dir.path("store.sqlite"), api: api) { db, api in
            _ = api.limit(db, SQLite.LIMIT_LENGTH, 1000)
        }
        defer { try? store.close() }
        try store.defineTable(TableSchema("Note", ["text": .string, "more": .string]))
        let half = Value.string(String(repeating: "x", count: 600))
        try store.upsert([["id": "a", "text": half]], into: "Note")
        try store.write { tx in
            try tx.upsert([["id": "b", "text": "new"]], into: "Note")
            expectError(.invalidValue) { try tx.upsert([["id": "A", "more": half]], into: "Note") }  // the UPDATE
            expectError(.invalidValue) { try tx.upsert([["id": "c", "text": half, "more": half]], into: "Note") }  // the INSERT
            expectError(.invalidValue) { try tx.upsert([["id": "a", "text": half, "more": half]], into: "Note") }  // every column
            try tx.upsert([["id": "b", "text": "whole", "more": "row"]], into: "Note")  // an UPDATE of every column
            #expect(try tx.read(table: "Note", id: "b") == ["id": "b", "text": "whole", "more": "row"])
            #expect(try tx.read(table: "Note", id: "a") == ["id": "a", "text": half, "more": .null])
            #expect(try tx.read(table: "Note", id: "c") == nil)
            _ = try tx.appendOperation(table: "Note", itemId: "b")
            try tx.delete(ids: ["b"], from: "Note")
            try tx.upsert([["id": "b", "text": "again"]], into: "Note")
        }
        #expect(try store.read(Query("Note")).items.compactMap(\.stringId) == ["a", "b"])
        #expect(try store.read(table: "Note", id: "a") == ["id": "a", "text": half, "more": .null])
        #expect(try store.read(table: "Note", id: "b")?["text"] == "again")
        #expect(try store.pendingOperationCount() == 1)
    }

    @Test("a file remembers its system table names")
    func systemTableNames() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        let names = SystemTableNames(operations: "Ops", errors: "Errs", config: "Conf")
        let store = try SQLiteStore(path: path, systemTableNames: names)
        _ = try store.appendOperation(table: "T", itemId: "1")
        expectError(.reservedName) { try store.defineTable(TableSchema("OPS", ["x": .string])) }
        try store.close()
        expectError(.schemaConflict) { try SQLiteStore(path: path) }
        let again = try SQLiteStore(path: path, systemTableNames: names)
        #expect(try again.pendingOperationCount() == 1)
        try again.close()
    }

    @Test("synchronous = FULL and other options", arguments: Library.available)
    func options(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let options = SQLiteStore.Options(durability: .full, busyTimeout: .milliseconds(100), maximumReaders: 1, statementCacheCapacity: 2)
        let store = try library.open(dir.path("store.sqlite"), options: options)
        defer { try? store.close() }
        try store.defineTable(todo)
        try store.upsert(todoRows(), into: "TodoItem")
        // More concurrent readers than connections: they take turns.
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            #expect((try? store.count("TodoItem")) == 3)
        }
        #expect(store.options == options)
    }
}
