import Foundation
import LocalStore
import Synchronization

// Change observation (docs/observation.md): order, after-commit, no event for a rollback, ids,
// coalescing, cancellation, close, query and operation-queue observation, other store objects.

/// One named asynchronous conformance check (the observation rules need a consuming task).
///
/// ```swift
/// for check in ConformanceSuite.observationChecks { try await check.run(factory) }
/// ```
public struct AsyncConformanceCheck: Sendable, CustomStringConvertible {
    /// The check's name (the name of the `ConformanceSuite` function that implements it).
    public let name: String
    private let body: @Sendable (StoreFactory) async throws -> Void

    /// Creates a check.
    public init(name: String, _ body: @escaping @Sendable (StoreFactory) async throws -> Void) {
        self.name = name
        self.body = body
    }

    /// Runs the check against the backend `factory` makes (stores in temporary directories that are
    /// removed afterwards).
    public func run(_ factory: StoreFactory) async throws { try await body(factory) }

    /// The check's name.
    public var description: String { name }
}

extension ConformanceSuite {
    /// Every observation check, in a stable order.
    public static let observationChecks: [AsyncConformanceCheck] = [
        AsyncConformanceCheck(name: "observeChangesInCommitOrderWithIds", observeChangesInCommitOrderWithIds),
        AsyncConformanceCheck(name: "observeChangesOnlyAfterCommit", observeChangesOnlyAfterCommit),
        AsyncConformanceCheck(name: "observeNoChangeForRollback", observeNoChangeForRollback),
        AsyncConformanceCheck(name: "observeManyForDeleteMatchingAndHugeBatches", observeManyForDeleteMatchingAndHugeBatches),
        AsyncConformanceCheck(name: "observeConsumerThatNeverReads", observeConsumerThatNeverReads),
        AsyncConformanceCheck(name: "observeCancellationEndsObservation", observeCancellationEndsObservation),
        AsyncConformanceCheck(name: "observeCloseEndsObservation", observeCloseEndsObservation),
        AsyncConformanceCheck(name: "observeQueryResults", observeQueryResults),
        AsyncConformanceCheck(name: "observePendingOperations", observePendingOperations),
        AsyncConformanceCheck(name: "observeSystemTableConveniences", observeSystemTableConveniences),
        AsyncConformanceCheck(name: "observeCommitsOfAnotherStoreObject", observeCommitsOfAnotherStoreObject),
    ]
}

// MARK: - Helpers

/// Values gathered by a consuming task, for the checking task.
final class Gathered<T: Sendable>: Sendable {
    private let values = LockedValue<[T]>([])
    private let ended = Atomic<Bool>(false)

    func append(_ v: T) { values.withLock { $0.append(v) } }
    func end() { ended.store(true, ordering: .sequentiallyConsistent) }
    var all: [T] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
    var hasEnded: Bool { ended.load(ordering: .sequentiallyConsistent) }
}

/// Consumes `sequence` in a new task into a ``Gathered``.
func gather<S: AsyncSequence & Sendable>(_ sequence: S) -> (Gathered<S.Element>, Task<Void, Never>)
where S.Element: Sendable {
    let gathered = Gathered<S.Element>()
    let task = Task {
        do {
            for try await v in sequence { gathered.append(v) }
        } catch {}
        gathered.end()
    }
    return (gathered, task)
}

/// Waits (polling every 2 ms) until `condition` holds; throws a ``ConformanceFailure`` once `seconds`
/// have passed *and* the check has polled for that long. Counting polls keeps a test run whose
/// cooperative threads are all busy with other (blocking) tests from failing this check: while this
/// task cannot run, neither can the tasks it waits for.
func waitUntil(
    _ seconds: Double = 60, _ message: @autoclosure () -> String, fileID: String = #fileID, filePath: String = #filePath,
    line: Int = #line, _ condition: () throws -> Bool
) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    let minimumPolls = Int(seconds * 500)
    var polls = 0
    while try !condition() {
        polls += 1
        if polls > minimumPolls && Date() > deadline {
            throw ConformanceFailure("after \(seconds) s: \(message())", fileID: fileID, filePath: filePath, line: line)
        }
        try await Task.sleep(nanoseconds: 2_000_000)
    }
}

