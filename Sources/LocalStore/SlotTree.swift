/// Maximum number of slots held by a leaf; a leaf that grows past this is split in two.
private let slotTreeLeafCapacity = 128
/// Minimum number of slots in a non-root leaf; a leaf that shrinks below this is rebalanced.
private let slotTreeLeafMinimum = slotTreeLeafCapacity / 2
/// Maximum number of children of an internal node.
private let slotTreeInternalCapacity = 128
/// Minimum number of children of a non-root internal node.
private let slotTreeInternalMinimum = slotTreeInternalCapacity / 2

/// An ordered set of row slots (`UInt32`) in a B+tree, ordered by a comparison the caller passes to every
/// call: the tree holds no keys of its own, only the slots of the rows, and the order is that of the rows'
/// values in their table's column storage (see ``MemTable``).
///
/// Because an entry is only a slot number, a row's values must not change while its slot is in the tree:
/// the table removes the slot (comparing with the old values), writes the row, then inserts it again.
/// For the same reason no separator of an internal node may name a slot that is no longer in the tree (its
/// values may be overwritten, or the slot reused by another row): ``remove(_:by:)`` replaces a separator
/// naming the removed slot by the smallest slot of the subtree to its right, so every separator is always
/// a live entry, the smallest of the subtree to its right (``invariantViolation(by:)`` checks both). A slot
/// that is a separator is therefore the first entry of its leaf, so only such a removal needs the fix.
///
/// Not thread-safe by itself: the owning table is guarded by its store's readers-writer lock; readers only
/// walk the tree, the single writer changes it.
///
/// ``insert(_:by:)`` and ``remove(_:by:)`` take the order as a closure or as a ``SlotOrdering`` value; the
/// latter is specialized into the tree's code (no closure context, no call through a function pointer
/// per comparison), which is what the table's index maintenance uses.
final class SlotTree {
    /// A tree node: a leaf has no children and its `keys` are the entries; an internal node has
    /// `keys.count + 1` children and its `keys` are separators (live entries, see above).
    fileprivate final class Node {
        // No dynamic exclusivity checks (see ``MemColumn``): every modification is a single statement of
        // the tree's own methods, and the store's lock keeps other threads out while one runs.
        @exclusivity(unchecked) var keys: [UInt32]
        @exclusivity(unchecked) var children: [Node]

        init(keys: [UInt32], children: [Node]) {
            self.keys = keys
            self.children = children
        }

        var isLeaf: Bool { children.isEmpty }
    }

    @exclusivity(unchecked) private var root = Node(keys: [], children: [])
    @exclusivity(unchecked) private(set) var count = 0

    init() {}

    /// A closure as a ``SlotOrdering``.
    struct ClosureOrder: SlotOrdering {
        let order: (UInt32, UInt32) -> Int
        @inline(__always) func compare(_ a: UInt32, _ b: UInt32) -> Int { order(a, b) }
    }

    // MARK: Insertion

    /// Inserts `slot`, ordered by `order` (a total order: negative, zero or positive as the first slot's row
    /// sorts before, with or after the second's). Returns false when an equal entry is present.
    @discardableResult
    func insert(_ slot: UInt32, by order: (UInt32, UInt32) -> Int) -> Bool {
        withoutActuallyEscaping(order) { insert(slot, by: ClosureOrder(order: $0)) }
    }

    /// ``insert(_:by:)`` with an order the compiler specializes.
    @discardableResult
    func insert<O: SlotOrdering>(_ slot: UInt32, by order: O) -> Bool {
        let (inserted, split) = Self.insert(slot, into: root, order)
        guard inserted else { return false }
        count += 1
        if let (separator, right) = split {
            root = Node(keys: [separator], children: [root, right])
        }
        return true
    }

