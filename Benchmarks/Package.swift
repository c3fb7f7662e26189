// swift-tools-version:6.1
// The package-benchmark suite of LocalStore, and GRDB as the peer a Swift user would otherwise pick.
// A separate package so that users of LocalStore never resolve package-benchmark or GRDB.
import PackageDescription

// A path dependency's identity is the name of its directory (the LocalStore checkout, whatever it is called).
let localStore = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "LocalStore").lowercased()

let package = Package(
    name: "LocalStoreBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // GRDB running the benchmark's workloads, and the list of every subject the suite runs.
        .target(
            name: "LocalStorePeers",
            dependencies: [
                .product(name: "LocalStore", package: localStore),
                .product(name: "LocalStoreBench", package: localStore),
                .product(name: "LocalStoreBenchBaselines", package: localStore),
                .product(name: "LocalStoreSQLite", package: localStore),
                .product(name: "LocalStoreLMDB", package: localStore),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // `swift package benchmark`: one benchmark per (workload, subject), named `<workload>/<subject>`.
        .executableTarget(
            name: "LocalStoreBenchmarks",
            dependencies: [
                "LocalStorePeers",
                .product(name: "LocalStoreBench", package: localStore),
                .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "Benchmarks/LocalStoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        // `swift run -c release peers`: the `localstore bench` table with GRDB next to the backends.
        .executableTarget(
            name: "peers",
            dependencies: [
                "LocalStorePeers",
                .product(name: "LocalStoreBench", package: localStore),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
