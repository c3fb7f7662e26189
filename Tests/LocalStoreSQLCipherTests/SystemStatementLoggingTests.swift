import Foundation
import LocalStore
import LocalStoreSQLCipher
import LocalStoreSQLite
import Logging
import Testing

/// The statements the system-table shortcuts run, seen in the trace log: the SQL stores take the prepared
/// path (value-only updates, no `Query` compiled) on the system SQLite and on SQLCipher alike.
@Suite("SQL engine: system-table statements in the log")
struct SystemStatementLoggingTests {
    private func statements(_ logs: CapturedLogs) -> [String] {
        logs.all.filter { $0.level == .trace && $0.message == "statement" }.compactMap { $0.metadata["sql"] }
    }

    private func exercise(_ store: any LocalStore, _ logs: CapturedLogs) throws -> (before: Int, sql: [String]) {
        _ = try store.appendOperation(table: "T", itemId: "a")
        try store.setDeltaToken(Date(timeIntervalSinceReferenceDate: 1000), table: "T", queryId: "q")
        let before = statements(logs).count
        // The rows exist now: these update values only (the append also inserts its operation).
        _ = try store.appendOperation(table: "T", itemId: "b")
        try store.setDeltaToken(Date(timeIntervalSinceReferenceDate: 2000), table: "T", queryId: "q")
        #expect(try store.deltaToken(table: "T", queryId: "q") == Date(timeIntervalSinceReferenceDate: 2000))
        #expect(try store.operation(after: 0)?.itemId == "a")
        try store.write { tx in try tx.removeOperation(id: 1) }
        return (before, Array(statements(logs).dropFirst(before)))
    }

    private func check(_ sql: [String]) {
        let config = "\"MS_TableConfig\""
        let ops = "\"MS_TableOperations\""
        // The token: its value only. The append: the high-water mark advanced and the operation inserted
        // under it, two statements, without reading the largest id or the mark first.
        #expect(sql.filter { $0.hasPrefix("UPDATE OR FAIL \(config) SET \"value\" = ?1 WHERE") }.count == 1)
        #expect(sql.filter { $0.hasPrefix("UPDATE OR FAIL \(config) SET \"value\" = CAST(max(") }.count == 1)
        #expect(sql.filter { $0.hasPrefix("INSERT INTO \(ops) (\"id\", \"table\", \"tableKind\", \"itemId\", \"properties\") VALUES (CAST((SELECT") }.count == 1)
        #expect(!sql.contains { $0.hasPrefix("SELECT \"id\" FROM \(ops) ORDER BY") })
        #expect(sql.filter { $0.hasPrefix("SELECT \"value\" FROM \(config)") }.count == 1, "the token's read only")
        // The token's update commits by itself (nobody observes the store): no transaction around it. The
        // append and the removal run in theirs.
        #expect(sql.filter { $0.hasPrefix("BEGIN") }.count == 2, "\(sql)")
        // The sole-row update: the pair's one row found through the pair index.
        if let k = sql.firstIndex(where: { $0.hasPrefix("UPDATE OR FAIL \(config) SET \"value\" = ?1 WHERE rowid = (SELECT CASE WHEN count(*) = 1") }) {
            let before = sql[..<k].last { $0.hasPrefix("BEGIN") || $0.hasPrefix("COMMIT") }
            #expect(before?.hasPrefix("COMMIT") == true, "the append's transaction ended before it: \(sql)")
            #expect(k + 1 == sql.count || !sql[k + 1].hasPrefix("COMMIT"), "\(sql)")
        } else {
            Issue.record("no token update in \(sql)")
        }
        // No update of every column of a config row, no upsert's INSERT into it, no compiled query of it.
        #expect(!sql.contains { $0.hasPrefix("UPDATE OR FAIL \(config) SET \"id\"") })
        #expect(!sql.contains { $0.hasPrefix("INSERT OR IGNORE INTO \(config)") })
        #expect(sql.contains { $0.hasPrefix("SELECT \"id\", \"table\", \"tableKind\", \"itemId\", \"properties\" FROM \"MS_TableOperations\" WHERE \"id\" > ?1") })
        #expect(sql.contains("DELETE FROM \"MS_TableOperationErrors\" WHERE \"operationId\" = ?1"))
        #expect(sql.contains("DELETE FROM \"MS_TableOperations\" WHERE \"id\" = ?1"))
    }

    @Test func sqliteRunsThePreparedStatements() throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let store = try SQLiteStore(path: dir.path("s.sqlite"), logger: logs.logger())
        defer { try? store.close() }
        check(try exercise(store, logs).sql)
    }

    @Test(.enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func sqlcipherRunsThePreparedStatements() throws {
        let dir = try TempDir()
        let logs = CapturedLogs()
        let store = try SQLCipherStore(path: dir.path("s.db"), key: try .raw(Array(repeating: 7, count: 32)), logger: logs.logger())
        defer { try? store.close() }
        check(try exercise(store, logs).sql)
    }
}
