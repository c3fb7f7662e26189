import CLMDB
import CSQLite
import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite
import Testing

/// A directory of Tests/FormatFixtures: one store per backend, written by `Tests/FormatFixtures/format-fixtures.sh`
/// from Tests/FormatFixtures/Writer/main.swift by the code of one version (docs/format.md).
///
/// To keep a format readable after changing it, write the fixtures of the new format into a new
/// directory and add an entry here; the old directories stay, and every entry is opened and read by
/// every test below.
struct FixtureSet: Sendable, CustomStringConvertible {
    /// The directory under Tests/FormatFixtures.
    let directory: String
    /// The store format number the fixtures carry (SQL: the `format` row; LMDB: the `format` key).
    let sqlFormat: Int64
    let lmdbFormat: UInt64
    /// Whether the writer had compound indexes (the `Event` table).
    let compoundIndexes: Bool
    /// Whether the writer kept the operation id high-water mark in the config table.
    let operationIdHighWaterMark: Bool
    /// Whether the stores hold the `sentTracking` config row (type 100), written by stores since the queue's
    /// sent marks.
    var sentTracking = false

    var description: String { directory }

    static let all: [FixtureSet] = [
        // 0.1.0 (commit 33dbb28): SQL format 1, LMDB format 1 with version-1 table definitions.
        FixtureSet(directory: "v0.1.0", sqlFormat: 1, lmdbFormat: 1, compoundIndexes: false, operationIdHighWaterMark: false),
        // After 0.1.0: compound indexes (SQL definition objects, LMDB version-2 definitions) raise the
        // store to format 2.
        FixtureSet(directory: "compound-indexes", sqlFormat: 2, lmdbFormat: 2, compoundIndexes: true, operationIdHighWaterMark: true),
        // LMDB records of version 2 (tags first): a new LMDB store is format 3 (the SQL stores are as
        // in "compound-indexes").
        FixtureSet(directory: "tags-first-records", sqlFormat: 2, lmdbFormat: 3, compoundIndexes: true, operationIdHighWaterMark: true),
        // LMDB bare index entries: a new LMDB store is format 4 (the SQL stores are as in "compound-indexes").
        FixtureSet(
            directory: "bare-index-entries", sqlFormat: 2, lmdbFormat: 4, compoundIndexes: true, operationIdHighWaterMark: true,
            sentTracking: true),
    ]

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FormatFixtures")
}

/// A backend and how its fixture is opened.
struct FixtureBackend: Sendable, CustomStringConvertible {
    let name: String
    /// The fixture's file (SQL) or directory (LMDB) name.
    let file: String
    let open: @Sendable (String) throws -> any LocalStore
    var description: String { name }

    /// The fixed test key of the SQLCipher fixtures (a raw 256-bit key, as the writer uses).
    static let cipherKey = [UInt8](repeating: 0x3A, count: 32)

    static let all: [FixtureBackend] = [
        FixtureBackend(name: "sqlite", file: "sqlite.sqlite") { try SQLiteStore(path: $0) },
        FixtureBackend(name: "sqlcipher", file: "sqlcipher.db") { try SQLCipherStore(path: $0, key: try .raw(cipherKey)) },
        FixtureBackend(name: "lmdb", file: "lmdb") { try LMDBStore(path: $0) },
    ]
}

/// A copy of a fixture in a temporary directory (opening a store writes to it: WAL files, lock file).
final class FixtureCopy {
    let directory: URL
    let path: String
    let backend: FixtureBackend

    init(_ set: FixtureSet, _ backend: FixtureBackend) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ls-format-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let source = FixtureSet.root.appendingPathComponent(set.directory).appendingPathComponent(backend.file)
        path = directory.appendingPathComponent(backend.file).path
        try FileManager.default.copyItem(atPath: source.path, toPath: path)
        self.backend = backend
    }

    func open() throws -> any LocalStore { try backend.open(path) }

    /// The file whose bytes are the store (LMDB: data.mdb).
    var dataFile: String { backend.name == "lmdb" ? path + "/data.mdb" : path }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// What the writer put in every fixture.
enum Expected {
    static let todo = TableSchema(
        "TodoItem",
        [
            "id": .string, "text": .string, "priority": .integer, "done": .boolean, "ratio": .double, "due": .date,
            "blob": .binary, "tags": .json,
        ], indexed: ["priority", "text"])
    static let tag = TableSchema("Tag", ["id": .string, "n": .integer])
    static let event = TableSchema(
        name: "Event",
        columns: [Column("id", .string), Column("kind", .string), Column("at", .date), Column("level", .integer)],
        indexes: [TableIndex(name: "byKindAt", ("kind", .ascending), ("at", .descending)), TableIndex(columns: ["level", "kind"])])

