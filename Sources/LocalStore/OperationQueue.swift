import Foundation

// The typed operation queue: kinds, the SDKs' collapse rules, versions and compare-and-remove, built
// only on the `LocalStoreAccess` protocol so every backend (also a third-party one) gets it.
// docs/semantics.md, "The typed operation queue", describes the design.

/// The kind of a queued operation, with the iOS SDK's `MSTableOperationTypes` values (the `type` of
/// the operation's `properties` JSON).
public enum OperationKind: Int64, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Create the item on the server.
    case insert = 0
    /// Replace the item on the server.
    case update = 1
    /// Delete the item on the server (the operation carries a snapshot of the item).
    case delete = 2

    /// `insert`, `update` or `delete`.
    public var description: String {
        switch self {
        case .insert: return "insert"
        case .update: return "update"
        case .delete: return "delete"
        }
    }

    /// Reads a kind from its number or, leniently, from its name (`"insert"`, as the JS SDK writes it).
    public init?(_ json: JSON) {
        switch json {
        case .int(let n): self.init(rawValue: n)
        case .string(let s):
            guard let k = OperationKind.allCases.first(where: { $0.description == ASCII.lowercased(s) }) else { return nil }
            self = k
        default: return nil
        }
    }
}

/// One operation of the queue with its `properties` decoded.
///
/// `properties` is the iOS SDK's JSON layout, `{"type":N}` or `{"type":2,"item":{…}}` for a delete,
/// plus two keys of this package: `"version"` (the operation's version, 1 when absent) and `"state"`
/// (1 while a push has the operation in flight, 0 or absent otherwise). Other keys are kept as they are.
public struct QueuedOperation: Sendable, Hashable {
    /// The operation's id (its position in the queue).
    public var id: Int64
    /// The user table.
    public var table: String
    /// The kind of table (0 for a table).
    public var tableKind: Int
    /// The item's id.
    public var itemId: String
    /// What the push sends.
    public var kind: OperationKind
    /// For a delete, the item as it was when deleted (JSON, as the SDK stores it); `nil` otherwise.
    public var item: JSON?
    /// Incremented every time the operation changes (a collapse, a resolution); a push that sent
    /// version `v` may remove the operation only while it still has version `v`.
    public var version: Int64
    /// Whether a push has the operation in flight (see ``LocalStoreAccess/beginPush(after:)``).
    public var isInFlight: Bool
    /// Keys of `properties` other than `type`, `item`, `version` and `state`, kept on rewrite.
    public var extraProperties: [String: JSON]

    /// Creates an operation.
    public init(
        id: Int64, table: String, tableKind: Int = 0, itemId: String, kind: OperationKind, item: JSON? = nil, version: Int64 = 1,
        isInFlight: Bool = false, extraProperties: [String: JSON] = [:]
    ) {
        self.id = id
        self.table = table
        self.tableKind = tableKind
        self.itemId = itemId
        self.kind = kind
        self.item = item
        self.version = version
        self.isInFlight = isInFlight
        self.extraProperties = extraProperties
    }

    /// Decodes a row of the operations table; a `properties` value that is not the documented JSON is
    /// a `corrupt` error naming the operation.
    public init(_ record: TableOperation) throws {
        func damaged(_ why: String) -> LocalStoreError {
            LocalStoreError(
                .corrupt, "operation #\(record.id) (\(record.table)/\(record.itemId)) has damaged properties: \(why)", column: "properties")
        }
        let json: JSON
        do { json = try JSON(parsing: record.properties) } catch { throw damaged("not JSON (\(record.properties.count) bytes)") }
        guard case .object(var members) = json else { throw damaged("not a JSON object") }
        guard let typeValue = members.removeValue(forKey: "type"), let kind = OperationKind(typeValue) else {
            throw damaged("no operation type 0, 1 or 2")
        }
        var version: Int64 = 1
        if let v = members.removeValue(forKey: "version") {
            guard case .int(let n) = v else { throw damaged("version \(v.jsonText) is not an integer") }
            version = n
        }
        var inFlight = false
        if let s = members.removeValue(forKey: "state") {
            guard case .int(let n) = s else { throw damaged("state \(s.jsonText) is not an integer") }
            inFlight = n == 1
        }
        var item = members.removeValue(forKey: "item")
        if item == .null { item = nil }
        self.init(
            id: record.id, table: record.table, tableKind: record.tableKind, itemId: record.itemId, kind: kind, item: item,
            version: version, isInFlight: inFlight, extraProperties: members)
    }

