import Foundation
import LocalStore

// Push errors in the iOS SDK's error layout and the resolution actions, each atomic with the item.

extension ConformanceSuite {
    /// `recordPushError` writes the SDK's error row (`{code, domain, description, table, operation,
    /// itemId, statusCode, item, serverItem}` + `operationVersion`), keeps the operation and clears its
    /// in-flight mark; the four resolutions — cancel and discard, cancel and update, keep and update,
    /// change the kind — change the item's row, the operation and its errors together; a resolution of
    /// an operation that changed or is gone is a `constraint` error that changes nothing.
    public static func pushErrorsAndResolutions(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let d0 = Date(timeIntervalSince1970: 1_600_000_000)
            let d1 = Date(timeIntervalSince1970: 1_700_000_000.5)
            try store.upsert([["id": "b", "text": "b0"], ["id": "c", "text": "c0", "n": 3]], into: "QItem")
            try store.enqueue(.insert, ["id": "a", "text": "a-local", "updatedAt": .date(d0)], into: "QItem")
            try store.enqueue(.update, ["id": "b", "text": "b-local"], into: "QItem")
            try store.enqueue(.delete, ["id": "c"], into: "QItem")
            try store.enqueue(.insert, ["id": "d", "text": "d-local"], into: "QItem")
            try store.enqueue(.insert, ["id": "e", "text": "e-local"], into: "QItem")
            let tables = [store.operationTableName, store.errorTableName, "QItem"]

            // Record: the layout.
            let opA = try unwrap(try store.beginPush(), "push a")
            let server: Item = ["id": "a", "text": "a-server", "version": "v2", "updatedAt": .date(d1), "createdAt": .date(d1), "serverOnly": 1]
            let errA = try store.recordPushError(for: opA, statusCode: 409, message: "conflict", serverItem: server, code: -1170, domain: "com.Microsoft.MicrosoftAzureMobile.ErrorDomain")
            let row = try unwrap(try store.read(table: store.errorTableName, id: .string(errA.id)), "the error row")
            try expectEqual(row["operationId"], .int(opA.id), "operationId column")
            try expectEqual(row["tableKind"], 0, "tableKind column")
            let props = String(decoding: try unwrap(row["properties"]?.binaryValue, "properties"), as: UTF8.self)
            try expectEqual(
                props,
                #"{"code":-1170,"description":"conflict","domain":"com.Microsoft.MicrosoftAzureMobile.ErrorDomain","itemId":"a","operation":0,"operationVersion":1,"serverItem":{"createdAt":"2023-11-14T22:13:20.500Z","id":"a","serverOnly":1,"text":"a-server","updatedAt":"2023-11-14T22:13:20.500Z","version":"v2"},"statusCode":409,"table":"QItem"}"#,
                "the error's properties")
            try expectEqual(try store.pushErrors(), [errA], "pushErrors() reads it back")
            try expect(!(try unwrap(try store.queuedOperation(id: opA.id), "op a")).isInFlight, "a failed operation is no longer in flight")
            try expectEqual(errA.id.count, 36, "a UUID id")

            // Cancel and update with the server item: system properties other than version stripped.
            try store.cancelAndUpdate(errA, with: server)
            try expectIdentical(
                try store.read(table: "QItem", id: "a"), ["id": "a", "text": "a-server", "n": nil, "updatedAt": .date(d0), "version": "v2", "deleted": nil],
                "cancel and update")
            try expectNil(try store.queuedOperation(id: opA.id), "the operation is gone")
            try expectEqual(try store.pushErrors(), [], "its error is gone")

            // Keep and update.
            let opB = try unwrap(try store.queuedOperations(table: "QItem", itemId: "b").first, "op b")
            let errB = try store.recordPushError(for: opB, statusCode: 412, message: "precondition failed", serverItem: ["id": "b", "version": "v9"])
            let keptB = try store.keepAndUpdate(errB, with: ["id": "b", "text": "b-merged", "version": "v9"])
            try expectEqual(keptB, QueuedOperation(id: opB.id, table: "QItem", itemId: "b", kind: .update, version: 2), "keep and update")
            try expectEqual(try store.queuedOperation(id: opB.id), keptB, "stored")
            try expectEqual(try store.read(table: "QItem", id: "b")?["text"], "b-merged", "the item is updated")
            try expectEqual(try store.operationErrors(operationId: opB.id), [], "its errors are removed")

            // Change the kind: a failed delete becomes an update that restores the item.
            let opC = try unwrap(try store.queuedOperations(table: "QItem", itemId: "c").first, "op c")
            try expectEqual(opC.kind, .delete, "c is a delete")
            let errC = try store.recordPushError(for: opC, statusCode: 500, message: "server error")
            try expectEqual(errC.item, opC.item, "a delete's error carries the item that was sent")
            let changedC = try store.changeOperation(errC, to: .update, item: ["id": "c", "text": "c-back"])
            try expectEqual(changedC, QueuedOperation(id: opC.id, table: "QItem", itemId: "c", kind: .update, version: 2), "changed to an update")
            try expectEqual(try store.read(table: "QItem", id: "c")?["text"], "c-back", "the row is back")
            // ...and back to a delete, storing the item.
            let errC2 = try store.recordPushError(for: changedC, statusCode: 400, message: "bad")
            let deletedC = try store.changeOperation(errC2, to: .delete, item: ["id": "c", "text": "c-back"])
            try expectEqual(deletedC.item, ["id": "c", "text": "c-back"], "a delete stores the item")
            try expectNil(try store.read(table: "QItem", id: "c"), "the row is deleted")

            // Cancel and discard.
            let opD = try unwrap(try store.queuedOperations(table: "QItem", itemId: "d").first, "op d")
            let errD = try store.recordPushError(for: opD, statusCode: 409, message: "exists")
            try store.recordError(TableOperationError(id: "other-d", operationId: opD.id))
            try store.cancelAndDiscard(errD)
            try expectNil(try store.read(table: "QItem", id: "d"), "the local item is discarded")
            try expectNil(try store.queuedOperation(id: opD.id), "the operation is gone")
            try expectEqual(try store.operationErrors(operationId: opD.id), [], "all its errors are gone")

            // Stale: the operation changed after the error was recorded, or is gone.
            let opE = try unwrap(try store.queuedOperations(table: "QItem", itemId: "e").first, "op e")
            let errE = try store.recordPushError(for: opE, statusCode: 409, message: "conflict")
            try store.enqueue(.update, ["id": "e", "text": "edited meanwhile"], into: "QItem")
            let before = try snapshot(store, tables)
            for (name, action) in [
                ("cancelAndDiscard", { try store.cancelAndDiscard(errE) }),
                ("cancelAndUpdate", { try store.cancelAndUpdate(errE, with: ["id": "e", "text": "server"]) }),
                ("keepAndUpdate", { _ = try store.keepAndUpdate(errE, with: ["id": "e", "text": "server"]) }),
                ("changeOperation", { _ = try store.changeOperation(errE, to: .delete, item: ["id": "e"]) }),
                ("recordPushError", { _ = try store.recordPushError(for: opE, statusCode: 500, message: "late") }),
                ("resolution of a removed operation", { try store.cancelAndDiscard(errD) }),
            ] as [(String, () throws -> Void)] {
                try expectThrows(code: .constraint, name, action)
                try expectUnchanged(store, before, "\(name) refused")
            }
            // Atomic with the enclosing transaction.
            let fresh = try unwrap(try store.queuedOperations(table: "QItem", itemId: "e").first, "op e now")
            let errE2 = try store.recordPushError(for: fresh, statusCode: 409, message: "again")
            let before2 = try snapshot(store, tables)
            try rolledBack(store) { tx in
                try tx.cancelAndDiscard(errE2)
            }
            try expectUnchanged(store, before2, "a resolution rolled back with its transaction")

            // Damaged properties.
            try store.recordError(TableOperationError(id: "bad", operationId: fresh.id, properties: Array("{\"operation\":9}".utf8)))
            let error = try expectThrows(code: .corrupt, "damaged error properties") { _ = try store.pushErrors() }
            try expect(error.message.contains("'bad'"), "names the error: \(error.message)")
        }
    }
}
