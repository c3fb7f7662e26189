import Testing
@testable import LocalStore

/// SplitMix64: a tiny deterministic generator so failures reproduce from the seed.
private struct BTreeTestRNG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func ascending<E>(_ tree: BTree<E>, from bound: E? = nil, inclusive: Bool = true, limit: Int = .max) -> [E] {
    var out: [E] = []
    tree.forEach(ascendingFrom: bound, inclusive: inclusive) { out.append($0); return out.count < limit }
    return out
}

private func descending<E>(_ tree: BTree<E>, from bound: E? = nil, inclusive: Bool = true, limit: Int = .max) -> [E] {
    var out: [E] = []
    tree.forEach(descendingFrom: bound, inclusive: inclusive) { out.append($0); return out.count < limit }
    return out
}

/// Index of the first element of `sorted` that is >= `x` (or > `x` when `strictly`).
private func partition(_ sorted: [Int], _ x: Int, strictly: Bool) -> Int {
    var lo = 0
    var hi = sorted.count
    while lo < hi {
        let mid = (lo + hi) / 2
        if sorted[mid] < x || (strictly && sorted[mid] == x) { lo = mid + 1 } else { hi = mid }
    }
    return lo
}

/// Compares every kind of scan of `tree` with the same scan of `reference`.
private func checkScans(_ tree: BTree<Int>, _ reference: Set<Int>, domain: Int, rng: inout BTreeTestRNG, bounds: Int) {
    let sorted = reference.sorted()
    #expect(tree.invariantViolation() == nil)
    #expect(tree.count == sorted.count)
    #expect(ascending(tree) == sorted)
    #expect(descending(tree) == Array(sorted.reversed()))
    for _ in 0..<bounds {
        // Bounds cover present values, absent values and values outside the domain.
        let bound = Int.random(in: -2...(domain + 2), using: &rng)
        let inclusive = Bool.random(using: &rng)
        let limit = Bool.random(using: &rng) ? Int.max : Int.random(in: 1...20, using: &rng)
        let up = Array(sorted[partition(sorted, bound, strictly: !inclusive)...].prefix(limit))
        #expect(ascending(tree, from: bound, inclusive: inclusive, limit: limit) == up,
                "ascending from \(bound) inclusive: \(inclusive) limit: \(limit)")
        let downEnd = partition(sorted, bound, strictly: inclusive)
        let down = Array(sorted[..<downEnd].reversed().prefix(limit))
        #expect(descending(tree, from: bound, inclusive: inclusive, limit: limit) == down,
                "descending from \(bound) inclusive: \(inclusive) limit: \(limit)")
        #expect(tree.contains(bound) == reference.contains(bound))
    }
}

@Suite struct BTreeTests {
    @Test func emptyTree() {
        var tree = BTree<Int>()
        #expect(tree.count == 0)
        #expect(!tree.contains(0))
        let removedFromEmpty = tree.remove(0)
        #expect(!removedFromEmpty)
        #expect(ascending(tree).isEmpty)
        #expect(descending(tree).isEmpty)
        #expect(ascending(tree, from: 5, inclusive: false).isEmpty)
        #expect(descending(tree, from: 5, inclusive: true).isEmpty)
        #expect(tree.invariantViolation() == nil)
    }

    @Test func singleElement() {
        var tree = BTree<Int>()
        let first = tree.insert(7)
        let second = tree.insert(7)
        #expect(first)
        #expect(!second)
        #expect(tree.count == 1)
        #expect(tree.contains(7))
        #expect(!tree.contains(6))
        #expect(ascending(tree) == [7])
        #expect(descending(tree) == [7])
        #expect(ascending(tree, from: 7, inclusive: true) == [7])
        #expect(ascending(tree, from: 7, inclusive: false) == [])
        #expect(ascending(tree, from: 6, inclusive: false) == [7])
        #expect(ascending(tree, from: 8, inclusive: true) == [])
        #expect(descending(tree, from: 7, inclusive: true) == [7])
        #expect(descending(tree, from: 7, inclusive: false) == [])
        #expect(descending(tree, from: 8, inclusive: false) == [7])
        #expect(descending(tree, from: 6, inclusive: true) == [])
        let removedAbsent = tree.remove(8)
        let removedPresent = tree.remove(7)
        let removedAgain = tree.remove(7)
        #expect(!removedAbsent)
        #expect(removedPresent)
        #expect(!removedAgain)
        #expect(tree.count == 0)
        #expect(ascending(tree).isEmpty)
        #expect(tree.invariantViolation() == nil)
    }

