// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "LocalStore",
    products: [
        .library(name: "LocalStore", targets: ["LocalStore"]),
        .library(name: "LocalStoreConformance", targets: ["LocalStoreConformance"]),
        .library(name: "LocalStoreKV", targets: ["LocalStoreKV"]),
        .library(name: "LocalStoreLMDB", targets: ["LocalStoreLMDB"]),
        .library(name: "LocalStoreSQLite", targets: ["LocalStoreSQLite"]),
        .library(name: "LocalStoreSQLCipher", targets: ["LocalStoreSQLCipher"]),
        .library(name: "LocalStoreBench", targets: ["LocalStoreBench"]),
        .library(name: "LocalStoreBenchBaselines", targets: ["LocalStoreBenchBaselines"]),
        .executable(name: "localstore", targets: ["localstore"]),
        .executable(name: "todo-sync", targets: ["todo-sync"]),
        .library(name: "LocalStoreOpener", targets: ["LocalStoreOpener"]),
        .library(name: "LocalStoreSync", targets: ["LocalStoreSync"]),
        .library(name: "LocalStoreSyncHTTP", targets: ["LocalStoreSyncHTTP"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // The loopback table service of the HTTP tests (LocalStoreLoopbackService: test targets only).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    ] + documentationDependencies,
    targets: [
        .target(
            name: "LocalStore",
            dependencies: [
                .product(name: "HeapModule", package: "swift-collections"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "LocalStoreConformance", dependencies: ["LocalStore"]),
        // The toolkit for backends on ordered key-value engines: order-preserving key and record codecs
        // (LMDB's), shared by LocalStoreLMDB.
        .target(name: "LocalStoreKV", dependencies: ["LocalStore"]),
        // The example third-party backend (Examples/RocksDBStore/README.md): KVStore over RocksDB's C API.
        // In no product; `make test` runs the whole conformance suite on it. Debian's librocksdb-dev ships rocksdb.pc.
        .systemLibrary(
            name: "CRocksDB", path: "Examples/RocksDBStore/Sources/CRocksDB", pkgConfig: "rocksdb",
            providers: [.apt(["librocksdb-dev"])]
        ),
        .target(name: "RocksDBStore", dependencies: ["LocalStore", "LocalStoreKV", "CRocksDB"], path: "Examples/RocksDBStore/Sources/RocksDBStore"),
        // KVStore over LMDB itself (the bench's `kv-lmdb`: what the toolkit costs against LMDBStore), in no product.
        .target(name: "LMDBKVExample", dependencies: ["LocalStore", "LocalStoreKV", "CLMDB"], path: "Examples/RocksDBStore/Sources/LMDBKVExample"),
        .testTarget(name: "RocksDBStoreTests", dependencies: ["LocalStore", "LocalStoreKV", "LocalStoreConformance", "RocksDBStore", "LMDBKVExample"]),
        .executableTarget(
            name: "rocksdb-example-bench", dependencies: ["LocalStoreBench", "LocalStoreLMDB", "RocksDBStore", "LMDBKVExample", "LocalStoreKV"],
            path: "Examples/RocksDBStore/Sources/rocksdb-example-bench"),
        // The sync engine (docs/sync.md): push, pull, purge and conflicts over any LocalStore.
        .target(name: "LocalStoreSync", dependencies: ["LocalStore"]),
        // HTTP transports for both service generations (docs/sync-http.md), on AsyncHTTPClient.
        .target(
            name: "LocalStoreSyncHTTP",
            dependencies: [
                "LocalStore", "LocalStoreSync", .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The loopback table service (Hummingbird on 127.0.0.1, both protocols, backed by a LocalStore store)
        // that the HTTP tests sync against. Test support: in no product, a dependency of test targets only.
        .target(
            name: "LocalStoreLoopbackService",
            dependencies: [
                "LocalStore", "LocalStoreSync", "LocalStoreSyncHTTP", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/LocalStoreLoopbackService"
        ),
        .testTarget(
            name: "LocalStoreSyncTests",
            dependencies: [
                "LocalStore", "LocalStoreSync", "LocalStoreSyncHTTP", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB",
                "TodoSyncKit", "todo-sync", "LocalStoreLoopbackService",
            ]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "LocalStoreSQLEngine",
            dependencies: ["LocalStore", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "LocalStoreSQLite",
            dependencies: ["LocalStore", "LocalStoreSQLEngine", "CSQLite", .product(name: "Logging", package: "swift-log")]
        ),
        // Loads libsqlcipher.so.0 at run time: it must never link it (see docs/encryption.md).
        .target(
            name: "LocalStoreSQLCipher",
            dependencies: ["LocalStore", "LocalStoreSQLEngine", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "LocalStoreSQLCipherTests",
            dependencies: [
                "LocalStore", "LocalStoreSQLCipher", "LocalStoreSQLite", .product(name: "Logging", package: "swift-log"),
                "localstore-sqlcipher-suite",
            ]
        ),
        .testTarget(
            name: "LocalStoreSQLiteTests",
            dependencies: [
                "LocalStore", "LocalStoreSQLEngine", "LocalStoreSQLite", "LocalStoreConformance", "LocalStoreBench", "LocalStoreSQLCipher",
            ]
        ),
        .target(name: "LocalStoreBench", dependencies: ["LocalStore"]),
        .target(
            name: "LocalStoreBenchBaselines",
            dependencies: ["LocalStore", "LocalStoreBench", "LocalStoreSQLEngine", "LocalStoreSQLite", "LocalStoreSQLCipher", "CSQLite", "CLMDB"]),
        // The CLI's one variadic libc call (prctl), see Sources/localstore/ProcessHygiene.swift.
        .systemLibrary(name: "CProcessHygiene", path: "Sources/CProcessHygiene"),
        .executableTarget(
            name: "localstore",
            dependencies: [
                "CProcessHygiene", "LocalStore", "LocalStoreBench", "LocalStoreBenchBaselines", "LocalStoreSQLite", "LocalStoreLMDB",
                "LocalStoreSQLCipher", "LocalStoreOpener", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "LocalStoreCLITests",
            dependencies: ["LocalStore", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB", "localstore"]
        ),
        .testTarget(
            name: "LocalStoreTests",
            dependencies: [
                "LocalStore", "LocalStoreConformance", "LocalStoreLMDB", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreKV",
                "LocalStoreReliability",
            ]
        ),
        .systemLibrary(
            name: "CLMDB",
            path: "Sources/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .target(
            name: "LocalStoreLMDB",
            dependencies: ["LocalStore", "LocalStoreKV", "CLMDB", "CLMDBChildWalk", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(name: "lmdb-reader-holder", dependencies: ["CLMDB"]),
        .testTarget(
            name: "LocalStoreLMDBTests",
            dependencies: [
                "LocalStore", "LocalStoreConformance", "LocalStoreLMDB", "LocalStoreKV", "CLMDB", "lmdb-reader-holder",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Reliability harness (docs/reliability.md): crash, concurrency, hostile input, fuzzing.
        .target(
            name: "LocalStoreReliability",
            dependencies: [
                "LocalStore", "LocalStoreConformance", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB", "LocalStoreSync", "CSQLite", "CLMDB",
            ]
        ),
        // `sync … --service URL` talks HTTP (LocalStoreSyncHTTP, AsyncHTTPClient/NIO): its socket writes go
        // through CPowerLoss's write/writev/close interposers, which only forward to libc in that mode (nothing
        // records or fails before powerloss_start / powerloss_fault_arm, which only other modes call).
        .executableTarget(
            name: "localstore-crash-writer",
            dependencies: ["LocalStore", "LocalStoreLMDB", "LocalStoreReliability", "LocalStoreSync", "LocalStoreSyncHTTP", "CPowerLoss"]
        ),
        .executableTarget(name: "localstore-fuzz", dependencies: ["LocalStore", "LocalStoreConformance", "LocalStoreReliability"]),
        // The crash tests run localstore-crash-writer as a child process. It is deliberately not a dependency:
        // a test target's executable dependencies are linked into the test bundle, and with it CPowerLoss's
        // libc interposers, which every test's I/O would then go through. `swift build --build-tests` (make
        // test) builds it next to the bundle. The sync crash test over HTTP runs the loopback service in the
        // test process.
        .testTarget(
            name: "LocalStoreReliabilityTests",
            dependencies: [
                "LocalStore", "LocalStoreConformance", "LocalStoreSQLite", "LocalStoreReliability", "LocalStoreSync", "LocalStoreSyncHTTP",
                "LocalStoreLoopbackService",
            ]
        ),
        // The example sync client (Examples/TodoSync/README.md); `make test` runs it on every backend.
        .target(name: "TodoSyncKit", dependencies: ["LocalStore", "LocalStoreSync"], path: "Examples/TodoSync/Sources/TodoSyncKit"),
        .executableTarget(
            name: "todo-sync",
            dependencies: [
                "TodoSyncKit", "LocalStore", "LocalStoreOpener", "LocalStoreSQLCipher", "LocalStoreSync", "LocalStoreSyncHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/TodoSync/Sources/todo-sync"
        ),
        .testTarget(
            name: "TodoSyncTests",
            dependencies: ["TodoSyncKit", "LocalStore", "LocalStoreSync", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB", "todo-sync"]
        ),
        // On-disk format fixtures (docs/format.md): Tests/FormatFixtures, read by today's code.
        .testTarget(
            name: "LocalStoreFormatTests",
            dependencies: ["LocalStore", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB", "CSQLite", "CLMDB"]
        ),
        // The DocC articles' code blocks, compiled and run (docs: Sources/*/*.docc).
        .testTarget(
            name: "LocalStoreDocTests",
            dependencies: [
                "LocalStore", "LocalStoreConformance", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB", "LocalStoreOpener",
                "LocalStoreSync", "LocalStoreSyncHTTP", "LocalStoreKV",
            ]
        ),
        // Power-loss recording (docs/reliability.md): a SQLite VFS shim and libc interposers, linked only
        // into localstore-crash-writer (the interposers bind every shared library of that process).
        .target(name: "CPowerLoss"),
        // LMDBStore.checkIntegrity's page walk in a forked child process (liblmdb can abort on damaged pages).
        .target(name: "CLMDBChildWalk", dependencies: ["CLMDB"]),
        // One way to open any backend from a store URL (memory:, sqlite:PATH, sqlcipher:PATH, lmdb:PATH).
        .target(
            name: "LocalStoreOpener",
            dependencies: [
                "LocalStore", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LocalStoreOpenerTests",
            dependencies: [
                "LocalStore", "LocalStoreOpener", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The SQLCipher checks in a process without libsqlite3 (for sanitizer runs, docs/reliability.md).
        .executableTarget(
            name: "localstore-sqlcipher-suite", dependencies: ["LocalStore", "LocalStoreConformance", "LocalStoreSQLCipher"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

/// swift-docc-plugin, for `make docs` only: `make docs` sets LOCALSTORE_DOCS=1. Without it the package
/// graph has no documentation plugin, so `swift build` / `make test` neither fetch nor compile it.
var documentationDependencies: [Package.Dependency] {
    guard Context.environment["LOCALSTORE_DOCS"] == "1" else { return [] }
    return [.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0")]
}
