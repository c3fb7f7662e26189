import Foundation
import LocalStore

// The store-level rules that keep an edit from being lost between a push and the server's answer
// (docs/semantics.md, "No resolution loses a newer edit"). Each expectation is written by hand.

extension ConformanceSuite {
    /// After a successful push the server's system columns reach the row and a queued delete's stored
    /// item even when a newer change to the item is queued (which keeps its own columns), so the next
    /// push of the item carries the server's `version`; a changed insert that the server accepted is
    /// pushed again as an update.
    public static func completeKeepsServerSystemColumns(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let d1 = Date(timeIntervalSince1970: 1_700_000_001)
            let d2 = Date(timeIntervalSince1970: 1_700_000_002)
            // An edit made while the insert is in flight: a second operation.
            try store.enqueue(.insert, ["id": "a", "text": "a-1"], into: "QItem")
            let sentA = try unwrap(try store.beginPush(), "push a")
            try store.enqueue(.update, ["id": "a", "text": "a-2"], into: "QItem")
            let answerA: Item = ["id": "a", "text": "a-1", "version": "v1", "updatedAt": .date(d1), "serverOnly": 5]
            try expectEqual(try store.complete(sentA, serverItem: answerA), .removed, "the pushed insert is removed")
            try expectIdentical(
                try store.read(table: "QItem", id: "a"), ["id": "a", "text": "a-2", "n": nil, "updatedAt": .date(d1), "version": "v1", "deleted": nil],
                "the newer edit keeps its text and takes the server's version and updatedAt")
            let nextA = try unwrap(try store.nextOperation(), "the edit is queued")
            try expectEqual(try store.pushItem(for: nextA)?["version"], "v1", "the edit is pushed with the server's version")
            try store.removeOperation(id: nextA.id)

            // A delete queued while an update is in flight: its stored item takes the server's version,
            // and the row is not brought back.
            try store.upsert([["id": "b", "text": "b-0", "version": "v0"]], into: "QItem")
            try store.enqueue(.update, ["id": "b", "text": "b-1"], into: "QItem")
            let sentB = try unwrap(try store.beginPush(), "push b")
            try store.enqueue(.delete, ["id": "b"], into: "QItem")
            try expectEqual(try store.complete(sentB, serverItem: ["id": "b", "text": "b-1", "version": "v5", "updatedAt": .date(d2)]), .removed, "b")
            try expectNil(try store.read(table: "QItem", id: "b"), "the deleted row stays deleted")
            let deleteB = try unwrap(try store.queuedOperations(table: "QItem", itemId: "b").first, "the delete is queued")
            try expectEqual(deleteB.kind, .delete, "b's operation")
            try expectEqual(try store.pushItem(for: deleteB)?["version"], "v5", "the delete is pushed with the server's version")
            try expectEqual(try store.pushItem(for: deleteB)?["text"], "b-1", "the delete keeps its own item")
            try store.removeOperation(id: deleteB.id)

            // An edit collapsed into the insert while it was sent (not marked in flight): the operation
            // stays, becomes an update (the server has the item now) and the row takes the server's version.
            try store.enqueue(.insert, ["id": "c", "text": "draft"], into: "QItem")
            let sentC = try unwrap(try store.nextOperation(), "push c")
            try store.enqueue(.update, ["id": "c", "text": "final"], into: "QItem")
            let outcome = try store.complete(sentC, serverItem: ["id": "c", "text": "draft", "version": "v9", "updatedAt": .date(d2)])
            try expectEqual(
                outcome, .changed(QueuedOperation(id: sentC.id, table: "QItem", itemId: "c", kind: .update, version: 3)),
                "the changed insert stays queued as an update")
            try expectIdentical(
                try store.read(table: "QItem", id: "c"), ["id": "c", "text": "final", "n": nil, "updatedAt": .date(d2), "version": "v9", "deleted": nil],
                "the edit keeps its text, with the server's system columns")
        }
    }

    /// A resolution of a failed operation never undoes a change to the item queued after it: cancel
    /// and update merges only the server's system columns (the newer edit is pushed next with the
    /// server's version); cancel and discard removes the item's later operations with the row (none
    /// is left with nothing to push); keep/change refuse an item that would overwrite the newer edit,
    /// and a change to a delete, with `constraint` and nothing changed.
    public static func resolutionsKeepNewerEdits(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            /// `id` synced at v1, an update pushed and failed with 412, and an edit queued meanwhile.
            func failedWithNewerEdit(_ id: String, newer: OperationKind = .update) throws -> PushError {
                try store.upsert([["id": .string(id), "text": .string("\(id)-0"), "version": "v1"]], into: "QItem")
                let queued = try unwrap(try store.enqueue(.update, ["id": .string(id), "text": .string("\(id)-sent")], into: "QItem").operation, id)
                let sent = try unwrap(try store.beginPush(after: queued.id - 1), "push \(id)")
                try expectEqual(sent.itemId, id, "the pushed item")
                try store.enqueue(newer, ["id": .string(id), "text": .string("\(id)-after")], into: "QItem")
                return try store.recordPushError(
                    for: sent, statusCode: 412, message: "precondition failed",
                    serverItem: ["id": .string(id), "text": .string("\(id)-server"), "version": "v7"])
            }
            // Cancel and update: the newer edit keeps its text and takes the server's version.
            let errA = try failedWithNewerEdit("a")
            try store.cancelAndUpdate(errA, with: ["id": "a", "text": "a-server", "version": "v7"])
            try expectEqual(try store.read(table: "QItem", id: "a")?["text"], "a-after", "cancel and update keeps the newer edit")
            let laterA = try store.queuedOperations(table: "QItem", itemId: "a")
            try expectEqual(laterA.map(\.id), [errA.operationId + 1], "only the newer edit stays queued")
            try expectEqual(try store.pushItem(for: laterA[0])?["version"], "v7", "it is pushed with the server's version")
            try expectEqual(try store.pushItem(for: laterA[0])?["text"], "a-after", "and its own text")
            for op in laterA { try store.removeOperation(id: op.id) }

            // Cancel and discard: the later operations go with the row.
            let errB = try failedWithNewerEdit("b")
            try store.cancelAndDiscard(errB)
            try expectNil(try store.read(table: "QItem", id: "b"), "the row is discarded")
            try expectEqual(try store.queuedOperations(table: "QItem", itemId: "b"), [], "no operation is left with nothing to push")

            // Keep and update with a stale item: refused; with the row and the server's version: applied.
            let errC = try failedWithNewerEdit("c")
            let tables = [store.operationTableName, store.errorTableName, "QItem"]
            let before = try snapshot(store, tables)
            try expectThrows(code: .constraint, "keep and update with the pushed text") {
                try store.keepAndUpdate(errC, with: ["id": "c", "text": "c-sent", "version": "v7"])
            }
            try expectThrows(code: .constraint, "change to a delete") {
                try store.changeOperation(errC, to: .delete, item: ["id": "c", "text": "c-after", "version": "v7"])
            }
            try expectUnchanged(store, before, "refused resolutions change nothing")
            let kept = try store.keepAndUpdate(errC, with: ["id": "c", "text": "c-after", "version": "v7"])
            try expectEqual(kept.version, 2, "the kept operation's version")
            try expectEqual(try store.read(table: "QItem", id: "c")?["version"], "v7", "the row takes the server's version")
            try expectEqual(try store.read(table: "QItem", id: "c")?["text"], "c-after", "and keeps the newer edit")
            for op in try store.queuedOperations(table: "QItem", itemId: "c") { try store.removeOperation(id: op.id) }

            // A delete queued after the failed update: cancel and update does not bring the row back,
            // and the delete is pushed with the server's version.
            let errD = try failedWithNewerEdit("d", newer: .delete)
            try store.cancelAndUpdate(errD, with: ["id": "d", "text": "d-server", "version": "v7"])
            try expectNil(try store.read(table: "QItem", id: "d"), "the row stays deleted")
            let laterD = try unwrap(try store.queuedOperations(table: "QItem", itemId: "d").first, "the delete stays queued")
            try expectEqual(laterD.kind, .delete, "d's operation")
            try expectEqual(try store.pushItem(for: laterD)?["version"], "v7", "the delete carries the server's version")
        }
    }

    /// `purge(_:where:queryId:)` removes that query's delta token with the rows (so a pull after it
    /// fetches them again) and leaves the table's other tokens; without a query id no token changes.
    public static func purgeResetsQueryToken(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let d = Date(timeIntervalSince1970: 1_700_000_000)
            try store.upsert([["id": "a"], ["id": "b"]], into: "QItem")
            try store.setDeltaToken(d, table: "QItem", queryId: "q1")
            try store.setDeltaToken(d, table: "QItem", queryId: "q2")
            try expectEqual(try store.purge("QItem", where: Field("id") == "a"), 1, "purge without a query id")
            try expectEqual(try store.deltaToken(table: "QItem", queryId: "q1"), d, "no token is touched without a query id")
            try expectEqual(try store.purge("QItem", queryId: "q1"), 1, "purge with a query id")
            try expectNil(try store.deltaToken(table: "QItem", queryId: "q1"), "that query's token is reset")
            try expectEqual(try store.deltaToken(table: "QItem", queryId: "q2"), d, "the other query's token stays")
            try store.enqueue(.insert, ["id": "c"], into: "QItem")
            try expectThrows(code: .constraint, "pending operations") { try store.purge("QItem", queryId: "q2") }
            try expectEqual(try store.deltaToken(table: "QItem", queryId: "q2"), d, "a refused purge keeps the token")
        }
    }

    /// Collapsing a change into an operation with recorded push errors removes them (they describe a
    /// push of what the operation was), so the next push sends the new content; resolving one of them
    /// afterwards is `constraint` (the operation changed).
    public static func collapseRemovesPushErrors(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            try store.upsert([["id": "a", "text": "a0", "version": "v1"], ["id": "b", "text": "b0", "version": "v1"]], into: "QItem")
            for (id, next) in [("a", OperationKind.update), ("b", .delete)] {
                try store.enqueue(.update, ["id": .string(id), "text": "sent"], into: "QItem")
                let op = try unwrap(try store.queuedOperations(table: "QItem", itemId: id).first, id)
                let error = try store.recordPushError(for: op, statusCode: 412, message: "changed", serverItem: ["id": .string(id), "version": "v2"])
                try expectEqual(try store.operationErrors(operationId: op.id).count, 1, "\(id): recorded")
                let outcome = try store.enqueue(next, ["id": .string(id), "text": "newer"], into: "QItem")
                try expectEqual(outcome.operation?.id, op.id, "\(id): collapsed into the failed operation")
                try expectEqual(try store.operationErrors(operationId: op.id), [], "\(id): collapsing removed the operation's errors")
                try expectThrows(code: .constraint, "\(id): resolving the stale error") { try store.cancelAndDiscard(error) }
            }
        }
    }

    /// An empty string is not an id: `upsert` refuses it with `invalidValue` naming the table and
    /// column (as `enqueue` does), and a batch holding one writes nothing.
    public static func upsertEmptyIdRefused(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let error = try expectThrows(code: .invalidValue, "an empty id") { try store.upsert([["id": ""]], into: "QItem") }
            try expectEqual(error.table, "QItem", "the error's table")
            try expectEqual(error.column, "id", "the error's column")
            try expectThrows(code: .invalidValue, "a batch with an empty id") { try store.upsert([["id": "ok"], ["id": "", "text": "x"]], into: "QItem") }
            try expectEqual(try store.count("QItem"), 0, "nothing of the batch was written")
            try expectNil(try store.read(table: "QItem", id: ""), "reading an empty id is nil")
        }
    }

    /// An operation that was sent and not completed (`sent` record; the answer was lost) is treated as in
    /// flight by `enqueue`: a delete of its item is queued as its own operation instead of cancelling an
    /// insert the server may already have applied.
    public static func sentOperationsDoNotCollapse(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            try store.enqueue(.insert, ["id": "a", "text": "x"], into: "QItem")
            let sent = try unwrap(try store.beginSending(), "sending a").operation
            try store.releaseInFlightOperations()  // the answer was lost: no longer in flight, still sent
            let outcome = try store.enqueue(.delete, ["id": "a"], into: "QItem")
            guard case .added(let delete) = outcome else { throw ConformanceFailure("the delete collapsed into the sent insert: \(outcome)") }
            try expectEqual(try store.queuedOperations().map(\.id), [sent.id, delete.id], "both operations are queued")
        }
    }

    /// `operationsMayBeOnServer()` returns exactly the operations a push marked that may be on the server
    /// (in flight, or sent and never completed), `releaseInFlightOperations()` clears exactly their in-flight
    /// marks, and both still find marks written before the store tracked them (a raw `properties` with
    /// `"state":1` in a store without the `localstore|sentTracking` row, as an earlier version left it).
    public static func markedOperationsAreTracked(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            // A mark written before tracking (as an earlier LocalStore, or an SDK store, would have left it).
            let legacy = try store.appendOperation(table: "QItem", itemId: "old", properties: Array(#"{"state":1,"type":1,"version":1}"#.utf8))
            // The store's first operation wrote the row saying marks are tracked; a store from before has none.
            let config = store.systemTableNames.config
            _ = try unwrap(try store.read(table: config, id: "localstore|sentTracking"), "the row the first operation writes")
            try store.delete(ids: ["localstore|sentTracking"], from: config)
            for n in 0..<5 { try store.enqueue(.insert, ["id": .string("i\(n)"), "text": "x"], into: "QItem") }
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [legacy.id], "the untracked mark is found")
            try expectEqual(try store.releaseInFlightOperations(), 1, "the untracked mark is released")
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [], "nothing is marked")
            try store.removeOperation(id: legacy.id)
            // Marked by a push: one begun (in flight only), one sent.
            let begun = try unwrap(try store.beginPush(), "beginning the head")
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [begun.id], "the begun operation")
            let sent = try unwrap(try store.beginSending(after: begun.id), "sending the next").operation
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [begun.id, sent.id], "both marked")
            try expectEqual(try store.releaseInFlightOperations(), 2, "both were in flight")
            // The sent one may still be on the server (its answer was lost); the begun one was never sent.
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [sent.id], "only the sent operation remains")
            try expectEqual(try unwrap(try store.queuedOperation(id: sent.id), "the sent operation").isInFlight, false, "released")
            try expectEqual(try store.complete(sent), .removed, "completed")
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [], "nothing is marked after completion")
            // A push error settles a sent operation: it did not land.
            let again = try unwrap(try store.beginSending(), "sending the head again").operation
            try store.recordPushError(for: again, statusCode: 400, message: "refused")
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [], "an answered push is not on the server")
            // A rolled-back mark leaves no trace.
            struct Stop: Error {}
            do {
                try store.write { tx in
                    _ = try tx.beginSending(after: again.id)
                    throw Stop()
                }
            } catch is Stop {}
            try expectEqual(try store.operationsMayBeOnServer().map(\.id), [], "the rolled-back mark is gone")
            try expectEqual(try store.pendingOperationCount(), 4, "the queue")
        }
    }
}
