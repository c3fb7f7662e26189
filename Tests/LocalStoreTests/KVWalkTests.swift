import Foundation
import LocalStore
import LocalStoreLMDB
@testable import LocalStoreKV
import Testing

/// `KVStore`'s plans (the shared planner's) checked against `InMemoryStore`: index walks in the sort's
/// order (an exact walk, whose range holds exactly the matches, builds its items from the entries' records;
/// a tie on the sort's components sends it to the shared evaluator), walks in id order, the cost choice, the
/// system tables' indexes, the plan cache, and a damaged catalog.
@Suite("KVStore index walks")
struct KVWalkTests {
    static let schema = TableSchema(
        name: "T", columns: [Column("id", .string), Column("a", .integer), Column("b", .double), Column("c", .string)],
        indexes: [TableIndex(("a", .ascending), ("b", .descending))])

    /// 240 rows; `b` is unique unless `ties`, then it takes 6 values per `a`.
    static func rows(ties: Bool) -> [Item] {
        (0..<240).map { n -> Item in
            let id: Value = .string(n % 3 == 0 ? "Row\(n)" : "row\(n)")
            let b: Value = .double(ties ? Double(n % 6) : Double(n) * 1.5)
            return Item(["id": id, "a": .int(Int64(n % 4)), "b": b, "c": .string("c\(n % 5)")])
        }
    }

    struct Case: CustomStringConvertible {
        let query: Query
        /// Whether the plan is an exact walk.
        let exact: Bool
        var description: String { "\(query)" }
    }

    static let cases: [Case] = [
        Case(query: Query("T", where: Field("a") == 2, sort: [SortKey("b", .descending)], top: 10), exact: true),
        Case(query: Query("T", where: Field("a") == 1, sort: [SortKey("b", .descending)], skip: 3, top: 7, select: ["c"]), exact: true),
        Case(query: Query("T", where: Field("a") == 3, sort: [SortKey("b")], top: 5), exact: true),  // walked backwards
        Case(query: Query("T", where: Field("a") == 0, sort: [SortKey("b", .descending)], skip: 70, top: 5), exact: true),  // past the end
        Case(query: Query("T", where: .and([Field("a") == 2, Field("c") == "c1"]), sort: [SortKey("b", .descending)], top: 4), exact: false),
        Case(query: Query("T", where: .and([Field("a") == 2, Field("a") != 3]), sort: [SortKey("b", .descending)], top: 4), exact: false),
        // The planner counts a repeated equality once: the walk tests its rows.
        Case(query: Query("T", where: .and([Field("a") == 2, Field("a") == 2]), sort: [SortKey("b", .descending)], top: 4), exact: false),
        Case(query: Query("T", where: .and([Field("a") == 1, Field("b") < 200]), sort: [SortKey("b", .descending)], top: 6), exact: true),
    ]

