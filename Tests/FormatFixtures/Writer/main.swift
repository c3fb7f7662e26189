// Writes the format fixture stores (see Tests/FormatFixtures/README.md and Tests/FormatFixtures/format-fixtures.sh).
//
// Compiled against the LocalStore version whose format is captured: today's tree, or an older commit
// (0.1.0 at 33dbb28). It therefore uses only API that every captured version has; features a version
// lacks are behind compilation conditions the script sets (COMPOUND_INDEXES).
//
// Usage: FormatFixtureWriter OUTPUT_DIRECTORY
// Writes OUTPUT_DIRECTORY/sqlite.sqlite, sqlcipher.db (raw key 0x3a * 32) and lmdb/ (data.mdb).
import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite

/// The fixed test key of the SQLCipher fixture (a raw 256-bit key).
let cipherKey = [UInt8](repeating: 0x3A, count: 32)

func seed(_ store: any LocalStore) throws {
    try store.defineTable(
        TableSchema(
            "TodoItem",
            [
                "id": .string, "text": .string, "priority": .integer, "done": .boolean, "ratio": .double,
                "due": .date, "blob": .binary, "tags": .json,
            ], indexed: ["priority", "text"]))
    try store.upsert(
        [
            [
                "id": "a", "text": "buy milk", "priority": 1, "done": false, "ratio": 0.25,
                "due": .date(Date(timeIntervalSince1970: 1_700_000_000.5)), "blob": .binary([0, 1, 2, 255]),
                "tags": .json(["x", 1, true]),
            ],
            ["id": "b", "text": "Grüße ✓", "priority": -3, "done": true, "ratio": -0.0],
            ["id": "C", "text": "", "priority": 9_007_199_254_740_993, "ratio": 1e300, "tags": .json(["k": "v"])],
        ], into: "TodoItem")
    try store.defineTable(TableSchema("Tag", ["id": .string, "n": .integer]))
    try store.upsert([["id": "t7", "n": 70], ["id": "t-1", "n": nil]], into: "Tag")
    _ = try store.appendOperation(table: "TodoItem", itemId: "a", properties: Array(#"{"type":"insert"}"#.utf8))
    _ = try store.appendOperation(table: "TodoItem", itemId: "b", properties: Array(#"{"type":"update"}"#.utf8))
    _ = try store.appendOperation(table: "Tag", itemId: "t7", properties: Array(#"{"type":"delete"}"#.utf8))
    try store.removeOperation(id: 2)
    try store.recordError(TableOperationError(id: "e1", operationId: 3, properties: Array(#"{"status":409}"#.utf8)))
    try store.setDeltaToken(Date(timeIntervalSince1970: 1_700_000_123.456), table: "TodoItem", queryId: "all")
    try store.upsert(
        [["id": "app|theme", "table": "", "key": "theme", "keyType": 7, "value": "dark"]], into: store.systemTableNames.config)
    #if COMPOUND_INDEXES
    try store.defineTable(
        TableSchema(
            name: "Event",
            columns: [Column("id", .string), Column("kind", .string), Column("at", .date), Column("level", .integer)],
            indexes: [TableIndex(name: "byKindAt", ("kind", .ascending), ("at", .descending)), TableIndex(columns: ["level", "kind"])]))
    try store.upsert(
        [
            ["id": "e1", "kind": "push", "at": .date(Date(timeIntervalSince1970: 1_700_000_001)), "level": 2],
            ["id": "e2", "kind": "pull", "at": .date(Date(timeIntervalSince1970: 1_700_000_002)), "level": 1],
            ["id": "e3", "kind": "push", "at": .date(Date(timeIntervalSince1970: 1_700_000_003)), "level": 2],
        ], into: "Event")
    #endif
}

let arguments = CommandLine.arguments
guard arguments.count == 2 || (arguments.count == 3 && arguments[1] == "--open") else {
    FileHandle.standardError.write(Data("usage: FormatFixtureWriter OUTPUT_DIRECTORY | --open FIXTURE_DIRECTORY\n".utf8))
    exit(64)
}
let fm = FileManager.default
if arguments.count == 3 {
    // How this version reacts to the fixtures of another: opens copies of them and reads every table.
    let fixtures = URL(fileURLWithPath: arguments[2])
    let scratch = fm.temporaryDirectory.appendingPathComponent("format-fixture-open-\(getpid())")
    try? fm.removeItem(at: scratch)
    try fm.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? fm.removeItem(at: scratch) }
    for (name, file) in [("sqlite", "sqlite.sqlite"), ("sqlcipher", "sqlcipher.db"), ("lmdb", "lmdb")] {
        let copy = scratch.appendingPathComponent(file)
        try fm.copyItem(at: fixtures.appendingPathComponent(file), to: copy)
        do {
            let store: any LocalStore
            switch name {
            case "sqlite": store = try SQLiteStore(path: copy.path)
            case "sqlcipher": store = try SQLCipherStore(path: copy.path, key: try .raw(cipherKey))
            default: store = try LMDBStore(path: copy.path)
            }
            var rows = 0
            for schema in try store.tableSchemas() { rows += try store.read(Query(schema.name)).items.count }
            rows += try store.pendingOperations().count
            try store.close()
            print("\(name): opened, \(rows) rows")
        } catch {
            print("\(name): \(error)")
        }
    }
    exit(0)
}
let directory = URL(fileURLWithPath: arguments[1])
for name in ["sqlite.sqlite", "sqlcipher.db", "lmdb"] {
    try? fm.removeItem(at: directory.appendingPathComponent(name))
}
try fm.createDirectory(at: directory, withIntermediateDirectories: true)
let stores: [(String, () throws -> any LocalStore)] = [
    ("sqlite", { try SQLiteStore(path: directory.appendingPathComponent("sqlite.sqlite").path) }),
    ("sqlcipher", { try SQLCipherStore(path: directory.appendingPathComponent("sqlcipher.db").path, key: try .raw(cipherKey)) }),
    ("lmdb", { try LMDBStore(path: directory.appendingPathComponent("lmdb").path) }),
]
for (name, open) in stores {
    let store = try open()
    try seed(store)
    try store.close()
    print("wrote \(name)")
}
// LMDB's lock file is recreated on open; only data.mdb is part of the format.
try? fm.removeItem(at: directory.appendingPathComponent("lmdb/lock.mdb"))
