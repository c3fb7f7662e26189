import Foundation
import LocalStore
import Testing

/// SQLite's `nocaseCollatingFunc` and `sqlite3StrNICmp`, ported line by line from sqlite3.c, as the
/// ground truth for ``Collation``.
private func sqliteNoCase(_ a: String, _ b: String) -> Int {
    let left = Array(a.utf8)
    let right = Array(b.utf8)
    func fold(_ c: UInt8) -> Int { Int((65...90).contains(c) ? c + 32 : c) }
    // sqlite3StrNICmp(zLeft, zRight, N) with N = min(nKey1, nKey2); the buffers are not NUL-terminated,
    // so reading one past the end is replaced by 0, which is what SQLite's callers guarantee.
    var n = min(left.count, right.count)
    var i = 0
    func at(_ bytes: [UInt8], _ k: Int) -> UInt8 { k < bytes.count ? bytes[k] : 0 }
    while true {
        let more = n > 0
        n -= 1
        guard more, at(left, i) != 0, fold(at(left, i)) == fold(at(right, i)) else { break }
        i += 1
    }
    var r = n < 0 ? 0 : fold(at(left, i)) - fold(at(right, i))
    if r == 0 { r = left.count - right.count }
    return r
}

private func sign(_ x: Int) -> Int { x < 0 ? -1 : (x > 0 ? 1 : 0) }

/// Strings that exercise NOCASE: case, NUL in every position, prefixes, non-ASCII, bytes around the
/// ASCII letters.
private let noCaseSamples: [String] = [
    "", "a", "A", "b", "B", "ab", "AB", "aB", "abc", "ABD", "a\u{0}", "A\u{0}", "a\u{0}b", "A\u{0}c", "a\u{0}bc", "\u{0}", "\u{0}\u{0}",
    "\u{0}a", "\u{0}A", "@", "[", "`", "{", "_", "Z", "z", "é", "É", "e\u{301}", "ß", "SS", "ss", "ı", "I", "i", "\u{212A}", "k", "K",
    "straße", "STRASSE", "row-01", "ROW-01", "Row-10", "\u{7F}", "\u{80}", "ÿ", "🎉", "a🎉", "A🎉",
]

@Suite("Core: JSON")
struct JSONTests {
    @Test(
        "parse, serialize, parse again",
        arguments: [
            "null", "true", "false", "0", "-0", "1", "-1", "1.0", "-0.0", "0.1", "1e300", "2.5E-8", "9223372036854775807", "-9223372036854775808",
            "9223372036854775808", "\"\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u00e9\\ud83c\\udf89\\u0000\"", "[]", "{}", "[[],{},[[]]]",
            "{\"b\":1,\"a\":[1,2.5,true,null,\"x\"],\"\":{}}", " { \"k\" : [ 1 , 2 ] } ", "\"日本語 🎉\"",
        ])
    func roundTrip(_ text: String) throws {
        let document = try JSON(parsing: text)
        let serialized = document.jsonText
        #expect(try JSON(parsing: serialized) == document)
        #expect(try JSON(parsing: Array(serialized.utf8)) == document)
        #expect(JSON.parsingIsStable(serialized), "serializing twice gives the same text: \(serialized)")
        #expect(document.textByteCount == serialized.utf8.count, "textByteCount of \(serialized)")
    }

    @Test("textByteCount is the UTF-8 size of jsonText")
    func textByteCount() {
        let documents: [JSON] = [
            nil, true, false, 0, -1, .int(.min), .int(.max), 1.0, -0.0, 0.1, 1e300, -2.5e-300, .double(.leastNonzeroMagnitude),
            1e16, 123456789012345680000.0, "", "é🎉", "\u{0}\u{1}\u{1F}\u{7F}\t\n\r\"\\/", [], [:], [1, "a", [nil]],
            ["b": 1, "a": [1, 2.5, true, nil, "x"], "B": ["é": "\u{1}\n\"\\"], "": [:]],
        ]
        for document in documents {
            #expect(document.textByteCount == document.jsonText.utf8.count, "\(document.jsonText)")
        }
    }

