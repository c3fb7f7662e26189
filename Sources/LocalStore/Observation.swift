import Dispatch
import Synchronization

// Change observation: see docs/observation.md.

/// What one table's rows went through in a ``StoreChange``.
public enum TableChange: Sendable, Hashable {
    /// The rows whose ids are listed were inserted or updated (`upserted`) or deleted (`deleted`).
    ///
    /// Ids are reported as the caller passed them. `deleted` lists the ids a `delete(ids:from:)` was
    /// given, including ids that had no row. An id can be in both lists (upserted, then deleted, in
    /// one transaction or in coalesced ones): read the row to learn its final state.
    case rows(upserted: [Value], deleted: [Value])
    /// Any number of rows may have changed and they are not listed: a `delete(matching:)`, more than
    /// ``ChangeCollector/idLimit`` ids in one table, or coalesced changes that would exceed it.
    case many

    /// The upserted ids, or `nil` for ``many``.
    public var upsertedIds: [Value]? {
        if case .rows(let upserted, _) = self { return upserted }
        return nil
    }

    /// The deleted ids, or `nil` for ``many``.
    public var deletedIds: [Value]? {
        if case .rows(_, let deleted) = self { return deleted }
        return nil
    }
}

/// The changes one committed write transaction (or several, coalesced) made to a store.
///
/// Delivered by ``LocalStore/changes()`` only after the transaction committed, in commit order, and
/// never for a transaction that rolled back.
public struct StoreChange: Sendable, Hashable {
    /// The commit numbers this change covers: one number for one transaction, a range when a slow
    /// consumer's pending changes were coalesced. Numbers increase by one per delivered commit of
    /// the store object, starting at 1; they are not shared with other processes.
    public var commits: ClosedRange<UInt64>
    /// The changed tables (keys are the tables' defined names) and what changed in each.
    public var tables: [String: TableChange]
    /// `true` when changes that are not itemised in ``tables`` are included too: commits made by
    /// another process or another store object on the same files, or a transaction that was already
    /// running when this observation began. Any table may then have changed.
    public var includesUnlistedChanges: Bool

    /// Creates a change.
    public init(commits: ClosedRange<UInt64>, tables: [String: TableChange], includesUnlistedChanges: Bool) {
        self.commits = commits
        self.tables = tables
        self.includesUnlistedChanges = includesUnlistedChanges
    }

    /// Whether `table` (matched case-insensitively) may have changed.
    public func affects(_ table: String) -> Bool {
        if includesUnlistedChanges { return true }
        if tables[table] != nil { return true }
        let folded = Identifier.fold(table)
        return tables.keys.contains { Identifier.fold($0) == folded }
    }

    /// What changed in `table` (matched case-insensitively), or `nil` when it is not listed.
    public func change(of table: String) -> TableChange? {
        if let c = tables[table] { return c }
        let folded = Identifier.fold(table)
        return tables.first { Identifier.fold($0.key) == folded }?.value
    }

    /// Makes `self` stand for itself followed by `later` (in place: id lists grow without copies).
    mutating func coalesce(with later: StoreChange) {
        commits = commits.lowerBound...later.commits.upperBound
        includesUnlistedChanges = includesUnlistedChanges || later.includesUnlistedChanges
        for (table, change) in later.tables {
            if var existing = tables.removeValue(forKey: table) {
                ChangeCollector.merge(&existing, change)
                tables[table] = existing
            } else {
                tables[table] = change
            }
        }
    }
}

/// What a backend records during one write transaction, for ``ChangeCenter/publish(_:)``.
///
/// Backends create one with ``ChangeCenter/beginTransaction()`` (which returns `nil` when nobody
/// observes, so recording costs nothing then) and record every successful write call.
public struct ChangeCollector: Sendable {
    /// The largest number of ids listed per table in one change; beyond it the table is ``TableChange/many``.
    public static let idLimit = 1000

    private(set) var tables: [String: TableChange] = [:]

    /// An empty record.
    public init() {}

    /// Whether nothing was recorded.
    public var isEmpty: Bool { tables.isEmpty }

