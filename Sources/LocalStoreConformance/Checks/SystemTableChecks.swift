import Foundation
import LocalStore

// The three system tables: their columns, the generic API on them, the sync layer's queries,
// operation ids, errors and delta tokens.

extension ConformanceSuite {
    /// The three system tables exist from the moment a store is opened, with exactly the documented
    /// columns, under any spelling of their names, and are not listed by `tableSchemas()`.
    public static func systemTablesExistOnOpen(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let documented: [(String, [String: ColumnType])] = [
                (store.operationTableName, ["id": .integer, "table": .string, "tableKind": .integer, "itemId": .string, "properties": .binary]),
                (store.errorTableName, ["id": .string, "operationId": .integer, "tableKind": .integer, "properties": .binary]),
                (store.configTableName, ["id": .string, "table": .string, "key": .string, "keyType": .integer, "value": .string]),
            ]
            for (name, columns) in documented {
                for spelling in [name, ASCII.lowercased(name), ASCII.uppercased(name)] {
                    let schema = try unwrap(try store.schema(of: spelling), "schema(of: \(spelling)) on a new store")
                    try expectEqual(schema.name, name, "the system table's spelling")
                    var actual: [String: ColumnType] = [:]
                    for c in schema.columns { actual[c.name] = c.type }
                    try expectEqual(actual, columns, "the columns of \(name)")
                    try expectEqual(schema.columns.count, columns.count, "no repeated columns in \(name)")
                    try expectEqual(try store.read(Query(spelling, includeTotalCount: true)), ReadResult(items: [], totalCount: 0), "\(name) starts empty")
                }
            }
            try expectEqual(try store.tableSchemas(), [], "tableSchemas() excludes the system tables")
            let op = try store.appendOperation(table: "T", tableKind: 1, itemId: "i", properties: [0, 255])
            let read = try unwrap(try store.read(table: store.operationTableName, id: .int(op.id)), "operation row")
            try expectIdentical(read, ["id": .int(1), "table": "T", "tableKind": 1, "itemId": "i", "properties": .binary([0, 255])], "an operation row")
        }
    }

    /// The system tables are readable and writable through the generic API with the same rules as user
    /// tables (unknown columns, types, missing ids, merge), and the operations table's integer ids are
    /// ordered numerically.
    public static func systemTablesFollowGenericRules(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let ops = store.operationTableName
            let errors = store.errorTableName
            let config = store.configTableName
            try store.upsert(
                ([10, 9, 100, 2, -1] as [Int64]).map { ["id": .int($0), "table": "T", "tableKind": 0, "itemId": .string("item\($0)"), "properties": .binary([])] },
                into: ops)
            try expectEqual(try store.read(Query(ops)).items.compactMap { $0["id"]?.intValue }, [-1, 2, 9, 10, 100], "numeric id order without a sort")
            try expectEqual(
                try store.read(Query(ops, sort: [SortKey("id", .descending)])).items.compactMap { $0["id"]?.intValue }, [100, 10, 9, 2, -1],
                "numeric id order descending")
            try expectEqual(try store.read(Query(ops, where: Field("id") > 9)).items.compactMap { $0["id"]?.intValue }, [10, 100], "id > 9")
            try expectEqual(try store.operation(after: 9)?.id, 10, "operation(after: 9)")
            try expectEqual(try store.appendOperation(table: "T", itemId: "x").id, 101, "append after the largest id")

            let before = try snapshot(store, [ops, errors, config])
            try expectThrows(code: .unknownColumn, "unknown column in the operations table") {
                try store.upsert([["id": 1, "colour": "red"]], into: ops)
            }
            try expectThrows(code: .typeMismatch, "string id in the operations table") { try store.upsert([["id": "1"]], into: ops) }
            try expectThrows(code: .typeMismatch, "wrong type in the operations table") { try store.upsert([["id": 1, "tableKind": "0"]], into: ops) }
            try expectThrows(code: .typeMismatch, "integer id in the errors table") { try store.upsert([["id": 1]], into: errors) }
            try expectThrows(code: .missingId, "no id in the config table") { try store.upsert([["key": "k"]], into: config) }
            try expectThrows(code: .typeMismatch, "wrong type in the config table") { try store.upsert([["id": "c", "keyType": "0"]], into: config) }
            try expectThrows(code: .unknownColumn, "unknown column in the errors table") { try store.upsert([["id": "e", "message": "x"]], into: errors) }
            try expectUnchanged(store, before, "failed writes to system tables")

            try store.upsert([["id": 2, "itemId": "changed"]], into: ops)
            try expectIdentical(
                try store.read(table: ops, id: .int(2)), ["id": 2, "table": "T", "tableKind": 0, "itemId": "changed", "properties": .binary([])],
                "merge on the operations table")
            try store.upsert([["id": "Cfg", "table": "T", "value": "v"]], into: config)
            try store.upsert([["ID": "cfg", "key": "k"]], into: "ms_tableconfig")
            try expectIdentical(
                try store.read(table: config, id: "CFG"), ["id": "cfg", "table": "T", "key": "k", "keyType": nil, "value": "v"],
                "merge and case-insensitive ids on the config table")
            try store.delete(ids: [.int(2), .int(10)], from: ops)
            try expectEqual(try store.read(Query(ops)).items.compactMap { $0["id"]?.intValue }, [-1, 9, 100, 101], "generic delete on operations")
            try store.delete(matching: Query(ops, where: Field("id") < 50, sort: [SortKey("id", .descending)], top: 1))
            try expectEqual(try store.read(Query(ops)).items.compactMap { $0["id"]?.intValue }, [-1, 100, 101], "delete(matching:) on operations")
        }
    }

    /// The queries the sync layer runs on the system tables return exactly the right rows:
    /// `table == X AND itemId ==[c] Y`, `id > n` sorted by id top 1, `operationId == n`, and
    /// `table == X AND key == Y AND keyType == 0`.
    public static func systemTableSyncQueries(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let ops = store.operationTableName
            let rows: [(Int64, String, String)] = [
                (1, "TodoItem", "abc"), (2, "TodoItem", "ABC"), (3, "Other", "abc"), (4, "TodoItem", "abd"), (5, "todoitem", "abc"),
                (6, "TodoItem", "aBc"), (7, "TodoItem", "ab"), (8, "TodoItem", "abc "), (12, "TodoItem", "AbC"),
            ]
            try store.upsert(shuffled(rows, seed: 8).map { TableOperation(id: $0.0, table: $0.1, itemId: $0.2).item }, into: ops)
            func opIds(_ q: Query) throws -> [Int64] { try store.read(q).items.compactMap { $0["id"]?.intValue } }
            try expectEqual(
                try opIds(Query(ops, where: Field("table") == "TodoItem" && Field("itemId").equalsIgnoringCase("aBC"), sort: [SortKey("id")])),
                [1, 2, 6, 12], "table == X AND itemId ==[c] Y (table compared by bytes)")
            try expectEqual(
                try opIds(Query(ops, where: Field("table") == "TodoItem" && Field("itemId").equalsIgnoringCase("aBC"))), [1, 2, 6, 12],
                "the same without an explicit sort (id order)")
            for (after, next) in [(0, 1), (1, 2), (5, 6), (8, 12), (11, 12)] as [(Int64, Int64)] {
                try expectEqual(
                    try opIds(Query(ops, where: Field("id") > .literal(.int(after)), sort: [SortKey("id")], top: 1)), [next], "id > \(after) top 1")
            }
            try expectEqual(try opIds(Query(ops, where: Field("id") > 12, sort: [SortKey("id")], top: 1)), [], "id > last")
            // The integer id compared with doubles: numeric, whatever plan answers it.
            try expectEqual(try opIds(Query(ops, where: Field("id") == 6.0)), [6], "id == 6.0")
            try expectEqual(try opIds(Query(ops, where: Field("id").isIn([.double(1), .double(12), .double(2.5)]))), [1, 12], "id IN [1.0, 12.0, 2.5]")
            try expectEqual(try opIds(Query(ops, where: Field("id") > 7.5, sort: [SortKey("id")], top: 1)), [8], "id > 7.5 top 1")

            let errors = store.errorTableName
            for (id, op) in [("e1", 2), ("e2", 12), ("E3", 2), ("e4", 20)] as [(String, Int64)] {
                try store.upsert([TableOperationError(id: id, operationId: op, properties: Array(id.utf8)).item], into: errors)
            }
            try expectSameIds(try readIds(store, Query(errors, where: Field("operationId") == 2)), ["e1", "E3"], "operationId == 2")
            try expectSameIds(try readIds(store, Query(errors, where: Field("operationId") == 3)), [], "operationId == 3")

            let config = store.configTableName
            let entries = [
                TableConfigEntry(id: "c1", table: "TodoItem", key: "q", keyType: 0, value: "v1"),
                TableConfigEntry(id: "c2", table: "TodoItem", key: "q", keyType: 1, value: "v2"),
                TableConfigEntry(id: "c3", table: "TodoItem", key: "Q", keyType: 0, value: "v3"),
                TableConfigEntry(id: "c4", table: "Other", key: "q", keyType: 0, value: "v4"),
                TableConfigEntry(id: "c5", table: "TodoItem", key: "q2", keyType: 0, value: "v5"),
            ]
            try store.upsert(shuffled(entries.map(\.item), seed: 9), into: config)
            let p: QueryPredicate = Field("table") == "TodoItem" && Field("key") == "q" && Field("keyType") == 0
            try expectSameIds(try readIds(store, Query(config, where: p)), ["c1"], "table == X AND key == Y AND keyType == 0")
            try expectEqual(try store.read(Query(config, where: p, top: 1)).items.first.flatMap(TableConfigEntry.init), entries[0], "the config entry")
        }
    }

    /// `appendOperation` ids strictly increase for the life of the store: 1, 2, 3…; after removing a
    /// middle one or the newest one, after emptying the queue, after close and reopen, the next id is
    /// higher than every id ever given out (a high-water mark in the config table, written in the
    /// append's transaction); rows written by other code with a larger id are respected.
    public static func appendOperationIds(_ factory: StoreFactory) throws {
        try withWorkspace(factory) { workspace in
            var store = try workspace.open()
            func append(_ item: String) throws -> Int64 {
                let op = try store.appendOperation(table: "TodoItem", tableKind: 0, itemId: item, properties: Array(item.utf8))
                try expectEqual(try store.operation(id: op.id), op, "operation(id:) of the appended operation")
                try expectEqual(try store.operationIdHighWaterMark(), op.id, "the high-water mark after appending \(op.id)")
                return op.id
            }
            try expectEqual(try store.operationIdHighWaterMark(), 0, "no id given out yet")
            try expectEqual(try [append("a"), append("b"), append("c")], [1, 2, 3], "first ids")
            try store.removeOperation(id: 2)
            try expectEqual(try append("d"), 4, "after removing a middle operation")
            try store.removeOperation(id: 4)
            try expectEqual(try append("e"), 5, "after removing the newest operation its id is not given again")
            try expectEqual(try store.pendingOperations().map(\.id), [1, 3, 5], "remaining ids")
            let mark = try unwrap(try store.read(table: store.configTableName, id: .string(TableConfigEntry.operationIdHighWaterId)), "the high-water row")
            try expectIdentical(
                mark, ["id": .string(TableConfigEntry.operationIdHighWaterId), "table": "", "key": "operationIdHighWater",
                       "keyType": .int(TableConfigEntry.localStoreKeyType), "value": "5"], "the high-water row")
            if workspace.factory.isPersistent {
                store = try unwrap(try workspace.reopen(store), "reopen")
                try expectEqual(try store.pendingOperations().map(\.itemId), ["a", "c", "e"], "operations after reopening")
                try expectEqual(try append("f"), 6, "after reopening")
                try store.removeOperation(id: 6)
                store = try unwrap(try workspace.reopen(store), "second reopen")
                try expectEqual(try append("g"), 7, "after removing the newest and reopening")
            }
            let expectedNext = try store.operationIdHighWaterMark() + 1
            for op in try store.pendingOperations() { try store.removeOperation(id: op.id) }
            try expectEqual(try append("h"), expectedNext, "an emptied queue continues after the highest id ever given")
            // Another writer's row with a larger id (the SDK's own upsert of an operation row).
            try store.upsert([TableOperation(id: 40, table: "TodoItem", itemId: "x").item], into: store.operationTableName)
            try expectEqual(try append("i"), 41, "above a larger id written by other code")
            try store.removeOperation(id: 41)
            try store.removeOperation(id: 40)
            try expectEqual(try append("j"), 42, "the mark also covers ids written by other code once passed")
        }
    }

    /// When the operations table holds id `Int64.max` (written by any tool), `appendOperation` fails
    /// with `full` naming the operations table and changes nothing, instead of trapping on overflow;
    /// a damaged high-water mark is `corrupt` naming the config row, also changing nothing.
    public static func appendOperationIdExhausted(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let ops = store.operationTableName
            _ = try store.appendOperation(table: "T", itemId: "a")
            try store.upsert([TableOperation(id: .max, table: "T", itemId: "last").item], into: ops)
            let before = try snapshot(store, [ops, store.errorTableName, store.configTableName])
            let error = try expectThrows(code: .full, "appending when id Int64.max is taken") {
                _ = try store.appendOperation(table: "T", itemId: "b")
            }
            try expect(error.message.contains(ops), "the error names \(ops): \(error.message)")
            try expectEqual(error.table, ops, "the error's table")
            try expectUnchanged(store, before, "a refused append")
            try store.removeOperation(id: .max)
            try expectEqual(try store.appendOperation(table: "T", itemId: "c").id, 2, "appending works again below the maximum")

            try store.upsert(
                [["id": .string(TableConfigEntry.operationIdHighWaterId), "value": "garbage"]], into: store.configTableName)
            let before2 = try snapshot(store, [ops, store.errorTableName, store.configTableName])
            let damaged = try expectThrows(code: .corrupt, "a damaged high-water mark") {
                _ = try store.appendOperation(table: "T", itemId: "d")
            }
            try expect(damaged.message.contains("garbage") && damaged.message.contains(store.configTableName), "the error names the row and value: \(damaged.message)")
            try expectUnchanged(store, before2, "an append refused for a damaged mark")
        }
    }

    /// Inside one `write {}` body every `appendOperation` (and `enqueue`) sees what the body did to the
    /// operations table before it — its own appends, rows upserted or deleted by other calls under any
    /// spelling of the table's name, a failed call, a nested write that rolled back — so it never reuses
    /// an id in use nor skips one: a backend that keeps the queue's largest id for the length of a
    /// transaction must keep it exact.
    public static func appendOperationIdsInsideOneWrite(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let ops = store.operationTableName
            func other(_ id: Int64) -> Item { TableOperation(id: id, table: "T", itemId: "other\(id)", properties: [UInt8(id)]).item }
            try store.write { tx in
                try expectEqual(try tx.appendOperation(table: "T", itemId: "a").id, 1, "the first append")
                try tx.upsert([other(2)], into: ops.uppercased())
                try expectEqual(try tx.appendOperation(table: "T", itemId: "b").id, 3, "above a row upserted by the same body")
                try expectEqual(try tx.operation(id: 2), TableOperation(other(2)), "the upserted row is not overwritten")
                try rolledBack(tx) { inner in
                    try expectEqual(try inner.appendOperation(table: "T", itemId: "c").id, 4, "inside a nested write")
                }
                try expectEqual(try tx.appendOperation(table: "T", itemId: "d").id, 4, "after a nested write that appended rolled back")
                try rolledBack(tx) { inner in
                    try inner.upsert([other(10)], into: ops)
                }
                try tx.write { inner in
                    try expectEqual(try inner.enqueue(.insert, ["id": "q1", "text": "x"], into: "QItem").operation?.id, 5, "an enqueue in a nested write")
                }
                try expectEqual(try tx.appendOperation(table: "T", itemId: "e").id, 6, "after a nested write that upserted rolled back, and one that committed")
                try expectThrows(code: .typeMismatch, "a failed upsert of two rows") {
                    try tx.upsert([other(7), ["id": 8, "tableKind": "bad"]], into: ops)
                }
                try expectEqual(try tx.appendOperation(table: "T", itemId: "f").id, 7, "after a failed upsert wrote nothing")
                // Other code lowering the high-water mark after a delete of the newest rows: the next id
                // is one above the largest left.
                func lowerTheMark() throws {
                    try tx.upsert([["id": .string(TableConfigEntry.operationIdHighWaterId), "value": "0"]], into: store.configTableName)
                }
                try tx.delete(ids: [7], from: ops)
                try lowerTheMark()
                try expectEqual(try tx.appendOperation(table: "T", itemId: "g").id, 7, "after delete(ids:) of the newest and a lowered mark")
                try tx.upsert([other(20)], into: ops)
                try expectEqual(try tx.appendOperation(table: "T", itemId: "h").id, 21, "above a row upserted with a larger id")
                try tx.delete(matching: Query(ops.lowercased(), where: Field("id") >= 20))
                try lowerTheMark()
                try expectEqual(try tx.appendOperation(table: "T", itemId: "i").id, 8, "after delete(matching:) of the newest and a lowered mark")
                try tx.upsert([other(30)], into: ops)
                try expectEqual(try tx.enqueue(.update, ["id": "q1", "text": "y"], into: "QItem").operation?.id, 5, "an enqueue collapsing into its queued insert")
                try expectEqual(try tx.enqueue(.insert, ["id": "q2", "text": "z"], into: "QItem").operation?.id, 31, "an enqueue above an upserted row")
                try lowerTheMark()
                try expectEqual(try tx.enqueue(.update, ["id": "q1", "text": "w"], into: "QItem").operation?.id, 5, "a second collapse into operation 5")
                try expectEqual(try tx.appendOperation(table: "T", itemId: "j").id, 32, "after a collapse rewrote an older operation and a lowered mark")
                // removeOperation of the newest row (written by other code), then of one with errors.
                try tx.upsert([other(40)], into: ops)
                try tx.removeOperation(id: 40)
                try lowerTheMark()
                try expectEqual(try tx.appendOperation(table: "T", itemId: "k").id, 33, "after removeOperation of the newest and a lowered mark")
                try tx.recordError(TableOperationError(id: "e33", operationId: 33))
                try tx.removeOperation(id: 33)
                try lowerTheMark()
                try expectEqual(try tx.appendOperation(table: "T", itemId: "l").id, 33, "after removeOperation of one with errors and a lowered mark")
            }
            // A write that appended and rolled back: the id is given again (nothing outlives a transaction).
            try rolledBack(store) { tx in
                try expectEqual(try tx.appendOperation(table: "T", itemId: "m").id, 34, "in a write that then rolls back")
            }
            try expectEqual(try store.appendOperation(table: "T", itemId: "n").id, 34, "after a rolled-back write")
            try expectEqual(try store.pendingOperations().map(\.id), [1, 2, 3, 4, 5, 6, 7, 8, 30, 31, 32, 33, 34], "the queue after the body")
            try expectEqual(try store.operation(id: 30), TableOperation(other(30)), "a row upserted in the body kept")
            try expectEqual(try store.operationErrors(), [], "the removed operation's error went with it")
            try expectEqual(try store.operationIdHighWaterMark(), 34, "the high-water mark")
        }
    }

    /// The operation queue conveniences: pendingOperations (all, by table, by table and item id
    /// case-insensitively), operation(after:), operation(id:), pendingOperationCount.
    public static func pendingOperationQueries(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let specs: [(String, String)] = [
                ("TodoItem", "abc"), ("TodoItem", "xyz"), ("Other", "abc"), ("TodoItem", "ABC"), ("TodoItem", "abcd"), ("Other", "q"),
            ]
            var appended: [TableOperation] = []
            for (n, (table, item)) in specs.enumerated() {
                appended.append(try store.appendOperation(table: table, tableKind: n % 2, itemId: item, properties: [UInt8(n), 0, 255]))
            }
            try expectEqual(appended.map(\.id), [1, 2, 3, 4, 5, 6], "ids")
            try expectEqual(try store.pendingOperations(), appended, "pendingOperations()")
            try expectEqual(try store.pendingOperationCount(), 6, "pendingOperationCount()")
            try expectEqual(try store.pendingOperations(table: "TodoItem").map(\.id), [1, 2, 4, 5], "pendingOperations(table:)")
            try expectEqual(try store.pendingOperations(table: "Other").map(\.id), [3, 6], "pendingOperations(table: Other)")
            try expectEqual(try store.pendingOperations(table: "None"), [], "pendingOperations(table:) of a table without operations")
            try expectEqual(try store.pendingOperations(table: "TodoItem", itemId: "aBc").map(\.id), [1, 4], "pendingOperations(table:itemId:) case-insensitive")
            try expectEqual(try store.pendingOperations(table: "TodoItem", itemId: "abcd"), [appended[4]], "no prefix match")
            try expectEqual(try store.operation(after: 0), appended[0], "operation(after: 0)")
            try expectEqual(try store.operation(after: 3), appended[3], "operation(after: 3)")
            try expectNil(try store.operation(after: 6), "operation(after: last)")
            try store.removeOperation(id: 4)
            try expectEqual(try store.operation(after: 3), appended[4], "operation(after:) skips a removed id")
            try expectEqual(try store.operation(id: 5), appended[4], "operation(id:)")
            try expectNil(try store.operation(id: 4), "operation(id:) of a removed operation")
            try expectEqual(try store.pendingOperationCount(), 5, "count after removing")
        }
    }

    /// The queue's lookups answer as the queries they stand for, on the store and inside a write (its
    /// own new operations seen): `operation(after:)` as `id > x` sorted by id, top 1, at the ends of the
    /// id range; `pendingOperations(table:itemId:)` and `hasPendingOperation` as `table == t && itemId
    /// equalsIgnoringCase i` sorted by id, and a pulled page's flags (one per item) likewise, for item ids
    /// differing in ASCII case (the same item) or in non-ASCII case (not), long ids sharing a long prefix,
    /// the empty id, ids holding NUL, and tables differing in case (different tables) or with no
    /// operation. A backend that answers them from an index or a cursor must give the same answers.
    public static func queueLookupsAnswerAsTheirQueries(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let ops = store.operationTableName
            func first(_ access: some LocalStoreAccess, after id: Int64) throws -> TableOperation? {
                try access.read(Query(ops, where: Field("id") > .literal(.int(id)), sort: [SortKey("id")], top: 1)).items.first.flatMap(TableOperation.init)
            }
            let probes: [Int64] = [.min, -7, -6, -5, -1, 0, 6, 7, 8, .max - 1, .max]
            func checkEdges(_ label: String) throws {
                for after in probes {
                    let expected = try first(store, after: after)
                    try expectEqual(try store.operation(after: after), expected, "operation(after: \(after)), \(label)")
                    try store.write { tx in
                        try expectEqual(try tx.operation(after: after), expected, "in a write: operation(after: \(after)), \(label)")
                    }
                }
            }
            try checkEdges("empty queue")
            for id: Int64 in [7, -6, 0, .max, .min] {
                try store.upsert([TableOperation(id: id, table: "E", itemId: "i\(id)", properties: [1, 2]).item], into: ops)
                try checkEdges("after adding \(id)")
            }
            try store.write { tx in
                try tx.delete(ids: [.int(7)], from: ops)
                try expectEqual(try tx.operation(after: 0), try first(tx, after: 0), "in a write, after deleting 7")
                try expectEqual(try tx.operation(after: 0)?.id, .max, "in a write, after deleting 7")
            }
            try store.delete(matching: Query(ops))

            let long = String(repeating: "x", count: 600)
            let items = ["a", "A", "b", "é", "É", long + "1", long + "2", long.uppercased() + "1", "", "a\u{0}"]
            var n = 0
            for table in ["T", "t", "T2"] {
                for itemId in items.prefix(table == "t" ? 2 : items.count) + (table == "T2" ? ["only2"] : []) {
                    n += 1
                    _ = try store.appendOperation(table: table, itemId: itemId, properties: Array("{\"n\":\(n)}".utf8))
                }
            }
            // A row written by other code, without properties.
            try store.upsert([["id": 1000, "table": "T", "tableKind": 0, "itemId": "a"]], into: ops)
            let itemProbes = items + ["B", "c", long, long + "3", "È", "a\u{0}b", "only2"]
            func generic(_ access: some LocalStoreAccess, _ table: String, _ itemId: String) throws -> [TableOperation] {
                try access.read(
                    Query(
                        ops, where: Field("table") == .literal(.string(table)) && Field("itemId").equalsIgnoringCase(.literal(.string(itemId))),
                        sort: [SortKey("id")])
                ).items.compactMap(TableOperation.init)
            }
            for table in ["T", "t", "T2", "T3", "t2", "Empty"] {
                var flags: [Bool] = []
                for itemId in itemProbes {
                    let expected = try generic(store, table, itemId)
                    flags.append(!expected.isEmpty)
                    let label = "\(table)/\(itemId.prefix(8).debugDescription) (\(itemId.utf8.count) bytes)"
                    try expectEqual(try store.pendingOperations(table: table, itemId: itemId), expected, "pendingOperations(table:itemId:) \(label)")
                    try expectEqual(try store.hasPendingOperation(table: table, itemId: itemId), !expected.isEmpty, "hasPendingOperation \(label)")
                    try rolledBack(store) { tx in
                        try expectEqual(try tx.pendingOperations(table: table, itemId: itemId), expected, "in a write: \(label)")
                        let added = try tx.appendOperation(table: table, itemId: itemId)
                        try expectEqual(try tx.pendingOperations(table: table, itemId: itemId), expected + [added], "in a write, after its own append: \(label)")
                        try expectEqual(try tx.hasPendingOperation(table: table, itemId: itemId), true, "in a write, after its own append: \(label)")
                        try expectEqual(try tx.pendingFlags(table: table, itemIds: [itemId]), [true], "in a write, a page's flag after its own append: \(label)")
                        try tx.removeOperation(id: added.id)
                        try expectEqual(try tx.pendingOperations(table: table, itemId: itemId), expected, "in a write, after removing its own append: \(label)")
                        try expectEqual(try tx.pendingFlags(table: table, itemIds: [itemId]), [!expected.isEmpty], "in a write, a page's flag after removing its own append: \(label)")
                    }
                }
                try expectEqual(try store.pendingFlags(table: table, itemIds: itemProbes), flags, "a page's flags, \(table)")
                try store.write { tx in
                    try expectEqual(try tx.pendingFlags(table: table, itemIds: itemProbes), flags, "in a write: a page's flags, \(table)")
                }
            }
            try expectEqual(try store.pendingFlags(table: "T", itemIds: []), [], "the flags of an empty page")
        }
    }

    /// `removeOperation(id:)` removes the operation and its errors in one transaction.
    public static func removeOperationRemovesItsErrors(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            _ = try store.appendOperation(table: "T", itemId: "a")
            _ = try store.appendOperation(table: "T", itemId: "b")
            for (id, op) in [("e1", 1), ("e2", 1), ("e3", 2), ("e4", 7)] as [(String, Int64)] {
                try store.recordError(TableOperationError(id: id, operationId: op))
            }
            try store.removeOperation(id: 1)
            try expectEqual(try store.pendingOperations().map(\.id), [2], "operations left")
            try expectEqual(try store.operationErrors().map(\.id), ["e3", "e4"], "errors left")
            let before = try snapshot(store, [store.operationTableName, store.errorTableName])
            try rolledBack(store) { tx in
                try tx.removeOperation(id: 2)
                try expectEqual(try tx.operationErrors().map(\.id), ["e4"], "inside the transaction")
            }
            try expectUnchanged(store, before, "removeOperation rolled back with its transaction")
            try store.removeOperation(id: 99)
            try expectUnchanged(store, before, "removing an absent operation")
        }
    }

    /// Errors: recordError (an upsert by id), operationErrors() ordered by operation id then id,
    /// operationErrors(operationId:), removeError(id:) (case-insensitive id), clearErrors().
    public static func operationErrorsRecordListClear(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            _ = try store.appendOperation(table: "T", itemId: "a")
            let errors = [
                TableOperationError(id: "err-b", operationId: 2, tableKind: 0, properties: Array("{\"status\":409}".utf8)),
                TableOperationError(id: "err-c", operationId: 1, tableKind: 1, properties: Array(0...255)),
                TableOperationError(id: "err-a", operationId: 1, tableKind: 0, properties: []),
                TableOperationError(id: "Err-0", operationId: 3),
            ]
            for e in errors { try store.recordError(e) }
            try expectEqual(try store.operationErrors(), [errors[2], errors[1], errors[0], errors[3]], "ordered by operation id, then id")
            try expectEqual(try store.operationErrors(operationId: 1), [errors[2], errors[1]], "errors of operation 1")
            try expectEqual(try store.operationErrors(operationId: 9), [], "errors of an operation without errors")
            let updated = TableOperationError(id: "ERR-A", operationId: 1, tableKind: 2, properties: [7])
            try store.recordError(updated)
            try expectEqual(try store.operationErrors(operationId: 1), [updated, errors[1]], "recording an error again updates it")
            try store.removeError(id: "err-A")
            try expectEqual(try store.operationErrors().map(\.id), ["err-c", "err-b", "Err-0"], "after removeError (case-insensitive)")
            try store.removeError(id: "nope")
            try store.clearErrors()
            try expectEqual(try store.operationErrors(), [], "after clearErrors()")
            try expectEqual(try store.pendingOperationCount(), 1, "clearErrors leaves the operations")
            try store.clearErrors()
        }
    }

    /// Delta tokens: set, get (millisecond precision), overwrite, remove, independent per table and
    /// query id, stored as the documented config row.
    public static func deltaTokens(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try expectNil(try store.deltaToken(table: "TodoItem", queryId: "all"), "no token yet")
            let precise = Date(timeIntervalSince1970: 1_234_567_890.123_456)
            try store.setDeltaToken(precise, table: "TodoItem", queryId: "all")
            let read = try unwrap(try store.deltaToken(table: "TodoItem", queryId: "all"), "token after set")
            try expectEqual((read.timeIntervalSince1970 * 1000).rounded(), 1_234_567_890_123, "millisecond precision (truncated)")
            let row = try unwrap(try store.read(table: store.configTableName, id: "deltaToken|todoitem|616C6C"), "the config row")
            try expectIdentical(
                row, ["id": "deltaToken|todoitem|616C6C", "table": "TodoItem", "key": "all", "keyType": 0, "value": "2009-02-13T23:31:30.123Z"],
                "the stored config row")

            try store.setDeltaToken(Date(timeIntervalSince1970: 1_700_000_000.5), table: "TodoItem", queryId: "incomplete")
            try store.setDeltaToken(Date(timeIntervalSince1970: 0), table: "Other", queryId: "all")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "incomplete"), Date(timeIntervalSince1970: 1_700_000_000.5), "a second query id")
            try expectEqual(try store.deltaToken(table: "Other", queryId: "all"), Date(timeIntervalSince1970: 0), "another table, the epoch")
            try expectEqual((try store.deltaToken(table: "TodoItem", queryId: "all")).map { ($0.timeIntervalSince1970 * 1000).rounded() }, 1_234_567_890_123, "first token untouched")

            try store.setDeltaToken(Date(timeIntervalSince1970: 1_800_000_000), table: "TodoItem", queryId: "all")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "all"), Date(timeIntervalSince1970: 1_800_000_000), "overwritten")
            try expectEqual(try store.count(store.configTableName), 3, "one row per (table, query id)")
            try expectEqual(
                try store.configEntries().map(\.id),
                ["deltaToken|other|616C6C", "deltaToken|todoitem|616C6C", "deltaToken|todoitem|696E636F6D706C657465"], "configEntries()")

            try store.removeDeltaToken(table: "TodoItem", queryId: "all")
            try expectNil(try store.deltaToken(table: "TodoItem", queryId: "all"), "removed")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "incomplete"), Date(timeIntervalSince1970: 1_700_000_000.5), "other token kept")
            try store.removeDeltaToken(table: "TodoItem", queryId: "all")
            try store.removeDeltaToken(table: "Nope", queryId: "none")
            try expectEqual(try store.count(store.configTableName), 2, "removing absent tokens is fine")
        }
    }

    /// Delta token keys: the pair is validated (table name rule; query id 1...255 bytes, no control
    /// characters, `|` allowed); pairs that collided under the old `deltaToken|table|queryId` id —
    /// `("a|b", "c")` written by other code and `("a", "b|c")`, or query ids differing only in case —
    /// keep both tokens; table names match case-insensitively; a damaged value is `corrupt` naming the
    /// table and query id; one row per pair even when other code wrote it under another id.
    public static func deltaTokenKeys(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let config = store.configTableName
            let before = try snapshot(store, [config])
            let invalid: [(String, String, LocalStoreError.Code)] = [
                ("TodoItem", "", .invalidValue), ("not a table|x", "q", .invalidIdentifier), ("", "q", .invalidIdentifier),
                ("TodoItem", "tab\there", .invalidValue), ("TodoItem", "nul\u{0}", .invalidValue), ("TodoItem", String(repeating: "q", count: 256), .invalidValue),
                ("a|b", "c", .invalidIdentifier),
            ]
            for (table, queryId, code) in invalid {
                try expectThrows(code: code, "setDeltaToken(\(table), \(queryId))") { try store.setDeltaToken(Date(), table: table, queryId: queryId) }
                try expectThrows(code: code, "deltaToken(\(table), \(queryId))") { _ = try store.deltaToken(table: table, queryId: queryId) }
                try expectThrows(code: code, "removeDeltaToken(\(table), \(queryId))") { try store.removeDeltaToken(table: table, queryId: queryId) }
            }
            // Dates the stored form cannot hold (it reads back the years 0000 to 9999).
            for t in [253_402_300_800.0, -62_167_219_200.001, .infinity, -.infinity, .nan, 1e300] {
                let error = try expectThrows(code: .invalidValue, "setDeltaToken at \(t) seconds since 1970") {
                    try store.setDeltaToken(Date(timeIntervalSince1970: t), table: "TodoItem", queryId: "q")
                }
                try expect(error.message.contains("TodoItem") && error.message.contains("q"), "the error names table and query id: \(error.message)")
            }
            try expectUnchanged(store, before, "refused token calls")
            try store.setDeltaToken(date(1), table: "TodoItem", queryId: String(repeating: "é", count: 127))
            // The first and last storable instants.
            for (t, text) in [(-62_167_219_200.0, "0000-01-01T00:00:00.000Z"), (253_402_300_799.999, "9999-12-31T23:59:59.999Z")] {
                try store.setDeltaToken(Date(timeIntervalSince1970: t), table: "Edge", queryId: "q")
                try expectEqual(
                    try store.read(table: config, id: .string(DeltaTokenKey.rowId(table: "Edge", queryId: "q")))?["value"], .string(text), "stored \(text)")
                try expectEqual(try store.deltaToken(table: "Edge", queryId: "q"), DeltaTokenFormat.date(from: text), "read back \(text)")
            }
            try store.removeDeltaToken(table: "Edge", queryId: "q")

            // The colliding pair: ("a|b", "c") written by other code under the old id, then ("a", "b|c").
            try store.upsert([TableConfigEntry(id: "deltaToken|a|b|c", table: "a|b", key: "c", keyType: 0, value: "2020-01-01T00:00:00.000Z").item], into: config)
            try store.setDeltaToken(date(2), table: "a", queryId: "b|c")
            try expectEqual(try store.deltaToken(table: "a", queryId: "b|c"), date(2), "(a, b|c)")
            try expectEqual(
                try store.read(table: config, id: "deltaToken|a|b|c")?["value"], "2020-01-01T00:00:00.000Z", "the other pair's row is kept")
            // Query ids differing in case; table names in any case.
            try store.setDeltaToken(date(3), table: "TodoItem", queryId: "all")
            try store.setDeltaToken(date(4), table: "TodoItem", queryId: "ALL")
            try expectEqual(try store.deltaToken(table: "todoitem", queryId: "all"), date(3), "all")
            try expectEqual(try store.deltaToken(table: "TODOITEM", queryId: "ALL"), date(4), "ALL")
            try expectEqual(try store.deltaTokens(table: "TodoItem").count, 3, "three tokens of TodoItem")

            // Written by other code under its own id (the iOS SDK uses a GUID): read, then replaced.
            try store.upsert([TableConfigEntry(id: "3F2504E0-4F89-11D3-9A0C-0305E82C3301", table: "Notes", key: "q", keyType: 0, value: "2021-05-06T07:08:09.010Z").item], into: config)
            try expectEqual(try store.deltaToken(table: "Notes", queryId: "q"), DeltaTokenFormat.date(from: "2021-05-06T07:08:09.010Z"), "a row under another id")
            try store.setDeltaToken(date(5), table: "Notes", queryId: "q")
            try expectEqual(try store.count(config, where: Field("table") == "Notes"), 1, "one row per pair after setDeltaToken")
            try expectEqual(try store.deltaToken(table: "Notes", queryId: "q"), date(5), "the new value")
            // A key of another type is not a token.
            try store.upsert([TableConfigEntry(id: "setting", table: "Notes", key: "q", keyType: 1, value: "x").item], into: config)
            try expectEqual(try store.deltaToken(table: "Notes", queryId: "q"), date(5), "other key types are ignored")

            // Damaged values.
            for (n, bad) in ["garbage", "", "2026-13-01T00:00:00Z"].enumerated() {
                try store.upsert([["id": .string(DeltaTokenKey.rowId(table: "Damaged", queryId: "q\(n)")), "table": "Damaged", "key": .string("q\(n)"), "keyType": 0, "value": .string(bad)]], into: config)
                let error = try expectThrows(code: .corrupt, "value \(bad)") { _ = try store.deltaToken(table: "Damaged", queryId: "q\(n)") }
                try expect(error.message.contains("Damaged") && error.message.contains("'q\(n)'"), "the error names table and query id: \(error.message)")
            }
            try store.upsert([["id": "other-null", "table": "Damaged", "key": "qn", "keyType": 0, "value": nil]], into: config)
            try expectThrows(code: .corrupt, "a null value") { _ = try store.deltaToken(table: "Damaged", queryId: "qn") }
            try expectThrows(code: .corrupt, "listing damaged tokens") { _ = try store.deltaTokens(table: "Damaged") }

            // List and remove all tokens of a table.
            try expectEqual(try store.deltaTokens(table: "todoITEM"), ["all": date(3), "ALL": date(4), String(repeating: "é", count: 127): date(1)], "deltaTokens(table:)")
            try expectEqual(try store.removeDeltaTokens(table: "Damaged"), 4, "the four damaged rows removed")
            try expectEqual(try store.removeDeltaTokens(table: "TodoItem"), 3, "three removed")
            try expectEqual(try store.deltaTokens(table: "TodoItem"), [:], "none left")
            try expectEqual(try store.deltaTokens(table: "Notes"), ["q": date(5)], "other tables keep theirs")
            try expectEqual(try store.read(table: config, id: "setting")?["value"], "x", "other key types are kept")
        }
    }

    /// `migrateDeltaTokenRows()` moves rows stored under other ids (this package's old
    /// `deltaToken|table|queryId`, SDK GUIDs) to their row ids in one transaction, merging duplicates
    /// into the earliest timestamp, leaving rows with invalid pairs alone.
    public static func deltaTokenMigration(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let config = store.configTableName
            let rows = [
                TableConfigEntry(id: "deltaToken|TodoItem|all", table: "TodoItem", key: "all", keyType: 0, value: "2022-01-01T00:00:00.000Z"),
                TableConfigEntry(id: "GUID-1", table: "todoitem", key: "all", keyType: 0, value: "2021-01-01T00:00:00.000Z"),
                TableConfigEntry(id: "deltaToken|TodoItem|mine", table: "TodoItem", key: "mine", keyType: 0, value: "2023-01-01T00:00:00.000Z"),
                TableConfigEntry(id: "deltaToken|a|b|c", table: "a|b", key: "c", keyType: 0, value: "2020-01-01T00:00:00.000Z"),
                TableConfigEntry(id: "setting", table: "TodoItem", key: "all", keyType: 1, value: "x"),
            ]
            try store.upsert(rows.map(\.item), into: config)
            try expectEqual(try store.migrateDeltaTokenRows(), 3, "three rows moved or merged")
            try expectEqual(
                try store.configEntries().map(\.id).sorted(),
                ["deltaToken|a|b|c", "deltaToken|todoitem|616C6C", "deltaToken|todoitem|6D696E65", "setting"].sorted(), "the rows after migration")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "all"), DeltaTokenFormat.date(from: "2021-01-01T00:00:00.000Z"), "the earliest of the duplicates")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "mine"), DeltaTokenFormat.date(from: "2023-01-01T00:00:00.000Z"), "moved")
            try expectEqual(try store.migrateDeltaTokenRows(), 0, "nothing left to migrate")
        }
    }
}
