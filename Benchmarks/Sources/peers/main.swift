import Foundation
import LocalStoreBench
import LocalStorePeers

// `swift run -c release peers [--records N] [--backends a,b] [--format table|json|csv] [--queue N]`: the same
// report as `localstore bench`, with GRDB among the subjects; `--queue` is the number of pending operations the
// sync workloads start from (default 10,000).
// `peers --only WORKLOAD [--units N]`: that workload alone on each backend (a prepared store, N units), with
// the wall-clock and CPU time (this thread) per unit: CPU time is what to compare on a busy machine.
var records = 100_000
var names = Subjects.all.map(\.name)
var format = "table"
var only: Workload?
var units = 200
var queue = BenchRunner.defaultQueue
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--records": records = arguments.next().flatMap { Int($0) } ?? records
    case "--backends": names = arguments.next().map { $0.split(separator: ",").map(String.init) } ?? names
    case "--format": format = arguments.next() ?? format
    case "--only": only = arguments.next().flatMap(Workload.init(rawValue:))
    case "--units": units = arguments.next().flatMap { Int($0) } ?? units
    case "--queue": queue = arguments.next().flatMap { Int($0) } ?? queue
    default:
        FileHandle.standardError.write(
            Data("usage: peers [--records N] [--backends a,b,…] [--format table|json|csv] [--queue N] [--only WORKLOAD [--units N]]\n".utf8))
        exit(2)
    }
}

/// Seconds of CPU time used by this thread.
func threadCPUSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

if let workload = only {
    print("\(workload.rawValue), \(records) records, \(units) units\(workload.isSync ? ", queue \(queue)" : ""): per unit, wall µs and CPU µs")
    do {
        for backend in Subjects.all where names.contains(backend.name) {
            let session = try BenchSession(backend: backend, records: records, queue: queue)
            guard session.supports(workload) else { continue }
            try session.prepare(for: workload)
            var wall = 0.0
            var cpu = 0.0
            for _ in 0..<units {
                if session.needsRefill(workload) { try session.refill(workload) }
                let w0 = DispatchTime.now().uptimeNanoseconds
                let c0 = threadCPUSeconds()
                try session.step(workload)
                cpu += threadCPUSeconds() - c0
                wall += Double(DispatchTime.now().uptimeNanoseconds - w0) / 1e9
            }
            try session.close()
            session.removeFiles()
            print(String(format: "%@ wall %10.1f   cpu %10.1f", backend.name.padding(toLength: 9, withPad: " ", startingAt: 0), wall / Double(units) * 1e6, cpu / Double(units) * 1e6))
        }
    } catch {
        FileHandle.standardError.write(Data("peers: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
let chosen = Subjects.all.filter { names.contains($0.name) }
let ordered = chosen.filter { Subjects.baselineNames.contains($0.name) } + chosen.filter { !Subjects.baselineNames.contains($0.name) }
let runner = BenchRunner(records: records, seed: 42, progress: Progress(), queue: queue)
var report = BenchReport(records: records, environment: Subjects.environment, results: [], footprints: [])
do {
    for backend in ordered {
        let (results, footprint) = try runner.run(backend)
        report.results += results
        report.footprints.append(footprint)
    }
    report.computeRatios(baselines: Dictionary(uniqueKeysWithValues: ordered.compactMap { b in b.baseline.map { (b.name, $0) } }))
    switch format {
    case "json": print(try report.json())
    case "csv": print(report.csv(), terminator: "")
    default: print(report.table(), terminator: "")
    }
} catch {
    FileHandle.standardError.write(Data("peers: \(error)\n".utf8))
    exit(1)
}
