import Dispatch
import Foundation
import Testing

/// Compiles small programs against the package's built modules with `swiftc -typecheck`, to prove
/// which uses of the async API compile and which do not (overload resolution is a compile-time property;
/// no run-time test can show it).
enum Typecheck {
    /// The `swiftc` on `PATH`, or `nil`.
    static let swiftc: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").map { "\($0)/swiftc" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// The directory of the built `.swiftmodule`s: `Modules` next to this test binary.
    static let modules: String? = {
        guard let binary = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let directory = URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("Modules")
        let module = directory.appendingPathComponent("LocalStore.swiftmodule").path
        return FileManager.default.fileExists(atPath: module) ? directory.path : nil
    }()

    static var isAvailable: Bool { swiftc != nil && modules != nil }

    struct Unavailable: Error {}

    /// The package's root (for the C module maps).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Type-checks `source` (top-level code when `script`, otherwise a library file) and returns the
    /// exit status and the diagnostics. The compiler runs, and is waited for, on a dispatch thread: a test
    /// that blocked a cooperative thread for seconds would starve the other tests' tasks.
    static func check(_ source: String, script: Bool) async throws -> (status: Int32, output: String) {
        guard let swiftc, let modules else { throw Unavailable() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ls-typecheck-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent(script ? "main.swift" : "library.swift")
        try Data(source.utf8).write(to: file)
        var arguments = ["-typecheck", "-swift-version", "6", "-I", modules]
        // The C modules the backends import: system libraries' maps in Sources, the generated maps of C
        // targets in the build directory.
        var maps = ["CSQLite", "CLMDB"].map { packageRoot.appendingPathComponent("Sources/\($0)/module.modulemap").path }
        let binDirectory = URL(fileURLWithPath: modules).deletingLastPathComponent()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: binDirectory.path)) ?? [] where entry.hasSuffix(".build") {
            let map = binDirectory.appendingPathComponent(entry).appendingPathComponent("module.modulemap").path
            if FileManager.default.fileExists(atPath: map) { maps.append(map) }
        }
        for map in maps { arguments += ["-Xcc", "-fmodule-map-file=\(map)"] }
        if !script { arguments.append("-parse-as-library") }
        arguments.append(file.path)
        let command = arguments
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: swiftc)
                process.arguments = command
                let pipe = Pipe()
                process.standardOutput = pipe
                process.standardError = pipe
                do {
                    try process.run()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                continuation.resume(returning: (process.terminationStatus, output))
            }
        }
    }
}

@Suite(
    "Async overloads resolve as documented (swiftc -typecheck)",
    .enabled(if: Typecheck.isAvailable, "skipped: swiftc is not on PATH or the package's modules are not built next to the test binary")
)
struct AsyncOverloadTests {
    static let imports = """
        import Foundation
        import LocalStore
        import LocalStoreLMDB
        import LocalStoreOpener
        import LocalStoreSQLite

        struct Todo: Codable, Sendable { var id: String; var text: String }

        """

    /// Async code reaches every kind of call with `try await`: requirements, conveniences, the typed
    /// queue, Codable, backend-specific calls through `run {}`, on concrete stores and existentials.
    @Test("the right usage compiles without a warning")
    func rightUsage() async throws {
        let library = Self.imports + """
            func app(_ store: any LocalStore, sqlite: SQLiteStore, lmdb: LMDBStore, memory: InMemoryStore) async throws {
                try await store.defineTable(TableSchema("Todo", ["text": .string]))
                try await store.upsert([["id": "a", "text": "milk"]], into: "Todo")
                let n: Int = try await store.count("Todo")
                let todos: [Todo] = try await store.read(Todo.self, Query("Todo"))
                try await store.upsert(records: todos, into: "Todo", options: .ignoringUnknownColumns)
                _ = try await store.schema(of: "Todo")
                _ = try await store.enqueue(.insert, ["id": "b", "text": "eggs"], into: "Todo")
                _ = try await store.pendingOperations()
                try await store.setDeltaToken(Date(), table: "Todo", queryId: "q")
                _ = try await store.purge("Todo", where: nil)
                _ = try await store.write { tx in try tx.count("Todo") }
                _ = try await sqlite.run { try $0.explain(Query("Todo")) }
                _ = try await sqlite.checkIntegrity()
                _ = try await lmdb.run { try $0.mapSize() }
                _ = try await memory.read(table: "Todo", id: "a")
                _ = n
                try await sqlite.close()
                try await lmdb.close()
                try await memory.close()
                try await store.close()
            }

            func synchronous(_ store: SQLiteStore) throws {
                try store.upsert([["id": "a", "text": "milk"]], into: "Todo")
                _ = try store.count("Todo")
                try store.close()
            }
            """
        let (status, output) = try await Typecheck.check(library, script: false)
        #expect(status == 0, "\(output)")
        #expect(!output.contains("warning:"), "\(output)")
    }

