/// Maximum number of elements held by a leaf node; a leaf that grows past this is split in two.
private let bTreeLeafCapacity = 128
/// Minimum number of elements in a non-root leaf; a leaf that shrinks below this is rebalanced.
private let bTreeLeafMinimum = bTreeLeafCapacity / 2
/// Maximum number of children of an internal node; a node that grows past this is split in two.
private let bTreeInternalCapacity = 128
/// Minimum number of children of a non-root internal node; a node that shrinks below this is rebalanced.
private let bTreeInternalMinimum = bTreeInternalCapacity / 2

/// An ordered set of unique elements, stored in an in-memory B+tree.
///
/// All elements live in the leaves. An internal node with children `c[0...k]` holds separator
/// keys `s[0..<k]` such that every element of `c[i]` is `< s[i]` and every element of `c[i + 1]`
/// is `>= s[i]`. Separators are not necessarily present in the set (a removal may leave a stale
/// one behind); they only route searches. Every non-root node is at least half full, so the
/// height is `O(log n)` and insertion, removal, lookup and positioning a range scan are all
/// `O(log n)` (with a per-node cost proportional to the fan-out of 128).
///
/// `BTree` is a value type with copy-on-write: nodes are shared between copies and a mutation
/// copies only the nodes on the root-to-leaf path it touches that are shared with another copy
/// (`O(log n)` nodes). A tree that is not copied is mutated entirely in place.
///
/// It is `Sendable` because a node is only ever mutated while it is uniquely referenced (the
/// same discipline as the standard library's copy-on-write collections); concurrent mutation
/// of one `BTree` variable must still be serialised by the owner, as for any `var`.
struct BTree<Element: Comparable>: Sendable where Element: Sendable {
    /// A tree node. A leaf has no children and its `keys` are the elements themselves; an
    /// internal node has `keys.count + 1` children and its `keys` are the separators.
    ///
    /// `@unchecked Sendable`: nodes are mutated only when uniquely referenced (copy-on-write,
    /// see ``BTree``), so a node reachable from more than one tree or thread is never mutated.
    fileprivate final class Node: @unchecked Sendable {
        var keys: [Element]
        var children: [Node]

        init(keys: [Element], children: [Node]) {
            self.keys = keys
            self.children = children
        }

        var isLeaf: Bool { children.isEmpty }

        /// A shallow copy: the arrays are shared copy-on-write and the children become shared.
        func copy() -> Node { Node(keys: keys, children: children) }
    }

    private var root: Node
    private(set) var count: Int

    init() {
        root = Node(keys: [], children: [])
        count = 0
    }

    // MARK: Lookup

    func contains(_ element: Element) -> Bool {
        var node = root
        while !node.isLeaf {
            node = node.children[Self.upperBound(node.keys, element)]
        }
        let i = Self.lowerBound(node.keys, element)
        return i < node.keys.count && node.keys[i] == element
    }

    // MARK: Insertion

    /// Inserts; returns false (and changes nothing) if an equal element is present.
    @discardableResult
    mutating func insert(_ element: Element) -> Bool {
        if !isKnownUniquelyReferenced(&root) { root = root.copy() }
        let (inserted, split) = Self.insert(element, into: root)
        guard inserted else { return false }
        count += 1
        if let (separator, right) = split {
            root = Node(keys: [separator], children: [root, right])
        }
        return true
    }

    /// Inserts into the subtree rooted at `node`, which must be uniquely referenced. Returns
    /// whether the element was inserted and, if `node` had to be split, the separator and the
    /// new right sibling to be added to the parent.
    private static func insert(_ element: Element, into node: Node) -> (Bool, (Element, Node)?) {
        if node.isLeaf {
            let i = lowerBound(node.keys, element)
            if i < node.keys.count && node.keys[i] == element { return (false, nil) }
            node.keys.insert(element, at: i)
            guard node.keys.count > bTreeLeafCapacity else { return (true, nil) }
            let mid = node.keys.count / 2
            let right = Node(keys: Array(node.keys[mid...]), children: [])
            node.keys.removeSubrange(mid...)
            return (true, (right.keys[0], right))
        }
        let i = upperBound(node.keys, element)
        makeChildUnique(node, i)
        let (inserted, split) = insert(element, into: node.children[i])
        guard let (separator, newChild) = split else { return (inserted, nil) }
        node.keys.insert(separator, at: i)
        node.children.insert(newChild, at: i + 1)
        guard node.children.count > bTreeInternalCapacity else { return (inserted, nil) }
        // keys.count == capacity here: the middle key moves up, both halves keep >= minimum children.
        let mid = node.keys.count / 2
        let up = node.keys[mid]
        let right = Node(keys: Array(node.keys[(mid + 1)...]), children: Array(node.children[(mid + 1)...]))
        node.keys.removeSubrange(mid...)
        node.children.removeSubrange((mid + 1)...)
        return (inserted, (up, right))
    }

