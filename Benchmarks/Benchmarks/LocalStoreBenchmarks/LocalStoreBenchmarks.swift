import Benchmark
import Foundation
import LocalStoreBench
import LocalStorePeers

// One benchmark per (workload, subject), named `<workload>/<subject>` (`upsert/sqlite`, `read-by-id/grdb`, …):
// `swift package benchmark --filter 'upsert/.*'`. Every benchmark starts from a store loaded with
// LOCALSTORE_BENCH_RECORDS records (default 10,000) and runs the workload one unit per iteration, with the
// inputs and self-checks of `localstore bench` (LocalStoreBench.BenchSession): a unit is a 500-record page
// for `upsert` and `update`, one `delete where priority == p` for `delete-by-query`, one operation otherwise.
// What a unit uses up (the empty table of `upsert`, the queue of `push-drain`, the rows of `delete-by-query`)
// is restored after the measured part of the iteration. The sync workloads (enqueue, push-cycle, pull-page,
// initial-pull, purge) start from a queue of 10,000 operations and run at most the units a session has.

/// The session of the benchmark being run (set by its setup, released by its teardown).
private final class SessionHolder: @unchecked Sendable {
    var session: BenchSession?
}

let benchmarks: @Sendable () -> Void = {
    let records = ProcessInfo.processInfo.environment["LOCALSTORE_BENCH_RECORDS"].flatMap { Int($0) } ?? 10_000
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident],
        warmupIterations: 2,
        maxDuration: .seconds(1),
        maxIterations: 10_000
    )
    for workload in Workload.allCases {
        for subject in Subjects.all where workload != .open || subject.isPersistent {
            let holder = SessionHolder()
            // A sync workload uses up what it starts from (the queue, the pages to pull, the priorities to
            // purge) and is not refilled: its iterations, warm-up included, stay within the session's units.
            var configuration = Benchmark.defaultConfiguration
            if workload.isSync {
                let units = BenchSession.plannedUnits(of: workload, records: records)
                configuration.maxIterations = max(1, units - configuration.warmupIterations)
            }
            Benchmark(
                "\(workload.rawValue)/\(subject.name)",
                configuration: configuration,
                closure: { benchmark in
                    guard let session = holder.session else {
                        benchmark.error("the setup did not create a session")
                        return
                    }
                    for _ in benchmark.scaledIterations { try session.step(workload) }
                    if session.needsRefill(workload) {
                        benchmark.stopMeasurement()
                        try session.refill(workload)
                    }
                },
                setup: {
                    let session = try BenchSession(backend: subject, records: records)
                    try session.prepare(for: workload)
                    holder.session = session
                },
                teardown: {
                    if let session = holder.session {
                        try session.close()
                        session.removeFiles()
                    }
                    holder.session = nil
                })
        }
    }
}