    /// Top-level code that awaits: `run {}` (which has no synchronous twin) is the way; a top-level script
    /// that never awaits uses the synchronous API as before.
    @Test("top-level code compiles with run {}, and synchronous scripts are unchanged")
    func topLevelRightUsage() async throws {
        let awaiting = Self.imports + """
            let store = try StoreOpener.open("memory:")
            let count = try await store.run { try $0.count("MS_TableOperations") }
            try await store.run { try $0.close() }
            print(count)
            """
        var (status, output) = try await Typecheck.check(awaiting, script: true)
        #expect(status == 0, "\(output)")
        #expect(!output.contains("warning:"), "\(output)")
        let synchronous = Self.imports + """
            let store = try InMemoryStore()
            print(try store.count("MS_TableOperations"))
            try store.close()
            """
        (status, output) = try await Typecheck.check(synchronous, script: true)
        #expect(status == 0, "\(output)")
        #expect(!output.contains("warning:"), "\(output)")
    }

    /// `try await store.close()` in top-level code resolves to the synchronous overload (Swift ranks
    /// overloads there as in synchronous code); `noasync` turns that silent blocking call into an error,
    /// on every backend and on an existential.
    @Test(
        "a top-level await on a blocking call does not compile",
        arguments: [
            "let store = try InMemoryStore()\ntry await store.close()",
            "let store = try SQLiteStore(path: \"/tmp/x.sqlite\")\ntry await store.close()",
            "let store = try LMDBStore(path: \"/tmp/x.lmdb\")\n_ = try await store.count(\"T\")",
            "let store = try StoreOpener.open(\"memory:\")\n_ = try await store.pendingOperations()",
        ])
    func topLevelWrongUsage(_ body: String) async throws {
        let (status, output) = try await Typecheck.check(Self.imports + body, script: true)
        #expect(status != 0, "compiled, but the call silently blocks: \(output)")
        #expect(output.contains("unavailable from asynchronous contexts"), "\(output)")
    }

    /// In an async function a blocking call without `await` is an error, not a silent blocking call.
    @Test(
        "a blocking call without await in async code does not compile",
        arguments: [
            "try store.close()", "_ = try store.count(\"T\")", "_ = try store.schema(of: \"T\")",
            "_ = try store.deltaToken(table: \"T\", queryId: \"q\")", "_ = try store.read([Todo].self, table: \"T\", id: \"a\")",
        ])
    func asyncWrongUsage(_ call: String) async throws {
        let library = Self.imports + "func app(_ store: SQLiteStore) async throws {\n    \(call)\n}\n"
        let (status, output) = try await Typecheck.check(library, script: false)
        #expect(status != 0, "compiled, but the call silently blocks: \(output)")
        #expect(output.contains("is 'async' but is not marked with 'await'") || output.contains("unavailable from asynchronous contexts"), "\(output)")
    }
}

@Suite(
    "README",
    .enabled(if: Typecheck.isAvailable, "skipped: swiftc is not on PATH or the package's modules are not built next to the test binary")
)
struct ReadmeOpeningTests {
    /// The first Swift block after "Open a store" in README.md.
    static func openingSnippet() throws -> String {
        let readme = try String(contentsOf: Typecheck.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let heading = try #require(readme.range(of: "Open a store"))
        let start = try #require(readme.range(of: "```swift\n", range: heading.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "\n```", range: start.upperBound..<readme.endIndex))
        return String(readme[start.upperBound..<end.lowerBound])
    }

    @Test("the README's opening snippet opens every backend and compiles as written")
    func openingSnippetCompiles() async throws {
        let snippet = try Self.openingSnippet()
        for name in ["InMemoryStore(", "SQLiteStore(", "SQLCipherStore(", "LMDBStore(", "StoreOpener.open("] {
            #expect(snippet.contains(name), "the README no longer shows \(name)")
        }
        let program = """
            import LocalStore
            import LocalStoreLMDB
            import LocalStoreOpener
            import LocalStoreSQLCipher
            import LocalStoreSQLite

            struct Settings { var storeURL = "memory:"; var key: SQLCipherKey? = nil }
            let settings = Settings()
            let passphrase = "correct horse"

            """ + snippet + "\n"
        let (status, output) = try await Typecheck.check(program, script: true)
        #expect(status == 0, "\(output)")
        #expect(!output.contains("warning:"), "\(output)")
    }
}