    /// Records that `ids` of `table` (its defined name) were inserted or updated.
    public mutating func upserted(_ ids: [Value], in table: String) {
        record(table, .rows(upserted: ids, deleted: []))
    }

    /// Records the upsert of `items` into the table `schema` defines (ids read with the schema's id column).
    public mutating func upserted(_ items: [Item], schema: TableSchema) {
        let idColumn = schema.columns[schema.idIndex].name
        upserted(items.compactMap { $0.value(forColumn: idColumn) }, in: schema.name)
    }

    /// Records that the rows with `ids` of `table` (its defined name) were deleted.
    public mutating func deleted(_ ids: [Value], in table: String) {
        record(table, .rows(upserted: [], deleted: ids))
    }

    /// Records that unlisted rows of `table` (its defined name) changed.
    public mutating func changedMany(in table: String) {
        record(table, .many)
    }

    private mutating func record(_ table: String, _ change: TableChange) {
        if var existing = tables.removeValue(forKey: table) {
            Self.merge(&existing, change)
            tables[table] = existing
        } else {
            tables[table] = Self.capped(change)
        }
    }

    private static func capped(_ change: TableChange) -> TableChange {
        if case .rows(let u, let d) = change, u.count + d.count > idLimit { return .many }
        return change
    }

    /// `a` followed by `b`, in `a`'s place.
    static func merge(_ a: inout TableChange, _ b: TableChange) {
        guard case .rows(var u1, var d1) = a, case .rows(let u2, let d2) = b else {
            a = .many
            return
        }
        a = .many  // drops `a`'s references, so the lists below grow in place
        guard u1.count + d1.count + u2.count + d2.count <= idLimit else { return }
        appendNew(&u1, u2)
        appendNew(&d1, d2)
        a = .rows(upserted: u1, deleted: d1)
    }

    private static func appendNew(_ a: inout [Value], _ b: [Value]) {
        if b.isEmpty { return }
        if a.isEmpty {
            a = b
            return
        }
        if b.count <= 8 {
            // The usual case (a commit of a few rows coalesced into a long list): no set of the whole list.
            for v in b where !a.contains(v) { a.append(v) }
            return
        }
        var seen = Set(a)
        for v in b where seen.insert(v).inserted { a.append(v) }
    }
}

/// The hub through which a store publishes its committed changes to its observers.
///
/// Every ``LocalStore`` owns one (``LocalStore/changeCenter``). Backends call, while holding their
/// write lock (so that changes are published in commit order):
/// - ``beginTransaction()`` when a write transaction begins: a collector when somebody observes,
///   otherwise `nil` (one atomic load: observation costs nothing when nobody observes);
/// - ``publish(_:)`` right after the commit succeeded (never after a rollback);
/// - ``publishUnlistedChange()`` when they notice that another process (or another store object on
///   the same files) committed;
/// - ``finish()`` when the store closes.
///
/// **Buffering.** Each observer has its own queue of at most ``bufferLimit`` changes. When it is
/// full, a new change is coalesced into the newest queued one (tables merged; ids merged up to
/// ``ChangeCollector/idLimit`` per table, beyond which the table becomes ``TableChange/many``). A
/// writer never waits for an observer and an observer's memory is bounded whatever its speed.
public final class ChangeCenter: Sendable {
    /// The largest number of changes queued for one observer before new ones are coalesced.
    public static let bufferLimit = 64

    private struct State {
        var subscribers: [UInt64: ChangeBuffer] = [:]
        var nextId: UInt64 = 1
        var lastCommit: UInt64 = 0
        var isFinished = false
        var probe: (@Sendable (_ baseline: Bool) -> Void)?
        var pollInterval: Duration = .milliseconds(100)
        var timer: DispatchSourceTimer?
    }

    @usableFromInline let observers = Atomic<Int>(0)
    private let state = LockedValue(State())
    private static let pollQueue = DispatchQueue(label: "LocalStore.changes.poll")

    /// A center without observers.
    public init() {}

