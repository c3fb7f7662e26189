import Foundation
import LocalStore

/// A push the server refused because its copy of the item differs: an insert of an id it has (409)
/// or a replace or delete of another version (412). Handed to a ``SyncConflictHandler``.
public struct SyncConflict: Sendable, Hashable {
    /// The operation that was pushed.
    public var operation: QueuedOperation
    /// The error recorded for it (its id and version identify the operation to resolve).
    public var error: PushError
    /// What was sent: the local row for an insert or update, the stored item for a delete.
    public var localItem: Item?
    /// The server's item, with its `version`.
    public var serverItem: Item
    /// The HTTP status (409 or 412) when there was one.
    public var statusCode: Int?

    /// Creates a conflict.
    public init(operation: QueuedOperation, error: PushError, localItem: Item?, serverItem: Item, statusCode: Int?) {
        self.operation = operation
        self.error = error
        self.localItem = localItem
        self.serverItem = serverItem
        self.statusCode = statusCode
    }
}

/// What to do with a ``SyncConflict``. The engine applies it to the store in one transaction, under the
/// rules that keep a newer queued edit (docs/semantics.md, "No resolution loses a newer edit").
public enum ConflictResolution: Sendable, Hashable {
    /// The server's item wins: it replaces the local item (a server-deleted item is removed locally)
    /// and the operation is dropped. A newer edit queued after the operation keeps its columns and is
    /// pushed next, on the server's version.
    case serverWins
    /// The local change wins: the operation is pushed again on the server's version — an insert as a
    /// replace, an update with the local row, a delete as a delete.
    case clientWins
    /// `item` (a merge of both) is stored locally and pushed on the server's version.
    case merge(Item)
    /// The local change is given up: the local item and the item's queued operations are removed.
    case discard
    /// Nothing is decided: the error stays recorded (`LocalStoreAccess.pushErrors()`) and the item's
    /// operations stay queued, held, until the application resolves it with the store's resolutions.
    case manual
}

/// Decides conflicts during a push (the iOS SDK's `MSSyncContextDelegate`, .NET's
/// `IMobileServiceSyncHandler`). Called once per conflict, on the pushing task; a thrown error stops the
/// push like a transient failure, with the operation still queued and its error recorded.
public protocol SyncConflictHandler: Sendable {
    /// The resolution of `conflict`.
    func resolve(_ conflict: SyncConflict) async throws -> ConflictResolution
}

/// A ``SyncConflictHandler`` from a closure or a fixed policy.
public struct ConflictPolicy: SyncConflictHandler {
    private let body: @Sendable (SyncConflict) async throws -> ConflictResolution

    /// A handler that calls `body`.
    public init(_ body: @escaping @Sendable (SyncConflict) async throws -> ConflictResolution) { self.body = body }

    /// Calls the closure.
    public func resolve(_ conflict: SyncConflict) async throws -> ConflictResolution { try await body(conflict) }

    /// Every conflict: the server's item wins.
    public static let serverWins = ConflictPolicy { _ in .serverWins }
    /// Every conflict: the local change is pushed again on the server's version (deletes included).
    public static let clientWins = ConflictPolicy { _ in .clientWins }
    /// Every conflict is left for the application (``ConflictResolution/manual``).
    public static let manual = ConflictPolicy { _ in .manual }
}
