import Foundation
import LocalStore

/// A to-do item as the app sees it. The store holds it as a row of ``Todo/table`` (``ItemEncoder`` and
/// ``ItemDecoder`` map the properties to columns); `version` and `updatedAt` are the server's system
/// properties, `nil` until the server has seen the item.
public struct Todo: Codable, Sendable, Hashable {
    /// The item's id (the client makes one up for a new item: an upper-case UUID).
    public var id: String
    /// What to do.
    public var text: String
    /// Whether it is done.
    public var complete: Bool
    /// The server's version of the item (its optimistic-concurrency tag).
    public var version: String?
    /// When the server last changed the item.
    public var updatedAt: Date?

    /// Creates an item.
    public init(id: String, text: String, complete: Bool = false, version: String? = nil, updatedAt: Date? = nil) {
        self.id = id
        self.text = text
        self.complete = complete
        self.version = version
        self.updatedAt = updatedAt
    }

    /// The local table's name.
    public static let table = "TodoItem"

    /// The local table: the app's columns, the two system properties the sync needs, and an index on
    /// `updatedAt` for the incremental pull's `updatedAt ge <token>` (LocalStore adds no index by itself).
    public static let schema = TableSchema(
        Todo.table,
        ["id": .string, "text": .string, "complete": .boolean, "version": .string, "updatedAt": .date],
        indexed: ["updatedAt"])
}
