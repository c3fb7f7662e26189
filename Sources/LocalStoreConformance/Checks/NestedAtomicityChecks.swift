import Foundation
import LocalStore

// Every composite call is atomic wherever it runs: inside a caller's `write {}` a call that fails
// leaves nothing behind even when the caller catches the error and commits (docs/semantics.md,
// "Writes"). A backend does this by running a nested `performWrite` in a savepoint.

/// A transaction that forwards every call to `inner` and fails right *after* the `failAt`-th write
/// has been applied (counting upserts and deletes from the start), so the failure lands midway
/// through a composite call. Nested writes are forwarded to the inner transaction's `performWrite`,
/// whose body gets a wrapper sharing the count.
final class FailingTransaction: LocalStoreTransaction, @unchecked Sendable {
    final class Counter: @unchecked Sendable {
        var writes = 0
        let failAt: Int?
        init(failAt: Int?) { self.failAt = failAt }
    }

    struct InjectedFailure: Error, CustomStringConvertible {
        let write: Int
        var description: String { "injected failure after write \(write)" }
    }

    let inner: any LocalStoreTransaction
    let counter: Counter

    init(_ inner: any LocalStoreTransaction, counter: Counter) {
        self.inner = inner
        self.counter = counter
    }

    var systemTableNames: SystemTableNames { inner.systemTableNames }
    func schema(of table: String) throws -> TableSchema? { try inner.schema(of: table) }
    func read(table: String, id: Value) throws -> Item? { try inner.read(table: table, id: id) }
    func read(_ query: Query) throws -> ReadResult { try inner.read(query) }

    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try inner.upsert(items, into: table, options: options)
        try wrote()
    }

    func delete(ids: [Value], from table: String) throws {
        try inner.delete(ids: ids, from: table)
        try wrote()
    }

    func delete(matching query: Query) throws {
        try inner.delete(matching: query)
        try wrote()
    }

    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try inner.performWrite { tx in try body(FailingTransaction(tx, counter: counter)) }
    }

    private func wrote() throws {
        counter.writes += 1
        if counter.writes == counter.failAt { throw InjectedFailure(write: counter.writes) }
    }
}

extension ConformanceSuite {
    /// One typed call (the closure makes exactly one, after reads), run on a transaction, and the state
    /// it starts from.
    struct NestedCase {
        var name: String
        var setUp: (any LocalStore) throws -> Void
        var call: (any LocalStoreTransaction) throws -> Void
    }

