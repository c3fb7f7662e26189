import Foundation
import LocalStore

/// What the sync workloads track to check every call's result: the queue's item ids in operation order,
/// the items with pending operations, the loaded records deleted by `enqueue` or a pull.
struct SyncState {
    /// Whether `TodoPulled` exists and the queue was seeded.
    var isSeeded = false
    /// The seeded items (queued inserts of new TodoItem rows), in queue order.
    var seeded: [TodoRecord] = []
    /// The item id of each operation in queue order (collapsed changes do not add one) and the next one a
    /// push takes.
    var order: [String] = []
    var head = 0
    /// Pending operations per item id.
    var pending: [String: Int] = [:]
    /// Loaded records that are deleted now (by an `enqueue` delete or a pulled soft delete).
    var deleted: Set<String> = []
    var enqueued = 0
    /// The next loaded record `enqueue` deletes and the next one a pull sends.
    var deleteCursor = 0
    var pullCursor = 0
    var pulledPages = 0
    var pushed = 0
    /// `initial-pull` pages applied; priorities of `TodoPulled` purged.
    var initialPages = 0
    var purged = 0
}

extension BenchSession {
    var syncSubject: any BenchSyncSubject {
        get throws {
            guard let s = subject as? any BenchSyncSubject else {
                throw LocalStoreError(.unsupported, "benchmark: \(backend.name) has no sync workloads")
            }
            return s
        }
    }

    /// Creates `TodoPulled` and seeds the queue with ``queue`` new items (untimed), once.
    func seedSync() throws {
        guard !sync.isSeeded else { return }
        let subject = try syncSubject
        try subject.setUpSync()
        var batch: [TodoRecord] = []
        for n in 0..<queue {
            var r = BenchData.record(data.records.count + n, rng: &rng)
            r.id = "queued-\(n)-" + String(rng.next(), radix: 36)
            r.priority = 20  // outside 0..<10: the query and delete expectations stay exact
            r.complete = false
            sync.seeded.append(r)
            batch.append(r)
            if batch.count == 10_000 || n == queue - 1 {
                try subject.seedQueue(batch)
                batch.removeAll(keepingCapacity: true)
            }
            sync.order.append(r.id)
            sync.pending[r.id] = 1
        }
        sync.isSeeded = true
    }

    /// The state `workload` starts from in a full run: the queue seeded; for `purge`, `TodoPulled` filled
    /// by `initial-pull`.
    func prepareSync(for workload: Workload) throws {
        try seedSync()
        if workload == .purge {
            while sync.initialPages < plannedUnits(of: .initialPull) { _ = try syncStep(.initialPull) { try $0() } }
        }
    }

    private func markDeleted(_ index: Int) {
        let r = data.records[index]
        guard sync.deleted.insert(r.id).inserted else { return }
        data.priorityCounts[Int(r.priority)] -= 1
        if r.complete { data.completeCount -= 1 }
        scanMatchesChanged(index, by: -1)
    }

    func markPresent(_ index: Int) {
        let r = data.records[index]
        guard sync.deleted.remove(r.id) != nil else { return }
        data.priorityCounts[Int(r.priority)] += 1
        if r.complete { data.completeCount += 1 }
        scanMatchesChanged(index, by: 1)
    }

