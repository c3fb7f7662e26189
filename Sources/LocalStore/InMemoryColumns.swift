import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One column of an in-memory table, stored column-wise by row slot: no heap object per row or per value.
///
/// - integer, double and date: the value's 64 bits in ``words`` (a date as its `timeIntervalSinceReferenceDate`,
///   which is all a `Date` holds, so it round-trips exactly);
/// - boolean: only ``state``;
/// - string and binary: the bytes in one contiguous ``arena``, the slot's ``offsets`` and ``lengths`` naming its
///   range (a string is stored as its UTF-8 bytes and read back as exactly those bytes);
/// - json: the value itself in ``others`` (a rare column type; not worth an encoding of its own).
///
/// ``state`` is 0 for null, else 1 (boolean: 1 false, 2 true). Rewriting or clearing a string or binary
/// leaves its old bytes behind as ``garbage``; ``compact()`` rewrites the arena once the garbage outweighs
/// the live bytes.
///
/// Not thread-safe by itself: guarded by its store's readers-writer lock like the rest of a ``MemTable``.
///
/// The arrays opt out of Swift's dynamic exclusivity checks (`@exclusivity(unchecked)`), which cost more than
/// the reads they guard on every scanned value. Static checks still apply, and the dynamic ones could only
/// catch an access overlapping a modification on the same thread: every modification here is a single
/// statement of this class's own methods, which access nothing else meanwhile, and other threads are kept
/// out by the store's lock (readers only read; the writer runs alone).
final class MemColumn {
    let type: ColumnType
    @exclusivity(unchecked) private(set) var state: [UInt8] = []
    @exclusivity(unchecked) private(set) var words: [UInt64] = []
    @exclusivity(unchecked) private(set) var offsets: [Int] = []
    @exclusivity(unchecked) private(set) var lengths: [UInt32] = []
    @exclusivity(unchecked) private(set) var arena: [UInt8] = []
    @exclusivity(unchecked) private(set) var others: [Value] = []
    /// Bytes of ``arena`` no slot refers to any more.
    @exclusivity(unchecked) private(set) var garbage = 0

    init(type: ColumnType, count: Int) {
        self.type = type
        grow(to: count)
    }

    var isFixed: Bool { type == .integer || type == .double || type == .date }
    var isBytes: Bool { type == .string || type == .binary }

    /// Adds null slots up to `count`.
    func grow(to count: Int) {
        let n = count - state.count
        guard n > 0 else { return }
        state.append(contentsOf: repeatElement(0, count: n))
        if isFixed { words.append(contentsOf: repeatElement(0, count: n)) }
        if isBytes {
            offsets.append(contentsOf: repeatElement(0, count: n))
            lengths.append(contentsOf: repeatElement(0, count: n))
        }
        if type == .json { others.append(contentsOf: repeatElement(.null, count: n)) }
    }

    // MARK: Reading

