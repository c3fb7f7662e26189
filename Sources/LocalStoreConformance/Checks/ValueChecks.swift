import Foundation
import LocalStore

// Values round-trip exactly; naughty strings as ids and as values.

extension ConformanceSuite {
    /// Strings that break naive SQL, LIKE patterns, C strings, JSON or Unicode handling. Distinct under
    /// the NOCASE rule, so they can all be ids of one table.
    public static let naughtyStrings: [String] = [
        "", " ", "  ", "'", "\"", "''", "\"\"", "' OR '1'='1", "'; DROP TABLE TodoItem; --", "%", "_", "%_%", "a%", "_a",
        "\\", "\\\\", "\\'", "\\%", "\\_", "a\u{0}b", "\u{0}", "\u{0}\u{0}", "trailing\u{0}", "\u{0}leading", "\t\n\r", "\u{7F}\u{1}",
        "null", "undefined", "🎉", "👨‍👩‍👧‍👦", "🇺🇦", "مرحبا بالعالم", "\u{202E}evil\u{202C}", "שלום עולם", "日本語テキスト", "e\u{301}", "é",
        "\u{FEFF}bom", "\u{FFFD}", "\u{10FFFF}", "Ω≈ç√∫", "ǅ", "$1", "?", ":name", "@p", "{\"json\": true}", "[1,2]",
        "<script>alert(1)</script>", "a'b\"c%d_e\\f", String(repeating: "🎉", count: 1000), oneMegabyteString,
    ]

    /// A string of a little more than 1 MB, mixing ASCII and multi-byte characters.
    public static let oneMegabyteString: String = "big:" + String(repeating: "0123456789abcdef", count: 65_536) + "é🎉\u{0}end"

    /// Integers round-trip exactly, including the extremes, and are found by equality.
    public static func roundTripIntegers(_ factory: StoreFactory) throws {
        let values: [Int64] = [0, 1, -1, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1, 9_007_199_254_740_993, -9_007_199_254_740_993, 1 << 32]
        try roundTrip(factory, column: "count", values.map(Value.int))
    }

    /// Doubles round-trip bit for bit (0.1, 1e300, subnormals, extremes) and are found by equality.
    public static func roundTripDoubles(_ factory: StoreFactory) throws {
        let values: [Double] = [
            0, 0.1, 0.2, 0.30000000000000004, 1.0 / 3, Double.pi, -1.5, 1e300, -1e300, 1e-300, Double.leastNonzeroMagnitude,
            -Double.leastNonzeroMagnitude, Double.leastNormalMagnitude, Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude,
            9_007_199_254_740_992, 9.223_372_036_854_775_808e18, 123_456_789.123_456_789, 1, 2.5e-8,
        ]
        try roundTrip(factory, column: "ratio", values.map(Value.double))
    }