    /// Whether at least one observer is registered (one relaxed atomic load).
    @inlinable public var isObserved: Bool { observers.load(ordering: .relaxed) > 0 }

    /// The number of registered observers.
    public var observerCount: Int { observers.load(ordering: .relaxed) }

    /// A collector for a write transaction that is beginning, or `nil` when nobody observes.
    @inline(__always) public func beginTransaction() -> ChangeCollector? {
        isObserved ? ChangeCollector() : nil
    }

    /// Publishes a committed transaction's changes. Call after the commit succeeded, still holding
    /// the write lock. `nil` (nobody observed when it began) publishes an unlisted change if somebody
    /// observes now; an empty collector publishes nothing.
    @inline(__always) public func publish(_ collector: ChangeCollector?) {
        guard isObserved else { return }
        if let collector {
            if collector.isEmpty { return }
            deliver(tables: collector.tables, unlisted: false)
        } else {
            deliver(tables: [:], unlisted: true)
        }
    }

    /// Publishes that the store changed in ways not itemised (another process or store object committed).
    public func publishUnlistedChange() {
        guard isObserved else { return }
        deliver(tables: [:], unlisted: true)
    }

    private func deliver(tables: [String: TableChange], unlisted: Bool) {
        state.withLock { s in
            guard !s.isFinished, !s.subscribers.isEmpty else { return }
            s.lastCommit += 1
            let change = StoreChange(commits: s.lastCommit...s.lastCommit, tables: tables, includesUnlistedChanges: unlisted)
            for buffer in s.subscribers.values { buffer.push(change) }
        }
    }

    /// Ends every observation (their sequences end after the changes already queued) and refuses new ones.
    public func finish() {
        let (buffers, timer) = state.withLock { s -> ([ChangeBuffer], DispatchSourceTimer?) in
            s.isFinished = true
            let buffers = Array(s.subscribers.values)
            s.subscribers = [:]
            let timer = s.timer
            s.timer = nil
            observers.store(0, ordering: .relaxed)
            return (buffers, timer)
        }
        timer?.cancel()
        for b in buffers { b.finish() }
    }

    /// Makes the center call `probe(false)` every `interval` while somebody observes, on a background
    /// thread; the probe looks for commits made elsewhere and calls ``publishUnlistedChange()``.
    /// When the first observer registers, the center calls `probe(true)` on the registering thread:
    /// the probe then only records the current state as the baseline (it must not block: a
    /// registration may come from inside a write body).
    public func setExternalChangeProbe(interval: Duration, _ probe: @escaping @Sendable (_ baseline: Bool) -> Void) {
        state.withLock { s in
            s.probe = probe
            s.pollInterval = interval
        }
    }

    private func runProbe() {
        if let probe = state.withLock({ $0.probe }) { probe(false) }
    }

    /// The polling interval of the external-change probe (`nil` when the backend has none).
    public var externalChangePollInterval: Duration? {
        state.withLock { s in s.probe == nil ? nil : s.pollInterval }
    }

    /// Registers a new observer (already finished when the center is).
    func subscribe() -> ChangeSubscription {
        let buffer = ChangeBuffer()
        var baseline: (@Sendable (Bool) -> Void)?
        let id: UInt64? = state.withLock { s in
            guard !s.isFinished else { return nil }
            let id = s.nextId
            s.nextId += 1
            s.subscribers[id] = buffer
            observers.store(s.subscribers.count, ordering: .relaxed)
            if s.subscribers.count == 1, s.probe != nil, s.timer == nil {
                let timer = DispatchSource.makeTimerSource(queue: Self.pollQueue)
                let nanos = Int(s.pollInterval.components.seconds * 1_000_000_000 + s.pollInterval.components.attoseconds / 1_000_000_000)
                timer.schedule(deadline: .now() + .nanoseconds(nanos), repeating: .nanoseconds(max(nanos, 1_000_000)))
                timer.setEventHandler { [weak self] in self?.runProbe() }
                s.timer = timer
                timer.resume()
                baseline = s.probe
            }
            return id
        }
        baseline?(true)
        if id == nil { buffer.finish() }
        let subscription = ChangeSubscription(center: id == nil ? nil : self, id: id ?? 0, buffer: buffer)
        buffer.onTermination = { [weak self] in if let id { self?.unsubscribe(id) } }
        return subscription
    }

