import Foundation
import GRDB
import LocalStore
import LocalStoreBench

// The sync workloads written with GRDB: a typed operation queue as the Azure Mobile Apps .NET SQLite store
// keeps it (one row per operation in MS_TableOperations, its kind, version, state and the item of a delete in
// a `properties` JSON object), the SDKs' collapse rules, a two-transaction push, pulled pages and purge — the
// steps LocalStore's queue takes (OperationQueue.swift, PullAndPurge.swift), written as a GRDB app would:
// Codable records, `DatabasePool.write` transactions, SQL through cached statements, and the JSON with
// Foundation's JSONEncoder and JSONDecoder.

extension GRDBSubject {
    /// The SDKs' operation types (the `type` of `properties`).
    enum OperationType: Int64, Codable {
        case insert = 0, update = 1, delete = 2
    }

    /// The `properties` JSON of an operation, with LocalStore's keys: `{"type":0,"version":1}`, a delete's
    /// `item`, `state` 1 while a push has the operation in flight, and the `sent` record of what the push
    /// sent (kept until the operation leaves the queue: an operation that has one may be on the server).
    struct OperationProperties: Codable {
        var type: OperationType
        var item: Todo?
        var version: Int64
        var state: Int64?
        var sent: Sent?

        struct Sent: Codable {
            var kind: OperationType
            var version: Int64
            var item: Todo?
        }

        /// Whether the operation may be on the server already: nothing collapses into it.
        var mayBeOnServer: Bool { state == 1 || sent != nil }
    }

    /// The JSON coders of `properties`: keys sorted, dates as the SDKs write them (UTC, milliseconds, as
    /// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`).
    static let propertiesEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(DeltaTokenFormat.string(from: date))
        }
        return encoder
    }()

    static let propertiesDecoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = DeltaTokenFormat.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a date: \(text)")
            }
            return date
        }
        return decoder
    }()

    static func properties(of op: Operation) throws -> OperationProperties {
        try propertiesDecoder.decode(OperationProperties.self, from: op.properties)
    }

    static func encoded(_ properties: OperationProperties) throws -> Data { try propertiesEncoder.encode(properties) }

    // MARK: SQL

    /// The SQL of the queue, run through `Database.cachedStatement(sql:)`.
    enum SyncSQL {
        static let newestOperationOfItem = """
            SELECT * FROM "MS_TableOperations" WHERE "table" = ? AND "itemId" = ? COLLATE NOCASE ORDER BY "id" DESC LIMIT 1
            """
        static let operationsOfItem = """
            SELECT * FROM "MS_TableOperations" WHERE "table" = ? AND "itemId" = ? COLLATE NOCASE ORDER BY "id"
            """
        static let itemHasOperation = """
            SELECT EXISTS (SELECT 1 FROM "MS_TableOperations" WHERE "table" = ? AND "itemId" = ? COLLATE NOCASE)
            """
        static let tableOperationCount = #"SELECT count(*) FROM "MS_TableOperations" WHERE "table" = ?"#
        static let headOperation = #"SELECT * FROM "MS_TableOperations" WHERE "id" > 0 ORDER BY "id" LIMIT 1"#
        static let operationById = #"SELECT * FROM "MS_TableOperations" WHERE "id" = ?"#
        static let deleteOperation = #"DELETE FROM "MS_TableOperations" WHERE "id" = ?"#
        static let deleteErrors = #"DELETE FROM "MS_TableOperationErrors" WHERE "operationId" = ?"#
        static let configById = #"SELECT * FROM "MS_TableConfig" WHERE "id" = ?"#
        static let deleteConfig = #"DELETE FROM "MS_TableConfig" WHERE "id" = ?"#

        static func rowById(_ table: String) -> String { #"SELECT * FROM "\#(table)" WHERE "id" = ?"# }
        static func deleteRow(_ table: String) -> String { #"DELETE FROM "\#(table)" WHERE "id" = ?"# }
        static func deleteWherePriority(_ table: String) -> String { #"DELETE FROM "\#(table)" WHERE "priority" = ?"# }
        static func systemColumns(_ table: String) -> String {
            #"UPDATE "\#(table)" SET "version" = ?, "createdAt" = ?, "updatedAt" = ?, "deleted" = ? WHERE "id" = ?"#
        }
    }

    /// The config row id of a delta token.
    static func deltaTokenId(table: String, queryId: String) -> String { "deltaToken|\(table)|\(queryId)" }

    /// Removes an operation and its errors.
    static func removeOperation(_ id: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: SyncSQL.deleteOperation).execute(arguments: [id])
        try removeErrors(of: id, db)
    }

    static func removeErrors(of id: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: SyncSQL.deleteErrors).execute(arguments: [id])
    }

    /// The SDKs' collapse rules (iOS `MSTableOperation condenseAction:`): what a new change does to the item's
    /// newest operation.
    enum Collapse { case add, keep, toDelete, remove }

    static func collapse(_ new: OperationType, into existing: OperationProperties?, itemId: String) throws -> Collapse {
        guard let existing else { return .add }
        let rule: Collapse
        switch (existing.type, new) {
        case (.insert, .update), (.update, .update): rule = .keep
        case (.insert, .delete): rule = .remove
        case (.update, .delete): rule = .toDelete
        case (.insert, .insert), (.update, .insert), (.delete, _):
            throw LocalStoreError(.constraint, "TodoItem/\(itemId): a \(new) is not allowed while a \(existing.type) is queued")
        }
        // An operation in flight or sent may be on the server: the change is queued as a new operation.
        return existing.mayBeOnServer ? .add : rule
    }

    /// One local change in the caller's transaction (``enqueue(_:_:)``, ``seedQueue(_:)``).
    func enqueue(_ edit: BenchEdit, _ record: TodoRecord, _ db: Database) throws -> BenchEnqueueOutcome {
        let type: OperationType
        switch edit {
        case .insert: type = .insert
        case .update: type = .update
        case .delete: type = .delete
        }
        let newest = try Operation.fetchOne(
            db.cachedStatement(sql: SyncSQL.newestOperationOfItem), arguments: [Todo.databaseTableName, record.id])
        let properties = try newest.map(Self.properties)
        let rule = try Self.collapse(type, into: properties, itemId: record.id)
        // The row.
        var snapshot: Todo?
        switch edit {
        case .insert: try Todo(record).insert(db)  // the primary key refuses an existing row
        case .update: try Todo(record).upsert(db)
        case .delete:
            snapshot = try Todo.fetchOne(db.cachedStatement(sql: SyncSQL.rowById(Todo.databaseTableName)), arguments: [record.id])
            try db.cachedStatement(sql: SyncSQL.deleteRow(Todo.databaseTableName)).execute(arguments: [record.id])
        }
        // The queue.
        switch (rule, newest, properties) {
        case (.keep, var op?, var p?):
            p.version += 1
            op.properties = try Self.encoded(p)
            try op.update(db)
            try Self.removeErrors(of: op.id!, db)
            return .kept
        case (.toDelete, var op?, var p?):
            p.type = .delete
            p.item = snapshot
            p.version += 1
            op.properties = try Self.encoded(p)
            try op.update(db)
            try Self.removeErrors(of: op.id!, db)
            return .changedToDelete
        case (.remove, let op?, _):
            try Self.removeOperation(op.id!, db)
            return .removed
        default:
            var op = Operation(
                id: nil, table: Todo.databaseTableName, tableKind: 0, itemId: record.id,
                properties: try Self.encoded(OperationProperties(type: type, item: snapshot, version: 1)))
            try op.insert(db)
            return .added
        }
    }
}

