import ArgumentParser
import Foundation
import LocalStore
import LocalStoreBench

@main
struct LocalStoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "localstore",
        abstract: "Work with LocalStore stores and compare their backends.",
        discussion: """
            Stores are named by URL: memory:, sqlite:PATH, sqlcipher:PATH, lmdb:PATH. Keys come from --key-file \
            or LOCALSTORE_KEY (hex), never from the command line. Errors are one line on stderr.

            Exit status:
            \(ExitStatus.helpText)
            """,
        version: LocalStoreVersion.string,
        subcommands: [Bench.self, Inspect.self, QueryCommand.self, Copy.self, Rekey.self, Verify.self])

    /// Takes the key variables out of the environment and disables core dumps, then runs the command.
    static func main() {
        _ = KeyEnvironment.values
        ProcessHygiene.disableCoreDumps()
        main(nil)
    }
}

struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sync-client workloads against every backend on temporary stores.",
        discussion: """
            Workloads: \(Workload.allCases.map(\.rawValue).joined(separator: ", ")).
            Baselines (\(BackendRegistry.baselineNames.joined(separator: ", "))) run the same work directly \
            against the engines' C APIs; ratios compare each backend to its engine's baseline.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case table, json, csv, markdown
    }

    @Option(help: "Comma-separated backends: \(BackendRegistry.backendNames.joined(separator: ",")).")
    var backends: String = BackendRegistry.backendNames.joined(separator: ",")

    @Option(help: "Records in the table.")
    var records: Int = 100_000

    @Option(help: "Comma-separated workloads to run (default: all); the table is loaded untimed when upsert is not among them.")
    var workloads: String?

    @Option(help: "Seed of the data and of the random choices.")
    var seed: UInt64 = 42

    @Option(help: "Output format: table (results, then the backend × workload summary), json, csv or markdown (the summary).")
    var format: Format = .table

    @Option(help: "Also write the chart (SVG: a bar per backend and workload, log scale) to this file.")
    var chart: String?

    @Option(help: "Render this saved report (--format json) instead of running: its table, summary, chart.")
    var report: String?

    @Option(help: "With --report: print how the cost per operation grew from this smaller run's report (Markdown).")
    var growth: String?

    @Flag(help: "Skip the C-API baselines.")
    var noBaselines = false

    @Option(help: "Query observers of the table running during local-write (0: none; see docs/observation.md).")
    var observers: Int = 0

    @Flag(help: "Run every backend in this process instead of one child process per backend (peak memory then includes what earlier backends left behind).")
    var inProcess = false

    @Option(help: "Run each backend in this many child processes, in turns (every backend once, then again), and report per workload the run with the median throughput (odd numbers give a true median).")
    var processes: Int = 1

    func validate() throws {
        guard records >= 1 else { throw ValidationError("--records must be at least 1") }
        guard observers >= 0 else { throw ValidationError("--observers must not be negative") }
        guard (1...15).contains(processes) else { throw ValidationError("--processes must be between 1 and 15") }
        if inProcess, processes > 1 { throw ValidationError("--processes needs child processes: leave out --in-process") }
        let known = Set(BackendRegistry.backendNames + BackendRegistry.baselineNames)
        for name in requested where !known.contains(name) {
            throw ValidationError("unknown backend '\(name)'; known: \(known.sorted().joined(separator: ", "))")
        }
        _ = try selectedWorkloads()
        if growth != nil, report == nil { throw ValidationError("--growth needs --report") }
    }

    /// The workloads of `--workloads`; `nil` for all.
    func selectedWorkloads() throws -> Set<Workload>? {
        guard let workloads else { return nil }
        var set = Set<Workload>()
        for name in workloads.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let w = Workload(rawValue: name) else {
                throw ValidationError("unknown workload '\(name)'; known: \(Workload.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            set.insert(w)
        }
        guard !set.isEmpty else { throw ValidationError("--workloads names no workload") }
        return set
    }

    var requested: [String] {
        backends.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    func run() throws {
        try reportingFailures(runBench)
    }

    private func runBench() throws {
        if let report {
            try output(try BenchOutput.load(report))
            return
        }
        var names = requested
        if !noBaselines {
            for b in BackendRegistry.baselineNames where !names.contains(b) { names.append(b) }
        }
        let runner = BenchRunner(
            records: records, seed: seed, progress: Progress(), workloads: try selectedWorkloads(), observers: observers)
        var report = BenchReport(records: records, environment: BackendRegistry.environment(), results: [], footprints: [])
        var baselines: [String: String] = [:]
        // Baselines first, so a backend's ratio is available as soon as it is measured.
        let ordered = names.filter { BackendRegistry.baselineNames.contains($0) } + names.filter { !BackendRegistry.baselineNames.contains($0) }
        var turns: [BenchReport] = []
        for _ in 0..<processes {
            var turn = report
            for name in ordered {
                guard let backend = BackendRegistry.backend(named: name) else { continue }
                if inProcess {
                    let (results, footprint) = try runner.run(backend)
                    turn.results += results
                    turn.footprints.append(footprint)
                } else {
                    let child = try runChild(backend: name)
                    turn.results += child.results
                    turn.footprints += child.footprints
                }
                if let base = backend.baseline { baselines[backend.name] = base }
            }
            turns.append(turn)
        }
        report = BenchReport.median(of: turns)
        report.computeRatios(baselines: baselines)
        if processes > 1 {
            report.environment["processes"] =
                "each backend in \(processes) child processes, in turns; per workload the run with the median ops/s"
        }
        report.environment["durability"] = BackendRegistry.durability
        report.environment["rounds"] =
            "\(Workload.repeatable.map(\.rawValue).joined(separator: ", ")): the fastest of \(BenchRunner.rounds) rounds "
            + "(a round over \(Int(BenchRunner.repeatBelowSeconds)) s is not repeated); other workloads: one"
        try output(report)
    }

    /// Prints `report` in `--format` (or the growth table of `--growth`) and writes `--chart`.
    private func output(_ report: BenchReport) throws {
        if let growth {
            print(BenchSummary.growth(report, from: try BenchOutput.load(growth)), terminator: "")
        } else {
            switch format {
            case .table: print(report.table() + "\n" + BenchSummary(report).table(), terminator: "")
            case .json: print(try report.json())
            case .csv: print(report.csv(), terminator: "")
            case .markdown: print(BenchSummary(report).markdown(), terminator: "")
            }
        }
        if let chart { try BenchOutput.writeChart(report, to: chart) }
    }
}

extension Bench {
    /// Runs one backend in a child process (this executable, `bench --in-process`), so that its peak
    /// memory is its own; returns the child's report.
    func runChild(backend name: String) throws -> BenchReport {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = [
            "bench", "--in-process", "--no-baselines", "--backends", name, "--records", String(records), "--seed",
            String(seed), "--format", "json",
        ] + (workloads.map { ["--workloads", $0] } ?? []) + ["--observers", String(observers)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw LocalStoreError(.internal, "bench: the child process for '\(name)' failed (status \(process.terminationStatus))")
        }
        do {
            return try JSONDecoder().decode(BenchReport.self, from: data)
        } catch {
            throw LocalStoreError(.internal, "bench: the child process for '\(name)' printed no report: \(error)")
        }
    }
}
