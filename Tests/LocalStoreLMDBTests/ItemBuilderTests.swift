import Foundation
@testable import LocalStore
@testable import LocalStoreLMDB
import Testing

@Suite("LMDB items straight from records")
struct ItemBuilderTests {
    static let schema = RecordFilterTests.schema

    static func selections(_ rng: inout SeededRNG) -> [[String]?] {
        let names = schema.columns.map(\.name)
        var selections: [[String]?] = [nil, ["id"], ["b", "s"], names, ["j", "after", "i"], ["after"]]
        let some = names.filter { _ in rng.next() % 2 == 0 }
        selections.append(some.isEmpty ? ["i"] : some)
        return selections
    }

    @Test("an item built from a record equals the decoded row projected, for every projection")
    func sameItemsAsDecodeAndProject() throws {
        var rng = SeededRNG(seed: 11)
        for selection in Self.selections(&rng) {
            let q = try ResolvedQuery(Query("Filtered", select: selection), schema: Self.schema)
            let builder = ItemBuilder(q)
            #expect(builder.layout?.names == q.projection.map { Self.schema.columns[$0].name })
            for n in 0..<200 {
                let row = RecordFilterTests.randomRow(&rng)
                let record = RecordCodec.encode(row, rowId: UInt64(n))
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

    @Test("a whole-row builder gives every column, null for those a short record lacks")
    func wholeRows() throws {
        var rng = SeededRNG(seed: 12)
        let builder = ItemBuilder(schema: Self.schema)
        for n in 0..<200 {
            let row = RecordFilterTests.randomRow(&rng)
            let record = RecordCodec.encode(row, rowId: UInt64(n))
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
    @Test("a damaged record is corrupt for the builder exactly when the decoder refuses it", arguments: [1, 2])
    func damagedRecords(seed: UInt64) throws {
        var rng = SeededRNG(seed: seed)
        let builders = [
            ItemBuilder(schema: Self.schema),
            ItemBuilder(try ResolvedQuery(Query("Filtered", select: ["id"]), schema: Self.schema)),
        ]
        let valid = (0..<20).map { RecordCodec.encode(RecordFilterTests.randomRow(&rng), rowId: UInt64($0)) }
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
        for record in valid {
            for n in 0..<record.count { attempt(Array(record[0..<n])) }
        }
        for _ in 0..<5_000 {
            var r = valid[Int(rng.next() % UInt64(valid.count))]
            for _ in 0..<(1 + rng.next() % 3) { r[Int(rng.next() % UInt64(r.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            attempt(r)
        }
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
