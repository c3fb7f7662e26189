/// The column names of rows read from one table definition, shared by every item built from them:
/// the names in row order and a lookup from name to position. An item in row form holds a layout and
/// one `[Value]` (no dictionary, no hashing of its keys) and builds the dictionary only when
/// ``Item/values`` is read.
///
/// Names are distinct, also case-insensitively (ASCII), so the item's keys are exactly `names` and
/// ``Item/value(forColumn:)`` finds the same value in either form.
@usableFromInline package final class ItemLayout: Sendable {
    /// The column names, in row order.
    package let names: [String]
    /// Exact name → position.
    let positions: [String: Int]
    /// ASCII-folded name → position.
    let foldedPositions: [String: Int]
    /// The position of the column named `id` (any case), or `nil`.
    let idPosition: Int?

    /// A layout for `names`, or `nil` when two names are equal or equal case-insensitively (ASCII).
    package init?(names: [String]) {
        var positions: [String: Int] = Dictionary(minimumCapacity: names.count)
        var folded: [String: Int] = Dictionary(minimumCapacity: names.count)
        for (n, name) in names.enumerated() {
            guard positions.updateValue(n, forKey: name) == nil,
                folded.updateValue(n, forKey: Identifier.fold(name)) == nil
            else { return nil }
        }
        self.names = names
        self.positions = positions
        self.foldedPositions = folded
        self.idPosition = folded["id"]
    }

    /// The dictionary of an item whose values by position are `row`'s.
    func dictionary(_ row: Item.Row) -> [String: Value] {
        var d: [String: Value] = Dictionary(minimumCapacity: names.count)
        for (n, name) in names.enumerated() { d[name] = row.value(n) }
        return d
    }
}

/// A row: column names mapped to values, `id` included.
///
/// Items written by callers may name columns in any case (they are matched case-insensitively);
/// items returned by a store use the columns' defined spelling and carry every column of the table
/// (null for unset ones), or exactly the selected ones.
///
/// An item read from a store may keep its values by position with column names shared by every row
/// of the result, and build its ``values`` dictionary only when that is read. Either form behaves the
/// same: equality and hashing are those of the dictionaries. The values of the items of one result may
/// share one buffer (each item reading its own run of it); changing an item's value copies its own values
/// first.
public struct Item: Sendable, Hashable, ExpressibleByDictionaryLiteral, Sequence, CustomStringConvertible {
    /// An item's values in row form: `layout.names.count` values of a buffer (that the items of one
    /// result may share) from `start`, the `n`th being the value of `layout.names[n]`. `Sendable` as an
    /// array is: the buffer is written only through ``set(_:_:)``, which first copies a buffer that
    /// anything else references.
    @usableFromInline struct Row: @unchecked Sendable {
        let layout: ItemLayout
        var values: ValueRows
        var start: Int

        /// The value of `layout.names[n]`.
        @inline(__always) func value(_ n: Int) -> Value { values[start &+ n] }

        /// Sets the value of `layout.names[n]`; a buffer another item reads too is first copied (this
        /// row's values only).
        mutating func set(_ n: Int, _ value: Value) {
            if !isKnownUniquelyReferenced(&values) {
                values = values.copy(from: start, count: layout.names.count)
                start = 0
            }
            values.replace(start &+ n, with: value)
        }
    }

    /// The values by name (dictionary form, when `row` is `nil`).
    @usableFromInline var dictionary: [String: Value]
    /// The values by position (row form), or `nil`.
    @usableFromInline var row: Row?

    /// The names of the row form's values, or `nil` in dictionary form.
    var layout: ItemLayout? { row?.layout }

    /// The item's values by column name.
    public var values: [String: Value] {
        get { row.map { $0.layout.dictionary($0) } ?? dictionary }
        set {
            dictionary = newValue
            row = nil
        }
        _modify {
            makeDictionary()
            yield &dictionary
        }
    }

    /// Turns a row-form item into the dictionary form.
    @usableFromInline mutating func makeDictionary() {
        guard let r = row else { return }
        dictionary = r.layout.dictionary(r)
        row = nil
    }

    /// Creates an item from a dictionary.
    @inlinable public init(_ values: [String: Value] = [:]) {
        dictionary = values
        row = nil
    }

    /// An item in row form: `row[n]` is the value of `layout.names[n]`. `row` must have one value per
    /// name; an item from a row of another length is built as a dictionary of the pairs that exist.
    package init(layout: ItemLayout, row: [Value]) {
        if row.count == layout.names.count {
            dictionary = Dictionary()
            self.row = Row(layout: layout, values: ValueRows.make(copying: row), start: 0)
        } else {
            var d: [String: Value] = [:]
            for (name, value) in zip(layout.names, row) { d[name] = value }
            dictionary = d
            self.row = nil
        }
    }

    /// An item in row form whose values are the `layout.names.count` values of `values` from `start`
    /// (a buffer the items of one result may share; the caller guarantees they are initialized).
    package init(layout: ItemLayout, values: ValueRows, start: Int) {
        dictionary = Dictionary()  // not `[:]`: that calls `init(dictionaryLiteral:)` (~50 instructions per item)
        row = Row(layout: layout, values: values, start: start)
    }

