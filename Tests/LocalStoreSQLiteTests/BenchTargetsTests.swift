import LocalStoreBench
import Testing

/// The per-operation targets `localstore bench` prints under its tables.
@Suite("Bench: per-operation targets")
struct BenchTargetsTests {
    private func result(_ backend: String, _ workload: String, _ rate: Double) -> BenchResult {
        BenchResult(
            backend: backend, workload: workload, ops: 1, seconds: 1 / rate, opsPerSecond: rate, p50Micros: nil, p99Micros: nil,
            ratioToBaseline: nil)
    }

    @Test func ratiosVerdictsAndTheTableRows() {
        let report = BenchReport(
            records: 10, environment: [:],
            results: [
                result("sqlite-c", "read-by-id", 100), result("sqlite", "read-by-id", 79),
                result("sqlite-c", "upsert", 10), result("sqlite", "upsert", 9),
                result("sqlcipher", "read-by-id", 72), result("sqlcipher-c", "read-by-id", 80),
                result("sqlcipher", "local-write", 50), result("sqlcipher-c", "local-write", 80), result("sqlite", "local-write", 80),
                result("lmdb-c", "pull-page", 10), result("lmdb", "pull-page", 7),
                result("lmdb-c", "push-drain", 10), result("lmdb", "push-drain", 8),
                result("lmdb", "delta-token", 5),  // no lmdb-c row: not a target of this run
            ],
            footprints: [])
        let targets = report.targets()
        func target(_ backend: String, _ workload: String) -> BenchReport.Target? {
            targets.first { $0.backend == backend && $0.workload == workload }
        }
        #expect(target("sqlite", "read-by-id")?.ratio == 0.79)
        #expect(target("sqlite", "read-by-id")?.isMet == false)
        #expect(target("sqlite", "upsert")?.isMet == true)
        #expect(target("sqlite", "upsert")?.reference == "sqlite-c")
        // SQLCipher is held to its own engine, SQLCipher's C API.
        #expect(target("sqlcipher", "read-by-id")?.reference == "sqlcipher-c")
        #expect(target("sqlcipher", "read-by-id")?.minimum == 0.8)
        #expect(target("sqlcipher", "read-by-id")?.isMet == true)  // 72 / 80
        #expect(target("sqlcipher", "local-write")?.ratio == 50.0 / 80.0)
        #expect(target("sqlcipher", "local-write")?.isMet == false)
        // The sync workloads are targets of lmdb too.
        #expect(target("lmdb", "pull-page")?.ratio == 0.7)
        #expect(target("lmdb", "pull-page")?.isMet == false)
        #expect(target("lmdb", "push-drain")?.isMet == true)
        #expect(target("lmdb", "delta-token") == nil)
        #expect(target("sqlite", "local-write") == nil)  // no sqlite-c row
        #expect(targets.count == 6)
        let table = report.table()
        let line = table.split(separator: "\n").first { $0.hasPrefix("sqlite ÷ sqlite-c") && $0.contains("read-by-id") }
        #expect(line?.contains("0.79") == true)
        #expect(line?.contains("missed") == true)
    }

    @Test("runs in several processes: per workload the run with the median throughput, whole")
    func medianOfRuns() {
        func run(_ rows: [(String, String, Double, Double)], peak: [String: Int64]) -> BenchReport {
            BenchReport(
                records: 10, environment: ["run": "x"],
                results: rows.map {
                    BenchResult(
                        backend: $0.0, workload: $0.1, ops: 1, seconds: 1 / $0.2, opsPerSecond: $0.2, p50Micros: $0.3,
                        p99Micros: nil, ratioToBaseline: nil)
                },
                footprints: peak.keys.sorted().map { BenchFootprint(backend: $0, storeBytes: 0, peakMemoryBytes: peak[$0] ?? 0) })
        }
        let runs = [
            run([("sqlite-c", "upsert", 90, 1), ("sqlite", "upsert", 50, 11), ("sqlite", "count", 5, 100)], peak: ["sqlite": 300]),
            run([("sqlite-c", "upsert", 60, 2), ("sqlite", "upsert", 100, 12)], peak: ["sqlite": 100]),
            run([("sqlite-c", "upsert", 80, 3), ("sqlite", "upsert", 70, 13), ("sqlite", "count", 7, 200)], peak: ["sqlite": 200]),
        ]
        var merged = BenchReport.median(of: runs)
        #expect(merged.results.map { "\($0.backend) \($0.workload)" } == ["sqlite-c upsert", "sqlite upsert", "sqlite count"])
        // The middle run of each row, with its own p50.
        #expect(merged.results.map(\.opsPerSecond) == [80, 70, 5])
        #expect(merged.results.map(\.p50Micros) == [3, 13, 100])
        #expect(merged.footprints.map(\.peakMemoryBytes) == [200])
        merged.computeRatios(baselines: ["sqlite": "sqlite-c"])
        #expect(merged.results[1].ratioToBaseline == 70.0 / 80.0)
        // A single run is itself; an empty list is an empty report.
        #expect(BenchReport.median(of: [runs[0]]).results == runs[0].results)
        #expect(BenchReport.median(of: []).results.isEmpty)
    }
}