    /// The value stored in `slot`.
    func value(_ slot: Int) -> Value {
        let s = state[slot]
        if s == 0 { return .null }
        switch type {
        case .integer: return .int(Int64(bitPattern: words[slot]))
        case .double: return .double(Double(bitPattern: words[slot]))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: words[slot])))
        case .boolean: return .bool(s == 2)
        case .string:
            let start = offsets[slot]
            return .string(String(decoding: arena[start..<start + Int(lengths[slot])], as: UTF8.self))
        case .binary:
            let start = offsets[slot]
            return .binary(Array(arena[start..<start + Int(lengths[slot])]))
        case .json: return others[slot]
        }
    }

    /// The ``TableSchema/byteCount(of:)`` of the value in `slot`, without building the value.
    func byteCount(_ slot: Int) -> Int {
        if state[slot] == 0 { return 0 }
        switch type {
        case .string, .binary: return Int(lengths[slot])
        case .json: return TableSchema.byteCount(of: others[slot])
        default: return 8
        }
    }

    /// Whether `slot` holds exactly `v`: the same kind and the same bits or bytes (not Swift's `==`, under
    /// which canonically equivalent strings are equal).
    func holds(_ slot: Int, _ v: Value) -> Bool {
        let s = state[slot]
        switch (type, v) {
        case (_, .null): return s == 0
        case _ where s == 0: return false
        case (.integer, .int(let x)): return words[slot] == UInt64(bitPattern: x)
        case (.double, .double(let x)): return words[slot] == x.bitPattern
        case (.date, .date(let d)): return words[slot] == d.timeIntervalSinceReferenceDate.bitPattern
        case (.boolean, .bool(let b)): return s == (b ? 2 : 1)
        case (.string, .string(let x)): return withBytes(slot) { stored in x.utf8.elementsEqual(stored) }
        case (.binary, .binary(let x)): return withBytes(slot) { stored in x.elementsEqual(stored) }
        case (.json, .json): return others[slot] == v
        default: return false
        }
    }

    /// Calls `body` with the bytes of a string or binary slot (empty for null).
    @inline(__always) func withBytes<R>(_ slot: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let start = offsets[slot]
        let count = Int(lengths[slot])
        return arena.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<start + count])) }
    }

    /// Orders the values of two slots as ``Collation/compare(_:_:noCase:)`` orders them (null first);
    /// `noCase` compares strings as SQLite's NOCASE does.
    func compare(_ a: Int, _ b: Int, noCase: Bool) -> Int {
        let sa = state[a]
        let sb = state[b]
        if sa == 0 || sb == 0 { return sa == 0 ? (sb == 0 ? 0 : -1) : 1 }
        switch type {
        case .integer:
            let x = Int64(bitPattern: words[a])
            let y = Int64(bitPattern: words[b])
            return x < y ? -1 : (x == y ? 0 : 1)
        case .double, .date:
            return Collation.cmp(Double(bitPattern: words[a]), Double(bitPattern: words[b]))
        case .boolean:
            return sa == sb ? 0 : (sa < sb ? -1 : 1)
        case .string, .binary:
            let (oa, la) = (offsets[a], Int(lengths[a]))
            let (ob, lb) = (offsets[b], Int(lengths[b]))
            return arena.withUnsafeBytes { p in
                let x = UnsafeRawBufferPointer(rebasing: p[oa..<oa + la])
                let y = UnsafeRawBufferPointer(rebasing: p[ob..<ob + lb])
                return noCase && type == .string ? RawBytes.compareNoCase(x, y) : RawBytes.compare(x, y)
            }
        case .json:
            return Collation.compare(others[a], others[b], noCase: noCase)
        }
    }

    /// ``compare(_:_:noCase:)`` of an integer column's slot with `.int(y)`, without the switch.
    @inline(__always) func compareInt(_ slot: Int, _ y: Int64) -> Int {
        if state[slot] == 0 { return -1 }
        let x = Int64(bitPattern: words[slot])
        return x < y ? -1 : (x == y ? 0 : 1)
    }

    /// Orders the value of `slot` against `v` as ``Collation/compare(_:_:noCase:)`` orders the stored value
    /// against `v`.
    func compare(_ slot: Int, _ v: Value, noCase: Bool) -> Int {
        let s = state[slot]
        if s == 0 { return v.isNull ? 0 : -1 }
        switch (type, v) {
        case (_, .null): return 1
        case (.integer, .int(let y)):
            let x = Int64(bitPattern: words[slot])
            return x < y ? -1 : (x == y ? 0 : 1)
        case (.date, .date(let d)):
            return Collation.cmp(Double(bitPattern: words[slot]), d.timeIntervalSinceReferenceDate)
        case (.double, .double(let y)):
            return Collation.cmp(Double(bitPattern: words[slot]), y)
        case (.string, .string(var y)):
            return withBytes(slot) { x in
                y.withUTF8 { yb in
                    let y = UnsafeRawBufferPointer(yb)
                    return noCase ? RawBytes.compareNoCase(x, y) : RawBytes.compare(x, y)
                }
            }
        default:
            return Collation.compare(value(slot), v, noCase: noCase)
        }
    }

    // MARK: Writing

    /// Stores `v` (of this column's type, or null) in `slot` (< the column's count).
    func set(_ slot: Int, _ v: Value) {
        if isBytes && state[slot] != 0 { garbage += Int(lengths[slot]) }
        switch v {
        case .null:
            state[slot] = 0
            if type == .json { others[slot] = .null }
            return
        case .int(let x) where type == .integer: words[slot] = UInt64(bitPattern: x)
        case .int(let x) where type == .double: words[slot] = Double(x).bitPattern
        case .double(let x) where type == .double: words[slot] = x.bitPattern
        case .date(let d) where type == .date: words[slot] = d.timeIntervalSinceReferenceDate.bitPattern
        case .bool(let b) where type == .boolean:
            state[slot] = b ? 2 : 1
            return
        case .string(let s) where type == .string:
            offsets[slot] = arena.count
            lengths[slot] = UInt32(s.utf8.count)
            arena.append(contentsOf: s.utf8)
        case .binary(let b) where type == .binary:
            offsets[slot] = arena.count
            lengths[slot] = UInt32(b.count)
            arena.append(contentsOf: b)
        default:
            // Only json reaches here (``TableSchema/prepare(_:options:)`` converted everything else).
            others[slot] = v
        }
        state[slot] = 1
    }

    /// Rewrites the arena without its garbage when the garbage outweighs the live bytes.
    func compactIfWorthIt() {
        guard isBytes, garbage > 4096, garbage > arena.count / 2 else { return }
        var fresh: [UInt8] = []
        fresh.reserveCapacity(arena.count - garbage)
        for slot in state.indices where state[slot] != 0 {
            let start = offsets[slot]
            offsets[slot] = fresh.count
            fresh.append(contentsOf: arena[start..<start + Int(lengths[slot])])
        }
        arena = fresh
        garbage = 0
    }

    /// Heap bytes held (capacity, not only use), for diagnostics.
    var heapBytes: Int {
        state.capacity + words.capacity * 8 + offsets.capacity * 8 + lengths.capacity * 4 + arena.capacity
            + others.capacity * MemoryLayout<Value>.stride
    }
}

