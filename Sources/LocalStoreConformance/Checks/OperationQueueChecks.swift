import Foundation
import LocalStore

// The typed operation queue: record layout, the SDKs' collapse table, versions and compare-and-remove,
// push helpers. Every expectation below is written out by hand from the SDKs' documented behaviour
// (docs/semantics.md, "The typed operation queue"), never computed by the code under test.

extension ConformanceSuite {
    static let queueSchema = TableSchema(
        "QItem", ["id": .string, "text": .string, "n": .integer, "updatedAt": .date, "version": .string, "deleted": .boolean])

    /// What one cell of the collapse table must leave behind: the item's operations (kind, version,
    /// in flight) in id order and whether the item's row exists; `nil` operations means an error.
    struct CollapseExpectation {
        var existing: OperationKind?
        var inFlight: Bool
        var new: OperationKind
        /// `nil`: the call fails with `constraint` and changes nothing.
        var operations: [(OperationKind, Int64, Bool)]?
        var rowExists: Bool
    }

    static let collapseTable: [CollapseExpectation] = [
        // No pending operation: always a new operation.
        .init(existing: nil, inFlight: false, new: .insert, operations: [(.insert, 1, false)], rowExists: true),
        .init(existing: nil, inFlight: false, new: .update, operations: [(.update, 1, false)], rowExists: true),
        .init(existing: nil, inFlight: false, new: .delete, operations: [(.delete, 1, false)], rowExists: false),
        // Pending, not in flight (iOS condenseAction).
        .init(existing: .insert, inFlight: false, new: .insert, operations: nil, rowExists: true),
        .init(existing: .insert, inFlight: false, new: .update, operations: [(.insert, 2, false)], rowExists: true),
        .init(existing: .insert, inFlight: false, new: .delete, operations: [], rowExists: false),
        .init(existing: .update, inFlight: false, new: .insert, operations: nil, rowExists: true),
        .init(existing: .update, inFlight: false, new: .update, operations: [(.update, 2, false)], rowExists: true),
        .init(existing: .update, inFlight: false, new: .delete, operations: [(.delete, 2, false)], rowExists: false),
        .init(existing: .delete, inFlight: false, new: .insert, operations: nil, rowExists: false),
        .init(existing: .delete, inFlight: false, new: .update, operations: nil, rowExists: false),
        .init(existing: .delete, inFlight: false, new: .delete, operations: nil, rowExists: false),
        // Pending and in flight: an allowed result becomes a new operation; forbidden stays forbidden.
        .init(existing: .insert, inFlight: true, new: .insert, operations: nil, rowExists: true),
        .init(existing: .insert, inFlight: true, new: .update, operations: [(.insert, 1, true), (.update, 1, false)], rowExists: true),
        .init(existing: .insert, inFlight: true, new: .delete, operations: [(.insert, 1, true), (.delete, 1, false)], rowExists: false),
        .init(existing: .update, inFlight: true, new: .insert, operations: nil, rowExists: true),
        .init(existing: .update, inFlight: true, new: .update, operations: [(.update, 1, true), (.update, 1, false)], rowExists: true),
        .init(existing: .update, inFlight: true, new: .delete, operations: [(.update, 1, true), (.delete, 1, false)], rowExists: false),
        .init(existing: .delete, inFlight: true, new: .insert, operations: nil, rowExists: false),
        .init(existing: .delete, inFlight: true, new: .update, operations: nil, rowExists: false),
        .init(existing: .delete, inFlight: true, new: .delete, operations: nil, rowExists: false),
    ]