    private static func insert<O: SlotOrdering>(_ slot: UInt32, into node: Node, _ order: O) -> (Bool, (UInt32, Node)?) {
        if node.isLeaf {
            let i = lowerBound(node.keys) { order.compare($0, slot) }
            if i < node.keys.count && order.compare(node.keys[i], slot) == 0 { return (false, nil) }
            node.keys.insert(slot, at: i)
            guard node.keys.count > slotTreeLeafCapacity else { return (true, nil) }
            let mid = node.keys.count / 2
            let right = Node(keys: Array(node.keys[mid...]), children: [])
            node.keys.removeSubrange(mid...)
            return (true, (right.keys[0], right))
        }
        let i = upperBound(node.keys) { order.compare($0, slot) }
        let (inserted, split) = insert(slot, into: node.children[i], order)
        guard let (separator, newChild) = split else { return (inserted, nil) }
        node.keys.insert(separator, at: i)
        node.children.insert(newChild, at: i + 1)
        guard node.children.count > slotTreeInternalCapacity else { return (inserted, nil) }
        let mid = node.keys.count / 2
        let up = node.keys[mid]
        let right = Node(keys: Array(node.keys[(mid + 1)...]), children: Array(node.children[(mid + 1)...]))
        node.keys.removeSubrange(mid...)
        node.children.removeSubrange((mid + 1)...)
        return (inserted, (up, right))
    }

    // MARK: Removal

    /// Removes the entry equal to `slot` under `order` (which must still see the row's values as they
    /// were when it was inserted); returns whether one was present.
    @discardableResult
    func remove(_ slot: UInt32, by order: (UInt32, UInt32) -> Int) -> Bool {
        withoutActuallyEscaping(order) { remove(slot, by: ClosureOrder(order: $0)) }
    }

    /// ``remove(_:by:)`` with an order the compiler specializes.
    @discardableResult
    func remove<O: SlotOrdering>(_ slot: UInt32, by order: O) -> Bool {
        var wasFirst = false
        guard Self.remove(slot, from: root, order, &wasFirst) else { return false }
        count -= 1
        if !root.isLeaf && root.children.count == 1 { root = root.children[0] }
        guard wasFirst else { return true }
        // A separator naming the removed slot would route by whatever the slot holds next: replace it by
        // the first entry of the subtree on its right (it is the only separator that can name it).
        var node = root
        while !node.isLeaf {
            let i = Self.upperBound(node.keys) { order.compare($0, slot) }
            if i > 0 && node.keys[i - 1] == slot {
                var first = node.children[i]
                while !first.isLeaf { first = first.children[0] }
                node.keys[i - 1] = first.keys[0]
                break
            }
            node = node.children[i]
        }
        return true
    }

    /// Removes `slot` from the subtree; sets `wasFirst` when it was the first entry of its leaf.
    private static func remove<O: SlotOrdering>(_ slot: UInt32, from node: Node, _ order: O, _ wasFirst: inout Bool) -> Bool {
        if node.isLeaf {
            let i = lowerBound(node.keys) { order.compare($0, slot) }
            guard i < node.keys.count && node.keys[i] == slot else { return false }
            node.keys.remove(at: i)
            wasFirst = i == 0
            return true
        }
        let i = upperBound(node.keys) { order.compare($0, slot) }
        guard remove(slot, from: node.children[i], order, &wasFirst) else { return false }
        let child = node.children[i]
        let underfull = child.isLeaf
            ? child.keys.count < slotTreeLeafMinimum : child.children.count < slotTreeInternalMinimum
        if underfull { rebalance(node, child: i) }
        return true
    }

    private static func size(_ node: Node) -> Int { node.isLeaf ? node.keys.count : node.children.count }

    private static func minimum(_ node: Node) -> Int { node.isLeaf ? slotTreeLeafMinimum : slotTreeInternalMinimum }

