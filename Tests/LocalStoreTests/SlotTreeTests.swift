import Foundation
import LocalStoreConformance
import Testing
@testable import LocalStore

/// The slot B+tree of the in-memory store and its column storage, against simple references. The tree
/// holds slot numbers ordered by values stored elsewhere, which slots lose and reuse: these tests change
/// and reuse slots the way a table does (remove with the old value, rewrite, insert again).
@Suite struct SlotTreeTests {
    /// Values by slot (`nil`: free) and the tree ordering the live slots by (value, slot).
    final class Table {
        var values: [Int?] = []
        var free: [Int] = []
        let tree = SlotTree()
        lazy var order: (UInt32, UInt32) -> Int = { [unowned self] a, b in
            let x = (self.values[Int(a)] ?? -1, Int(a))
            let y = (self.values[Int(b)] ?? -1, Int(b))
            return x < y ? -1 : (x == y ? 0 : 1)
        }

        var sorted: [UInt32] {
            values.indices.filter { values[$0] != nil }.sorted { (values[$0]!, $0) < (values[$1]!, $1) }.map(UInt32.init)
        }

        func add(_ v: Int) {
            let slot = free.popLast() ?? values.count
            if slot == values.count { values.append(nil) }
            values[slot] = v
            #expect(tree.insert(UInt32(slot), by: order))
        }

        func remove(_ slot: Int) {
            #expect(tree.remove(UInt32(slot), by: order))
            values[slot] = nil
            free.append(slot)
        }

        func change(_ slot: Int, to v: Int) {
            #expect(tree.remove(UInt32(slot), by: order))
            values[slot] = v
            #expect(tree.insert(UInt32(slot), by: order))
        }

        /// A probe placing a bound before (`edge` -1) or after (+1) every entry of value `v`.
        func probe(_ v: Int, edge: Int) -> (UInt32) -> Int {
            { [unowned self] e in
                let x = self.values[Int(e)] ?? -1
                return x < v ? -1 : (x > v ? 1 : -edge)
            }
        }
    }

