import Foundation
import LocalStoreBench
import LocalStoreLMDB
import RocksDBStore

// The example backend against LMDB, in one run: the list query on an indexed column (`query-indexed`:
// priority == p, sorted by updatedAt descending, top 50), a query no index answers (`query-scan`: text
// contains a word, every row tested), reads by id, upserts and the sync queue, on N records (default
// 100,000). Both commit with a flush to disk. The two backends run in turn, R rounds (default 3), and
// each rate is the median of its rounds: on a shared machine a backend's rate swings by up to 2× from
// one minute to the next, and alternating them keeps both under the same load.
// Usage: rocksdb-example-bench [records] [rounds]
let arguments = CommandLine.arguments.dropFirst()
let records = arguments.first.flatMap(Int.init) ?? 100_000
let rounds = max(1, arguments.dropFirst().first.flatMap(Int.init) ?? 3)
let workloads = Workload.allCases
let backends = [
    BenchBackend.persistent(name: "lmdb", baseline: nil, file: "store.lmdb") { try LMDBStore(path: $0) },
    BenchBackend.persistent(name: "rocksdb", baseline: nil, file: "rocksdb") { try RocksDBStore.open(directory: $0) },
]
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
print("\(records) records, median of \(rounds)  lmdb ops/s  rocksdb ops/s  rocksdb ÷ lmdb")
for workload in workloads.map(\.rawValue) {
    let lmdb = median(rates["lmdb"]?[workload] ?? [])
    let rocksdb = median(rates["rocksdb"]?[workload] ?? [])
    print(
        workload.padding(toLength: 28, withPad: " ", startingAt: 0) + String(format: "%11.0f  %13.0f  %14.2f", lmdb, rocksdb, lmdb > 0 ? rocksdb / lmdb : 0))
}
