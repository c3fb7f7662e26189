import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreOpener
import LocalStoreSQLCipher
import LocalStoreSQLite
import Logging
import Synchronization
import Testing

/// A directory removed when the value is released.
final class ScratchDirectory {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ls-opener-\(UUID().uuidString)")
    init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(at: url) }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// Expects `body` to throw a ``LocalStoreError`` with `code` and returns its message.
@discardableResult
func expectError(
    _ code: LocalStoreError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> String {
    do {
        try body()
        Issue.record("expected a '\(code)' error, but the call succeeded", sourceLocation: sourceLocation)
    } catch let error as LocalStoreError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error.message
    } catch {
        Issue.record("expected a LocalStoreError '\(code)', got \(error)", sourceLocation: sourceLocation)
    }
    return ""
}

@Suite("Store URLs")
struct StoreURLTests {
    @Test(
        "valid store URLs",
        arguments: [
            ("memory:", StoreURL.Scheme.memory, ""), ("MEMORY:", .memory, ""),
            ("sqlite:store.sqlite", .sqlite, "store.sqlite"), ("sqlite:/var/lib/app/s.db", .sqlite, "/var/lib/app/s.db"),
            ("SQLCipher:/a/b.db", .sqlcipher, "/a/b.db"), ("lmdb:/srv/store.lmdb", .lmdb, "/srv/store.lmdb"),
            ("sqlite:///var/lib/my%20store.db", .sqlite, "/var/lib/my store.db"),
            ("lmdb://localhost/tmp/d", .lmdb, "/tmp/d"), ("sqlite:a:b", .sqlite, "a:b"),
        ])
    func valid(_ text: String, _ scheme: StoreURL.Scheme, _ path: String) throws {
        let url = try StoreURL(text)
        #expect(url.scheme == scheme && url.path == path)
        #expect(try StoreURL(url.description) == url)
        #expect(try StoreURL(scheme: scheme, path: path) == url)
    }

    @Test(
        "invalid store URLs are invalidURL errors naming the part at fault",
        arguments: [
            ("", "has no scheme"), ("store.db", "has no scheme"), (":/x", "has no scheme"),
            ("postgres://x", "unknown scheme 'postgres'"), ("memory:/x", "memory: takes no path"),
            ("sqlite:", "sqlite: needs a file path"), ("lmdb:", "lmdb: needs a directory path"), ("sqlite://", "needs a file path"),
            ("lmdb://db.example.com/x", "names the host 'db.example.com'"),
            ("sqlite:/x?mode=ro&cache=shared", "parameters 'mode', 'cache'"), ("sqlite:/x?", "has a query ('?')"),
            ("sqlite:///a%zz", "malformed percent escape"), ("sqlite:a\u{0}b", "NUL"),
        ])
    func invalid(_ text: String, _ fragment: String) {
        let message = expectError(.invalidURL) { _ = try StoreURL(text) }
        #expect(message.contains(fragment), "\(message)")
    }

    @Test(
        "a URL carrying a key is refused, and the key is never repeated",
        arguments: [
            "sqlcipher:/x.db?key=SECRETKEY", "sqlcipher:/x.db?cipher=aes&Passphrase=SECRETKEY",
            "sqlcipher://user:SECRETKEY@/x.db", "sqlcipher://SECRETKEY@localhost/x.db",
        ])
    func keyInURL(_ text: String) {
        let message = expectError(.invalidURL) { _ = try StoreURL(text) }
        #expect(!message.contains("SECRETKEY"), "\(message)")
        #expect(message.contains("never"), "\(message)")
        #expect(message.contains("key=") || message.contains("Passphrase=") || message.contains("user information"))
    }

    @Test("the scheme/path initializer refuses a path for memory and an empty one for files")
    func schemeAndPath() {
        expectError(.invalidURL) { _ = try StoreURL(scheme: .memory, path: "/x") }
        expectError(.invalidURL) { _ = try StoreURL(scheme: .lmdb, path: "") }
        #expect(StoreURL.memory.description == "memory:")
    }
}

@Suite("Opening a store from its URL")
struct StoreOpenerTests {
    static let schema = TableSchema("TodoItem", ["text": .string])