    static func check(_ t: Table, _ rng: inout SeededGenerator) {
        let sorted = t.sorted
        #expect(t.tree.invariantViolation(by: t.order) == nil)
        #expect(t.tree.count == sorted.count)
        var up: [UInt32] = []
        t.tree.forEach(ascendingFrom: nil, inclusive: true) { up.append($0); return true }
        #expect(up == sorted)
        var down: [UInt32] = []
        t.tree.forEach(descendingFrom: nil, inclusive: true) { down.append($0); return true }
        #expect(down == sorted.reversed())
        for _ in 0..<20 {
            let v = Int(rng.next() % 60) - 5
            let edge = rng.next() % 2 == 0 ? -1 : 1
            let limit = Int(rng.next() % 30) + 1
            // Ascending from the bound: the entries after it.
            let after = sorted.filter { (t.values[Int($0)]!, 0) > (v, edge) }
            var got: [UInt32] = []
            t.tree.forEach(ascendingFrom: t.probe(v, edge: edge), inclusive: true) { got.append($0); return got.count < limit }
            #expect(got == Array(after.prefix(limit)), "ascending from \(v) edge \(edge)")
            // Descending from the bound: the entries before it.
            let before = sorted.filter { (t.values[Int($0)]!, 0) < (v, edge) }
            got = []
            t.tree.forEach(descendingFrom: t.probe(v, edge: edge), inclusive: true) { got.append($0); return got.count < limit }
            #expect(got == Array(before.reversed().prefix(limit)), "descending from \(v) edge \(edge)")
            let rank = t.tree.estimatedRank(t.probe(v, edge: edge))
            // Exact within one leaf; above it an estimate (subtrees assumed equally full).
            if sorted.count <= 128 { #expect(rank == Double(before.count)) } else { #expect(rank >= 0 && rank.isFinite) }
        }
    }

    @Test(arguments: [1 as UInt64, 2, 3])
    func randomChangesWithSlotReuse(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        let t = Table()
        for step in 0..<6_000 {
            let live = t.values.indices.filter { t.values[$0] != nil }
            switch rng.next() % 10 {
            case 0...4: t.add(Int(rng.next() % 50))
            case 5...6 where !live.isEmpty: t.remove(live[Int(rng.next() % UInt64(live.count))])
            case 7...9 where !live.isEmpty: t.change(live[Int(rng.next() % UInt64(live.count))], to: Int(rng.next() % 50))
            default: t.add(Int(rng.next() % 50))
            }
            if step % 1_000 == 999 { Self.check(t, &rng) }
        }
        // Drain: every removal keeps the separators live (a stale one would misroute once its slot is reused).
        var live = t.values.indices.filter { t.values[$0] != nil }
        live.shuffle(using: &rng)
        for (k, slot) in live.enumerated() {
            t.remove(slot)
            if k % 500 == 0 {
                t.add(Int(rng.next() % 50))
                Self.check(t, &rng)
            }
        }
        Self.check(t, &rng)
        while let slot = t.values.indices.first(where: { t.values[$0] != nil }), t.tree.count > 100 { t.remove(slot) }
        Self.check(t, &rng)
    }

    @Test func removingAbsentSlotChangesNothing() {
        let t = Table()
        for v in 0..<300 { t.add(v % 7) }
        t.values.append(3)
        #expect(!t.tree.remove(UInt32(300), by: t.order))
        t.values.removeLast()
        #expect(t.tree.count == 300)
        #expect(t.tree.invariantViolation(by: t.order) == nil)
    }

    @Test func idMapFindsIdsUnderNoCase() {
        let column = MemColumn(type: .string, count: 0)
        var map = MemIdMap()
        let ids = ["a", "B", "abc", "ABD", "x\u{0}y", "é", "e\u{301}", String(repeating: "Q", count: 40)]
        for (slot, id) in ids.enumerated() {
            column.grow(to: slot + 1)
            column.set(slot, .string(id))
            map.insert(slot, column: column)
        }
        #expect(map.find("A", in: column) == 0)
        #expect(map.find("b", in: column) == 1)
        #expect(map.find("aBc", in: column) == 2)
        #expect(map.find("abd", in: column) == 3)
        // NOCASE ends the comparison at a NUL and then compares lengths: "x\0z" equals "x\0y".
        #expect(map.find("X\u{0}q", in: column) == 4)
        #expect(map.find("x\u{0}", in: column) == nil)
        // Bytes, not canonical equivalence.
        #expect(map.find("é", in: column) == 5)
        #expect(map.find("e\u{301}", in: column) == 6)
        #expect(map.find(.string(String(repeating: "q", count: 40)), in: column) == 7)
        #expect(map.find("zz", in: column) == nil)
        map.remove(2, column: column)
        #expect(map.find("abc", in: column) == nil)
        #expect(map.find("ABD", in: column) == 3)
        #expect(map.count == ids.count - 1)
    }

    @Test func noCaseComparisonAndHashAgainstCollation() {
        var rng = SeededGenerator(seed: 5)
        let alphabet: [UInt8] = [0x00, 0x40, 0x41, 0x4D, 0x5A, 0x5B, 0x60, 0x61, 0x6D, 0x7A, 0x7B, 0x7F, 0xC3, 0xA9]
        func random() -> String {
            let n = Int(rng.next() % 24)
            let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            return String(decoding: bytes, as: UTF8.self)
        }
        let column = MemColumn(type: .string, count: 2)
        for k in 0..<20_000 {
            let a = random()
            // Often a case variant of `a`, sometimes with a different tail after a NUL.
            var b = k % 3 == 0 ? random() : String(a.map { rng.next() % 2 == 0 ? Character($0.uppercased()) : $0 })
            if k % 5 == 0 { b += "\u{0}x" }
            column.set(0, .string(a))
            column.set(1, .string(b))
            let expected = Collation.sign(Collation.compareNoCase(a, b))
            #expect(column.compare(0, 1, noCase: true) == expected, "\(Array(a.utf8)) vs \(Array(b.utf8))")
            #expect(column.compare(0, .string(b), noCase: true) == expected)
            if expected == 0 { #expect(MemIdMap.hash(column, 0) == MemIdMap.hash(.string(b))) }
        }
    }

    @Test func idMapAgainstDictionary() {
        var rng = SeededGenerator(seed: 11)
        let column = MemColumn(type: .integer, count: 0)
        var map = MemIdMap()
        var reference: [Int64: Int] = [:]
        var free: [Int] = []
        var slots = 0
        for _ in 0..<20_000 {
            let id = Int64(rng.next() % 3_000)
            if let slot = reference[id] {
                #expect(map.find(.int(id), in: column) == slot)
                map.remove(slot, column: column)
                reference[id] = nil
                free.append(slot)
            } else {
                #expect(map.find(.int(id), in: column) == nil)
                let slot = free.popLast() ?? slots
                if slot == slots { slots += 1 }
                column.grow(to: slots)
                column.set(slot, .int(id))
                map.insert(slot, column: column)
                reference[id] = slot
            }
        }
        #expect(map.count == reference.count)
        for (id, slot) in reference { #expect(map.find(.int(id), in: column) == slot) }
    }

    @Test func columnsRoundTripAndCompact() {
        let strings = MemColumn(type: .string, count: 0)
        let dates = MemColumn(type: .date, count: 0)
        let doubles = MemColumn(type: .double, count: 0)
        strings.grow(to: 100)
        dates.grow(to: 100)
        doubles.grow(to: 100)
        for round in 0..<50 {
            for slot in 0..<100 {
                strings.set(slot, slot % 9 == 0 ? .null : .string("value \(slot) round \(round) " + String(repeating: "é", count: slot % 5)))
            }
            strings.compactIfWorthIt()
        }
        #expect(strings.garbage <= strings.arena.count)
        for slot in 0..<100 {
            let expected: Value = slot % 9 == 0 ? .null : .string("value \(slot) round 49 " + String(repeating: "é", count: slot % 5))
            #expect(strings.value(slot) == expected)
            #expect(strings.holds(slot, expected))
        }
        let d = Date(timeIntervalSinceReferenceDate: 123.456789)
        dates.set(3, .date(d))
        #expect(dates.value(3) == .date(d))
        #expect(dates.value(4) == .null)
        doubles.set(1, .double(-0.0))
        #expect(doubles.value(1).doubleValue?.sign == .minus)
        #expect(!doubles.holds(1, .double(0.0)))
        #expect(doubles.compare(1, .double(0.0), noCase: false) == 0)
    }
}