    func unsubscribe(_ id: UInt64) {
        let timer = state.withLock { s -> DispatchSourceTimer? in
            guard s.subscribers.removeValue(forKey: id) != nil else { return nil }
            observers.store(s.subscribers.count, ordering: .relaxed)
            guard s.subscribers.isEmpty else { return nil }
            let timer = s.timer
            s.timer = nil
            return timer
        }
        timer?.cancel()
    }
}

/// One observer's queue of changes and the signal that wakes its consumer.
final class ChangeBuffer: Sendable {
    private struct State {
        var pending: [StoreChange] = []
        var isFinished = false
    }

    private let state = LockedValue(State())
    let signals: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let termination = LockedValue<(@Sendable () -> Void)?>(nil)

    init() {
        (signals, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        continuation.onTermination = { [weak self] _ in self?.terminated() }
    }

    private func terminated() {
        let body = termination.withLock { t -> (@Sendable () -> Void)? in
            defer { t = nil }
            return t
        }
        body?()
    }

    /// Runs once, when the consumer's stream terminates (cancelled, finished or dropped).
    var onTermination: (@Sendable () -> Void)? {
        get { termination.withLock { $0 } }
        set { termination.withLock { $0 = newValue } }
    }

    /// Queues `change`, coalescing it into the newest queued change when the queue is full. Never blocks.
    func push(_ change: StoreChange) {
        let wasEmpty = state.withLock { s -> Bool in
            guard !s.isFinished else { return false }
            let wasEmpty = s.pending.isEmpty
            if s.pending.count >= ChangeCenter.bufferLimit {
                s.pending[s.pending.count - 1].coalesce(with: change)
            } else {
                s.pending.append(change)
            }
            return wasEmpty
        }
        // A queue that was not empty has a wake-up outstanding (or a consumer about to take from it).
        if wasEmpty { continuation.yield(()) }
    }

    /// The oldest queued change.
    func take() -> StoreChange? {
        state.withLock { s in s.pending.isEmpty ? nil : s.pending.removeFirst() }
    }

    /// The number of queued changes.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    func finish() {
        state.withLock { $0.isFinished = true }
        continuation.finish()
    }

    /// Drops what is queued and ends the stream (cancellation).
    func cancel() {
        state.withLock { s in
            s.isFinished = true
            s.pending = []
        }
        continuation.finish()
    }
}

/// A registration with a ``ChangeCenter``; unregisters when the last reference goes away.
final class ChangeSubscription: Sendable {
    let center: ChangeCenter?
    let id: UInt64
    let buffer: ChangeBuffer

    init(center: ChangeCenter?, id: UInt64, buffer: ChangeBuffer) {
        self.center = center
        self.id = id
        self.buffer = buffer
    }

    deinit {
        buffer.cancel()
        center?.unsubscribe(id)
    }
}

/// The committed changes of a store, as an `AsyncSequence` (see ``LocalStore/changes()``).
///
/// The observation starts when the sequence is created: every commit after that is delivered. It
/// ends when the consuming task is cancelled, when the sequence and its iterator are released, or
/// when the store is closed (after the changes already queued). Iterate it from one task only.
public struct StoreChanges: AsyncSequence, Sendable {
    /// Each element is one committed transaction (or several, coalesced).
    public typealias Element = StoreChange
    /// The sequence never throws; it ends instead.
    public typealias Failure = Never

    let subscription: ChangeSubscription

