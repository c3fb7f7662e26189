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

// 4. OData bounds: long flat chains (v3 and v4 forms), deep nesting, long arithmetic and long literals, parsed by every entry
// point on a 512 KiB thread (docs/semantics.md, "Parser bounds"): a result or invalidQuery, never a crash.
// Nesting within the limit runs on an 8 MiB thread (it recurses once per level).
var boundsRandom = SplitMix(seed: seed ^ 0x0DA7A)
var boundsCases = 0
var boundsRefused = 0
for round in 0..<40 {
    let shape = ODataStress.shapes[round % ODataStress.shapes.count]
    let limit =
        ["or-chain": 1_000_000, "and-chain": 1_000_000, "nesting": 100_000, "not-nesting": 100_000, "arithmetic": 100_000, "in-list": 1_000_000,
         "cast-chain": 500_000][shape] ?? 4_000_000
    var n = 1 + boundsRandom.below(round < 6 ? limit : max(1, limit >> (round % 12)))
    // Parentheses within the limit recurse once per level (up to ~2 MiB of stack in a debug build,
    // docs/semantics.md): those get an 8 MiB thread; beyond the limit the scan refuses them on 512 KiB.
    let nested = shape == "nesting" || shape == "not-nesting"
    let deep = nested && round % 2 == 0
    if nested && !deep { n = max(n, 1_000) }
    let size = n
    let lines = OnThread.run(stackKiB: deep ? 8192 : 512) { () -> [String] in
        var out: [String] = []
        ODataStress.exercise(shape, size) { out.append($0) }
        return out
    } ?? ["filter no result"]
    for line in lines where line.hasPrefix("filter ") || line.hasPrefix("query ") || line.hasPrefix("pull ") {
        boundsCases += 1
        if line.contains("invalidQuery") { boundsRefused += 1 } else if !line.hasSuffix(" ok") {
            failures.append("odata bounds \(shape) \(n): \(line.prefix(200))")
        }
    }
}
say("FUZZ odata bounds: \(boundsCases) parses of long chains, deep nesting, long arithmetic and literals (512 KiB threads; nesting within the limit on 8 MiB), \(boundsRefused) refused with invalidQuery [\(elapsed())]")
total += boundsCases

say("FUZZ TOTAL: \(total) executions (\(queryStats.queries) queries evaluated on \(backends.count) backends + the reference, "
    + "\(recordFuzzer.stats.executions + recordFuzzer.stats.catalogExecutions) LMDB decoder inputs, \(odataStats.executions) OData parses), "
    + "\(failures.count) failures, seed \(seed), \(elapsed())")
for f in failures { say("FAILURE \(f)") }
try? FileManager.default.removeItem(at: directory)  // exit() skips the defer above
exit(failures.isEmpty ? 0 : 1)