    /// Negative zero keeps its sign bit (doubles round-trip bit for bit), in a double column and in
    /// json, and still equals zero in a query.
    ///
    /// SQLite turns `-0.0` into `0.0` in a column with REAL affinity (it stores integral reals as
    /// integers); a SQLite backend must store doubles without REAL affinity (or as blobs) to pass.
    public static func roundTripNegativeZero(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            try store.upsert([["id": "neg", "ratio": .double(-0.0), "doc": .json([.double(-0.0), ["z": .double(-0.0)]])], ["id": "pos", "ratio": 0.0]], into: "Typed")
            let item = try unwrap(try store.read(table: "Typed", id: "neg"), "row neg")
            try expectIdentical(item["ratio"], .double(-0.0), "-0.0 in a double column")
            try expectIdentical(item["doc"], .json([.double(-0.0), ["z": .double(-0.0)]]), "-0.0 inside json")
            try expectIdentical(try store.read(table: "Typed", id: "pos")?["ratio"], .double(0.0), "+0.0")
            try expectEqual(try readIds(store, Query("Typed", where: Field("ratio") == 0)), ["neg", "pos"], "-0.0 == 0")
            try expectEqual(try readIds(store, Query("Typed", where: Field("ratio") == .literal(.double(-0.0)))), ["neg", "pos"], "0.0 == -0.0")
        }
    }

    /// Dates round-trip with full `Date` precision (sub-millisecond, far past and far future).
    public static func roundTripDates(_ factory: StoreFactory) throws {
        let values: [Date] = [
            Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSince1970: 0), date(0.123_456_789), date(0.000_001),
            date(-0.000_7), Date(timeIntervalSince1970: -1.5), Date(timeIntervalSince1970: -2_208_988_800.000_9),
            Date(timeIntervalSince1970: 32_503_680_000.000_4), Date.distantPast, Date.distantFuture,
            Date(timeIntervalSinceReferenceDate: 700_000_000.000_000_1), Date(timeIntervalSinceReferenceDate: -63_114_076_800.25),
            Date(timeIntervalSinceReferenceDate: 1e-9), Date(timeIntervalSinceReferenceDate: 253_402_300_799.999),
        ]
        try roundTrip(factory, column: "moment", values.map(Value.date))
    }

    /// Binary values round-trip byte for byte: empty (distinct from null), every byte value, NULs.
    public static func roundTripBinary(_ factory: StoreFactory) throws {
        var generator = SeededGenerator(seed: 42)
        let random = (0..<65_536).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let values: [[UInt8]] = [
            [], [0], [0, 0, 0], Array(0...255), Array((0...255).reversed()), [255], [0x27, 0x22, 0x5C, 0x25], Array("text".utf8), random,
        ]
        try roundTrip(factory, column: "blob", values.map(Value.binary))
    }

    /// Booleans round-trip and stay distinct from null.
    public static func roundTripBooleans(_ factory: StoreFactory) throws {
        try roundTrip(factory, column: "flag", [.bool(true), .bool(false)])
    }

    /// Json round-trips as the same nested structure: integers stay integers, doubles stay doubles,
    /// strings byte for byte, key order irrelevant.
    public static func roundTripJSON(_ factory: StoreFactory) throws {
        var deep: JSON = ["leaf": [1, 1.0]]
        for n in 0..<100 { deep = n % 2 == 0 ? [deep] : ["level\(n)": deep] }
        let documents: [JSON] = [
            ["a": 1, "b": 1.0, "c": [1, 1.0, -0.5, 1e300, .int(Int64.max), .int(Int64.min), 0, 0.0, 2.5e-8], "d": ["e": ["f": [true, false, nil]]]],
            [], [:], [[], [:], [[]]], .null, true, false, 42, 42.0, -7, 0.1, "", "plain",
            .string("quotes \" ' and \\ backslash / slash \u{0} nul \u{1F} control \n newline"),
            ["ключ": "值", "🎉": ["emoji", "👨‍👩‍👧‍👦"], "": "empty key", "a\u{0}b": "nul key", "rtl": "مرحبا"],
            ["nested": ["int": 9_007_199_254_740_993, "double": 9_007_199_254_740_992.0, "neg": -1]],
            .string(String(repeating: "x", count: 100_000)),
            deep,
        ]
        try roundTrip(factory, column: "doc", documents.map(Value.json), queryable: false)
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            try store.upsert([["id": "int", "doc": .json(1)], ["id": "double", "doc": .json(1.0)]], into: "Typed")
            let int = try store.read(table: "Typed", id: "int")?["doc"]
            let double = try store.read(table: "Typed", id: "double")?["doc"]
            try expect(int == .json(.int(1)), "json 1 must stay an integer, got \(String(describing: int))")
            try expect(double == .json(.double(1)), "json 1.0 must stay a double, got \(String(describing: double))")
        }
    }

    /// Codable records: single-value types (a `String` and an `Int` raw-value enum, a wrapper of a `Date`)
    /// are stored as their scalar in string, integer and date columns and read back; a keyed enum stays
    /// json; the Codable upsert honours its options; and Swift values (`Date`, `Bool`, `Int`, `Double`,
    /// `String`, a raw-value enum) filter directly as predicate literals.
    public static func codableRecordsAndSwiftLiterals(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(
                TableSchema(
                    "Coded",
                    ["priority": .string, "level": .integer, "stamp": .date, "done": .boolean, "ratio": .double, "shape": .json]))
            let base = Date(timeIntervalSinceReferenceDate: 800_000_000.000_25)
            let records = (0..<4).map { (i: Int) -> CodedRecord in
                CodedRecord(
                    id: "c\(i)", priority: i % 2 == 0 ? .high : .low, level: i < 2 ? .one : .two,
                    stamp: CodedStamp(date: base + Double(i)), done: i == 3, ratio: Double(i) / 4,
                    shape: i == 0 ? .circle(radius: 1.5) : .square)
            }
            try store.upsert(records: records, into: "Coded")
            let raw = try unwrap(try store.read(table: "Coded", id: "c0"), "row c0")
            try expectIdentical(raw["priority"], .string("high"), "a String enum is stored as its raw value")
            try expectIdentical(raw["level"], .int(1), "an Int enum is stored as its raw value")
            try expectIdentical(raw["stamp"], .date(base), "a wrapper of a Date is stored as the date")
            try expectIdentical(raw["shape"], .json(["circle": ["radius": 1.5]]), "an enum with a payload is json")
            try expectEqual(try store.read(CodedRecord.self, table: "Coded", id: "c2"), records[2], "decoded back")

            let since = base + 1
            let done = false
            let minimum = 0.25
            let level = CodedLevel.two
            try expectEqual(
                try store.read(
                    CodedRecord.self,
                    Query("Coded", where: Field("stamp") >= since && Field("done") == done && Field("ratio") >= minimum && Field("level") == level)),
                [records[2]], "stamp >= date && done == false && ratio >= 0.25 && level == .two")
            let name = "low"
            let count = 1
            try expectSameIds(
                try readIds(store, Query("Coded", where: Field("priority") == name && Field("level") > count)), ["c3"],
                "priority == \"low\" && level > 1")
            try expectSameIds(
                try readIds(store, Query("Coded", where: Field("stamp").isBetween(base, and: since) && Field("priority") == CodedPriority.high)),
                ["c0"], "stamp between two dates && priority == .high")

            struct Pulled: Codable { var id: String; var priority: CodedPriority; var serverOnly: Int }
            try expectThrows(code: .unknownColumn, "an unknown column without options") {
                try store.upsert(records: [Pulled(id: "p", priority: .low, serverOnly: 1)], into: "Coded")
            }
            try expectNil(try store.read(table: "Coded", id: "p"), "nothing written by the refused upsert")
            try store.write { tx in
                try tx.upsert(records: [Pulled(id: "p", priority: .low, serverOnly: 1)], into: "Coded", options: .ignoringUnknownColumns)
            }
            try expectIdentical(try store.read(table: "Coded", id: "p")?["priority"], .string("low"), "upsert ignoring unknown columns")
        }
    }

    /// Strings of every awkward kind as ids: read back exactly, found by id equality, deleted by id.
    public static func naughtyStringsAsIds(_ factory: StoreFactory) throws {
        try expectDistinctUnderNoCase(ConformanceSuite.naughtyStrings)
        // The empty string is not an id (upsertEmptyIdRefused): every other naughty string is.
        let naughtyStrings = ConformanceSuite.naughtyStrings.filter { !$0.isEmpty }
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            let items: [Item] = naughtyStrings.enumerated().map { ["id": .string($0.element), "count": .int(Int64($0.offset))] }
            try store.upsert(shuffled(items, seed: 3), into: "Typed")
            try expectEqual(try store.count("Typed"), naughtyStrings.count, "every naughty id is a distinct row")
            for (n, s) in naughtyStrings.enumerated() {
                let item = try unwrap(try store.read(table: "Typed", id: s), "read id \(abbreviated(debugText(s), limit: 60))")
                try expectIdentical(item["id"], .string(s), "the id bytes")
                try expectIdentical(item["count"], .int(Int64(n)), "the row of id \(abbreviated(debugText(s), limit: 60))")
                let found = try store.read(Query("Typed", where: Field("id") == lit(s), select: ["count"])).items
                try expectEqual(found, [["count": .int(Int64(n))]], "id == \(abbreviated(debugText(s), limit: 60))")
            }
            let all = try store.read(Query("Typed", select: ["id"])).items.compactMap { $0["id"]?.stringValue }
            try expectEqual(Set(all.map { Array($0.utf8) }), Set(naughtyStrings.map { Array($0.utf8) }), "every id listed once")
            let doomed = ["'", "%", "a\u{0}b", oneMegabyteString]
            try store.delete(ids: doomed, from: "Typed")
            try expectEqual(try store.count("Typed"), naughtyStrings.count - doomed.count, "deleting naughty ids")
            for s in doomed { try expectNil(try store.read(table: "Typed", id: s), "deleted id \(abbreviated(debugText(s), limit: 60))") }
            try expectNotNil(try store.read(table: "Typed", id: "\"\""), "other ids untouched")
        }
    }

    /// Strings of every awkward kind as values (in string and json columns): read back exactly and
    /// found by equality, each matching only its own row.
    public static func naughtyStringsAsValues(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            let items: [Item] = naughtyStrings.enumerated().map {
                ["id": .string("row\($0.offset)"), "text": .string($0.element), "doc": .json(["s": .string($0.element)])]
            }
            try store.upsert(shuffled(items, seed: 4), into: "Typed")
            try store.upsert([["id": "null-text"]], into: "Typed")
            for (n, s) in naughtyStrings.enumerated() {
                let label = abbreviated(debugText(s), limit: 60)
                let item = try unwrap(try store.read(table: "Typed", id: "row\(n)"), "row of \(label)")
                try expectIdentical(item["text"], .string(s), "string value \(label)")
                try expectIdentical(item["doc"], .json(["s": .string(s)]), "json string \(label)")
                let matches = naughtyStrings.indices.filter { naughtyStrings[$0].utf8.elementsEqual(s.utf8) }.map { "row\($0)" }
                try expectEqual(
                    Set(try readIds(store, Query("Typed", where: Field("text") == lit(s)))), Set(matches), "text == \(label) (byte equality)")
            }
            try expectEqual(try store.count("Typed", where: Field("text").isNull), 1, "the empty string is not null")
            try expectEqual(try store.count("Typed", where: Field("text") == ""), 1, "only the empty string equals ''")
        }
    }
}