    @Test("exact walks build their items from records; ties and other predicates go to the evaluator; every result is the reference's")
    func walks() throws {
        for covering in [false, true] {
            for ties in [false, true] {
                let engine = InMemoryKVEngine()
                let store = try KVStore(engine: engine, coveringIndexes: covering)
                let reference = try InMemoryStore()
                for s in [store as any LocalStore, reference] {
                    try s.defineTable(Self.schema)
                    try s.upsert(Self.rows(ties: ties), into: "T")
                }
                for c in Self.cases {
                    let label = "covering \(covering), ties \(ties): \(c)"
                    #expect(try store.read(c.query).items == reference.read(c.query).items, "\(label)")
                    try engine.read { snapshot in
                        let catalog = try KVCatalog.load(snapshot)
                        let table = try catalog.table("T")
                        let resolved = try ResolvedQuery(c.query, schema: table.schema)
                        guard case .compoundOrdered(let index, let range, let reverse, let components, _, let exact) = try KVReads(reader: snapshot, catalog: catalog).plan(table, resolved).plan else {
                            Issue.record("\(label): not a walk")
                            return
                        }
                        #expect(exact == c.exact, "\(label)")
                        guard exact else { return }
                        let items = try KVReads(reader: snapshot, catalog: catalog).exactWalk(
                            table, RecordItemBuilder(resolved), index, range, reverse: reverse, need: KVReads.need(resolved), groupComponents: components,
                            skip: resolved.skip)
                        // With ties the walk gives up (the evaluator orders them); without, it answers.
                        #expect((items == nil) == ties, "\(label)")
                        if let items { #expect(items == (try reference.read(c.query).items), "\(label)") }
                    }
                }
            }
        }
    }

    @Test("string ids sorted by id: the rows walked in key order, which is the NOCASE order of ids (NULs included), until skip + top match")
    func stringIdWalks() throws {
        let schema = TableSchema(name: "S", columns: [Column("id", .string), Column("n", .integer)])
        let ids = ["a", "a\0", "a\0b", "A\0C", "a\u{1}", "ab", "B", "b\0", "bA", "\0", "\0z", "Z", "é", "É", "zz\0a", "Zz\0B"]
        let store = try KVStore(engine: InMemoryKVEngine())
        let reference = try InMemoryStore()
        for s in [store as any LocalStore, reference] {
            try s.defineTable(schema)
            try s.upsert(ids.enumerated().map { Item(["id": .string($1), "n": .int(Int64($0 % 3))]) }, into: "S")
        }
        for descending in [false, true] {
            for skip in [0, 1, 3] {
                for top in 1...ids.count {
                    let sort = [SortKey("id", descending ? .descending : .ascending)]
                    for query in [Query("S", sort: sort, skip: skip, top: top), Query("S", where: Field("n") != 1, sort: sort, skip: skip, top: top)] {
                        #expect(try store.read(query).items == reference.read(query).items, "\(query)")
                        #expect(try store.accessPath(for: query) == .primaryKey, "\(query)")
                    }
                }
            }
        }
    }

    @Test("the cost choice: a top list filtered on one indexed column and sorted on another walks the sort's index when the matches are many, reads the filter's range when they are few, and reads it too once a walk passes its budget")
    func costChoice() throws {
        let schema = TableSchema(
            name: "C", columns: [Column("id", .string), Column("a", .integer, indexed: true), Column("b", .integer, indexed: true)])
        // a = 7 on the 400 lowest b (far along a descending walk), else n % 3; five rows of a = 99.
        var rows: [Item] = []
        for n in 0..<3_000 {
            let a: Int64 = n < 400 ? 7 : Int64(n % 3)
            rows.append(Item(["id": .string("c\(n)"), "a": .int(a), "b": .int(Int64(n))]))
        }
        for n in 0..<5 { rows.append(Item(["id": .string("r\(n)"), "a": 99, "b": .int(Int64(10_000 + n))])) }
        let engine = InMemoryKVEngine()
        let store = try KVStore(engine: engine)
        let reference = try InMemoryStore()
        for s in [store as any LocalStore, reference] {
            try s.defineTable(schema)
            try s.upsert(rows, into: "C")
        }
        let many = Query("C", where: Field("a") == 1, sort: [SortKey("b", .descending)], top: 10)
        let few = Query("C", where: Field("a") == 99, sort: [SortKey("b", .descending)], top: 10)
        let bunched = Query("C", where: Field("a") == 7, sort: [SortKey("b", .descending)], skip: 3, top: 10)
        #expect(try store.accessPath(for: many) == .index("b"))
        #expect(try store.accessPath(for: few) == .index("a"))
        #expect(try store.accessPath(for: bunched) == .index("b"))  // tried first, given up past its budget
        for query in [many, few, bunched, Query("C", where: Field("a") == 7, sort: [SortKey("b")], top: 10)] {
            #expect(try store.read(query).items == reference.read(query).items, "\(query)")
            #expect(try store.read(query).items.count == 10 || query == few, "\(query)")
        }
        // The row count the planner reads follows inserts, updates, deletions and a failed write, and is
        // rebuilt for a store made without it.
        func count() throws -> UInt64 {
            try engine.read { snapshot in try KVCatalog.readNumber(KVKeys.rowCount(try KVCatalog.load(snapshot).table("C").number), snapshot) }
        }
        #expect(try count() == 3_005)
        try store.upsert([Item(["id": "c1", "a": 2, "b": 1]), Item(["id": "new", "a": 5, "b": -1])], into: "C")
        try store.delete(ids: ["c2", "c3", "missing"], from: "C")
        try store.delete(matching: Query("C", where: Field("a") == 99))
        #expect(throws: LocalStoreError.self) {
            try store.write { tx in
                try tx.upsert([Item(["id": "x1", "a": 1, "b": 1])], into: "C")
                try tx.delete(ids: ["c4"], from: "C")
                throw LocalStoreError(.invalidValue, "rolled back")
            }
        }
        let expected = UInt64(3_005 + 1 - 2 - 5)
        #expect(try count() == expected)
        #expect(try store.read(Query("C", top: 0, includeTotalCount: true)).totalCount == Int(expected))
        try store.close()
        try engine.write { writer in try writer.delete(KVKeys.rowCount(try KVCatalog.load(writer).table("C").number)) }
        #expect(try count() == 0)
        _ = try KVStore(engine: engine)
        #expect(try count() == expected)
    }