/// Runs `body` with a fresh workspace, then closes its stores and removes its directory (also on failure).
func withWorkspace(_ factory: StoreFactory, _ body: (Workspace) async throws -> Void) async throws {
    let workspace = try Workspace(factory: factory)
    defer { workspace.removeDirectory() }
    do {
        try await body(workspace)
    } catch {
        try? workspace.closeAll()
        throw error
    }
    try workspace.closeAll()
}

/// Runs `body` with a fresh store that has the `Note` table (`id`, `text`, `n`).
func withNoteStore(_ factory: StoreFactory, _ body: (any LocalStore) async throws -> Void) async throws {
    try await withWorkspace(factory) { workspace in
        let store = try workspace.open()
        try await store.defineTable(noteSchema)
        try await body(store)
    }
}

let noteSchema = TableSchema("Note", ["id": .string, "text": .string, "n": .integer], indexed: ["n"])

func note(_ id: String, _ n: Int) -> Item { ["id": .string(id), "text": .string("note \(id)"), "n": .int(Int64(n))] }

/// The ids of `values` as strings (for messages and comparisons).
func idStrings(_ values: [Value]?) -> [String] { (values ?? []).map { $0.stringValue ?? "\($0)" } }

extension ConformanceSuite {
    // MARK: Order, ids, after commit, rollback

