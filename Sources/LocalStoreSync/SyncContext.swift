import Foundation
import LocalStore

/// Settings of a ``SyncContext``.
public struct SyncSettings: Sendable, Hashable {
    /// Items asked for per page of a pull (`$top`), 1 or more. Default 50, as the SDKs.
    public var pageSize: Int
    /// Whether a pull of a table with pending operations pushes first (the SDKs' implicit push).
    /// Default `true`. When the push stops (offline), the pull throws its error.
    public var pushBeforePull: Bool
    /// How often one push sends the same operation again after conflict resolutions (client wins,
    /// merge) before it leaves the conflict recorded for the application. Default 3.
    public var maximumConflictRetries: Int
    /// The first wait of the automatic push after it stopped (offline, or errors left unresolved);
    /// doubled after each such push up to `automaticPushMaximumDelay`.
    public var automaticPushInitialDelay: Duration
    /// The longest wait of the automatic push.
    public var automaticPushMaximumDelay: Duration

    /// Creates settings.
    public init(
        pageSize: Int = 50, pushBeforePull: Bool = true, maximumConflictRetries: Int = 3, automaticPushInitialDelay: Duration = .seconds(1),
        automaticPushMaximumDelay: Duration = .seconds(60)
    ) {
        self.pageSize = max(1, pageSize)
        self.pushBeforePull = pushBeforePull
        self.maximumConflictRetries = max(0, maximumConflictRetries)
        self.automaticPushInitialDelay = automaticPushInitialDelay
        self.automaticPushMaximumDelay = automaticPushMaximumDelay
    }
}

