import Foundation
import LocalStoreBench

/// The C-API baselines: each runs the benchmark's workloads directly against one engine's C API, so a
/// backend's `ratioToBaseline` tells how close it gets to what its engine can do.
public enum BenchBaselines {
    /// `sqlite-c`: ``SQLiteCSubject``.
    public static let sqliteC = BenchBackend(name: "sqlite-c", baseline: nil, isPersistent: true) { directory in
        try SQLiteCSubject(directory: directory)
    }

    /// `lmdb-c`: ``LMDBCSubject``.
    public static let lmdbC = BenchBackend(name: "lmdb-c", baseline: nil, isPersistent: true) { directory in
        try LMDBCSubject(directory: directory)
    }

    /// Every baseline, in the order they run.
    public static let all = [sqliteC, lmdbC]

    /// The versions of the engines the baselines link: `sqlite` (`sqlite3_libversion()`) and `lmdb` (`mdb_version`).
    public static var engineVersions: [String: String] {
        ["sqlite": SQLiteCSubject.libraryVersion, "lmdb": LMDBCSubject.libraryVersion]
    }
}
