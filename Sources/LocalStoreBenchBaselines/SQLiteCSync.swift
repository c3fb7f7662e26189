import CSQLite
import Foundation
import LocalStore
import LocalStoreBench
import LocalStoreSQLEngine

// The sync workloads of `sqlite-c` and `sqlcipher-c`: the steps of LocalStore's typed queue, pull and purge
// (docs/semantics.md) written as statements prepared once, against the same tables and indexes — the
// item's operations found through the operations table's (table, itemId COLLATE NOCASE) index, its errors
// through the errors table's operationId index — writing the same `properties` JSON (keys sorted, compact).

extension SQLiteCSubject: BenchSyncSubject {
    public func setUpSync() throws { try exec(Self.todoSchema.replacingOccurrences(of: "TodoItem", with: "TodoPulled")) }

    public func seedQueue(_ records: [TodoRecord]) throws {
        try transaction { for r in records { _ = try enqueueSteps(.insert, r) } }
    }

    public func enqueue(_ edit: BenchEdit, _ record: TodoRecord) throws -> BenchEnqueueOutcome {
        try transaction { try enqueueSteps(edit, record) }
    }

    public func pushOne(serverVersion: String) throws -> String? {
        // Transaction 1: the head, its item, the operation marked in flight with what is sent.
        typealias Sent = (id: Int64, itemId: String, op: OperationProperties, item: TodoRecord?)
        let sent: Sent? = try transaction { () throws -> Sent? in
            let first = try statement(.firstOperation)
            let rc = api.step(first)
            guard rc == SQLITE_ROW else {
                _ = api.reset(first)
                if rc == SQLITE_DONE { return nil }
                throw failure("step", rc)
            }
            let id = api.column_int64(first, 0)
            let itemId = text(first, 3)
            let properties = blob(first, 4)
            _ = api.reset(first)
            guard let op = OperationProperties(properties) else { throw damaged(id) }
            let item = op.kind == 2 ? nil : try readRow(itemId)
            var sending = op
            sending.sent = SQLiteCJSON.sentRecord(kind: op.kind, version: op.version, item: item)
            sending.inFlight = true
            try writeProperties(id, sending)
            try trackMayBeOnServer(id)
            return (id, itemId, op, item)
        }
        guard let sent else { return nil }
        // Transaction 2: the server's answer.
        try transaction {
            let read = try statement(.operationById)
            _ = api.bind_int64(read, 1, sent.id)
            let rc = api.step(read)
            guard rc == SQLITE_ROW else {
                _ = api.reset(read)
                if rc == SQLITE_DONE { return }
                throw failure("step", rc)
            }
            let current = OperationProperties(blob(read, 0))
            _ = api.reset(read)
            guard var current else { throw damaged(sent.id) }
            let unchanged = current.version == sent.op.version && current.kind == sent.op.kind
            if unchanged {
                try removeOperation(sent.id)
                try untrackMayBeOnServer(sent.id)
            }
            if var answer = sent.item {
                answer.version = serverVersion
                if try itemOperations(sent.itemId).isEmpty {
                    try upsertRow(answer)
                } else {
                    // A newer edit is queued: only the server's version reaches the row.
                    let update = try statement(.updateVersion)
                    try withText(answer.id, bind: update, 1) { try withText(answer.version, bind: update, 2) { try run(update) } }
                }
            }
            if !unchanged {
                current.inFlight = false
                current.sent = nil
                try writeProperties(sent.id, current)
                try untrackMayBeOnServer(sent.id)
            }
        }
        return sent.itemId
    }

    public func applyPulledPage(_ records: [TodoRecord], into table: String, queryId: String) throws -> BenchPulledPage {
        let pulled = table == "TodoPulled"
        return try transaction {
            var result = BenchPulledPage(upserted: 0, deleted: 0, skipped: 0)
            var maxDate: Date?
            for r in records {
                maxDate = max(maxDate ?? r.updatedAt, r.updatedAt)
                if try hasOperation(table, r.id) {
                    result.skipped += 1
                } else if r.deleted {
                    let stmt = try statement(pulled ? .deletePulledRow : .deleteRow)
                    try withText(r.id, bind: stmt, 1) { try run(stmt) }
                    result.deleted += 1
                } else {
                    try upsertRow(r, pulled: pulled)
                    result.upserted += 1
                }
            }
            if let maxDate {
                let id = "deltaToken|\(table)|\(queryId)"
                let stored = try configValue(id).flatMap(DeltaTokenFormat.date(from:))
                if stored.map({ $0 < maxDate }) ?? true { try storeToken(id, table: table, queryId: queryId, maxDate) }
            }
            return result
        }
    }