/// The offline-sync engine over any `LocalStore`: push the operation queue, pull tables
/// incrementally, purge — the counterpart of the iOS SDK's `MSSyncContext` and .NET's
/// `MobileServiceSyncContext`.
///
/// Local edits go through the store's typed queue (`LocalStoreAccess.enqueue(_:_:into:)`); the
/// context sends them through a ``SyncTransport`` and applies what the service answers:
///
/// ```swift
/// let sync = SyncContext(store: store, transport: service, conflicts: ConflictPolicy.serverWins)
/// try await store.enqueue(.insert, ["id": "t1", "text": "buy milk"], into: "TodoItem")
/// let pushed = try await sync.push()
/// let pulled = try await sync.pull("TodoItem", queryId: "all")
/// ```
///
/// - **Push**: one push at a time per store in this process (a second caller joins the running push
///   and gets its result), in queue order. An operation the server refuses is recorded as a
///   `PushError` and the item's later operations are held behind it; a conflict (409/412) goes to
///   the ``SyncConflictHandler``; a transient or authentication failure stops the push with every
///   operation still queued and none left in flight.
/// - **Pull**: pages ordered by `updatedAt` then `id`, each page after the last item of the previous
///   one (no page is fetched twice, and an item changed during the pull is not missed), applied with
///   `LocalStoreAccess.applyPulledPage(_:into:queryId:)`; with a query id, incremental from the
///   delta token. Tables with pending operations are pushed first (``SyncSettings/pushBeforePull``).
/// - **Purge**: `purge(_:where:queryId:)` resets the query's token; `forcePurge(_:)` waits for a
///   running push.
///
/// One process should push a store at a time: the in-flight marks of another process's push are
/// released when this one starts.
public actor SyncContext {
    /// The local store.
    public nonisolated let store: any LocalStore
    /// The service.
    public nonisolated let transport: any SyncTransport
    /// Decides conflicts.
    public nonisolated let conflicts: any SyncConflictHandler
    /// The settings.
    public nonisolated let settings: SyncSettings
    private nonisolated let hub = EventHub()
    private var automaticPush: Task<Void, Never>?

    /// Creates a context. `conflicts` decides 409/412 answers (``ConflictPolicy/manual`` leaves them
    /// to the application).
    public init(
        store: any LocalStore, transport: any SyncTransport, conflicts: any SyncConflictHandler = ConflictPolicy.manual,
        settings: SyncSettings = SyncSettings()
    ) {
        self.store = store
        self.transport = transport
        self.conflicts = conflicts
        self.settings = settings
    }

    /// Progress events from now on (each call is a new subscriber; the stream ends when the task
    /// iterating it is cancelled).
    public nonisolated func events() -> AsyncStream<SyncEvent> { hub.subscribe() }

    // MARK: Push

    /// Pushes the operation queue; joins the push already running for this store, if any.
    ///
    /// Returns every operation's outcome. Throws only for local failures (the store's errors, a
    /// `CancellationError`); a failure of the service is in ``PushResult/stoppedBy`` or the
    /// outcomes. After it returns no operation is in flight.
    public func push() async throws -> PushResult {
        let engine = PushEngine(store: store, transport: transport, conflicts: conflicts, settings: settings, hub: hub)
        return try await PushRegistry.shared.join(key: ObjectIdentifier(store.changeCenter)) { try await engine.run() }.value
    }

    /// Clears the recorded errors of `error`'s operation so that the next push sends it again (for a
    /// failure that may pass now, such as a server error); the operation is not changed.
    public func retry(_ error: PushError) async throws {
        try await store.run { store in
            try store.write { tx in
                for e in try tx.operationErrors(operationId: error.operationId) { try tx.removeError(id: e.id) }
            }
        }
    }

    // MARK: Pull

    /// Pulls `table`'s items matching `predicate` (all when `nil`) into the store.
    ///
    /// With `queryId` the pull is incremental: it asks for items whose `updatedAt` is at or after the
    /// query's delta token, and the token advances with every page. Items with a queued local change
    /// are skipped (the change is pushed first when ``SyncSettings/pushBeforePull``); items deleted on
    /// the server are deleted locally. `parameters` are sent verbatim with every page.
    public func pull(
        _ table: String, where predicate: QueryPredicate? = nil, queryId: String? = nil, parameters: [PullRequest.Parameter] = []
    ) async throws -> PullResult {
        var result = PullResult(table: table, queryId: queryId)
        if let queryId { try DeltaTokenKey.validate(table: table, queryId: queryId) }
        if settings.pushBeforePull, !(try await store.pendingOperations(table: table)).isEmpty {
            let pushed = try await push()
            result.push = pushed
            if let stop = pushed.stoppedBy { throw stop }
        }
        hub.emit(.pullStarted(table: table, queryId: queryId))
        var token: Date? = nil
        if let queryId { token = try await store.deltaToken(table: table, queryId: queryId) }
        var after: (updatedAt: Date, id: String)? = nil
        var skip = 0
        var skipped = Set<String>()
        while true {
            try Task.checkCancellation()
            var conditions: [QueryPredicate] = predicate.map { [$0] } ?? []
            if let after {
                let later: QueryPredicate = Field("updatedAt") > .literal(.date(after.updatedAt))
                let tie: QueryPredicate = .and([Field("updatedAt") == .literal(.date(after.updatedAt)), Field("id") > .literal(.string(after.id))])
                conditions.append(.or([later, tie]))
            } else if let token {
                conditions.append(Field("updatedAt") >= .literal(.date(token)))
            }
            let filter: QueryPredicate? = conditions.isEmpty ? nil : conditions.count == 1 ? conditions[0] : .and(conditions)
            let query = Query(table, where: filter, sort: [SortKey("updatedAt"), SortKey("id")], skip: skip, top: settings.pageSize)
            let page = try await transport.page(PullRequest(query: query, includeDeleted: true, parameters: parameters))
            // A push may have completed while this page was on its way (an automatic push, another
            // caller): an item older than the row's own `updatedAt` is the state before that push.
            let fresh = try await Self.notOlderThanLocal(page.items, in: table, store: store)
            let applied = try await store.applyPulledPage(fresh, into: table, queryId: queryId)
            result.pages += 1
            result.upserted += applied.upserted
            result.deleted += applied.deleted
            for id in applied.skipped where skipped.insert(ASCII.lowercased(id)).inserted { result.skipped.append(id) }
            if queryId != nil { result.deltaToken = applied.deltaToken }
            hub.emit(.pagePulled(table: table, page: result.pages, items: page.items.count))
            guard page.hasMore ?? (page.items.count >= settings.pageSize), let last = page.items.last else { break }
            if let updated = last.value(forColumn: "updatedAt")?.dateValue, let id = last.stringId {
                after = (updated, id)
                skip = 0
            } else {
                skip += page.items.count  // a service without updatedAt: page by position
            }
        }
        if let queryId, result.deltaToken == nil { result.deltaToken = try await store.deltaToken(table: table, queryId: queryId) }
        hub.emit(.pullFinished(result))
        return result
    }

    /// `items` without those whose `updatedAt` is earlier than the local row's.
    static func notOlderThanLocal(_ items: [Item], in table: String, store: any LocalStore) async throws -> [Item] {
        try await store.run { local in
            try items.filter { item in
                guard let id = item.stringId, let theirs = item.value(forColumn: "updatedAt")?.dateValue,
                    let mine = try local.read(table: table, id: .string(id))?.value(forColumn: "updatedAt")?.dateValue
                else { return true }
                return theirs >= mine
            }
        }
    }

    // MARK: Purge

    /// Deletes the local rows of `table` matching `predicate` (all when `nil`); with `queryId` that
    /// query's delta token is reset so its next pull fetches everything again. Refused with
    /// `constraint` while the table has pending operations.
    @discardableResult
    public func purge(_ table: String, where predicate: QueryPredicate? = nil, queryId: String? = nil) async throws -> Int {
        try await store.purge(table, where: predicate, queryId: queryId)
    }

    /// Drops `table`'s rows, queued operations, their errors and delta tokens, after any running push
    /// of the store has finished.
    @discardableResult
    public func forcePurge(_ table: String) async throws -> Int {
        await PushRegistry.shared.waitForRunningPush(key: ObjectIdentifier(store.changeCenter))
        return try await store.run { store in
            try store.write { tx in
                try tx.releaseInFlightOperations()
                return try tx.forcePurge(table)
            }
        }
    }

    // MARK: Automatic push

    /// Pushes whenever the queue is not empty, until `stopAutomaticPush()`. After a push that
    /// stopped (offline) it waits ``SyncSettings/automaticPushInitialDelay``, doubling up to
    /// ``SyncSettings/automaticPushMaximumDelay``; after a push that left errors unresolved it waits
    /// the same, or until the store commits another change (a new edit or a resolution) — never a
    /// busy loop. A second call does nothing while one runs.
    public func startAutomaticPush() {
        guard automaticPush == nil else { return }
        let store = self.store
        let settings = self.settings
        automaticPush = Task { [weak self] in
            var delay = settings.automaticPushInitialDelay
            while !Task.isCancelled {
                do {
                    _ = try await store.waitForPendingOperations()
                    guard let self else { return }
                    let result = try await self.push()
                    if result.isComplete {
                        delay = settings.automaticPushInitialDelay
                        continue
                    }
                    await Self.pause(delay, wakeOnChange: result.stoppedBy == nil ? store : nil)
                    delay = min(delay * 2, settings.automaticPushMaximumDelay)
                } catch {
                    if Task.isCancelled { return }
                    if let e = error as? LocalStoreError, e.code == .closed { return }
                    await Self.pause(delay, wakeOnChange: nil)
                    delay = min(delay * 2, settings.automaticPushMaximumDelay)
                }
            }
        }
    }

    /// Stops the automatic push (a push under way finishes).
    public func stopAutomaticPush() {
        automaticPush?.cancel()
        automaticPush = nil
    }

    /// Sleeps `delay`, or less when `store` commits a change.
    private static func pause(_ delay: Duration, wakeOnChange store: (any LocalStore)?) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: delay) }
            if let store {
                let changes = store.changes()
                group.addTask {
                    var iterator = changes.makeAsyncIterator()
                    _ = await iterator.next()
                }
            }
            _ = await group.next()
            group.cancelAll()
        }
    }
}

