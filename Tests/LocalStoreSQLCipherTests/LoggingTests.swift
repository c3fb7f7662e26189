import Foundation
import LocalStore
import LocalStoreSQLCipher
import LocalStoreSQLite
import Logging
import Synchronization
import Testing

/// Collects every log record.
final class CapturedLogs: Sendable {
    struct Record: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: [String: String]
        var text: String { "\(message) \(metadata.sorted { $0.key < $1.key })" }
    }
    let records = LockedValue<[Record]>([])

    func logger(level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: "test") { _ in Handler(sink: self) }
        logger.logLevel = level
        return logger
    }

    var all: [Record] { records.withLock { $0 } }

    struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let md = (event.metadata ?? [:]).mapValues { "\($0)" }
            sink.records.withLock { $0.append(Record(level: event.level, message: "\(event.message)", metadata: md)) }
        }
    }
}

@Suite("logging")
struct LoggingTests {
    @Test func statementsAndTimingsAtTraceWithoutBoundValues() throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let store = try SQLiteStore(path: dir.path("s.sqlite"), logger: logs.logger())
        try store.defineTable(TableSchema("T", ["secretText": .string]))
        try store.upsert([["id": "a", "secretText": "SENSITIVE-VALUE"]], into: "T")
        _ = try store.read(table: "T", id: "a")
        try store.close()
        let statements = logs.all.filter { $0.level == .trace && $0.message == "statement" }
        #expect(statements.contains { $0.metadata["sql"]?.contains("UPDATE") == true || $0.metadata["sql"]?.contains("INSERT") == true })
        #expect(statements.allSatisfy { $0.metadata["micros"].flatMap { Int($0) } != nil })
        #expect(logs.all.contains { $0.level == .debug && $0.message == "write transaction committed" })
        #expect(!logs.all.contains { $0.text.contains("SENSITIVE-VALUE") })
    }

    @Test func boundValuesOnlyWhenEnabled() throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let store = try SQLiteStore(
            path: dir.path("s.sqlite"), options: SQLiteStore.Options(logsBoundValues: true), logger: logs.logger())
        try store.defineTable(TableSchema("T", ["text": .string]))
        try store.upsert([["id": "a", "text": "VISIBLE-VALUE"]], into: "T")
        // The system tables' prepared statements bind their strings through `bind(text:at:)`: logged too.
        try store.setDeltaToken(Date(timeIntervalSince1970: 1), table: "T", queryId: "VISIBLE-QUERY")
        try store.setDeltaToken(Date(timeIntervalSince1970: 2), table: "T", queryId: "VISIBLE-QUERY")
        try store.close()
        #expect(logs.all.contains { $0.metadata["values"]?.contains("VISIBLE-VALUE") == true })
        #expect(logs.all.contains { $0.metadata["sql"]?.contains("UPDATE") == true && $0.metadata["values"]?.contains("VISIBLE-QUERY") == true })
    }

    @Test func quietAboveTraceAndNothingAtInfo() throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let store = try SQLiteStore(path: dir.path("s.sqlite"), logger: logs.logger(level: .info))
        try store.defineTable(TableSchema("T", ["text": .string]))
        try store.upsert([["id": "a", "text": "x"]], into: "T")
        try store.close()
        #expect(logs.all.isEmpty)
    }

    @Test(.enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func keysAreNeverLogged() throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let passphrase = "PASSPHRASE-\(UUID().uuidString)"
        let store = try SQLCipherStore(
            path: dir.path("s.db"), key: try .passphrase(passphrase), options: fast, logger: logs.logger())
        try store.defineTable(TableSchema("T", ["text": .string]))
        try store.upsert([["id": "a", "text": "x"]], into: "T")
        try store.rekey(to: rawKey)
        try store.close()
        #expect(!logs.all.isEmpty)
        let hexOfRawKey = (0..<32).map { String(format: "%02X", UInt8($0 * 7 & 0xFF)) }.joined()
        for r in logs.all {
            #expect(!r.text.contains(passphrase))
            #expect(!r.text.uppercased().contains(hexOfRawKey))
        }
    }

    /// A composite call (here a pulled page) runs its calls without a savepoint each: on SQLCipher every
    /// page a savepoint's body first changes is copied and encrypted once more. Inside a caller's
    /// transaction it takes one savepoint for the whole call; a caller's own calls keep theirs.
    @Test(arguments: ["sqlite", "sqlcipher"])
    func compositeCallsTakeNoSavepointPerCall(_ backend: String) throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let store: any LocalStore =
            backend == "sqlite"
            ? try SQLiteStore(path: dir.path("s.sqlite"), logger: logs.logger())
            : try SQLCipherStore(path: dir.path("s.db"), key: rawKey, options: fast, logger: logs.logger())
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["text": .string, "updatedAt": .date]))
        func page(_ n: Int) -> [Item] {
            (0..<3).map { ["id": .string("p\(n)-\($0)"), "text": "x", "updatedAt": .date(Date(timeIntervalSince1970: Double(n * 10 + $0)))] }
        }
        func savepoints(_ body: () throws -> Void) throws -> [String] {
            let before = logs.all.count
            try body()
            return logs.all.dropFirst(before).compactMap { r in
                guard r.level == .trace, r.message == "statement", let sql = r.metadata["sql"], sql.hasPrefix("SAVEPOINT") else { return nil }
                return sql
            }
        }
        #expect(try savepoints { _ = try store.applyPulledPage(page(1), into: "T", queryId: "q") } == [])
        #expect(try savepoints { _ = try store.enqueue(.insert, ["id": "e1", "text": "y"], into: "T") } == [])
        #expect(
            try savepoints { try store.write { tx in _ = try tx.applyPulledPage(page(2), into: "T", queryId: "q") } }
                == ["SAVEPOINT localstore_write"])
        #expect(
            try savepoints { try store.write { tx in try tx.upsert(page(3), into: "T") } } == ["SAVEPOINT localstore_call"])
        #expect(try store.count("T") == 10)
    }
}