    public func purge(_ table: String, priority: Int64, queryId: String) throws -> Int {
        guard table == "TodoPulled" else { throw LocalStoreError(.unsupported, "sqlite-c: purge runs on TodoPulled") }
        return try transaction {
            let ops = try statement(.countTableOperations)
            let pending: Int64 = try withText(table, bind: ops, 1) {
                defer { _ = api.reset(ops) }
                guard api.step(ops) == SQLITE_ROW else { throw failure("count", api.extended_errcode(db)) }
                return api.column_int64(ops, 0)
            }
            guard pending == 0 else {
                throw LocalStoreError(.constraint, "\(table) cannot be purged because it has \(pending) pending operation(s)", table: table)
            }
            let count = try statement(.countPulledPriority)
            _ = api.bind_int64(count, 1, priority)
            guard api.step(count) == SQLITE_ROW else {
                _ = api.reset(count)
                throw failure("count", api.extended_errcode(db))
            }
            let n = Int(api.column_int64(count, 0))
            _ = api.reset(count)
            let delete = try statement(.deletePulledPriority)
            _ = api.bind_int64(delete, 1, priority)
            try run(delete)
            let token = try statement(.deleteConfig)
            try withText("deltaToken|\(table)|\(queryId)", bind: token, 1) { try run(token) }
            return n
        }
    }

    // MARK: Steps

    /// The enqueue of one change inside the caller's transaction, with the SDKs' collapse rules.
    private func enqueueSteps(_ edit: BenchEdit, _ record: TodoRecord) throws -> BenchEnqueueOutcome {
        let newest = try itemOperations(record.id).last
        let busy = newest.map { $0.op.inFlight || $0.op.sent != nil } ?? false
        switch edit {
        case .insert:
            guard newest == nil else { throw refused(record.id, "an insert after a queued operation") }
            guard try !rowExists(record.id) else { throw refused(record.id, "the item already exists") }
            try upsertRow(record)
            try appendOperation(record.id, OperationProperties(kind: 0))
            return .added
        case .update:
            try upsertRow(record)
            if let (id, op) = newest, !busy {
                guard op.kind != 2 else { throw refused(record.id, "an update after a delete") }
                var kept = op
                kept.version += 1
                try writeProperties(id, kept)
                try removeErrors(id)
                return .kept
            }
            try appendOperation(record.id, OperationProperties(kind: 1))
            return .added
        case .delete:
            let snapshot = try readRow(record.id).map(SQLiteCJSON.object) ?? "{}"
            let delete = try statement(.deleteRow)
            try withText(record.id, bind: delete, 1) { try run(delete) }
            if let (id, op) = newest, !busy {
                switch op.kind {
                case 0:
                    try removeOperation(id)
                    return .removed
                case 1:
                    var changed = op
                    changed.kind = 2
                    changed.item = snapshot
                    changed.version += 1
                    try writeProperties(id, changed)
                    try removeErrors(id)
                    return .changedToDelete
                default:
                    throw refused(record.id, "a delete after a delete")
                }
            }
            var op = OperationProperties(kind: 2)
            op.item = snapshot
            try appendOperation(record.id, op)
            return .added
        }
    }

    private func refused(_ id: String, _ why: String) -> LocalStoreError {
        LocalStoreError(.constraint, "sqlite-c: TodoItem/\(id): \(why)", table: "TodoItem")
    }

    private func damaged(_ id: Int64) -> LocalStoreError {
        LocalStoreError(.corrupt, "sqlite-c: operation #\(id) has properties this baseline did not write")
    }