    /// Makes the iterator (one per sequence: the sequence has a single consumer).
    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: subscription, signals: subscription.buffer.signals.makeAsyncIterator())
    }

    /// The number of changes waiting to be consumed (at most ``ChangeCenter/bufferLimit``).
    public var pendingCount: Int { subscription.buffer.pendingCount }

    /// Iterates the changes.
    public struct Iterator: AsyncIteratorProtocol {
        let subscription: ChangeSubscription
        var signals: AsyncStream<Void>.Iterator

        /// The next committed change; `nil` once the observation ended.
        public mutating func next() async -> StoreChange? {
            while true {
                if Task.isCancelled {
                    subscription.buffer.cancel()
                    return nil
                }
                if let change = subscription.buffer.take() { return change }
                if await signals.next() == nil {
                    if Task.isCancelled {
                        subscription.buffer.cancel()
                        return nil
                    }
                    return subscription.buffer.take()
                }
            }
        }
    }
}

/// A query observed over time (see ``LocalStore/observe(_:)``): yields the query's result now, then
/// again after every commit that may have changed its table, skipping results equal to the last one.
///
/// Re-reads run on the store's blocking-work threads, never on Swift's cooperative pool. A slow
/// consumer makes the sequence skip intermediate states (changes are coalesced), never queue them.
public struct QueryObservation<Element: Sendable & Equatable>: AsyncSequence, Sendable {
    /// A read error of the query (for example `closed`, `unknownTable`).
    public typealias Failure = any Error

    let store: any LocalStore
    let query: Query
    let transform: @Sendable (ReadResult) -> Element

    /// Makes the iterator; observation of commits begins at its first `next()`.
    public func makeAsyncIterator() -> Iterator { Iterator(observation: self) }

    /// Iterates the results.
    public struct Iterator: AsyncIteratorProtocol {
        let observation: QueryObservation
        var changes: StoreChanges.Iterator?
        var last: Element?
        var isDone = false

        /// The query's next distinct result; `nil` once the task is cancelled or the store closed.
        public mutating func next() async throws -> Element? {
            if isDone { return nil }
            do {
                if changes == nil {
                    // Subscribe before the first read: no commit after it can be missed.
                    changes = observation.store.changes().makeAsyncIterator()
                    return try await read()
                }
                while let change = await changes?.next() {
                    guard change.affects(observation.query.table) else { continue }
                    let result = try await read()
                    if let result { return result }
                }
                isDone = true
                changes = nil
                return nil
            } catch {
                isDone = true
                changes = nil
                if error is CancellationError { return nil }
                throw error
            }
        }

        /// Reads the query; `nil` when the result equals the last one.
        private mutating func read() async throws -> Element? {
            let value = observation.transform(try await observation.store.read(observation.query))
            if let last, last == value { return nil }
            last = value
            return value
        }
    }
}

extension LocalStore {
    /// The store's committed changes from now on, as an `AsyncSequence` of ``StoreChange``: which
    /// tables each transaction changed and which ids, in commit order, only after commit, never for
    /// a rollback. See docs/observation.md for buffering and other processes.
    ///
    /// ```swift
    /// for await change in store.changes() where change.affects("TodoItem") {
    ///     refresh()
    /// }
    /// ```
    public func changes() -> StoreChanges {
        StoreChanges(subscription: changeCenter.subscribe())
    }

    /// `query`'s result now and after every commit that may have changed its table (equal results
    /// skipped). Ends when the task is cancelled or the store is closed; a read error is thrown.
    ///
    /// ```swift
    /// for try await result in store.observe(Query("TodoItem", where: Field("done") == false)) {
    ///     show(result.items)
    /// }
    /// ```
    public func observe(_ query: Query) -> QueryObservation<ReadResult> {
        QueryObservation(store: self, query: query, transform: { $0 })
    }

    /// The number of pending operations now and after every change of it.
    public func observePendingOperationCount() -> QueryObservation<Int> {
        QueryObservation(
            store: self, query: Query(operationTableName, top: 0, includeTotalCount: true),
            transform: { $0.totalCount ?? 0 })
    }

    /// Waits until the operation queue is not empty and returns its count: at once when it already
    /// is not. Throws `CancellationError` when the task is cancelled and `closed` when the store closes.
    public func waitForPendingOperations() async throws -> Int {
        for try await count in observePendingOperationCount() where count > 0 { return count }
        try Task.checkCancellation()
        throw LocalStoreError.closed()
    }
}
