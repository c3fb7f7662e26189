import Foundation
import LocalStore

/// The table endpoints of an offline-sync service, as the sync engine uses them: create, replace and
/// delete one item with its `version` as the precondition, and read a page of a query.
///
/// ``SyncContext`` calls a transport; ``InMemoryTableService`` implements one with the service's rules
/// for tests, and an HTTP transport implements one for a real back end. The contract:
/// - A failure is a ``SyncTransportError``, whose ``SyncTransportError/Kind`` tells the engine what to do:
///   a conflict or a failed precondition goes to the conflict handler with the server's item,
///   ``SyncTransportError/Kind/transient`` and ``SyncTransportError/Kind/unauthorized`` stop the push
///   with every operation still queued, anything else is recorded as a push error. Any other error
///   thrown stops the push like a transient one; a `CancellationError` ends it (nothing left in flight).
/// - Items carry the server's system columns (`version`, `updatedAt`, `createdAt`, `deleted`) as
///   `Value`s: dates as `.date`, the version as `.string`.
/// - Calls may run on any task; a transport is `Sendable`.
public protocol SyncTransport: Sendable {
    /// Creates `item` (which has its `id`) in `table`; returns the item as the server stored it.
    /// An item that already exists is a ``SyncTransportError/Kind/conflict`` with the server's item.
    func insert(_ item: Item, into table: String) async throws -> Item

    /// Replaces the item with `item`'s id in `table`, only while the server's `version` is `version`
    /// (unconditionally when `nil`); returns the item as stored. Another version is
    /// ``SyncTransportError/Kind/preconditionFailed`` with the server's item; a missing or deleted item
    /// ``SyncTransportError/Kind/notFound``.
    func replace(_ item: Item, in table: String, ifVersion version: String?) async throws -> Item

    /// Deletes (soft-deletes, on a service that keeps deleted items) item `id` of `table`, only while
    /// its `version` is `version` (unconditionally when `nil`). The same errors as `replace(_:in:ifVersion:)`.
    func delete(id: String, from table: String, ifVersion version: String?) async throws

    /// One page of `request` (its query names the table, the filter, the order, `$skip` and `$top`);
    /// deleted items are included when `PullRequest.includeDeleted` is set.
    func page(_ request: PullRequest) async throws -> SyncPage
}

/// One page of a query's result.
public struct SyncPage: Sendable, Hashable {
    /// The items, in the query's order.
    public var items: [Item]
    /// Whether the service says more items follow (a `nextLink`); `nil` when the service does not
    /// say, and the engine then stops at a page shorter than the page size it asked for.
    public var hasMore: Bool?

    /// Creates a page.
    public init(items: [Item], hasMore: Bool? = nil) {
        self.items = items
        self.hasMore = hasMore
    }
}

/// A failed call of a ``SyncTransport``: its kind, the HTTP status when there was one, the server's
/// message and, for a conflict, the server's item.
public struct SyncTransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as the engine must treat it. Extensible: more kinds may be added.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case conflict, preconditionFailed, notFound, unauthorized, transient, rejected
        }
        private let base: Base

        /// The item exists already (HTTP 409): the server's item comes with it.
        public static let conflict = Kind(base: .conflict)
        /// The item's version is not the one sent (HTTP 412): the server's item comes with it.
        public static let preconditionFailed = Kind(base: .preconditionFailed)
        /// The item does not exist or is deleted (HTTP 404, 410).
        public static let notFound = Kind(base: .notFound)
        /// The caller is not authenticated or not allowed (HTTP 401, 403): the push stops.
        public static let unauthorized = Kind(base: .unauthorized)
        /// The service could not be reached or asked to retry later (network errors, timeouts, HTTP
        /// 408, 429, 502–504): the push stops and is tried again later.
        public static let transient = Kind(base: .transient)
        /// The service refused the request (any other status): recorded as a push error.
        public static let rejected = Kind(base: .rejected)

        /// Whether the same request may succeed later unchanged.
        public var isRetryable: Bool { base == .transient }
        /// Whether the server's item is part of the answer (conflict and failed precondition).
        public var isConflict: Bool { base == .conflict || base == .preconditionFailed }
        /// The kind's name.
        public var description: String { base.rawValue }
    }

    /// The kind.
    public var kind: Kind
    /// The HTTP status code, when the service answered.
    public var statusCode: Int?
    /// The service's message or the network error's description.
    public var message: String
    /// The server's item (for a conflict or a failed precondition).
    public var serverItem: Item?
    /// The body of the service's answer as text, when an HTTP transport received one.
    public var responseBody: String?

    /// Creates an error.
    public init(_ kind: Kind, statusCode: Int? = nil, message: String, serverItem: Item? = nil, responseBody: String? = nil) {
        self.kind = kind
        self.statusCode = statusCode
        self.message = message
        self.serverItem = serverItem
        self.responseBody = responseBody
    }

    /// The kind an HTTP status code means (2xx is not an error; it maps to `rejected`).
    public static func kind(forStatus status: Int) -> Kind {
        switch status {
        case 409: return .conflict
        case 412: return .preconditionFailed
        case 404, 410: return .notFound
        case 401, 403: return .unauthorized
        case 408, 429, 502, 503, 504: return .transient
        default: return .rejected
        }
    }

    /// `kind (status): message`.
    public var description: String {
        "\(kind)" + (statusCode.map { " (HTTP \($0))" } ?? "") + ": \(message)"
    }
}