/// One push's work (a value: it holds no state between pushes).
struct PushEngine: Sendable {
    let store: any LocalStore
    let transport: any SyncTransport
    let conflicts: any SyncConflictHandler
    let settings: SyncSettings
    let hub: EventHub

    func run() async throws -> PushResult {
        var result = PushResult()
        // This process runs one push per store: marks left by a crash or an abandoned push go.
        try await releaseInFlight()
        var heldBehind: [String: Int64] = [:]
        for error in try await store.pushErrors() {
            let key = Self.key(error.table, error.itemId)
            heldBehind[key] = min(heldBehind[key] ?? error.operationId, error.operationId)
        }
        hub.emit(.pushStarted(pending: try await store.pendingOperationCount()))
        defer { hub.emit(.pushFinished(pushed: result.pushedCount, failed: result.errors.count, held: result.heldOperationIds.count, stopped: result.stoppedBy != nil)) }
        if let failure = try await recoverLandedWrites() {
            result.stoppedBy = failure
            return result
        }
        var after: Int64 = 0
        var attempts: [Int64: Int] = [:]
        while true {
            if Task.isCancelled {
                try await releaseInFlight()
                throw CancellationError()
            }
            guard let next = try await store.nextOperation(after: after) else { break }
            let key = Self.key(next.table, next.itemId)
            if let blocker = heldBehind[key] {
                record(&result, next, .held(behind: blocker))
                after = next.id
                continue
            }
            guard let (op, item) = try await store.beginSending(after: next.id - 1), op.id == next.id else {
                try await releaseInFlight()  // the queue changed under us: read it again, nothing left marked
                continue
            }
            let step: Step
            do {
                step = try await send(op, item: item, attempt: attempts[op.id, default: 0])
            } catch {
                try? await releaseInFlight()  // a store failure while handling the answer: nothing stays in flight
                throw error
            }
            switch step {
            case .done(let outcome):
                record(&result, op, outcome)
                after = op.id
                if case .pushedAndChanged = outcome { after = op.id - 1 }  // send the change now
            case .again(let resolution):
                record(&result, op, .resolved(resolution))
                attempts[op.id, default: 0] += 1
                after = op.id - 1
            case .failed(let error):
                record(&result, op, .failed(error))
                heldBehind[key] = op.id
                after = op.id
            case .stop(let failure):
                try await releaseInFlight()
                result.stoppedBy = failure
                return result
            }
        }
        return result
    }

