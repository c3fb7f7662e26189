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

    @Option(help: "Pending operations the sync workloads (enqueue, push-cycle, pull-page, initial-pull, purge) start from.")
    var queue: Int = BenchRunner.defaultQueue

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

    @Option(help: "Run each backend in this many child processes, in turns (every backend once, then again), and report per workload the run with the median throughput (odd numbers give a true median). The children of one run take turns workload by workload.")
    var processes: Int = 1

    /// Child mode: run the one backend of `--backends` one workload at a time, as the parent asks (a
    /// workload name per line on stdin; a JSON line per answer on stdout). Not for people.
    @Flag(help: .hidden)
    var serve = false

    func validate() throws {
        guard records >= 1 else { throw ValidationError("--records must be at least 1") }
        guard queue >= 2 else { throw ValidationError("--queue must be at least 2") }
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
        if serve {
            try reportingFailures(serveWorkloads)
            return
        }
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
            records: records, seed: seed, progress: Progress(), workloads: try selectedWorkloads(), observers: observers, queue: queue)
        var report = BenchReport(records: records, environment: BackendRegistry.environment(), results: [], footprints: [])
        var baselines: [String: String] = [:]
        // Baselines first, so a backend's ratio is available as soon as it is measured.
        let ordered = names.filter { BackendRegistry.baselineNames.contains($0) } + names.filter { !BackendRegistry.baselineNames.contains($0) }
        for name in ordered {
            if let backend = BackendRegistry.backend(named: name), let base = backend.baseline { baselines[backend.name] = base }
        }
        var turns: [BenchReport] = []
        for _ in 0..<processes {
            var turn = report
            if inProcess {
                for name in ordered {
                    guard let backend = BackendRegistry.backend(named: name) else { continue }
                    let (results, footprint) = try runner.run(backend)
                    turn.results += results
                    turn.footprints.append(footprint)
                }
            } else {
                let (results, footprints) = try runInterleaved(ordered)
                turn.results += results
                turn.footprints += footprints
            }
            turns.append(turn)
        }
        report = BenchReport.median(of: turns)
        report.computeRatios(baselines: baselines)
        if !inProcess {
            report.environment["processes"] =
                "each backend in a child process of its own, the children taking turns workload by workload"
                + (processes > 1 ? "; \(processes) such runs, per workload the one with the median ops/s" : "")
        }
        report.environment["durability"] = BackendRegistry.durability
        report.environment["queue"] = "\(queue) pending operations before the sync workloads"
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
    /// Runs every backend of `names` in a child process of its own (this executable, `bench --serve`),
    /// so that its peak memory is its own, and interleaves them: each workload runs on every backend,
    /// in `names` order, before the next workload starts. A backend and its baseline are then measured
    /// seconds apart instead of minutes, so a machine that changes speed over minutes (another tenant,
    /// frequency) moves both alike. Every child holds its store while the others run; only one works at
    /// a time.
    func runInterleaved(_ names: [String]) throws -> (results: [BenchResult], footprints: [BenchFootprint]) {
        var children: [BenchChild] = []
        defer { for child in children { child.stop() } }
        for name in names where BackendRegistry.backend(named: name) != nil {
            children.append(try BenchChild(backend: name, arguments: childArguments(name)))
        }
        var results: [BenchResult] = []
        // Every child lists the workloads it runs; a workload runs where it is listed, in turns.
        let lists = try children.map { try $0.workloads() }
        for workload in Workload.allCases {
            for (child, list) in zip(children, lists) where list.contains(workload) {
                if let result = try child.run(workload) { results.append(result) }
            }
        }
        var footprints: [BenchFootprint] = []
        for child in children { footprints.append(try child.finish()) }
        return (results, footprints)
    }

    private func childArguments(_ name: String) -> [String] {
        [
            "bench", "--serve", "--no-baselines", "--backends", name, "--records", String(records), "--seed", String(seed),
        ] + (workloads.map { ["--workloads", $0] } ?? []) + ["--observers", String(observers), "--queue", String(queue)]
    }

    /// Child mode (`--serve`): opens the one backend's session, prints the workloads it runs (one JSON
    /// line), then for each line read from stdin — a workload name — runs it and prints its result (a
    /// JSON line, `null` when it did not run); `finish` prints the footprint and ends.
    private func serveWorkloads() throws {
        guard requested.count == 1, let backend = BackendRegistry.backend(named: requested[0]) else {
            throw ValidationError("--serve runs exactly one backend")
        }
        let runner = BenchRunner(records: records, seed: seed, progress: Progress(), workloads: try selectedWorkloads(), observers: observers, queue: queue)
        let run = try BenchBackendRun(runner, backend: backend)
        defer { run.removeFiles() }
        let encoder = JSONEncoder()
        func reply<T: Encodable>(_ value: T) throws {
            var data = try encoder.encode(value)
            data.append(UInt8(ascii: "\n"))
            FileHandle.standardOutput.write(data)
        }
        try reply(run.workloads.map(\.rawValue))
        while let line = readLine() {
            if line == "finish" {
                try reply(try run.finish())
                return
            }
            guard let workload = Workload(rawValue: line) else { throw ValidationError("--serve: unknown workload '\(line)'") }
            try reply(try run.run(workload))
        }
        throw ValidationError("--serve: stdin ended before 'finish'")
    }
}

/// A child process running one backend (`bench --serve`), driven one workload at a time.
final class BenchChild {
    let backend: String
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()
    private var stopped = false

    init(backend: String, arguments: [String]) throws {
        self.backend = backend
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    /// The workloads the child runs, in order.
    func workloads() throws -> [Workload] {
        try decode([String].self, try line()).compactMap(Workload.init(rawValue:))
    }

    /// Runs `workload` in the child; its result, or `nil` when it did not run.
    func run(_ workload: Workload) throws -> BenchResult? {
        try send(workload.rawValue)
        return try decode(BenchResult?.self, try line())
    }

    /// Ends the child's run: its footprint.
    func finish() throws -> BenchFootprint {
        try send("finish")
        let footprint = try decode(BenchFootprint.self, try line())
        process.waitUntilExit()
        stopped = true
        guard process.terminationStatus == 0 else { throw failure("ended with status \(process.terminationStatus)") }
        return footprint
    }

    /// Ends the child if it still runs (after an error in the parent or another child).
    func stop() {
        guard !stopped else { return }
        stopped = true
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    private func send(_ text: String) throws {
        try input.fileHandleForWriting.write(contentsOf: Data((text + "\n").utf8))
    }

    /// The next line the child prints (without its newline).
    private func line() throws -> Data {
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[buffer.startIndex..<end]
                buffer = Data(buffer[(end + 1)...])
                return Data(line)
            }
            let more = output.fileHandleForReading.availableData
            if more.isEmpty {
                process.waitUntilExit()
                stopped = true
                throw failure("ended (status \(process.terminationStatus)) without an answer")
            }
            buffer.append(more)
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw failure("printed an answer that does not decode: \(error)")
        }
    }

    private func failure(_ what: String) -> LocalStoreError {
        LocalStoreError(.internal, "bench: the child process for '\(backend)' \(what)")
    }
}