    @Test("queries equal under Swift's == but not byte for byte (a Kelvin sign and K, -0 and 0) each get their own answer, not a cached plan's: KVStore and LMDB")
    func equalQueriesKeepTheirAnswers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("KVWalk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let schema = TableSchema(name: "E", columns: [Column("id", .string), Column("name", .string, indexed: true), Column("d", .double, indexed: true)])
        let reference = try InMemoryStore()
        let stores: [(String, any LocalStore)] = [
            ("kv", try KVStore(engine: InMemoryKVEngine())), ("lmdb", try LMDBStore(path: dir.appendingPathComponent("store.lmdb").path)),
        ]
        let rows = [Item(["id": "1", "name": "K", "d": 0.0]), Item(["id": "2", "name": "\u{212A}", "d": -0.0]), Item(["id": "3", "name": "é", "d": 1])]
        for s in [reference] + stores.map(\.1) {
            try s.defineTable(schema)
            try s.upsert(rows, into: "E")
        }
        let queries = [
            Query("E", where: Field("name") == "K"), Query("E", where: Field("name") == "\u{212A}"),
            Query("E", where: Field("name") == "é"), Query("E", where: Field("name") == "e\u{301}"),
            Query("E", where: Field("d") == .literal(.double(0.0)), sort: [SortKey("d")], top: 5),
            Query("E", where: Field("d") == .literal(.double(-0.0)), sort: [SortKey("d")], top: 5),
        ]
        for (name, store) in stores {
            for _ in 0..<2 {
                for query in queries { #expect(try store.read(query).items == reference.read(query).items, "\(name): \(query)") }
            }
        }
    }

    @Test("an equality ignoring case on a NOCASE component does not fix a case-sensitive sort on its column: the walk is not taken")
    func noCaseEqualityDoesNotFixTheSort() throws {
        let store = try KVStore(engine: InMemoryKVEngine())
        let reference = try InMemoryStore()
        let config = store.systemTableNames.config
        for s in [store as any LocalStore, reference] {
            try s.upsert(
                [
                    Item(["id": "c1", "table": "t", "key": "k", "keyType": 0, "value": "a"]),
                    Item(["id": "c2", "table": "T", "key": "k", "keyType": 5, "value": "b"]),
                    Item(["id": "c3", "table": "t", "key": "j", "keyType": 9, "value": "c"]),
                ], into: config)
        }
        for top in 1...3 {
            for sort in [[SortKey("table"), SortKey("keyType")], [SortKey("table", .descending), SortKey("keyType")], [SortKey("keyType", .descending)]] {
                let query = Query(config, where: Field("table").equalsIgnoringCase("t"), sort: sort, top: top)
                #expect(try store.read(query).items == reference.read(query).items, "\(query)")
            }
        }
    }

    @Test("a damaged index definition in the catalog is refused as corrupt when the store opens, naming the index and table")
    func damagedIndexDefinition() throws {
        for damage in 0..<3 {
            let engine = InMemoryKVEngine()
            let store = try KVStore(engine: engine)
            try store.defineTable(Self.schema)
            try store.close()
            try engine.write { writer in
                var record = try KVCatalog.load(writer).table("T").record
                guard !record.specs.isEmpty else { return }
                switch damage {
                case 0: record.specs[0].descending = []
                case 1: record.specs[0].columns = [99]
                default: record.specs[0].columns = []
                }
                try KVCatalog.write(record, version: 1_000 + UInt64(damage), writer)
            }
            #expect { try KVStore(engine: engine) } throws: { error in
                guard let error = error as? LocalStoreError else { return false }
                return error.code == .corrupt && "\(error)".contains("'T'")
            }
        }
    }