    /// Restores the minimum occupancy of `parent.children[i]` by borrowing from a sibling or merging.
    private static func rebalance(_ parent: Node, child i: Int) {
        let child = parent.children[i]
        if i > 0 && size(parent.children[i - 1]) > minimum(child) {
            let left = parent.children[i - 1]
            if child.isLeaf {
                child.keys.insert(left.keys.removeLast(), at: 0)
                parent.keys[i - 1] = child.keys[0]
            } else {
                child.keys.insert(parent.keys[i - 1], at: 0)
                child.children.insert(left.children.removeLast(), at: 0)
                parent.keys[i - 1] = left.keys.removeLast()
            }
        } else if i + 1 < parent.children.count && size(parent.children[i + 1]) > minimum(child) {
            let right = parent.children[i + 1]
            if child.isLeaf {
                child.keys.append(right.keys.removeFirst())
                parent.keys[i] = right.keys[0]
            } else {
                child.keys.append(parent.keys[i])
                child.children.append(right.children.removeFirst())
                parent.keys[i] = right.keys.removeFirst()
            }
        } else if i > 0 {
            merge(parent, left: i - 1)
        } else if i + 1 < parent.children.count {
            merge(parent, left: i)
        }
    }

    private static func merge(_ parent: Node, left l: Int) {
        let left = parent.children[l]
        let right = parent.children[l + 1]
        if left.isLeaf {
            left.keys.append(contentsOf: right.keys)
        } else {
            left.keys.append(parent.keys[l])
            left.keys.append(contentsOf: right.keys)
            left.children.append(contentsOf: right.children)
        }
        parent.keys.remove(at: l)
        parent.children.remove(at: l + 1)
    }

    // MARK: Iteration

    /// Visits entries in ascending order, from the first entry `e` with `probe(e) >= 0` (`> 0` when not
    /// `inclusive`; every entry when `probe` is nil), until `body` returns false. `probe(e)` compares entry `e`
    /// with the bound: negative when `e` sorts before it.
    func forEach(ascendingFrom probe: ((UInt32) -> Int)?, inclusive: Bool, _ body: (UInt32) -> Bool) {
        _ = Self.ascend(root, probe, inclusive, body)
    }

    /// Visits entries in descending order, from the last entry `e` with `probe(e) <= 0` (`< 0` when not
    /// `inclusive`; every entry when `probe` is nil), until `body` returns false.
    func forEach(descendingFrom probe: ((UInt32) -> Int)?, inclusive: Bool, _ body: (UInt32) -> Bool) {
        _ = Self.descend(root, probe, inclusive, body)
    }

    private static func ascend(_ node: Node, _ probe: ((UInt32) -> Int)?, _ inclusive: Bool, _ body: (UInt32) -> Bool) -> Bool {
        if node.isLeaf {
            var i = 0
            if let probe { i = inclusive ? lowerBound(node.keys, probe) : upperBound(node.keys, probe) }
            let keys = node.keys
            while i < keys.count {
                if !body(keys[i]) { return false }
                i += 1
            }
            return true
        }
        var c = probe.map { upperBound(node.keys, $0) } ?? 0
        var childProbe = probe
        let children = node.children
        while c < children.count {
            if !ascend(children[c], childProbe, inclusive, body) { return false }
            childProbe = nil
            c += 1
        }
        return true
    }

    private static func descend(_ node: Node, _ probe: ((UInt32) -> Int)?, _ inclusive: Bool, _ body: (UInt32) -> Bool) -> Bool {
        if node.isLeaf {
            var i = node.keys.count
            if let probe { i = inclusive ? upperBound(node.keys, probe) : lowerBound(node.keys, probe) }
            let keys = node.keys
            while i > 0 {
                i -= 1
                if !body(keys[i]) { return false }
            }
            return true
        }
        var c = node.children.count - 1
        if let probe { c = inclusive ? upperBound(node.keys, probe) : lowerBound(node.keys, probe) }
        var childProbe = probe
        let children = node.children
        while c >= 0 {
            if !descend(children[c], childProbe, inclusive, body) { return false }
            childProbe = nil
            c -= 1
        }
        return true
    }

    // MARK: Estimates

