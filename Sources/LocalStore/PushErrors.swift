import Foundation

// Push failures as typed records in the iOS SDK's error layout, and the SDKs' resolution actions,
// each one transaction with the item's row. docs/semantics.md, "Push errors and their resolution".

/// A push failure: a row of the errors table with its `properties` decoded.
///
/// `properties` is the iOS SDK's `MSTableOperationError` JSON, `{code, domain, description, table,
/// operation, itemId, statusCode, item?, serverItem?}` (`operation` is the ``OperationKind`` number),
/// plus `operationVersion` (the version of the operation that failed). Other keys are kept.
public struct PushError: Sendable, Hashable {
    /// The error's id (an upper-case UUID for records made here).
    public var id: String
    /// The failed operation.
    public var operationId: Int64
    /// The version of the operation that was pushed.
    public var operationVersion: Int64
    /// The failed operation's kind.
    public var operationKind: OperationKind
    /// The kind of table.
    public var tableKind: Int
    /// The user table.
    public var table: String
    /// The item's id.
    public var itemId: String
    /// The HTTP status code, when the server answered.
    public var statusCode: Int?
    /// The client's error code (the SDK's `NSError` code), if any.
    public var code: Int?
    /// The client's error domain, if any.
    public var domain: String?
    /// A readable description.
    public var message: String
    /// The item that was sent.
    public var item: JSON?
    /// The server's version of the item (a 409/412 answer's body).
    public var serverItem: JSON?
    /// Other keys of `properties`, kept on rewrite.
    public var extraProperties: [String: JSON]

    /// Creates a record.
    public init(
        id: String, operationId: Int64, operationVersion: Int64 = 1, operationKind: OperationKind, tableKind: Int = 0, table: String,
        itemId: String, statusCode: Int? = nil, code: Int? = nil, domain: String? = nil, message: String = "", item: JSON? = nil,
        serverItem: JSON? = nil, extraProperties: [String: JSON] = [:]
    ) {
        self.id = id
        self.operationId = operationId
        self.operationVersion = operationVersion
        self.operationKind = operationKind
        self.tableKind = tableKind
        self.table = table
        self.itemId = itemId
        self.statusCode = statusCode
        self.code = code
        self.domain = domain
        self.message = message
        self.item = item
        self.serverItem = serverItem
        self.extraProperties = extraProperties
    }

    /// Decodes a row of the errors table; properties that are not the documented JSON are a `corrupt`
    /// error naming the error and its operation.
    public init(_ record: TableOperationError) throws {
        func damaged(_ why: String) -> LocalStoreError {
            LocalStoreError(.corrupt, "error '\(record.id)' of operation #\(record.operationId) has damaged properties: \(why)", column: "properties")
        }
        let json: JSON
        do { json = try JSON(parsing: record.properties) } catch { throw damaged("not JSON (\(record.properties.count) bytes)") }
        guard case .object(var m) = json else { throw damaged("not a JSON object") }
        func int(_ key: String) throws -> Int64? {
            switch m.removeValue(forKey: key) {
            case nil, .null?: return nil
            case .int(let n)?: return n
            case let other?: throw damaged("\(key) \(other.jsonText) is not an integer")
            }
        }
        func string(_ key: String) throws -> String? {
            switch m.removeValue(forKey: key) {
            case nil, .null?: return nil
            case .string(let s)?: return s
            case let other?: throw damaged("\(key) \(other.jsonText) is not a string")
            }
        }
        guard let kindValue = m.removeValue(forKey: "operation"), let kind = OperationKind(kindValue) else {
            throw damaged("no operation kind 0, 1 or 2")
        }
        let status = try int("statusCode")
        let code = try int("code")
        let version = try int("operationVersion") ?? 1
        let table = try string("table") ?? ""
        let itemId = try string("itemId") ?? ""
        let domain = try string("domain")
        let message = try string("description") ?? ""
        var item = m.removeValue(forKey: "item")
        if item == .null { item = nil }
        var serverItem = m.removeValue(forKey: "serverItem")
        if serverItem == .null { serverItem = nil }
        self.init(
            id: record.id, operationId: record.operationId, operationVersion: version, operationKind: kind, tableKind: record.tableKind,
            table: table, itemId: itemId, statusCode: status.map { Int($0) }, code: code.map { Int($0) }, domain: domain, message: message,
            item: item, serverItem: serverItem, extraProperties: m)
    }