    /// The item's operations (id order), through the (table, itemId NOCASE) index.
    private func itemOperations(_ itemId: String) throws -> [(id: Int64, op: OperationProperties)] {
        let stmt = try statement(.itemOperations)
        return try withText("TodoItem", bind: stmt, 1) {
            try withText(itemId, bind: stmt, 2) {
                defer { _ = api.reset(stmt) }
                var out: [(Int64, OperationProperties)] = []
                while true {
                    let rc = api.step(stmt)
                    if rc == SQLITE_DONE { return out }
                    guard rc == SQLITE_ROW else { throw failure("step", rc) }
                    let id = api.column_int64(stmt, 0)
                    guard let op = OperationProperties(blob(stmt, 1)) else { throw damaged(id) }
                    out.append((id, op))
                }
            }
        }
    }

    /// Whether `table` has an operation for the item: the same index, no row decoded.
    private func hasOperation(_ table: String, _ itemId: String) throws -> Bool {
        let stmt = try statement(.itemOperations)
        return try withText(table, bind: stmt, 1) {
            try withText(itemId, bind: stmt, 2) {
                defer { _ = api.reset(stmt) }
                let rc = api.step(stmt)
                guard rc == SQLITE_ROW || rc == SQLITE_DONE else { throw failure("step", rc) }
                return rc == SQLITE_ROW
            }
        }
    }

    private func rowExists(_ id: String) throws -> Bool {
        let stmt = try statement(.rowExists)
        return try withText(id, bind: stmt, 1) {
            defer { _ = api.reset(stmt) }
            let rc = api.step(stmt)
            guard rc == SQLITE_ROW || rc == SQLITE_DONE else { throw failure("step", rc) }
            return rc == SQLITE_ROW
        }
    }

    private func readRow(_ id: String) throws -> TodoRecord? {
        let stmt = try statement(.readById)
        return try withText(id, bind: stmt, 1) {
            defer { _ = api.reset(stmt) }
            let rc = api.step(stmt)
            guard rc == SQLITE_ROW else {
                if rc == SQLITE_DONE { return nil }
                throw failure("step", rc)
            }
            return record(stmt)
        }
    }

    private func appendOperation(_ itemId: String, _ op: OperationProperties) throws {
        let stmt = try statement(.appendOperation)
        let bytes = op.bytes
        try bytes.withUnsafeBytes { props in
            _ = api.bind_blob(stmt, 3, props.baseAddress, Int32(props.count), nil)
            try withText("TodoItem", bind: stmt, 1) {
                try withText(itemId, bind: stmt, 2) { try run(stmt) }
            }
        }
    }

    private func writeProperties(_ id: Int64, _ op: OperationProperties) throws {
        let stmt = try statement(.updateOperationProperties)
        _ = api.bind_int64(stmt, 1, id)
        let bytes = op.bytes
        try bytes.withUnsafeBytes { props in
            _ = api.bind_blob(stmt, 2, props.baseAddress, Int32(props.count), nil)
            try run(stmt)
        }
    }

    private func removeOperation(_ id: Int64) throws {
        let stmt = try statement(.deleteOperation)
        _ = api.bind_int64(stmt, 1, id)
        try run(stmt)
        try removeErrors(id)
    }

    private func removeErrors(_ id: Int64) throws {
        let stmt = try statement(.deleteErrors)
        _ = api.bind_int64(stmt, 1, id)
        try run(stmt)
    }

    /// The `value` of the config row `id`.
    func configValue(_ id: String) throws -> String? {
        let get = try statement(.readConfig)
        return try withText(id, bind: get, 1) {
            defer { _ = api.reset(get) }
            let rc = api.step(get)
            guard rc == SQLITE_ROW else {
                if rc == SQLITE_DONE { return nil }
                throw failure("step", rc)
            }
            return text(get, 0)
        }
    }

    /// LocalStore's tracking of marked operations (SentTracking.swift): the marker row read, and written
    /// with a row per marked operation the first time; the operation's row.
    private func trackMayBeOnServer(_ id: Int64) throws {
        if try configValue("localstore|sentTracking") == nil {
            // The first mark of this store: no operation was marked before (this baseline marks only here).
            try storeLocalStoreEntry("localstore|sentTracking", key: "sentTracking", value: "1")
        }
        try storeLocalStoreEntry("localstore|sent|\(id)", key: "sentOperation", value: String(id))
    }

    private func untrackMayBeOnServer(_ id: Int64) throws {
        let delete = try statement(.deleteConfig)
        try withText("localstore|sent|\(id)", bind: delete, 1) { try run(delete) }
    }