/// Writes each value to its own row of `column` of ``typedSchema``, then reads them back by id and by
/// query and checks them bit for bit; also finds each by equality when `queryable`.
func roundTrip(_ factory: StoreFactory, column: String, _ values: [Value], queryable: Bool = true) throws {
    try withWorkspace(factory) { workspace in
        var store = try workspace.open()
        try store.defineTable(typedSchema)
        let items: [Item] = values.enumerated().map { ["id": .string("v\($0.offset)"), column: $0.element] }
        try store.upsert(shuffled(items, seed: 11) + [["id": "null"]], into: "Typed")
        func verify(_ store: any LocalStore, _ stage: String) throws {
            for (n, value) in values.enumerated() {
                let item = try unwrap(try store.read(table: "Typed", id: "v\(n)"), "\(stage): row v\(n)")
                try expectIdentical(item[column], value, "\(stage): \(column) of row v\(n) read by id")
                if queryable {
                    let found = try store.read(Query("Typed", where: Field(column) == .literal(value))).items
                    let expected = values.indices.filter { Reference.compare(values[$0], value, noCase: false) == 0 }.map { "v\($0)" }
                    try expectEqual(Set(try ids(found)), Set(expected), "\(stage): \(column) == \(render(value))")
                }
            }
            let all = try store.read(Query("Typed", select: [column])).items
            try expectEqual(all.count, values.count + 1, "\(stage): row count")
            try expectIdentical(try store.read(table: "Typed", id: "null")?[column], .null, "\(stage): null stays null")
            try expectEqual(try store.count("Typed", where: Field(column).isNull), 1, "\(stage): exactly one null")
        }
        try verify(store, "fresh")
        if let reopened = try workspace.reopen(store) {
            store = reopened
            try verify(store, "after reopening")
        }
    }
}

