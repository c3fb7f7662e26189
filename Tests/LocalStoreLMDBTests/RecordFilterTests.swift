import Foundation
@testable import LocalStore
@testable import LocalStoreLMDB
import LocalStoreKV
import Testing

/// The one-pass record test (`SimpleRecordTest`) must give the general path's answer — the same
/// Bool, or (through the general path) the same `corrupt` error — on every record, valid or damaged;
/// and on a valid record, the shared evaluator's answer over the decoded row.
@Suite("LMDB record filter")
struct RecordFilterTests {
    /// Tested columns come after columns of every skippable kind (strings, an integer, a double, a
    /// date, binary); `j` (json) is tested last, behind a json value only the general path skips.
    static let schema = TableSchema(
        name: "Filtered",
        columns: [
            Column("id", .string), Column("s", .string), Column("i", .integer), Column("d", .double),
            Column("t", .date), Column("bin", .binary), Column("b", .boolean), Column("j", .json), Column("after", .boolean),
        ])

    static func predicates() -> [QueryPredicate] {
        var out: [QueryPredicate] = []
        for op in QueryPredicate.ComparisonOperator.allCases {
            out.append(.compare(.field("b"), op, .literal(.bool(true)), caseInsensitive: false))
            out.append(.compare(.literal(.bool(false)), op, .field("b"), caseInsensitive: false))
            out.append(.compare(.field("i"), op, .literal(.int(3)), caseInsensitive: false))
            out.append(.compare(.literal(.int(-2)), op, .field("i"), caseInsensitive: false))
            out.append(.compare(.field("s"), op, .literal(.string("ab")), caseInsensitive: false))
            out.append(.compare(.literal(.string("b")), op, .field("s"), caseInsensitive: false))
            out.append(.compare(.field("id"), op, .literal(.string("k1")), caseInsensitive: false))
            out.append(.compare(.field("after"), op, .literal(.bool(true)), caseInsensitive: false))
        }
        for op in QueryPredicate.StringOperator.allCases {
            for pattern in ["", "a", "ab", "é", "b\u{0}"] {
                out.append(.string(op, .field("s"), .literal(.string(pattern)), caseInsensitive: false))
                out.append(.string(op, .field("s"), .literal(.string(pattern)), caseInsensitive: true))
            }
        }
        return out
    }

    static func randomRow(_ rng: inout SeededRNG) -> [Value] {
        let strings = ["", "a", "ab", "abc", "b", "B", "xaby", "é", "aé", "b\u{0}", "ba", String(repeating: "ab", count: 90)]
        func pick<T>(_ xs: [T]) -> T { xs[Int(rng.next() % UInt64(xs.count))] }
        func maybe(_ v: Value) -> Value { rng.next() % 6 == 0 ? .null : v }
        let row: [Value] = [
            .string("k\(rng.next() % 4)"), maybe(.string(pick(strings))), maybe(.int(Int64(rng.next() % 9) - 4)),
            maybe(.double(Double(rng.next() % 100) / 8)), maybe(.date(Date(timeIntervalSinceReferenceDate: Double(rng.next() % 1000)))),
            maybe(.binary((0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })),
            maybe(.bool(rng.next() % 2 == 0)), maybe(.json(pick([JSON.int(1), ["k": "v"], [1, 2]]))), maybe(.bool(rng.next() % 2 == 0)),
        ]
        // Records written before later columns existed are shorter.
        return Array(row.prefix(rng.next() % 5 == 0 ? 1 + Int(rng.next() % 8) : row.count))
    }

    /// Row numbers of every varint length (1 to 10 bytes): the one-pass test reads a row number of
    /// up to 7 bytes with one 8-byte load, and hands longer ones (and records under 9 bytes) to a
    /// byte-by-byte path.
    static let rowIds: [UInt64] = [0, 1, 127, 128, 999, 1 << 14, 1 << 21, 1 << 28, 1 << 35, 1 << 42, (1 << 49) - 1, 1 << 49, 1 << 56, 1 << 63, .max]