    @Test(arguments: [1 as UInt64, 2, 3, 0xDEAD_BEEF])
    func randomizedAgainstSet(seed: UInt64) {
        var rng = BTreeTestRNG(seed: seed)
        var tree = BTree<Int>()
        var reference = Set<Int>()
        let domain = 6_000
        // Mismatches are counted rather than expected one by one, which is much faster in debug.
        var mismatches = 0
        // Phases with different insert ratios grow the tree (splits) and shrink it (borrows, merges).
        for insertPercent in [80, 50, 20, 65, 5] {
            for step in 0..<6_000 {
                let x = Int.random(in: 0..<domain, using: &rng)
                if Int.random(in: 0..<100, using: &rng) < insertPercent {
                    let inserted = tree.insert(x)
                    if inserted != reference.insert(x).inserted { mismatches += 1 }
                } else {
                    let removed = tree.remove(x)
                    if removed != (reference.remove(x) != nil) { mismatches += 1 }
                }
                if tree.count != reference.count { mismatches += 1 }
                if step % 1_500 == 1_499 {
                    #expect(mismatches == 0)
                    checkScans(tree, reference, domain: domain, rng: &rng, bounds: 20)
                }
            }
        }
        for x in reference.shuffled(using: &rng) where !tree.remove(x) { mismatches += 1 }
        #expect(mismatches == 0)
        reference.removeAll()
        checkScans(tree, reference, domain: domain, rng: &rng, bounds: 10)
    }

    @Test func removingEverything() {
        var rng = BTreeTestRNG(seed: 42)
        var tree = BTree<Int>()
        let values = Array(0..<20_000).shuffled(using: &rng)
        var mismatches = 0
        for (n, x) in values.enumerated() {
            if !tree.insert(x) || tree.count != n + 1 { mismatches += 1 }
        }
        #expect(mismatches == 0)
        #expect(tree.invariantViolation() == nil)
        #expect(ascending(tree) == Array(0..<20_000))
        var remaining = Set(values)
        // The top quarter in descending order first (the right edge borrows from its left
        // siblings at every level), then the rest in random order.
        let removalOrder = Array((15_000..<20_000).reversed()) + Array(0..<15_000).shuffled(using: &rng)
        for (n, x) in removalOrder.enumerated() {
            let removed = tree.remove(x)
            let removedAgain = tree.remove(x)
            if !removed || removedAgain || tree.count != 20_000 - n - 1 { mismatches += 1 }
            remaining.remove(x)
            if n % 2_500 == 0 {
                checkScans(tree, remaining, domain: 20_000, rng: &rng, bounds: 10)
            }
        }
        #expect(mismatches == 0)
        #expect(tree.count == 0)
        #expect(ascending(tree).isEmpty)
        #expect(descending(tree).isEmpty)
        #expect(tree.invariantViolation() == nil)
        // The emptied tree is still fully usable.
        for x in [3, 1, 2] { tree.insert(x) }
        #expect(ascending(tree) == [1, 2, 3])
    }

    @Test func sequentialInsertsAndRemoves() {
        var tree = BTree<Int>()
        let n = 50_000
        for x in 0..<n { tree.insert(x) }
        #expect(tree.invariantViolation() == nil)
        for x in (n..<(2 * n)).reversed() { tree.insert(x) }
        #expect(tree.invariantViolation() == nil)
        #expect(tree.count == 2 * n)
        var expected = 0
        var outOfOrder = 0
        tree.forEach(ascendingFrom: nil, inclusive: true) { x in
            if x != expected { outOfOrder += 1 }
            expected += 1
            return true
        }
        #expect(outOfOrder == 0)
        #expect(expected == 2 * n)
        // Remove from the front and the back, the typical shrinking patterns.
        for x in 0..<(n / 2) { tree.remove(x) }
        for x in ((2 * n - n / 2)..<(2 * n)).reversed() { tree.remove(x) }
        #expect(tree.invariantViolation() == nil)
        #expect(tree.count == n)
        #expect(ascending(tree, limit: 1) == [n / 2])
        #expect(descending(tree, limit: 1) == [2 * n - n / 2 - 1])
        #expect(ascending(tree, from: n, inclusive: false, limit: 3) == [n + 1, n + 2, n + 3])
        #expect(descending(tree, from: n, inclusive: false, limit: 3) == [n - 1, n - 2, n - 3])
    }