    enum Step {
        case done(PushResult.Outcome)
        case again(ConflictResolution)
        case failed(PushError)
        case stop(SyncTransportError)
    }

    /// Operations sent before but never completed (the process died, or the answer was lost) may have
    /// reached the server: for each, the server's item is read, and when it holds exactly what was
    /// sent the operation is completed with it (`LocalStoreAccess.complete(_:serverItem:)` then
    /// brings the server's version to the row and to any later operation of the item). Otherwise the
    /// operation is pushed as usual. Returns the failure that stops the push, if any.
    private func recoverLandedWrites() async throws -> SyncTransportError? {
        for op in try await store.operationsMayBeOnServer() {
            let schema = try await store.schema(of: op.table)
            guard let sent = SentOperationRecord(op), let sentJSON = sent.item, let sentItem = ItemJSON.item(sentJSON, schema: schema) else {
                continue
            }
            let query = Query(op.table, where: Field("id") == .literal(.string(op.itemId)), top: 1)
            let page: SyncPage
            do {
                page = try await transport.page(PullRequest(query: query, includeDeleted: true))
            } catch let failure as SyncTransportError {
                return failure
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                return SyncTransportError(.transient, message: "\(error)")
            }
            guard let server = page.items.first(where: { $0.stringId.map(ASCII.lowercased) == ASCII.lowercased(op.itemId) }),
                server.value(forColumn: "deleted")?.boolValue != true, Self.sameUserColumns(sentItem, server)
            else { continue }
            _ = try await store.complete(sent.operation(op), serverItem: server)
        }
        return nil
    }

