import Foundation
import LocalStore
import LocalStoreKV
@testable import LocalStoreLMDB
import Testing

@Suite("LMDB codecs")
struct CodecTests {
    static let everyType = TableSchema(
        name: "Everything",
        columns: [
            Column("id", .string), Column("s", .string), Column("i", .integer), Column("d", .double), Column("b", .boolean),
            Column("t", .date), Column("bin", .binary), Column("j", .json),
        ])

    static func sampleRows() -> [[Value]] {
        [
            [.string("a"), .string("x\u{0}y 😀 مرحبا"), .int(.min), .double(-0.0), .bool(true), .date(Date(timeIntervalSinceReferenceDate: -1e-9)),
             .binary([0, 255, 1]), .json(["k": [1, 1.5, "v", nil, true], "e": [:]])],
            [.string(""), .null, .int(.max), .double(.leastNonzeroMagnitude), .bool(false), .date(.distantFuture), .binary([]), .json(.int(-7))],
            [.string(String(repeating: "long", count: 500)), .string(""), .int(0), .double(.greatestFiniteMagnitude), .null, .null, .null, .null],
        ]
    }

    @Test("the ASCII test reads every byte: one high byte anywhere, in strings of 0 to 48 bytes")
    func asciiTestSeesEveryByte() {
        for length in 0...48 {
            // A buffer larger than the string, its bytes around the string non-ASCII: a word read past
            // either end would see them.
            var bytes = [UInt8](repeating: 0xC3, count: length + 16)
            for k in 0..<length { bytes[8 + k] = UInt8(0x20 + k % 90) }
            bytes.withUnsafeBytes { all in
                let s = UnsafeRawBufferPointer(rebasing: all[8..<(8 + length)])
                #expect(ByteReader.isASCII(s), "length \(length)")
            }
            for position in 0..<length {
                for high: UInt8 in [0x80, 0xFF] {
                    var damaged = bytes
                    damaged[8 + position] = high
                    damaged.withUnsafeBytes { all in
                        let s = UnsafeRawBufferPointer(rebasing: all[8..<(8 + length)])
                        #expect(!ByteReader.isASCII(s), "length \(length), byte \(position) = \(high)")
                    }
                }
            }
        }
        #expect(ByteReader.isASCII(UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    @Test("records round-trip bit for bit", arguments: RecordCodec.Layout.allCases)
    func recordRoundTrip(layout: RecordCodec.Layout) throws {
        for (n, row) in Self.sampleRows().enumerated() {
            let bytes = RecordCodec.encode(row, rowId: UInt64(n) * 1_000_000_007, layout: layout)
            let decoded = try RecordCodec.decode(bytes, schema: Self.everyType)
            #expect(decoded.rowId == UInt64(n) * 1_000_000_007)
            #expect(decoded.row == row)
            if case .double(let a) = row[3], case .double(let b) = decoded.row[3] { #expect(a.bitPattern == b.bitPattern) }
            if case .date(let a) = row[5], case .date(let b) = decoded.row[5] {
                #expect(a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern)
            }
        }
    }

    @Test("a record shorter than the schema reads null for the new columns", arguments: RecordCodec.Layout.allCases)
    func shortRecords(layout: RecordCodec.Layout) throws {
        let bytes = RecordCodec.encode([.string("a"), .string("b")], rowId: 1, layout: layout)
        let decoded = try RecordCodec.decode(bytes, schema: Self.everyType)
        #expect(decoded.row.count == Self.everyType.columns.count)
        #expect(decoded.row[2...].allSatisfy { $0.isNull })
    }

    /// The decoder meets arbitrary, truncated and bit-flipped bytes: it must return or throw
    /// `corrupt`, never trap.
    @Test("the record decoder never crashes on damaged bytes", arguments: [1, 2, 3], RecordCodec.Layout.allCases)
    func decoderFuzz(seed: UInt64, layout: RecordCodec.Layout) throws {
        var rng = SeededRNG(seed: seed)
        let valid = Self.sampleRows().enumerated().map { RecordCodec.encode($0.element, rowId: UInt64($0.offset), layout: layout) }
        func attempt(_ bytes: [UInt8]) {
            do {
                _ = try RecordCodec.decode(bytes, schema: Self.everyType)
            } catch let e as LocalStoreError {
                #expect(e.code == .corrupt)
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        // Every truncation of every valid record.
        for record in valid {
            for n in 0..<record.count { attempt(Array(record[0..<n])) }
        }
        for _ in 0..<20_000 {
            switch rng.next() % 4 {
            case 0:
                // Pure noise, biased toward the format's small tag values.
                let n = Int(rng.next() % 64)
                attempt((0..<n).map { _ in rng.next() % 3 == 0 ? UInt8(rng.next() % 10) : UInt8(truncatingIfNeeded: rng.next()) })
            case 1:
                // A valid record with a few bytes changed.
                var r = valid[Int(rng.next() % UInt64(valid.count))]
                for _ in 0..<(1 + rng.next() % 4) { r[Int(rng.next() % UInt64(r.count))] = UInt8(truncatingIfNeeded: rng.next()) }
                attempt(r)
            case 2:
                // Huge lengths and counts.
                // Version 1: row id 1, 8 columns, a string; version 2: 8 columns, a string's tag, row id 1.
                var r: [UInt8] = layout == .inline ? [1, 1, 8, 5] : [2, 8, 5, 1]
                r += [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
                r += (0..<Int(rng.next() % 8)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                attempt(r)
            default:
                // Deep json nesting.
                // version, row id, 8 columns: id "\0", six nulls, then json arrays nested `depth` deep.
                let depth = Int(rng.next() % 2000)
                // (Version 2: the tags, row id 0, the id's payload, then the json's.)
                var r: [UInt8] = layout == .inline ? [1, 0, 8, 5, 1, 0, 0, 0, 0, 0, 0, 0, 8] : [2, 8, 5, 0, 0, 0, 0, 0, 0, 8, 0, 1, 0]
                r += Array(repeating: [6, 1], count: depth).flatMap { $0 }
                r.append(0)
                attempt(r)
            }
        }
    }

    // MARK: Key order

    static func randomValue(_ type: ColumnType, _ rng: inout SeededRNG) -> Value {
        if rng.next() % 10 == 0 { return .null }
        let alphabet: [UInt8] = [0, 1, 0x41, 0x5A, 0x61, 0x7A, 0x7F, 0xFF, 0xC3, 0xA9, 0x20]
        switch type {
        case .integer:
            let choices: [Int64] = [.min, .max, 0, -1, 1, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1]
            return .int(rng.next() % 2 == 0 ? choices[Int(rng.next() % UInt64(choices.count))] : Int64(bitPattern: rng.next()) >> (rng.next() % 64))
        case .double:
            let choices: [Double] = [0, -0.0, 1, -1, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude, 1e-300, 0.1]
            if rng.next() % 2 == 0 { return .double(choices[Int(rng.next() % UInt64(choices.count))]) }
            let d = Double(bitPattern: rng.next())
            return .double(d.isFinite ? d : 1.5)
        case .string:
            let n = Int(rng.next() % 8)
            let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            return .string(String(decoding: bytes, as: UTF8.self))
        case .boolean: return .bool(rng.next() % 2 == 0)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(Int64(bitPattern: rng.next()) >> 20) / 1000))
        case .binary:
            let n = Int(rng.next() % 6)
            return .binary((0..<n).map { _ in [0, 1, 0xFF, 0x80][Int(rng.next() % 4)] })
        case .json: return .json(.null)
        }
    }

    static func sign(_ x: Int) -> Int { x < 0 ? -1 : (x > 0 ? 1 : 0) }

    static func byteOrder(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a == b ? 0 : (a.lexicographicallyPrecedes(b) ? -1 : 1)
    }

    @Test("index components sort exactly like Collation.compare", arguments: [ColumnType.integer, .double, .string, .boolean, .date, .binary])
    func componentOrder(type: ColumnType) {
        var rng = SeededRNG(seed: 42)
        for _ in 0..<20_000 {
            let a = Self.randomValue(type, &rng)
            let b = Self.randomValue(type, &rng)
            var ka: [UInt8] = []
            var kb: [UInt8] = []
            KeyCodec.appendComponent(a, into: &ka)
            KeyCodec.appendComponent(b, into: &kb)
            #expect(Self.byteOrder(ka, kb) == Collation.compare(a, b), "\(a) vs \(b)")
            // Self-delimiting: the component length parser finds the end.
            #expect(KeyCodec.componentLength(ka + [7, 7], at: 0) == ka.count)
        }
    }

    @Test("values said to encode alike have the same component bytes in every encoding")
    func encodesAlike() {
        func encodings(_ v: Value) -> [[UInt8]] {
            var ascending: [UInt8] = []
            var descending: [UInt8] = []
            var noCase: [UInt8] = []
            KeyCodec.appendComponent(v, into: &ascending)
            KeyCodec.appendDescendingComponent(v, into: &descending)
            KeyCodec.appendNoCaseComponent(v, into: &noCase)
            return [ascending, descending, noCase]
        }
        var rng = SeededRNG(seed: 11)
        var alike = 0
        for type in [ColumnType.integer, .double, .string, .boolean, .date, .binary] {
            for _ in 0..<5_000 {
                let a = Self.randomValue(type, &rng)
                // Half the pairs are a value and a copy of it, so both answers are exercised.
                let b = rng.next() % 2 == 0 ? a : Self.randomValue(type, &rng)
                if KeyCodec.encodesAlike(a, b) {
                    alike += 1
                    #expect(encodings(a) == encodings(b), "\(a) vs \(b)")
                }
            }
        }
        #expect(alike > 10_000)
        // Equal as Swift values, different bytes: never "alike".
        #expect(!KeyCodec.encodesAlike(.string("\u{E9}"), .string("e\u{301}")))
        #expect(!KeyCodec.encodesAlike(.double(0.0), .double(-0.0)))
        #expect(!KeyCodec.encodesAlike(.int(1), .double(1)))
        #expect(!KeyCodec.encodesAlike(.json(.null), .json(.null)))
    }

    @Test("NOCASE keys are equal and ordered exactly like Collation.compareNoCase")
    func noCaseOrder() {
        var rng = SeededRNG(seed: 7)
        for _ in 0..<50_000 {
            guard case .string(let a) = Self.randomValue(.string, &rng), case .string(let b) = Self.randomValue(.string, &rng) else { continue }
            let ka = KeyCodec.idKey(.string(a))
            let kb = KeyCodec.idKey(.string(b))
            #expect(Self.byteOrder(ka, kb) == Self.sign(Collation.compareNoCase(a, b)), "\(Array(a.utf8)) vs \(Array(b.utf8))")
            #expect((ka == kb) == (Collation.noCaseKey(a) == Collation.noCaseKey(b)))
        }
    }

    @Test("integer ids sort numerically")
    func intIdOrder() {
        var rng = SeededRNG(seed: 9)
        for _ in 0..<10_000 {
            let a = Int64(bitPattern: rng.next())
            let b = Int64(bitPattern: rng.next()) >> (rng.next() % 64)
            #expect(Self.byteOrder(KeyCodec.idKey(.int(a)), KeyCodec.idKey(.int(b))) == (a < b ? -1 : (a == b ? 0 : 1)))
        }
    }

    @Test("long keys keep their order prefix and stay unique")
    func longKeys() {
        let full = Array(repeating: UInt8(0x61), count: 1000)
        let a = KeyCodec.storedKey(full, rowId: 1)
        let b = KeyCodec.storedKey(full, rowId: 2)
        #expect(a.count == KeyCodec.longKeyLength && b.count == KeyCodec.longKeyLength)
        #expect(a != b)
        #expect(KeyCodec.storedKey([1, 2, 3], rowId: 9) == [1, 2, 3])
        #expect(KeyCodec.successor([1, 0xFF]) == [2])
        #expect(KeyCodec.successor([0xFF, 0xFF]) == nil)
    }

    @Test("NOCASE keys fold ASCII letters only, cut at the first NUL, after any bytes already in the buffer")
    func noCaseKeysMatchTheirDefinition() {
        // The definition, byte by byte: ASCII A–Z lowered, every other byte kept; at the first NUL the
        // bytes stop and `00 01` and the total length follow, else `00 00`.
        func reference(_ s: String) -> [UInt8] {
            let bytes = Array(s.utf8)
            var out: [UInt8] = []
            for b in bytes {
                if b == 0 {
                    out += [0, 1]
                    KeyCodec.appendBigEndian(UInt64(bytes.count), into: &out)
                    return out
                }
                out.append(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
            }
            return out + [0, 0]
        }
        let alphabet: [String] = ["A", "z", "Z", "@", "[", "`", "{", "0", "\u{0}", "é", "É", "\u{212A}", "ß", " ", "~", "\u{7F}"]
        var rng = SeededRNG(seed: 29)
        for length in 0..<40 {
            for _ in 0..<60 {
                let s = (0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined()
                for prefix in [[], [0x02, 0xFF, 0x41]] as [[UInt8]] {
                    var out = prefix
                    KeyCodec.appendNoCase(s, into: &out)
                    #expect(out == prefix + reference(s), "\(Array(s.utf8)) after \(prefix)")
                }
            }
        }
    }
}