    @Test func earlyStopVisitsExactlyUpToTheStop() {
        var tree = BTree<Int>()
        for x in stride(from: 0, to: 1_000, by: 2) { tree.insert(x) }
        var visited = 0
        tree.forEach(ascendingFrom: 101, inclusive: true) { _ in visited += 1; return false }
        #expect(visited == 1)
        #expect(ascending(tree, from: 101, limit: 3) == [102, 104, 106])
        #expect(descending(tree, from: 101, limit: 3) == [100, 98, 96])
        #expect(ascending(tree, from: 998, inclusive: false).isEmpty)
        #expect(descending(tree, from: 0, inclusive: false).isEmpty)
        #expect(ascending(tree, from: -5, limit: 2) == [0, 2])
        #expect(descending(tree, from: 5_000, limit: 2) == [998, 996])
    }

    @Test func errorsThrownByTheBodyPropagate() {
        struct Stop: Error {}
        var tree = BTree<Int>()
        for x in 0..<500 { tree.insert(x) }
        var seen: [Int] = []
        #expect(throws: Stop.self) {
            try tree.forEach(descendingFrom: 300, inclusive: true) { x in
                seen.append(x)
                if x == 290 { throw Stop() }
                return true
            }
        }
        #expect(seen == Array((290...300).reversed()))
    }

    @Test func copiesAreIndependent() {
        var rng = BTreeTestRNG(seed: 7)
        var original = BTree<Int>()
        for x in Array(0..<5_000).shuffled(using: &rng) { original.insert(x) }
        var copy = original
        for x in stride(from: 0, to: 5_000, by: 3) { copy.remove(x) }
        for x in 5_000..<6_000 { copy.insert(x) }
        #expect(original.count == 5_000)
        #expect(ascending(original) == Array(0..<5_000))
        #expect(original.invariantViolation() == nil)
        #expect(copy.invariantViolation() == nil)
        let expectedCopy = (0..<5_000).filter { $0 % 3 != 0 } + Array(5_000..<6_000)
        #expect(ascending(copy) == expectedCopy)
        #expect(copy.count == expectedCopy.count)
        // Inserting into a fresh copy leaves the original alone.
        var copy2 = original
        copy2.insert(-2)
        #expect(copy2.count == 5_001)
        #expect(original.count == 5_000)
        #expect(!original.contains(-2))
        #expect(ascending(original, limit: 2) == [0, 1])
        #expect(ascending(copy2, limit: 2) == [-2, 0])
        // Mutating the original after the copy diverged leaves the copy alone too.
        original.insert(-1)
        original.remove(4_999)
        #expect(ascending(copy) == expectedCopy)
        #expect(ascending(original) == [-1] + Array(0..<4_999))
    }

    @Test func compositeElements() {
        // Shaped like an index entry: (value, id) pairs with many equal values.
        struct Entry: Comparable, Sendable {
            var value: String
            var id: Int
            static func < (a: Entry, b: Entry) -> Bool { (a.value, a.id) < (b.value, b.id) }
        }
        var rng = BTreeTestRNG(seed: 99)
        var tree = BTree<Entry>()
        var reference: [Entry] = []
        for id in 0..<3_000 {
            let e = Entry(value: "v\(Int.random(in: 0..<40, using: &rng))", id: id)
            tree.insert(e)
            reference.append(e)
        }
        reference.sort()
        #expect(tree.invariantViolation() == nil)
        #expect(ascending(tree) == reference)
        // All entries with value "v17", via a bound below every id.
        let group = reference.filter { $0.value == "v17" }
        let scanned = ascending(tree, from: Entry(value: "v17", id: -1), inclusive: true)
        #expect(Array(scanned.prefix(group.count)) == group)
        let last = descending(tree, from: Entry(value: "v17", id: .max), inclusive: true)
        #expect(Array(last.prefix(group.count)) == group.reversed())
    }
}
