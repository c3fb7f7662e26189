import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite
import LocalStoreSync
import Testing

/// A backend the sync tests run on: opens (and reopens) a store in a directory.
struct SyncBackend: Sendable, CustomStringConvertible {
    let name: String
    let isPersistent: Bool
    let open: @Sendable (URL) throws -> any LocalStore
    var description: String { name }

    static let all: [SyncBackend] = [
        SyncBackend(name: "memory", isPersistent: false) { _ in try InMemoryStore() },
        SyncBackend(name: "sqlite", isPersistent: true) { try SQLiteStore(path: $0.appendingPathComponent("client.sqlite").path) },
        SyncBackend(name: "sqlcipher", isPersistent: true) {
            try SQLCipherStore(path: $0.appendingPathComponent("client.db").path, key: try SQLCipherKey.raw(Array(repeating: 7, count: 32)))
        },
        SyncBackend(name: "lmdb", isPersistent: true) { try LMDBStore(path: $0.appendingPathComponent("client.lmdb").path) },
    ].filter { $0.name != "sqlcipher" || SQLCipherLibrary.processRefusal == nil }
}

/// A new empty directory, removed by `cleanUp`.
func temporaryDirectory(_ label: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("localstore-sync-\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A transport that runs `hook` before forwarding a request for an item (for edits made during a push).
struct HookedTransport: SyncTransport {
    let inner: any SyncTransport
    let hook: @Sendable (_ method: String, _ itemId: String) async throws -> Void

    func insert(_ item: Item, into table: String) async throws -> Item {
        try await hook("insert", item.stringId ?? "")
        return try await inner.insert(item, into: table)
    }
    func replace(_ item: Item, in table: String, ifVersion version: String?) async throws -> Item {
        try await hook("replace", item.stringId ?? "")
        return try await inner.replace(item, in: table, ifVersion: version)
    }
    func delete(id: String, from table: String, ifVersion version: String?) async throws {
        try await hook("delete", id)
        try await inner.delete(id: id, from: table, ifVersion: version)
    }
    func page(_ request: PullRequest) async throws -> SyncPage {
        try await hook("page", request.query.table)
        return try await inner.page(request)
    }
}

/// A value a test can set from a `@Sendable` closure.
final class Box<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// The user columns and version of every live row, by id: what two converged replicas share.
func replica(_ items: [Item]) -> [String: [String: Value]] {
    var out: [String: [String: Value]] = [:]
    for item in items where item.value(forColumn: "deleted") != .bool(true) {
        guard let id = item.stringId else { continue }
        var row: [String: Value] = [:]
        for (k, v) in item where ["text", "complete", "version"].contains(k) && !v.isNull { row[k] = v }
        out[id] = row
    }
    return out
}

/// A transport whose next insert or replace reaches the service but whose answer is lost (transient).
struct LosingTransport: SyncTransport {
    let inner: any SyncTransport
    let loseNext: Box<Bool>

    private func lose() throws {
        if loseNext.value {
            loseNext.value = false
            throw SyncTransportError(.transient, message: "the connection dropped before the answer")
        }
    }
    func insert(_ item: Item, into table: String) async throws -> Item {
        let answer = try await inner.insert(item, into: table)
        try lose()
        return answer
    }
    func replace(_ item: Item, in table: String, ifVersion version: String?) async throws -> Item {
        let answer = try await inner.replace(item, in: table, ifVersion: version)
        try lose()
        return answer
    }
    func delete(id: String, from table: String, ifVersion version: String?) async throws {
        try await inner.delete(id: id, from: table, ifVersion: version)
    }
    func page(_ request: PullRequest) async throws -> SyncPage { try await inner.page(request) }
}
