import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite
import Testing

/// Runs the built `localstore` executable (it sits next to the test bundle) and captures its output.
struct CLI {
    static let binary: URL = {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return here.appendingPathComponent("localstore")
    }()

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// A started child process whose output is captured.
    struct Running {
        let process: Process
        let out: Pipe
        let err: Pipe

        /// Reads both pipes to their end (before waiting, so a large output cannot block the child),
        /// waits for the exit and returns what the child printed.
        func finish() -> Result {
            let o = out.fileHandleForReading.readDataToEndOfFile()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return Result(
                status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
        }
    }

    /// Starts `executable` (the CLI by default) with the test's environment less any key variable, plus
    /// `environment`, and no standard input.
    static func start(_ arguments: [String], environment: [String: String] = [:], executable: URL = binary) throws -> Running {
        let p = Process()
        p.executableURL = executable
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["LOCALSTORE_KEY"] = nil
        env["LOCALSTORE_NEW_KEY"] = nil
        env["LOCALSTORE_DESTINATION_KEY"] = nil
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let running = Running(process: p, out: Pipe(), err: Pipe())
        p.standardOutput = running.out
        p.standardError = running.err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return running
    }

    static func run(_ arguments: [String], environment: [String: String] = [:], executable: URL = binary) throws -> Result {
        try start(arguments, environment: environment, executable: executable).finish()
    }
}

/// A persistent backend the CLI can open, with how to open it from the library for seeding and checks.
struct CLIBackend: Sendable, CustomStringConvertible {
    let scheme: String
    let file: String
    let open: @Sendable (String) throws -> any LocalStore
    var description: String { scheme }

    static let keyHex = String(repeating: "3a", count: 32)
    static let keyBytes = [UInt8](repeating: 0x3A, count: 32)

    static let all: [CLIBackend] = [
        CLIBackend(scheme: "sqlite", file: "store.sqlite") { try SQLiteStore(path: $0) },
        CLIBackend(scheme: "sqlcipher", file: "store.db") { try SQLCipherStore(path: $0, key: try .raw(keyBytes)) },
        CLIBackend(scheme: "lmdb", file: "store.lmdb") { try LMDBStore(path: $0) },
    ]

    /// Whether this process (and the CLI, which also links libsqlite3) can use SQLCipher: not under a
    /// sanitizer (docs/reliability.md, "Sanitizers"; localstore-sqlcipher-suite covers it there).
    static let sqlcipherUsable = SQLCipherLibrary.processRefusal == nil
    /// ``all`` without SQLCipher when it is not usable here.
    static let usable = all.filter { $0.scheme != "sqlcipher" || sqlcipherUsable }

