import Foundation
import LocalStoreBench
import LMDBKVExample
import LocalStoreKV
import LocalStoreLMDB
import RocksDBStore

// The example backend against LMDB, in one run: the list query on an indexed column (`query-indexed`:
// priority == p, sorted by updatedAt descending, top 50), a query no index answers (`query-scan`: text
// contains a word, every row tested), reads by id, upserts and the sync queue, on N records (default
// 100,000). Both commit with a flush to disk. The backends run in turn, R rounds (default 3), and each
// rate is the median of its rounds: on a shared machine a backend's rate swings by up to 2× from one
// minute to the next, and alternating them keeps all under the same load. `kv-lmdb` (not run unless
// named) is the toolkit's `KVStore` over LMDB (LMDBKVEngine.swift): what the toolkit costs against
// `LMDBStore` on the same engine; `kv-lmdb-grow` the same with a small map that grows (KVStore's replays) and long keys (KeyLengthLimitedEngine).
// Usage: rocksdb-example-bench [records] [rounds] [backend ...] [workload ...]   (backends: lmdb rocksdb
// kv-lmdb kv-lmdb-grow, default lmdb rocksdb, each ratio is to the first named; workloads: the `localstore bench` names,
// default all)
let arguments = Array(CommandLine.arguments.dropFirst())
let records = arguments.first.flatMap(Int.init) ?? 100_000
let rounds = max(1, arguments.dropFirst().first.flatMap(Int.init) ?? 3)
let available = [
    BenchBackend.persistent(name: "lmdb", baseline: nil, file: "store.lmdb") { try LMDBStore(path: $0) },
    BenchBackend.persistent(name: "rocksdb", baseline: nil, file: "rocksdb") { try RocksDBStore.open(directory: $0) },
    BenchBackend.persistent(name: "kv-lmdb", baseline: nil, file: "kv-lmdb") { try KVStore(engine: LMDBKVEngine(directory: $0)) },
    // The same with a map of 64 KiB that grows (doubling) whenever a transaction finds it full — the toolkit's
    // replay of the transactions LMDB began again, checked by every workload's result checks — and keys of
    // 511 bytes and more stored truncated (KeyLengthLimitedEngine): a complete backend, at a cost.
    BenchBackend.persistent(name: "kv-lmdb-grow", baseline: nil, file: "kv-lmdb-grow") { path in
        let engine = try LMDBKVEngine(directory: path, mapSize: 64 << 10)
        growingEngines.withLock { $0.append(engine) }
        return try KVStore(engine: KeyLengthLimitedEngine(engine, maximumKeyLength: 511))
    },
]
/// The growing engines opened, for the count of their growths.
let growingEngines = LockedEngines()
final class LockedEngines: @unchecked Sendable {  // `lock` guards `engines`
    private let lock = NSLock()
    private var engines: [LMDBKVEngine] = []
    func withLock<R>(_ body: (inout [LMDBKVEngine]) -> R) -> R { lock.withLock { body(&engines) } }
}
let names = Array(arguments.dropFirst(2))
let chosenWorkloads = names.compactMap(Workload.init(rawValue:))
let named = names.filter { Workload(rawValue: $0) == nil }
let backends = named.isEmpty ? Array(available.prefix(2)) : named.compactMap { name in available.first { $0.name == name } }
guard !backends.isEmpty, named.isEmpty || backends.count == named.count else {
    FileHandle.standardError.write(Data("rocksdb-example-bench: unknown backend or workload among \(names); backends: lmdb rocksdb kv-lmdb kv-lmdb-grow\n".utf8))
    exit(64)
}
let workloads = chosenWorkloads.isEmpty ? Workload.allCases : Workload.allCases.filter(chosenWorkloads.contains)
let runner = BenchRunner(records: records, seed: 42, workloads: Set(workloads))
var rates: [String: [String: [Double]]] = [:]
do {
    for _ in 0..<rounds {
        for backend in backends {
            for result in try runner.run(backend).results { rates[backend.name, default: [:]][result.workload, default: []].append(result.opsPerSecond) }
        }
    }
} catch {
    FileHandle.standardError.write(Data("rocksdb-example-bench: \(error)\n".utf8))
    exit(1)
}
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
let base = backends[0].name
let others = backends.dropFirst().map(\.name)
func column(_ text: String) -> String { String(repeating: " ", count: max(0, 16 - text.count)) + text }
print(
    "\(records) records, median of \(rounds)".padding(toLength: 28, withPad: " ", startingAt: 0)
        + backends.map { column("\($0.name) ops/s") }.joined() + others.map { column("\($0) ÷ \(base)") }.joined())
for workload in workloads.map(\.rawValue) {
    let values = backends.map { median(rates[$0.name]?[workload] ?? []) }
    print(
        workload.padding(toLength: 28, withPad: " ", startingAt: 0) + values.map { column(String(format: "%.0f", $0)) }.joined()
            + values.dropFirst().map { column(values[0] > 0 ? String(format: "%.2f", $0 / values[0]) : "-") }.joined())
}
let (growths, atCommits) = growingEngines.withLock { ($0.reduce(0) { $0 + $1.growths }, $0.reduce(0) { $0 + $1.growthsAtCommit }) }
if growths > 0 {
    print("kv-lmdb-grow: the map grew \(growths) times (\(atCommits) at a commit), each a transaction begun again and replayed by KVStore")
}