    /// The collapse table: every pair of existing pending operation (none, insert, update, delete; in
    /// flight or not) × new change (insert, update, delete) leaves the queue and the item's row as the
    /// iOS SDK does; forbidden pairs are `constraint` errors that change nothing; a delete stores the
    /// item; an update turned into a delete keeps its id.
    public static func queueCollapseTable(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            try store.defineTable(TableSchema("Other", ["text": .string]))
            try store.upsert([["id": "k1", "text": "other table"]], into: "Other")
            _ = try store.enqueue(.update, ["id": "k1", "text": "unrelated"], into: "Other")
            for (n, cell) in collapseTable.enumerated() {
                let itemId = "item\(n)"
                let context = "existing \(cell.existing.map(String.init(describing:)) ?? "none")\(cell.inFlight ? " (in flight)" : ""), new \(cell.new)"
                // Arrange the existing operation.
                var existingId: Int64? = nil
                if let existing = cell.existing {
                    if existing != .insert { try store.upsert([["id": .string(itemId), "text": "server", "n": 1]], into: "QItem") }
                    let outcome = try store.enqueue(existing, ["id": .string(itemId), "text": "first", "n": 2], into: "QItem")
                    let op = try unwrap(outcome.operation, "\(context): the existing operation")
                    existingId = op.id
                    if cell.inFlight {
                        let marked = try unwrap(try store.beginPush(after: op.id - 1), "\(context): beginPush")
                        try expectEqual(marked.id, op.id, "\(context): beginPush marks the existing operation")
                        try expect(marked.isInFlight, "\(context): marked in flight")
                    }
                } else if cell.new != .insert {
                    try store.upsert([["id": .string(itemId), "text": "server", "n": 1]], into: "QItem")
                }
                let tables = [store.operationTableName, store.errorTableName, "QItem", "Other"]
                let before = try snapshot(store, tables)
                let change: Item = ["id": .string(itemId), "text": "second", "n": 3]
                guard let expected = cell.operations else {
                    let error = try expectThrows(code: .constraint, "\(context): forbidden") { try store.enqueue(cell.new, change, into: "QItem") }
                    try expect(error.message.contains(itemId) && error.message.contains("QItem"), "\(context): the error names the item: \(error.message)")
                    try expectUnchanged(store, before, "\(context): a forbidden change leaves the store as it was")
                    continue
                }
                let outcome = try store.enqueue(cell.new, change, into: "QItem")
                let ops = try store.queuedOperations(table: "QItem", itemId: itemId)
                try expectEqual(ops.map(\.kind), expected.map(\.0), "\(context): the item's operation kinds")
                try expectEqual(ops.map(\.version), expected.map(\.1), "\(context): the operations' versions")
                try expectEqual(ops.map(\.isInFlight), expected.map(\.2), "\(context): in flight")
                let row = try store.read(table: "QItem", id: .string(itemId))
                try expectEqual(row != nil, cell.rowExists, "\(context): the item's row exists")
                if let row { try expectEqual(row["text"], "second", "\(context): the row holds the new change") }
                if let existingId, !cell.inFlight {
                    // Collapsed into the existing operation: same id (or removed), no new id used.
                    try expectEqual(ops.map(\.id), expected.isEmpty ? [] : [existingId], "\(context): collapsed into operation #\(existingId)")
                }
                if let newest = ops.last {
                    try expectEqual(outcome.operation, newest, "\(context): the outcome shows the queued operation")
                    if newest.kind == .delete {
                        let item = try unwrap(newest.item, "\(context): a delete stores the item")
                        try expectEqual(item, ["id": .string(itemId), "text": "second", "n": 3, "updatedAt": nil, "version": nil, "deleted": nil],
                                        "\(context): the delete's item is the stored row overlaid with the change")
                    } else {
                        try expectNil(newest.item, "\(context): inserts and updates store no item")
                    }
                } else {
                    try expectEqual(outcome, .removed(operationId: try unwrap(existingId, context)), "\(context): the outcome")
                }
            }
            try expectEqual(try store.queuedOperations(table: "Other", itemId: "k1").map(\.kind), [.update], "other tables are untouched")
            // The rule function agrees with the table.
            for cell in collapseTable {
                let rule = CollapseRule.decide(existing: cell.existing, inFlight: cell.inFlight, new: cell.new)
                try expectEqual(rule == .notSupported, cell.operations == nil, "CollapseRule.decide for \(cell.existing.map(String.init(describing:)) ?? "none") × \(cell.new)")
            }
        }
    }

    /// The newest operation of the item decides: with an in-flight insert and a queued update, another
    /// update collapses into the update, a delete turns it into a delete, and completing the insert with
    /// a server item does not overwrite the newer local change.
    public static func queueCollapseUsesNewestOperation(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let insert = try unwrap(try store.enqueue(.insert, ["id": "a", "text": "v1"], into: "QItem").operation, "insert")
            let pushed = try unwrap(try store.beginPush(), "beginPush")
            try expectEqual(pushed.id, insert.id, "the head")
            let update = try store.enqueue(.update, ["id": "A", "text": "v2"], into: "QItem")
            guard case .added(let second) = update else { throw ConformanceFailure("an update during the push must be added, got \(update)") }
            try expectEqual(second.itemId, "A", "a new operation has the change's spelling of the id")
            try expectEqual(
                try store.enqueue(.update, ["id": "a", "text": "v3"], into: "QItem"),
                .kept(QueuedOperation(id: second.id, table: "QItem", itemId: "A", kind: .update, version: 2)), "collapses into the newest")
            try expectEqual(try store.complete(pushed, serverItem: ["id": "a", "text": "server", "extra": 1]), .removed, "the in-flight insert completes")
            try expectEqual(try store.read(table: "QItem", id: "a")?["text"], "v3", "the server item does not overwrite a newer local change")
            try expectEqual(try store.queuedOperations().map(\.kind), [.update], "the update remains")
            let deleted = try store.enqueue(.delete, ["id": "a"], into: "QItem")
            guard case .changedToDelete(let op) = deleted else { throw ConformanceFailure("update + delete must become a delete, got \(deleted)") }
            try expectEqual(op.id, second.id, "same id")
            try expectEqual(op.version, 3, "version incremented")
            let pushItem = try unwrap(try store.pushItem(for: op), "the delete's push item")
            try expectEqual(pushItem["text"], "v3", "the delete sends the item as it was")
            try expectNil(try store.read(table: "QItem", id: "a"), "the row is deleted")
        }
    }

    /// The lost-edit race (issue 12, point 3): an edit made while the item's operation is pushed
    /// collapses into it; a plain `removeOperation(id:)` after the server answers loses the edit,
    /// `complete` sees the changed version and keeps the operation. With the operation marked in
    /// flight the edit is queued separately and survives `complete` too.
    public static func queueLostEditRace(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            for (itemId, usesComplete) in [("plain", false), ("guarded", true)] {
                try store.enqueue(.insert, ["id": .string(itemId), "text": "draft"], into: "QItem")
                // The push reads the head (not marked in flight) and sends it...
                let sent = try unwrap(try store.queuedOperations(table: "QItem", itemId: itemId).first, "\(itemId): the operation")
                let sentItem = try unwrap(try store.pushItem(for: sent), "\(itemId): the pushed item")
                try expectEqual(sentItem["text"], "draft", "\(itemId): the push sends the draft")
                // ...while the user edits the item.
                try expectEqual(
                    try store.enqueue(.update, ["id": .string(itemId), "text": "final"], into: "QItem"),
                    .kept(QueuedOperation(id: sent.id, table: "QItem", itemId: itemId, kind: .insert, version: 2)), "\(itemId): the edit collapses into the insert")
                // The server answers for the draft.
                if usesComplete {
                    let outcome = try store.complete(sent)
                    try expectEqual(outcome, .changed(QueuedOperation(id: sent.id, table: "QItem", itemId: itemId, kind: .update, version: 3)), "\(itemId): complete keeps the changed operation, now an update (the server has the item)")
                    let again = try unwrap(try store.nextOperation(after: sent.id - 1), "\(itemId): the edit is still queued")
                    try expectEqual(try store.pushItem(for: again)?["text"], "final", "\(itemId): the next push sends the edit")
                    try expectEqual(try store.complete(again), .removed, "\(itemId): completing the current version removes it")
                } else {
                    try store.removeOperation(id: sent.id)
                    try expectEqual(try store.queuedOperations(table: "QItem", itemId: itemId), [], "\(itemId): a plain remove leaves nothing queued")
                    try expectEqual(try store.read(table: "QItem", id: .string(itemId))?["text"], "final", "\(itemId): the edit exists only locally: lost for the server")
                }
            }
            // In flight: the edit becomes its own operation.
            try store.enqueue(.insert, ["id": "flight", "text": "draft"], into: "QItem")
            let head = try unwrap(try store.beginPush(), "beginPush")
            try expectEqual(head.itemId, "flight", "the head")
            try store.enqueue(.update, ["id": "flight", "text": "final"], into: "QItem")
            try expectEqual(try store.complete(head), .removed, "the in-flight insert completes")
            let left = try store.queuedOperations(table: "QItem", itemId: "flight")
            try expectEqual(left.map(\.kind), [.update], "the edit is still queued")
            try expectEqual(try store.complete(head), .missing, "completing twice")
        }
    }

    /// The `properties` layout is the iOS SDK's JSON (`{"type":N}`, a delete's `"item"`) plus
    /// `"version"` and `"state"`; rows written by other code in the SDK's layout (no version: 1), with
    /// kind names, or with extra keys are read, extra keys survive a rewrite, and damaged properties
    /// are a `corrupt` error naming the operation.
    public static func queueRecordLayout(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let ops = store.operationTableName
            let date = Date(timeIntervalSince1970: 1_700_000_000.25)
            try store.enqueue(.insert, ["id": "i", "text": "x", "updatedAt": .date(date)], into: "QItem")
            try store.enqueue(.delete, ["id": "i2", "text": "gone", "n": 7], into: "QItem")
            func properties(_ id: Int64) throws -> String {
                String(decoding: try unwrap(try store.read(table: ops, id: .int(id))?["properties"]?.binaryValue, "properties of #\(id)"), as: UTF8.self)
            }
            try expectEqual(try properties(1), #"{"type":0,"version":1}"#, "an insert's properties")
            try expectEqual(
                try properties(2), #"{"item":{"id":"i2","n":7,"text":"gone"},"type":2,"version":1}"#,
                "a delete's properties (the SDK's {\"type\":2,\"item\":{…}} plus version)")
            try expectEqual(try store.operation(id: 1)?.table, "QItem", "the table column")
            try expectEqual(try store.operation(id: 1)?.itemId, "i", "the itemId column")
            _ = try store.beginPush()
            try expectEqual(try properties(1), #"{"state":1,"type":0,"version":1}"#, "in flight")
            try expectEqual(try store.releaseInFlightOperations(), 1, "one operation released")
            try expectEqual(try properties(1), #"{"type":0,"version":1}"#, "released")

            // Written by other code.
            try store.upsert([TableOperation(id: 10, table: "QItem", itemId: "s", properties: Array(#"{"type":1}"#.utf8)).item], into: ops)
            try store.upsert([TableOperation(id: 11, table: "QItem", itemId: "j", properties: Array(#"{"type":"delete","item":{"id":"j","updatedAt":"2023-11-14T22:13:20.250Z"},"by":"js"}"#.utf8)).item], into: ops)
            try expectEqual(try store.queuedOperation(id: 10), QueuedOperation(id: 10, table: "QItem", itemId: "s", kind: .update), "the SDK's layout without a version")
            let js = try unwrap(try store.queuedOperation(id: 11), "a kind name")
            try expectEqual(js.kind, .delete, "a kind given by name")
            try expectEqual(js.extraProperties, ["by": "js"], "extra keys")
            try expectEqual(try store.pushItem(for: js)?["updatedAt"], .date(date), "a snapshot's date string read back as a date for a date column")
            try store.enqueue(.update, ["id": "s", "text": "t"], into: "QItem")
            try expectEqual(try properties(10), #"{"type":1,"version":2}"#, "rewritten in the package's layout")
            _ = try store.beginPush(after: 10)
            try expectEqual(try properties(11), #"{"by":"js","item":{"id":"j","updatedAt":"2023-11-14T22:13:20.250Z"},"state":1,"type":2,"version":1}"#, "extra keys survive a rewrite")

            for (n, bad) in ["", "garbage", "[1]", #"{"type":7}"#, #"{"item":{}}"#, #"{"type":0,"version":"2"}"#].enumerated() {
                let id = Int64(20 + n)
                try store.upsert([TableOperation(id: id, table: "QItem", itemId: "bad\(n)", properties: Array(bad.utf8)).item], into: ops)
                let error = try expectThrows(code: .corrupt, "properties \(bad)") { _ = try store.queuedOperation(id: id) }
                try expect(error.message.contains("#\(id)") && error.message.contains("bad\(n)"), "the error names the operation: \(error.message)")
                try store.delete(ids: [.int(id)], from: ops)
            }
        }
    }

    /// `enqueue` validates before writing: unknown table, a system table, a missing or non-string id
    /// (an insert without id gets a UUID), an insert of an existing row, a bad column — each a typed
    /// error that leaves the store as it was; a failed enqueue inside `write {}` rolls back with it.
    public static func queueEnqueueValidation(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            try store.upsert([["id": "there", "text": "pulled"]], into: "QItem")
            let tables = [store.operationTableName, store.errorTableName, store.configTableName, "QItem"]
            let before = try snapshot(store, tables)
            try expectThrows(code: .unknownTable, "unknown table") { try store.enqueue(.insert, ["id": "x"], into: "Nope") }
            try expectThrows(code: .reservedName, "a system table") { try store.enqueue(.insert, ["id": "x"], into: store.configTableName) }
            try expectThrows(code: .missingId, "an update without id") { try store.enqueue(.update, ["text": "x"], into: "QItem") }
            try expectThrows(code: .typeMismatch, "a numeric id") { try store.enqueue(.update, ["id": 5], into: "QItem") }
            try expectThrows(code: .invalidValue, "an empty id") { try store.enqueue(.delete, ["id": ""], into: "QItem") }
            try expectThrows(code: .constraint, "an insert of an existing row") { try store.enqueue(.insert, ["id": "THERE"], into: "QItem") }
            try expectThrows(code: .unknownColumn, "a bad column") { try store.enqueue(.update, ["id": "there", "colour": "red"], into: "QItem") }
            try expectThrows(code: .typeMismatch, "a bad value") { try store.enqueue(.insert, ["id": "new", "n": "seven"], into: "QItem") }
            try expectUnchanged(store, before, "refused enqueues")
            try rolledBack(store) { tx in
                try tx.enqueue(.insert, ["id": "rolled", "text": "x"], into: "QItem")
            }
            try expectUnchanged(store, before, "an enqueue rolled back with its transaction")
            let generated = try unwrap(try store.enqueue(.insert, ["text": "no id"], into: "QItem").operation, "insert without id")
            try expectEqual(generated.itemId.count, 36, "a UUID")
            try expectEqual(generated.itemId, ASCII.uppercased(generated.itemId), "upper case, as CFUUIDCreateString")
            try expectEqual(try store.read(table: "QItem", id: .string(generated.itemId))?["text"], "no id", "the row has the generated id")
        }
    }

    /// Push helpers: `beginPush(after:)` walks the queue in id order marking each operation in
    /// flight; `complete` with a server item updates the row (unknown columns ignored) when no other
    /// operation is queued for it, and removes the operation's errors; `complete` of a changed or
    /// missing operation says so; `releaseInFlightOperations` clears the marks.
    public static func queuePushHelpers(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            for id in ["a", "b", "c"] { try store.enqueue(.insert, ["id": .string(id), "text": "local"], into: "QItem") }
            try store.recordError(TableOperationError(id: "e1", operationId: 1))
            var last: Int64 = 0
            var seen: [String] = []
            while let op = try store.beginPush(after: last) {
                seen.append(op.itemId)
                try expect(op.isInFlight, "beginPush marks \(op.itemId)")
                last = op.id
            }
            try expectEqual(seen, ["a", "b", "c"], "id order")
            try expectEqual(try store.queuedOperations().filter(\.isInFlight).count, 3, "all in flight")
            let a = try unwrap(try store.queuedOperation(id: 1), "a")
            try expectEqual(try store.complete(a, serverItem: ["id": "a", "text": "server", "version": "v1", "serverOnly": 5]), .removed, "complete a")
            try expectIdentical(
                try store.read(table: "QItem", id: "a"), ["id": "a", "text": "server", "n": nil, "updatedAt": nil, "version": "v1", "deleted": nil],
                "the server item is applied, unknown columns ignored")
            try expectEqual(try store.operationErrors(), [], "the operation's errors are removed")
            try expectEqual(try store.releaseInFlightOperations(), 2, "two still in flight")
            try expectEqual(try store.queuedOperations().filter(\.isInFlight).count, 0, "none in flight")
            var stale = try unwrap(try store.queuedOperation(id: 2), "b")
            stale.version = 9
            try expectEqual(try store.complete(stale), .changed(try unwrap(try store.queuedOperation(id: 2), "b")), "a version that was never pushed")
            try expectEqual(try store.pendingOperationCount(), 2, "kept")
            try expectEqual(try store.complete(a), .missing, "an operation that is gone")
            try expectNil(try store.beginPush(after: 3), "nothing after the last")

            // One transaction per operation: complete the current one and mark the next.
            for id in ["f", "g", "h"] { try store.enqueue(.insert, ["id": .string(id), "text": "local"], into: "QItem") }
            try store.enqueue(.update, ["id": "b", "text": "b2"], into: "QItem")
            var current = try store.beginPush()
            var outcomes: [String: CompletionOutcome] = [:]
            var order: [String] = []
            while let op = current {
                order.append(op.itemId)
                try expect(op.isInFlight, "\(op.itemId) is in flight")
                if op.itemId == "g", op.kind == .insert { try store.enqueue(.update, ["id": "g", "text": "edited during the push"], into: "QItem") }
                let step = try store.completeAndBeginNext(op)
                outcomes[op.itemId] = step.outcome
                current = step.next
            }
            try expectEqual(order, ["b", "c", "f", "g", "h", "g"], "id order; the edit made during the push is pushed after")
            try expectEqual(outcomes["f"], .removed, "f removed")
            try expectEqual(try store.pendingOperationCount(), 0, "the queue is drained")
        }
    }
}