    /// Sends `op` (marked in flight; `item` is what its push sends) and applies the answer.
    private func send(_ op: QueuedOperation, item: Item?, attempt: Int) async throws -> Step {
        let version = item?.value(forColumn: "version")?.stringValue
        do {
            var serverItem: Item? = nil
            switch op.kind {
            case .insert, .update:
                guard let item else {
                    if try await store.queuedOperations(table: op.table, itemId: op.itemId).contains(where: { $0.id > op.id }) {
                        // Deleted locally by a later operation (queued while this one was in flight): that
                        // delete carries the item's fate; a delete of an item the server never got is a 404, done.
                        _ = try await store.complete(op)
                        return .done(.superseded)
                    }
                    let error = try await store.recordPushError(for: op, statusCode: nil, message: "the item \(op.table)/\(op.itemId) is not in the store")
                    return .failed(error)
                }
                serverItem = op.kind == .insert
                    ? try await transport.insert(Self.outgoing(item, keepVersion: false), into: op.table)
                    : try await transport.replace(Self.outgoing(item, keepVersion: true), in: op.table, ifVersion: version)
            case .delete:
                do {
                    try await transport.delete(id: op.itemId, from: op.table, ifVersion: version)
                } catch let e as SyncTransportError where e.kind == .notFound {
                    // Already gone on the server: the delete has nothing left to do (as .NET).
                }
            }
            return .done(try await complete(op, serverItem: serverItem))
        } catch let failure as SyncTransportError {
            if failure.kind.isRetryable || failure.kind == .unauthorized { return .stop(failure) }
            if failure.kind.isConflict, let server = failure.serverItem {
                // A push that reached the server before a crash or a lost answer: the server has this change.
                if op.kind != .delete, let item, Self.sameUserColumns(item, server) {
                    return .done(try await complete(op, serverItem: server))
                }
                let error = try await store.recordPushError(
                    for: op, statusCode: failure.statusCode, message: failure.message, serverItem: server, item: item)
                let conflict = SyncConflict(operation: op, error: error, localItem: item, serverItem: server, statusCode: failure.statusCode)
                let resolution: ConflictResolution
                do {
                    resolution = try await conflicts.resolve(conflict)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    return .stop(SyncTransportError(.rejected, message: "the conflict handler failed: \(error)"))
                }
                let sendAgain: Bool
                do {
                    sendAgain = try await store.run { store in try store.write { tx in try Self.apply(resolution, to: conflict, in: tx) } }
                } catch let refused as LocalStoreError where refused.code == .constraint {
                    // The resolution would undo a newer queued edit of the item (docs/semantics.md): the
                    // conflict stays recorded for the application, like a manual one.
                    return .failed(error)
                }
                if resolution == .manual { return .failed(error) }
                // A resolution that could not apply (client wins on an item the server deleted, a missing
                // row) leaves the error recorded: a failure, and the item's later operations wait.
                if !(try await store.operationErrors(operationId: op.id)).isEmpty, try await store.queuedOperation(id: op.id) != nil {
                    return .failed(error)
                }
                guard sendAgain else { return .done(.resolved(resolution)) }
                // Sent again in this push up to `maximumConflictRetries` times; after that at the next push.
                return attempt < settings.maximumConflictRetries ? .again(resolution) : .done(.resolved(resolution))
            }
            let error = try await store.recordPushError(
                for: op, statusCode: failure.statusCode, message: failure.message, serverItem: failure.serverItem, item: item)
            return .failed(error)
        } catch is CancellationError {
            try await releaseInFlight()
            throw CancellationError()
        } catch let error as LocalStoreError {
            try? await releaseInFlight()
            throw error
        } catch {
            return .stop(SyncTransportError(.transient, message: "\(error)"))
        }
    }

    private func releaseInFlight() async throws {
        _ = try await store.run { try $0.releaseInFlightOperations() }
    }

    private func complete(_ op: QueuedOperation, serverItem: Item?) async throws -> PushResult.Outcome {
        switch try await store.complete(op, serverItem: serverItem) {
        case .removed, .missing: return .pushed
        case .changed(let now): return .pushedAndChanged(now)
        }
    }

    private func record(_ result: inout PushResult, _ op: QueuedOperation, _ outcome: PushResult.Outcome) {
        let entry = PushResult.Entry(operation: op, outcome: outcome)
        result.entries.append(entry)
        hub.emit(.operationPushed(entry))
    }

