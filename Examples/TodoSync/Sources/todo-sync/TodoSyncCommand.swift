import ArgumentParser
import Foundation
import LocalStore
import LocalStoreOpener
import LocalStoreSQLCipher
import TodoSyncKit

/// `todo-sync --store lmdb:/tmp/todo`: runs the example sync session (``TodoSyncDemo``) on the store the
/// URL names and prints the final state.
@main
struct TodoSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo-sync",
        abstract: "Runs the LocalStore example sync client against an in-process fake server.",
        discussion: """
            The store URL picks the backend: memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH. A sqlcipher: \
            store takes its raw 256-bit key as 64 hex digits from the TODO_SYNC_KEY environment variable. \
            Use a new path: the session starts from an empty table.
            Exit status: 0 when the final state is right, 1 when it is not, 64 for a usage error.
            """)

    @Option(name: .long, help: "The store: memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH.")
    var store: String = "memory:"

    @Flag(name: .long, help: "Print only the final state.")
    var quiet = false

    func run() async throws {
        let local = try Self.open(store)
        let outcome: TodoSyncDemo.Outcome
        do {
            let log: @Sendable (String) -> Void
            if quiet { log = { _ in } } else { log = { print($0) } }
            outcome = try await TodoSyncDemo.run(store: local, log: log)
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
