import Foundation
import LocalStore
import LocalStoreKV
import LocalStoreReliability
import Testing

/// `KeyLengthLimitedEngine` against the same engine without a limit (the oracle): random puts and deletes
/// of keys around the limit, sharing long prefixes and made of edge bytes, then every get and random scans
/// (both directions, bounds of every length, stopped early) give the same entries in the same order.
@Suite("KeyLengthLimitedEngine: keys of any length behave as in an engine without a limit")
struct KeyLengthLimitedEngineTests {
    private typealias Random = SplitMix

    /// A key of 0...44 bytes: a common stem of up to 20 bytes (so that long keys share their first bytes),
    /// then bytes from {00, 01, 61, FE, FF}.
    private static func key(_ r: inout Random) -> [UInt8] {
        let alphabet: [UInt8] = [0x00, 0x01, 0x61, 0xFE, 0xFF]
        var key = Array(repeating: UInt8(0x61), count: r.below(21))
        for _ in 0..<r.below(25) { key.append(alphabet[r.below(alphabet.count)]) }
        return key
    }

    private static func entries(
        _ reader: some OrderedKeyValueReader, _ lower: [UInt8], _ upper: [UInt8]?, reverse: Bool, stopAfter: Int
    ) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        try reader.scan(from: lower, to: upper, reverse: reverse) { key, value in
            out.append(Array(key) + [0x7C] + Array(value))
            return out.count < stopAfter
        }
        return out
    }

    @Test("random writes, then every get and 400 random scans agree with the unlimited engine", arguments: [24, 27, 32])
    func agreesWithUnlimitedEngine(limit: Int) throws {
        var r = Random(seed: UInt64(limit))
        let limited = try KeyLengthLimitedEngine(InMemoryKVEngine(), maximumKeyLength: limit)
        let plain = InMemoryKVEngine()
        var keys: [[UInt8]] = []
        for round in 0..<40 {
            var batch: [(key: [UInt8], value: [UInt8]?)] = []
            for _ in 0..<25 {
                let key = keys.isEmpty || r.below(3) > 0 ? Self.key(&r) : keys[r.below(keys.count)]
                keys.append(key)
                batch.append((key, r.below(5) == 0 ? nil : [UInt8(round), UInt8(r.below(256))]))
            }
            for engine in [0, 1] {
                func apply(_ writer: some OrderedKeyValueWriter) throws {
                    for (key, value) in batch {
                        if let value { try writer.put(key, value) } else { try writer.delete(key) }
                    }
                }
                if engine == 0 { try limited.write(apply) } else { try plain.write(apply) }
            }
        }
        #expect(keys.contains { $0.count >= limit } && keys.contains { $0.count < limit - 8 })
        try limited.read { a in
            try plain.read { b in
                for key in keys {
                    #expect(try a.get(key) == b.get(key), "get \(key)")
                    let lent = try a.withValue(key) { $0.map { Array($0) } }
                    #expect(lent == (try b.get(key)), "withValue \(key)")
                }
                for _ in 0..<400 {
                    let lower = r.below(4) == 0 ? [] : Self.key(&r)
                    let upper: [UInt8]? = r.below(4) == 0 ? nil : Self.key(&r)
                    let reverse = r.below(2) == 0
                    let stop = r.below(3) == 0 ? 1 + r.below(5) : Int.max
                    let expected = try Self.entries(b, lower, upper, reverse: reverse, stopAfter: stop)
                    #expect(try Self.entries(a, lower, upper, reverse: reverse, stopAfter: stop) == expected, "scan \(lower) ..< \(upper.map { "\($0)" } ?? "end") reverse \(reverse) stop \(stop)")
                }
            }
        }
    }

    @Test("keys shorter than the limit are stored as they are; a limit below the minimum is refused")
    func shortKeysAndLimits() throws {
        let base = InMemoryKVEngine()
        let limited = try KeyLengthLimitedEngine(base, maximumKeyLength: 24)
        let short = Array(repeating: UInt8(7), count: 23)
        let long = Array(repeating: UInt8(7), count: 24)
        try limited.write { w in
            try w.put(short, [1])
            try w.put(long, [2])
        }
        try base.read { raw in
            #expect(try raw.get(short) == [1])
            #expect(try raw.get(long) == nil, "a key of the limit's length is stored truncated")
            var stored: [[UInt8]] = []
            try raw.scan(from: [], to: nil, reverse: false) { key, _ in
                stored.append(Array(key))
                return true
            }
            #expect(stored.map(\.count).sorted() == [4, 23, 24], "the recorded limit, the short key, the truncated one")
            #expect(try raw.get(KeyLengthLimitedEngine<InMemoryKVEngine>.markerKey) == [0, 0, 0, 0, 0, 0, 0, 24])
        }
        #expect(throws: LocalStoreError.self) { _ = try KeyLengthLimitedEngine(base, maximumKeyLength: 23) }
    }

    @Test("two long keys with the same first bytes and hash: the second is refused, a read or delete of it finds nothing")
    func collision() throws {
        // Every truncated key hashes to 0: keys sharing their first 16 bytes collide.
        let engine = try KeyLengthLimitedEngine(InMemoryKVEngine(), maximumKeyLength: 24, hash: { _ in 0 })
        let first = Array(repeating: UInt8(0x61), count: 30)
        let second = Array(repeating: UInt8(0x61), count: 29) + [0x62]
        try engine.write { w in try w.put(first, [1]) }
        #expect(throws: LocalStoreError.self) { try engine.write { w in try w.put(second, [2]) } }
        try engine.write { w in try w.delete(second) }
        let (gotFirst, gotSecond, lentSecond) = try engine.read { r in
            (try r.get(first), try r.get(second), try r.withValue(second) { $0.map { Array($0) } })
        }
        #expect(gotFirst == [1] && gotSecond == nil && lentSecond == nil)
        try engine.write { w in try w.put(first, [3]) }
        #expect(try engine.read { r in try r.get(first) } == [3], "the key itself is written again")
    }

    @Test("the limit is recorded: another limit, or a store holding a key as long as the limit, is a version mismatch; the record is hidden")
    func recordedLimit() throws {
        let base = InMemoryKVEngine()
        try base.write { w in try w.put([1, 2, 3], [9]) }
        let limited = try KeyLengthLimitedEngine(base, maximumKeyLength: 24)
        let long = Array(repeating: UInt8(5), count: 40)
        try limited.write { w in try w.put(long, [7]) }
        #expect(throws: LocalStoreError.self) { _ = try KeyLengthLimitedEngine(base, maximumKeyLength: 25) }
        let again = try KeyLengthLimitedEngine(base, maximumKeyLength: 24)
        // The record is invisible to the views, and cannot be written through them.
        let (all, marker) = try again.read { r -> ([[UInt8]], [UInt8]?) in
            var keys: [[UInt8]] = []
            try r.scan(from: [], to: nil, reverse: false) { key, _ in
                keys.append(Array(key))
                return true
            }
            return (keys, try r.get(KeyLengthLimitedEngine<InMemoryKVEngine>.markerKey))
        }
        #expect(all == [[1, 2, 3], long] && marker == nil)
        #expect(throws: LocalStoreError.self) { try again.write { w in try w.put(KeyLengthLimitedEngine<InMemoryKVEngine>.markerKey, [0]) } }
        // A store written without the limit, holding a key as long as it: refused.
        let plain = InMemoryKVEngine()
        try plain.write { w in try w.put(Array(repeating: UInt8(1), count: 30), [1]) }
        #expect {
            _ = try KeyLengthLimitedEngine(plain, maximumKeyLength: 24)
        } throws: { ($0 as? LocalStoreError)?.code == .versionMismatch }
    }

    @Test("a store written through the wrapper is refused by a KVStore on the bare engine, and opens through the wrapper again")
    func wrappedStoreWithoutTheWrapper() throws {
        let base = InMemoryKVEngine()
        let wrapped = try KVStore(engine: KeyLengthLimitedEngine(base, maximumKeyLength: 32))
        try wrapped.defineTable(TableSchema("T", ["id": .string, "n": .integer], indexed: ["n"]))
        let id = String(repeating: "long-id-", count: 8)
        try wrapped.upsert([["id": .string(id), "n": 1]], into: "T")
        #expect {
            _ = try KVStore(engine: base)
        } throws: { ($0 as? LocalStoreError)?.code == .versionMismatch }
        let again = try KVStore(engine: KeyLengthLimitedEngine(base, maximumKeyLength: 32))
        #expect(try again.read(table: "T", id: .string(id))?["n"] == .int(1))
    }
}
