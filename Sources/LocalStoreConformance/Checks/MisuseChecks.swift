import Foundation
import LocalStore

// Misuse of a write transaction is `misuse` on every backend (docs/semantics.md, "Writes"): calling
// the store itself from inside its own `write {}` body (instead of a deadlock), using the body's
// transaction after the body returned, and using it from another thread while the body runs. A refused
// call changes nothing, and the store (and the transaction, while its body runs) goes on working.

/// Carries a transaction and what happened to the calls made with it to another thread. The body that
/// owns the transaction waits for that thread, so the two never touch the box at the same time.
final class MisuseProbe: @unchecked Sendable {
    let transaction: any LocalStoreTransaction
    /// One line per call that was not refused with `misuse`.
    var wrongOutcomes: [String] = []
    /// Whether the body passed to `performWrite` on the other thread ran.
    var nestedBodyRan = false

    init(_ transaction: any LocalStoreTransaction) { self.transaction = transaction }
}

/// `nil` when `body` throws a `LocalStoreError` whose code is `misuse`; otherwise what happened instead,
/// prefixed with `call`.
func misuseOutcome(_ call: String, _ body: () throws -> Void) -> String? {
    do {
        try body()
        return "\(call) succeeded"
    } catch let error as LocalStoreError {
        return error.code == .misuse ? nil : "\(call) threw '\(error.code)': \(abbreviated(error.message))"
    } catch {
        return "\(call) threw \(type(of: error)): \(abbreviated(error))"
    }
}

extension ConformanceSuite {
    /// The table the misuse checks write to.
    static let misuseSchema = TableSchema("MisuseItem", ["n": .integer])

    /// The calls a store and a transaction share — read by id, a query, upsert, delete by ids and a nested
    /// `write {}` (whose body, which must not run, calls `bodyRan`) — made on `access` (named `name` in the
    /// messages), each of which must be refused with `misuse`.
    static func sharedCalls(
        _ access: any LocalStoreAccess, _ name: String, bodyRan: @escaping () -> Void
    ) -> [(call: String, run: () throws -> Void)] {
        [
            ("\(name).read(table:id:)", { _ = try access.read(table: "MisuseItem", id: "a") }),
            ("\(name).read(_:) (a query)", { _ = try access.read(Query("MisuseItem")) }),
            ("\(name).upsert", { try access.upsert([["id": "late", "n": 97]], into: "MisuseItem") }),
            ("\(name).delete(ids:from:)", { try access.delete(ids: ["a"], from: "MisuseItem") }),
            ("a nested \(name).write {} (performWrite)", {
                try access.performWrite { inner in
                    bodyRan()
                    try inner.upsert([["id": "late2", "n": 96]], into: "MisuseItem")
                }
            }),
        ]
    }

    /// ``sharedCalls(_:_:bodyRan:)`` made on `access`, each expected to be refused with `misuse`.
    private static func expectAccessCallsRefused(_ access: any LocalStoreAccess, _ name: String, _ situation: String) throws {
        var nestedBodyRan = false
        for (call, run) in sharedCalls(access, name, bodyRan: { nestedBodyRan = true }) {
            try expectThrows(code: .misuse, "\(call) \(situation)", run)
        }
        try expect(!nestedBodyRan, "the body of a refused \(name).write {} \(situation) must not run")
    }

    /// Calls every kind of store call from inside a write body (which must refuse each with `misuse`).
    private static func expectStoreCallsRefused(_ store: any LocalStore, _ situation: String) throws {
        try expectAccessCallsRefused(store, "store", situation)
        try expectThrows(code: .misuse, "store.defineTable \(situation)") {
            try store.defineTable(TableSchema("MisuseOther", ["x": .string]))
        }
    }

