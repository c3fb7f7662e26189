import Foundation
import LocalStore

/// An HTTP-style error from the server: a status code, a message and, for a conflict, the server's item.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    /// The HTTP status code: 404 not found, 409 conflict (insert of an existing id), 412 precondition
    /// failed (the item's version is not the server's).
    public var statusCode: Int
    /// What went wrong.
    public var message: String
    /// The server's current item, for 409 and 412.
    public var serverItem: Item?

    /// Creates an error.
    public init(statusCode: Int, message: String, serverItem: Item? = nil) {
        self.statusCode = statusCode
        self.message = message
        self.serverItem = serverItem
    }

    public var description: String { "HTTP \(statusCode): \(message)" }
}

/// An in-process stand-in for an Azure Mobile Apps table endpoint (`/tables/TodoItem`), with the rules
/// a sync client meets: the server stamps `version` and `updatedAt` on every change, rejects an update
/// or delete whose `version` is stale with 412 and the server's item, rejects an insert of an existing
/// id with 409, soft-deletes (`deleted = true`), and answers `GET` with the OData query string the
/// client sends (`$filter`, `$orderby`, `$skip`, `$top`, `__includeDeleted`).
///
/// Its own rows live in an ``InMemoryStore``, so the query string is parsed with ``PullRequest/parse(_:table:)``
/// and run as a ``Query`` — the same parser and evaluator a LocalStore client uses.
public actor FakeTodoServer {
    private let db: InMemoryStore
    private var changes = 0
    private let epoch: Date
    /// Every request, in order, as `METHOD path[?query]` (for logs and tests).
    public private(set) var requests: [String] = []

    /// The server's table: the client's columns plus `deleted`.
    static let schema = TableSchema(
        Todo.table,
        ["id": .string, "text": .string, "complete": .boolean, "version": .string, "updatedAt": .date, "deleted": .boolean],
        indexed: ["updatedAt"])

    /// Creates an empty server whose clock starts at `epoch` and advances one second per change.
    public init(epoch: Date = Date(timeIntervalSince1970: 1_790_000_000)) throws {
        db = try InMemoryStore()
        try db.defineTable(Self.schema)
        self.epoch = epoch
    }

    // MARK: The table endpoint

    /// `POST /tables/TodoItem`: inserts `item` and returns it as stored.
    public func insert(_ item: Item) throws -> Item {
        let id = try Self.id(of: item)
        requests.append("POST /tables/\(Todo.table)")
        if let existing = try db.read(table: Todo.table, id: id) {
            throw ServerError(statusCode: 409, message: "\(id) already exists", serverItem: Self.wire(existing))
        }
        var row = Self.appColumns(of: item)
        row["id"] = .string(id)
        row["deleted"] = .bool(false)
        return try stamp(row)
    }

    /// `PATCH /tables/TodoItem/{id}` with `If-Match: version`: merges `item`'s columns into the stored item.
    public func update(_ item: Item) throws -> Item {
        let id = try Self.id(of: item)
        requests.append("PATCH /tables/\(Todo.table)/\(id)")
        let existing = try live(id)
        try Self.checkVersion(item, against: existing)
        var row = existing
        for (k, v) in Self.appColumns(of: item) { row[k] = v }
        return try stamp(row)
    }

    /// `DELETE /tables/TodoItem/{id}` with `If-Match: version`: soft-deletes the item.
    public func delete(_ item: Item) throws {
        let id = try Self.id(of: item)
        requests.append("DELETE /tables/\(Todo.table)/\(id)")
        var row = try live(id)
        try Self.checkVersion(item, against: row)
        row["deleted"] = .bool(true)
        _ = try stamp(row)
    }

    /// `GET /tables/TodoItem?<queryString>`: the items the query selects, soft-deleted ones only with
    /// `__includeDeleted=true`.
    public func get(_ queryString: String) throws -> [Item] {
        requests.append("GET /tables/\(Todo.table)?\(queryString)")
        let request = try PullRequest.parse(queryString, table: Todo.table)
        var query = request.query
        if !request.includeDeleted {
            let live: QueryPredicate = Field("deleted") == false
            query.predicate = query.predicate.map { .and([$0, live]) } ?? live
        }
        return try db.read(query).items.map(Self.wire)
    }

    // MARK: Another device

    /// Another client's change, made directly on the server: inserts or updates `id`.
    @discardableResult
    public func otherDeviceSaves(id: String, text: String, complete: Bool = false) throws -> Item {
        var row = try db.read(table: Todo.table, id: id) ?? ["id": .string(id), "deleted": .bool(false)]
        row["text"] = .string(text)
        row["complete"] = .bool(complete)
        return try stamp(row)
    }

    /// The items that are not deleted, by id.
    public func liveItems() throws -> [Item] {
        try db.read(Query(Todo.table, where: Field("deleted") == false, sort: [SortKey("id")])).items.map(Self.wire)
    }

    /// The latest `updatedAt` the server has stamped.
    public func latestChange() -> Date? { changes == 0 ? nil : epoch.addingTimeInterval(Double(changes)) }

    // MARK: Helpers

    private func stamp(_ row: Item) throws -> Item {
        changes += 1
        var row = row
        row["version"] = .string("v\(changes)")
        row["updatedAt"] = .date(epoch.addingTimeInterval(Double(changes)))
        try db.upsert([row], into: Todo.table)
        return Self.wire(row)
    }

    private func live(_ id: String) throws -> Item {
        guard let row = try db.read(table: Todo.table, id: id), row["deleted"] != .bool(true) else {
            throw ServerError(statusCode: 404, message: "\(id) does not exist")
        }
        return row
    }

    private static func checkVersion(_ item: Item, against stored: Item) throws {
        guard let sent = item.value(forColumn: "version"), !sent.isNull else { return }
        if sent != stored["version"] {
            throw ServerError(
                statusCode: 412, message: "\(stored.stringId ?? "?") has version \(stored["version"] ?? .null), not \(sent)",
                serverItem: wire(stored))
        }
    }

    private static func id(of item: Item) throws -> String {
        guard let id = item.stringId, !id.isEmpty else { throw ServerError(statusCode: 400, message: "the item has no id") }
        return id
    }

    /// The columns a client may set (system properties are the server's).
    private static func appColumns(of item: Item) -> Item {
        var out = Item()
        for (k, v) in item where ["text", "complete"].contains(k.lowercased()) { out[k.lowercased()] = v }
        return out
    }

    /// What goes over the wire: every column, nulls left out.
    private static func wire(_ row: Item) -> Item { Item(row.values.filter { !$0.value.isNull }) }
}