    static var nestedCases: [NestedCase] {
        let d1 = Date(timeIntervalSince1970: 1_700_000_001)
        func queued(_ store: any LocalStore) throws -> QueuedOperation {
            guard let op = try store.queuedOperations().first else { throw ConformanceFailure("no queued operation") }
            return op
        }
        /// An item with a pushed (failed) update and a recorded 412.
        func failed(_ store: any LocalStore) throws -> PushError {
            try store.upsert([["id": "f", "text": "f0", "version": "v1"]], into: "QItem")
            try store.enqueue(.update, ["id": "f", "text": "f-local"], into: "QItem")
            guard let op = try store.beginPush() else { throw ConformanceFailure("no operation to push") }
            return try store.recordPushError(for: op, statusCode: 412, message: "changed", serverItem: ["id": "f", "text": "f-server", "version": "v2"])
        }
        return [
            NestedCase(name: "enqueue insert", setUp: { _ in }) { tx in
                try tx.enqueue(.insert, ["id": "n1", "text": "new"], into: "QItem")
            },
            NestedCase(name: "enqueue update collapsing", setUp: { try $0.enqueue(.insert, ["id": "n1", "text": "a"], into: "QItem") }) { tx in
                try tx.enqueue(.update, ["id": "n1", "text": "b"], into: "QItem")
            },
            NestedCase(name: "enqueue delete (to delete)", setUp: { store in
                try store.upsert([["id": "n1", "text": "a"]], into: "QItem")
                try store.enqueue(.update, ["id": "n1", "text": "b"], into: "QItem")
            }) { tx in
                try tx.enqueue(.delete, ["id": "n1"], into: "QItem")
            },
            NestedCase(name: "appendOperation", setUp: { _ in }) { tx in
                _ = try tx.appendOperation(table: "QItem", itemId: "x")
            },
            NestedCase(name: "removeOperation", setUp: { store in
                let op = try store.appendOperation(table: "QItem", itemId: "x")
                try store.recordError(TableOperationError(id: "e1", operationId: op.id))
            }) { tx in
                try tx.removeOperation(id: 1)
            },
            NestedCase(name: "beginSending", setUp: { try $0.enqueue(.insert, ["id": "n1", "text": "a"], into: "QItem") }) { tx in
                _ = try tx.beginSending()
            },
            NestedCase(name: "complete with the server's item", setUp: { store in
                try store.enqueue(.insert, ["id": "c1", "text": "a"], into: "QItem")
                try store.enqueue(.update, ["id": "c2", "text": "b"], into: "QItem")
                _ = try store.beginPush()
            }) { tx in
                guard let op = try tx.queuedOperation(id: 1) else { throw ConformanceFailure("no head") }
                try tx.complete(op, serverItem: ["id": "c1", "text": "a", "version": "v1", "updatedAt": .date(d1)])
            },
            NestedCase(name: "completeAndBeginNext", setUp: { store in
                try store.enqueue(.insert, ["id": "c1", "text": "a"], into: "QItem")
                try store.enqueue(.insert, ["id": "c2", "text": "b"], into: "QItem")
            }) { tx in
                guard let op = try tx.nextOperation() else { throw ConformanceFailure("no head") }
                _ = try tx.completeAndBeginNext(op, serverItem: ["id": "c1", "text": "a", "version": "v1"])
            },
            NestedCase(name: "recordPushError", setUp: { store in
                try store.enqueue(.insert, ["id": "r1", "text": "a"], into: "QItem")
                _ = try store.beginPush()
            }) { tx in
                guard let op = try tx.queuedOperation(id: 1) else { throw ConformanceFailure("no head") }
                try tx.recordPushError(for: op, statusCode: 500, message: "down")
            },
            NestedCase(name: "cancelAndDiscard", setUp: { _ = try failed($0) }) { tx in
                guard let error = try tx.pushErrors().first else { throw ConformanceFailure("no error") }
                try tx.cancelAndDiscard(error)
            },
            NestedCase(name: "cancelAndUpdate", setUp: { _ = try failed($0) }) { tx in
                guard let error = try tx.pushErrors().first else { throw ConformanceFailure("no error") }
                try tx.cancelAndUpdate(error, with: ["id": "f", "text": "f-server", "version": "v2"])
            },
            NestedCase(name: "keepAndUpdate", setUp: { _ = try failed($0) }) { tx in
                guard let error = try tx.pushErrors().first else { throw ConformanceFailure("no error") }
                try tx.keepAndUpdate(error, with: ["id": "f", "text": "merged", "version": "v2"])
            },
            NestedCase(name: "changeOperation to delete", setUp: { _ = try failed($0) }) { tx in
                guard let error = try tx.pushErrors().first else { throw ConformanceFailure("no error") }
                try tx.changeOperation(error, to: .delete, item: ["id": "f", "version": "v2"])
            },
            NestedCase(name: "applyPulledPage", setUp: { store in
                try store.upsert([["id": "p0", "text": "old"], ["id": "p3", "text": "gone soon"]], into: "QItem")
                try store.enqueue(.update, ["id": "p0", "text": "local"], into: "QItem")
            }) { tx in
                try tx.applyPulledPage(
                    [["id": "p0", "text": "server"], ["id": "p1", "text": "x", "updatedAt": .date(d1)], ["id": "p2", "text": "y"],
                     ["id": "p3", "deleted": true]], into: "QItem", queryId: "q")
            },
            NestedCase(name: "purge with a query id", setUp: { store in
                try store.upsert([["id": "a"], ["id": "b"]], into: "QItem")
                try store.setDeltaToken(d1, table: "QItem", queryId: "q")
            }) { tx in
                try tx.purge("QItem", queryId: "q")
            },
            NestedCase(name: "forcePurge", setUp: { store in
                try store.upsert([["id": "a"]], into: "QItem")
                try store.enqueue(.insert, ["id": "b", "text": "x"], into: "QItem")
                _ = try failed(store)
                try store.setDeltaToken(d1, table: "QItem", queryId: "q")
            }) { tx in
                try tx.forcePurge("QItem")
            },
            NestedCase(name: "setDeltaToken", setUp: { store in
                try store.upsert([["id": "other-row", "table": "QItem", "key": "q", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"]], into: store.configTableName)
            }) { tx in
                try tx.setDeltaToken(d1, table: "QItem", queryId: "q")
            },
            NestedCase(name: "releaseInFlightOperations", setUp: { store in
                try store.enqueue(.insert, ["id": "a", "text": "x"], into: "QItem")
                try store.enqueue(.insert, ["id": "b", "text": "x"], into: "QItem")
                _ = try store.beginPush()
                _ = try store.beginPush(after: 1)
            }) { tx in
                try tx.releaseInFlightOperations()
            },
        ]
    }

    /// Every typed call, run inside a caller's `write {}` on a transaction that fails right after its
    /// k-th write (for every k the call makes), with the caller catching the error and committing
    /// other work: nothing of the failed call remains, the caller's own write does. Then the call
    /// without a failure, to show it did write.
    public static func nestedTypedCallsAreAtomic(_ factory: StoreFactory) throws {
        for testCase in nestedCases {
            try withStore(factory) { store in
                try store.defineTable(queueSchema)
                try store.defineTable(TableSchema("Other", ["id": .string]))
                try testCase.setUp(store)
                let tables = try allTableNames(store).filter { $0 != "Other" }
                let before = try snapshot(store, tables)
                // How many writes the call makes.
                let counting = FailingTransaction.Counter(failAt: nil)
                struct Abort: Error {}
                do {
                    try store.write { tx in
                        try testCase.call(FailingTransaction(tx, counter: counting))
                        throw Abort()
                    }
                } catch is Abort {}
                try expectUnchanged(store, before, "\(testCase.name): a rolled-back transaction")
                try expect(counting.writes > 0, "\(testCase.name): the call writes")
                for k in 1...counting.writes {
                    try store.write { tx in
                        do {
                            try testCase.call(FailingTransaction(tx, counter: FailingTransaction.Counter(failAt: k)))
                            throw ConformanceFailure("\(testCase.name): the failure after write \(k) was not raised")
                        } catch is FailingTransaction.InjectedFailure {
                            // The caller catches and goes on.
                        }
                        try tx.upsert([["id": .string("after-\(k)")]], into: "Other", options: .strict)
                    }
                    try expectUnchanged(store, before, "\(testCase.name): failed after write \(k) of \(counting.writes) inside a caller's write")
                    try expect(try store.read(table: "Other", id: .string("after-\(k)")) != nil, "\(testCase.name): the caller's own write commits")
                }
                try store.write { tx in try testCase.call(tx) }
                try expect(try snapshot(store, tables) != before, "\(testCase.name): the call without a failure changes the store")
            }
        }
    }

    /// The reported cases, with real failures: an insert when the operation ids are exhausted (the row
    /// must not stay without its operation), a pulled page whose second item's `updatedAt` is in the
    /// year 10000 (the first item must not stay), a completion whose server item has a wrong type (the
    /// operation must not be removed), and a batch upsert whose second item is wrong — each caught by
    /// the caller inside its `write {}`, which then commits.
    public static func nestedFailuresLeaveNothing(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let tables = try allTableNames(store)
            try store.upsert([TableOperation(id: .max, table: "QItem", itemId: "last").item], into: store.operationTableName)
            var before = try snapshot(store, tables)
            _ = try store.write { tx in
                try expectThrows(code: .full, "enqueue with the ids exhausted") { try tx.enqueue(.insert, ["id": "x1", "text": "x"], into: "QItem") }
            }
            try expectUnchanged(store, before, "a failed enqueue inside a write")
            try store.removeOperation(id: .max)

            before = try snapshot(store, tables)
            let year10000 = Date(timeIntervalSince1970: 253_402_300_800)
            _ = try store.write { tx in
                try expectThrows(code: .invalidValue, "a page with an updatedAt in the year 10000") {
                    try tx.applyPulledPage([["id": "p1", "text": "a"], ["id": "p2", "updatedAt": .date(year10000)]], into: "QItem", queryId: "q")
                }
            }
            try expectUnchanged(store, before, "a failed pulled page inside a write")

            try store.enqueue(.insert, ["id": "c1", "text": "a"], into: "QItem")
            before = try snapshot(store, tables)
            try store.write { tx in
                guard let op = try tx.nextOperation() else { throw ConformanceFailure("no head") }
                try expectThrows(code: .typeMismatch, "a server item with a wrong type") {
                    try tx.complete(op, serverItem: ["id": "c1", "n": "bad"])
                }
            }
            try expectUnchanged(store, before, "a failed completion inside a write")

            before = try snapshot(store, tables)
            _ = try store.write { tx in
                try expectThrows(code: .typeMismatch, "a batch with a wrong item") {
                    try tx.upsert([["id": "b1", "n": 1], ["id": "b2", "n": "two"]], into: "QItem", options: .strict)
                }
            }
            try expectUnchanged(store, before, "a failed batch upsert inside a write")
        }
    }
}
