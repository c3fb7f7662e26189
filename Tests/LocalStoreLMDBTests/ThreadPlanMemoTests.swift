import Foundation
@testable import LocalStore
import Testing

@testable import LocalStoreLMDB

/// A read by id takes the plan its thread used last (``ThreadPlanMemo``) only when that plan was made for
/// the same environment, the same snapshot and the same table spelling: reads that alternate between two
/// stores whose snapshots have the same ids, between two tables, and across a redefinition each get
/// their own table's row as it is defined now.
@Suite("LMDB: the per-thread read-by-id plan")
struct ThreadPlanMemoTests {
    /// Runs `body` with two new stores in two directories, closing them after.
    private static func withTwoStores(_ body: (LMDBStore, LMDBStore) throws -> Void) throws {
        let a = try TempDirectory()
        let b = try TempDirectory()
        let storeA = try LMDBStore(path: a.storePath)
        let storeB = try LMDBStore(path: b.storePath)
        defer {
            try? storeA.close()
            try? storeB.close()
        }
        try body(storeA, storeB)
    }

    /// Two stores, each with a table `T` of other columns and one commit after the definition, so that
    /// their snapshots carry the same transaction ids: every read finds its own store's row.
    @Test func twoEnvironmentsWithTheSameSnapshotIds() throws {
        try Self.withTwoStores { storeA, storeB in
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
        try Self.withTwoStores { storeA, storeB in
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

    /// The memo lends its plan only for the environment, snapshot and spelling it was found right for,
    /// keeps exactly the plan it remembered last alive (it holds it unmanaged: the retain and release are
    /// its own), and lets it go when it remembers another or is itself freed.
    @Test func theMemoOwnsTheOnePlanItRemembers() throws {
        func plan(_ name: String) -> ReadByIdPlan {
            let schema = TableSchema(name, ["text": .string])
            return ReadByIdPlan(
                generation: 1, name: name,
                table: TableDefinition(schema: schema, database: TableDefinition.databaseName(table: name), indexes: []), dbi: 0)
        }
        weak var first: ReadByIdPlan?
        weak var second: ReadByIdPlan?
        var memo: ThreadPlanMemo? = ThreadPlanMemo()
        do {
            let a = plan("A")
            first = a
            memo?.remember(a, environment: 7, snapshot: 3)
        }
        #expect(first != nil)
        #expect(memo?.withPlan(environment: 7, snapshot: 3, name: "A") { $0 === first } == true)
        #expect(memo?.withPlan(environment: 7, snapshot: 4, name: "A") { _ in true } == nil)
        #expect(memo?.withPlan(environment: 8, snapshot: 3, name: "A") { _ in true } == nil)
        #expect(memo?.withPlan(environment: 7, snapshot: 3, name: "a") { _ in true } == nil)
        do {
            let b = plan("B")
            second = b
            memo?.remember(b, environment: 7, snapshot: 4)
        }
        #expect(first == nil)
        #expect(memo?.withPlan(environment: 7, snapshot: 4, name: "B") { $0 === second } == true)
        memo = nil
        #expect(second == nil)
    }
}

/// A read by id puts its item's values in the thread's spare buffer when the item read last was dropped
/// (``RecordItemBuilder/item(_:reusing:)``): an item still held — on this thread or another — keeps its
/// values, a changed item is its own copy, and a long record is not kept.
@Suite("LMDB: the per-thread spare value buffer")
struct SpareValueBufferTests {
    private static func buffer(_ item: Item?) -> ObjectIdentifier? { item?.row.map { ObjectIdentifier($0.values) } }

    private static func store(_ dir: TempDirectory) throws -> LMDBStore {
        let store = try LMDBStore(path: dir.storePath)
        try store.defineTable(TableSchema("T", ["text": .string, "n": .integer]))
        try store.upsert(
            [["id": "a", "text": "first", "n": 1], ["id": "b", "text": "second", "n": 2], ["id": "c", "text": .string(String(repeating: "x", count: 5000)), "n": 3]],
            into: "T")
        return store
    }

    @Test func heldItemsKeepTheirValues() throws {
        let dir = try TempDirectory()
        let store = try Self.store(dir)
        defer { try? store.close() }
        // Dropped: the next read refills the same buffer.
        let dropped = try Self.buffer(store.read(table: "T", id: "a"))
        let next = try store.read(table: "T", id: "b")
        #expect(Self.buffer(next) == dropped && dropped != nil)
        #expect(next?["text"] == "second" && next?["n"] == 2)
        // Held: the next read gets a buffer of its own, and the held item is unchanged.
        let third = try store.read(table: "T", id: "a")
        #expect(Self.buffer(third) != Self.buffer(next))
        #expect(next?["text"] == "second" && next?["n"] == 2 && next?["id"] == "b")
        #expect(third?["text"] == "first" && third?["n"] == 1)
        // Changed: a copy; the read after it is not affected, nor is the change.
        var changed = try store.read(table: "T", id: "b")
        changed?["text"] = "changed"
        let after = try store.read(table: "T", id: "a")
        #expect(changed?["text"] == "changed" && changed?["n"] == 2)
        #expect(after?["text"] == "first")
        #expect(next?["text"] == "second" && third?["text"] == "first")
    }

    @Test func aLongRecordIsNotKept() throws {
        let dir = try TempDirectory()
        let store = try Self.store(dir)
        defer { try? store.close() }
        let long = try Self.buffer(store.read(table: "T", id: "c"))
        let short = try Self.buffer(store.read(table: "T", id: "a"))
        #expect(long != nil && short != nil)
        #expect(ThreadPlanMemo.withCurrent { memo in memo.spare.map { ObjectIdentifier($0) } } == short)
        _ = try store.read(table: "T", id: "c")
        #expect(ThreadPlanMemo.withCurrent { memo in memo.spare == nil })
    }

    /// A record the one-pass decoder does not take (a json value) is not kept either, whether it was
    /// read into the free spare or into a new buffer: its values are not the thread's to keep.
    @Test func aJsonRecordIsNotKept() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("J", ["text": .string, "doc": .json]))
        let doc: JSON = .object(["list": .array([.int(1), .double(2.5)]), "flag": .bool(true)])
        try store.upsert([["id": "p", "text": "plain"], ["id": "j", "text": "tree", "doc": .json(doc)]], into: "J")
        func spare() -> ObjectIdentifier? { ThreadPlanMemo.withCurrent { memo in memo.spare.map { ObjectIdentifier($0) } } }
        let plain = try Self.buffer(store.read(table: "J", id: "p"))
        #expect(plain != nil && spare() == plain)
        // Into the free spare (refilled), then into a new buffer: neither is kept.
        #expect(try store.read(table: "J", id: "j")?["doc"] == .json(doc))
        #expect(spare() == nil)
        #expect(try store.read(table: "J", id: "j")?["doc"] == .json(doc))
        #expect(spare() == nil)
        #expect(try store.read(table: "J", id: "p")?["text"] == "plain")
        #expect(spare() != nil)
    }

    /// Items read on one thread and read, kept or dropped on others while the first thread reads on.
    @Test func itemsHandedToOtherThreads() throws {
        let dir = try TempDirectory()
        let store = try Self.store(dir)
        defer { try? store.close() }
        let wrong = Locked(0)
        let queue = DispatchQueue(label: "consumer", attributes: .concurrent)
        let group = DispatchGroup()
        for k in 0..<2000 {
            let id = k % 2 == 0 ? "a" : "b"
            guard let item = try store.read(table: "T", id: .string(id)) else {
                wrong.withLock { $0 += 1 }
                continue
            }
            queue.async(group: group) {
                let expected: Value = id == "a" ? "first" : "second"
                for _ in 0..<3 where item["text"] != expected || item["id"] != .string(id) {
                    wrong.withLock { $0 += 1 }
                }
            }
        }
        group.wait()
        #expect(wrong.withLock { $0 } == 0)
    }
}

extension SpareValueBufferTests {
    /// Rows of a narrow and a wide table read in turn, each item dropped: every item has its own table's
    /// values (a spare narrower than the row is never refilled — under AddressSanitizer an overflow of it
    /// is reported).
    @Test func tablesOfTwoWidths() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("Narrow", ["a": .string]))
        try store.defineTable(TableSchema("Wide", ["a": .string, "b": .string, "c": .integer, "d": .string, "e": .boolean]))
        try store.upsert([["id": "x", "a": "narrow"]], into: "Narrow")
        try store.upsert([["id": "x", "a": "wide a", "b": "wide b", "c": 3, "d": "wide d", "e": true]], into: "Wide")
        for _ in 0..<4 {
            #expect(try store.read(table: "Narrow", id: "x")?.values == ["id": "x", "a": "narrow"])
            #expect(
                try store.read(table: "Wide", id: "x")?.values == ["id": "x", "a": "wide a", "b": "wide b", "c": 3, "d": "wide d", "e": true])
        }
    }
}