    @Test("integer ids (the operations queue): ranges on the id and lists sorted on it read the rows in id order, as far as needed")
    func integerIdRanges() throws {
        let store = try KVStore(engine: InMemoryKVEngine())
        let reference = try InMemoryStore()
        let ops = store.systemTableNames.operations
        for s in [store as any LocalStore, reference] {
            try s.defineTable(Self.schema)
            for n in 0..<120 { try s.enqueue(.insert, ["id": .string("q\(n)"), "a": .int(Int64(n % 3))], into: "T") }
            for id in stride(from: 5, to: 120, by: 7) { try s.removeOperation(id: Int64(id)) }
        }
        let queries = [
            Query(ops, where: Field("id") > 30, sort: [SortKey("id")], top: 1),  // the queue's head after 30
            Query(ops, sort: [SortKey("id", .descending)], top: 1),  // the largest id
            Query(ops, where: .and([Field("id") >= 12, Field("id") < 40])),
            Query(ops, where: .and([Field("id") > 3, Field("itemId") != "q50"]), sort: [SortKey("id", .descending)], skip: 2, top: 3),
            Query(ops, where: Field("id") <= 5, sort: [SortKey("id")], top: 5),
            Query(ops, where: Field("id") > 1_000, sort: [SortKey("id")], top: 1),
            Query(ops, where: Field("itemId") != "q3", top: 4),  // no sort: id order
        ]
        for query in queries {
            #expect(try store.read(query).items.map { $0["id"] } == reference.read(query).items.map { $0["id"] }, "\(query)")
            #expect(try store.accessPath(for: query) == .primaryKey, "\(query)")
        }
        #expect(try store.nextOperation(after: 4)?.id == 6)
        #expect(try store.operation(after: 117)?.id == 118)
        // A count still reads the whole range; an unbounded query without a top list is a scan.
        #expect(try store.read(Query(ops, where: Field("id") > 100, top: 0, includeTotalCount: true)).totalCount == 17)  // 101...120 but 103, 110, 117
        #expect(try store.accessPath(for: Query(ops, where: Field("itemId") != "q3")) == .fullScan)
    }

