import Foundation

extension BenchReport {
    /// Fills `ratioToBaseline` of every row whose backend names a baseline that ran the same workload:
    /// the backend's operations per second divided by the baseline's.
    public mutating func computeRatios(baselines: [String: String]) {
        var rates: [String: Double] = [:]
        for r in results { rates["\(r.backend)|\(r.workload)"] = r.opsPerSecond }
        for i in results.indices {
            guard let base = baselines[results[i].backend], let rate = rates["\(base)|\(results[i].workload)"],
                rate > 0
            else { continue }
            results[i].ratioToBaseline = results[i].opsPerSecond / rate
        }
    }

    /// Several runs of the same benchmark (one report per run, each backend in its own process) made
    /// one: for every backend and workload, the run with the median throughput, whole (its seconds,
    /// p50 and p99 are that run's; of an even number of runs, the slower of the two middle ones); per
    /// backend, the footprint with the median peak memory. A single process draws a speed for its whole
    /// life on a shared machine (where its pages land, what runs beside it), so one process per
    /// backend can put a backend and its baseline on different speeds; the median over processes, run
    /// interleaved, does not depend on one draw. Rows keep the order of their first appearance; ratios
    /// are left to ``computeRatios(baselines:)``; `environment` and `records` are the first run's.
    public static func median(of runs: [BenchReport]) -> BenchReport {
        guard let first = runs.first else { return BenchReport(records: 0, environment: [:], results: [], footprints: []) }
        /// Per key, in order of first appearance, the middle element by `rank`.
        func medians<T>(_ items: [T], key: (T) -> String, rank: (T) -> Double) -> [T] {
            var order: [String] = []
            var groups: [String: [T]] = [:]
            for item in items {
                let k = key(item)
                if groups[k] == nil { order.append(k) }
                groups[k, default: []].append(item)
            }
            return order.compactMap { k in groups[k].map { $0.sorted { rank($0) < rank($1) }[($0.count - 1) / 2] } }
        }
        return BenchReport(
            records: first.records, environment: first.environment,
            results: medians(runs.flatMap(\.results), key: { $0.backend + "|" + $0.workload }, rank: \.opsPerSecond),
            footprints: medians(runs.flatMap(\.footprints), key: \.backend, rank: { Double($0.peakMemoryBytes) }))
    }

    /// One per-operation target of issue 14: `backend ÷ reference` throughput on `workload` of at least
    /// `minimum`, and what this run measured (`nil` when either side did not run the workload).
    public struct Target: Sendable, Hashable {
        public var backend: String
        public var reference: String
        public var workload: String
        public var minimum: Double
        public var ratio: Double?

        /// Whether the run met the target (`nil` when it was not measured).
        public var isMet: Bool? { ratio.map { $0 >= minimum } }
    }

    /// The per-operation targets (`sqlite` ≥ 0.8× `sqlite-c` and `sqlcipher` ≥ 0.8× `sqlcipher-c` on every
    /// workload; `lmdb` ≥ 0.8× `lmdb-c` on read-by-id, push-drain, delta-token and the sync workloads), with
    /// the ratios of this run: operations per second
    /// of the backend divided by the reference's, both from this report. Targets whose two sides did not
    /// both run are left out.
    public func targets() -> [Target] {
        var rates: [String: Double] = [:]
        for r in results { rates["\(r.backend)|\(r.workload)"] = r.opsPerSecond }
        var out: [Target] = []
        func add(_ backend: String, _ reference: String, _ workload: String, _ minimum: Double) {
            guard let a = rates["\(backend)|\(workload)"], let b = rates["\(reference)|\(workload)"] else { return }
            out.append(Target(backend: backend, reference: reference, workload: workload, minimum: minimum, ratio: b > 0 ? a / b : nil))
        }
        for w in Workload.allCases { add("sqlite", "sqlite-c", w.rawValue, 0.8) }
        for w in [Workload.readById, .pushDrain, .deltaToken] { add("lmdb", "lmdb-c", w.rawValue, 0.8) }
        for w in Workload.allCases where w.isSync { add("lmdb", "lmdb-c", w.rawValue, 0.8) }
        for w in Workload.allCases { add("sqlcipher", "sqlcipher-c", w.rawValue, 0.8) }
        return out
    }