    /// The record's `properties` JSON.
    public var properties: JSON {
        var m = extraProperties
        m["operation"] = .int(operationKind.rawValue)
        m["operationVersion"] = .int(operationVersion)
        m["table"] = .string(table)
        m["itemId"] = .string(itemId)
        m["description"] = .string(message)
        if let statusCode { m["statusCode"] = .int(Int64(statusCode)) }
        if let code { m["code"] = .int(Int64(code)) }
        if let domain { m["domain"] = .string(domain) }
        if let item { m["item"] = item }
        if let serverItem { m["serverItem"] = serverItem }
        return .object(m)
    }

    /// The record as a row of the errors table.
    public var record: TableOperationError {
        TableOperationError(id: id, operationId: operationId, tableKind: tableKind, properties: Array(properties.jsonText.utf8))
    }
}

extension LocalStoreAccess {
    /// Records that pushing `op` failed, in one transaction: writes the error row (a new upper-case
    /// UUID id) and clears the operation's in-flight mark and its record of what was sent
    /// (``SentOperationRecord``). The operation stays queued. When `op` is no
    /// longer queued, or has changed since it was pushed, this is a `constraint` error that changes nothing.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func recordPushError(
        for op: QueuedOperation, statusCode: Int?, message: String, serverItem: Item? = nil, item: Item? = nil, code: Int? = nil,
        domain: String? = nil
    ) throws -> PushError {
        try compositeWrite { tx in
            var current = try tx.currentOperation(op.id, version: op.version, action: "record a push error for")
            let error = PushError(
                id: UUID().uuidString, operationId: op.id, operationVersion: op.version, operationKind: op.kind, tableKind: op.tableKind,
                table: op.table, itemId: op.itemId, statusCode: statusCode, code: code, domain: domain, message: message,
                item: item.map(ItemJSON.object) ?? op.item, serverItem: serverItem.map(ItemJSON.object))
            try tx.upsert([error.record.item], into: tx.systemTableNames.errors, options: .strict)
            if current.settle() {  // the server answered: what was sent did not land
                try tx.rewrite(current)
                try tx.untrackMayBeOnServer(current.id)
            }
            return error
        }
    }

    /// Every recorded push error decoded, ordered by operation id then id.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func pushErrors() throws -> [PushError] {
        try operationErrors().map(PushError.init)
    }

    /// Cancels the failed operation and discards the local item (the SDKs' `cancelAndDiscardItem`):
    /// deletes the item's row, the operation and its errors, in one transaction. Operations queued for
    /// the item after the failed one (edits made while it was pushed) are removed with it: they would
    /// have nothing left to push.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func cancelAndDiscard(_ error: PushError) throws {
        try compositeWrite { tx in
            let op = try tx.currentOperation(error.operationId, version: error.operationVersion, action: "cancel")
            try tx.delete(ids: [.string(op.itemId)], from: op.table)
            for later in try tx.laterOperations(than: op) { try tx.removeOperation(id: later.id) }
            try tx.removeOperation(id: op.id)
        }
    }

    /// Cancels the failed operation and stores `item` (usually the server's) as the local item (the
    /// SDKs' `cancelAndUpdateItem`): system properties other than `version` are stripped, as the iOS
    /// SDK does, unknown columns ignored; the operation and its errors are removed; one transaction.
    ///
    /// When a newer change to the item is queued (an edit made while the failed operation was pushed),
    /// only `item`'s system columns are merged into the row and into a queued delete's stored item: the
    /// newer change keeps its columns and is pushed next with the server's `version`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func cancelAndUpdate(_ error: PushError, with item: Item) throws {
        try compositeWrite { tx in
            let op = try tx.currentOperation(error.operationId, version: error.operationVersion, action: "cancel")
            let later = try tx.laterOperations(than: op)
            if !later.isEmpty {
                let schema = try tx.queueTableSchema(op.table)
                try tx.absorbSystemColumns(of: item, schema: schema, itemId: op.itemId, operations: later)
                try tx.removeOperation(id: op.id)
                return
            }
            var stripped = item
            stripped.values = item.values.filter { key, _ in
                let k = ASCII.lowercased(key)
                return k == "version" || !SystemProperty.allCases.contains { ASCII.lowercased($0.columnName) == k }
            }
            stripped.values = stripped.values.filter { ASCII.lowercased($0.key) != "id" }
            stripped.values["id"] = .string(op.itemId)
            try tx.upsert([stripped], into: op.table, options: .ignoringUnknownColumns)
            try tx.removeOperation(id: op.id)
        }
    }

    /// Keeps the failed operation and updates the local item (the SDKs' `keepOperationAndUpdateItem`,
    /// .NET `UpdateOperationAsync`): ``changeOperation(_:to:item:)`` with the operation's own kind.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func keepAndUpdate(_ error: PushError, with item: Item) throws -> QueuedOperation {
        try changeOperation(error, to: error.operationKind, item: item)
    }

    /// Changes the failed operation's kind (the SDKs' `modifyOperationType:AndUpdateItem:`), in one
    /// transaction: for a delete the item's row is deleted and `item` stored in the operation;
    /// otherwise `item` is upserted (unknown columns ignored) and the operation stores no item. The
    /// operation's version is incremented, its errors removed, its in-flight mark cleared.
    ///
    /// When a newer change to the item is queued after the failed operation, the resolution must not
    /// undo it: a change to a delete is refused (`constraint`: the newer operation would have nothing
    /// to push), and so is an `item` whose columns other than the system columns differ from the row
    /// (it would overwrite the newer edit). An item that only brings the server's system columns — the
    /// row with the server's `version`, as a client-wins policy sends — is applied.
    @discardableResult
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func changeOperation(_ error: PushError, to kind: OperationKind, item: Item) throws -> QueuedOperation {
        try compositeWrite { tx in
            var op = try tx.currentOperation(error.operationId, version: error.operationVersion, action: "change")
            var item = item
            item.values = item.values.filter { ASCII.lowercased($0.key) != "id" }
            item.values["id"] = .string(op.itemId)
            if let newer = try tx.laterOperations(than: op).first {
                try tx.checkKeepsNewerChange(op, newer: newer, kind: kind, item: item)
            }
            if kind == .delete {
                try tx.delete(ids: [.string(op.itemId)], from: op.table)
                op.item = ItemJSON.object(item)
            } else {
                try tx.upsert([item], into: op.table, options: .ignoringUnknownColumns)
                op.item = nil
            }
            op.kind = kind
            op.version += 1
            op.isInFlight = false
            try tx.removeErrors(of: op)
            try tx.rewrite(op)
            return op
        }
    }

    /// Refuses a resolution of `op` that would undo `newer`, a change to the same item queued after it.
    func checkKeepsNewerChange(_ op: QueuedOperation, newer: QueuedOperation, kind: OperationKind, item: Item) throws {
        let at = "\(op.table)/\(op.itemId)"
        guard kind != .delete else {
            throw LocalStoreError(
                .constraint,
                "cannot change operation #\(op.id) (\(at)) to a delete: a newer \(newer.kind) (#\(newer.id)) is queued for the item and would have nothing to push",
                table: op.table)
        }
        let schema = try queueTableSchema(op.table)
        let row = try read(table: op.table, id: .string(op.itemId)) ?? Item()
        let given = Self.coerced(item, schema: schema)
        for (key, value) in given {
            let k = ASCII.lowercased(key)
            guard k != "id", !SystemProperty.allCases.contains(where: { ASCII.lowercased($0.columnName) == k }),
                let column = schema.column(named: key)
            else { continue }
            let stored = row.value(forColumn: column.name) ?? .null
            if stored != value {
                throw LocalStoreError(
                    .constraint,
                    "cannot update operation #\(op.id) (\(at)) with \(column.name) = \(value): a newer \(newer.kind) (#\(newer.id)) queued for the item has \(column.name) = \(stored); resolve with the item as it is now",
                    table: op.table, column: column.name)
            }
        }
    }

    /// The queued operation `id` when it still has `version`; otherwise a `constraint` error.
    func currentOperation(_ id: Int64, version: Int64, action: String) throws -> QueuedOperation {
        guard let op = try queuedOperation(id: id) else {
            throw LocalStoreError(.constraint, "cannot \(action) operation #\(id): it is no longer queued", table: systemTableNames.operations)
        }
        guard op.version == version else {
            throw LocalStoreError(
                .constraint, "cannot \(action) operation #\(id) (\(op.table)/\(op.itemId)): it has changed since it was pushed (version \(op.version), not \(version))",
                table: op.table)
        }
        return op
    }
}
