import Foundation

// Which operations may be on the server — in flight, or sent and never completed (their
// `SentOperationRecord`) — kept as one config row per operation, so that releasing the in-flight marks
// and recovering lost answers read those few operations instead of decoding the whole queue.
// docs/semantics.md, "The typed operation queue".

extension TableConfigEntry {
    /// The key of the config rows that track the operations a push marked (one row per operation; the
    /// value is the operation's id).
    static let sentOperationKey = "sentOperation"
    /// The id of the config row that says the store tracks marks in rows (stores whose marks were
    /// written before have none until their first push: the queue is read once then).
    static let sentTrackingId = "localstore|sentTracking"

    /// The tracking row of operation `id`.
    static func sentOperation(_ id: Int64) -> TableConfigEntry {
        TableConfigEntry(id: "localstore|sent|\(id)", table: "", key: sentOperationKey, keyType: localStoreKeyType, value: String(id))
    }

    static var sentTracking: TableConfigEntry {
        TableConfigEntry(id: sentTrackingId, table: "", key: "sentTracking", keyType: localStoreKeyType, value: "1")
    }
}

extension LocalStoreAccess {
    /// The operations a push marked that may be on the server: in flight (``QueuedOperation/isInFlight``)
    /// or with a record of what was sent (``SentOperationRecord``), in id order — what a sync engine reads
    /// before a push to release marks left by a crash and to recognise writes that landed. Read from the
    /// config table's tracking rows (one per marked operation): a push's start costs the same with ten or a
    /// million queued operations. A store whose marks predate the rows (its first operation was appended by an
    /// earlier version) is read whole once, at its first push.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func operationsMayBeOnServer() throws -> [QueuedOperation] {
        guard try isTrackingSentOperations() else { return try queuedOperations().filter(\.mayBeOnServer) }
        var out: [QueuedOperation] = []
        for id in try trackedOperationIds() {
            if let op = try queuedOperation(id: id), op.mayBeOnServer { out.append(op) }
        }
        return out
    }

    /// Whether the tracking rows are authoritative (the marker row exists).
    func isTrackingSentOperations() throws -> Bool {
        try ConfigValueReading.value(self, id: TableConfigEntry.sentTrackingId) != nil
    }

    /// The ids of the tracking rows, in increasing order.
    func trackedOperationIds() throws -> [Int64] {
        let p: QueryPredicate = Field("key") == .literal(.string(TableConfigEntry.sentOperationKey))
            && Field("keyType") == .literal(.int(TableConfigEntry.localStoreKeyType))
            && Field("table") == .literal(.string(""))
        return try read(Query(systemTableNames.config, where: p)).items.compactMap { $0["value"]?.stringValue.flatMap { Int64($0) } }
            .sorted()
    }

    /// Records that `op` may be on the server (a push is marking it); inside a write transaction. The
    /// first mark of a store whose marks predate the rows writes a row for each of them.
    func trackMayBeOnServer(_ op: QueuedOperation) throws {
        try startTrackingSentOperations()
        try storeConfig(.sentOperation(op.id))
    }

    /// Makes the tracking rows authoritative, once per store: a row for every marked operation (read
    /// from the whole queue), then the marker row. Inside a write transaction.
    func startTrackingSentOperations() throws {
        guard try !isTrackingSentOperations() else { return }
        for marked in try queuedOperations() where marked.mayBeOnServer { try storeConfig(.sentOperation(marked.id)) }
        try storeConfig(.sentTracking)
    }

    /// Writes the marker row (inside a write transaction) when the caller knows that no operation carries
    /// an untracked mark: the store's first operation is being appended.
    func declareSentTrackingStarted() throws {
        try storeConfig(.sentTracking)
    }

    /// Removes the tracking row of operation `id` (completed, or settled: not on the server any more).
    func untrackMayBeOnServer(_ id: Int64) throws {
        try delete(ids: [.string(TableConfigEntry.sentOperation(id).id)], from: systemTableNames.config)
    }

    private func storeConfig(_ entry: TableConfigEntry) throws {
        if let shortcuts = ShortcutCasts.shortcuts(self) { return try shortcuts.storeConfigEntry(entry) }
        try upsert([entry.item], into: systemTableNames.config, options: .strict)
    }
}