    /// Writes a row, closes, reopens through the opener and reads it back; returns the reopened store.
    static func roundTrip(_ url: String, key: @autoclosure () throws -> SQLCipherKey? = nil) throws -> any LocalStore {
        let store = try StoreOpener.open(url, key: key())
        try store.defineTable(schema)
        try store.upsert([["id": "a", "text": "milk"]], into: "TodoItem")
        try store.close()
        let again = try StoreOpener.open(try StoreURL(url), key: key())
        #expect(try again.read(table: "TodoItem", id: "a")?["text"] == "milk")
        return again
    }

    @Test("sqlite:, lmdb: and sqlcipher: open their backend, and the data is there when reopened")
    func persistentBackends() throws {
        let dir = try ScratchDirectory()
        let sqlite = try Self.roundTrip("sqlite:" + dir.path("s.sqlite"))
        #expect(sqlite is SQLiteStore)
        try sqlite.close()
        let lmdb = try Self.roundTrip("lmdb:" + dir.path("s.lmdb"))
        #expect(lmdb is LMDBStore)
        try lmdb.close()
    }

    @Test("sqlcipher: opens its backend, the data is there when reopened, and only with the key",
          .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func encryptedBackend() throws {
        let dir = try ScratchDirectory()
        let cipher = try Self.roundTrip("sqlcipher:" + dir.path("c.db"), key: try .passphrase("opener test"))
        #expect(cipher is SQLCipherStore)
        try cipher.close()
        // The encrypted file is not readable as plain SQLite, and not with another key.
        expectError(.notADatabase) { _ = try StoreOpener.open("sqlite:" + dir.path("c.db")).tableSchemas() }
        expectError(.wrongKey) { _ = try StoreOpener.open("sqlcipher:" + dir.path("c.db"), key: try .passphrase("other")) }
    }

    @Test("memory: opens an in-memory store with the given system table names and logger")
    func memory() throws {
        let names = SystemTableNames(operations: "Ops", errors: "Errs", config: "Conf")
        let sink = LogSink()
        let store = try StoreOpener.open("memory:", systemTableNames: names, logger: sink.logger)
        defer { try? store.close() }
        #expect(store is InMemoryStore && store.systemTableNames == names)
        try store.defineTable(Self.schema)
        try store.upsert([["id": "a", "text": "SECRET-VALUE"]], into: "TodoItem")
        _ = try store.read(Query("TodoItem"))
        let lines = sink.lines.withLock { $0 }
        #expect(lines.contains { $0.hasPrefix("debug write transaction committed") && $0.contains("micros=") })
        #expect(lines.contains { $0.hasPrefix("trace query") && $0.contains("plan=full scan") && $0.contains("rows=1") })
        #expect(!lines.contains { $0.contains("SECRET-VALUE") })
    }

    @Test("each backend gets its own options from StoreOpener.Options")
    func options() throws {
        let dir = try ScratchDirectory()
        var options = StoreOpener.Options()
        options.sqlite.durability = .full
        options.sqlite.maximumReaders = 2
        options.lmdb.durability = .off
        options.lmdb.maximumReaders = 50
        let sqlite = try #require(try StoreOpener.open("sqlite:" + dir.path("s.sqlite"), options: options) as? SQLiteStore)
        #expect(sqlite.options == options.sqlite)
        try sqlite.close()
        let lmdb = try #require(try StoreOpener.open("lmdb:" + dir.path("s.lmdb"), options: options) as? LMDBStore)
        #expect(lmdb.options.durability == .off && lmdb.options.maximumReaders == 50)
        try lmdb.close()
        options.sqlcipher.cipherPageSize = 1000
        expectError(.invalidValue) { _ = try StoreOpener.open("sqlcipher:" + dir.path("c.db"), key: try .raw(Array(repeating: 7, count: 32)), options: options) }
    }

    @Test("a key is required for sqlcipher: and refused for every other backend")
    func keys() throws {
        let dir = try ScratchDirectory()
        let key = try SQLCipherKey.passphrase("k")
        var message = expectError(.invalidValue) { _ = try StoreOpener.open("sqlcipher:" + dir.path("c.db")) }
        #expect(message.contains("needs a key"))
        for url in ["memory:", "sqlite:" + dir.path("s.sqlite"), "lmdb:" + dir.path("s.lmdb")] {
            message = expectError(.invalidValue) { _ = try StoreOpener.open(url, key: key) }
            #expect(message.contains("only sqlcipher: stores take a key"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).isEmpty, "nothing was created")
        expectError(.invalidURL) { _ = try StoreOpener.open("sqlcipher:" + dir.path("c.db") + "?key=abc", key: key) }
    }
}

/// Collects log lines.
final class LogSink: Sendable {
    let lines = Mutex<[String]>([])

    var logger: Logger {
        var logger = Logger(label: "opener-test") { _ in Handler(sink: self) }
        logger.logLevel = .trace
        return logger
    }

    struct Handler: LogHandler {
        let sink: LogSink
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let md = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            sink.lines.withLock { $0.append("\(event.level) \(event.message) \(md.joined(separator: " "))") }
        }
    }
}

@Suite("The async API on every backend")
struct AsyncCoverageTests {
    struct Todo: Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    @Test("the async forms of the conveniences, the queue, delta tokens, Codable and run {} agree with the sync ones (SQLCipher)",
          .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func asyncFormsSQLCipher() async throws { try await asyncForms("sqlcipher") }

    @Test("the async forms of the conveniences, the queue, delta tokens, Codable and run {} agree with the sync ones", arguments: ["memory", "sqlite", "lmdb"])
    func asyncForms(_ backend: String) async throws {
        let dir = try ScratchDirectory()
        let url = backend == "memory" ? "memory:" : "\(backend):" + dir.path("store")
        let store = try StoreOpener.open(url, key: backend == "sqlcipher" ? try .raw(Array(repeating: 9, count: 32)) : nil)
        try await store.defineTable(TableSchema("Todo", ["text": .string]))
        try await store.upsert(records: [Todo(id: "a", text: "milk")], into: "Todo")
        #expect(try await store.read(Todo.self, table: "Todo", id: "a") == Todo(id: "a", text: "milk"))
        #expect(try await store.read(Todo.self, Query("Todo")) == [Todo(id: "a", text: "milk")])
        #expect(try await store.count("Todo") == 1)
        #expect(try await store.schema(of: "Todo")?.name == "Todo")
        #expect(try await store.systemProperties(for: "Todo") == [])

        let outcome = try await store.enqueue(.insert, ["id": "b", "text": "eggs"], into: "Todo")
        #expect(outcome.operation?.id == 1)
        #expect(try await store.queuedOperations().map(\.kind) == [.insert])
        #expect(try await store.pendingOperations(table: "Todo").count == 1)
        let op = try #require(try await store.beginPush())
        #expect(try await store.pushItem(for: op)?["text"] == "eggs")
        let error = try await store.recordPushError(for: op, statusCode: 409, message: "conflict")
        #expect(try await store.pushErrors().map(\.id) == [error.id])
        try await store.cancelAndDiscard(error)
        #expect(try await store.pendingOperationCount() == 0)
        #expect(try await store.operationErrors().isEmpty)

        let token = Date(timeIntervalSince1970: 1_700_000_000)
        try await store.setDeltaToken(token, table: "Todo", queryId: "all")
        #expect(try await store.deltaToken(table: "Todo", queryId: "all") == token)
        #expect(try await store.deltaTokens(table: "Todo") == ["all": token])
        let page = try await store.applyPulledPage([["id": "c", "text": "bread"]], into: "Todo", queryId: nil)
        #expect(page.upserted == 1)
        #expect(try await store.purge("Todo", where: Field("text") == "bread") == 1)
        let entries = try await store.run { try $0.configEntries() }
        #expect(try await store.configEntries() == entries)
        try await store.delete(ids: ["a"], from: "Todo")
        #expect(try await store.count("Todo") == 0)

        #expect(try await store.run { try $0.count("Todo") } == 0)
        if let checkable = store as? any IntegrityChecking & LocalStore {
            #expect(try await checkable.checkIntegrity() == [])
        }
        try await store.close()
        await #expect(throws: LocalStoreError.self) { try await store.count("Todo") }
    }
}
