import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite
import Testing
import TodoSyncKit

/// Runs the example (`todo-sync`, built next to the test bundle) once per backend, then checks the
/// store it left: the items, an empty queue and error table, and the delta token.
@Suite("Example sync client")
struct TodoSyncTests {
    static let keyHex = String(repeating: "5c", count: 32)
    static let key = [UInt8](repeating: 0x5C, count: 32)
    /// The server's clock: its epoch plus one second per change; the session makes eight changes.
    static let finalToken = Date(timeIntervalSince1970: 1_790_000_000 + 8)

    struct Backend: Sendable, CustomStringConvertible {
        let scheme: String
        let open: (@Sendable (String) throws -> any LocalStore)?
        var description: String { scheme }
    }

    static let backends = [
        Backend(scheme: "memory", open: nil),
        Backend(scheme: "sqlite") { try SQLiteStore(path: $0) },
        Backend(scheme: "sqlcipher") { try SQLCipherStore(path: $0, key: try .raw(key)) },
        Backend(scheme: "lmdb") { try LMDBStore(path: $0) },
    ].filter { $0.scheme != "sqlcipher" || SQLCipherLibrary.processRefusal == nil }  // sanitizer runs: docs/reliability.md

    @Test("todo-sync runs to completion and leaves the expected store", arguments: backends)
    func example(_ backend: Backend) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("todo-sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("todo").path
        let url = backend.open == nil ? "memory:" : "\(backend.scheme):\(path)"

        let result = try Self.runExample(["--store", url], environment: ["TODO_SYNC_KEY": Self.keyHex])
        #expect(result.status == 0, "todo-sync failed: \(result.stdout)\(result.stderr)")
        // Pages of two, each after the last item of the previous one; a short page ends the pull.
        #expect(result.stdout.contains("pull: 3 items in 2 pages"), "\(result.stdout)")
        // The collapse rules: insert + update stays one insert; insert + delete leaves nothing.
        #expect(result.stdout.contains("offline edits: insert new item, update milk, delete rent queued"), "\(result.stdout)")
        #expect(result.stdout.contains("push: 3 sent, 1 conflict resolved, 0 failed"), "\(result.stdout)")
        // From the token (the third change): the rename, the new items and the soft delete, in pages of two.
        #expect(result.stdout.contains("pull: 3 pages (3 upserted, 1 deleted, 0 skipped)"), "\(result.stdout)")
        #expect(result.stdout.contains("final: 4 items, 0 pending operations, 0 push errors"), "\(result.stdout)")

        guard let open = backend.open else { return }
        let store = try open(path)
        defer { try? store.close() }
        let todos = try store.read(Todo.self, Query(Todo.table, sort: [SortKey("text")]))
        #expect(todos.map(\.text) == TodoSyncDemo.expectedTexts)
        #expect(todos.first { $0.id == "milk" }?.complete == true)
        #expect(todos.allSatisfy { $0.version != nil && $0.updatedAt != nil }, "every item carries the server's version: \(todos)")
        #expect(try store.read(table: Todo.table, id: "rent") == nil)
        #expect(try store.pendingOperationCount() == 0)
        #expect(try store.queuedOperations().isEmpty)
        #expect(try store.pushErrors().isEmpty)
        #expect(try store.deltaToken(table: Todo.table, queryId: TodoSyncClient.queryId) == Self.finalToken)
    }

    @Test("todo-sync refuses a store that already holds the demo's items")
    func secondRunIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("todo-sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = "sqlite:\(dir.appendingPathComponent("todo.sqlite").path)"
        #expect(try Self.runExample(["--store", url, "--quiet"]).status == 0)
        let again = try Self.runExample(["--store", url, "--quiet"])
        #expect(again.status != 0)
        #expect(again.stderr.contains("already has items"), "\(again.stderr)")
    }

    @Test("verify reports a wrong final state")
    func verifyFindsProblems() async throws {
        let store = try InMemoryStore()
        var outcome = try await TodoSyncDemo.run(store: store, log: { _ in })
        #expect(TodoSyncDemo.verify(outcome).isEmpty)
        outcome.pendingOperations = 1
        outcome.todos.removeLast()
        outcome.deltaToken = nil
        let problems = TodoSyncDemo.verify(outcome)
        #expect(problems.count == 4, "\(problems)")
    }

    @Test("a bad store URL is a usage error")
    func badURL() throws {
        for url in ["nowhere", "sqlite:", "mongo:/tmp/x", "sqlcipher:/tmp/todo-no-key"] {
            let result = try Self.runExample(["--store", url], environment: ["TODO_SYNC_KEY": ""])
            #expect(result.status == 64, "\(url): \(result.status) \(result.stderr)")
        }
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func runExample(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let p = Process()
        p.executableURL = here.appendingPathComponent("todo-sync")
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }
}