extension GRDBSubject: BenchSyncSubject {
    public func setUpSync() throws { try Self.migrator.migrate(writer(), upTo: Migration.todoPulled) }

    public func seedQueue(_ records: [TodoRecord]) throws {
        try writer().write { db in
            for r in records { _ = try enqueue(.insert, r, db) }
        }
    }

    public func enqueue(_ edit: BenchEdit, _ record: TodoRecord) throws -> BenchEnqueueOutcome {
        try writer().write { db in try enqueue(edit, record, db) }
    }

    public func pushOne(serverVersion: String) throws -> String? {
        let pool = try writer()
        // 1: the head operation marked in flight, with the record of what is sent.
        let begun = try pool.write { db -> (op: Operation, sent: OperationProperties.Sent)? in
            guard var op = try Operation.fetchOne(db.cachedStatement(sql: SyncSQL.headOperation)) else { return nil }
            var properties = try Self.properties(of: op)
            let item: Todo?
            switch properties.type {
            case .insert, .update:
                item = try Todo.fetchOne(db.cachedStatement(sql: SyncSQL.rowById(op.table)), arguments: [op.itemId])
            case .delete:
                item = properties.item
            }
            let sent = OperationProperties.Sent(kind: properties.type, version: properties.version, item: item)
            properties.state = 1
            properties.sent = OperationProperties.Sent(
                kind: properties.type, version: properties.version, item: properties.type == .delete ? nil : item)
            op.properties = try Self.encoded(properties)
            try op.update(db)
            return (op, sent)
        }
        guard let (op, sent) = begun, let opId = op.id else { return nil }
        // The server's answer: the item with its new version.
        var answer = sent.item
        answer?.version = serverVersion
        // 2: the operation completed with the answer.
        try pool.write { db in
            guard var current = try Operation.fetchOne(db.cachedStatement(sql: SyncSQL.operationById), arguments: [opId]) else {
                return  // completed or cancelled meanwhile
            }
            var properties = try Self.properties(of: current)
            let unchanged = properties.version == sent.version && properties.type == sent.kind
            if unchanged { try Self.removeOperation(opId, db) }
            if sent.kind != .delete, let answer {
                let otherChange = try Bool.fetchOne(
                    db.cachedStatement(sql: SyncSQL.itemHasOperation), arguments: [op.table, op.itemId]) ?? false
                if !otherChange {
                    try answer.upsert(db)
                } else {
                    // A newer local change keeps its columns; it gets the server's system columns.
                    try db.cachedStatement(sql: SyncSQL.systemColumns(op.table)).execute(
                        arguments: [
                            answer.version, answer.createdAt.timeIntervalSinceReferenceDate,
                            answer.updatedAt.timeIntervalSinceReferenceDate, answer.deleted, op.itemId,
                        ])
                    for var later in try Operation.fetchAll(
                        db.cachedStatement(sql: SyncSQL.operationsOfItem), arguments: [op.table, op.itemId])
                    {
                        var p = try Self.properties(of: later)
                        guard p.type == .delete, var item = p.item else { continue }
                        (item.version, item.createdAt, item.updatedAt, item.deleted) =
                            (answer.version, answer.createdAt, answer.updatedAt, answer.deleted)
                        p.item = item
                        later.properties = try Self.encoded(p)
                        try later.update(db)
                        if later.id == opId { current = later }
                    }
                    if !unchanged { properties = try Self.properties(of: current) }
                }
            }
            guard !unchanged else { return }
            // It changed while it was pushed: it stays queued, no longer in flight; an insert that landed
            // is an update now.
            properties.state = nil
            properties.sent = nil
            if sent.kind == .insert && properties.type == .insert {
                properties.type = .update
                properties.version += 1
            }
            current.properties = try Self.encoded(properties)
            try current.update(db)
        }
        return op.itemId
    }