    /// `matches` (one-pass test first) and `matchesInGeneral` either both throw `corrupt` or agree.
    static func agree(_ filter: RecordFilter, _ record: [UInt8]) -> Bool? {
        record.withUnsafeBytes { bytes in
            let general: Result<Bool, Error> = Result { try filter.matchesInGeneral(bytes) }
            let fast: Result<Bool, Error> = Result { try filter.matches(bytes) }
            switch (general, fast) {
            case (.success(let a), .success(let b)):
                #expect(a == b, "\(record)")
                return a
            case (.failure(let a), .failure(let b)):
                #expect((a as? LocalStoreError)?.code == .corrupt)
                #expect((b as? LocalStoreError)?.code == .corrupt)
                return nil
            default:
                Issue.record("the one-pass test and the general path disagree on \(record): \(general) vs \(fast)")
                return nil
            }
        }
    }

    @Test("the one-pass test answers as the general path and the evaluator, on valid and damaged records", arguments: [1, 2], RecordCodec.Layout.allCases)
    func onePassAgrees(seed: UInt64, layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: seed)
        let filters = try Self.predicates().map { p in
            RecordFilter(try ResolvedQuery(Query("Filtered", where: p), schema: Self.schema).predicate, schema: Self.schema)
        }
        // Every shape above but the json-guarded `after` and the `é`-pattern ones has a one-pass form.
        #expect(filters.filter(\.hasOnePassTest).count >= filters.count / 2)
        for _ in 0..<300 {
            let row = Self.randomRow(&rng)
            let record = RecordCodec.encode(row, rowId: Self.rowIds[Int(rng.next() % UInt64(Self.rowIds.count))], layout: layout)
            let decoded = try RecordCodec.decode(record, schema: Self.schema).row
            for filter in filters {
                let answer = Self.agree(filter, record)
                #expect(answer == filter.predicate.matches(decoded), "\(row)")
            }
            // The same record damaged: truncated, and with a byte changed.
            let cut = Array(record.prefix(Int(rng.next() % UInt64(record.count))))
            var flipped = record
            flipped[Int(rng.next() % UInt64(record.count))] = UInt8(truncatingIfNeeded: rng.next())
            for filter in filters {
                _ = Self.agree(filter, cut)
                _ = Self.agree(filter, flipped)
            }
        }
    }

    /// The general path's located fields read each column as the decoder does, whichever column is
    /// read first (a version-2 record's payloads are located when the first one is read).
    @Test("located fields read every column as the decoder does, in any order", arguments: RecordCodec.Layout.allCases)
    func fieldsReadAsDecoded(layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: 7)
        let width = Self.schema.columns.count
        let fields = RecordFields(schema: Self.schema, through: width - 1)
        for n in 0..<200 {
            let row = Self.randomRow(&rng)
            let record = RecordCodec.encode(row, rowId: Self.rowIds[n % Self.rowIds.count], layout: layout)
            let decoded = try RecordCodec.decode(record, schema: Self.schema)
            try record.withUnsafeBytes { bytes in
                for first in 0..<width {
                    try fields.locate(bytes)
                    #expect(try fields.value(first) == decoded.row[first], "column \(first) of \(row)")
                    for c in (0..<width).reversed() { #expect(try fields.value(c) == decoded.row[c]) }
                    #expect(try fields.rowId() == decoded.rowId)
                }
            }
        }
    }

    @Test("invalid UTF-8 in a tested string column is still corrupt", arguments: RecordCodec.Layout.allCases)
    func invalidUTF8(layout: RecordCodec.Layout) throws {
        let filter = RecordFilter(
            try ResolvedQuery(Query("Filtered", where: .string(.contains, .field("s"), .literal(.string("a")), caseInsensitive: false)), schema: Self.schema).predicate, schema: Self.schema)
        #expect(filter.hasOnePassTest)
        var record = RecordCodec.encode([.string("k"), .string("ab")], rowId: 1, layout: layout)
        record[record.count - 1] = 0xFF  // "a\u{FF}": not UTF-8
        let error = record.withUnsafeBytes { bytes in Result { try filter.matches(bytes) } }
        #expect(throws: LocalStoreError.self) { try error.get() }
    }
}

