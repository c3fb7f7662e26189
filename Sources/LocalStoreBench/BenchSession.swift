import Foundation
import LocalStore

/// One subject's store in a temporary directory plus the benchmark's deterministic data, driven one unit
/// of work at a time.
///
/// This is the workload code: ``BenchRunner`` (`localstore bench`) runs every workload through it in a fixed
/// order, and the package-benchmark suite in `Benchmarks/` runs one workload per benchmark through it, so
/// every backend, baseline and peer library gets the same inputs in the same order and the same self-checks.
///
/// A unit (``step(_:)``) is one call of the ``BenchSubject``: one page of 500 records for `upsert` and
/// `update`, one `delete where priority == p` for `delete-by-query`, one operation for everything else.
public final class BenchSession {
    /// The backend (or baseline, or peer) under test.
    public let backend: BenchBackend
    /// The number of records the table is loaded with.
    public let records: Int
    /// The temporary directory holding the store; removed by ``removeFiles()`` or when the session is released.
    public let directory: URL
    /// The subject driving the store.
    public private(set) var subject: any BenchSubject

    /// Records per page of `upsert` and `update`.
    public static let pageSize = 500

    var data: BenchData
    var rng: SplitMix64
    let pages: [[TodoRecord]]
    private var nextPage = 0
    private var updatePages: [[TodoRecord]]?
    private var nextUpdatePage = 0
    private var localWrites = 0
    private var pendingOperations = 0
    private var deletedPriorities = 0
    private var tokenRounds = 0
    private var isClosed = false
    /// How many rows of the loaded table contain each `query-scan` needle (changed by local writes and deletes).
    private var scanMatches: [Int]
    /// The pending operations the sync workloads start from.
    public let queue: Int
    var sync = SyncState()

    /// Creates the store of `backend` in a new temporary directory, generates `records` records from `seed`
    /// and creates the TodoItem table (empty).
    public init(backend: BenchBackend, records: Int, seed: UInt64 = 42, queue: Int = BenchRunner.defaultQueue) throws {
        guard records >= 1 else { throw LocalStoreError(.invalidValue, "a benchmark needs at least one record") }
        guard queue >= 2 else { throw LocalStoreError(.invalidValue, "the sync workloads need a queue of at least 2 operations, not \(queue)") }
        self.backend = backend
        self.queue = queue
        self.records = records
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "localstore-bench-\(backend.name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        do {
            subject = try backend.make(directory)
            try subject.setUp()
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        var rng = SplitMix64(seed: seed)
        data = BenchData(count: records, rng: &rng)
        self.rng = rng
        scanMatches = data.needleCounts
        pages = stride(from: 0, to: data.records.count, by: Self.pageSize).map { [data] in
            Array(data.records[$0..<min($0 + Self.pageSize, data.records.count)])
        }
    }