    /// An estimate of how many entries sort before the bound `probe` describes (see ``forEach(ascendingFrom:inclusive:_:)``),
    /// for query planning: exact within the leaf, proportional above it.
    func estimatedRank(_ probe: (UInt32) -> Int) -> Double {
        var node = root
        var span = Double(count)
        var rank = 0.0
        while !node.isLeaf {
            let i = Self.upperBound(node.keys, probe)
            let share = span / Double(node.children.count)
            rank += Double(i) * share
            span = share
            node = node.children[i]
        }
        guard !node.keys.isEmpty else { return rank }
        return rank + Double(Self.lowerBound(node.keys, probe)) * span / Double(node.keys.count)
    }

    // MARK: Binary search

    /// The index of the first key `k` with `probe(k) >= 0`.
    private static func lowerBound(_ keys: [UInt32], _ probe: (UInt32) -> Int) -> Int {
        var lo = 0
        var hi = keys.count
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if probe(keys[mid]) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The index of the first key `k` with `probe(k) > 0`.
    private static func upperBound(_ keys: [UInt32], _ probe: (UInt32) -> Int) -> Int {
        var lo = 0
        var hi = keys.count
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if probe(keys[mid]) > 0 { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }

    // MARK: Diagnostics

    /// Checks ordering, separators (each a live entry, routing correctly), occupancy, leaf depth and `count`
    /// under `order`. Returns the first violation found, or nil. `O(n)`; for tests.
    func invariantViolation(by order: (UInt32, UInt32) -> Int) -> String? {
        var total = 0
        var leafDepth: Int?
        var entries = Set<UInt32>()
        var separators: [UInt32] = []
        func check(_ node: Node, depth: Int, lower: UInt32?, upper: UInt32?, isRoot: Bool) -> String? {
            for k in node.keys {
                if let lower, order(k, lower) < 0 { return "key below its lower separator at depth \(depth)" }
                if let upper, order(k, upper) >= 0 { return "key not below its upper separator at depth \(depth)" }
            }
            for j in node.keys.indices.dropFirst() where order(node.keys[j - 1], node.keys[j]) >= 0 {
                return "keys not strictly ascending at depth \(depth)"
            }
            if node.isLeaf {
                if node.keys.count > slotTreeLeafCapacity { return "leaf over capacity" }
                if !isRoot && node.keys.count < slotTreeLeafMinimum { return "leaf under minimum" }
                if let leafDepth, leafDepth != depth { return "leaves at different depths" }
                leafDepth = depth
                total += node.keys.count
                entries.formUnion(node.keys)
                return nil
            }
            separators += node.keys
            if node.children.count != node.keys.count + 1 { return "children/keys count mismatch" }
            for (j, k) in node.keys.enumerated() {
                var first = node.children[j + 1]
                while !first.isLeaf { first = first.children[0] }
                if first.keys.first != k { return "separator at depth \(depth) is not the first entry of its right subtree" }
            }
            if node.children.count > slotTreeInternalCapacity { return "internal node over capacity" }
            if isRoot && node.children.count < 2 { return "internal root with fewer than 2 children" }
            if !isRoot && node.children.count < slotTreeInternalMinimum { return "internal node under minimum" }
            for (c, child) in node.children.enumerated() {
                let lo = c == 0 ? lower : node.keys[c - 1]
                let hi = c == node.keys.count ? upper : node.keys[c]
                if let problem = check(child, depth: depth + 1, lower: lo, upper: hi, isRoot: false) { return problem }
            }
            return nil
        }
        if let problem = check(root, depth: 0, lower: nil, upper: nil, isRoot: true) { return problem }
        if total != count { return "count is \(count) but the leaves hold \(total) entries" }
        if let stale = separators.first(where: { !entries.contains($0) }) { return "separator names slot \(stale), not an entry" }
        return nil
    }
}

/// A total order of row slots for a ``SlotTree``: negative, zero or positive as the first slot's row sorts
/// before, with or after the second's.
protocol SlotOrdering {
    func compare(_ a: UInt32, _ b: UInt32) -> Int
}
