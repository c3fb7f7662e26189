import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import LocalStoreBench
import Testing

/// `localstore bench` ends with the backend × workload summary and writes the chart itself.
@Suite("localstore bench summary and chart", .serialized)
struct BenchSummaryTests {
    static let backends = ["memory", "sqlite", "lmdb"]
    static let baselines = ["sqlite-c", "sqlcipher-c", "lmdb-c"]
    static let workloads = ["read-by-id", "count"]
    static let arguments = ["bench", "--records", "200", "--workloads", workloads.joined(separator: ","), "--backends", backends.joined(separator: ",")]

    /// The bars of an SVG document (`rect class="bar"`), as (backend, workload); throws when the
    /// document is not well-formed XML.
    final class Bars: NSObject, XMLParserDelegate {
        var pairs: [String] = []
        var root: String?
        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String]) {
            if root == nil { root = name }
            if name == "rect", attributes["class"] == "bar" {
                pairs.append("\(attributes["data-backend"] ?? "?")|\(attributes["data-workload"] ?? "?")")
            }
        }
        static func parse(_ data: Data) throws -> Bars {
            let bars = Bars()
            let parser = XMLParser(data: data)
            parser.delegate = bars
            guard parser.parse() else {
                throw CLIError("the chart is not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "?") at line \(parser.lineNumber)")
            }
            return bars
        }
    }

    struct CLIError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    /// `LOCALSTORE_BENCH_SAMPLES=DIR` writes every timed call of the reported round, in nanoseconds.
    @Test func theSamplesOfTheReportedRoundCanBeSaved() throws {
        let dir = try Scratch()
        let samples = dir.path("samples")
        try FileManager.default.createDirectory(atPath: samples, withIntermediateDirectories: true)
        let r = try CLI.run(
            ["bench", "--records", "200", "--workloads", "read-by-id,count", "--backends", "memory", "--no-baselines", "--format", "json"],
            environment: ["LOCALSTORE_BENCH_SAMPLES": samples])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try JSONDecoder().decode(BenchReport.self, from: Data(r.stdout.utf8))
        for result in report.results {
            let text = try String(contentsOfFile: "\(samples)/memory-\(result.workload).txt", encoding: .utf8)
            let nanos = text.split(separator: "\n").compactMap { UInt64($0) }
            #expect(nanos.count == result.ops, "\(result.workload)")
            // The report's seconds are the sum of these samples.
            #expect(abs(Double(nanos.reduce(0, +)) / 1e9 - result.seconds) < 1e-9, "\(result.workload)")
        }
        // A directory that cannot be written is an error, not a silent loss.
        let bad = try CLI.run(
            ["bench", "--records", "200", "--workloads", "count", "--backends", "memory", "--no-baselines"],
            environment: ["LOCALSTORE_BENCH_SAMPLES": dir.path("missing/dir")])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("LOCALSTORE_BENCH_SAMPLES"), "\(bad.stderr)")
    }

    @Test func aTinyRunPrintsTheSummaryAndWritesTheChart() throws {
        let dir = try Scratch()
        let chart = dir.path("bench.svg")
        let r = try CLI.run(Self.arguments + ["--chart", chart])
        #expect(r.status == 0, "\(r.stderr)")
        // The summary comes last: a header row of every backend (baselines last), a row per workload.
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.lastIndex { $0.hasPrefix("operations per second (× the backend's C-API baseline)") }, "\(r.stdout)")
        let header = lines[start + 1].split(separator: " ").map(String.init)
        #expect(header == ["workload"] + Self.backends + Self.baselines, "\(lines[start + 1])")
        #expect(lines[start + 2].allSatisfy { $0 == "-" || $0 == " " })
        for (n, w) in Self.workloads.enumerated() {
            let row = lines[start + 3 + n]
            #expect(row.hasPrefix(w + " "), "\(row)")
            // sqlite and lmdb have a baseline: two ratios per row; memory and the baselines have none.
            #expect(row.components(separatedBy: "×)").count - 1 == 2, "\(row)")
        }
        #expect(lines[start + 3 + Self.workloads.count].isEmpty)

        let bars = try Bars.parse(try Data(contentsOf: URL(fileURLWithPath: chart)))
        #expect(bars.root == "svg")
        let expected = (Self.backends + Self.baselines).flatMap { b in Self.workloads.map { "\(b)|\($0)" } }
        #expect(bars.pairs.sorted() == expected.sorted())
    }

    /// `delta-token` and `open` leave the store as they found it, so they are repeated like the reads and
    /// their fastest round is reported: one round's operations, not three rounds'.
    @Test func deltaTokenAndOpenReportTheirFastestRound() throws {
        let r = try CLI.run([
            "bench", "--records", "200", "--workloads", "delta-token,open,local-write", "--backends", "sqlite", "--no-baselines",
            "--format", "json",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try JSONDecoder().decode(BenchReport.self, from: Data(r.stdout.utf8))
        let rounds = report.environment["rounds"] ?? ""
        #expect(rounds.contains("delta-token") && rounds.contains("open") && !rounds.contains("local-write"), "\(rounds)")
        let ops = Dictionary(report.results.map { ($0.workload, $0.ops) }, uniquingKeysWith: { a, _ in a })
        #expect(ops["delta-token"] == 1000, "\(ops)")
        #expect(ops["open"] == 20, "\(ops)")
        #expect(ops["local-write"] == 20, "\(ops)")
    }

    /// The sync workloads run on every backend and C-API baseline from a queue of `--queue` operations,
    /// each call's result checked by the session (a wrong outcome, a head pushed out of order, a page's
    /// skipped/deleted/upserted counts or a purge's rows that differ from the model fail the run).
    @Test func syncWorkloadsRunOnEveryBackendAndBaseline() throws {
        let workloads = ["enqueue", "push-cycle", "pull-page", "initial-pull", "purge"]
        let r = try CLI.run([
            "bench", "--records", "300", "--queue", "40", "--workloads", workloads.joined(separator: ","),
            "--backends", "memory,sqlite,sqlcipher,lmdb", "--format", "json",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try JSONDecoder().decode(BenchReport.self, from: Data(r.stdout.utf8))
        #expect(report.environment["queue"]?.hasPrefix("40 ") == true)
        for backend in ["memory", "sqlite", "sqlcipher", "lmdb", "sqlite-c", "sqlcipher-c", "lmdb-c"] {
            let ops = Dictionary(report.results.filter { $0.backend == backend }.map { ($0.workload, $0.ops) }, uniquingKeysWith: { a, _ in a })
            // 30 enqueues (a third each of inserts, updates, deletes), half the queue pushed, 300 / 50 pages,
            // 300 / 100 initial pages, ten priorities purged.
            #expect(ops == ["enqueue": 30, "push-cycle": 20, "pull-page": 6, "initial-pull": 3, "purge": 10], "\(backend): \(ops)")
        }
        let sqlcipher = report.results.first { $0.backend == "sqlcipher" && $0.workload == "purge" }
        #expect(sqlcipher?.ratioToBaseline != nil)  // held to sqlcipher-c
        let bad = try CLI.run(["bench", "--records", "300", "--queue", "1", "--workloads", "enqueue", "--backends", "memory"])
        #expect(bad.status != 0 && bad.stderr.contains("--queue"), "\(bad.stderr)")
    }

    /// Each backend runs in a child process of its own, and the children take turns workload by workload:
    /// every backend runs a workload before any runs the next one, so a backend and its baseline are
    /// measured close together in time.
    @Test func childProcessesTakeTurnsWorkloadByWorkload() throws {
        let dir = try Scratch()
        let trace = dir.path("trace.txt")
        let r = try CLI.run(
            ["bench", "--records", "200", "--workloads", "read-by-id,count,delta-token", "--backends", "memory,lmdb", "--format", "json"],
            environment: ["LOCALSTORE_BENCH_TRACE": trace])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").map(String.init)
        // The baselines first, then the backends, per workload.
        var expected: [String] = []
        for w in ["read-by-id", "count", "delta-token"] {
            for b in ["sqlite-c", "sqlcipher-c", "lmdb-c", "memory", "lmdb"] { expected.append("\(b) \(w)") }
        }
        #expect(lines == expected)
    }

    @Test func aSavedReportRendersAsSummaryMarkdownGrowthAndChart() throws {
        let dir = try Scratch()
        let r = try CLI.run(Self.arguments + ["--format", "json"])
        #expect(r.status == 0, "\(r.stderr)")
        let path = dir.path("bench.json")
        try Data(r.stdout.utf8).write(to: URL(fileURLWithPath: path))
        let report = try JSONDecoder().decode(BenchReport.self, from: Data(r.stdout.utf8))
        #expect(report.results.count == (Self.backends.count + Self.baselines.count) * Self.workloads.count)
        // Repeatable workloads run three rounds; each result is one round (the fastest), not their sum.
        #expect(report.environment["rounds"]?.contains("fastest of 3 rounds") == true, "\(report.environment)")
        for result in report.results {
            #expect(result.ops == (result.workload == "count" ? 50 : 200), "\(result.backend) \(result.workload): \(result.ops) ops")
        }

        // The summary cells are the report's rates and ratios.
        let table = try CLI.run(["bench", "--report", path])
        #expect(table.status == 0, "\(table.stderr)")
        let summaryRows = table.stdout.components(separatedBy: "operations per second (× the backend's C-API baseline)\n").last ?? ""
        for result in report.results {
            var cell = BenchSummary.rate(result.opsPerSecond)
            if let ratio = result.ratioToBaseline { cell += String(format: " (%.2f×)", ratio) }
            let row = summaryRows.split(separator: "\n").first { $0.hasPrefix(result.workload + " ") }
            #expect(row?.contains(cell) == true, "\(result.backend) \(result.workload): '\(cell)' not in \(row ?? "nil")")
        }

        let markdown = try CLI.run(["bench", "--report", path, "--format", "markdown"])
        #expect(markdown.status == 0, "\(markdown.stderr)")
        let md = markdown.stdout.split(separator: "\n").map(String.init)
        #expect(md.first == "| workload | " + (Self.backends + Self.baselines).joined(separator: " | ") + " |")
        #expect(md.count == 2 + Self.workloads.count)

        // Against itself every cost grows by 1.00×.
        let growth = try CLI.run(["bench", "--report", path, "--growth", path])
        #expect(growth.status == 0, "\(growth.stderr)")
        let rows = growth.stdout.split(separator: "\n").dropFirst(2)
        #expect(rows.count == Self.workloads.count)
        #expect(rows.allSatisfy { $0.components(separatedBy: "1.00×").count - 1 == Self.backends.count + Self.baselines.count }, "\(growth.stdout)")

        let chart = dir.path("again.svg")
        let c = try CLI.run(["bench", "--report", path, "--format", "csv", "--chart", chart])
        #expect(c.status == 0, "\(c.stderr)")
        #expect(try Bars.parse(try Data(contentsOf: URL(fileURLWithPath: chart))).pairs.count == report.results.count)

        let missing = try CLI.run(["bench", "--report", dir.path("nope.json")])
        #expect(missing.status == 66, "\(missing.stderr)")
        let notReport = try CLI.run(["bench", "--report", chart])
        #expect(notReport.status == 65, "\(notReport.stderr)")
        let noReport = try CLI.run(["bench", "--growth", path])
        #expect(noReport.status == 64, "\(noReport.stderr)")
    }
}