    /// One unit of a sync workload; only the subject's call is inside `clock`.
    func syncStep(_ workload: Workload, _ clock: (_ call: () throws -> Void) throws -> Void) throws -> Int {
        try seedSync()
        let subject = try syncSubject
        let name = backend.name
        switch workload {
        case .enqueue:
            let k = sync.enqueued
            sync.enqueued += 1
            switch k % 3 {
            case 0:
                // A new item.
                var r = data.newRecord(k, rng: &rng)
                r.id = "enqueued-\(k)-" + String(rng.next(), radix: 36)
                r.priority = 30
                var outcome: BenchEnqueueOutcome?
                try clock { outcome = try subject.enqueue(.insert, r) }
                try BenchCheck.equal(outcome, .added, "\(name) enqueue insert \(r.id)")
                sync.order.append(r.id)
                sync.pending[r.id, default: 0] += 1
            case 1:
                // A change to a seeded item whose insert is queued (in the half a push does not reach): it
                // collapses into the insert.
                let half = max(1, queue / 2)
                var r = sync.seeded[queue - 1 - (k / 3) % half]
                r.text += " (edited \(k))"
                r.updatedAt = r.updatedAt.addingTimeInterval(Double(k))
                var outcome: BenchEnqueueOutcome?
                try clock { outcome = try subject.enqueue(.update, r) }
                try BenchCheck.equal(outcome, .kept, "\(name) enqueue update \(r.id)")
            default:
                // The delete of a loaded record (priority 5-9: delete-by-query's counts stay exact).
                guard let index = nextDeletable() else {
                    throw LocalStoreError(.internal, "benchmark: no loaded record left to delete")
                }
                let r = data.records[index]
                var outcome: BenchEnqueueOutcome?
                try clock { outcome = try subject.enqueue(.delete, r) }
                try BenchCheck.equal(outcome, .added, "\(name) enqueue delete \(r.id)")
                markDeleted(index)
                sync.order.append(r.id)
                sync.pending[r.id, default: 0] += 1
            }
            return 1

        case .pushCycle:
            guard sync.head < sync.order.count else {
                throw LocalStoreError(.misuse, "benchmark: the queue is empty")
            }
            let expected = sync.order[sync.head]
            let version = "srv-\(sync.pushed)"
            sync.pushed += 1
            var pushed: String?
            try clock { pushed = try subject.pushOne(serverVersion: version) }
            try BenchCheck.equal(pushed, expected, "\(name) push-cycle pushed the head")
            sync.head += 1
            sync.pending[expected, default: 1] -= 1
            if sync.pending[expected] == 0 { sync.pending[expected] = nil }
            return 1

        case .pullPage:
            // 46 loaded records (two of them soft-deleted by the server when their priority is 5-9: the
            // delete-by-query counts stay exact) and four seeded items, which have pending operations and
            // are skipped.
            let stamp = Date(timeIntervalSince1970: 1_900_000_000 + Double(sync.pulledPages))
            sync.pulledPages += 1
            var page: [TodoRecord] = []
            var indices: [Int?] = []
            for j in 0..<(Self.pullPageSize - 4) {
                let index = sync.pullCursor % data.records.count
                sync.pullCursor += 1
                var r = data.records[index]
                r.text += " (pulled)"
                r.updatedAt = stamp
                r.version = "srv-pull"
                r.deleted = j % 23 == 11 && r.priority >= 5
                page.append(r)
                indices.append(index)
            }
            let half = max(1, queue / 2)
            for j in 0..<4 {
                var r = sync.seeded[queue - 1 - (sync.pulledPages * 4 + j) % half]
                r.updatedAt = stamp
                r.version = "srv-pull"
                page.append(r)
                indices.append(nil)
            }
            var expected = BenchPulledPage(upserted: 0, deleted: 0, skipped: 0)
            for r in page {
                if sync.pending[r.id] != nil {
                    expected.skipped += 1
                } else if r.deleted {
                    expected.deleted += 1
                } else {
                    expected.upserted += 1
                }
            }
            var result: BenchPulledPage?
            try clock { result = try subject.applyPulledPage(page, into: "TodoItem", queryId: "sync") }
            try BenchCheck.equal(result, expected, "\(name) pull-page")
            for (r, index) in zip(page, indices) {
                guard let index, sync.pending[r.id] == nil else { continue }
                if r.deleted { markDeleted(index) } else { markPresent(index) }
            }
            return 1

        case .initialPull:
            let n = sync.initialPages
            guard n * Self.initialPullPage < data.records.count else {
                throw LocalStoreError(.misuse, "benchmark: every page of initial-pull is applied")
            }
            sync.initialPages += 1
            let page = Array(data.records[(n * Self.initialPullPage)..<min((n + 1) * Self.initialPullPage, data.records.count)])
            var result: BenchPulledPage?
            try clock { result = try subject.applyPulledPage(page, into: "TodoPulled", queryId: "initial") }
            try BenchCheck.equal(result, BenchPulledPage(upserted: page.count, deleted: 0, skipped: 0), "\(name) initial-pull")
            return 1

        case .purge:
            while sync.initialPages < plannedUnits(of: .initialPull) { _ = try syncStep(.initialPull) { try $0() } }
            guard sync.purged < 10 else { throw LocalStoreError(.misuse, "benchmark: every priority of TodoPulled is purged") }
            let p = sync.purged
            sync.purged += 1
            var n = 0
            try clock { n = try subject.purge("TodoPulled", priority: Int64(p), queryId: "initial") }
            try BenchCheck.equal(n, data.initialPriorityCounts[p], "\(name) purge rows")
            return 1

        default:
            throw LocalStoreError(.misuse, "benchmark: \(workload.rawValue) is not a sync workload")
        }
    }

    /// The next loaded record with priority 5-9 that is neither deleted nor queued.
    private func nextDeletable() -> Int? {
        while sync.deleteCursor < data.records.count {
            let index = sync.deleteCursor
            sync.deleteCursor += 1
            let r = data.records[index]
            if r.priority >= 5 && !sync.deleted.contains(r.id) && sync.pending[r.id] == nil { return index }
        }
        return nil
    }
}