    var environment: [String: String] { scheme == "sqlcipher" ? ["LOCALSTORE_KEY": Self.keyHex] : [:] }
}

final class Scratch {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ls-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Three todo items, two queued operations, one error and a delta token.
func seed(_ store: any LocalStore) throws {
    try store.defineTable(
        TableSchema("TodoItem", ["text": .string, "priority": .integer, "updatedAt": .date, "tags": .json], indexed: ["priority"]))
    try store.upsert(
        [["id": "a", "text": "buy milk", "priority": 1, "updatedAt": .date(Date(timeIntervalSince1970: 1_700_000_000))],
         ["id": "b", "text": "it's done", "priority": 3, "tags": .json(["x", 1])],
         ["id": "c", "text": "call mom", "priority": 2]], into: "TodoItem")
    _ = try store.appendOperation(table: "TodoItem", itemId: "a", properties: Array(#"{"type":"insert"}"#.utf8))
    _ = try store.appendOperation(table: "TodoItem", itemId: "b", properties: Array(#"{"type":"update"}"#.utf8))
    try store.recordError(TableOperationError(id: "e1", operationId: 2, properties: Array(#"{"status":409}"#.utf8)))
    try store.setDeltaToken(Date(timeIntervalSince1970: 1_700_000_123.456), table: "TodoItem", queryId: "all")
}

@Suite("localstore command line", .serialized)
struct CLITests {
    @Test(arguments: CLIBackend.usable)
    func inspectShowsTablesOperationsErrorsAndTokens(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        let r = try CLI.run(["inspect", "\(b.scheme):\(path)"], environment: b.environment)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.isEmpty)
        for expected in [
            "tables: 1", "TodoItem  3 rows", "priority  integer  indexed", "tags  json", "pending operations: 2",
            "TodoItem: 2 (insert 1, update 1)", "oldest: #1 insert TodoItem/a", "newest: #2 update TodoItem/b", "highest id given out: 2",
            "operation errors: 1", "operation id high-water mark: 2",
            "e1: operation #2 {\"status\":409}", "delta token TodoItem / all: 2023-11-14T22:15:23.456Z",
        ] {
            #expect(r.stdout.contains(expected), "missing '\(expected)' in:\n\(r.stdout)")
        }
    }

    @Test(arguments: CLIBackend.usable)
    func queryPrintsRowsAsJSONLinesAndTables(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        let url = "\(b.scheme):\(path)"
        let r = try CLI.run(
            ["query", url, "TodoItem", "--filter", "priority ge 2", "--orderby", "priority desc", "--format", "jsonl"],
            environment: b.environment)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        let first = try JSON(parsing: lines[0])
        #expect(first == .object(["id": "b", "text": "it's done", "priority": 3, "updatedAt": nil, "tags": ["x", 1]]))
        #expect(try JSON(parsing: lines[1]).jsonText.contains(#""id":"c""#))

        let t = try CLI.run(
            ["query", url, "TodoItem", "--filter", "substringof('milk',text)", "--select", "text"], environment: b.environment)
        #expect(t.status == 0, "\(t.stderr)")
        #expect(t.stdout.contains("buy milk"))
        #expect(t.stdout.contains("(1 row)"))
        #expect(!t.stdout.contains("priority"))
    }

    @Test(arguments: CLIBackend.usable)
    func errorsAreOneLineOnStderrWithNonZeroExit(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        let url = "\(b.scheme):\(path)"
        func expectFailure(_ args: [String], _ needle: String, env: [String: String]? = nil) throws {
            let r = try CLI.run(args, environment: env ?? b.environment)
            #expect(r.status != 0, "\(args) succeeded")
            #expect(r.stdout.isEmpty, "\(args) printed \(r.stdout)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(args) stderr: \(r.stderr)")
            #expect(r.stderr.contains(needle), "\(args) stderr: \(r.stderr)")
        }
        try expectFailure(["query", url, "TodoItem", "--filter", "priority ge"], "position 12")
        try expectFailure(["query", url, "Nope"], "unknownTable")
        try expectFailure(["inspect", "\(b.scheme):\(dir.path("missing"))"], "no store at")
        try expectFailure(["inspect", "postgres://x"], "not a store URL")
        if b.scheme == "sqlcipher" {
            try expectFailure(["inspect", url], "wrongKey", env: ["LOCALSTORE_KEY": String(repeating: "01", count: 32)])
            try expectFailure(["inspect", url], "needs a key", env: [:])
        }
    }

    @Test(arguments: CLIBackend.usable, ["memory"] + CLIBackend.usable.map(\.scheme))
    func copyReproducesTheStoreOnEveryBackend(_ b: CLIBackend, destination: String) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        let target = CLIBackend.all.first { $0.scheme == destination }
        let dstPath = dir.path("copy-" + (target?.file ?? "x"))
        let dstURL = destination == "memory" ? "memory:" : "\(destination):\(dstPath)"
        var env = b.environment
        if destination == "sqlcipher" { env["LOCALSTORE_DESTINATION_KEY"] = CLIBackend.keyHex }
        let r = try CLI.run(["copy", "\(b.scheme):\(path)", dstURL], environment: env)
        #expect(r.status == 0, "\(r.stderr)")
        // 3 items + 2 operations + 1 error + the delta token + the operation id high-water mark + the row
        // that says pushes' marks are tracked.
        #expect(r.stdout.contains("copied 9 rows in 4 tables; counts and checksums match"), "\(r.stdout)")
        guard let target else { return }
        let copy = try target.open(dstPath)
        defer { try? copy.close() }
        let original = try b.open(path)
        defer { try? original.close() }
        for table in ["TodoItem", "MS_TableOperations", "MS_TableOperationErrors", "MS_TableConfig"] {
            #expect(try copy.read(Query(table)).items == original.read(Query(table)).items, "\(table)")
        }
        #expect(try copy.tableSchemas() == original.tableSchemas())
        // Copying again into the same, now non-empty, destination is refused.
        let again = try CLI.run(["copy", "\(b.scheme):\(path)", dstURL], environment: env)
        #expect(again.status != 0)
        #expect(again.stderr.contains("already holds"))
    }

    @Test(arguments: CLIBackend.usable)
    func verifyReportsASoundStore(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        let r = try CLI.run(["verify", "\(b.scheme):\(path)"], environment: b.environment)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "ok\n")
    }

    @Test(.enabled(if: CLIBackend.sqlcipherUsable, "SQLCipher is refused in this process (sanitizer)"))
    func rekeyChangesTheKeyOfAnEncryptedStore() throws {
        let dir = try Scratch()
        let path = dir.path("store.db")
        let s = try SQLCipherStore(path: path, key: try .raw(CLIBackend.keyBytes))
        try seed(s)
        try s.close()
        let newHex = String(repeating: "c4", count: 32)
        let keyFile = dir.path("new.key")
        try Data((newHex + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
        let r = try CLI.run(["rekey", "sqlcipher:\(path)", "--new-key-file", keyFile], environment: ["LOCALSTORE_KEY": CLIBackend.keyHex])
        #expect(r.status == 0, "\(r.stderr)")
        let old = try CLI.run(["inspect", "sqlcipher:\(path)"], environment: ["LOCALSTORE_KEY": CLIBackend.keyHex])
        #expect(old.status != 0)
        #expect(old.stderr.contains("wrongKey"))
        let new = try CLI.run(["inspect", "sqlcipher:\(path)"], environment: ["LOCALSTORE_KEY": newHex])
        #expect(new.status == 0, "\(new.stderr)")
        #expect(new.stdout.contains("TodoItem  3 rows"))
        let plain = try CLI.run(["rekey", "sqlite:\(dir.path("x.sqlite"))"], environment: ["LOCALSTORE_NEW_KEY": newHex])
        #expect(plain.status != 0)
        #expect(plain.stderr.contains("only sqlcipher"))
    }

    @Test func memoryStoresWorkEverywhereAURLIsAccepted() throws {
        let r = try CLI.run(["inspect", "memory:"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("tables: 0"))
        #expect(r.stdout.contains("pending operations: 0"))
        let q = try CLI.run(["query", "memory:", "MS_TableOperations", "--format", "jsonl"])
        #expect(q.status == 0)
        #expect(q.stdout.isEmpty)
    }
}

/// The CLI takes key variables out of its environment and disables core dumps at start. Observed from
/// outside on a running CLI: `inspect` reads its key from a FIFO, so it waits in the middle of the command
/// (past startup) until the test writes the key; meanwhile the test reads `/proc/<pid>/environ` (which
/// shows the environment block the process was started with, so removing the pointer with `unsetenv`
/// alone would not hide it) and `/proc/<pid>/limits`. The child starts with its soft core limit raised
/// to the hard limit, so a zero there comes from the CLI. `PR_SET_DUMPABLE` has no observable here that
/// root (this machine's test user) does not bypass, so it is not checked.
@Suite("localstore process hygiene")
struct CLIProcessHygieneTests {
    @Test(.enabled(if: CLIBackend.sqlcipherUsable, "SQLCipher is refused in this process (sanitizer)"))
    func keyVariablesLeaveTheEnvironmentAndCoreDumpsAreOff() throws {
        let dir = try Scratch()
        let path = dir.path("store.db")
        let s = try SQLCipherStore(path: path, key: try .raw(CLIBackend.keyBytes))
        try seed(s)
        try s.close()
        let fifo = dir.path("key.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let newHex = String(repeating: "5b", count: 32)
        let destinationHex = String(repeating: "6c", count: 32)

        let running = try CLI.start(
            ["-c", #"ulimit -S -c "$(ulimit -H -c)"; exec "$0" "$@""#, CLI.binary.path, "inspect", "sqlcipher:\(path)", "--key-file", fifo],
            environment: [
                "LOCALSTORE_KEY": CLIBackend.keyHex, "LOCALSTORE_NEW_KEY": newHex,
                "LOCALSTORE_DESTINATION_KEY": destinationHex, "LOCALSTORE_HYGIENE_MARKER": "present",
            ],
            executable: URL(fileURLWithPath: "/bin/sh"))
        let p = running.process
        let pid = p.processIdentifier

        // Opening the FIFO for writing succeeds only once the CLI has opened it for reading.
        var fd: Int32 = -1
        let deadline = Date().addingTimeInterval(60)
        while fd < 0, p.isRunning, Date() < deadline {
            fd = open(fifo, O_WRONLY | O_NONBLOCK)
            if fd < 0 { usleep(10_000) }
        }
        try #require(fd >= 0, "the CLI never opened its key file")
        let environ = try #require(FileManager.default.contents(atPath: "/proc/\(pid)/environ"))
        let limits = String(decoding: try #require(FileManager.default.contents(atPath: "/proc/\(pid)/limits")), as: UTF8.self)
        _ = (CLIBackend.keyHex + "\n").withCString { write(fd, $0, strlen($0)) }
        close(fd)
        let r = running.finish()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("TodoItem  3 rows"))

        let entries = environ.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        #expect(entries.contains("LOCALSTORE_HYGIENE_MARKER=present"), "read the wrong environment: \(entries.count) entries")
        for secret in ["LOCALSTORE_KEY", "LOCALSTORE_NEW_KEY", "LOCALSTORE_DESTINATION_KEY", CLIBackend.keyHex, newHex, destinationHex] {
            #expect(!entries.contains { $0.contains(secret) }, "'\(secret)' is still in /proc/<pid>/environ")
        }
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        let fields = core.dropFirst("Max core file size".count).split(separator: " ")
        #expect(fields.first == "0", "core dumps still enabled: \(core)")
    }
}

/// A SQL store on a read-only file system opens for reading (SQLite's `immutable` mode) and refuses
/// writes with `readOnly`. The read-only location is a read-only bind mount of the store's directory in
/// a private mount namespace (`unshare -m`), seen only by the CLI process; a chmod'ed directory would not
/// do, since this machine's tests run as root.
@Suite("localstore on a read-only file system")
struct CLIReadOnlyLocationTests {
    static let canMount = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")

    /// Runs `command` (the CLI with `arguments` by default) with `directory` mounted read-only.
    static func runReadOnly(
        _ directory: String, _ arguments: [String], environment: [String: String] = [:], command: [String]? = nil
    ) throws -> CLI.Result {
        let script = #"d="$1"; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" && exec "$@""#
        return try CLI.run(["-m", "/bin/sh", "-c", script, "sh", directory] + (command ?? [CLI.binary.path] + arguments),
            environment: environment, executable: URL(fileURLWithPath: "/usr/bin/unshare"))
    }

    @Test(.enabled(if: canMount, "needs root and unshare for a private read-only mount"), arguments: CLIBackend.usable.filter { $0.scheme != "lmdb" })
    func sqlStoreOnReadOnlyFileSystemReadsAndRefusesWrites(_ b: CLIBackend) throws {
        let dir = try Scratch()
        let path = dir.path(b.file)
        let s = try b.open(path)
        try seed(s)
        try s.close()
        let before = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).sorted()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))

        // The mount itself works (the test would prove nothing otherwise).
        let probe = try Self.runReadOnly(dir.url.path, [], command: ["/usr/bin/touch", dir.path("probe")])
        #expect(probe.status != 0 && probe.stderr.contains("Read-only file system"), "the directory was not read-only: \(probe)")

        let r = try Self.runReadOnly(dir.url.path, ["inspect", "\(b.scheme):\(path)"], environment: b.environment)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("TodoItem  3 rows"), "\(r.stdout)")
        let q = try Self.runReadOnly(
            dir.url.path, ["query", "\(b.scheme):\(path)", "TodoItem", "--filter", "priority ge 2", "--format", "jsonl"],
            environment: b.environment)
        #expect(q.status == 0, "\(q.stderr)")
        #expect(q.stdout.split(separator: "\n").count == 2, "\(q.stdout)")
        // A write (copying another store's table into it) fails with readOnly, not ioError or a crash.
        let other = try Scratch()
        let source = try SQLiteStore(path: other.path("source.sqlite"))
        try source.defineTable(TableSchema("Other", ["n": .integer]))
        try source.upsert([["id": "o", "n": 1]], into: "Other")
        try source.close()
        let w = try Self.runReadOnly(
            dir.url.path, ["copy", "sqlite:\(other.path("source.sqlite"))", "\(b.scheme):\(path)"],
            environment: b.scheme == "sqlcipher" ? ["LOCALSTORE_DESTINATION_KEY": CLIBackend.keyHex] : [:])
        #expect(w.status != 0)
        #expect(w.stderr.contains("readOnly"), "\(w.stderr)")

        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).sorted() == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)

        // While a writer has transactions in the log, an immutable open would silently read an older
        // state: it is readOnly with a message that says what to do.
        let writer = try b.open(path)
        defer { try? writer.close() }
        try writer.upsert([["id": "d", "text": "in the log", "priority": 4]], into: "TodoItem")
        let wal = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        try #require(wal > 0, "the write did not stay in the log")
        let pending = try Self.runReadOnly(dir.url.path, ["inspect", "\(b.scheme):\(path)"], environment: b.environment)
        #expect(pending.status != 0)
        #expect(pending.stderr.contains("readOnly") && pending.stderr.contains("where it is writable"), "\(pending.stderr)")
    }
}
