import Foundation
import LocalStore
import LocalStoreBench
import Testing

@testable import LocalStoreSQLite

@Suite("SQLite compound indexes")
struct CompoundIndexSQLTests {
    /// The bench's table and list query: SQLite must search the compound index for the priority and
    /// read it in order (no temporary B-tree for the ORDER BY), on the system SQLite and on 3.15.2.
    @Test("the bench's list query reads the compound index in order", arguments: Library.available)
    func listQueryPlan(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(TodoRecord.schema)
        let base = Date(timeIntervalSinceReferenceDate: 700_000_000)
        var records: [TodoRecord] = []
        for i in 0..<2000 {
            let updatedAt: Date = base.addingTimeInterval(Double(i % 97))
            records.append(
                TodoRecord(
                    id: "r\(i)", text: "t\(i)", complete: i % 2 == 0, priority: Int64(i % 5), createdAt: base,
                    updatedAt: updatedAt, version: "v", deleted: false))
        }
        try store.upsert(records.map { (r: TodoRecord) -> Item in r.item }, into: "TodoItem")
        let query = TodoRecord.listQuery(priority: 3)
        let plan = try store.explain(query)
        #expect(plan.contains("compound:priority_updatedat_desc"), "\(plan)")
        #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
        // The rows are the ones the shared evaluator picks.
        let matching: [TodoRecord] = records.filter { (r: TodoRecord) -> Bool in r.priority == 3 }
        let sorted: [TodoRecord] = matching.sorted { (a: TodoRecord, b: TodoRecord) -> Bool in
            if a.updatedAt != b.updatedAt { return a.updatedAt > b.updatedAt }
            return ASCII.compareFolded(a.id, b.id) < 0
        }
        let expected: [String] = sorted.prefix(50).map { (r: TodoRecord) -> String in r.id }
        #expect(try store.read(query).items.map { $0["id"]?.stringValue ?? "" } == Array(expected))
        // An incremental pull (`updatedAt ge T order by updatedAt, id`) on a compound index led by
        // updatedAt: the id the SQL index ends with answers the tie-break, so nothing is sorted.
        try store.defineTable(TableSchema(name: "Pull", columns: [Column("updatedAt", .date)], indexes: [TableIndex(("updatedAt", .ascending))]))
        try store.upsert((0..<500).map { ["id": .string("p\($0)"), "updatedAt": .date(base.addingTimeInterval(Double($0 % 50)))] }, into: "Pull")
        let pull = Query("Pull", where: Field("updatedAt") >= .literal(.date(base.addingTimeInterval(40))), sort: [SortKey("updatedAt")], top: 50)
        let pullPlan = try store.explain(pull)
        #expect(pullPlan.contains("compound:updatedat"), "\(pullPlan)")
        #expect(!pullPlan.contains("TEMP B-TREE"), "\(pullPlan)")
    }

    /// The index statement: `DESC` components and the id appended.
    @Test("the index is created with its directions and the id", arguments: Library.available)
    func indexStatement(_ library: Library) throws {
        let dir = try TemporaryDirectory()
        let store = try library.open(dir.path("store.sqlite"))
        defer { try? store.close() }
        try store.defineTable(TodoRecord.schema)
        let rows = try store.query(sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND name LIKE '%compound%'")
        #expect(rows.map { $0["sql"]?.stringValue ?? "" } == [
            #"CREATE INDEX "localstore:index:TodoItem:compound:priority_updatedat_desc" ON "TodoItem" ("priority", "updatedAt" DESC, "id")"#
        ])
    }
}