    public func applyPulledPage(_ records: [TodoRecord], into table: String, queryId: String) throws -> BenchPulledPage {
        switch table {
        case Todo.databaseTableName: return try applyPulledPage(records, as: Todo.self, queryId: queryId)
        case PulledTodo.databaseTableName: return try applyPulledPage(records, as: PulledTodo.self, queryId: queryId)
        default: throw LocalStoreError.unknownTable(table)
        }
    }

    private func applyPulledPage<Row: TodoRow>(_ records: [TodoRecord], as _: Row.Type, queryId: String) throws -> BenchPulledPage {
        let table = Row.databaseTableName
        return try writer().write { db in
            var result = BenchPulledPage(upserted: 0, deleted: 0, skipped: 0)
            var newest: Date?
            for r in records {
                newest = max(newest ?? r.updatedAt, r.updatedAt)
                // A queued local change wins: the pulled item waits for the push.
                if try Bool.fetchOne(db.cachedStatement(sql: SyncSQL.itemHasOperation), arguments: [table, r.id]) ?? false {
                    result.skipped += 1
                } else if r.deleted {
                    try db.cachedStatement(sql: SyncSQL.deleteRow(table)).execute(arguments: [r.id])
                    result.deleted += 1
                } else {
                    try Row(r).upsert(db)
                    result.upserted += 1
                }
            }
            // The delta token advances to the page's newest updatedAt.
            if let newest {
                let id = Self.deltaTokenId(table: table, queryId: queryId)
                let stored = try Config.fetchOne(db.cachedStatement(sql: SyncSQL.configById), arguments: [id])
                    .flatMap { DeltaTokenFormat.date(from: $0.value) }
                if stored.map({ $0 < newest }) ?? true {
                    try Config(id: id, table: table, key: queryId, keyType: 0, value: DeltaTokenFormat.string(from: newest)).upsert(db)
                }
            }
            return result
        }
    }

    public func purge(_ table: String, priority: Int64, queryId: String) throws -> Int {
        guard table == Todo.databaseTableName || table == PulledTodo.databaseTableName else { throw LocalStoreError.unknownTable(table) }
        return try writer().write { db in
            let pending = try Int.fetchOne(db.cachedStatement(sql: SyncSQL.tableOperationCount), arguments: [table]) ?? 0
            guard pending == 0 else {
                throw LocalStoreError(.constraint, "\(table) cannot be purged because it has \(pending) pending operation(s)")
            }
            try db.cachedStatement(sql: SyncSQL.deleteWherePriority(table)).execute(arguments: [priority])
            let n = db.changesCount
            try db.cachedStatement(sql: SyncSQL.deleteConfig).execute(arguments: [Self.deltaTokenId(table: table, queryId: queryId)])
            return n
        }
    }
}
