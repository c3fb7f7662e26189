import CLMDB
import Foundation
import LocalStore
@testable import LocalStoreLMDB
import Testing

/// `delete(matching:)` without `top`/`skip` deletes the rows where the walk of its plan meets them
/// (the walked index entry and the record by cursor, the other index entries by key). Over every
/// plan kind that takes that path — an index range, a compound index range, a primary-key range,
/// a full scan — and over long (truncated) keys, exactly the matching rows go and every index
/// still answers as a full scan does.
@Suite("LMDB delete by walking")
struct DeleteWalkTests {
    static let schema = TableSchema(
        name: "P", columns: PlannerEquivalenceTests.schema.columns,
        indexes: [TableIndex(("n", .ascending), ("s", .descending))])

    static let long = PlannerEquivalenceTests.longPrefix

    /// Queries whose plans take the walking path, with a part of the plan's name each must have.
    static let cases: [(QueryPredicate, String)] = [
        (Field("i") == .literal(.int(1)), "index"),
        (Field("s") >= .literal(.string(long)), "index"),
        (Field("s").starts(with: .literal(.string("a"))), "index"),
        (Field("bin") == .literal(.binary(Array(repeating: 7, count: 500))), "index"),
        (Field("n") == .literal(.int(3)), "using"),
        (Field("n") == .literal(.int(2)) && Field("s") < .literal(.string("b")), "using"),
        (Field("id") > .literal(.string("r5")), "primary key range"),
        (Field("id") >= .literal(.string(long)), "primary key range"),
        (Field("u") == .literal(.string("a")), "full scan"),
        (Field("u").contains(.literal(.string("x"))) || Field("n") == .literal(.int(1)), "full scan"),
    ]

    @Test("exactly the matches go and every index stays consistent, over every walked plan", arguments: [31, 32])
    func walkedDeletes(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        for (predicate, planPart) in Self.cases {
            let dir = try TempDirectory()
            let store = try LMDBStore(path: dir.storePath)
            try store.defineTable(Self.schema)
            try store.upsert(PlannerEquivalenceTests.makeRows(&rng), into: "P")
            let q = Query("P", where: predicate)
            let plan = try store.explain(q)
            #expect(plan.contains(planPart), "\(plan) for \(predicate)")
            let before = try store.read(Query("P")).items
            let doomed = Set(try store.read(q).items.compactMap { $0.id?.stringValue.map(Collation.noCaseKey) })
            #expect(!doomed.isEmpty, "\(predicate) matches no row: the case tests nothing")
            try store.delete(matching: q)
            let after = try store.read(Query("P")).items
            #expect(after == before.filter { !doomed.contains(Collation.noCaseKey($0.id?.stringValue ?? "")) }, "\(predicate)")
            #expect(try store.count("P", where: predicate) == 0)
            // Every index (single and compound) holds exactly the remaining rows: an equality on an
            // indexed column reads (and counts, from its entries alone) through the index, so an
            // entry left behind shows as a wrong count or as a `corrupt` read.
            try Self.checkIndexes(store, before: before, after: after, "\(predicate)")
            try store.close()
        }
    }

    static func checkIndexes(_ store: LMDBStore, before: [Item], after: [Item], _ context: String) throws {
        let rows = after.map { item in schema.columns.map { item[$0.name] ?? .null } }
        var checked = 0
        for column in ["i", "d", "s", "t", "b", "bin", "n"] {
            var values: [Value] = []
            for item in before {
                if let v = item[column], !v.isNull, !values.contains(v) { values.append(v) }
            }
            for v in values {
                let q = Query("P", where: Field(column) == .literal(v), sort: column == "n" ? [SortKey("n"), SortKey("s", .descending)] : [])
                let expected = try ResolvedQuery(q, schema: schema).apply(to: rows)
                let plan = try store.explain(q)
                #expect(try store.read(q) == expected, "\(column) == \(v) (\(plan)) after \(context)")
                var counting = q
                counting.top = 0
                counting.includeTotalCount = true
                #expect(try store.read(counting).totalCount == expected.items.count, "count of \(column) == \(v) after \(context)")
                checked += 1
            }
        }
        #expect(checked > 30)
    }

    @Test("a query with top or skip, or a multi-range plan, still deletes exactly its rows")
    func otherPlans() throws {
        var rng = SeededRNG(seed: 33)
        let queries = [
            Query("P", where: Field("i") == .literal(.int(1)), top: 3),
            Query("P", where: Field("n") == .literal(.int(1)), sort: [SortKey("s")], skip: 2),
            Query("P", where: Field("n").isIn([.int(1), .int(4)])),
        ]
        for q in queries {
            let dir = try TempDirectory()
            let store = try LMDBStore(path: dir.storePath)
            try store.defineTable(Self.schema)
            try store.upsert(PlannerEquivalenceTests.makeRows(&rng), into: "P")
            let before = try store.read(Query("P")).items
            let doomed = Set(try store.read(q).items.compactMap { $0.id?.stringValue.map(Collation.noCaseKey) })
            #expect(!doomed.isEmpty)
            try store.delete(matching: q)
            let after = try store.read(Query("P")).items
            #expect(after == before.filter { !doomed.contains(Collation.noCaseKey($0.id?.stringValue ?? "")) }, "\(q)")
            try Self.checkIndexes(store, before: before, after: after, "\(q)")
            try store.close()
        }
    }
}

