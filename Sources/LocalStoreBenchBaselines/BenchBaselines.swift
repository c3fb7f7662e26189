import Foundation
import LocalStoreBench

/// The C-API baselines: each runs the benchmark's workloads directly against one engine's C API, so a
/// backend's `ratioToBaseline` tells how close it gets to what its engine can do.
public enum BenchBaselines {
    /// `sqlite-c`: ``SQLiteCSubject`` on the system SQLite.
    public static let sqliteC = BenchBackend(name: "sqlite-c", baseline: nil, isPersistent: true) { directory in
        try SQLiteCSubject(directory: directory)
    }

    /// `sqlcipher-c`: ``SQLiteCSubject`` on SQLCipher, with the `sqlcipher` backend's raw key and settings.
    public static let sqlcipherC = BenchBackend(name: "sqlcipher-c", baseline: nil, isPersistent: true) { directory in
        try SQLiteCSubject(directory: directory, sqlcipherKey: sqlcipherKey)
    }

    /// `lmdb-c`: ``LMDBCSubject``.
    public static let lmdbC = BenchBackend(name: "lmdb-c", baseline: nil, isPersistent: true) { directory in
        try LMDBCSubject(directory: directory)
    }

    /// Every baseline, in the order they run.
    public static let all = [sqliteC, sqlcipherC, lmdbC]

    /// The fixed raw 256-bit key of the benchmark's SQLCipher stores (`sqlcipher` and `sqlcipher-c`;
    /// temporary files, removed afterwards): no key derivation, so the numbers are the cipher's cost alone.
    public static let sqlcipherKey = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) }

    /// The versions of the engines the baselines link: `sqlite` (`sqlite3_libversion()`) and `lmdb` (`mdb_version`).
    public static var engineVersions: [String: String] {
        ["sqlite": SQLiteCSubject.libraryVersion, "lmdb": LMDBCSubject.libraryVersion]
    }
}
