import Foundation
import LocalStore
import Testing

@testable import LocalStoreLMDB

/// A read by id takes the plan its thread used last (``ThreadPlanMemo``) only when that plan was made for
/// the same environment, the same snapshot and the same table spelling: reads that alternate between two
/// stores whose snapshots have the same ids, between two tables, and across a redefinition each get
/// their own table's row as it is defined now.
@Suite("LMDB: the per-thread read-by-id plan")
struct ThreadPlanMemoTests {
    /// Two stores, each with a table `T` of other columns and one commit after the definition, so that
    /// their snapshots carry the same transaction ids: every read finds its own store's row.
    @Test func twoEnvironmentsWithTheSameSnapshotIds() throws {
        let a = try TempDirectory()
        let b = try TempDirectory()
        let storeA = try LMDBStore(path: a.storePath)
        let storeB = try LMDBStore(path: b.storePath)
        defer {
            try? storeA.close()
            try? storeB.close()
        }
        try storeA.defineTable(TableSchema("T", ["text": .string]))
        try storeB.defineTable(TableSchema("T", ["number": .integer, "flag": .boolean]))
        try storeA.upsert([["id": "x", "text": "from a"]], into: "T")
        try storeB.upsert([["id": "x", "number": 7, "flag": true]], into: "T")
        #expect(storeA.environment.lastCommittedTxnId() == storeB.environment.lastCommittedTxnId())
        for _ in 0..<3 {
            let fromA = try storeA.read(table: "T", id: "x")
            let fromB = try storeB.read(table: "T", id: "x")
            #expect(fromA?["text"] == "from a" && fromA?["number"] == nil, "\(String(describing: fromA))")
            #expect(fromB?["number"] == 7 && fromB?["flag"] == true && fromB?["text"] == nil, "\(String(describing: fromB))")
        }
    }

    /// Two tables read in turn in one snapshot, and one table redefined (a new column, a new catalog
    /// generation) between reads: each read builds its table's items as defined in its snapshot.
    @Test func tablesInTurnAndARedefinition() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("A", ["text": .string]))
        try store.defineTable(TableSchema("B", ["number": .integer]))
        try store.upsert([["id": "x", "text": "a"]], into: "A")
        try store.upsert([["id": "x", "number": 2]], into: "B")
        for _ in 0..<3 {
            #expect(try store.read(table: "A", id: "x")?["text"] == "a")
            #expect(try store.read(table: "B", id: "x")?["number"] == 2)
            #expect(try store.read(table: "a", id: "x")?["text"] == "a")
        }
        #expect(try store.read(table: "A", id: "x")?.values.keys.sorted() == ["id", "text"])
        try store.defineTable(TableSchema("A", ["text": .string, "extra": .integer]))
        #expect(try store.read(table: "A", id: "x")?.values.keys.sorted() == ["extra", "id", "text"])
        try store.upsert([["id": "x", "extra": 5]], into: "A")
        #expect(try store.read(table: "A", id: "x")?["extra"] == 5)
    }

    /// Threads each keep their own plan: eight threads reading two tables of two stores in turn.
    @Test func threadsReadTheirOwnRows() throws {
        let a = try TempDirectory()
        let b = try TempDirectory()
        let storeA = try LMDBStore(path: a.storePath)
        let storeB = try LMDBStore(path: b.storePath)
        defer {
            try? storeA.close()
            try? storeB.close()
        }
        for (store, tag) in [(storeA, "a"), (storeB, "b")] {
            try store.defineTable(TableSchema("T", ["text": .string]))
            try store.defineTable(TableSchema("U", ["text": .string]))
            try store.upsert([["id": "x", "text": .string("T\(tag)")]], into: "T")
            try store.upsert([["id": "x", "text": .string("U\(tag)")]], into: "U")
        }
        let wrong = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { n in
            for k in 0..<400 {
                let (store, tag) = (n + k) % 2 == 0 ? (storeA, "a") : (storeB, "b")
                let table = k % 3 == 0 ? "U" : "T"
                if (try? store.read(table: table, id: "x")?["text"]) != .string("\(table)\(tag)") { wrong.withLock { $0 += 1 } }
            }
        }
        #expect(wrong.withLock { $0 } == 0)
    }
}
