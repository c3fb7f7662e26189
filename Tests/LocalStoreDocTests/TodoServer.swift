import Foundation
import LocalStore

/// A small stand-in for the service's table endpoints, so that the sync article's snippets run: an
/// ``InMemoryStore`` is the server's database. It keeps soft-deleted rows (`deleted`), gives every
/// write a new `version` and `updatedAt`, refuses a write whose `version` is not the stored one (412,
/// with the server's item) and answers pulls by parsing the request's query string.
final class TodoServer {
    /// A failed request, as an HTTP client would report it.
    struct Failure: Error {
        var statusCode: Int
        var message: String
        var serverItem: Item?
    }

    let database: InMemoryStore
    /// The `updatedAt` the next write gets; each write advances it by one second unless `frozenClock`.
    private(set) var now = Date(timeIntervalSince1970: 1_700_000_000)
    /// When set, every write gets the same `updatedAt` (to exercise paging by `skip`).
    var frozenClock = false
    private var versions = 0

    init() throws {
        database = try InMemoryStore()
        try database.defineTable(TableSchema("TodoItem", [
            "text": .string, "complete": .boolean, "priority": .integer, "updatedAt": .date, "version": .string,
            "deleted": .boolean,
        ]))
    }

    /// Applies one pushed operation; returns the server's item (nil for a delete).
    func send(_ kind: OperationKind, to table: String, item: Item?) throws -> Item? {
        guard var item, let id = item.stringId else { throw Failure(statusCode: 400, message: "no item id", serverItem: nil) }
        let stored = try database.read(table: table, id: id)
        let live = stored.flatMap { $0["deleted"] == .bool(true) ? nil : $0 }
        switch kind {
        case .insert:
            if let live { throw Failure(statusCode: 409, message: "\(id) already exists", serverItem: live) }
        case .update, .delete:
            guard let live else { throw Failure(statusCode: 404, message: "\(id) not found", serverItem: nil) }
            if let version = item["version"], version != .null, version != live["version"] {
                throw Failure(statusCode: 412, message: "\(id) has changed on the server", serverItem: live)
            }
        }
        item = write(item, deleted: kind == .delete)
        try database.upsert([item], into: table, options: .ignoringUnknownColumns)
        return kind == .delete ? nil : try database.read(table: table, id: id)
    }

    /// Another client's change, made directly on the server.
    func change(_ item: Item) throws {
        try database.upsert([write(item, deleted: item["deleted"] == .bool(true))], into: "TodoItem")
    }

    /// One page of a pull: the request's query (`$filter`, `$orderby`, `$skip`, `$top`) on the table.
    func get(_ table: String, query: String) throws -> [Item] {
        let request = try PullRequest.parse(query, table: table)
        var query = request.query
        if !request.includeDeleted {
            query.predicate = query.predicate.map { $0 && Field("deleted") != true } ?? (Field("deleted") != true)
        }
        return try database.read(query).items
    }

    private func write(_ item: Item, deleted: Bool) -> Item {
        var item = item
        versions += 1
        if !frozenClock { now += 1 }
        item["version"] = .string("v\(versions)")
        item["updatedAt"] = .date(now)
        item["deleted"] = .bool(deleted)
        return item
    }
}
