import LocalStore

/// Connects a store to its ``ChangeCenter`` by the ids of the commits of the storage it shares with others
/// (other processes, other store objects of this process): records what its write transactions change,
/// and tells the commits made elsewhere from its own, publishing an unlisted change for those. The ids
/// increase by one per commit: LMDB's transaction ids; ``KVStore``'s commit counter.
package final class CommitTracker: Sendable {
    package let center: ChangeCenter

    private struct State {
        /// The last transaction id this store has accounted for (published or its own).
        var lastSeen: Int?
        /// The id of this store's write transaction in progress: while it runs, nobody else commits.
        var pending: Int?
    }

    private let state = LockedValue(State())

    package init(center: ChangeCenter) { self.center = center }

    /// A write transaction with id `txnId` began (the writer's lock is held, so `txnId - 1` is the
    /// last commit). Returns the collector for it, or `nil` when nobody observes.
    package func writeBegan(txnId: Int) -> ChangeCollector? {
        guard let collector = center.beginTransaction() else { return nil }
        state.withLock { s in
            if let last = s.lastSeen, txnId - 1 > last { center.publishUnlistedChange() }
            s.lastSeen = txnId - 1
            s.pending = txnId
        }
        return collector
    }

    /// The write transaction `txnId` committed; publishes its changes. Called under the write lock.
    package func committed(txnId: Int, _ collector: ChangeCollector?) {
        guard collector != nil || center.isObserved else { return }
        state.withLock { s in
            s.lastSeen = txnId
            s.pending = nil
        }
        center.publish(collector)
    }

    /// The write transaction that began with a collector ended without committing.
    package func aborted(_ collector: ChangeCollector?) {
        guard collector != nil else { return }
        state.withLock { $0.pending = nil }
    }

    /// A read snapshot or the environment's info shows `txnId` as the last commit: publishes an
    /// unlisted change when it is newer than everything this store accounted for.
    /// With `baseline`, only records `txnId` (an observation begins).
    package func sawCommitted(_ txnId: Int, baseline: Bool = false) {
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
