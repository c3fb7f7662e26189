import ArgumentParser
import Foundation
import LocalStore
import LocalStoreOpener
import LocalStoreSQLCipher
import LocalStoreSync
import LocalStoreSyncHTTP
import TodoSyncKit

/// `todo-sync --store lmdb:/tmp/todo`: runs the example sync session (``TodoSyncDemo``) on the store the
/// URL names and prints the final state.
@main
struct TodoSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo-sync",
        abstract: "Runs the LocalStore example sync client against an in-process fake server or a real back end.",
        discussion: """
            The store URL picks the backend: memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH. A sqlcipher: \
            store takes its raw 256-bit key as 64 hex digits from the TODO_SYNC_KEY environment variable. \
            Use a new path: the session starts from an empty table.
            With --service URL the session talks HTTP to an Azure Mobile Apps (--protocol 2.0.0) or Datasync \
            Community Toolkit (--protocol 3.0.0) back end whose TodoItem table is empty; a token in \
            TODO_SYNC_TOKEN is sent as X-ZUMO-AUTH (2.0.0) or Authorization: Bearer (3.0.0).
            Exit status: 0 when the final state is right, 1 when it is not, 64 for a usage error.
            """)

    @Option(name: .long, help: "The store: memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH.")
    var store: String = "memory:"

    @Option(name: .long, help: "The back end's base URL (default: an in-process fake server).")
    var service: String?

    @Option(name: .long, help: "The back end's protocol: 2.0.0 (Azure Mobile Apps) or 3.0.0 (Datasync Community Toolkit).")
    var `protocol`: String = "3.0.0"

    @Flag(name: .long, help: "Print only the final state.")
    var quiet = false

    /// The HTTP service of `--service`, `nil` without it.
    func remote(_ store: any LocalStore) throws -> DemoService? {
        guard let service else { return nil }
        let p: SyncServiceProtocol
        switch self.protocol {
        case "2.0.0", "2": p = .azureMobileApps
        case "3.0.0", "3": p = .datasync
        default: throw ValidationError("--protocol is 2.0.0 or 3.0.0, not '\(self.protocol)'")
        }
        guard service.hasPrefix("http://") || service.hasPrefix("https://") else {
            throw ValidationError("--service must be an http:// or https:// URL, not '\(service)'")
        }
        var headers: [HTTPSyncTransport.HTTPHeader] = []
        if let token = ProcessInfo.processInfo.environment["TODO_SYNC_TOKEN"], !token.isEmpty {
            headers.append(p == .azureMobileApps ? .init("X-ZUMO-AUTH", token) : .init("Authorization", "Bearer \(token)"))
        }
        let configuration = HTTPSyncTransport.Configuration(baseURL: service, protocol: p, headers: headers)
        return .http(HTTPSyncTransport(configuration, schemas: store), other: HTTPSyncTransport(configuration))
    }

    func run() async throws {
        let local = try Self.open(store)
        let outcome: TodoSyncDemo.Outcome
        do {
            let log: @Sendable (String) -> Void
            if quiet { log = { _ in } } else { log = { print($0) } }
            outcome = try await TodoSyncDemo.run(store: local, service: try remote(local), log: log)
        } catch {
            try? await local.close()
            throw error
        }
        try await local.close()
        for todo in outcome.todos {
            print("todo \(todo.id): \(todo.complete ? "[x]" : "[ ]") \(todo.text) (version \(todo.version ?? "-"))")
        }
        let token = outcome.deltaToken.map { $0.formatted(.iso8601) } ?? "none"
        print("final: \(outcome.todos.count) items, \(outcome.pendingOperations) pending operations, \(outcome.pushErrors) push errors, delta token \(token)")
        let problems = TodoSyncDemo.verify(outcome)
        for problem in problems { print("error: \(problem)") }
        if !problems.isEmpty { throw ExitCode.failure }
    }

    /// Opens the store `url` names, with `LocalStoreOpener` (the key of a sqlcipher: store comes from
    /// the environment, never from the URL).
    static func open(_ text: String) throws -> any LocalStore {
        let url: StoreURL
        do { url = try StoreURL(text) } catch { throw ValidationError("\(error)") }
        guard url.scheme == .sqlcipher else { return try StoreOpener.open(url) }
        let hex = ProcessInfo.processInfo.environment["TODO_SYNC_KEY"] ?? ""
        var bytes: [UInt8] = []
        var digits = hex.utf8.makeIterator()
        while let hi = digits.next(), let lo = digits.next(), let h = hexValue(hi), let l = hexValue(lo) { bytes.append(h << 4 | l) }
        guard hex.utf8.count == 64, bytes.count == 32 else {
            throw ValidationError("a sqlcipher: store needs TODO_SYNC_KEY: its raw key as 64 hex digits")
        }
        return try StoreOpener.open(url, key: try .raw(bytes))
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
