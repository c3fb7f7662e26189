import Foundation
import LocalStore
import LocalStoreSQLCipher
import Testing

/// How SQLCipher gets loaded: with `RTLD_DEEPBIND` normally; without it only in a process where no plain
/// SQLite exports `sqlite3_*` (sanitizer runtimes abort on `RTLD_DEEPBIND`); never otherwise.
@Suite("SQLCipher loading modes")
struct LoadingModeTests {
    @Test func deepBindUnlessRefusedThenLocalOnlyWithoutAPlainSQLite() throws {
        #expect(try SQLCipherLibrary.mode(noDeepBind: nil, plainSQLite: nil).get() == .deepBind)
        #expect(try SQLCipherLibrary.mode(noDeepBind: nil, plainSQLite: "/usr/lib/libsqlite3.so.0").get() == .deepBind)
        #expect(try SQLCipherLibrary.mode(noDeepBind: "the ThreadSanitizer runtime aborts on it", plainSQLite: nil).get() == .local)
        let refused = SQLCipherLibrary.mode(noDeepBind: "the ThreadSanitizer runtime aborts on it", plainSQLite: "/usr/lib/libsqlite3.so.0")
        guard case .failure(let error) = refused else {
            Issue.record("SQLCipher without RTLD_DEEPBIND next to a plain SQLite was allowed")
            return
        }
        #expect(error.code == .unsupported)
        #expect(error.message.contains("/usr/lib/libsqlite3.so.0") && error.message.contains("ThreadSanitizer"), "\(error)")
    }

    /// This test process links libsqlite3 (through LocalStoreSQLite): the check must see it.
    @Test func thePlainSQLiteOfThisProcessIsFound() throws {
        let plain = try #require(SQLCipherLibrary.globalSQLite())
        #expect(plain.contains("sqlite3") || plain.contains("xctest") || plain.contains("LocalStore"), "\(plain)")
        #expect(SQLCipherLibrary.processRefusal == nil || SQLCipherLibrary.deepBindRefusal() != nil)
    }

    /// The conformance suite plus the encryption checks on SQLCipher loaded without `RTLD_DEEPBIND`, in
    /// `localstore-sqlcipher-suite` (which does not link libsqlite3). Under `make sanitize`, where this
    /// process refuses SQLCipher, it runs every check: that is how SQLCipher runs under the sanitizer.
    /// Otherwise (the SQLCipher conformance run happens in this process) LOCALSTORE_SQLCIPHER_NO_DEEPBIND
    /// selects the same mode for the quick selection: encryption, threads, transactions, reopening.
    @Test func theSuiteRunsWithoutDeepBindInAProcessWithoutLibsqlite3() throws {
        let runner = try Self.runnerPath()
        let everything = SQLCipherLibrary.processRefusal != nil
        let process = Process()
        process.executableURL = URL(fileURLWithPath: runner)
        process.arguments = everything ? [] : ["--quick"]
        var environment = ProcessInfo.processInfo.environment
        environment["LOCALSTORE_SQLCIPHER_NO_DEEPBIND"] = "1"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(text)")
        let summary = try #require(text.split(separator: "\n").last { $0.hasPrefix("SQLCIPHER-SUITE ") }, "\(text)")
        #expect(summary.contains("mode=local") && summary.hasSuffix(" failed=0"), "\(summary)")
        let passed = summary.split(separator: " ").first { $0.hasPrefix("passed=") }.flatMap { Int($0.dropFirst(7)) } ?? 0
        #expect(passed >= (everything ? 400 : 8), "\(summary)")
    }

    static func runnerPath() throws -> String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        for _ in 0..<5 {
            let candidate = dir.appendingPathComponent("localstore-sqlcipher-suite").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        throw LocalStoreError(.internal, "localstore-sqlcipher-suite is not built next to \(exe)")
    }
}