    static let todoRows: [String: Item] = [
        "a": [
            "id": "a", "text": "buy milk", "priority": 1, "done": false, "ratio": 0.25,
            "due": .date(Date(timeIntervalSince1970: 1_700_000_000.5)), "blob": .binary([0, 1, 2, 255]),
            "tags": .json(["x", 1, true]),
        ],
        "b": ["id": "b", "text": "Grüße ✓", "priority": -3, "done": true, "ratio": -0.0, "due": nil, "blob": nil, "tags": nil],
        "C": [
            "id": "C", "text": "", "priority": 9_007_199_254_740_993, "done": nil, "ratio": 1e300, "due": nil, "blob": nil,
            "tags": .json(["k": "v"]),
        ],
    ]
    static let tagRows: [String: Item] = ["t7": ["id": "t7", "n": 70], "t-1": ["id": "t-1", "n": nil]]
    static let eventRows: [String: Item] = [
        "e1": ["id": "e1", "kind": "push", "at": .date(Date(timeIntervalSince1970: 1_700_000_001)), "level": 2],
        "e2": ["id": "e2", "kind": "pull", "at": .date(Date(timeIntervalSince1970: 1_700_000_002)), "level": 1],
        "e3": ["id": "e3", "kind": "push", "at": .date(Date(timeIntervalSince1970: 1_700_000_003)), "level": 2],
    ]
}

/// The store format number, read without LocalStore (liblmdb / libsqlite3 directly) or, for SQLCipher,
/// through the store's read-only SQL.
enum RawFormat {
    static func sqlite(_ path: String) throws -> Int64? {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        try #require(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        try #require(sqlite3_prepare_v2(db, #"SELECT value FROM "localstore:meta" WHERE key = 'format'"#, -1, &statement, nil) == SQLITE_OK)
        return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : nil
    }

    static func setSQLite(_ path: String, _ format: Int64) throws {
        var db: OpaquePointer?
        defer { sqlite3_close(db) }
        try #require(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK)
        try #require(sqlite3_exec(db, #"UPDATE "localstore:meta" SET value = \#(format) WHERE key = 'format'"#, nil, nil, nil) == SQLITE_OK)
    }

    static func sqlcipher(_ store: SQLCipherStore) throws -> Int64? {
        try store.query(sql: #"SELECT value FROM "localstore:meta" WHERE key = 'format'"#).first?["value"]?.intValue
    }

    /// Reads (and with `set`, replaces) the LMDB store's format number.
    static func lmdb(_ directory: String, set: UInt64? = nil) throws -> UInt64? {
        var env: OpaquePointer?
        try #require(mdb_env_create(&env) == 0)
        defer { mdb_env_close(env) }
        try #require(mdb_env_set_maxdbs(env, 64) == 0)
        try #require(mdb_env_open(env, directory, 0, 0o600) == 0)
        var txn: OpaquePointer?
        try #require(mdb_txn_begin(env, nil, 0, &txn) == 0)
        var dbi: MDB_dbi = 0
        try #require(mdb_dbi_open(txn, "meta", 0, &dbi) == 0)
        var key = Array("format".utf8)
        var value: [UInt8]?
        key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var dv = MDB_val()
            if mdb_get(txn, dbi, &kv, &dv) == 0 { value = Array(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)) }
        }
        if let set {
            var newValue = Array("LSLMDB".utf8) + (0..<8).reversed().map { UInt8(truncatingIfNeeded: set >> (8 * UInt64($0))) }
            let rc = key.withUnsafeMutableBytes { k in
                newValue.withUnsafeMutableBytes { v in
                    var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                    return mdb_put(txn, dbi, &kv, &vv, 0)
                }
            }
            try #require(rc == 0)
            try #require(mdb_txn_commit(txn) == 0)
        } else {
            mdb_txn_abort(txn)
        }
        guard let value, value.count == 14, Array(value.prefix(6)) == Array("LSLMDB".utf8) else { return nil }
        return value.suffix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The version bytes (the first byte) of every record of an LMDB store's table `table`, by id key.
    static func lmdbRecordVersions(_ directory: String, table: String) throws -> [UInt8] {
        try lmdbValues(directory, database: "t:" + table.lowercased()) { $0.count > 0 ? $0[0] : 0 }
    }

    /// The value sizes of every entry of the LMDB database `database`, in key order.
    static func lmdbValueSizes(_ directory: String, database: String) throws -> [Int] {
        try lmdbValues(directory, database: database) { $0.count }
    }