    // MARK: Removal

    /// Removes the element equal to `element`; returns whether one was present.
    @discardableResult
    mutating func remove(_ element: Element) -> Bool {
        // (Removing an absent element from a tree that shares nodes with a copy may still
        // copy the nodes on the search path; the contents are unchanged either way.)
        if !isKnownUniquelyReferenced(&root) { root = root.copy() }
        guard Self.remove(element, from: root) else { return false }
        count -= 1
        if !root.isLeaf && root.children.count == 1 {
            root = root.children[0]
        }
        return true
    }

    /// Removes from the subtree rooted at `node`, which must be uniquely referenced, leaving
    /// `node` possibly under-full (the caller rebalances it).
    private static func remove(_ element: Element, from node: Node) -> Bool {
        if node.isLeaf {
            let i = lowerBound(node.keys, element)
            guard i < node.keys.count && node.keys[i] == element else { return false }
            node.keys.remove(at: i)
            return true
        }
        let i = upperBound(node.keys, element)
        makeChildUnique(node, i)
        guard remove(element, from: node.children[i]) else { return false }
        let child = node.children[i]
        let underfull = child.isLeaf
            ? child.keys.count < bTreeLeafMinimum
            : child.children.count < bTreeInternalMinimum
        if underfull { rebalance(node, child: i) }
        return true
    }

    private static func size(_ node: Node) -> Int {
        node.isLeaf ? node.keys.count : node.children.count
    }

    private static func minimum(_ node: Node) -> Int {
        node.isLeaf ? bTreeLeafMinimum : bTreeInternalMinimum
    }

    /// Restores the minimum occupancy of `parent.children[i]` (uniquely referenced, exactly one
    /// below the minimum) by borrowing from a sibling that can spare one, or else merging with one.
    private static func rebalance(_ parent: Node, child i: Int) {
        let child = parent.children[i]
        if i > 0 && size(parent.children[i - 1]) > minimum(child) {
            makeChildUnique(parent, i - 1)
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
            makeChildUnique(parent, i + 1)
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
            makeChildUnique(parent, i - 1)
            merge(parent, left: i - 1)
        } else if i + 1 < parent.children.count {
            merge(parent, left: i)
        }
        // Otherwise `child` is the only child: possible only under the root, which
        // `remove(_:)` collapses afterwards.
    }

    /// Merges `parent.children[l + 1]` into `parent.children[l]` (which must be uniquely
    /// referenced) and drops the separator between them. The two fit in one node because one
    /// is below the minimum and the other at it.
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

    /// Replaces `node.children[i]` by a copy of it unless it is uniquely referenced.
    private static func makeChildUnique(_ node: Node, _ i: Int) {
        if !isKnownUniquelyReferenced(&node.children[i]) {
            node.children[i] = node.children[i].copy()
        }
    }

    // MARK: Iteration

    /// Visits elements in ascending order starting at the first element >= bound (or > bound when !inclusive; all elements when bound is nil), until body returns false.
    func forEach(ascendingFrom bound: Element?, inclusive: Bool, _ body: (Element) throws -> Bool) rethrows {
        _ = try Self.ascend(root, from: bound, inclusive: inclusive, body)
    }

    /// Visits elements in descending order starting at the last element <= bound (or < bound when !inclusive; from the largest when bound is nil), until body returns false.
    func forEach(descendingFrom bound: Element?, inclusive: Bool, _ body: (Element) throws -> Bool) rethrows {
        _ = try Self.descend(root, from: bound, inclusive: inclusive, body)
    }

    /// Ascending walk of a subtree; recursion depth is the tree height. Returns false once
    /// `body` has asked to stop. `bound` only applies to the leftmost path visited.
    private static func ascend(
        _ node: Node, from bound: Element?, inclusive: Bool, _ body: (Element) throws -> Bool
    ) rethrows -> Bool {
        if node.isLeaf {
            let keys = node.keys
            var i = keys.startIndex
            if let bound { i = inclusive ? lowerBound(keys, bound) : upperBound(keys, bound) }
            while i < keys.endIndex {
                if try !body(keys[i]) { return false }
                i += 1
            }
            return true
        }
        // Children before `c` hold only elements < separator <= bound.
        let children = node.children
        var c = bound.map { upperBound(node.keys, $0) } ?? 0
        var childBound = bound
        while c < children.count {
            if try !ascend(children[c], from: childBound, inclusive: inclusive, body) { return false }
            childBound = nil
            c += 1
        }
        return true
    }