    /// The operation's `properties` JSON (compact, keys sorted).
    public var properties: JSON {
        var members = extraProperties
        members["type"] = .int(kind.rawValue)
        if let item { members["item"] = item }
        members["version"] = .int(version)
        if isInFlight { members["state"] = .int(1) }
        return .object(members)
    }

    /// The operation as a row of the operations table.
    public var record: TableOperation {
        TableOperation(id: id, table: table, tableKind: tableKind, itemId: itemId, properties: Array(properties.jsonText.utf8))
    }
}

/// What ``LocalStoreAccess/enqueue(_:_:into:)`` did to the queue.
public enum EnqueueOutcome: Sendable, Hashable {
    /// A new operation was appended.
    case added(QueuedOperation)
    /// The item's pending operation absorbed the change (its kind unchanged, its version incremented).
    case kept(QueuedOperation)
    /// The item's pending update became a delete (same id, version incremented, item snapshot stored).
    case changedToDelete(QueuedOperation)
    /// A delete cancelled the item's pending insert: the operation (id given) and its errors are gone,
    /// and nothing is sent.
    case removed(operationId: Int64)

    /// The operation now queued for the item, if any.
    public var operation: QueuedOperation? {
        switch self {
        case .added(let op), .kept(let op), .changedToDelete(let op): return op
        case .removed: return nil
        }
    }
}

/// What ``LocalStoreAccess/complete(_:serverItem:)`` did.
public enum CompletionOutcome: Sendable, Hashable {
    /// The operation had the pushed version and was removed with its errors.
    case removed
    /// The operation changed while it was pushed (shown here as it is now): it stays queued, no longer
    /// in flight, and must be pushed again.
    case changed(QueuedOperation)
    /// No operation with that id is queued.
    case missing
}

/// The collapse rules of the Azure Mobile Apps iOS SDK (`MSTableOperation condenseAction:`), as a
/// pure function: what happens to the item's newest pending operation when a new local change arrives.
public enum CollapseRule: Sendable, Hashable {
    /// Append a new operation (no pending operation, or the pending one is in flight).
    case addNew
    /// Keep the pending operation as it is (its version is incremented).
    case keep
    /// Turn the pending update into a delete.
    case toDelete
    /// Remove the pending insert: nothing is sent.
    case remove
    /// The sequence is not allowed (an error; nothing changes).
    case notSupported

    /// The rule for `new` after `existing` (`nil`: no pending operation); an in-flight pending
    /// operation turns every allowed result into ``addNew``.
    public static func decide(existing: OperationKind?, inFlight: Bool, new: OperationKind) -> CollapseRule {
        guard let existing else { return .addNew }
        let rule: CollapseRule
        switch (existing, new) {
        case (.insert, .update), (.update, .update): rule = .keep
        case (.insert, .delete): rule = .remove
        case (.update, .delete): rule = .toDelete
        case (.insert, .insert), (.update, .insert), (.delete, _): rule = .notSupported
        }
        return inFlight && rule != .notSupported ? .addNew : rule
    }
}

/// What a push is about to send, recorded in the operation: ``LocalStoreAccess/beginSending(after:)`` marks the
/// operation in flight and stores this under the `properties` key `"sent"`, so that after a crash
/// or a lost answer the next push can ask the server whether this request landed.
public struct SentOperationRecord: Sendable, Hashable {
    /// The `properties` key of the record.
    static let key = "sent"