    /// The names of the LMDB databases of the column and compound indexes of `table` (`i:` + the table).
    static func lmdbIndexDatabases(_ directory: String, table: String) throws -> [String] {
        try lmdbKeys(directory, database: nil).filter { $0.hasPrefix("i:" + table.lowercased() + ":") }
    }

    private static func lmdbKeys(_ directory: String, database: String?) throws -> [String] {
        var keys: [String] = []
        try lmdbWalk(directory, database: database) { key, _ in keys.append(String(decoding: key, as: UTF8.self)) }
        return keys
    }

    private static func lmdbValues<T>(_ directory: String, database: String, _ map: (UnsafeRawBufferPointer) -> T) throws -> [T] {
        var out: [T] = []
        try lmdbWalk(directory, database: database) { _, value in out.append(map(value)) }
        return out
    }

    private static func lmdbWalk(
        _ directory: String, database: String?, _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void
    ) throws {
        var env: OpaquePointer?
        try #require(mdb_env_create(&env) == 0)
        defer { mdb_env_close(env) }
        try #require(mdb_env_set_maxdbs(env, 64) == 0)
        try #require(mdb_env_open(env, directory, UInt32(MDB_RDONLY), 0o600) == 0)
        var txn: OpaquePointer?
        try #require(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0)
        defer { mdb_txn_abort(txn) }
        var dbi: MDB_dbi = 0
        try #require(mdb_dbi_open(txn, database, 0, &dbi) == 0)
        var cursor: OpaquePointer?
        try #require(mdb_cursor_open(txn, dbi, &cursor) == 0)
        defer { mdb_cursor_close(cursor) }
        var kv = MDB_val()
        var dv = MDB_val()
        var rc = mdb_cursor_get(cursor, &kv, &dv, MDB_FIRST)
        while rc == 0 {
            visit(UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size), UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size))
            rc = mdb_cursor_get(cursor, &kv, &dv, MDB_NEXT)
        }
    }

    /// The format number of the fixture copy (the store must be closed for LMDB and SQLite).
    static func of(_ copy: FixtureCopy) throws -> Int64? {
        switch copy.backend.name {
        case "sqlite": return try sqlite(copy.path)
        case "lmdb": return try lmdb(copy.path).map { Int64($0) }
        default:
            let store = try #require(try copy.open() as? SQLCipherStore)
            defer { try? store.close() }
            return try sqlcipher(store)
        }
    }
}

@Suite("on-disk format fixtures", .serialized)
struct FormatFixtureTests {
    /// Every fixture on every backend; SQLCipher only where this process may load it (not under a
    /// sanitizer: docs/reliability.md, "Sanitizers").
    static let cases: [(FixtureSet, FixtureBackend)] = FixtureSet.all.flatMap { set in
        FixtureBackend.all.filter { $0.name != "sqlcipher" || SQLCipherLibrary.processRefusal == nil }.map { (set, $0) }
    }

    static func rows(_ store: any LocalStore, _ table: String) throws -> [String: Item] {
        var out: [String: Item] = [:]
        for item in try store.read(Query(table)).items { out[item.stringId ?? "?"] = item }
        return out
    }

