import Foundation
import LocalStore
import LocalStoreSQLite
import Testing

/// Each documented exit status (`localstore --help`, docs/cli.md) comes from the failure it names.
@Suite("localstore exit status", .serialized)
struct ExitStatusTests {
    /// Runs the CLI and checks the status and that a failure is one line on stderr containing `needle`.
    func expectStatus(
        _ status: Int32, _ args: [String], env: [String: String] = [:], stderrContains needle: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let r = try CLI.run(args, environment: env)
        #expect(r.status == status, "\(args): status \(r.status), stderr: \(r.stderr)", sourceLocation: sourceLocation)
        if status != 0, let needle {
            #expect(r.stderr.contains(needle), "\(args) stderr: \(r.stderr)", sourceLocation: sourceLocation)
        }
    }

    func seededStore(_ b: CLIBackend, in dir: Scratch) throws -> String {
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        return "\(b.scheme):\(path)"
    }

    @Test func helpListsEveryExitStatus() throws {
        let r = try CLI.run(["--help"])
        #expect(r.status == 0)
        for (code, words) in [(0, "success"), (2, "verify found damage"), (64, "usage: bad option"), (65, "damaged store"),
                              (66, "no store"), (70, "internal error"), (73, "read-only"), (77, "wrong key")] {
            #expect(r.stdout.contains("  \(code)") && r.stdout.contains(words), "--help lacks \(code) \(words):\n\(r.stdout)")
        }
    }

    @Test(arguments: CLIBackend.usable)
    func usageErrorsExit64(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let url = try seededStore(b, in: dir)
        try expectStatus(64, ["inspect", url, "--no-such-option"], env: b.environment)
        try expectStatus(64, ["inspect", "postgres://x"], stderrContains: "not a store URL")
        try expectStatus(64, ["query", url, "TodoItem", "--filter", "priority ge"], env: b.environment, stderrContains: "invalidQuery")
        try expectStatus(64, ["query", url, "Nope"], env: b.environment, stderrContains: "unknownTable")
        try expectStatus(64, ["query", url, "TodoItem", "--top", "-1"], env: b.environment, stderrContains: "--top")
        try expectStatus(64, ["bench", "--records", "0"], stderrContains: "--records")
        if b.scheme == "sqlcipher" {
            try expectStatus(64, ["inspect", url], stderrContains: "needs a key")
            try expectStatus(64, ["inspect", url], env: ["LOCALSTORE_KEY": "xyz"], stderrContains: "hex")
        } else {
            try expectStatus(64, ["rekey", url], env: ["LOCALSTORE_NEW_KEY": CLIBackend.keyHex], stderrContains: "only sqlcipher")
        }
    }

    @Test(arguments: CLIBackend.usable)
    func aMissingStoreOrKeyFileExits66(_ b: CLIBackend) throws {
        let dir = try Scratch()
        try expectStatus(66, ["inspect", "\(b.scheme):\(dir.path("missing"))"], env: b.environment, stderrContains: "no store at")
        try expectStatus(66, ["verify", "\(b.scheme):\(dir.path("missing"))"], env: b.environment, stderrContains: "no store at")
        if b.scheme == "sqlcipher" {
            let url = try seededStore(b, in: dir)
            try expectStatus(66, ["inspect", url, "--key-file", dir.path("no.key")], stderrContains: "cannot read key file")
        }
    }