    /// The operation's kind when it was sent.
    public var kind: OperationKind
    /// The operation's version when it was sent.
    public var version: Int64
    /// The item sent (insert and update), in the SDK's JSON form.
    public var item: JSON?

    /// Reads the record from `op`'s properties; `nil` when there is none or it is damaged.
    public init?(_ op: QueuedOperation) {
        guard case .object(let m)? = op.extraProperties[Self.key], let kindValue = m["kind"], let kind = OperationKind(kindValue),
            case .int(let version)? = m["version"]
        else { return nil }
        self.kind = kind
        self.version = version
        item = m["item"].flatMap { $0 == .null ? nil : $0 }
    }

    init(kind: OperationKind, version: Int64, item: JSON?) {
        self.kind = kind
        self.version = version
        self.item = item
    }

    var json: JSON {
        var m: [String: JSON] = ["kind": .int(kind.rawValue), "version": .int(version)]
        if let item { m["item"] = item }
        return .object(m)
    }

    /// The operation as it was when sent (for ``LocalStoreAccess/complete(_:serverItem:)``).
    public func operation(_ op: QueuedOperation) -> QueuedOperation {
        var sent = op
        sent.kind = kind
        sent.version = version
        return sent
    }
}

extension QueuedOperation {
    /// Whether the operation may be on the server: in flight, or sent and never completed (its
    /// ``SentOperationRecord``).
    var mayBeOnServer: Bool { isInFlight || extraProperties[SentOperationRecord.key] != nil }

    /// Clears the in-flight mark and the `sent` record (the server answered); whether either was set.
    mutating func settle() -> Bool {
        let changed = mayBeOnServer
        isInFlight = false
        extraProperties[SentOperationRecord.key] = nil
        return changed
    }
}

extension LocalStoreAccess {
    // MARK: Reading