    /// Creates an item from a literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, Value)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, new in new }))
    }

    /// The value stored under exactly `column`, or `nil` when the item has no such key.
    public subscript(_ column: String) -> Value? {
        get {
            guard let r = row else { return dictionary[column] }
            return r.layout.positions[column].map { r.value($0) }
        }
        set {
            if let l = row?.layout {
                if let value = newValue, let n = l.positions[column] {
                    // A buffer shared with other items is copied (this item's values only) before it is written.
                    row?.set(n, value)
                    return
                }
                makeDictionary()
            }
            dictionary[column] = newValue
        }
    }

    /// The value of `column`, matched case-insensitively (ASCII), or `nil` when absent.
    public func value(forColumn column: String) -> Value? {
        if let r = row {
            if let n = r.layout.positions[column] ?? r.layout.foldedPositions[Identifier.fold(column)] { return r.value(n) }
            return nil
        }
        if let v = dictionary[column] { return v }
        let folded = Identifier.fold(column)
        for (k, v) in dictionary where Identifier.fold(k) == folded { return v }
        return nil
    }

    /// The item's `id` value (matched case-insensitively), or `nil`.
    public var id: Value? {
        if let r = row { return r.layout.idPosition.map { r.value($0) } }
        return value(forColumn: "id")
    }

    /// The item's `id` when it is a string.
    public var stringId: String? { id?.stringValue }

    /// The number of keys.
    public var count: Int { row?.layout.names.count ?? dictionary.count }

    /// Iterates over `(column, value)` pairs in no particular order.
    public func makeIterator() -> Dictionary<String, Value>.Iterator { values.makeIterator() }

    /// The number of keys (iteration visits each once).
    public var underestimatedCount: Int { count }

    /// The keys sorted, with their values.
    public var description: String {
        let values = self.values
        return "{" + values.keys.sorted().map { "\($0): \(values[$0] ?? .null)" }.joined(separator: ", ") + "}"
    }

    /// Equal when the ``values`` dictionaries are equal (the same keys, each with an equal value).
    public static func == (a: Item, b: Item) -> Bool {
        switch (a.row, b.row) {
        case (nil, nil):
            return a.dictionary == b.dictionary
        case (let ra?, let rb?) where ra.layout === rb.layout:
            for n in ra.layout.names.indices where ra.value(n) != rb.value(n) { return false }
            return true
        default:
            // The keys of either form are distinct, so equal counts and every pair of `a` found in
            // `b` is dictionary equality.
            guard a.count == b.count else { return false }
            if let ra = a.row {
                for (n, name) in ra.layout.names.enumerated() {
                    guard let w = b[name], ra.value(n) == w else { return false }
                }
            } else {
                for (name, v) in a.dictionary {
                    guard let w = b[name], v == w else { return false }
                }
            }
            return true
        }
    }

    /// Hashes as the ``values`` dictionary does (in either form, so equal items hash alike).
    public func hash(into hasher: inout Hasher) {
        guard let r = row else {
            hasher.combine(dictionary)
            return
        }
        // Dictionary's own algorithm: each pair hashed by a copy of the hasher, the results combined
        // by XOR (order-independent), then that combined into the hasher.
        var commutative = 0
        for (n, name) in r.layout.names.enumerated() {
            var element = hasher
            element.combine(name)
            element.combine(r.value(n))
            commutative ^= element.finalize()
        }
        hasher.combine(commutative)
    }
}

/// What a query read returns.
public struct ReadResult: Sendable, Hashable {
    /// The matching items, in the query's order, after skip and top.
    public var items: [Item]
    /// The number of all matching items ignoring skip and top, when the query asked for it.
    public var totalCount: Int?

    /// Creates a result.
    public init(items: [Item], totalCount: Int? = nil) {
        self.items = items
        self.totalCount = totalCount
    }
}

/// Options for ``LocalStoreAccess/upsert(_:into:options:)``.
public struct UpsertOptions: Sendable, Hashable {
    /// When `true`, keys of an item that are not columns of the table are dropped instead of
    /// failing with `unknownColumn` (a sync client sets this for items pulled from the server;
    /// the .NET SDK calls it `ignoreMissingColumns`).
    public var ignoreUnknownColumns: Bool
    /// The largest string, binary or json value this write accepts, in bytes (see
    /// ``TableSchema/byteCount(of:)``); `invalidValue` beyond. It can only lower
    /// ``TableSchema/maximumValueBytes``: a larger number is treated as that maximum.
    public var maximumValueBytes: Int
    /// The largest item this write accepts, in bytes (the sum of ``TableSchema/byteCount(of:)`` over its
    /// values); `invalidValue` beyond. It can only lower ``TableSchema/maximumItemBytes``.
    public var maximumItemBytes: Int

    /// Creates options.
    public init(
        ignoreUnknownColumns: Bool = false, maximumValueBytes: Int = TableSchema.maximumValueBytes,
        maximumItemBytes: Int = TableSchema.maximumItemBytes
    ) {
        self.ignoreUnknownColumns = ignoreUnknownColumns
        self.maximumValueBytes = maximumValueBytes
        self.maximumItemBytes = maximumItemBytes
    }

    /// Fail on unknown columns.
    public static let strict = UpsertOptions()
    /// Drop unknown columns.
    public static let ignoringUnknownColumns = UpsertOptions(ignoreUnknownColumns: true)
}
