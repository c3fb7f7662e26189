import CLMDB
import LocalStore
import Synchronization

/// Connects an ``LMDBStore`` to its ``ChangeCenter``: records what write transactions change, and
/// tells commits made elsewhere (another process, or another store object of this process on the
/// same environment) from this store's own by LMDB's transaction ids, which increase by one per
/// commit of the environment.
final class LMDBChangeTracker: Sendable {
    let center: ChangeCenter

    private struct State {
        /// The last transaction id this store has accounted for (published or its own).
        var lastSeen: Int?
        /// The id of this store's write transaction in progress: while it runs, nobody else commits.
        var pending: Int?
    }

    private let state = LockedValue(State())

    init(center: ChangeCenter) { self.center = center }

    /// A write transaction with id `txnId` began (LMDB's writer lock is held, so `txnId - 1` is the
    /// last commit). Returns the collector for it, or `nil` when nobody observes.
    func writeBegan(txnId: Int) -> ChangeCollector? {
        guard let collector = center.beginTransaction() else { return nil }
        state.withLock { s in
            if let last = s.lastSeen, txnId - 1 > last { center.publishUnlistedChange() }
            s.lastSeen = txnId - 1
            s.pending = txnId
        }
        return collector
    }

    /// The write transaction `txnId` committed; publishes its changes. Called under the write lock.
    func committed(txnId: Int, _ collector: ChangeCollector?) {
        guard collector != nil || center.isObserved else { return }
        state.withLock { s in
            s.lastSeen = txnId
            s.pending = nil
        }
        center.publish(collector)
    }

    /// The write transaction that began with a collector ended without committing.
    func aborted(_ collector: ChangeCollector?) {
        guard collector != nil else { return }
        state.withLock { $0.pending = nil }
    }

    /// A read snapshot or the environment's info shows `txnId` as the last commit: publishes an
    /// unlisted change when it is newer than everything this store accounted for.
    /// With `baseline`, only records `txnId` (an observation begins).
    func sawCommitted(_ txnId: Int, baseline: Bool = false) {
        guard center.isObserved else { return }
        state.withLock { s in
            // While this store's own write runs, no other commit can happen: ids up to it are known.
            guard s.pending == nil else { return }
            if !baseline, let last = s.lastSeen, txnId > last { center.publishUnlistedChange() }
            if baseline { s.lastSeen = txnId }
            if s.lastSeen.map({ txnId > $0 }) ?? true { s.lastSeen = txnId }
        }
    }
}