    /// The report as one JSON object (keys sorted, so runs diff cleanly).
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// The results as CSV with a header line.
    public func csv() -> String {
        var lines = ["backend,workload,ops,seconds,opsPerSecond,p50Micros,p99Micros,ratioToBaseline"]
        func f(_ d: Double?) -> String { d.map { String(format: "%.6g", $0) } ?? "" }
        for r in results {
            lines.append(
                [r.backend, r.workload, String(r.ops), f(r.seconds), f(r.opsPerSecond), f(r.p50Micros), f(r.p99Micros),
                 f(r.ratioToBaseline)].joined(separator: ","))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// An aligned text table: results, then store size and peak memory per backend.
    public func table() -> String {
        func f(_ d: Double?, _ digits: Int = 1) -> String { d.map { String(format: "%.\(digits)f", $0) } ?? "-" }
        let header = ["backend", "workload", "ops", "seconds", "ops/s", "p50 µs", "p99 µs", "× baseline"]
        var rows = results.map {
            [$0.backend, $0.workload, String($0.ops), f($0.seconds, 3), f($0.opsPerSecond, 0), f($0.p50Micros),
             f($0.p99Micros), $0.ratioToBaseline.map { String(format: "%.2f", $0) } ?? "-"]
        }
        rows.insert(header, at: 0)
        var out = "records: \(records)   " + environment.keys.sorted().map { "\($0): \(environment[$0]!)" }
            .joined(separator: "   ") + "\n\n"
        out += Self.align(rows, rightAligned: Set(2..<header.count))
        out += "\n"
        var foot = [["backend", "store size", "peak memory"]]
        for fp in footprints {
            foot.append([fp.backend, Self.bytes(fp.storeBytes), Self.bytes(fp.peakMemoryBytes)])
        }
        out += Self.align(foot, rightAligned: [1, 2])
        let goals = self.targets()
        if !goals.isEmpty {
            var rows = [["target", "workload", "ratio", "minimum", "verdict"]]
            for t in goals {
                rows.append([
                    "\(t.backend) ÷ \(t.reference)", t.workload, t.ratio.map { String(format: "%.3f", $0) } ?? "-",
                    String(format: "%.1f", t.minimum), t.isMet.map { $0 ? "met" : "missed" } ?? "-",
                ])
            }
            out += "\n" + Self.align(rows, rightAligned: [2, 3])
        }
        for fp in footprints {
            guard let heap = fp.residentBytesPerRow, let payload = fp.payloadBytesPerRow, payload > 0 else { continue }
            out += "\n\(fp.backend): \(Int(heap.rounded())) B resident per row for \(Int(payload.rounded())) B of payload ("
                + String(format: "%.1f", heap / payload) + "×)\n"
        }
        return out
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB"]
        var v = Double(n)
        var u = 0
        while v >= 1024 && u < units.count - 1 {
            v /= 1024
            u += 1
        }
        return u == 0 ? "\(n) B" : String(format: "%.1f", v) + " " + units[u]
    }

    static func align(_ rows: [[String]], rightAligned: Set<Int>) -> String {
        guard let width = rows.first?.count else { return "" }
        var widths = [Int](repeating: 0, count: width)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        var out = ""
        for (n, r) in rows.enumerated() {
            let cells = r.enumerated().map { i, c -> String in
                let pad = String(repeating: " ", count: widths[i] - c.count)
                return rightAligned.contains(i) ? pad + c : c + pad
            }
            out += cells.joined(separator: "  ") + "\n"
            if n == 0 { out += widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n" }
        }
        return out
    }
}