    /// Three transactions are delivered as three changes, in commit order (increasing commit
    /// numbers), each naming exactly the tables it changed (by their defined names) and the ids it
    /// upserted and deleted.
    public static func observeChangesInCommitOrderWithIds(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            try await store.defineTable(TableSchema("Counter", ["id": .string, "value": .integer]))
            let (gathered, task) = gather(store.changes())
            defer { task.cancel() }
            try await store.upsert([note("a", 1), note("b", 2)], into: "note")
            try await store.delete(ids: ["a"], from: "Note")
            let op = try await store.write { tx in
                try tx.upsert([["id": "k7", "value": 1]], into: "COUNTER")
                try tx.upsert([note("c", 3)], into: "Note")
                try tx.delete(ids: ["b"], from: "Note")
                // A system table directly (appendOperation may touch the config table too).
                let op = TableOperation(id: 1, table: "Note", tableKind: 0, itemId: "c", properties: [])
                try tx.upsert([op.item], into: tx.operationTableName)
                return op
            }
            try await waitUntil(60, "3 commits were made, \(gathered.count) changes arrived: \(gathered.all)") { gathered.count >= 3 }
            try await Task.sleep(nanoseconds: 20_000_000)
            let changes = gathered.all
            try expectEqual(changes.count, 3, "one change per transaction (nothing else happened): \(changes)")
            for c in changes { try expect(!c.includesUnlistedChanges, "a change of this store object is itemised: \(c)") }
            try expect(
                zip(changes, changes.dropFirst()).allSatisfy { $0.commits.upperBound < $1.commits.lowerBound },
                "changes arrive in commit order: \(changes.map(\.commits))")
            try expectEqual(changes[0].tables, ["Note": .rows(upserted: ["a", "b"], deleted: [])], "first transaction")
            try expectEqual(changes[1].tables, ["Note": .rows(upserted: [], deleted: ["a"])], "second transaction")
            let third = changes[2]
            try expectEqual(Set(third.tables.keys), ["Counter", "Note", store.operationTableName], "third transaction's tables")
            try expectEqual(third.tables["Counter"], .rows(upserted: ["k7"], deleted: []), "Counter in the third transaction")
            try expectEqual(third.tables["Note"], .rows(upserted: ["c"], deleted: ["b"]), "Note in the third transaction")
            try expectEqual(third.change(of: store.operationTableName)?.upsertedIds, [.int(op.id)], "the appended operation")
            try expect(third.affects("note") && third.affects("counter") && !changes[0].affects("Counter"), "affects(_:) matches case-insensitively")
        }
    }

    /// A change is queued for every observer by the time the committing call returns, and not before:
    /// inside a `write {}` body nothing has been delivered yet.
    public static func observeChangesOnlyAfterCommit(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let changes = store.changes()
            try await store.write { tx in
                try tx.upsert([note("a", 1)], into: "Note")
                try expectEqual(changes.pendingCount, 0, "a change was delivered before its transaction committed")
                try tx.upsert([note("b", 2)], into: "Note")
                try expectEqual(changes.pendingCount, 0, "a change was delivered before its transaction committed")
            }
            try expectEqual(changes.pendingCount, 1, "the committed transaction is queued when write {} returns")
            try await store.upsert([note("c", 3)], into: "Note")
            try expectEqual(changes.pendingCount, 2, "a single upsert is queued when it returns")
            var iterator = changes.makeAsyncIterator()
            let first = try unwrap(await iterator.next(), "the queued change")
            try expectEqual(idStrings(first.change(of: "Note")?.upsertedIds), ["a", "b"], "both upserts of the transaction")
            let second = try unwrap(await iterator.next(), "the queued change")
            try expectEqual(idStrings(second.change(of: "Note")?.upsertedIds), ["c"])
        }
    }

    /// A transaction that throws (rolled back), a failed single call and a call refused for bad input
    /// publish nothing; the next committed transaction is the next change.
    public static func observeNoChangeForRollback(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let changes = store.changes()
            struct Abort: Error {}
            do {
                try await store.write { tx in
                    try tx.upsert([note("x", 1)], into: "Note")
                    try tx.delete(ids: ["y"], from: "Note")
                    throw Abort()
                }
            } catch is Abort {}
            try expectThrows(code: .typeMismatch, "n is an integer column") {
                try store.upsert([note("ok", 1), ["id": "bad", "n": "not a number"]], into: "Note")
            }
            try expectThrows(code: .unknownTable) { try store.delete(ids: ["z"], from: "Missing") }
            // A failed call inside a transaction that then commits: only the successful call is reported.
            try await store.write { tx in
                _ = try? tx.upsert([["id": "bad", "n": "not a number"]], into: "Note")
                try tx.upsert([note("kept", 2)], into: "Note")
            }
            try expectEqual(changes.pendingCount, 1, "only the committed transaction is published")
            var iterator = changes.makeAsyncIterator()
            let change = try unwrap(await iterator.next())
            try expectEqual(change.tables, ["Note": .rows(upserted: ["kept"], deleted: [])], "the committed transaction only")
            try expectNil(try await store.read(table: "Note", id: "x"), "the rolled-back row")
        }
    }

    /// `delete(matching:)` reports its table as `many`; so does a batch of more than
    /// `ChangeCollector.idLimit` ids; a batch at the limit lists every id.
    public static func observeManyForDeleteMatchingAndHugeBatches(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let changes = store.changes()
            let limit = ChangeCollector.idLimit
            try await store.upsert((0..<limit).map { note("a\($0)", $0) }, into: "Note")
            try await store.upsert((0...limit).map { note("b\($0)", $0) }, into: "Note")
            try await store.delete(matching: Query("Note", where: Field("n") < 10))
            var iterator = changes.makeAsyncIterator()
            let listed = try unwrap(await iterator.next())
            try expectEqual(Set(idStrings(listed.change(of: "Note")?.upsertedIds)), Set((0..<limit).map { "a\($0)" }), "a batch at the limit lists its ids")
            let huge = try unwrap(await iterator.next())
            try expectEqual(huge.change(of: "Note"), .many, "a batch of \(limit + 1) ids is reported as many")
            let matching = try unwrap(await iterator.next())
            try expectEqual(matching.tables, ["Note": .many], "delete(matching:) is reported as many")
        }
    }

    /// An observer that never reads blocks no writer and holds at most `ChangeCenter.bufferLimit`
    /// changes: further ones are coalesced, and the coalesced changes still cover every id written.
    public static func observeConsumerThatNeverReads(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let changes = store.changes()
            let commits = 400
            let finished = Gathered<Bool>()
            // The writes run on a thread: a writer that blocked on the observer would hang here, not the check.
            let writer = Thread {
                for k in 0..<commits { try? store.upsert([note("n\(k)", k)], into: "Note") }
                finished.end()
            }
            writer.start()
            try await waitUntil(60, "\(commits) commits with an observer that never reads did not finish: a writer is blocked") {
                finished.hasEnded
            }
            try expectEqual(try await store.count("Note"), commits, "every commit went through")
            try expect(changes.pendingCount <= ChangeCenter.bufferLimit, "\(changes.pendingCount) changes queued, more than \(ChangeCenter.bufferLimit)")
            try expectEqual(changes.pendingCount, ChangeCenter.bufferLimit, "the queue is full, the rest coalesced")
            var iterator = changes.makeAsyncIterator()
            var seen = Set<String>()
            var covered = 0
            var lastCommit: UInt64 = 0
            for _ in 0..<ChangeCenter.bufferLimit {
                let c = try unwrap(await iterator.next())
                try expect(c.commits.lowerBound > lastCommit, "coalesced changes stay in commit order")
                lastCommit = c.commits.upperBound
                covered += c.commits.count
                switch c.change(of: "Note") {
                case .rows(let upserted, _)?: seen.formUnion(idStrings(upserted))
                case .many?: seen.formUnion((0..<commits).map { "n\($0)" })
                case nil: throw ConformanceFailure("a change without the Note table: \(c)")
                }
            }
            try expectEqual(covered, commits, "the queued changes cover every commit")
            try expectEqual(seen, Set((0..<commits).map { "n\($0)" }), "the coalesced changes cover every id")
        }
    }

    // MARK: Ending

    /// Cancelling the consuming task ends the sequence and unregisters the observer; so does
    /// releasing a sequence that was never iterated.
    public static func observeCancellationEndsObservation(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            try expectEqual(store.changeCenter.observerCount, 0, "no observer yet")
            do {
                let unused = store.changes()
                try expectEqual(store.changeCenter.observerCount, 1, "changes() registers an observer")
                _ = unused
            }
            try await waitUntil(60, "a released, never-iterated sequence stays registered") { store.changeCenter.observerCount == 0 }
            let (gathered, task) = gather(store.changes())
            let (results, queryTask) = gather(store.observe(Query("Note")))
            try await waitUntil(60, "the query observation's first result") { results.count == 1 }
            try await store.upsert([note("a", 1)], into: "Note")
            try await waitUntil(60, "the change and the new result") { gathered.count == 1 && results.count == 2 }
            task.cancel()
            queryTask.cancel()
            try await waitUntil(60, "cancelled observations end") { gathered.hasEnded && results.hasEnded }
            try await waitUntil(60, "cancelled observations unregister: \(store.changeCenter.observerCount) left") {
                store.changeCenter.observerCount == 0
            }
            try await store.upsert([note("b", 2)], into: "Note")
            try expectEqual(gathered.count, 1, "nothing is delivered after cancellation")
        }
    }

    /// Closing the store ends every observation (after the changes already queued).
    public static func observeCloseEndsObservation(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let changes = store.changes()
            let (results, queryTask) = gather(store.observe(Query("Note")))
            defer { queryTask.cancel() }
            try await waitUntil(60, "the query observation's first result") { results.count == 1 }
            try await store.upsert([note("a", 1)], into: "Note")
            try await waitUntil(60, "the query observation's second result") { results.count == 2 }
            try await store.close()
            var iterator = changes.makeAsyncIterator()
            let queued = try unwrap(await iterator.next(), "the change queued before close is still delivered")
            try expectEqual(idStrings(queued.change(of: "Note")?.upsertedIds), ["a"])
            try expectNil(await iterator.next(), "the sequence ends after close")
            try await waitUntil(60, "the query observation ends after close") { results.hasEnded }
            var late = store.changes().makeAsyncIterator()
            try expectNil(await late.next(), "changes() of a closed store is empty")
        }
    }

    // MARK: Queries and the operation queue

    /// `observe(_:)` yields the result now, a new result after each commit that changed it, and skips
    /// commits that left it equal.
    public static func observeQueryResults(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            try await store.defineTable(TableSchema("Other", ["id": .string]))
            try await store.upsert([note("a", 1)], into: "Note")
            let query = Query("Note", where: Field("n") >= 1, sort: [SortKey("n")])
            let (results, task) = gather(store.observe(query))
            defer { task.cancel() }
            try await waitUntil(60, "the first result") { results.count == 1 }
            try expectEqual(try ids(results.all[0].items), ["a"], "the result now")
            try await store.upsert([note("b", 2)], into: "Note")
            try await waitUntil(60, "the result after an insert") { results.count == 2 }
            try expectEqual(try ids(results.all[1].items), ["a", "b"])
            // Changes that leave the result as it is: another table, a row the predicate excludes, the same values again.
            try await store.upsert([["id": "o"]], into: "Other")
            try await store.upsert([note("z", 0)], into: "Note")
            try await store.upsert([note("a", 1)], into: "Note")
            try await store.delete(ids: ["b"], from: "Note")
            try await waitUntil(60, "the result after a delete") { results.count >= 3 }
            try await Task.sleep(nanoseconds: 50_000_000)
            try expectEqual(results.count, 3, "results equal to the previous one are skipped: \(results.all.map { try? ids($0.items) })")
            try expectEqual(try ids(results.all[2].items), ["a"], "the result after the delete")
            let counted = Query("Note", top: 0, includeTotalCount: true)
            let (counts, countTask) = gather(store.observe(counted))
            defer { countTask.cancel() }
            try await waitUntil(60, "the count now") { counts.count == 1 }
            try await store.delete(matching: Query("Note"))
            try await waitUntil(60, "the count after delete(matching:)") { counts.count == 2 }
            try expectEqual(counts.all.map(\.totalCount), [2, 0])
        }
    }

    /// `waitForPendingOperations()` returns once an operation is appended (at once when there is one);
    /// `observePendingOperationCount()` follows the queue.
    public static func observePendingOperations(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let (counts, countTask) = gather(store.observePendingOperationCount())
            defer { countTask.cancel() }
            try await waitUntil(60, "the count now") { counts.count == 1 }
            let waiter = Task { try await store.waitForPendingOperations() }
            try await Task.sleep(nanoseconds: 30_000_000)
            try await store.upsert([note("a", 1)], into: "Note")
            let op = try await store.appendOperation(table: "Note", itemId: "a")
            let waited = try await waiter.value
            try expectEqual(waited, 1, "waitForPendingOperations returns the count")
            try expectEqual(try await store.waitForPendingOperations(), 1, "returns at once when the queue is not empty")
            // (A state that lasts until the observer re-read it is never skipped.)
            try await waitUntil(60, "the counts 0, 1: \(counts.all)") { counts.all == [0, 1] }
            try await store.removeOperation(id: op.id)
            try await waitUntil(60, "the counts 0, 1, 0: \(counts.all)") { counts.all == [0, 1, 0] }
            // Cancelling a waiter ends it with CancellationError.
            let cancelled = Task { try await store.waitForPendingOperations() }
            try await Task.sleep(nanoseconds: 20_000_000)
            cancelled.cancel()
            do {
                _ = try await cancelled.value
                throw ConformanceFailure("a cancelled waitForPendingOperations() returned")
            } catch is CancellationError {}
            try await waitUntil(60, "the cancelled waiter unregisters") { store.changeCenter.observerCount == 1 }
        }
    }

    /// The typed conveniences publish what they write, one change per call: an append names the new
    /// operation and the high-water mark's row (the first append of the store and a later one), setting a
    /// delta token (again) names the token's row, removing an operation names it as deleted.
    public static func observeSystemTableConveniences(_ factory: StoreFactory) async throws {
        try await withNoteStore(factory) { store in
            let (gathered, task) = gather(store.changes())
            defer { task.cancel() }
            let ops = store.operationTableName
            let config = store.configTableName
            let a = try await store.appendOperation(table: "Note", itemId: "a")
            let b = try await store.appendOperation(table: "Note", itemId: "b")
            let date = Date(timeIntervalSince1970: 1_700_000_000)
            try await store.setDeltaToken(date, table: "Note", queryId: "q")
            try await store.setDeltaToken(date.addingTimeInterval(1), table: "Note", queryId: "q")
            try await store.removeOperation(id: a.id)
            try await waitUntil(60, "5 commits were made, \(gathered.count) changes arrived: \(gathered.all)") { gathered.count >= 5 }
            try await Task.sleep(nanoseconds: 20_000_000)
            let changes = gathered.all
            try expectEqual(changes.count, 5, "one change per call: \(changes)")
            let mark = Value.string(TableConfigEntry.operationIdHighWaterId)
            for (n, op) in [a, b].enumerated() {
                try expectEqual(Set(changes[n].tables.keys), [ops, config], "append \(n + 1): its tables")
                try expectEqual(changes[n].change(of: ops)?.upsertedIds, [.int(op.id)], "append \(n + 1): the operation")
                // The store's first operation also writes the row that says pushes' marks are tracked.
                let expected: Set<Value> = n == 0 ? [mark, .string("localstore|sentTracking")] : [mark]
                try expectEqual(Set(changes[n].change(of: config)?.upsertedIds ?? []), expected, "append \(n + 1): the high-water mark")
            }
            let token = Value.string(DeltaTokenKey.rowId(table: "Note", queryId: "q"))
            for n in 2...3 {
                try expectEqual(Set(changes[n].tables.keys), [config], "delta token \(n - 1): its table")
                try expectEqual(changes[n].change(of: config)?.upsertedIds, [token], "delta token \(n - 1): its row")
            }
            try expectEqual(changes[4].change(of: ops)?.deletedIds, [.int(a.id)], "the removal")
            try expectEqual(try await store.deltaToken(table: "Note", queryId: "q"), date.addingTimeInterval(1), "the token")
        }
    }

    // MARK: Other store objects (persistent backends)

    /// A commit made through another store object on the same files (in another process it is the
    /// same for the backend: another connection or LMDB's transaction ids) is noticed: as an unlisted
    /// change within the backend's polling interval, and at the latest when this store writes.
    public static func observeCommitsOfAnotherStoreObject(_ factory: StoreFactory) async throws {
        guard factory.isPersistent else { return }
        try await withWorkspace(factory) { workspace in
            let store = try workspace.open()
            try await store.defineTable(noteSchema)
            let other = try workspace.open()
            let (gathered, task) = gather(store.changes())
            defer { task.cancel() }
            let (results, queryTask) = gather(store.observe(Query("Note", sort: [SortKey("id")])))
            defer { queryTask.cancel() }
            try await waitUntil(60, "the first result") { results.count == 1 }
            try await other.upsert([note("elsewhere", 1)], into: "Note")
            try await waitUntil(60, "a commit of another store object was not noticed: \(gathered.all)") {
                gathered.all.contains { $0.includesUnlistedChanges }
            }
            try await waitUntil(60, "the query observation did not see the other store object's row") {
                results.all.last.map { (try? ids($0.items)) == ["elsewhere"] } ?? false
            }
            // Noticed when this store writes: the other's commit comes before this store's own change.
            try await other.upsert([note("second", 2)], into: "Note")
            try await store.upsert([note("mine", 3)], into: "Note")
            try await waitUntil(60, "this store's own change") {
                gathered.all.contains { $0.change(of: "Note")?.upsertedIds == ["mine"] }
            }
            let all = gathered.all
            let mine = try unwrap(all.firstIndex { $0.change(of: "Note")?.upsertedIds == ["mine"] })
            try expect(all[..<mine].filter(\.includesUnlistedChanges).count >= 2,
                "both commits of the other store object are noticed before this store's own change: \(all)")
        }
    }
}