    @Test("the system tables' indexes (an item's operations, a push's errors, the delta tokens): used, and added to a store made without them")
    func systemIndexes() throws {
        let engine = InMemoryKVEngine()
        let store = try KVStore(engine: engine)
        let reference = try InMemoryStore()
        let names = store.systemTableNames
        let day = Date(timeIntervalSince1970: 1_700_000_000)
        for s in [store as any LocalStore, reference] {
            try s.defineTable(Self.schema)
            for n in 0..<60 { try s.enqueue(.insert, ["id": .string("Item\(n)"), "a": .int(Int64(n))], into: "T") }
            try s.enqueue(.update, ["id": "ITEM7", "a": 70], into: "T")  // collapses into Item7's insert
            for n in 0..<20 {
                try s.recordError(
                    TableOperationError(
                        id: "e\(n)", operationId: Int64(n % 7), properties: Array("{\"n\":\(n)}".utf8)))
                try s.setDeltaToken(day.addingTimeInterval(Double(n)), table: n % 2 == 0 ? "T" : "U\(n)", queryId: "q\(n % 5)")
            }
        }
        let lookup = Query(names.operations, where: .and([Field("table") == "T", Field("itemId").equalsIgnoringCase("item7")]))
        let errors = Query(names.errors, where: Field("operationId") == 3)
        let tokens = Query(names.config, where: .and([Field("table").equalsIgnoringCase("t"), Field("keyType") == .literal(.int(TableConfigEntry.deltaTokenKeyType))]))
        func check(_ store: KVStore<InMemoryKVEngine>, _ label: String) throws {
            #expect(try store.accessPath(for: lookup) == .index("itemOperations"), "\(label)")
            #expect(try store.accessPath(for: errors) == .index("operationId"), "\(label)")
            #expect(try store.accessPath(for: tokens) == .index("deltaTokens"), "\(label)")
            for id in ["item7", "ITEM7", "Item59", "nothing"] {
                #expect(try store.pendingOperations(table: "T", itemId: id) == reference.pendingOperations(table: "T", itemId: id), "\(label) \(id)")
            }
            for query in [lookup, errors, tokens] {
                #expect(try store.read(query).items == reference.read(query).items, "\(label) \(query)")
            }
            for id in Int64(0)..<8 { #expect(try store.operationErrors(operationId: id) == reference.operationErrors(operationId: id), "\(label)") }
            for table in ["T", "t", "U3", "V"] {
                #expect(try store.deltaTokens(table: table) == reference.deltaTokens(table: table), "\(label) \(table)")
                for q in 0..<6 {
                    #expect(try store.deltaToken(table: table, queryId: "q\(q)") == reference.deltaToken(table: table, queryId: "q\(q)"), "\(label)")
                }
            }
            // A case-sensitive equality reads the same entries, then tests them.
            let exact = Query(names.operations, where: .and([Field("table") == "T", Field("itemId") == "item7"]))
            #expect(try store.read(exact).items.isEmpty && store.accessPath(for: exact) == .index("itemOperations"), "\(label)")
        }
        try check(store, "new store")
        // A store written before the indexes existed: its catalog without them; reopened, they are built.
        try store.close()
        try engine.write { writer in
            var catalog = try KVCatalog.load(writer)
            for name in [names.operations, names.errors, names.config] {
                var record = try catalog.table(name).record
                record.specs.removeAll()
                catalog.version += 1
                try KVCatalog.write(record, version: catalog.version, writer)
            }
        }
        #expect(try engine.read { snapshot in try [names.operations, names.errors, names.config].allSatisfy { try KVCatalog.load(snapshot).table($0).specs.isEmpty } })
        let reopened = try KVStore(engine: engine)
        try check(reopened, "reopened")
        // A store written before NOCASE components took LMDB's encoding: its itemOperations entries held
        // the NOCASE key as a string component, and its spec no format. Reopened, the index is rebuilt.
        try reopened.close()
        try engine.write { writer in
            var catalog = try KVCatalog.load(writer)
            let table = try catalog.table(names.operations)
            var record = table.record
            guard let i = record.specs.firstIndex(where: { $0.name == "itemOperations" }) else { return }
            record.specs[i].noCaseFormat = nil
            let spec = record.specs[i]
            let prefix = KVKeys.index(table.number, spec.number)
            var entries: [([UInt8], [UInt8])] = []
            try writer.scan(from: KVKeys.rows(table.number), to: KVKeyRange.end(of: KVKeys.rows(table.number)), reverse: false) { key, value in
                let row = try table.decode(value)
                let idKey = Array(key[KVKeys.rows(table.number).count...])
                var entry = prefix
                KeyCodec.appendComponent(row[spec.columns[0]], into: &entry)
                if case .string(let itemId) = row[spec.columns[1]] { KeyCodec.appendComponent(.string(Collation.noCaseKey(itemId)), into: &entry) }
                entries.append((entry + idKey, idKey))
                return true
            }
            var stale: [[UInt8]] = []
            try writer.scan(from: prefix, to: KVKeyRange.end(of: prefix), reverse: false) { key, _ in
                stale.append(Array(key))
                return true
            }
            for key in stale { try writer.delete(key) }
            for (key, value) in entries { try writer.put(key, value) }
            catalog.version += 1
            try KVCatalog.write(record, version: catalog.version, writer)
        }
        let rebuilt = try KVStore(engine: engine)
        try check(rebuilt, "rebuilt")
        // The rebuilt entries are the ones deletions remove: the index reads no row that is gone.
        try rebuilt.delete(ids: try rebuilt.read(Query(names.operations, top: 3)).items.compactMap { $0["id"] }, from: names.operations)
        try reference.delete(ids: try reference.read(Query(names.operations, top: 3)).items.compactMap { $0["id"] }, from: names.operations)
        try check(rebuilt, "rebuilt, after deletions")
    }

    @Test("a query read again reuses its plan until the table is redefined: then the new columns and indexes are used at once")
    func plansFollowRedefinition() throws {
        let store = try KVStore(engine: InMemoryKVEngine())
        let reference = try InMemoryStore()
        let wider = TableSchema(
            name: "T", columns: Self.schema.columns + [Column("d", .string)],
            indexes: Self.schema.indexes + [TableIndex(("d", .ascending))])
        let lists = [
            Query("T", where: Field("a") == 1, sort: [SortKey("b", .descending)], top: 3),  // an exact walk
            Query("T", where: Field("c") == "c2", top: 4),
            Query("T", where: Field("d") == "new", top: 4),
        ]
        for s in [store as any LocalStore, reference] {
            try s.defineTable(Self.schema)
            try s.upsert(Self.rows(ties: false), into: "T")
        }
        for query in lists.prefix(2) {
            for _ in 0..<2 { #expect(try store.read(query).items == reference.read(query).items, "\(query)") }
        }
        for s in [store as any LocalStore, reference] {
            try s.defineTable(wider)
            try s.upsert([["id": "row1", "a": 1, "b": 1.5, "c": "c2", "d": "new"], ["id": "row2", "a": 2, "d": "new"]], into: "T")
        }
        for query in lists {
            let items = try store.read(query).items
            #expect(items == (try reference.read(query).items), "\(query)")
            #expect(items.allSatisfy { $0.values.keys.contains("d") }, "the new column is returned: \(query)")
        }
        #expect(try store.accessPath(for: lists[2]) == .index("d"))
    }
}