    @Test("integers and doubles stay apart")
    func numbers() throws {
        #expect(try JSON(parsing: "1") == .int(1))
        #expect(try JSON(parsing: "1.0") == .double(1))
        #expect(try JSON(parsing: "1e2") == .double(100))
        #expect(try JSON(parsing: "-0") == .int(0))
        #expect(try JSON(parsing: "9223372036854775807") == .int(.max))
        #expect(try JSON(parsing: "-9223372036854775808") == .int(.min))
        #expect(try JSON(parsing: "9223372036854775808") == .double(9_223_372_036_854_775_808.0))
        #expect(JSON.double(1).jsonText == "1.0")
        #expect(JSON.double(-0.0).jsonText == "-0.0")
        #expect(try JSON(parsing: JSON.double(-0.0).jsonText).doubleBits == (-0.0).bitPattern)
        #expect(JSON.double(0.1).jsonText == "0.1")
        #expect(try JSON(parsing: JSON.double(1e300).jsonText) == .double(1e300))
        #expect(try JSON(parsing: JSON.double(.leastNonzeroMagnitude).jsonText) == .double(.leastNonzeroMagnitude))
        #expect(JSON.int(.min).jsonText == "-9223372036854775808")
    }

    @Test("text is compact, keys sorted by bytes, strings escaped")
    func canonicalText() throws {
        let document: JSON = ["b": 1, "a": [1, 2.5, true, nil, "x"], "B": ["é": "\u{1}\n\"\\"]]
        #expect(document.jsonText == "{\"B\":{\"é\":\"\\u0001\\n\\\"\\\\\"},\"a\":[1,2.5,true,null,\"x\"],\"b\":1}")
        #expect(try JSON(parsing: "{\"a\":1,\"b\":2}") == JSON(parsing: "{\"b\":2,\"a\":1}"))
        #expect(try JSON(parsing: "\"\\u00e9\\ud83c\\udf89\"") == .string("é🎉"))
    }

    @Test(
        "malformed text is invalidValue",
        arguments: [
            "", " ", "{", "}", "[1,]", "[1 2]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{a:1}", "tru", "nul", "falsey", "\"unterminated",
            "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\ud800\\u0041\"", "\"a\u{1}b\"", "1.", ".5", "1e", "1e+", "-", "+1", "NaN", "Infinity",
            "-Infinity", "1e400", "-1e400", "1 2", "[] []", "'a'",
        ])
    func malformed(_ text: String) {
        do {
            _ = try JSON(parsing: text)
            Issue.record("\(text.debugDescription) was accepted")
        } catch let error as LocalStoreError {
            #expect(error.code == .invalidValue)
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test("nesting is limited")
    func nesting() throws {
        let ok = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(throws: Never.self) { try JSON(parsing: ok) }
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: LocalStoreError.self) { try JSON(parsing: deep) }
    }

    @Test("non-finite numbers are detected at any depth")
    func nonFinite() {
        #expect(JSON.double(.nan).containsNonFiniteNumber)
        #expect(JSON.array([1, ["x": [.double(-.infinity)]]]).containsNonFiniteNumber)
        #expect(!JSON.array([1, ["x": [2.5]]]).containsNonFiniteNumber)
    }
}

extension JSON {
    /// Whether serializing the parse of `text` reproduces `text`.
    fileprivate static func parsingIsStable(_ text: String) -> Bool {
        guard let once = try? JSON(parsing: text) else { return false }
        return once.jsonText == text
    }

    fileprivate var doubleBits: UInt64? {
        if case .double(let d) = self { return d.bitPattern }
        return nil
    }
}

@Suite("Core: identifiers")
struct IdentifierTests {
    @Test("valid identifiers", arguments: ["a", "A", "_", "__", "a1", "_9", "TodoItem", "MS_TableOperations", String(repeating: "x", count: 128)])
    func valid(_ name: String) throws {
        #expect(Identifier.isValid(name))
        try Identifier.validate(name)
    }