/// A damaged record met while deleting in place: `corrupt`, and nothing deleted (the rows deleted
/// before it are rolled back with the transaction).
@Suite("LMDB delete by walking, damaged records")
struct DeleteWalkDamageTests {
    /// Cuts the stored record of `id` (in `table`, `P` by default) to `keep` bytes (below zero: all but the last `-keep`), with liblmdb directly.
    static func truncateRecord(_ path: String, id: String, keep: Int, table: String = "P") throws {
        var env: OpaquePointer?
        try #require(mdb_env_create(&env) == 0)
        defer { mdb_env_close(env) }
        try #require(mdb_env_set_maxdbs(env, 64) == 0)
        try #require(mdb_env_open(env, path, 0, 0o600) == 0)
        var txn: OpaquePointer?
        try #require(mdb_txn_begin(env, nil, 0, &txn) == 0)
        var dbi: MDB_dbi = 0
        try #require(mdb_dbi_open(txn, "t:" + table.lowercased(), 0, &dbi) == 0)
        var key = Array(id.lowercased().utf8) + [0, 0]  // the NOCASE id key of an id without NUL
        var record: [UInt8] = []
        key.withUnsafeMutableBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
            var dv = MDB_val()
            if mdb_get(txn, dbi, &kv, &dv) == 0 { record = Array(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)) }
        }
        // `keep` below zero: every byte but the last `-keep`.
        let kept = keep < 0 ? record.count + keep : keep
        try #require(record.count > kept && kept > 0, "no record for \(id)")
        var cut = Array(record.prefix(kept))
        let rc = key.withUnsafeMutableBytes { k in
            cut.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                return mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
        try #require(rc == 0)
        try #require(mdb_txn_commit(txn) == 0)
    }

    @Test("a damaged record met by the walk: corrupt, and every row is still there", arguments: [0, 1, 2])
    func damagedRecord(position: Int) throws {
        let dir = try TempDirectory()
        let schema = TableSchema(
            name: "P", columns: [Column("id", .string), Column("n", .integer, indexed: true), Column("s", .string, indexed: true)])
        var store = try LMDBStore(path: dir.storePath)
        try store.defineTable(schema)
        try store.upsert((0..<30).map { k in ["id": .string("r\(k)"), "n": .int(Int64(k % 3)), "s": .string("s\(k)")] }, into: "P")
        try store.close()
        // The rows with n == 0 are walked in id order (r0, r12, r15, ...): damage the first, one in
        // the middle or the last, so that none, some or all the others were deleted before it.
        let doomed = (0..<30).filter { $0 % 3 == 0 }.map { "r\($0)" }.sorted()
        let victim = [doomed[0], doomed[doomed.count / 2], doomed[doomed.count - 1]][position]
        try Self.truncateRecord(dir.storePath, id: victim, keep: 5)
        store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        let q = Query("P", where: Field("n") == .literal(.int(0)))
        #expect(try store.explain(q).hasPrefix("index"))
        #expect(errorCode { try store.delete(matching: q) } == .corrupt)
        #expect(errorCode { try store.write { tx in try tx.delete(matching: q) } } == .corrupt)
        // Nothing was deleted: every record, and every index entry, is still there.
        #expect(try store.count("P") == 30)
        #expect(try store.count("P", where: Field("n") == .literal(.int(0))) == 10)
        for k in 0..<30 where "r\(k)" != victim {
            #expect(try store.read(table: "P", id: "r\(k)")?["s"] == .string("s\(k)"))
            #expect(try store.count("P", where: Field("s") == .literal(.string("s\(k)"))) == 1)
        }
    }
}

/// setDeltaToken's lookup of a pair's rows (LMDB's shortcut) against the generic query it replaces.
@Suite("LMDB: a delta token's rows, shortcut against the generic query")
struct DeltaTokenLookupTests {
    @Test("a pair's row whose value is damaged (its record cut short): corrupt, as the generic query")
    func damagedRow() throws {
        let dir = try TempDirectory()
        var store = try LMDBStore(path: dir.storePath)
        try store.setDeltaToken(Date(timeIntervalSince1970: 1_000), table: "Todo", queryId: "q")
        try store.setDeltaToken(Date(timeIntervalSince1970: 2_000), table: "Todo", queryId: "other")
        try store.close()
        try DeleteWalkDamageTests.truncateRecord(dir.storePath, id: DeltaTokenKey.rowId(table: "Todo", queryId: "q"), keep: -1, table: "MS_TableConfig")
        store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        let (fast, generic) = try store.write { tx -> (LocalStoreError.Code?, LocalStoreError.Code?) in
            let shortcuts = try #require(tx as? any SystemTableShortcuts)
            return (
                errorCode { _ = try shortcuts.deltaTokenRowIds(table: "Todo", queryId: "q") },
                errorCode { _ = try tx.genericDeltaTokenRowIds(table: "Todo", queryId: "q") }
            )
        }
        #expect(generic == .corrupt)
        #expect(fast == generic)
        // The other pair's row is read as before.
        #expect(try store.deltaToken(table: "Todo", queryId: "other") == Date(timeIntervalSince1970: 2_000))
    }
}