/// Throws unless no two strings are the same id under the NOCASE rule (a guard on the suite's data).
func expectDistinctUnderNoCase(_ strings: [String]) throws {
    for i in strings.indices {
        for j in strings.indices where j > i && strings[i].utf8.count == strings[j].utf8.count {
            try expect(Reference.compareNoCase(strings[i], strings[j]) != 0, "suite bug: \(debugText(strings[i])) and \(debugText(strings[j])) collide")
        }
    }
}

/// Throws when `value` is `nil`.
func expectNotNil<T>(_ value: T?, _ message: @autoclosure () -> String, fileID: String = #fileID, filePath: String = #filePath, line: Int = #line) throws {
    if value == nil { throw ConformanceFailure("expected a value: \(message())", fileID: fileID, filePath: filePath, line: line) }
}

enum CodedPriority: String, Codable, Equatable, QueryValueConvertible { case low, high }
enum CodedLevel: Int, Codable, Equatable, QueryValueConvertible { case one = 1, two = 2 }
enum CodedShape: Codable, Equatable { case circle(radius: Double), square }

/// A `Date` behind `singleValueContainer()`.
struct CodedStamp: Codable, Equatable {
    var date: Date
    init(date: Date) { self.date = date }
    init(from decoder: any Decoder) throws { date = try decoder.singleValueContainer().decode(Date.self) }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(date)
    }
}

struct CodedRecord: Codable, Equatable {
    var id: String
    var priority: CodedPriority
    var level: CodedLevel
    var stamp: CodedStamp
    var done: Bool
    var ratio: Double
    var shape: CodedShape
}
