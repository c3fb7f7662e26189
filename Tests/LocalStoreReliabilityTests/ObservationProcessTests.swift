import Foundation
import LocalStore
import LocalStoreReliability
import Synchronization
import Testing

/// Observation across processes (docs/observation.md): a second process commits to the store and
/// this process's observers see it, without this process writing.
@Suite("Observation across processes")
struct ObservationProcessTests {
    @Test("another process's commits reach this process's change stream, query observation and operation-queue waiter",
        arguments: ReliabilityBackend.available)
    func otherProcessCommitsAreObserved(_ backend: ReliabilityBackend) async throws {
        let directory = try TempDirectory("observe-\(backend)")
        let path = backend.storePath(in: directory.url)
        let store = try backend.open(path: path)
        defer { closeQuietly(store) }
        try await store.defineTable(MultiProcessWorkload.schema)

        let seen = Seen()
        let changes = store.changes()
        let changeTask = Task {
            for await change in changes where change.includesUnlistedChanges { seen.unlisted.add(1, ordering: .relaxed) }
        }
        defer { changeTask.cancel() }
        let queryTask = Task {
            for try await result in store.observe(Query(MultiProcessWorkload.table, sort: [SortKey("id")])) {
                seen.rows.withLock { $0 = result.items.compactMap(\.stringId) }
            }
        }
        defer { queryTask.cancel() }
        let waiter = Task { try await store.waitForPendingOperations() }

        let count = 3
        let child = try ChildProcess(executable: try helperPath(), arguments: ["multi", backend.rawValue, path, "B", "\(count)"])
        #expect(child.waitForLine(timeout: 60) { $0 == "ready" }, "\(child.errorOutput)")
        let start = Date()
        child.send("go")
        let pending = try await waiter.value
        let latency = Date().timeIntervalSince(start)
        #expect(pending >= 1, "the waiter returned the pending count")
        let end = child.wait()
        try #require(end == .exit(0), "the second process ended with \(end): \(child.errorOutput)")

        let expected = (1...count).map { "B-\($0)" }
        // 60 s and at least 12,000 polls (a run whose cooperative threads are all blocked by other tests
        // starves this task and the observers alike).
        let deadline = Date().addingTimeInterval(60)
        var polls = 0
        while polls < 12_000 || Date() < deadline, seen.rows.withLock({ $0 }) != expected || seen.unlisted.load(ordering: .relaxed) == 0 {
            polls += 1
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        #expect(seen.rows.withLock { $0 } == expected, "\(backend): the query observation did not see the other process's rows")
        #expect(seen.unlisted.load(ordering: .relaxed) >= 1, "\(backend): no unlisted change for the other process's commits")
        #expect(try await store.pendingOperationCount() == count)
        report("observation \(backend): another process's first commit woke waitForPendingOperations() after \(Int(latency * 1000)) ms (incl. its start-up), \(seen.unlisted.load(ordering: .relaxed)) unlisted change(s) for \(count) commits")
    }
}

/// Closes `store` from a `defer` of async code, which cannot `await` (the synchronous `close()` is
/// `noasync`: in a synchronous function it is allowed and brief).
private func closeQuietly(_ store: any LocalStore) { try? store.close() }

/// What the observing tasks saw.
private final class Seen: Sendable {
    let unlisted = Atomic<Int>(0)
    let rows = LockedValue<[String]>([])
}