    /// Descending walk of a subtree; recursion depth is the tree height. Returns false once
    /// `body` has asked to stop. `bound` only applies to the rightmost path visited.
    private static func descend(
        _ node: Node, from bound: Element?, inclusive: Bool, _ body: (Element) throws -> Bool
    ) rethrows -> Bool {
        if node.isLeaf {
            let keys = node.keys
            var i = keys.endIndex
            if let bound { i = inclusive ? upperBound(keys, bound) : lowerBound(keys, bound) }
            while i > keys.startIndex {
                i -= 1
                if try !body(keys[i]) { return false }
            }
            return true
        }
        // Children after `c` hold only elements >= a separator that is > bound (>= bound when
        // exclusive), so none of them qualifies.
        let children = node.children
        var c = children.count - 1
        if let bound { c = inclusive ? upperBound(node.keys, bound) : lowerBound(node.keys, bound) }
        var childBound = bound
        while c >= 0 {
            if try !descend(children[c], from: childBound, inclusive: inclusive, body) { return false }
            childBound = nil
            c -= 1
        }
        return true
    }

    // MARK: Estimates

    /// An estimate of how many elements are `< bound`, for query planning. `O(log n)`: exact
    /// within the leaf `bound` falls in; above it every subtree of a node is assumed to hold the
    /// same share of that node's elements (nodes are between half full and full, so the estimate
    /// is within a small factor).
    func estimatedRank(of bound: Element) -> Double {
        var node = root
        var span = Double(count)
        var rank = 0.0
        while !node.isLeaf {
            let i = Self.upperBound(node.keys, bound)
            let share = span / Double(node.children.count)
            rank += Double(i) * share
            span = share
            node = node.children[i]
        }
        guard !node.keys.isEmpty else { return rank }
        return rank + Double(Self.lowerBound(node.keys, bound)) * span / Double(node.keys.count)
    }

    // MARK: Binary search

    /// The index of the first key that is `>= element` (`keys.count` if none).
    private static func lowerBound(_ keys: [Element], _ element: Element) -> Int {
        var lo = 0
        var hi = keys.count
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if keys[mid] < element { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The index of the first key that is `> element` (`keys.count` if none).
    private static func upperBound(_ keys: [Element], _ element: Element) -> Int {
        var lo = 0
        var hi = keys.count
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if element < keys[mid] { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }

    // MARK: Diagnostics

    /// Checks the structural invariants (ordering, separators, node occupancy, uniform leaf
    /// depth, `count`). Returns a description of the first violation found, or nil. `O(n)`;
    /// intended for tests.
    func invariantViolation() -> String? {
        var total = 0
        var leafDepth: Int? = nil
        func check(_ node: Node, depth: Int, lower: Element?, upper: Element?, isRoot: Bool) -> String? {
            for k in node.keys {
                if let lower, k < lower { return "key below its lower separator at depth \(depth)" }
                if let upper, !(k < upper) { return "key not below its upper separator at depth \(depth)" }
            }
            for j in node.keys.indices.dropFirst() where !(node.keys[j - 1] < node.keys[j]) {
                return "keys not strictly ascending at depth \(depth)"
            }
            if node.isLeaf {
                if node.keys.count > bTreeLeafCapacity { return "leaf over capacity" }
                if !isRoot && node.keys.count < bTreeLeafMinimum { return "leaf under minimum" }
                if let leafDepth, leafDepth != depth { return "leaves at different depths" }
                leafDepth = depth
                total += node.keys.count
                return nil
            }
            if node.children.count != node.keys.count + 1 { return "children/keys count mismatch" }
            if node.children.count > bTreeInternalCapacity { return "internal node over capacity" }
            if isRoot && node.children.count < 2 { return "internal root with fewer than 2 children" }
            if !isRoot && node.children.count < bTreeInternalMinimum { return "internal node under minimum" }
            for (c, child) in node.children.enumerated() {
                let lo = c == 0 ? lower : node.keys[c - 1]
                let hi = c == node.keys.count ? upper : node.keys[c]
                if let problem = check(child, depth: depth + 1, lower: lo, upper: hi, isRoot: false) {
                    return problem
                }
            }
            return nil
        }
        if let problem = check(root, depth: 0, lower: nil, upper: nil, isRoot: true) { return problem }
        if total != count { return "count is \(count) but the leaves hold \(total) elements" }
        return nil
    }
}
