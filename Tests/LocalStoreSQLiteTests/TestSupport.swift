import Foundation
import LocalStore
import LocalStoreSQLEngine
import Testing

@testable import LocalStoreSQLite

/// A temporary directory removed at the end of a test.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("LocalStoreSQLiteTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// The SQLite libraries the engine is tested on: the linked system library and, when installed,
/// SQLCipher's SQLite 3.15.2 loaded with `dlopen` (used without a key).
enum Library: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case system
    case legacy

    var testDescription: String { self == .system ? "system SQLite" : "SQLite 3.15.2 (libsqlcipher)" }

    /// The libraries present on this machine.
    static var available: [Library] { allCases.filter { $0.api != nil } }

    var api: SQLiteAPI? { self == .system ? SQLiteAPI.system : LegacySQLite.api }

    func open(
        _ path: String, systemTableNames: SystemTableNames = .default, options: SQLiteStore.Options = .init()
    ) throws -> SQLiteStore {
        guard let api else { throw LocalStoreError(.libraryMissing, "\(rawValue) SQLite is not installed") }
        return try SQLiteStore(path: path, systemTableNames: systemTableNames, options: options, api: api)
    }
}

/// Expects `body` to throw a ``LocalStoreError`` with `code`.
func expectError<R>(
    _ code: LocalStoreError.Code, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> R
) {
    do {
        _ = try body()
        Issue.record("expected a '\(code)' error, but the call succeeded. \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
    } catch let e as LocalStoreError {
        #expect(e.code == code, "\(comment?.rawValue ?? ""): \(e)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected a LocalStoreError '\(code)', got \(error)", sourceLocation: sourceLocation)
    }
}

/// The file descriptors of this process that refer to `path` (or its -wal / -shm files).
func openDescriptors(for path: String) -> [String] {
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return fds.compactMap { fd in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)") else { return nil }
        return target.hasPrefix(path) ? target : nil
    }
}

extension Library {
    /// Runs `body` with two stores of this library open on one new file (two connections, as two processes
    /// would have).
    func withTwoInstances(_ body: (SQLiteStore, SQLiteStore) throws -> Void) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("store.sqlite")
        let a = try open(path)
        defer { try? a.close() }
        let b = try open(path)
        defer { try? b.close() }
        try body(a, b)
    }
}
