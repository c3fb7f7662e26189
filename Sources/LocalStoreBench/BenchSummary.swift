import Foundation

/// The backend × workload view of a ``BenchReport``: what `localstore bench` prints at the end of its
/// table, as Markdown (`--format markdown`), and what the chart (``BenchChart``) draws.
public struct BenchSummary: Sendable {
    /// Workloads in the order they first appear in the report.
    public var workloads: [String]
    /// Backends in the order they first appear, C-API baselines (``isBaseline(_:)``) last.
    public var backends: [String]
    /// The result of each `(workload, backend)` pair that ran.
    public var results: [Pair: BenchResult]

    /// A workload and a backend.
    public struct Pair: Hashable, Sendable {
        public var workload: String
        public var backend: String
        public init(_ workload: String, _ backend: String) {
            self.workload = workload
            self.backend = backend
        }
    }

    /// Whether `backend` is a C-API baseline (`sqlite-c`, `lmdb-c`: the name ends in `-c`).
    public static func isBaseline(_ backend: String) -> Bool { backend.hasSuffix("-c") }

    public init(_ report: BenchReport) {
        var workloads: [String] = []
        var backends: [String] = []
        var results: [Pair: BenchResult] = [:]
        for r in report.results {
            if !workloads.contains(r.workload) { workloads.append(r.workload) }
            if !backends.contains(r.backend) { backends.append(r.backend) }
            results[Pair(r.workload, r.backend)] = r
        }
        self.workloads = workloads
        self.backends = backends.filter { !Self.isBaseline($0) } + backends.filter(Self.isBaseline)
        self.results = results
    }

    /// Operations per second in four significant characters: `950`, `12.3k`, `1.2M`.
    public static func rate(_ v: Double) -> String {
        if v >= 1e6 { return String(format: "%.1fM", v / 1e6) }
        if v >= 1e3 { return String(format: "%.1fk", v / 1e3) }
        if v >= 10 { return String(format: "%.0f", v) }
        return String(format: "%.1f", v)
    }

    /// A cell: operations per second and, when the backend has a baseline that ran, `(0.93×)`.
    func cell(_ pair: Pair, exact: Bool) -> String {
        guard let r = results[pair] else { return "–" }
        var text = exact ? Self.grouped(r.opsPerSecond) : Self.rate(r.opsPerSecond)
        if let ratio = r.ratioToBaseline { text += String(format: " (%.2f×)", ratio) }
        return text
    }

    static func grouped(_ v: Double) -> String {
        let digits = String(Int64(v.rounded()))
        var out = ""
        for (n, c) in digits.reversed().enumerated() {
            if n > 0, n % 3 == 0, c != "-" { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    /// The aligned text table: one row per workload, one column per backend.
    public func table() -> String {
        var rows = [["workload"] + backends]
        for w in workloads { rows.append([w] + backends.map { cell(Pair(w, $0), exact: false) }) }
        return "operations per second (× the backend's C-API baseline)\n"
            + BenchReport.align(rows, rightAligned: Set(1..<(backends.count + 1)))
    }

    /// The same as a Markdown table, with exact operations per second.
    public func markdown() -> String {
        var lines = ["| workload | " + backends.joined(separator: " | ") + " |"]
        lines.append("| --- |" + String(repeating: " ---: |", count: backends.count))
        for w in workloads {
            lines.append("| \(w) | " + backends.map { cell(Pair(w, $0), exact: true) }.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// How the cost of one operation grows from `smaller` (a run on fewer records) to `report`: per
    /// workload and backend, the smaller run's operations per second divided by this one's, as Markdown.
    public static func growth(_ report: BenchReport, from smaller: BenchReport) -> String {
        let large = BenchSummary(report)
        let small = BenchSummary(smaller)
        var lines = [
            "| cost per operation, \(grouped(Double(report.records))) ÷ \(grouped(Double(smaller.records))) records | "
                + large.backends.joined(separator: " | ") + " |"
        ]
        lines.append("| --- |" + String(repeating: " ---: |", count: large.backends.count))
        for w in large.workloads {
            let cells = large.backends.map { b -> String in
                guard let a = large.results[Pair(w, b)], let c = small.results[Pair(w, b)], a.opsPerSecond > 0, c.opsPerSecond > 0
                else { return "–" }
                return String(format: "%.2f×", c.opsPerSecond / a.opsPerSecond)
            }
            lines.append("| \(w) | " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
