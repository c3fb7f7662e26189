import Foundation
import LocalStore
import LocalStoreBench
import LocalStoreBenchBaselines
import LocalStoreLMDB
import LocalStoreSQLite

/// Every subject the benchmark suite runs: the backends, the C-API baselines, and GRDB.
public enum Subjects {
    /// `grdb`: ``GRDBSubject``, compared with the `sqlite-c` baseline like the `sqlite` backend.
    public static let grdb = BenchBackend(name: "grdb", baseline: "sqlite-c", isPersistent: true) { directory in
        try GRDBSubject(directory: directory)
    }

    /// The LocalStore backends, as `localstore bench` registers them.
    public static let backends: [BenchBackend] = [
        BenchBackend(name: "memory", baseline: nil, isPersistent: false) { _ in
            LocalStoreSubject(store: try InMemoryStore(), reopen: nil)
        },
        .persistent(name: "sqlite", baseline: "sqlite-c", file: "store.sqlite") { path in
            try SQLiteStore(path: path)
        },
        .persistent(name: "lmdb", baseline: "lmdb-c", file: "store.lmdb") { path in
            try LMDBStore(path: path)
        },
    ]

    /// The names of the C-API baselines.
    public static let baselineNames = Set(BenchBaselines.all.map(\.name))

    /// Backends, then baselines, then peers.
    public static let all: [BenchBackend] = backends + BenchBaselines.all + [grdb]

    /// The versions for the report's environment line.
    public static var environment: [String: String] {
        var env = BenchBaselines.engineVersions
        env["grdb-sqlite"] = GRDBSubject.libraryVersion
        env["cpus"] = String(ProcessInfo.processInfo.activeProcessorCount)
        return env
    }
}
