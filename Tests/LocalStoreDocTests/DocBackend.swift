import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite

/// The four backends the articles' snippets run on, each in a new temporary directory.
enum DocBackend: String, CaseIterable, CustomStringConvertible, Sendable {
    case memory, sqlite, sqlcipher, lmdb

    var description: String { rawValue }

    /// Every backend but SQLCipher: the cases that run in any process. The SQLCipher case of each test is
    /// its own test, enabled only where the process can load SQLCipher (not in a sanitizer build, which
    /// refuses it while plain SQLite is loaded: docs/reliability.md, "Sanitizers"), so the skip shows.
    static let plain: [DocBackend] = [.memory, .sqlite, .lmdb]

    /// A new temporary directory, and a function that removes it.
    static func temporaryDirectory() throws -> (URL, () -> Void) {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("LocalStoreDocTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return (directory, { try? FileManager.default.removeItem(at: directory) })
    }

    /// A store of this backend in `directory`.
    func open(in directory: URL) throws -> any LocalStore {
        switch self {
        case .memory: return try InMemoryStore()
        case .sqlite: return try SQLiteStore(path: directory.appendingPathComponent("todo.sqlite").path)
        case .sqlcipher: return try SQLCipherStore(path: directory.appendingPathComponent("todo.db").path, key: .raw(keyBytes))
        case .lmdb: return try LMDBStore(path: directory.appendingPathComponent("todo.lmdb").path)
        }
    }

    /// A store with the articles' `TodoItem` table, and a function that closes it and removes its directory.
    func openTodoStore() throws -> (any LocalStore, () -> Void) {
        let (directory, remove) = try Self.temporaryDirectory()
        do {
            let store = try open(in: directory)
            try store.defineTable(todoSchema)
            return (store, { try? store.close(); remove() })
        } catch {
            remove()
            throw error
        }
    }
}

/// The articles' table.
let todoSchema = TableSchema("TodoItem", ["text": .string, "complete": .boolean, "priority": .integer,
                                          "updatedAt": .date, "version": .string], indexed: ["priority"])

/// A fixed 32-byte raw key (a raw key skips PBKDF2, keeping the tests fast).
let keyBytes: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 7) }