extension MemColumn {
    /// Initializes `out[0..<columns.count]` with the values of row `slot` in `columns`, in order.
    @inline(__always) static func initialize(_ out: UnsafeMutablePointer<Value>, row slot: Int, of columns: [MemColumn]) {
        // The columns are borrowed from the array, which holds them: iterating the array itself
        // retained and released every column for every row.
        columns.withUnsafeBufferPointer { columns in
            for n in columns.indices {
                (out + n).initialize(to: Unmanaged.passUnretained(columns[n])._withUnsafeGuaranteedRef { $0.value(slot) })
            }
        }
    }

    /// The values of row `slot` in `columns`, in order, in a buffer of their own (an item's row).
    static func values(_ slot: Int, of columns: [MemColumn]) -> ValueRows {
        ValueRows.make(count: columns.count) { initialize($0, row: slot, of: columns) }
    }

    /// The values of row `slot` in `columns`, in order, in an array allocated once at its size.
    static func row(_ slot: Int, of columns: [MemColumn]) -> [Value] {
        [Value](unsafeUninitializedCapacity: columns.count) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            initialize(base, row: slot, of: columns)
            initialized = columns.count
        }
    }
}

/// The slot of every row of a ``MemTable`` by id: an open-addressing hash table (linear probing, deletion by
/// backward shift) of slot numbers; the ids themselves stay in the id column. String ids are hashed and
/// compared under SQLite's NOCASE rule (ASCII case folded; a NUL ends the compared bytes and the lengths
/// decide), so two ids a SQL backend's `NOCASE` primary key treats as one are one row here too.
struct MemIdMap {
    /// Per bucket, 0 when empty, else the low 32 bits of the id's hash (high half) and `slot + 1` (low
    /// half). The count is a power of two (or zero), below 2^32: a bucket's home is its hash bits & mask.
    /// A probe compares an id only when the hash bits match (not once per occupied bucket it passes),
    /// and growing or removing never hashes an id again.
    private var buckets: [UInt64] = []
    private(set) var count = 0

    @inline(__always) private static func entry(_ slot: Int, hash: Int) -> UInt64 {
        UInt64(UInt32(truncatingIfNeeded: hash)) << 32 | UInt64(UInt32(slot + 1))
    }

    @inline(__always) private static func slot(_ entry: UInt64) -> Int { Int(entry & 0xFFFF_FFFF) - 1 }