    /// A file of another kind where the store should be: `notADatabase` (for SQLCipher: `wrongKey`).
    @Test(arguments: CLIBackend.usable)
    func somethingThatIsNotAStoreExits65(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let garbage = Data((0..<16384).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })
        if b.scheme == "lmdb" {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try garbage.write(to: URL(fileURLWithPath: path + "/data.mdb"))
        } else {
            try garbage.write(to: URL(fileURLWithPath: path))
        }
        if b.scheme == "sqlcipher" {
            // Without the right key an encrypted file is indistinguishable from random bytes.
            try expectStatus(77, ["inspect", "\(b.scheme):\(path)"], env: b.environment, stderrContains: "wrongKey")
        } else {
            try expectStatus(65, ["inspect", "\(b.scheme):\(path)"], env: b.environment, stderrContains: "notADatabase")
        }
    }

    @Test(.enabled(if: CLIBackend.sqlcipherUsable, "SQLCipher is refused in this process (sanitizer)"))
    func theWrongKeyExits77() throws {
        let dir = try Scratch()
        let url = try seededStore(CLIBackend.all[1], in: dir)
        try expectStatus(77, ["inspect", url], env: ["LOCALSTORE_KEY": String(repeating: "01", count: 32)], stderrContains: "wrongKey")
        try expectStatus(77, ["verify", url], env: ["LOCALSTORE_KEY": String(repeating: "01", count: 32)], stderrContains: "wrongKey")
    }

    @Test func copyingIntoAStoreThatIsNotEmptyExits73() throws {
        let dir = try Scratch()
        let url = try seededStore(CLIBackend.all[0], in: dir)
        let other = try Scratch()
        let target = try seededStore(CLIBackend.all[2], in: other)
        try expectStatus(73, ["copy", url, target], stderrContains: "already holds")
    }

    /// A store another connection holds the write lock of: `busy` after the 5-second busy timeout.
    @Test func aStoreLockedByAnotherWriterExits75() throws {
        let dir = try Scratch()
        let source = try seededStore(CLIBackend.all[2], in: dir)
        let path = dir.path("locked.sqlite")
        let holder = try SQLiteStore(path: path)
        defer { try? holder.close() }
        try holder.defineTable(TableSchema("Hold", ["n": .integer]))
        try holder.write { tx in
            try tx.upsert([["id": "h", "n": 1]], into: "Hold")
            try expectStatus(75, ["copy", source, "sqlite:\(path)"], stderrContains: "busy")
        }
    }

    /// libsqlcipher that cannot be loaded (a file of that name that is not a library, found first on
    /// LD_LIBRARY_PATH): `libraryMissing`.
    @Test(.enabled(if: CLIBackend.sqlcipherUsable, "SQLCipher is refused in this process (sanitizer)"))
    func aMissingSQLCipherLibraryExits69() throws {
        let dir = try Scratch()
        let url = try seededStore(CLIBackend.all[1], in: dir)
        let libraries = dir.path("lib")
        try FileManager.default.createDirectory(atPath: libraries, withIntermediateDirectories: true)
        try Data("not a library".utf8).write(to: URL(fileURLWithPath: libraries + "/libsqlcipher.so.0"))
        let inherited = ProcessInfo.processInfo.environment["LD_LIBRARY_PATH"].map { ":" + $0 } ?? ""
        try expectStatus(
            69, ["inspect", url], env: ["LOCALSTORE_KEY": CLIBackend.keyHex, "LD_LIBRARY_PATH": libraries + inherited],
            stderrContains: "libraryMissing")
    }

    /// A SQLite store whose table pages are overwritten opens (the catalog pages are intact) and
    /// `verify` reports the damage with status 2; a sound store is 0.
    @Test func verifyFindingDamageExits2() throws {
        let dir = try Scratch()
        let path = dir.path("store.sqlite")
        let s = try SQLiteStore(path: path)
        try s.defineTable(TableSchema("Big", ["text": .string]))
        try s.upsert((0..<2000).map { ["id": .string("item-\($0)"), "text": .string(String(repeating: "x", count: 200))] }, into: "Big")
        try s.close()
        try expectStatus(0, ["verify", "sqlite:\(path)"])
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        try #require(size > 40 * 4096, "the store is too small to damage a middle page: \(size) bytes")
        try handle.seek(toOffset: size - 20 * 4096)
        handle.write(Data(repeating: 0xA5, count: 8 * 4096))
        try handle.close()
        try expectStatus(2, ["verify", "sqlite:\(path)"], stderrContains: "corrupt")
    }
}
