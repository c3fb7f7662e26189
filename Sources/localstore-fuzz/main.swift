// `make fuzz`: seeded random fuzzing of query construction and evaluation on every backend against the
// conformance suite's reference evaluator, of LMDB's record and catalog decoders, and of the OData
// renderer/parser. Prints totals; exits 1 on any disagreement or crash-free failure (a crash is a crash).
//
//   localstore-fuzz [--queries N] [--records N] [--catalog N] [--odata N] [--seed S] [--rows R]
import Foundation
import LocalStore
import LocalStoreReliability

func parseOptions() -> [String: String]? {
    var options: [String: String] = [:]
    var args = Array(CommandLine.arguments.dropFirst())
    while args.count >= 2, args[0].hasPrefix("--") {
        options[String(args[0].dropFirst(2))] = args[1]
        args.removeFirst(2)
    }
    return args.isEmpty ? options : nil
}
let parsedOptions = parseOptions()
guard let options = parsedOptions else {
    FileHandle.standardError.write(Data("usage: localstore-fuzz [--queries N] [--records N] [--catalog N] [--odata N] [--seed S] [--rows R]\n".utf8))
    exit(2)
}
func option(_ name: String, _ fallback: Int) -> Int { options[name].flatMap { Int($0.replacingOccurrences(of: "_", with: "")) } ?? fallback }
let seed = UInt64(option("seed", 20_261_122))
let queryCount = option("queries", 300_000)
let recordCount = option("records", 1_000_000)
let catalogCount = option("catalog", 5_000)
let odataCount = option("odata", 100_000)
let rowsPerSet = option("rows", 30)

func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

let started = Date()
func elapsed() -> String { String(format: "%.0f s", Date().timeIntervalSince(started)) }
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("localstore-fuzz-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }
var failures: [String] = []
var total = 0
say("localstore-fuzz: seed \(seed), \(queryCount) queries, \(recordCount) damaged records, \(catalogCount) damaged catalogs, \(odataCount) OData queries")

// 1. Queries on every backend against the reference evaluator.
var backends: [(name: String, store: any LocalStore)] = [("memory", try InMemoryStore())]
for backend in ReliabilityBackend.available {
    backends.append((backend.rawValue, try backend.open(path: backend.storePath(in: directory))))
}
let queryFuzzer = try QueryFuzzer(backends: backends, seed: seed)
var lastReport = Date()
let queryStats = try queryFuzzer.run(queries: queryCount, rowsPerSet: rowsPerSet) { stats in
    if Date().timeIntervalSince(lastReport) > 15 {
        say("  queries: \(stats.queries) / \(queryCount) (\(elapsed()))")
        lastReport = Date()
    }
}
for (_, store) in backends { try store.close() }
say("FUZZ queries on \(backends.map(\.name).joined(separator: ", ")): \(queryStats) [\(elapsed())]")
failures += queryStats.disagreements
total += queryStats.queries

// 2. LMDB records and catalog entries.
let recordFuzzer = try RecordFuzzer(directory: directory.path, seed: seed)
var done = 0
while done < recordCount {
    let n = min(5000, recordCount - done)
    try recordFuzzer.recordBatch(n)
    done += n
    if Date().timeIntervalSince(lastReport) > 15 {
        say("  records: \(done) / \(recordCount) (\(elapsed()))")
        lastReport = Date()
    }
    if recordFuzzer.stats.disagreements.count >= 20 { break }
}
try recordFuzzer.catalogBatch(catalogCount)
say("FUZZ lmdb decoder: \(recordFuzzer.stats) [\(elapsed())]")
failures += recordFuzzer.stats.disagreements
total += recordFuzzer.stats.executions + recordFuzzer.stats.catalogExecutions

// 3. OData construction: render → parse → render, damaged strings.
var odataFuzzer = ODataFuzzer(seed: seed)
let odataStats = odataFuzzer.run(odataCount)
say("FUZZ odata: \(odataStats) [\(elapsed())]")
failures += odataStats.disagreements
total += odataStats.executions

say("FUZZ TOTAL: \(total) executions (\(queryStats.queries) queries evaluated on \(backends.count) backends + the reference, "
    + "\(recordFuzzer.stats.executions + recordFuzzer.stats.catalogExecutions) LMDB decoder inputs, \(odataStats.executions) OData parses), "
    + "\(failures.count) failures, seed \(seed), \(elapsed())")
for f in failures { say("FAILURE \(f)") }
try? FileManager.default.removeItem(at: directory)  // exit() skips the defer above
exit(failures.isEmpty ? 0 : 1)
