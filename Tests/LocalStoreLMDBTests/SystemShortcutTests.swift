import Foundation
import LocalStore
import Testing

@testable import LocalStoreLMDB

/// LMDB's system-table shortcuts (the queue's head and tail read with a cursor, a push's errors looked
/// for in their index, the delta-token pair read from the config table's rows directly, the rest the
/// generic calls) leave the store as the generic calls leave the in-memory store, which adopts none: each
/// case runs the same calls on both and compares every row of the three system tables.
@Suite("LMDB: system-table shortcuts")
struct LMDBSystemShortcutTests {
    private static let names = SystemTableNames.default
    private static let date = Date(timeIntervalSinceReferenceDate: 700_000_000.5)

    private func systemRows(_ store: some LocalStore) throws -> [[String: Value]] {
        var rows: [[String: Value]] = []
        for table in [Self.names.operations, Self.names.errors, Self.names.config] {
            rows += try store.read(Query(table, sort: [SortKey("id")])).items.map { item in
                item.values.merging(["_table": .string(table)]) { a, _ in a }
            }
        }
        return rows
    }

    private func sameAsGeneric(_ body: (any LocalStore) throws -> Void) throws {
        let dir = try TempDirectory()
        let lmdb = try LMDBStore(path: dir.storePath)
        defer { try? lmdb.close() }
        let memory = try InMemoryStore()
        #expect((lmdb as Any) is any SystemTableReadShortcuts)
        try body(lmdb)
        try body(memory)
        #expect(try systemRows(lmdb) == systemRows(memory))
    }

    @Test("the operation queue and its high-water mark")
    func queue() throws {
        try sameAsGeneric { store in
            for n in 1...5 { _ = try store.appendOperation(table: "T", itemId: "i\(n)", properties: Array("{\"n\":\(n)}".utf8)) }
            try store.recordError(TableOperationError(id: "e2", operationId: 2))
            try store.recordError(TableOperationError(id: "e3", operationId: 3))
            try store.removeOperation(id: 2)
            #expect(try store.operation(after: 0)?.id == 1)
            #expect(try store.operation(after: 1)?.id == 3)
            try store.write { tx in
                let head = try #require(try tx.operation(after: 1))
                try tx.removeOperation(id: head.id)
                #expect(try tx.operation(after: 1)?.id == 4)
            }
            try store.removeOperation(id: 5)
            #expect(try store.appendOperation(table: "T", itemId: "i6").id == 6)
            #expect(try store.operationErrors().map(\.id) == [])
        }
    }

    @Test("delta tokens next to rows of the same pair written by other code")
    func deltaTokens() throws {
        try sameAsGeneric { store in
            let config = Self.names.config
            let old = "2020-01-01T00:00:00.000Z"
            try store.upsert(
                [
                    ["id": "legacy", "table": "todoitem", "key": "q", "keyType": 0, "value": .string(old)],
                    ["id": "caps", "table": "TODOITEM", "key": "q", "keyType": 0, "value": .string(old)],
                    ["id": "other-key", "table": "TodoItem", "key": "Q", "keyType": 0, "value": .string(old)],
                    ["id": "other-type", "table": "TodoItem", "key": "q", "keyType": 1, "value": .string(old)],
                    ["id": "other-table", "table": "TodoItems", "key": "q", "keyType": 0, "value": .string(old)],
                    ["id": "no-table", "key": "q", "keyType": 0, "value": .string(old)],
                ], into: config)
            try store.setDeltaToken(Self.date, table: "TodoItem", queryId: "q")
            #expect(try store.deltaToken(table: "todoITEM", queryId: "q") == Self.date)
            #expect(try store.read(table: config, id: "legacy") == nil)
            #expect(try store.read(table: config, id: "caps") == nil)
            #expect(try store.read(table: config, id: "other-key") != nil)
            try store.setDeltaToken(Self.date.addingTimeInterval(1), table: "TODOITEM", queryId: "q")
            #expect(try store.deltaToken(table: "TodoItem", queryId: "q") == Self.date.addingTimeInterval(1))
            try store.removeDeltaToken(table: "todoitem", queryId: "q")
            #expect(try store.deltaToken(table: "TodoItem", queryId: "q") == nil)
            try store.setDeltaToken(Self.date, table: "TodoItem", queryId: "other")
        }
    }