    deinit {
        if !isClosed { try? subject.close() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether `workload` can run on this subject (`open` needs a persistent store).
    public func supports(_ workload: Workload) -> Bool {
        (backend.workloads?.contains(workload) ?? true) && (workload != .open || backend.isPersistent)
            && (!workload.isSync || subject is any BenchSyncSubject)
    }

    /// How many units `localstore bench` runs of `workload` (for `push-drain`: until the queue is empty,
    /// the last unit finding it empty).
    public func plannedUnits(of workload: Workload) -> Int { Self.plannedUnits(of: workload, records: records, queue: queue) }

    /// ``plannedUnits(of:)`` of a session of `records` records and a queue of `queue` operations.
    public static func plannedUnits(of workload: Workload, records: Int, queue: Int = BenchRunner.defaultQueue) -> Int {
        switch workload {
        case .upsert: return (records + pageSize - 1) / pageSize
        case .readById: return min(records, 50_000)
        case .queryIndexed: return 500
        case .queryScan: return 20
        case .count: return 50
        case .update: return (updateCount(records: records) + pageSize - 1) / pageSize
        case .localWrite: return localWriteCount(records: records)
        case .pushDrain: return localWriteCount(records: records) + 1
        case .deltaToken: return 1000
        case .enqueue: return enqueueCount(records: records)
        case .pushCycle: return min(1_000, queue / 2)
        case .pullPage: return min(200, max(1, records / 50))
        case .initialPull: return (records + initialPullPage - 1) / initialPullPage
        case .purge: return 10
        case .open: return 20
        case .deleteByQuery: return 5
        }
    }

    /// The raw data of the loaded records, per record: UTF-8 bytes of the strings, 8 per integer and
    /// date, 1 per boolean.
    public var payloadBytesPerRow: Double {
        let total = data.records.reduce(0) { sum, r in
            sum + r.id.utf8.count + r.text.utf8.count + r.version.utf8.count + 8 * 3 + 2
        }
        return Double(total) / Double(max(1, data.records.count))
    }

    static func localWriteCount(records: Int) -> Int { max(1, min(records / 10, 5_000)) }
    /// `enqueue` units: a third new items, a third updates, a third deletes.
    static func enqueueCount(records: Int) -> Int { max(3, min(records / 10, 3_000) / 3 * 3) }
    /// Items per page of `initial-pull` (`pull-page` pages hold 50).
    public static let initialPullPage = 100
    static let pullPageSize = 50
    static func updateCount(records: Int) -> Int { max(1, Int(Double(records) * 0.1)) }

    /// Brings a new session into the state `workload` starts from in `localstore bench`: an empty table for
    /// `upsert`; every record loaded for the others; plus a full operation queue for `push-drain`.
    public func prepare(for workload: Workload) throws {
        guard workload != .upsert else { return }
        while nextPage < pages.count { _ = try step(.upsert) }
        if workload == .pushDrain { try refill(.pushDrain) }
        if workload.isSync { try prepareSync(for: workload) }
    }

    /// Whether the next unit of `workload` needs ``refill(_:)`` first (to be done outside the measurement):
    /// every page inserted (`upsert`), the queue empty (`push-drain`), or the five priorities deleted
    /// (`delete-by-query`).
    public func needsRefill(_ workload: Workload) -> Bool {
        switch workload {
        case .upsert: return nextPage >= pages.count
        case .pushDrain: return pendingOperations == 0
        case .deleteByQuery: return deletedPriorities >= 5
        default: return false
        }
    }

    /// Restores what repeated units of `workload` used up: a new empty store for `upsert`, a queue of
    /// operations for `push-drain` (written by `local-write` units), the deleted rows for `delete-by-query`.
    public func refill(_ workload: Workload) throws {
        switch workload {
        case .upsert:
            try subject.close()
            isClosed = true
            try FileManager.default.removeItem(at: directory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            subject = try backend.make(directory)
            isClosed = false
            try subject.setUp()
            nextPage = 0
            pendingOperations = 0
            deletedPriorities = 0
            scanMatches = data.needleCounts
        case .pushDrain:
            for _ in 0..<Self.localWriteCount(records: records) { _ = try step(.localWrite) }
        case .deleteByQuery:
            for page in pages { try subject.upsert(page) }
            for p in 0..<deletedPriorities { adjustScanMatches(deletedPriority: p, by: 1) }
            // The rows the sync workloads deleted are back.
            for (i, r) in data.records.enumerated() where sync.deleted.contains(r.id) { markPresent(i) }
            deletedPriorities = 0
        default:
            break
        }
    }

    /// Runs one unit of `workload` and checks its result; returns the number of operations it did (records
    /// written or deleted, or 1; 0 when `push-drain` found the queue empty).
    @discardableResult
    public func step(_ workload: Workload) throws -> Int { try step(workload) { try $0() } }

    /// ``step(_:)`` with only the subject's call inside `clock` (input selection and checks stay outside).
    func step(_ workload: Workload, _ clock: (_ call: () throws -> Void) throws -> Void) throws -> Int {
        let name = backend.name
        switch workload {
        case .upsert:
            guard nextPage < pages.count else {
                throw LocalStoreError(.misuse, "benchmark: every page is inserted; refill(.upsert) first")
            }
            let page = pages[nextPage]
            nextPage += 1
            try clock { try subject.upsert(page) }
            return page.count

        case .readById:
            let id = randomRecord().id
            var found = false
            try clock { found = try subject.read(id: id) }
            try BenchCheck.equal(found, true, "\(name) read-by-id found \(id)")
            return 1

        case .queryIndexed:
            let p = Int64(rng.next() % 10)
            var n = 0
            try clock { n = try subject.queryIndexed(priority: p) }
            try BenchCheck.equal(n, min(50, data.priorityCounts[Int(p)]), "\(name) query-indexed rows")
            return 1

        case .queryScan:
            let k = Int(rng.next() % 1000)
            var n = 0
            try clock { n = try subject.queryScan(textContains: "#\(k)#") }
            try BenchCheck.equal(n, min(50, scanMatches[k]), "\(name) query-scan rows")
            return 1

        case .count:
            var n = 0
            try clock { n = try subject.countComplete() }
            try BenchCheck.equal(n, data.completeCount, "\(name) count")
            return 1

        case .update:
            if updatePages == nil {
                let updated = data.updates(fraction: 0.1, rng: &rng)
                updatePages = stride(from: 0, to: updated.count, by: Self.pageSize).map {
                    Array(updated[$0..<min($0 + Self.pageSize, updated.count)])
                }
            }
            let all = updatePages ?? []
            if nextUpdatePage >= all.count { nextUpdatePage = 0 }
            let page = all[nextUpdatePage]
            nextUpdatePage += 1
            try clock { try subject.upsert(page) }
            return page.count

        case .localWrite:
            let r = data.newRecord(localWrites, rng: &rng)
            let needle = (data.records.count + localWrites) % 1000
            localWrites += 1
            try clock { try subject.localWrite(r) }
            pendingOperations += 1
            scanMatches[needle] += 1
            return 1

        case .pushDrain:
            var drained = false
            try clock { drained = try subject.drainOne() }
            try BenchCheck.equal(drained, pendingOperations > 0, "\(name) push-drain found an operation")
            if drained { pendingOperations -= 1 }
            return drained ? 1 : 0

        case .deltaToken:
            let n = tokenRounds
            tokenRounds += 1
            let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(n % 1_000_000))
            var back: Date?
            try clock { back = try subject.deltaTokenRoundTrip(date, queryId: "q\(n % 10)") }
            try BenchCheck.equal(back, date, "\(name) delta token")
            return 1

        case .open:
            guard backend.isPersistent else {
                throw LocalStoreError(.unsupported, "benchmark: \(name) is not persistent; it has no open workload")
            }
            let id = randomRecord().id
            var found = false
            try clock { found = try subject.reopen(andRead: id) }
            try BenchCheck.equal(found, true, "\(name) open then read")
            return 1

        case .enqueue, .pushCycle, .pullPage, .initialPull, .purge:
            return try syncStep(workload, clock)

        case .deleteByQuery:
            guard deletedPriorities < 5 else {
                throw LocalStoreError(.misuse, "benchmark: priorities 0-4 are deleted; refill(.deleteByQuery) first")
            }
            let p = deletedPriorities
            deletedPriorities += 1
            var n = 0
            try clock { n = try subject.deleteWhere(priority: Int64(p)) }
            try BenchCheck.equal(n, data.priorityCounts[p], "\(name) delete-by-query rows")
            adjustScanMatches(deletedPriority: p, by: -1)
            return n
        }
    }

    func scanMatchesChanged(_ index: Int, by delta: Int) { scanMatches[index % 1000] += delta }

    private func adjustScanMatches(deletedPriority p: Int, by delta: Int) {
        for (i, r) in data.records.enumerated() where r.priority == Int64(p) { scanMatches[i % 1000] += delta }
    }

    /// A record of the loaded table that is still there (the sync workloads delete some).
    private func randomRecord() -> TodoRecord {
        while true {
            let r = data.records[Int(rng.next() % UInt64(data.records.count))]
            if !sync.deleted.contains(r.id) { return r }
        }
    }

    /// Closes the subject's store (the files stay until ``removeFiles()``).
    public func close() throws {
        guard !isClosed else { return }
        isClosed = true
        try subject.close()
    }

    /// The bytes the store's files take in ``directory``.
    public var storeBytes: Int64 { DiskUsage.bytes(of: directory) }

    /// Removes the temporary directory.
    public func removeFiles() { try? FileManager.default.removeItem(at: directory) }
}
