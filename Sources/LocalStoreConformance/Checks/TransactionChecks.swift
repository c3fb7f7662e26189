import Foundation
import LocalStore

// write {}: commit, rollback, visibility of own writes, nesting; delete(ids:); close().

/// The error the checks throw from a `write {}` body to make it roll back.
struct Rollback: Error, Equatable {
    let marker: Int
}

/// Runs `body` in `access.write` and then throws, as a caller undoing its write does: on a store the
/// transaction rolls back, on a transaction the savepoint. A `write` that returns although its body threw
/// fails the check.
func rolledBack(_ access: some LocalStoreAccess, _ body: (any LocalStoreTransaction) throws -> Void) throws {
    do {
        try access.write { tx in
            try body(tx)
            throw Rollback(marker: 0)
        }
        throw ConformanceFailure("write {} returned although its body threw")
    } catch is Rollback {}
}

extension ConformanceSuite {
    /// A `write {}` body's writes to several tables (user rows, an operation, a delta token) commit
    /// together, and `write` returns the body's value.
    public static func writeCommitsAcrossTables(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.defineTable(TableSchema("Notes", ["text": .string]))
            let properties = Array("{\"action\":\"insert\"}".utf8)
            let op = try store.write { tx -> TableOperation in
                try tx.upsert([["id": "a", "title": "one"]], into: "TodoItem")
                try tx.upsert([["id": "n1", "text": "note"]], into: "Notes")
                let op = try tx.appendOperation(table: "TodoItem", tableKind: 0, itemId: "a", properties: properties)
                try tx.setDeltaToken(date(10), table: "TodoItem", queryId: "all")
                return op
            }
            try expectEqual(op, TableOperation(id: 1, table: "TodoItem", tableKind: 0, itemId: "a", properties: properties), "the body's value")
            try expectIdentical(try store.read(table: "TodoItem", id: "a"), todoRow("a", ["title": "one"]), "user row committed")
            try expectIdentical(try store.read(table: "Notes", id: "n1"), ["id": "n1", "text": "note"], "second table committed")
            try expectEqual(try store.pendingOperations(), [op], "operation committed")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "all"), date(10), "delta token committed")
            let count = try store.write { tx in try tx.count("TodoItem") }
            try expectEqual(count, 1, "a read-only write block returns its value")
        }
    }

    /// When the body throws, every write it made (inserts, updates, deletes, across user and system
    /// tables) is undone, and the body's own error is rethrown unchanged.
    public static func writeRollsBackOnError(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.defineTable(TableSchema("Notes", ["text": .string]))
            try store.upsert([["id": "a", "title": "one", "priority": 1], ["id": "b", "title": "two"]], into: "TodoItem")
            try store.upsert([["id": "n1", "text": "x"], ["id": "n2", "text": "y"]], into: "Notes")
            _ = try store.appendOperation(table: "TodoItem", itemId: "a")
            _ = try store.appendOperation(table: "TodoItem", itemId: "b")
            try store.recordError(TableOperationError(id: "e1", operationId: 1, properties: [1, 2]))
            try store.setDeltaToken(date(1), table: "TodoItem", queryId: "q1")
            try store.setDeltaToken(date(2), table: "Notes", queryId: "q2")
            let before = try snapshot(store, try allTableNames(store))

            do {
                try store.write { tx in
                    try tx.upsert([["id": "c", "title": "new"], ["id": "A", "title": "changed", "priority": nil]], into: "TodoItem")
                    try tx.delete(ids: ["b"], from: "TodoItem")
                    try tx.upsert([["id": "n3", "text": "z"]], into: "Notes")
                    try tx.delete(matching: Query("Notes", where: Field("id") != "n3"))
                    _ = try tx.appendOperation(table: "TodoItem", itemId: "c")
                    try tx.removeOperation(id: 1)
                    try tx.recordError(TableOperationError(id: "e2", operationId: 2))
                    try tx.setDeltaToken(date(3), table: "TodoItem", queryId: "q1")
                    try tx.removeDeltaToken(table: "Notes", queryId: "q2")
                    try expectEqual(try tx.count("TodoItem"), 2, "inside the transaction before the error")
                    throw Rollback(marker: 7)
                }
                throw ConformanceFailure("write {} returned although its body threw")
            } catch let error as Rollback {
                try expectEqual(error, Rollback(marker: 7), "the body's error is rethrown unchanged")
            }
            try expectUnchanged(store, before, "after a rolled-back transaction")
            try expectEqual(try store.appendOperation(table: "T", itemId: "x").id, 3, "a rolled-back append does not use up an id")

            let before2 = try snapshot(store, try allTableNames(store))
            try expectThrows(code: .typeMismatch, "a store error thrown out of the body") {
                try store.write { tx in
                    try tx.upsert([["id": "d", "title": "fine"]], into: "TodoItem")
                    try tx.upsert([["id": "e", "priority": "bad"]], into: "TodoItem")
                }
            }
            try expectUnchanged(store, before2, "after a transaction whose call failed")
        }
    }

    /// A failed call inside a transaction writes nothing of its own, while the transaction's other
    /// writes still commit when the body catches the error.
    public static func writeFailedCallInsideTransaction(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "old", "title": "keep"]], into: "TodoItem")
            try store.write { tx in
                try tx.upsert([["id": "a", "title": "first"]], into: "TodoItem")
                try expectThrows(code: .unknownColumn, "bad batch inside a transaction") {
                    try tx.upsert([["id": "b", "title": "good"], ["id": "old", "title": "changed"], ["id": "c", "colour": "red"]], into: "TodoItem")
                }
                try expectThrows(code: .typeMismatch, "bad delete inside a transaction") {
                    try tx.delete(ids: [.string("old"), .int(1)], from: "TodoItem")
                }
                try expectThrows(code: .unknownColumn, "bad delete(matching:) inside a transaction") {
                    try tx.delete(matching: Query("TodoItem", where: Field("colour") == "red"))
                }
                try tx.upsert([["id": "d", "title": "last"]], into: "TodoItem")
            }
            try expectSameIds(try readIds(store, Query("TodoItem")), ["a", "d", "old"], "rows after the transaction")
            try expectIdentical(try store.read(table: "TodoItem", id: "old"), todoRow("old", ["title": "keep"]), "row touched only by failed calls")
        }
    }

    /// Reads through the transaction see its own uncommitted writes.
    public static func writeReadsSeeOwnWrites(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a", "title": "one"], ["id": "gone", "title": "x"]], into: "TodoItem")
            let schema = try store.schema(of: "TodoItem")
            try store.write { tx in
                try tx.upsert([["id": "b", "title": "two"], ["id": "A", "priority": 5]], into: "TodoItem")
                try tx.delete(ids: ["GONE"], from: "TodoItem")
                try expectIdentical(try tx.read(table: "TodoItem", id: "b"), todoRow("b", ["title": "two"]), "inserted row by id")
                try expectIdentical(try tx.read(table: "TodoItem", id: "a"), todoRow("A", ["title": "one", "priority": 5]), "updated row by id")
                try expectNil(try tx.read(table: "TodoItem", id: "gone"), "deleted row by id")
                try expectSameIds(try readIds(tx, Query("TodoItem", sort: [SortKey("title", .descending)])), ["b", "A"], "query")
                try expectEqual(try tx.count("TodoItem", where: Field("priority") == 5), 1, "count with a predicate")
                try expectEqual(try tx.schema(of: "todoitem"), schema, "schema(of:) in a transaction")
                let op = try tx.appendOperation(table: "TodoItem", itemId: "b")
                try expectEqual(try tx.pendingOperations(), [op], "operation appended in the transaction")
                try expectEqual(try tx.appendOperation(table: "TodoItem", itemId: "a").id, 2, "second append sees the first")
                try tx.setDeltaToken(date(4), table: "TodoItem", queryId: "q")
                try expectEqual(try tx.deltaToken(table: "TodoItem", queryId: "q"), date(4), "delta token set in the transaction")
                try tx.delete(matching: Query("TodoItem", where: Field("id") == "b"))
                try expectNil(try tx.read(table: "TodoItem", id: "B"), "row deleted by query")
            }
            try expectSameIds(try readIds(store, Query("TodoItem")), ["A"], "after commit")
            try expectEqual(try store.pendingOperationCount(), 2, "operations after commit")
        }
    }

    /// `tx.write {}` runs in the same transaction as a savepoint: it sees the outer writes, an error that
    /// escapes it rolls back the whole transaction, and one the outer body catches undoes the inner
    /// block's writes only (the outer body's own writes commit).
    public static func writeNestedIsASavepoint(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            let value = try store.write { tx in
                try tx.write { inner -> Int in
                    try inner.upsert([["id": "a"]], into: "TodoItem")
                    return 1
                } + 1
            }
            try expectEqual(value, 2, "values pass through nested blocks")
            try store.write { tx in
                try tx.upsert([["id": "b"]], into: "TodoItem")
                try expectEqual(try tx.write { inner in try inner.count("TodoItem") }, 2, "the inner block sees the outer writes")
            }
            try expectSameIds(try readIds(store, Query("TodoItem")), ["a", "b"], "nested writes committed")
            do {
                try store.write { tx in
                    try tx.upsert([["id": "c"]], into: "TodoItem")
                    try tx.write { inner in
                        try inner.upsert([["id": "d"]], into: "TodoItem")
                        throw Rollback(marker: 1)
                    }
                }
                throw ConformanceFailure("write {} returned although its body threw")
            } catch is Rollback {}
            try expectSameIds(try readIds(store, Query("TodoItem")), ["a", "b"], "an error escaping the inner block rolls back everything")
            try store.write { tx in
                try tx.upsert([["id": "e"]], into: "TodoItem")
                try rolledBack(tx) { inner in
                    try inner.upsert([["id": "f"]], into: "TodoItem")
                }
            }
            try expectSameIds(try readIds(store, Query("TodoItem")), ["a", "b", "e"], "a savepoint: the caught inner block's writes are undone, the outer body's stay")
        }
    }

    /// `delete(ids:)` ignores absent ids (also repeated ones and other spellings of present ones).
    public static func deleteIdsIgnoresAbsentIds(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a"], ["id": "b"], ["id": "c"]], into: "TodoItem")
            try store.delete(ids: ["x", "y"], from: "TodoItem")
            try expectEqual(try store.count("TodoItem"), 3, "deleting absent ids")
            try store.delete(ids: ["x", "b", "B", "b", "z"], from: "TodoItem")
            try expectSameIds(try readIds(store, Query("TodoItem")), ["a", "c"], "absent and repeated ids around a present one")
            try store.delete(ids: [String](), from: "TodoItem")
            try expectEqual(try store.count("TodoItem"), 2, "an empty list")
            try store.delete(ids: [.int(1), .int(5)], from: store.operationTableName)
            try expectEqual(try store.pendingOperationCount(), 0, "absent operation ids")
        }
    }

    /// After `close()` every call fails with `closed`; closing twice is allowed. A persistent store
    /// reopens with its data.
    public static func closeMakesEveryCallFail(_ factory: StoreFactory) throws {
        try withWorkspace(factory) { workspace in
            let store = try workspace.open()
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a", "title": "kept"]], into: "TodoItem")
            _ = try store.appendOperation(table: "TodoItem", itemId: "a")
            try store.close()
            let calls: [(String, () throws -> Void)] = [
                ("defineTable", { try store.defineTable(TableSchema("New", ["x": .string])) }),
                ("defineTable of an existing table", { try store.defineTable(todoSchema) }),
                ("tableSchemas", { _ = try store.tableSchemas() }),
                ("schema(of:)", { _ = try store.schema(of: "TodoItem") }),
                ("schema(of:) of an unknown table", { _ = try store.schema(of: "Nope") }),
                ("systemProperties(for:)", { _ = try store.systemProperties(for: "TodoItem") }),
                ("read by id", { _ = try store.read(table: "TodoItem", id: "a") }),
                ("read by query", { _ = try store.read(Query("TodoItem")) }),
                ("read of an unknown table", { _ = try store.read(Query("Nope")) }),
                ("count", { _ = try store.count("TodoItem") }),
                ("upsert", { try store.upsert([["id": "b"]], into: "TodoItem") }),
                ("empty upsert", { try store.upsert([], into: "TodoItem") }),
                ("delete ids", { try store.delete(ids: ["a"], from: "TodoItem") }),
                ("delete of no ids", { try store.delete(ids: [String](), from: "TodoItem") }),
                ("delete of no ids from an unknown table", { try store.delete(ids: [String](), from: "Nope") }),
                ("delete matching", { try store.delete(matching: Query("TodoItem")) }),
                ("write", { try store.write { _ in } }),
                ("appendOperation", { _ = try store.appendOperation(table: "TodoItem", itemId: "a") }),
                ("pendingOperations", { _ = try store.pendingOperations() }),
                ("operation(after:)", { _ = try store.operation(after: 0) }),
                ("pendingOperationCount", { _ = try store.pendingOperationCount() }),
                ("removeOperation", { try store.removeOperation(id: 1) }),
                ("recordError", { try store.recordError(TableOperationError(id: "e", operationId: 1)) }),
                ("operationErrors", { _ = try store.operationErrors() }),
                ("clearErrors", { try store.clearErrors() }),
                ("deltaToken", { _ = try store.deltaToken(table: "TodoItem", queryId: "q") }),
                ("setDeltaToken", { try store.setDeltaToken(date(0), table: "TodoItem", queryId: "q") }),
                ("removeDeltaToken", { try store.removeDeltaToken(table: "TodoItem", queryId: "q") }),
            ]
            for (label, call) in calls {
                try expectThrows(code: .closed, "\(label) after close()") { try call() }
            }
            try store.close()
            try store.close()
            if let reopened = try workspace.reopen(store) {
                try expectIdentical(try reopened.read(table: "TodoItem", id: "a"), todoRow("a", ["title": "kept"]), "data after reopening")
                try expectEqual(try reopened.pendingOperationCount(), 1, "operations after reopening")
            }
        }
    }
}