    private func storeLocalStoreEntry(_ id: String, key: String, value: String) throws {
        let stmt = try statement(.storeLocalStoreEntry)
        try withText(id, bind: stmt, 1) {
            try withText(key, bind: stmt, 2) { try withText(value, bind: stmt, 3) { try run(stmt) } }
        }
    }

    /// Writes a delta token: the value alone when the row exists (the backend's value-only update), else the row.
    func storeToken(_ id: String, table: String, queryId: String, _ date: Date) throws {
        let token = DeltaTokenFormat.string(from: date)
        let update = try statement(.updateConfigValue)
        try withText(id, bind: update, 1) { try withText(token, bind: update, 2) { try run(update) } }
        if api.changes(db) == 0 {
            let set = try statement(hasUpsertClause ? .setConfig : .insertConfig)
            try withText(id, bind: set, 1) {
                try withText(table, bind: set, 2) {
                    try withText(queryId, bind: set, 3) {
                        try withText(token, bind: set, 4) { try run(set) }
                    }
                }
            }
        }
    }
}

/// An operation's `properties` as this baseline writes and reads them: `{"item":…,"sent":…,"state":1,
/// "type":N,"version":V}` (keys sorted; `item`, `sent` and `state` only when present), LocalStore's layout.
struct OperationProperties {
    var kind: Int64
    var version: Int64 = 1
    var inFlight = false
    /// JSON texts, kept as they are.
    var item: String?
    var sent: String?

    init(kind: Int64) { self.kind = kind }

    var bytes: [UInt8] {
        var s = "{"
        if let item { s += "\"item\":\(item)," }
        if let sent { s += "\"sent\":\(sent)," }
        if inFlight { s += "\"state\":1," }
        s += "\"type\":\(kind),\"version\":\(version)}"
        return Array(s.utf8)
    }

    /// Reads what ``bytes`` wrote; `nil` for anything else.
    init?(_ bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self), text.hasPrefix("{"), text.hasSuffix("}") else { return nil }
        var body = Substring(text.dropFirst().dropLast())
        func take(_ key: String) -> Substring? {
            guard body.hasPrefix("\"\(key)\":") else { return nil }
            body = body.dropFirst(key.count + 3)
            return body
        }
        /// A JSON object at the start of `body` (strings with escapes skipped), and the comma after it.
        func object() -> String? {
            var depth = 0
            var inString = false
            var escaped = false
            for i in body.indices {
                let c = body[i]
                if inString {
                    if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inString = false }
                    continue
                }
                if c == "\"" { inString = true } else if c == "{" { depth += 1 } else if c == "}" {
                    depth -= 1
                    if depth == 0 {
                        let end = body.index(after: i)
                        let json = String(body[..<end])
                        body = body[end...].dropFirst()  // the comma
                        return json
                    }
                }
            }
            return nil
        }
        kind = 0
        if take("item") != nil { guard let o = object() else { return nil }; item = o }
        if take("sent") != nil { guard let o = object() else { return nil }; sent = o }
        if take("state") != nil {
            guard body.hasPrefix("1,") else { return nil }
            inFlight = true
            body = body.dropFirst(2)
        }
        guard take("type") != nil, let comma = body.firstIndex(of: ","), let k = Int64(body[..<comma]) else { return nil }
        kind = k
        body = body[comma...].dropFirst()
        guard take("version") != nil, let v = Int64(body) else { return nil }
        version = v
    }
}

/// A ``TodoRecord`` as the SDK's JSON (keys sorted, dates as LocalStore writes them).
enum SQLiteCJSON {
    static func object(_ r: TodoRecord) -> String {
        "{\"complete\":\(r.complete),\"createdAt\":\(string(DeltaTokenFormat.string(from: r.createdAt))),\"deleted\":\(r.deleted),"
            + "\"id\":\(string(r.id)),\"priority\":\(r.priority),\"text\":\(string(r.text)),"
            + "\"updatedAt\":\(string(DeltaTokenFormat.string(from: r.updatedAt))),\"version\":\(string(r.version))}"
    }

    static func sentRecord(kind: Int64, version: Int64, item: TodoRecord?) -> String {
        (item.map { "{\"item\":\(object($0))," } ?? "{") + "\"kind\":\(kind),\"version\":\(version)}"
    }

    static func string(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