/// `count` of a boolean comparison runs a loop of its own over the table (`SimpleRecordTest.countBool`),
/// which hands the cursor's state back to the caller's general loop: every row is counted exactly once,
/// the first and the last by primary key included.
@Suite("LMDB boolean count")
struct BooleanCountTests {
    @Test("every matching row is counted once, the first and the last by id included")
    func firstAndLast() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema(name: "B", columns: [Column("id", .string), Column("flag", .boolean)]))
        let ids = (0..<10).map { "r\($0)" }
        // Which rows hold true (nil: null); each pattern is written over the previous one.
        let patterns: [[Bool?]] = [
            [false, false, false, false, false, false, false, false, false, true],
            [true, false, false, false, false, false, false, false, false, false],
            Array(repeating: true, count: 10),
            Array(repeating: false, count: 10),
            [true, nil, false, true, nil, false, true, nil, false, true],
        ]
        for pattern in patterns {
            let items = zip(ids, pattern).map { id, flag -> Item in
                ["id": .string(id), "flag": flag.map(Value.bool) ?? .null]
            }
            try store.upsert(items, into: "B")
            let trues = pattern.filter { $0 == true }.count
            let falses = pattern.filter { $0 == false }.count
            #expect(try store.count("B", where: Field("flag") == true) == trues, "\(pattern)")
            #expect(try store.count("B", where: Field("flag") == false) == falses, "\(pattern)")
            #expect(try store.count("B", where: Field("flag") != true) == falses, "\(pattern)")
        }
    }
}

@Suite("LMDB item projection")
struct ItemProjectorTests {
    @Test("items are built exactly as ResolvedQuery.project builds them, for every projection")
    func sameItems() throws {
        var rng = SeededRNG(seed: 7)
        let schema = RecordFilterTests.schema
        let names = schema.columns.map(\.name)
        var selections: [[String]?] = [nil, ["id"], ["b", "s"], names, ["j", "after", "i"]]
        let some = names.filter { _ in rng.next() % 2 == 0 }
        selections.append(some.isEmpty ? ["i"] : some)
        for selection in selections {
            let q = try ResolvedQuery(Query("Filtered", select: selection), schema: schema)
            let projector = ItemProjector(q)
            for _ in 0..<50 {
                var row = RecordFilterTests.randomRow(&rng)
                row += Array(repeating: .null, count: schema.columns.count - row.count)
                let item = projector.item(row)
                #expect(item == q.project(row))
                #expect(item.values == q.project(row).values)
                #expect(item.count == q.projection.count)
            }
            #expect(projector.items([]).isEmpty)
        }
        // A query of every column shares the whole-row builder's layout.
        let whole = RecordItemBuilder(schema: schema)
        let row = RecordFilterTests.randomRow(&rng) + Array(repeating: .null, count: schema.columns.count)
        let item = ItemProjector(try ResolvedQuery(Query("Filtered"), schema: schema), wholeRows: whole).item(Array(row.prefix(schema.columns.count)))
        #expect(item.layout === whole.layout)
    }

    @Test("a range plan's items equal a full scan's; of every column, in row form")
    func rangeItemsInRowForm() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ItemProjectorTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try LMDBStore(path: dir.path)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["p": .integer, "s": .string], indexed: ["p"]))
        try store.upsert((0..<60).map { n in ["id": .string("r\(n)"), "p": .int(Int64(n % 3)), "s": .string("s\(n)")] }, into: "T")
        for select in [nil, ["s"], ["s", "id"]] as [[String]?] {
            let q = Query("T", where: Field("p") == .literal(.int(1)), select: select)
            #expect(try store.explain(q) == "index p")
            let got = try store.read(q).items
            #expect(got.count == 20)
            if select == nil { #expect(got.allSatisfy { $0.layout != nil && $0.layout === got.first?.layout }) }
            // `p + 0 == 1` is not answered by the index: a full scan, whose rows the evaluator projects.
            let scanned = Query(
                "T",
                where: .compare(.arithmetic(.add, .field("p"), .literal(.int(0))), .equal, .literal(.int(1)), caseInsensitive: false),
                select: select)
            #expect(try store.explain(scanned) == "full scan")
            #expect(Set(got) == Set(try store.read(scanned).items))
        }
    }
}