    /// Every queued operation decoded, in id order.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func queuedOperations() throws -> [QueuedOperation] {
        try pendingOperations().map(QueuedOperation.init)
    }

    /// The queued operations of one item (id matched case-insensitively), in id order.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func queuedOperations(table: String, itemId: String) throws -> [QueuedOperation] {
        try pendingOperations(table: table, itemId: itemId).map(QueuedOperation.init)
    }

    /// The operation with id `id`, decoded.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func queuedOperation(id: Int64) throws -> QueuedOperation? {
        try operation(id: id).map(QueuedOperation.init)
    }

    /// The first operation whose id is greater than `id` (0 for the head), decoded; one read.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func nextOperation(after id: Int64 = 0) throws -> QueuedOperation? {
        try operation(after: id).map(QueuedOperation.init)
    }

    // MARK: Enqueue

    /// Writes a local change to `item` of `table` and queues its operation, in one transaction,
    /// applying the SDKs' collapse rules (``CollapseRule``) against the item's newest pending operation.
    ///
    /// - insert: the row must not exist (`constraint`); an item without `id` gets an upper-case UUID.
    /// - update: the row is upserted (merge).
    /// - delete: the row is deleted; the operation stores the item (the stored row overlaid with `item`).
    ///
    /// A forbidden sequence (insert after insert or update, anything after a delete) is a `constraint`
    /// error that changes nothing. Collapsing into an operation removes that operation's errors.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func enqueue(_ kind: OperationKind, _ item: Item, into table: String) throws -> EnqueueOutcome {
        try compositeWrite { tx in
            let schema = try tx.queueTableSchema(table)
            var item = item
            let itemId: String
            switch item.id {
            case .string(let s)?:
                itemId = s
            case nil, .null?:
                guard kind == .insert else {
                    throw LocalStoreError(.missingId, "a \(kind) of an item of \(schema.name) needs the item's id", table: schema.name, column: "id")
                }
                itemId = UUID().uuidString
                item.values = item.values.filter { ASCII.lowercased($0.key) != "id" }
                item.values["id"] = .string(itemId)
            case let other?:
                throw LocalStoreError(
                    .typeMismatch, "the id of an item of \(schema.name) must be a string, not \(other)", table: schema.name, column: "id")
            }
            guard !itemId.isEmpty else {
                throw LocalStoreError(.invalidValue, "the id of an item of \(schema.name) must not be empty", table: schema.name, column: "id")
            }
            let existing = try tx.queuedOperations(table: schema.name, itemId: itemId).last
            // An operation that was sent and not completed (its `sent` record: the answer was lost, or
            // the process died) may be on the server already: like one in flight, nothing collapses into
            // it — a delete must not cancel an insert the server may have applied.
            let rule = CollapseRule.decide(existing: existing?.kind, inFlight: existing?.mayBeOnServer ?? false, new: kind)
            if rule == .notSupported, let existing {
                throw LocalStoreError(
                    .constraint,
                    "\(schema.name)/\(itemId): a \(kind) is not allowed while a\(existing.kind == .insert ? "n" : "") \(existing.kind) operation (#\(existing.id)) is queued for the item",
                    table: schema.name)
            }
            // The item's row.
            var snapshot: JSON? = nil
            switch kind {
            case .insert:
                if try tx.read(table: schema.name, id: .string(itemId)) != nil {
                    throw LocalStoreError(.constraint, "\(schema.name)/\(itemId): the item already exists", table: schema.name, column: "id")
                }
                try tx.upsert([item], into: schema.name, options: .strict)
            case .update:
                try tx.upsert([item], into: schema.name, options: .strict)
            case .delete:
                var full = try tx.read(table: schema.name, id: .string(itemId)) ?? Item()
                for (key, value) in item {
                    if let spelled = full.values.keys.first(where: { ASCII.lowercased($0) == ASCII.lowercased(key) }) {
                        full.values.removeValue(forKey: spelled)
                    }
                    full.values[key] = value
                }
                snapshot = ItemJSON.object(full)
                try tx.delete(ids: [.string(itemId)], from: schema.name)
            }
            // The queue.
            switch (rule, existing) {
            case (.keep, let op?):
                var op = op
                op.version += 1
                try tx.rewrite(op)
                try tx.removeErrors(of: op)
                return .kept(op)
            case (.toDelete, let op?):
                var op = op
                op.kind = .delete
                op.item = snapshot
                op.version += 1
                try tx.rewrite(op)
                try tx.removeErrors(of: op)
                return .changedToDelete(op)
            case (.remove, let op?):
                try tx.removeOperation(id: op.id)
                return .removed(operationId: op.id)
            default:
                var op = QueuedOperation(id: 0, table: schema.name, itemId: itemId, kind: kind, item: snapshot)
                op.id = try appendOperationRecord(op.record, in: tx)
                return .added(op)
            }
        }
    }

    // MARK: Push

    /// Marks the first operation after `id` (0 for the head) as in flight and returns it, in one
    /// transaction: a push calls this, sends the operation, then ``complete(_:serverItem:)``. While
    /// an operation is in flight, new changes to its item are queued as new operations instead of
    /// collapsing into it. After a crash, ``releaseInFlightOperations()`` clears the marks.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func beginPush(after id: Int64 = 0) throws -> QueuedOperation? {
        try compositeWrite { tx in
            guard var op = try tx.nextOperation(after: id) else { return nil }
            if !op.isInFlight {
                op.isInFlight = true
                try tx.rewrite(op)
                try tx.trackMayBeOnServer(op)
            }
            return op
        }
    }

    /// ``beginPush(after:)`` and ``pushItem(for:)`` in one transaction, recording what is sent in the
    /// operation (``SentOperationRecord``, the `properties` key `"sent"`, kept until the operation leaves the
    /// queue): a sync engine uses it to recognise, after a crash or a lost answer, that the server
    /// already has this write. Returns the operation (in flight, with the record) and the item to send.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func beginSending(after id: Int64 = 0) throws -> (operation: QueuedOperation, item: Item?)? {
        try compositeWrite { tx in
            guard var op = try tx.nextOperation(after: id) else { return nil }
            let item = try tx.pushItem(for: op)
            op.isInFlight = true
            let record = SentOperationRecord(kind: op.kind, version: op.version, item: op.kind == .delete ? nil : item.map(ItemJSON.object))
            op.extraProperties[SentOperationRecord.key] = record.json
            try tx.rewrite(op)
            try tx.trackMayBeOnServer(op)
            return (op, item)
        }
    }

    /// The item a push sends for `op`: the item's row for an insert or update (`nil` when the row is
    /// gone), the stored snapshot for a delete (converted with the table's schema).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func pushItem(for op: QueuedOperation) throws -> Item? {
        switch op.kind {
        case .insert, .update: return try read(table: op.table, id: .string(op.itemId))
        case .delete: return op.item.flatMap { ItemJSON.item($0, schema: try? schema(of: op.table)) }
        }
    }

    /// Records that the server accepted the push of `op`, in one transaction.
    ///
    /// When the operation still has the version that was pushed it is removed with its errors
    /// (``CompletionOutcome/removed``); otherwise it changed while it was pushed and stays queued, no
    /// longer in flight (``CompletionOutcome/changed(_:)``) — and when it was an insert the server now
    /// has the item, so it becomes an update.
    ///
    /// `serverItem` (the server's answer to an insert or update) reaches the item's row so that the
    /// next push of the item carries the server's `version`:
    /// - when no other change to the item is queued, the whole item is stored (unknown columns ignored);
    /// - when one is (an edit made during the push, or the operation changed), only the server's system
    ///   columns (`version`, `updatedAt`, `createdAt`, `deleted`) are merged into the row and into the
    ///   item stored by a queued delete, and the newer edit keeps its own columns.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func complete(_ op: QueuedOperation, serverItem: Item? = nil) throws -> CompletionOutcome {
        try compositeWrite { tx in
            guard var current = try tx.queuedOperation(id: op.id) else { return .missing }
            let unchanged = current.version == op.version && current.kind == op.kind
            if unchanged { try tx.removeOperation(id: current.id) }
            if let serverItem, op.kind != .delete, let schema = try tx.schema(of: current.table) {
                let queued = try tx.queuedOperations(table: current.table, itemId: current.itemId)
                if queued.isEmpty {
                    try tx.upsert([serverItem], into: current.table, options: .ignoringUnknownColumns)
                } else {
                    try tx.absorbSystemColumns(of: serverItem, schema: schema, itemId: current.itemId, operations: queued)
                    if !unchanged { current = try tx.queuedOperation(id: current.id) ?? current }
                }
            }
            if unchanged {
                try tx.untrackMayBeOnServer(op.id)
                return .removed
            }
            var rewrite = current.settle()  // what was sent has landed
            if rewrite { try tx.untrackMayBeOnServer(op.id) }
            if op.kind == .insert && current.kind == .insert {
                current.kind = .update
                current.version += 1
                rewrite = true
            }
            if rewrite { try tx.rewrite(current) }
            return .changed(current)
        }
    }

    /// ``complete(_:serverItem:)`` for `op` and ``beginPush(after:)`` for the operation after it, in one
    /// transaction: a push loop then costs one transaction per operation.
    ///
    /// ```swift
    /// var op = try store.beginPush()
    /// while let current = op {
    ///     let answer = try send(current.kind, try store.pushItem(for: current))
    ///     op = try store.completeAndBeginNext(current, serverItem: answer).next
    /// }
    /// ```
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func completeAndBeginNext(_ op: QueuedOperation, serverItem: Item? = nil) throws -> (outcome: CompletionOutcome, next: QueuedOperation?) {
        try compositeWrite { tx in
            let outcome = try tx.complete(op, serverItem: serverItem)
            return (outcome, try tx.beginPush(after: op.id))
        }
    }

    /// Clears the in-flight mark of every operation (after a crash, or when a push is abandoned).
    /// Returns how many operations were marked. Reads only the operations a push marked
    /// (``operationsMayBeOnServer()``), not the whole queue.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func releaseInFlightOperations() throws -> Int {
        try compositeWrite { tx in
            var n = 0
            try tx.startTrackingSentOperations()
            // One pass over the tracking rows: each marked operation released; the rows of operations that
            // left the queue, were settled, or were only begun (no `sent` record) dropped.
            for id in try tx.trackedOperationIds() {
                guard var op = try tx.queuedOperation(id: id), op.mayBeOnServer else {
                    try tx.untrackMayBeOnServer(id)
                    continue
                }
                if op.isInFlight {
                    op.isInFlight = false
                    try tx.rewrite(op)
                    n += 1
                }
                if !op.mayBeOnServer { try tx.untrackMayBeOnServer(id) }
            }
            return n
        }
    }

    // MARK: Helpers

    /// Merges the server's system columns of `serverItem` (those of ``SystemProperty`` that `schema`
    /// has) into the row of `itemId` when it exists, and into the item stored by each delete among
    /// `operations` (rewritten in place): a queued local change keeps its own columns and is pushed
    /// next with the server's `version`.
    func absorbSystemColumns(of serverItem: Item, schema: TableSchema, itemId: String, operations: [QueuedOperation]) throws {
        var system = Item()
        for property in SystemProperty.allCases {
            guard let column = schema.column(named: property.columnName), let value = serverItem.value(forColumn: property.columnName) else {
                continue
            }
            system.values[column.name] = value
        }
        guard !system.values.isEmpty else { return }
        let coerced = Self.coerced(system, schema: schema)
        if try read(table: schema.name, id: .string(itemId)) != nil {
            var row = coerced
            row.values["id"] = .string(itemId)
            try upsert([row], into: schema.name, options: .ignoringUnknownColumns)
        }
        for var op in operations where op.kind == .delete {
            guard case .object(var members)? = op.item else { continue }
            for (column, value) in coerced.values {
                for key in members.keys where ASCII.lowercased(key) == ASCII.lowercased(column) { members.removeValue(forKey: key) }
                members[column] = ItemJSON.json(value)
            }
            op.item = .object(members)
            try rewrite(op)
        }
    }

    /// Removes the recorded push errors of `op` (a collapse changed it: they describe a push of what it was).
    func removeErrors(of op: QueuedOperation) throws {
        if let shortcuts = ShortcutCasts.shortcuts(self) { return try shortcuts.removeOperationErrors(operationId: op.id) }
        try genericRemoveOperationErrors(operationId: op.id)
    }

    /// The item's operations queued after `op` (id order).
    func laterOperations(than op: QueuedOperation) throws -> [QueuedOperation] {
        try queuedOperations(table: op.table, itemId: op.itemId).filter { $0.id > op.id }
    }

    /// Writes `op`'s row (same id).
    func rewrite(_ op: QueuedOperation) throws {
        if let shortcuts = ShortcutCasts.shortcuts(self) { return try shortcuts.rewriteOperation(op.record) }
        try upsert([op.record.item], into: systemTableNames.operations, options: .strict)
    }

    /// The schema of a user table the queue may hold operations for.
    func queueTableSchema(_ table: String) throws -> TableSchema {
        guard let schema = try schema(of: table) else { throw LocalStoreError.unknownTable(table) }
        guard !systemTableNames.isReserved(schema.name) else {
            throw LocalStoreError(.reservedName, "'\(schema.name)' is a system table; operations are queued for user tables", table: schema.name)
        }
        guard schema.idType == .string else {
            throw LocalStoreError(.unsupported, "the queue needs string ids; \(schema.name).id is \(schema.idType)", table: schema.name, column: "id")
        }
        return schema
    }
}