    /// Applies `resolution` in `tx`; `true` when the operation is to be sent again.
    static func apply(_ resolution: ConflictResolution, to conflict: SyncConflict, in tx: any LocalStoreTransaction) throws -> Bool {
        let op = conflict.operation
        let error = conflict.error
        let server = conflict.serverItem
        let serverVersion = server.value(forColumn: "version") ?? .null
        let serverDeleted = server.value(forColumn: "deleted")?.boolValue == true
        let newer = try tx.queuedOperations(table: op.table, itemId: op.itemId).contains { $0.id > op.id }
        switch resolution {
        case .manual:
            return false
        case .discard:
            try tx.cancelAndDiscard(error)
            return false
        case .serverWins:
            if serverDeleted { try tx.cancelAndDiscard(error) } else { try tx.cancelAndUpdate(error, with: server) }
            return false
        case .clientWins, .merge:
            if serverDeleted {
                // Deleted on the server: a delete is done; a replace cannot succeed (the application decides).
                if op.kind == .delete { try tx.cancelAndDiscard(error) }  // gone on both sides: done
                return false
            }
            var item: Item
            if case .merge(let merged) = resolution {
                item = merged
            } else if op.kind == .delete {
                item = op.item.flatMap { ItemJSON.item($0, schema: try? tx.schema(of: op.table)) } ?? ["id": .string(op.itemId)]
            } else if let row = try tx.read(table: op.table, id: .string(op.itemId)) {
                item = row
            } else if newer {
                // A delete queued after the conflict: it carries the client's intent; give it the server's version.
                try tx.cancelAndUpdate(error, with: server)
                return false
            } else {
                return false
            }
            for key in item.values.keys where ASCII.lowercased(key) == "version" { item.values.removeValue(forKey: key) }
            item.values["version"] = serverVersion
            try tx.changeOperation(error, to: op.kind == .insert ? .update : op.kind, item: item)
            return true
        }
    }

    /// The item as sent: system columns other than `version` removed (and `version` too for an insert).
    static func outgoing(_ item: Item, keepVersion: Bool) -> Item {
        Item(
            item.values.filter { key, _ in
                let k = ASCII.lowercased(key)
                if k == "version" { return keepVersion }
                return !SystemProperty.allCases.contains { ASCII.lowercased($0.columnName) == k }
            })
    }

    /// Whether `server` holds every non-system column of `sent` with the same value.
    /// Whether `server` holds the non-system columns of `sent` that it returns (a column only the client
    /// has cannot be compared), dates compared at the milliseconds the wire and the `sent` record keep.
    static func sameUserColumns(_ sent: Item, _ server: Item) -> Bool {
        for (key, value) in outgoing(sent, keepVersion: false) where ASCII.lowercased(key) != "id" {
            guard let theirs = server.value(forColumn: key) else {
                if value.isNull { continue }
                continue  // not returned by the server: nothing to compare
            }
            if case .date(let a) = value, case .date(let b) = theirs {
                if (a.timeIntervalSince1970 * 1000).rounded() != (b.timeIntervalSince1970 * 1000).rounded() { return false }
                continue
            }
            if theirs != value { return false }
        }
        return true
    }

    static func key(_ table: String, _ itemId: String) -> String { ASCII.lowercased(table) + "\u{0}" + ASCII.lowercased(itemId) }
}

/// The running push of each store in this process.
final class PushRegistry: @unchecked Sendable {
    static let shared = PushRegistry()
    private let lock = NSLock()
    private var running: [ObjectIdentifier: (token: UUID, task: Task<PushResult, any Error>)] = [:]

    /// The running push of `key`, or a new one running `body`.
    func join(key: ObjectIdentifier, _ body: @escaping @Sendable () async throws -> PushResult) -> Task<PushResult, any Error> {
        lock.withLock {
            if let current = running[key] { return current.task }
            let token = UUID()
            let task = Task<PushResult, any Error> {
                defer { self.finish(key, token) }
                return try await body()
            }
            running[key] = (token, task)
            return task
        }
    }

    /// Waits until `key` has no running push.
    func waitForRunningPush(key: ObjectIdentifier) async {
        while let task = lock.withLock({ running[key]?.task }) { _ = try? await task.value }
    }

    private func finish(_ key: ObjectIdentifier, _ token: UUID) {
        lock.withLock {
            if running[key]?.token == token { running[key] = nil }
        }
    }
}

/// Fans events out to every subscriber.
final class EventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [UUID: AsyncStream<SyncEvent>.Continuation] = [:]

    func subscribe() -> AsyncStream<SyncEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncEvent.self, bufferingPolicy: .bufferingNewest(1_000))
        let id = UUID()
        continuation.onTermination = { [weak self] _ in self?.lock.withLock { _ = self?.subscribers.removeValue(forKey: id) } }
        lock.withLock { subscribers[id] = continuation }
        return stream
    }

    func emit(_ event: SyncEvent) {
        let targets = lock.withLock { Array(subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }
}