    /// Every byte as the first and as a later character against the definition
    /// `^[A-Za-z_][A-Za-z0-9_]{0,127}$`, written out as ranges.
    @Test("every byte, first and later")
    func everyByte() {
        func letter(_ b: UInt8) -> Bool { (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x5F }
        func digit(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) }
        for b in UInt8.min...UInt8.max {
            let alone = String(decoding: [b], as: UTF8.self)
            let later = String(decoding: [0x61, b, 0x5F], as: UTF8.self)
            // A byte that is not valid UTF-8 alone decodes to U+FFFD, which is not valid either.
            #expect(Identifier.isValid(alone) == (b < 0x80 && letter(b)), "byte \(b) first")
            #expect(Identifier.isValid(later) == (b < 0x80 && (letter(b) || digit(b))), "byte \(b) later")
        }
    }

    @Test(
        "invalid identifiers",
        arguments: ["", "1a", "9", "a-b", "a b", " a", "a.b", "é", "a\u{0}", "$", "a$", "🎉", String(repeating: "x", count: 129), "ａ"])
    func invalid(_ name: String) {
        #expect(!Identifier.isValid(name))
        do {
            try Identifier.validate(name)
            Issue.record("\(name.debugDescription) was accepted")
        } catch let error as LocalStoreError {
            #expect(error.code == .invalidIdentifier)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("folding is ASCII only")
    func folding() {
        #expect(Identifier.fold("TodoItem") == "todoitem")
        #expect(Identifier.fold("ÉCLAIR") == "Éclair")
        #expect(ASCII.uppercased("straße") == "STRAßE")
        #expect(ASCII.lowercased("A\u{0}B") == "a\u{0}b")
    }
}

@Suite("Core: NOCASE collation")
struct CollationTests {
    @Test("compareNoCase agrees with SQLite's NOCASE on every pair")
    func agreesWithSQLite() {
        for a in noCaseSamples {
            for b in noCaseSamples {
                let expected = sign(sqliteNoCase(a, b))
                let actual = sign(Collation.compareNoCase(a, b))
                #expect(actual == expected, "compareNoCase(\(a.debugDescription), \(b.debugDescription))")
                #expect(sign(Collation.compareNoCase(b, a)) == -actual, "antisymmetry for \(a.debugDescription), \(b.debugDescription)")
            }
        }
    }

    @Test("noCaseKey is equal exactly when compareNoCase says equal")
    func keys() {
        for a in noCaseSamples {
            for b in noCaseSamples {
                let same = Collation.compareNoCase(a, b) == 0
                #expect((Collation.noCaseKey(a).utf8.elementsEqual(Collation.noCaseKey(b).utf8)) == same, "\(a.debugDescription) vs \(b.debugDescription)")
            }
        }
    }

    @Test("the documented consequences of the NUL rule")
    func nulRule() {
        #expect(Collation.compareNoCase("a\u{0}b", "A\u{0}c") == 0)
        #expect(Collation.compareNoCase("a\u{0}b", "a\u{0}bc") < 0)
        #expect(Collation.compareNoCase("a\u{0}", "a") > 0)
        #expect(Collation.compareNoCase("\u{0}", "\u{0}\u{0}") < 0)
        #expect(Collation.compareNoCase("é", "É") != 0)
        #expect(Collation.compareNoCase("e\u{301}", "é") != 0)
        #expect(Collation.compareNoCase("_", "a") < 0)
        #expect(Collation.compareNoCase("_", "A") < 0)
    }

    @Test("compare orders values as documented")
    func values() {
        #expect(Collation.compare(.null, .int(0)) < 0)
        #expect(Collation.compare(.int(2), .double(2.5)) < 0)
        #expect(Collation.compare(.int(Int64.max), .double(9_223_372_036_854_775_808.0)) == 0)
        #expect(Collation.compare(.string("Z"), .string("a")) < 0)
        #expect(Collation.compare(.string("Z"), .string("a"), noCase: true) > 0)
        #expect(Collation.compare(.bool(false), .bool(true)) < 0)
        #expect(Collation.compare(.binary([1]), .binary([1, 0])) < 0)
        #expect(Collation.compare(.binary([0, 9]), .binary([1])) < 0)
        #expect(Collation.compare(.date(Date(timeIntervalSince1970: 1)), .date(Date(timeIntervalSince1970: 2))) < 0)
    }
}

@Suite("Core: delta token format")
struct DeltaTokenFormatTests {
    @Test("known dates")
    func known() {
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: 1_234_567_890.123)) == "2009-02-13T23:31:30.123Z")
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
        #expect(DeltaTokenFormat.date(from: "2009-02-13T23:31:30.123Z").map { ($0.timeIntervalSince1970 * 1000).rounded() } == 1_234_567_890_123)
        #expect(DeltaTokenFormat.date(from: "2009-02-13T23:31:30Z") == Date(timeIntervalSince1970: 1_234_567_890))
    }

