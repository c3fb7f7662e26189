import Foundation
import LocalStore
import LocalStoreBench
import LocalStoreBenchBaselines
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite

/// The backends and baselines this build of `localstore` knows.
enum BackendRegistry {
    static let backendNames = ["memory", "sqlite", "sqlcipher", "sqlcipher-passphrase", "lmdb", "lmdb-verified"]
    static let baselineNames = BenchBaselines.all.map(\.name)

    static func backend(named name: String) -> BenchBackend? {
        switch name {
        case "memory":
            return BenchBackend(name: "memory", baseline: nil, isPersistent: false) { _ in
                LocalStoreSubject(store: try InMemoryStore(), reopen: nil)
            }
        case "sqlite":
            return .persistent(name: "sqlite", baseline: "sqlite-c", file: "store.sqlite") { path in
                try SQLiteStore(path: path)
            }
        case "sqlcipher":
            // A raw 256-bit key: no key derivation, so the numbers are the cipher's cost alone.
            return .persistent(name: "sqlcipher", baseline: "sqlcipher-c", file: "store.db") { path in
                try SQLCipherStore(path: path, key: try .raw(benchKey))
            }
        case "sqlcipher-passphrase":
            // The same store opened with a passphrase (PBKDF2, default 256,000 iterations per connection):
            // only `open` differs, so only it (after loading the data) is measured.
            return .persistent(name: "sqlcipher-passphrase", baseline: nil, workloads: [.upsert, .open], file: "store.db") {
                try SQLCipherStore(path: $0, key: try .passphrase("benchmark passphrase"))
            }
        case "lmdb":
            return .persistent(name: "lmdb", baseline: "lmdb-c", file: "store.lmdb") { path in
                try LMDBStore(path: path)
            }
        case "lmdb-verified":
            // The same store opened with verifyPagesOnOpen (every page walked in a forked child first):
            // only `open` differs, so only it (after loading the data) is measured.
            return .persistent(name: "lmdb-verified", baseline: nil, workloads: [.upsert, .open], file: "store.lmdb") { path in
                try LMDBStore(path: path, options: LMDBStoreOptions(verifyPagesOnOpen: true))
            }
        default:
            return BenchBaselines.all.first { $0.name == name }
        }
    }

    /// The versions of the storage engines linked into this build, by report key: `sqlite`
    /// (`sqlite3_libversion()`), `lmdb` (`mdb_version`). A backend on another engine adds its entry here
    /// (SQLCipher: `sqlcipher`).
    static let engineVersions: [(key: String, version: @Sendable () -> String)] = [
        ("sqlite", { SQLiteCSubject.libraryVersion }),
        ("lmdb", { LMDBCSubject.libraryVersion }),
        ("sqlcipher", { SQLCipherStore.cipherVersion ?? "not installed" }),
    ]

    /// How durable the SQL stores' commits are in the benchmark (the defaults, see docs/sqlite.md).
    static let durability =
        "sqlite, sqlcipher, sqlite-c, sqlcipher-c: WAL, synchronous=NORMAL (no fsync per commit; the WAL is fsynced when it is "
        + "checkpointed, every ~1000 pages), cache_size 32 MiB, temp_store=MEMORY"

    /// The fixed raw key of the benchmark's SQLCipher stores (temporary files, removed afterwards).
    static let benchKey = BenchBaselines.sqlcipherKey

    static func environment() -> [String: String] {
        var env: [String: String] = [
            "cpus": String(ProcessInfo.processInfo.activeProcessorCount),
            "swift": swiftVersion,
        ]
        for engine in engineVersions { env[engine.key] = engine.version() }
        if let model = cpuModel { env["cpu"] = model }
        #if DEBUG
        env["build"] = "debug"
        #else
        env["build"] = "release"
        #endif
        return env
    }

    /// The processor's model name (Linux `/proc/cpuinfo`), when known.
    static var cpuModel: String? {
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in info.split(separator: "\n") where line.hasPrefix("model name") {
            if let colon = line.firstIndex(of: ":") {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    static var swiftVersion: String {
        #if compiler(>=6.3.2)
        return "6.3.2+"
        #elseif compiler(>=6.3.1)
        return "6.3.1"
        #elseif swift(>=6.3)
        return "6.3"
        #elseif swift(>=6.2)
        return "6.2"
        #elseif swift(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }
}
