import Foundation
import LocalStoreBench
@testable import LocalStoreBenchBaselines
import Testing

/// The C baselines keep LocalStore's operation-id guarantee — an id is never given twice, also after the
/// newest operation is pushed and after a reopen (docs/semantics.md) — so `local-write` compares the
/// same work: `sqlite-c` through `AUTOINCREMENT`, `lmdb-c` through a high-water entry in its config.
@Suite("C baselines never give an operation id twice")
struct BaselineOperationIdTests {
    static func record(_ n: Int) -> TodoRecord {
        TodoRecord(
            id: "item-\(n)", text: "text \(n)", complete: false, priority: Int64(n % 5),
            createdAt: Date(timeIntervalSinceReferenceDate: Double(n)), updatedAt: Date(timeIntervalSinceReferenceDate: Double(n)),
            version: "v", deleted: false)
    }

    /// Three writes, the queue drained, a write, a reopen, a write: ids 1, 2, 3, then 4 and 5.
    func check(_ subject: some BenchSubject, ids: () throws -> [Int64]) throws {
        try subject.setUp()
        for n in 1...3 { try subject.localWrite(Self.record(n)) }
        #expect(try ids() == [1, 2, 3])
        while try subject.drainOne() {}
        #expect(try ids() == [])
        try subject.localWrite(Self.record(4))
        #expect(try ids() == [4])
        while try subject.drainOne() {}
        #expect(try subject.reopen(andRead: "item-1"))
        try subject.localWrite(Self.record(5))
        #expect(try ids() == [5])
        try subject.close()
    }

    static func directory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("baseline-ids-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func sqliteC() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let subject = try SQLiteCSubject(directory: dir)
        try check(subject, ids: subject.operationIds)
    }

    @Test func lmdbC() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let subject = try LMDBCSubject(directory: dir)
        try check(subject, ids: subject.operationIds)
    }
}
