import Foundation
import LocalStoreBench
import LocalStoreLMDB
import RocksDBStore

// The example backend against LMDB, in one run: the list query on an indexed column (`query-indexed`:
// priority == p, sorted by updatedAt descending, top 50), a query no index answers (`query-scan`: text
// contains a word, every row tested), reads by id and upserts, on N records (default 100,000).
// Both commit with a flush to disk. Usage: rocksdb-example-bench [records]
let records = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 100_000
let workloads: [Workload] = [.queryIndexed, .queryScan, .readById, .upsert, .enqueue, .pushCycle]
let backends = [
    BenchBackend.persistent(name: "lmdb", baseline: nil, file: "store.lmdb") { try LMDBStore(path: $0) },
    BenchBackend.persistent(name: "rocksdb", baseline: nil, file: "rocksdb") { try RocksDBStore.open(directory: $0) },
]
let runner = BenchRunner(records: records, seed: 42, workloads: Set(workloads))
var rates: [String: [String: Double]] = [:]
do {
    for backend in backends {
        for result in try runner.run(backend).results { rates[backend.name, default: [:]][result.workload] = result.opsPerSecond }
    }
} catch {
    FileHandle.standardError.write(Data("rocksdb-example-bench: \(error)\n".utf8))
    exit(1)
}
print("\(records) records          lmdb ops/s  rocksdb ops/s  rocksdb ÷ lmdb")
for workload in workloads.map(\.rawValue) {
    let lmdb = rates["lmdb"]?[workload] ?? 0
    let rocksdb = rates["rocksdb"]?[workload] ?? 0
    print(
        workload.padding(toLength: 20, withPad: " ", startingAt: 0) + String(format: "%11.0f  %13.0f  %14.2f", lmdb, rocksdb, lmdb > 0 ? rocksdb / lmdb : 0))
}