    @Test("the queue's head and tail at the ends of the id range, against the generic queries")
    func queueEdges() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        let probes: [Int64] = [.min, -7, -6, -5, -1, 0, 6, 7, 8, .max - 1, .max]
        func check(_ label: String) throws {
            for after in probes {
                let generic = try store.genericFirstOperation(after: after)
                #expect(try store.firstOperation(after: after) == generic, "store, after \(after), \(label)")
                try store.write { tx in
                    let shortcut = try #require(tx as? LMDBTransaction)
                    #expect(try shortcut.firstOperation(after: after) == generic, "transaction, after \(after), \(label)")
                    // The cursor path itself answers (not the generic fallback it has for odd tables).
                    let edge = try #require(try shortcut.checkedContext().queueEdge(Self.names.operations, after: after))
                    #expect(edge.operation == generic, "cursor, after \(after), \(label)")
                }
            }
            try store.write { tx in
                let shortcut = try #require(tx as? LMDBTransaction)
                #expect(try shortcut.largestOperationId() == tx.genericLargestOperationId(), "\(label)")
                let edge = try #require(try shortcut.checkedContext().queueEdge(Self.names.operations, after: nil))
                #expect(try edge.id == tx.genericLargestOperationId(), "cursor, last, \(label)")
                #expect(try shortcut.checkedContext().hasNoOperationErrors(Self.names.errors, operationId: 1) == true)
            }
        }
        try check("empty queue")
        for id: Int64 in [7, -6, 0, .max, .min] {
            try store.upsert([TableOperation(id: id, table: "T", itemId: "i\(id)", properties: [1, 2]).item], into: Self.names.operations)
            try check("after adding \(id)")
        }
        #expect(try store.operation(after: .min)?.id == -6)
        #expect(try store.operation(after: 7)?.id == .max)
        #expect(try store.operation(after: .max) == nil)
        try store.write { tx in
            let shortcut = try #require(tx as? LMDBTransaction)
            #expect(try shortcut.largestOperationId() == .max)
        }
    }

    @Test("the operations of one item, read from the (table, NOCASE itemId) index, against the generic query")
    func itemOperations() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        // Item ids longer than the stored key prefix (480 bytes) share their range with the other long
        // ids of the same prefix; ids that differ only in ASCII case (the same item), in non-ASCII case
        // (different items), tables that differ only in case (different tables).
        let long = String(repeating: "x", count: 600)
        let items = ["a", "A", "b", "é", "É", long + "1", long + "2", long.uppercased() + "1", "", "a\u{0}"]
        var n = 0
        for table in ["T", "t", "T2"] {
            for itemId in items {
                n += 1
                _ = try store.appendOperation(table: table, itemId: itemId, properties: Array("{\"n\":\(n)}".utf8))
            }
        }
        // A row written without properties (read as an operation with none, by both paths).
        try store.upsert([["id": 1000, "table": "T", "tableKind": 0, "itemId": "a"]], into: Self.names.operations)
        let probes = items + ["B", "c", long, long + "3", "È"]
        func generic(_ access: some LocalStoreAccess, _ table: String, _ itemId: String) throws -> [TableOperation] {
            try access.read(
                Query(
                    Self.names.operations,
                    where: Field("table") == .literal(.string(table)) && Field("itemId").equalsIgnoringCase(.literal(.string(itemId))),
                    sort: [SortKey("id")])
            ).items.compactMap(TableOperation.init)
        }
        for table in ["T", "t", "T2", "T3", "t2"] {
            for itemId in probes {
                let expected = try generic(store, table, itemId)
                let label = "\(table)/\(itemId.prefix(8))…(\(itemId.utf8.count) bytes)"
                #expect(try store.itemOperations(table: table, itemId: itemId) == expected, "store, \(label)")
                #expect(try store.pendingOperations(table: table, itemId: itemId) == expected, "\(label)")
                #expect(try store.hasPendingOperation(table: table, itemId: itemId) == !expected.isEmpty, "\(label)")
                // Rolled back (the error thrown) so that every probe starts from the same queue.
                #expect(throws: CancellationError.self) {
                  try store.write { tx in
                    let shortcut = try #require(tx as? LMDBTransaction)
                    #expect(try shortcut.itemOperations(table: table, itemId: itemId) == expected, "transaction, \(label)")
                    // Its own writes seen: a new operation of the item is in the answer.
                    let added = try tx.appendOperation(table: table, itemId: itemId)
                    #expect(try shortcut.itemOperations(table: table, itemId: itemId) == expected + [added], "own write, \(label)")
                    #expect(try generic(tx, table, itemId) == expected + [added], "generic own write, \(label)")
                    throw CancellationError()
                  }
                }
            }
        }
        #expect(try store.itemOperations(table: "T", itemId: "a")?.map(\.itemId) == ["a", "A", "a"])
    }

    @Test("which items of a page have operations, in one call, against the generic query")
    func pendingItems() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        let long = String(repeating: "x", count: 600)
        let longTable = String(repeating: "L", count: 120)
        let items = ["a", "A", "b", "é", long + "1", long.uppercased() + "2", "", "a\u{0}"]
        for table in ["T", "t", longTable] {
            for itemId in items.prefix(table == "t" ? 2 : items.count) {
                _ = try store.appendOperation(table: table, itemId: itemId)
            }
        }
        let probes = items + ["B", "c", long, long + "2", "É", "a\u{0}b"]
        // Tables with operations, one differing only in case, a long name sharing a prefix, none at all.
        for table in ["T", "t", "T2", longTable, longTable + "M", "Empty"] {
            let expected = try probes.map { id in
                try store.count(
                    Self.names.operations,
                    where: Field("table") == .literal(.string(table)) && Field("itemId").equalsIgnoringCase(.literal(.string(id)))) > 0
            }
            #expect(try store.pendingItems(table: table, itemIds: probes) == expected, "store, \(table.prefix(8))")
            #expect(try store.pendingFlags(table: table, itemIds: probes) == expected, "flags, \(table.prefix(8))")
            try store.write { tx in
                let shortcut = try #require(tx as? LMDBTransaction)
                #expect(try shortcut.pendingItems(table: table, itemIds: probes) == expected, "transaction, \(table.prefix(8))")
            }
        }
        // Inside a write, the transaction's own new operation is seen (also by the empty-table seek).
        #expect(throws: CancellationError.self) {
            try store.write { tx in
                let shortcut = try #require(tx as? LMDBTransaction)
                #expect(try shortcut.pendingItems(table: "Empty", itemIds: ["q", "Q", "r"]) == [false, false, false])
                _ = try tx.appendOperation(table: "Empty", itemId: "q")
                #expect(try shortcut.pendingItems(table: "Empty", itemIds: ["q", "Q", "r"]) == [true, true, false])
                throw CancellationError()
            }
        }
        #expect(try store.pendingItems(table: "T", itemIds: []) == [])
    }
}
