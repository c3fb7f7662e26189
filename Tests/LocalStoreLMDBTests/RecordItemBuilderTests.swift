import Foundation
@testable import LocalStore
@testable import LocalStoreLMDB
import LocalStoreKV
import Testing

@Suite("LMDB items straight from records")
struct ItemBuilderTests {
    /// Calls `attempt` with every prefix of every valid record, then with 5,000 copies of random valid
    /// records with one to three bytes replaced at random.
    static func forEachDamaged(_ valid: [[UInt8]], _ rng: inout SeededRNG, _ attempt: ([UInt8]) -> Void) {
        for record in valid {
            for n in 0..<record.count { attempt(Array(record[0..<n])) }
        }
        for _ in 0..<5_000 {
            var r = valid[Int(rng.next() % UInt64(valid.count))]
            for _ in 0..<(1 + rng.next() % 3) { r[Int(rng.next() % UInt64(r.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            attempt(r)
        }
    }

    static let schema = RecordFilterTests.schema

    static func selections(_ rng: inout SeededRNG) -> [[String]?] {
        let names = schema.columns.map(\.name)
        var selections: [[String]?] = [nil, ["id"], ["b", "s"], names, ["j", "after", "i"], ["after"]]
        let some = names.filter { _ in rng.next() % 2 == 0 }
        selections.append(some.isEmpty ? ["i"] : some)
        return selections
    }

    @Test("an item built from a record equals the decoded row projected, for every projection", arguments: RecordCodec.Layout.allCases)
    func sameItemsAsDecodeAndProject(layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: 11)
        for selection in Self.selections(&rng) {
            let q = try ResolvedQuery(Query("Filtered", select: selection), schema: Self.schema)
            let builder = RecordItemBuilder(q)
            #expect(builder.layout?.names == q.projection.map { Self.schema.columns[$0].name })
            for n in 0..<200 {
                let row = RecordFilterTests.randomRow(&rng)
                let record = RecordCodec.encode(row, rowId: UInt64(n), layout: layout)
                let decoded = try RecordCodec.decode(record, schema: Self.schema)
                let item = try record.withUnsafeBytes { try builder.item($0) }
                #expect(item == q.project(decoded.row))
                #expect(item.values == q.project(decoded.row).values)
                #expect(item.count == q.projection.count)
                // Row form, under the builder's one layout.
                #expect(item.layout != nil && item.layout === builder.layout)
                #expect(item == ItemProjector(q).item(decoded.row))
            }
        }
    }

    @Test("a whole-row builder gives every column, null for those a short record lacks", arguments: RecordCodec.Layout.allCases)
    func wholeRows(layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: 12)
        let builder = RecordItemBuilder(schema: Self.schema)
        for n in 0..<200 {
            let row = RecordFilterTests.randomRow(&rng)
            let record = RecordCodec.encode(row, rowId: UInt64(n), layout: layout)
            let item = try record.withUnsafeBytes { try builder.item($0) }
            #expect(item.count == Self.schema.columns.count)
            #expect(item.layout != nil && item.layout === builder.layout)
            for (k, c) in Self.schema.columns.enumerated() {
                #expect(item[c.name] == (k < row.count ? row[k] : .null), "column \(c.name)")
            }
        }
    }

    /// Damaged records: the builder (and `RecordCodec.check`) throw `corrupt` exactly when the decoder
    /// does, whichever columns are returned, and never trap.
    @Test("a damaged record is corrupt for the builder exactly when the decoder refuses it", arguments: [1, 2], RecordCodec.Layout.allCases)
    func damagedRecords(seed: UInt64, layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: seed)
        let builders = [
            RecordItemBuilder(schema: Self.schema),
            RecordItemBuilder(try ResolvedQuery(Query("Filtered", select: ["id"]), schema: Self.schema)),
        ]
        let valid = (0..<20).map { RecordCodec.encode(RecordFilterTests.randomRow(&rng), rowId: UInt64($0), layout: layout) }
        func attempt(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { raw in
                let decoded = Result { try RecordCodec.decode(raw, schema: Self.schema) }
                let checked = Result { try RecordCodec.check(raw, schema: Self.schema, idIndex: Self.schema.idIndex) }
                for builder in builders {
                    let built = Result { try builder.item(raw) }
                    switch (decoded, built) {
                    case (.success, .success): break
                    case (.failure(let a), .failure(let b)):
                        #expect((a as? LocalStoreError)?.code == .corrupt)
                        #expect((b as? LocalStoreError)?.code == .corrupt)
                        #expect("\(a)" == "\(b)")
                    default: Issue.record("decode and builder disagree on \(bytes)")
                    }
                }
                switch (decoded, checked) {
                case (.success, .success), (.failure, .failure): break
                default: Issue.record("decode and check disagree on \(bytes)")
                }
            }
        }
        Self.forEachDamaged(valid, &rng, attempt)
    }

    /// The schema of ``RecordFilterTests`` without its json column: every intact record is then one the
    /// one-pass decoder reads (a json value hands a record to the checked decoder).
    static let plainSchema = TableSchema(
        name: "Plain",
        columns: [
            Column("id", .string), Column("s", .string), Column("i", .integer), Column("d", .double),
            Column("t", .date), Column("bin", .binary), Column("b", .boolean), Column("after", .boolean),
        ])

    static func plainRow(_ rng: inout SeededRNG) -> [Value] {
        var row = RecordFilterTests.randomRow(&rng)
        if row.count > 7 { row.remove(at: 7) }
        return row
    }

    /// Runs `body` with stable pointers to copies of `records`.
    static func withRecords<R>(_ records: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) throws -> R) rethrows -> R {
        let copies = records.map { r -> UnsafeMutableRawBufferPointer in
            let m = UnsafeMutableRawBufferPointer.allocate(byteCount: max(r.count, 1), alignment: 8)
            m.copyBytes(from: r)
            return m
        }
        defer { for m in copies { m.deallocate() } }
        return try body(zip(copies, records).map { UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0)[0..<$1.count]) })
    }

    @Test("the items of a page of records share one buffer and equal the items built one by one", arguments: RecordCodec.Layout.allCases)
    func pageOfItems(layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: 21)
        for (schema, withJSON) in [(Self.schema, true), (Self.plainSchema, false)] {
            let builders = [
                RecordItemBuilder(schema: schema),
                RecordItemBuilder(try ResolvedQuery(Query(schema.name, select: ["after", "id", "s"]), schema: schema)),
            ]
            let records = (0..<40).map { n in
                RecordCodec.encode(withJSON ? RecordFilterTests.randomRow(&rng) : Self.plainRow(&rng), rowId: UInt64(n), layout: layout)
            }
            for builder in builders {
                let page = try Self.withRecords(records) { raw in try builder.items(count: raw.count) { raw[$0] } }
                let single = try records.map { r in try r.withUnsafeBytes { try builder.item($0) } }
                #expect(page == single)
                #expect(page.allSatisfy { $0.layout === builder.layout })
                // Changing one item of the page copies its own values: the others keep theirs.
                var changed = page
                changed[3]["id"] = .string("changed")
                #expect(changed[3]["id"] == .string("changed"))
                #expect(page[3] == single[3])
                #expect(Array(changed[4...]) == Array(single[4...]) && Array(changed[..<3]) == Array(single[..<3]))
                // A damaged record in the page: the decoder's error for it.
                var damaged = records
                damaged[17] = Array(damaged[17].dropLast())
                let expected = Result { try damaged[17].withUnsafeBytes { try RecordCodec.decode($0, schema: schema) } }
                let built = Result { try Self.withRecords(damaged) { raw in try builder.items(count: raw.count) { raw[$0] } } }
                switch (expected, built) {
                case (.failure(let a), .failure(let b)): #expect("\(a)" == "\(b)")
                case (.success, .success): break
                default: Issue.record("a page with a damaged record and the decoder disagree")
                }
            }
        }
    }

    /// Expects each builder to build `query.project` of what the decoder decodes from `bytes`, or to throw
    /// the decoder's error; returns whether the decoder accepted the record.
    static func expectBuildersAgree(
        _ bytes: [UInt8], schema: TableSchema, builders: [RecordItemBuilder], queries: [ResolvedQuery]
    ) -> Bool {
        bytes.withUnsafeBytes { raw in
            let decoded = Result { try RecordCodec.decode(raw, schema: schema) }
            for (builder, query) in zip(builders, queries) {
                let built = Result { try builder.item(raw) }
                switch (decoded, built) {
                case (.success(let d), .success(let item)):
                    #expect(item == query.project(d.row))
                case (.failure(let a), .failure(let b)):
                    #expect("\(a)" == "\(b)")
                default: Issue.record("decode and builder disagree on \(bytes)")
                }
            }
            if case .success = decoded { return true }
            return false
        }
    }

    /// ``damagedRecords(seed:)`` over a schema without json: the damaged records reach the one-pass
    /// decoder, which must leave every one it cannot read to the checked decoder.
    @Test("without json columns: corrupt for the builder exactly when the decoder refuses it", arguments: [3, 4], RecordCodec.Layout.allCases)
    func damagedPlainRecords(seed: UInt64, layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: seed)
        let schema = Self.plainSchema
        let queries = [
            try ResolvedQuery(Query("Plain"), schema: schema),
            try ResolvedQuery(Query("Plain", select: ["id", "b"]), schema: schema),
        ]
        let builders = [RecordItemBuilder(schema: schema), RecordItemBuilder(queries[1])]
        let valid = (0..<20).map { RecordCodec.encode(Self.plainRow(&rng), rowId: RecordFilterTests.rowIds[$0 % RecordFilterTests.rowIds.count], layout: layout) }
        func attempt(_ bytes: [UInt8]) {
            _ = Self.expectBuildersAgree(bytes, schema: schema, builders: builders, queries: queries)
        }
        Self.forEachDamaged(valid, &rng, attempt)
    }

    /// Records that are well formed but wrong for the schema — a null id, a value of another type in a
    /// column, a non-finite double, an extra column, invalid UTF-8 — reach the one-pass decoders (whole
    /// rows and a projection), which must refuse each one the decoder refuses, with its message.
    @Test("well-formed records of the wrong shape: refused by the builder exactly when the decoder refuses them", arguments: RecordCodec.Layout.allCases)
    func wrongShapeRecords(layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: 5)
        let schema = Self.plainSchema
        let queries = [
            try ResolvedQuery(Query("Plain"), schema: schema),
            try ResolvedQuery(Query("Plain", select: ["id", "b"]), schema: schema),
        ]
        let builders = [RecordItemBuilder(schema: schema), RecordItemBuilder(queries[1])]
        let substitutes: [Value] = [
            .null, .int(7), .string("x"), .bool(true), .double(1.5), .double(.nan), .double(.infinity),
            .date(Date(timeIntervalSinceReferenceDate: 3)), .binary([1, 2]), .json(.int(1)),
        ]
        var records: [[UInt8]] = []
        for n in 0..<6 {
            var row = Self.plainRow(&rng)
            while row.count < schema.columns.count { row.append(.null) }
            for k in 0..<row.count {
                for v in substitutes {
                    var changed = row
                    changed[k] = v
                    records.append(RecordCodec.encode(changed, rowId: UInt64(n), layout: layout))
                }
            }
            records.append(RecordCodec.encode(row + [.int(1)], rowId: UInt64(n), layout: layout))  // one column too many
            records.append(RecordCodec.encode(Array(row.prefix(1)), rowId: UInt64(n), layout: layout))  // the id alone
            records.append(RecordCodec.encode([], rowId: UInt64(n), layout: layout))  // no column, no id
        }
        // A string column holding bytes that are not UTF-8.
        var invalid = RecordCodec.encode([.string("id"), .string("ab")], rowId: 1, layout: layout)
        invalid[invalid.count - 1] = 0xFF
        records.append(invalid)
        var refused = 0
        for record in records where !Self.expectBuildersAgree(record, schema: schema, builders: builders, queries: queries) {
            refused += 1
        }
        // Most substitutes are refused (a test that refuses nothing would check nothing).
        #expect(refused > records.count / 2)
    }

    @Test("a query read again reuses its plan, and a new catalog generation plans again")
    func cachedPlans() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ItemBuilderTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try LMDBStore(path: dir.path)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["p": .integer, "s": .string]))
        // "é" precomposed and decomposed are equal Swift strings, with different bytes.
        let texts = ["a", "b", "\u{E9}", "e\u{301}", "x"]
        try store.upsert((0..<100).map { n in ["id": .string("r\(n)"), "p": .int(Int64(n % 5)), "s": .string(texts[n % 5])] }, into: "T")
        let byP = Query("T", where: Field("p") == .literal(.int(2)), sort: [SortKey("s")], top: 10)
        let first = try store.read(byP).items
        #expect(first.count == 10 && first.allSatisfy { $0["p"] == .int(2) })
        #expect(try store.read(byP).items == first)
        #expect(try store.explain(byP) == "full scan")
        // An index defined later: the next read plans again (new catalog generation), same rows.
        try store.defineTable(TableSchema("T", ["p": .integer, "s": .string], indexed: ["p"]))
        #expect(try store.explain(byP) == "index p")
        #expect(try store.read(byP).items == first)
        #expect(try store.read(byP).items == first)
        // Strings equal by canonical equivalence but not by bytes keep their own rows.
        for (k, text) in texts.enumerated() {
            let q = Query("T", where: Field("s") == .literal(.string(text)))
            for _ in 0..<2 {
                let got = try store.read(q).items
                #expect(got.count == 20 && got.allSatisfy { $0["p"] == .int(Int64(k)) }, "text \(k)")
            }
        }
        #expect(!Query.isPlanCacheable(Query("T", where: Field("s") == .literal(.string("\u{E9}")))))
        #expect(!Query.isPlanCacheable(Query("T", where: Field("s") == .literal(.json(["k": "v"])))))
        #expect(!Query.isPlanCacheable(Query("T", where: Field("p") == .literal(.double(-0.0)))))
        #expect(!Query.isPlanCacheable(Query("T", where: Field("p") == .literal(.double(.nan)))))
        #expect(Query.isPlanCacheable(Query("T", where: Field("p") == .literal(.double(0.0)))))
        #expect(Query.isPlanCacheable(byP))
    }

    @Test("an ordered walk's items equal the rows path's, with skip, top and ties")
    func orderedWalkItemsMatchRows() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ItemBuilderTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try LMDBStore(path: dir.path)
        defer { try? store.close() }
        let schema = TableSchema(
            "T", ["p": .integer, "u": .date, "s": .string], indexes: [TableIndex(("p", .ascending), ("u", .descending))])
        try store.defineTable(schema)
        var rng = SeededRNG(seed: 5)
        var items: [Item] = []
        for n in 0..<300 {
            // Few distinct dates: groups of equal (p, u) keys that the id tie-break orders.
            items.append([
                "id": .string("r\(rng.next() % 1000)-\(n)"), "p": .int(Int64(rng.next() % 3)),
                "u": .date(Date(timeIntervalSinceReferenceDate: Double(rng.next() % 7))),
                "s": rng.next() % 4 == 0 ? .null : .string("s\(n)"),
            ])
        }
        try store.upsert(items, into: "T")
        for p in 0..<3 {
            for (skip, top) in [(0, 1), (0, 50), (3, 10), (40, 200), (0, 0), (500, 5)] {
                let query = Query(
                    "T", where: Field("p") == .literal(.int(Int64(p))), sort: [SortKey("u", .descending)], skip: skip, top: top)
                if top > 0 { #expect(try store.explain(query).hasPrefix("ordered index"), "plan of \(query)") }
                let got = try store.read(query).items
                // Every item of a read transaction's query of all columns shares the table's layout.
                #expect(got.allSatisfy { $0.layout != nil && $0.layout === got.first?.layout })
                if let first = got.first, let id = first.id {
                    // A read by id: the same item, under the same (cached whole-row) layout.
                    let byId = try #require(try store.read(table: "T", id: id))
                    #expect(byId == first && byId.layout === first.layout)
                }
                let all = try store.read(Query("T")).items
                let expected = try ResolvedQuery(query, schema: try #require(try store.schema(of: "T")))
                let rows = all.map { item in expected.schema.columns.map { item[$0.name] ?? .null } }
                #expect(got == expected.select(rows).rows.map { expected.project($0) }, "p \(p) skip \(skip) top \(top)")
            }
        }
    }
}