    /// The hash of an id as the id column stores it.
    static func hash(_ column: MemColumn, _ slot: Int) -> Int {
        switch column.type {
        case .string: return column.withBytes(slot) { hashNoCase($0) }
        case .integer: return Int64(bitPattern: column.words[slot]).hashValue
        default: return column.value(slot).hashValue
        }
    }

    /// The hash of an id value (the kind of the id column).
    static func hash(_ id: Value) -> Int {
        switch id {
        case .string(var s): return s.withUTF8 { hashNoCase(UnsafeRawBufferPointer($0)) }
        case .int(let i): return i.hashValue
        default: return id.hashValue
        }
    }

    private static func hashNoCase(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        var word: UInt64 = 0
        var shift: UInt64 = 0
        // Whole words while they hold no NUL (the same words the byte loop below would combine).
        var start = 0
        if let p = bytes.baseAddress {
            while start + 8 <= bytes.count {
                let w = UInt64(littleEndian: p.loadUnaligned(fromByteOffset: start, as: UInt64.self))
                if RawBytes.hasZeroByte(w) { break }
                hasher.combine(RawBytes.foldASCII(w))
                start += 8
            }
        }
        for b in UnsafeRawBufferPointer(rebasing: bytes[start...]) {
            let folded = b >= 0x41 && b <= 0x5A ? b | 0x20 : b
            word |= UInt64(folded) << shift
            shift += 8
            if folded == 0 { break }
            if shift == 64 {
                hasher.combine(word)
                word = 0
                shift = 0
            }
        }
        hasher.combine(word)
        hasher.combine(bytes.count)
        return hasher.finalize()
    }

    /// Whether `slot` of the id column holds an id equal to `id` (NOCASE for strings).
    static func equal(_ column: MemColumn, _ slot: Int, _ id: Value) -> Bool {
        switch (column.type, id) {
        case (.string, .string): return column.compare(slot, id, noCase: true) == 0
        case (.integer, .int(let i)): return column.state[slot] != 0 && Int64(bitPattern: column.words[slot]) == i
        default: return column.value(slot) == id
        }
    }

    /// The slot of the row with id `id`.
    func find(_ id: Value, in column: MemColumn) -> Int? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        let bits = UInt64(UInt32(truncatingIfNeeded: Self.hash(id)))
        var i = Int(bits) & mask
        while true {
            let b = buckets[i]
            if b == 0 { return nil }
            if b >> 32 == bits {
                let slot = Self.slot(b)
                if Self.equal(column, slot, id) { return slot }
            }
            i = (i + 1) & mask
        }
    }

    /// Adds `slot` (whose id is not in the map yet).
    mutating func insert(_ slot: Int, column: MemColumn) {
        if (count + 1) * 4 > buckets.count * 3 { rehash(capacity: max(16, buckets.count * 2)) }
        place(Self.entry(slot, hash: Self.hash(column, slot)))
        count += 1
    }

    private mutating func place(_ entry: UInt64) {
        let mask = buckets.count - 1
        var i = Int(entry >> 32) & mask
        while buckets[i] != 0 { i = (i + 1) & mask }
        buckets[i] = entry
    }

    private mutating func rehash(capacity: Int) {
        let old = buckets
        buckets = [UInt64](repeating: 0, count: capacity)
        for b in old where b != 0 { place(b) }
    }

    /// Removes `slot` (whose id column still holds its id).
    mutating func remove(_ slot: Int, column: MemColumn) {
        guard !buckets.isEmpty else { return }
        let mask = buckets.count - 1
        let entry = Self.entry(slot, hash: Self.hash(column, slot))
        var i = Int(entry >> 32) & mask
        while buckets[i] != entry {
            if buckets[i] == 0 { return }
            i = (i + 1) & mask
        }
        // Backward shift: move later entries of the probe run into the hole when their home allows it.
        var j = i
        while true {
            j = (j + 1) & mask
            let b = buckets[j]
            if b == 0 { break }
            let home = Int(b >> 32) & mask
            // The entry at j may move to i when i lies cyclically in [home, j).
            let movable = i <= j ? (home <= i || home > j) : (home <= i && home > j)
            if movable {
                buckets[i] = b
                i = j
            }
        }
        buckets[i] = 0
        count -= 1
    }

    /// Heap bytes held, for diagnostics.
    var heapBytes: Int { buckets.capacity * 8 }
}