    @Test("round trip at millisecond precision")
    func roundTrip() {
        var seed: UInt64 = 12345
        for _ in 0..<2000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let ms = Int64(bitPattern: seed >> 1) % 100_000_000_000_000  // ±3170 years
            let date = Date(timeIntervalSince1970: Double(ms) / 1000)
            guard ms >= -62_135_596_800_000, ms < 253_402_300_800_000 else { continue }  // years 1...9999
            let text = DeltaTokenFormat.string(from: date)
            let back = DeltaTokenFormat.date(from: text)
            #expect(back.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } == ms, "\(ms) → \(text)")
        }
    }

    /// The formatter as it was written first (string interpolation of padded fields): the written-in-place
    /// one must give the same text for every date.
    private static func interpolated(_ date: Date) -> String {
        let ms = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = Int64((ms / 1000).rounded(.down))
        let millis = Int(ms - Double(seconds) * 1000)
        let days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400)
        let secOfDay = Int(seconds - days * 86400)
        // Howard Hinnant's civil_from_days.
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = Int(doy - (153 * mp + 2) / 5 + 1)
        let m = Int(mp < 10 ? mp + 3 : mp - 9)
        let y = Int(yoe + era * 400 + (m <= 2 ? 1 : 0))
        func pad(_ v: Int, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secOfDay / 3600, 2)):\(pad(secOfDay / 60 % 60, 2)):\(pad(secOfDay % 60, 2)).\(pad(millis, 3))Z"
    }

    @Test("the same text as the interpolating formatter, inside and outside the years 0000 to 9999")
    func sameAsInterpolated() {
        var seed: UInt64 = 987
        var dates = [
            -62_167_219_200_000.0, -62_167_219_200_001, 253_402_300_799_999, 253_402_300_800_000, 0, -1, 1, 999, -999,
            -62_167_219_200_000.4, 253_402_300_799_999.4, 1e15, -1e15, 8e17,
        ].map { Date(timeIntervalSince1970: $0 / 1000) }
        for _ in 0..<20_000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            // ±31,700 years, fractions of a millisecond included.
            dates.append(Date(timeIntervalSince1970: Double(Int64(bitPattern: seed >> 1) % 1_000_000_000_000_000) / 1000 + Double(seed & 0xFF) / 256_000))
        }
        for date in dates {
            #expect(DeltaTokenFormat.string(from: date) == Self.interpolated(date), "\(date.timeIntervalSince1970)")
        }
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: -62_167_219_200)) == "0000-01-01T00:00:00.000Z")
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: 253_402_300_799.999)) == "9999-12-31T23:59:59.999Z")
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: 253_402_300_800)) == "10000-01-01T00:00:00.000Z")
    }

    @Test("years 0000 to 9999 are storable; other dates format without trapping")
    func storableRange() {
        #expect(DeltaTokenFormat.isStorable(Date(timeIntervalSince1970: -62_167_219_200)))
        #expect(DeltaTokenFormat.isStorable(Date(timeIntervalSince1970: 253_402_300_799.999)))
        #expect(DeltaTokenFormat.isStorable(Date(timeIntervalSince1970: 253_402_300_799.9994)))  // rounds to .999
        #expect(!DeltaTokenFormat.isStorable(Date(timeIntervalSince1970: 253_402_300_799.9996)))  // rounds into 10000
        #expect(!DeltaTokenFormat.isStorable(Date(timeIntervalSince1970: -62_167_219_200.001)))
        for t in [Double.infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 1e300] {
            let date = Date(timeIntervalSince1970: t)
            #expect(!DeltaTokenFormat.isStorable(date))
            #expect(DeltaTokenFormat.date(from: DeltaTokenFormat.string(from: date)) == nil)
        }
        #expect(!DeltaTokenFormat.isStorable(Date(timeIntervalSince1970: .nan)))
        #expect(DeltaTokenFormat.string(from: Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00.000Z")
    }

    @Test("row ids: the lower-cased table and the query id's bytes in hex")
    func rowIds() {
        #expect(DeltaTokenKey.rowId(table: "TodoItem", queryId: "all") == "deltaToken|todoitem|616C6C")
        #expect(DeltaTokenKey.rowId(table: "A_z9", queryId: "é|\u{7F}") == "deltaToken|a_z9|C3A97C7F")
        #expect(DeltaTokenKey.rowId(table: "", queryId: "") == "deltaToken||")
        let long = String(repeating: "Q", count: 255)
        #expect(DeltaTokenKey.rowId(table: "T", queryId: long) == "deltaToken|t|" + String(repeating: "51", count: 255))
        // Bytes other than A–Z are kept as they are (the table is validated before it is used).
        #expect(DeltaTokenKey.rowId(table: "ÉA[", queryId: "x") == "deltaToken|Éa[|78")
    }

    @Test("malformed text", arguments: ["", "2009-02-13", "2009-02-13T23:31:30", "2009-13-13T23:31:30.123Z", "2009-02-13 23:31:30.123Z", "2009-02-13T24:00:00Z", "x009-02-13T23:31:30.123Z", "2009-02-13T23:31:30.Z"])
    func malformed(_ text: String) {
        #expect(DeltaTokenFormat.date(from: text) == nil)
    }
}