    /// Every table, row, operation, error, config entry and index of the fixture, as the writer wrote them.
    static func expectContents(_ store: any LocalStore, _ set: FixtureSet, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let schemas = try store.tableSchemas()
        #expect(schemas == [Expected.todo, Expected.tag] + (set.compoundIndexes ? [Expected.event] : []) || schemas.sorted { $0.name < $1.name }
            == ([Expected.todo, Expected.tag] + (set.compoundIndexes ? [Expected.event] : [])).sorted { $0.name < $1.name },
            "schemas: \(schemas)", sourceLocation: sourceLocation)
        #expect(try rows(store, "TodoItem") == Expected.todoRows, sourceLocation: sourceLocation)
        #expect(try store.read(table: "TodoItem", id: "b")?["ratio"]?.doubleValue?.sign == .minus, "-0.0 lost its sign", sourceLocation: sourceLocation)
        #expect(try rows(store, "Tag") == Expected.tagRows, sourceLocation: sourceLocation)
        // Column indexes answer (a range on the indexed column, NOCASE-ordered ids).
        #expect(try store.read(Query("TodoItem", where: Field("priority") > 0, sort: [SortKey("priority")])).items.compactMap(\.stringId) == ["a", "C"],
            sourceLocation: sourceLocation)
        #expect(try store.read(Query("TodoItem", sort: [SortKey("id")])).items.compactMap(\.stringId) == ["a", "b", "C"], sourceLocation: sourceLocation)
        if set.compoundIndexes {
            #expect(try rows(store, "Event") == Expected.eventRows, sourceLocation: sourceLocation)
            let pushes = try store.read(Query("Event", where: Field("kind") == "push", sort: [SortKey("at", .descending)]))
            #expect(pushes.items.compactMap(\.stringId) == ["e3", "e1"], sourceLocation: sourceLocation)
        }
        let ops = try store.pendingOperations()
        #expect(ops.map(\.id) == [1, 3], sourceLocation: sourceLocation)
        #expect(ops.map(\.table) == ["TodoItem", "Tag"], sourceLocation: sourceLocation)
        #expect(ops.map(\.itemId) == ["a", "t7"], sourceLocation: sourceLocation)
        #expect(ops.map { String(decoding: $0.properties, as: UTF8.self) } == [#"{"type":"insert"}"#, #"{"type":"delete"}"#], sourceLocation: sourceLocation)
        let errors = try store.operationErrors()
        #expect(errors.map(\.id) == ["e1"] && errors.map(\.operationId) == [3], sourceLocation: sourceLocation)
        #expect(errors.map { String(decoding: $0.properties, as: UTF8.self) } == [#"{"status":409}"#], sourceLocation: sourceLocation)
        let token = try #require(try store.deltaToken(table: "TodoItem", queryId: "all"), sourceLocation: sourceLocation)
        #expect(DeltaTokenFormat.string(from: token) == "2023-11-14T22:15:23.456Z", sourceLocation: sourceLocation)
        let config = try store.configEntries()
        #expect(config.contains { $0.key == "theme" && $0.keyType == 7 && $0.value == "dark" && $0.table == "" }, "\(config)", sourceLocation: sourceLocation)
        #expect(config.count == 2 + (set.operationIdHighWaterMark ? 1 : 0) + (set.sentTracking ? 1 : 0), "\(config)", sourceLocation: sourceLocation)
        #expect(try store.operationIdHighWaterMark() == (set.operationIdHighWaterMark ? 3 : 0), sourceLocation: sourceLocation)
        if let checkable = store as? any IntegrityChecking {
            #expect(try checkable.checkIntegrity() == [], sourceLocation: sourceLocation)
        } else {
            Issue.record("\(type(of: store)) has no integrity check", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: cases)
    func todaysCodeReadsTheFixtureAndWritesOnIt(_ set: FixtureSet, _ backend: FixtureBackend) throws {
        let copy = try FixtureCopy(set, backend)
        #expect(try RawFormat.of(copy) == (backend.name == "lmdb" ? Int64(set.lmdbFormat) : set.sqlFormat))
        do {
            let store = try copy.open()
            defer { try? store.close() }
            try Self.expectContents(store, set)
            // The store takes writes: the next operation id follows the highest one ever given out.
            #expect(try store.appendOperation(table: "TodoItem", itemId: "d", properties: Array(#"{"type":"insert"}"#.utf8)).id == 4)
            try store.upsert([["id": "d", "text": "new", "priority": 5]], into: "TodoItem")
        }
        // Writing rows leaves the format as it was: a store of format 1 or 2 keeps writing records of
        // version 1 (readable by the versions that wrote it), a store of format 3 records of version 2.
        #expect(try RawFormat.of(copy) == (backend.name == "lmdb" ? Int64(set.lmdbFormat) : set.sqlFormat))
        if backend.name == "lmdb" {
            let versions = try RawFormat.lmdbRecordVersions(copy.path, table: "TodoItem")
            #expect(versions.count == 4)
            #expect(Set(versions) == [set.lmdbFormat >= 3 ? 2 : 1], "\(versions)")
            // A store before format 4 keeps naming the row in every index entry's value, the new row's too
            // (a bare entry would read as a dangling one in the builds that wrote it); one of format 4
            // writes every whole-key entry bare.
            let indexes = try RawFormat.lmdbIndexDatabases(copy.path, table: "TodoItem")
            #expect(indexes.count == 2, "\(indexes)")
            for index in indexes {
                let sizes = try RawFormat.lmdbValueSizes(copy.path, database: index)
                let bare = set.lmdbFormat >= 4
                #expect(sizes.count == 4 && sizes.allSatisfy { bare ? $0 == 0 : $0 > 0 }, "\(index): \(sizes)")
            }
        }
        let reopened = try copy.open()
        defer { try? reopened.close() }
        #expect(try reopened.read(table: "TodoItem", id: "d")?["text"] == "new")
        #expect(try reopened.pendingOperations().map(\.id) == [1, 3, 4])
    }

    /// A new LMDB store is created as format 4, writes records of version 2 (tags first) and bare index
    /// entries (empty values) where the whole key ends in the row's key, and reads them back through
    /// every kind of index read.
    @Test func aNewLMDBStoreWritesTagsFirstRecordsAndBareIndexEntries() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ls-format-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let store = try LMDBStore(path: directory.path)
            defer { try? store.close() }
            try store.defineTable(Expected.todo)
            try store.upsert([["id": "a", "text": "one", "done": true, "priority": 1], ["id": "b"]], into: "TodoItem")
        }
        #expect(try RawFormat.lmdb(directory.path) == 4)
        #expect(try RawFormat.lmdbRecordVersions(directory.path, table: "TodoItem") == [2, 2])
        let indexes = try RawFormat.lmdbIndexDatabases(directory.path, table: "TodoItem")
        #expect(indexes.count == 2, "\(indexes)")
        for index in indexes {
            #expect(try RawFormat.lmdbValueSizes(directory.path, database: index) == [0, 0], "\(index)")
        }
        let store = try LMDBStore(path: directory.path)
        defer { try? store.close() }
        #expect(try store.count("TodoItem", where: Field("done") == true) == 1)
        #expect(try store.read(table: "TodoItem", id: "a")?["text"] == "one")
        // Reads through the index: a range, a count from the keys, an ordered walk, a delete by query.
        #expect(try store.read(Query("TodoItem", where: Field("priority") >= 1)).items.compactMap(\.id) == ["a"])
        #expect(try store.count("TodoItem", where: Field("text") == "one") == 1)
        #expect(try store.read(Query("TodoItem", sort: [SortKey("priority", .descending)], top: 1)).items.first?.id == "a")
        try store.delete(matching: Query("TodoItem", where: Field("priority") == 1))
        #expect(try store.count("TodoItem") == 1)
        #expect(try store.checkIntegrity() == [])
    }

    /// A store without compound indexes is upgraded to format 2 by the definition that adds the first one
    /// (in its transaction); a definition that is refused leaves it at format 1.
    @Test(arguments: cases.filter { !$0.0.compoundIndexes })
    func aCompoundIndexUpgradesAFormat1Store(_ set: FixtureSet, _ backend: FixtureBackend) throws {
        let copy = try FixtureCopy(set, backend)
        let indexed = TableSchema(name: "TodoItem", columns: Expected.todo.columns, indexes: [TableIndex(name: "open", columns: ["done", "priority"])])
        do {
            let store = try copy.open()
            defer { try? store.close() }
            let refused = TableSchema(name: "TodoItem", columns: Expected.todo.columns, indexes: [TableIndex(columns: ["nope"])])
            #expect(throws: LocalStoreError.self) { try store.defineTable(refused) }
        }
        #expect(try RawFormat.of(copy) == 1)
        do {
            let store = try copy.open()
            defer { try? store.close() }
            try store.defineTable(indexed)
        }
        #expect(try RawFormat.of(copy) == 2)
        let store = try copy.open()
        defer { try? store.close() }
        #expect(try store.schema(of: "TodoItem") == indexed)
        #expect(try Self.rows(store, "TodoItem") == Expected.todoRows)
        let open = try store.read(Query("TodoItem", where: Field("done") == false, sort: [SortKey("priority")]))
        #expect(open.items.compactMap(\.stringId) == ["a"])
    }

    /// A store of a format above the one this version knows is refused with `versionMismatch` before
    /// anything is written (the next format number stands for whatever a later version writes).
    @Test(arguments: cases.filter { $0.1.name != "sqlcipher" })
    func aNewerFormatIsAVersionMismatch(_ set: FixtureSet, _ backend: FixtureBackend) throws {
        let copy = try FixtureCopy(set, backend)
        // LMDB knows formats 1 to 4, SQL formats 1 and 2.
        let next = backend.name == "lmdb" ? 5 : 3
        if backend.name == "lmdb" {
            _ = try RawFormat.lmdb(copy.path, set: UInt64(next))
        } else {
            try RawFormat.setSQLite(copy.path, Int64(next))
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: copy.dataFile))
        do {
            let store = try copy.open()
            try? store.close()
            Issue.record("a format-\(next) store opened")
        } catch let e as LocalStoreError {
            #expect(e.code == .versionMismatch, "\(e)")
            #expect(e.message.contains("format \(next)"), "\(e.message)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: copy.dataFile)) == before)
    }
}