    /// Calling the store itself (read by id, query, upsert, delete, a nested `write {}`, `defineTable`)
    /// from inside its own write body, on the body's thread, fails with `misuse` — not a deadlock, not
    /// success — and changes nothing; the transaction then still works and commits, or rolls back, as
    /// usual.
    public static func storeCallsInsideWriteAreMisuse(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(misuseSchema)
            try store.upsert([["id": "a", "n": 1]], into: "MisuseItem")

            // Refused calls, then a commit: only the transaction's own writes are kept.
            try store.write { tx in
                try tx.upsert([["id": "b", "n": 2]], into: "MisuseItem")
                try expectStoreCallsRefused(store, "inside the store's own write body")
                try expectIdentical(try tx.read(table: "MisuseItem", id: "a"), ["id": "a", "n": 1],
                                    "the transaction reads after the refused store calls")
                try expectIdentical(try tx.read(table: "MisuseItem", id: "b"), ["id": "b", "n": 2],
                                    "the transaction sees its own write after the refused store calls")
                try tx.upsert([["id": "c", "n": 3]], into: "MisuseItem")
            }
            try expectSameIds(try readIds(store, Query("MisuseItem", sort: [SortKey("id")])), ["a", "b", "c"],
                              "after a committed write body whose store calls were refused, the table holds")
            try expectIdentical(try store.read(table: "MisuseItem", id: "a"), ["id": "a", "n": 1],
                                "the refused store.delete and store.upsert changed nothing")
            try expectNil(try store.schema(of: "MisuseOther"), "the refused store.defineTable defined a table")

            // Refused calls inside a nested write, then a rollback: nothing of the body is kept.
            let before = try snapshot(store, try allTableNames(store))
            do {
                try store.write { tx in
                    try tx.upsert([["id": "d", "n": 4]], into: "MisuseItem")
                    try tx.write { nested in
                        try nested.upsert([["id": "e", "n": 5]], into: "MisuseItem")
                        try expectStoreCallsRefused(store, "inside a nested tx.write {} of the store's write body")
                    }
                    throw Rollback(marker: 40)
                }
                throw ConformanceFailure("write {} returned although its body threw")
            } catch let error as Rollback {
                try expectEqual(error, Rollback(marker: 40), "the body's error is rethrown unchanged after refused store calls")
            }
            try expectUnchanged(store, before, "after a rolled-back write body whose store calls were refused")
            try expectNil(try store.schema(of: "MisuseOther"), "the refused store.defineTable defined a table")

            // The store goes on working.
            try store.upsert([["id": "f", "n": 6]], into: "MisuseItem")
            try expectIdentical(try store.read(table: "MisuseItem", id: "f"), ["id": "f", "n": 6],
                                "the store works after refusing calls from inside a write body")
        }
    }

    /// Calls every kind of transaction call on `tx` (which must refuse each with `misuse`).
    private static func expectTransactionCallsRefused(_ tx: any LocalStoreTransaction, _ situation: String) throws {
        try expectAccessCallsRefused(tx, "tx", situation)
        try expectThrows(code: .misuse, "tx.delete(matching:) \(situation)") {
            try tx.delete(matching: Query("MisuseItem"))
        }
        try expectThrows(code: .misuse, "tx.appendOperation (a composite call) \(situation)") {
            _ = try tx.appendOperation(table: "MisuseItem", itemId: "a")
        }
    }

    /// A transaction used after its write body returned (committed or rolled back) fails with
    /// `misuse` for reads and writes, and changes nothing.
    public static func transactionAfterBodyIsMisuse(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(misuseSchema)
            var escaped: (any LocalStoreTransaction)?
            try store.write { tx in
                escaped = tx
                try tx.upsert([["id": "a", "n": 1]], into: "MisuseItem")
            }
            let committed = try unwrap(escaped, "the write body ran")
            let before = try snapshot(store, try allTableNames(store))
            try expectTransactionCallsRefused(committed, "after its (committed) write body returned")
            try expectUnchanged(store, before, "after calls on the transaction of a committed write body")

            escaped = nil
            do {
                try store.write { tx in
                    escaped = tx
                    try tx.upsert([["id": "b", "n": 2]], into: "MisuseItem")
                    throw Rollback(marker: 41)
                }
                throw ConformanceFailure("write {} returned although its body threw")
            } catch let error as Rollback {
                try expectEqual(error, Rollback(marker: 41), "the body's error is rethrown unchanged")
            }
            let rolledBack = try unwrap(escaped, "the rolled-back write body ran")
            try expectTransactionCallsRefused(rolledBack, "after its (rolled-back) write body returned")
            try expectUnchanged(store, before, "after calls on the transaction of a rolled-back write body")

            try store.upsert([["id": "c", "n": 3]], into: "MisuseItem")
            try expectSameIds(try readIds(store, Query("MisuseItem", sort: [SortKey("id")])), ["a", "c"],
                              "the store works after refusing ended transactions")
        }
    }

    /// A transaction used from another thread while its write body runs (the body waits for that
    /// thread) fails with `misuse` for reads and writes, and changes nothing; on the body's own thread
    /// it goes on working and commits.
    public static func transactionOnAnotherThreadIsMisuse(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(misuseSchema)
            try store.upsert([["id": "a", "n": 1]], into: "MisuseItem")
            try store.write { tx in
                try tx.upsert([["id": "b", "n": 2]], into: "MisuseItem")
                let probe = MisuseProbe(tx)
                let done = DispatchSemaphore(value: 0)
                let other = Thread {
                    let t = probe.transaction
                    let calls = sharedCalls(t, "tx", bodyRan: { probe.nestedBodyRan = true })
                        + [("tx.delete(matching:)", { try t.delete(matching: Query("MisuseItem")) })]
                    probe.wrongOutcomes = calls.compactMap { misuseOutcome($0.call, $0.run) }
                    done.signal()
                }
                other.start()
                // A bounded wait: a backend whose call blocks on the writer (which waits here) would
                // otherwise hang the suite.
                guard done.wait(timeout: .now() + 30) == .success else {
                    throw ConformanceFailure(
                        "a transaction call from another thread did not return within 30 s while its write body waited (a deadlock instead of misuse)")
                }
                try expect(
                    probe.wrongOutcomes.isEmpty,
                    "a transaction used from another thread while its write body runs must fail with 'misuse': "
                        + probe.wrongOutcomes.joined(separator: "; "))
                try expect(!probe.nestedBodyRan, "the body of a refused tx.write {} from another thread must not run")
                try expectIdentical(try tx.read(table: "MisuseItem", id: "a"), ["id": "a", "n": 1],
                                    "the calls refused on the other thread changed the row")
                try expectSameIds(try readIds(tx, Query("MisuseItem", sort: [SortKey("id")])), ["a", "b"],
                                  "inside the body after the refused calls from another thread")
                try tx.upsert([["id": "c", "n": 3]], into: "MisuseItem")
            }
            try expectSameIds(try readIds(store, Query("MisuseItem", sort: [SortKey("id")])), ["a", "b", "c"],
                              "after the write body committed, the table holds")
            try expectIdentical(try store.read(table: "MisuseItem", id: "a"), ["id": "a", "n": 1],
                                "the refused calls from another thread changed nothing")
        }
    }
}
