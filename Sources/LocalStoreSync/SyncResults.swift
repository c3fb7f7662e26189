import Foundation
import LocalStore

/// What a push did, operation by operation.
public struct PushResult: Sendable, Hashable {
    /// What happened to one operation.
    public enum Outcome: Sendable, Hashable {
        /// The server accepted it; it left the queue and the server's item reached the row.
        case pushed
        /// The server accepted it, but it changed while it was sent (shown as it is now): it stays
        /// queued and is sent again.
        case pushedAndChanged(QueuedOperation)
        /// The server refused it with a conflict, and the handler's resolution was applied.
        case resolved(ConflictResolution)
        /// The server refused it: the error is recorded and the item's later operations are held
        /// until it is resolved (`LocalStoreAccess.pushErrors()`, ``SyncContext/retry(_:)``).
        case failed(PushError)
        /// Not sent: an earlier operation of the same item (its id given) has an unresolved error.
        case held(behind: Int64)
        /// Not sent and removed: an insert or update whose item a later operation deleted locally (the
        /// delete is sent instead).
        case superseded
    }

    /// One operation's outcome.
    public struct Entry: Sendable, Hashable {
        /// The operation as it was sent (or found, when held).
        public var operation: QueuedOperation
        /// What happened.
        public var outcome: Outcome
    }

    /// Every outcome, in the order the push met the operations (an operation sent again after a
    /// resolution appears once per attempt).
    public var entries: [Entry] = []
    /// The failure that stopped the push (network, authentication, a handler's error); every
    /// operation not yet pushed is still queued and none is left in flight.
    public var stoppedBy: SyncTransportError?

    /// Creates an empty result.
    public init() {}

    /// How many operations the server accepted.
    public var pushedCount: Int { entries.filter { if case .pushed = $0.outcome { return true } else { return false } }.count }
    /// The errors recorded by this push.
    public var errors: [PushError] { entries.compactMap { if case .failed(let e) = $0.outcome { return e } else { return nil } } }
    /// The ids of the operations held behind a failed one.
    public var heldOperationIds: [Int64] { entries.compactMap { if case .held = $0.outcome { return $0.operation.id } else { return nil } } }
    /// Whether every operation met was pushed or resolved and nothing stopped the push.
    public var isComplete: Bool { stoppedBy == nil && errors.isEmpty && heldOperationIds.isEmpty }
}

/// What a pull did.
public struct PullResult: Sendable, Hashable {
    /// The table pulled.
    public var table: String
    /// The query id (incremental pull), if any.
    public var queryId: String?
    /// Pages requested (the last one may be short or empty).
    public var pages = 0
    /// Items upserted into the table.
    public var upserted = 0
    /// Items deleted locally (deleted on the server).
    public var deleted = 0
    /// Ids skipped because the item has a queued local change (each once per pull).
    public var skipped: [String] = []
    /// The delta token after the pull (incremental pull).
    public var deltaToken: Date?
    /// The push that ran first because the table had pending operations, if one ran.
    public var push: PushResult?

    /// Creates an empty result.
    public init(table: String, queryId: String?) {
        self.table = table
        self.queryId = queryId
    }
}

/// Progress a UI can show, from ``SyncContext/events()``.
public enum SyncEvent: Sendable, Hashable {
    /// A push began with this many operations queued.
    case pushStarted(pending: Int)
    /// One operation's outcome.
    case operationPushed(PushResult.Entry)
    /// A push ended.
    case pushFinished(pushed: Int, failed: Int, held: Int, stopped: Bool)
    /// A pull began.
    case pullStarted(table: String, queryId: String?)
    /// A page was applied (`page` counts from 1).
    case pagePulled(table: String, page: Int, items: Int)
    /// A pull ended.
    case pullFinished(PullResult)
}