@Suite("Core: schemas")
struct SchemaTests {
    @Test("id is added first when missing, kept where declared")
    func idColumn() {
        #expect(TableSchema("T", ["a": .string]).columns.map(\.name) == ["id", "a"])
        #expect(TableSchema(name: "T", columns: [Column("a", .string), Column("ID", .string)]).columns.map(\.name) == ["a", "ID"])
        #expect(TableSchema("T", ["a": .string]).idType == .string)
    }

    @Test("merged appends, indexes, keeps spellings and omitted columns")
    func merged() throws {
        let old = TableSchema("Todo", ["Title": .string, "n": .integer])
        let new = TableSchema("TODO", ["title": .string, "extra": .date, "N": .integer], indexed: ["n", "extra"])
        let m = try old.merged(with: new)
        #expect(m.name == "Todo")
        #expect(m.columns == [Column("id", .string), Column("Title", .string), Column("n", .integer, indexed: true), Column("extra", .date, indexed: true)])
        #expect(try m.merged(with: TableSchema("Todo", [:])) == m)
        #expect(try old.merged(with: old) == old)
    }

    @Test("merged refuses type changes")
    func conflicts() {
        let old = TableSchema("Todo", ["title": .string])
        #expect(throws: LocalStoreError.self) { try old.merged(with: TableSchema("Todo", ["TITLE": .json])) }
        #expect(throws: LocalStoreError.self) { try old.merged(with: TableSchema("Todo", ["id": .integer])) }
        let wide = TableSchema(name: "Wide", columns: (1..<1000).map { Column("c\($0)", .string) })
        #expect(throws: Never.self) { try wide.merged(with: TableSchema("Wide", ["c1": .string])) }
        #expect(throws: LocalStoreError.self) { try wide.merged(with: TableSchema("Wide", ["oneMore": .string])) }
        do {
            _ = try old.merged(with: TableSchema("Todo", ["title": .integer]))
        } catch let error as LocalStoreError {
            #expect(error.code == .schemaConflict)
            #expect(error.message.contains("title"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("validate checks names, duplicates, id type and the column limit")
    func validate() {
        func code(_ schema: TableSchema) -> LocalStoreError.Code? {
            do { try schema.validate(); return nil } catch let e as LocalStoreError { return e.code } catch { return .internal }
        }
        #expect(code(TableSchema("Todo", ["title": .string])) == nil)
        #expect(code(TableSchema("1Todo", ["title": .string])) == .invalidIdentifier)
        #expect(code(TableSchema("Todo", ["ti tle": .string])) == .invalidIdentifier)
        #expect(code(TableSchema("Todo", ["a": .string, "A": .integer])) == .schemaConflict)
        #expect(code(TableSchema("Todo", ["id": .integer])) == .schemaConflict)
        #expect(code(TableSchema(name: "Wide", columns: (1..<1000).map { Column("c\($0)", .string) })) == nil)
        #expect(code(TableSchema(name: "Wide", columns: (1...1000).map { Column("c\($0)", .string) })) == .invalidValue)
    }

    @Test("type acceptance")
    func accepts() {
        #expect(ColumnType.double.accepts(.int(1)))
        #expect(!ColumnType.integer.accepts(.double(1)))
        #expect(ColumnType.json.accepts(.null))
        #expect(!ColumnType.string.accepts(.json("x")))
    }
}

@Suite("Core: errors")
struct ErrorTests {
    @Test("descriptions")
    func descriptions() {
        #expect(LocalStoreError.unknownTable("Todo").description == "unknownTable: no table named 'Todo'")
        #expect(LocalStoreError.unknownTable("Todo").table == "Todo")
        let column = LocalStoreError.unknownColumn("colour", table: "Todo")
        #expect(column.description == "unknownColumn: table 'Todo' has no column 'colour'")
        #expect(column.column == "colour")
        #expect(LocalStoreError.closed().description == "closed: the store is closed")
        #expect(LocalStoreError(.busy, "locked").description == "busy: locked")
        #expect(LocalStoreError.Code.schemaConflict.description == "schemaConflict")
        #expect(LocalStoreError.Code.internal.description == "internal")
        #expect(LocalStoreError.Code.typeMismatch != LocalStoreError.Code.invalidValue)
    }
}

@Suite("Core: byte search")
struct ByteSearchTests {
    /// Random haystacks over a small alphabet (many partial matches) at every length around the
    /// word-at-a-time and memchr paths, against a plain search.
    @Test("contains agrees with a plain search")
    func agreesWithPlainSearch() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        func plain(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
            if needle.isEmpty { return true }
            if needle.count > hay.count { return false }
            for i in 0...(hay.count - needle.count) where Array(hay[i..<(i + needle.count)]) == needle { return true }
            return false
        }
        let alphabet: [UInt8] = [0x23, 0x22, 0x61, 0x60, 0x00, 0xFF]
        // Every length through 40 (the word loop, its overlapping last word, the byte-by-byte path for
        // fewer than eight positions), then around the memchr path; needles of 0 to 9 bytes, some of
        // them planted at a random position (so matches near the end and across words occur).
        for length in Array(0...40) + [63, 64, 65, 255, 256, 257, 300] {
            for _ in 0..<60 {
                var hay = (0..<length).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }
                let needle = (0..<Int(next() % 10)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }
                if next() % 2 == 0, needle.count <= hay.count {
                    let at = Int(next() % UInt64(hay.count - needle.count + 1))
                    hay.replaceSubrange(at..<(at + needle.count), with: needle)
                }
                let found = hay.withUnsafeBytes { h in needle.withUnsafeBytes { n in ByteSearch.contains(h, n) } }
                #expect(found == plain(hay, needle), "hay \(hay) needle \(needle)")
            }
        }
    }
}
