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

    /// The dictionary of an item whose values by position are `row`.
    func dictionary(_ row: ArraySlice<Value>) -> [String: Value] {
        var d: [String: Value] = Dictionary(minimumCapacity: names.count)
        for (name, value) in zip(names, row) { d[name] = value }
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
/// share one buffer (each item a slice of it); changing an item's value copies its own values first.
public struct Item: Sendable, Hashable, ExpressibleByDictionaryLiteral, Sequence, CustomStringConvertible {
    /// The values by name (dictionary form, when `layout` is `nil`).
    @usableFromInline var dictionary: [String: Value]
    /// The names of `row` (row form), or `nil`.
    @usableFromInline var layout: ItemLayout?
    /// The values by position of `layout.names` (row form): `row[row.startIndex + n]` is the value of
    /// `layout.names[n]`. A slice: the items of one query result may share one buffer of values.
    @usableFromInline var row: ArraySlice<Value>

    /// The item's values by column name.
    public var values: [String: Value] {
        get { layout.map { $0.dictionary(row) } ?? dictionary }
        set {
            dictionary = newValue
            layout = nil
            row = []
        }
        _modify {
            makeDictionary()
            yield &dictionary
        }
    }

    /// Turns a row-form item into the dictionary form.
    @usableFromInline mutating func makeDictionary() {
        guard let l = layout else { return }
        dictionary = l.dictionary(row)
        layout = nil
        row = []
    }

    /// Creates an item from a dictionary.
    @inlinable public init(_ values: [String: Value] = [:]) {
        dictionary = values
        layout = nil
        row = []
    }

    /// An item in row form: `row[n]` is the value of `layout.names[n]`. `row` must have one value per
    /// name; an item from a row of another length is built as a dictionary of the pairs that exist.
    package init(layout: ItemLayout, row: [Value]) {
        self.init(layout: layout, row: row[...])
    }

    /// An item in row form whose values are the slice `row` (of a buffer the items of one result
    /// share): its `n`th value is the value of `layout.names[n]`. `row` must have one value per name;
    /// otherwise the item is built as a dictionary of the pairs that exist.
    package init(layout: ItemLayout, row: ArraySlice<Value>) {
        if row.count == layout.names.count {
            dictionary = Dictionary()
            self.layout = layout
            self.row = row
        } else {
            var d: [String: Value] = [:]
            for (name, value) in zip(layout.names, row) { d[name] = value }
            dictionary = d
            self.layout = nil
            self.row = []
        }
    }

    /// An item in row form whose slice `row` holds exactly one value per name of `layout` (the caller
    /// guarantees it).
    package init(layout: ItemLayout, exactRow row: ArraySlice<Value>) {
        dictionary = Dictionary()  // not `[:]`: that calls `init(dictionaryLiteral:)` (~50 instructions per item)
        self.layout = layout
        self.row = row
    }

    /// Creates an item from a literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, Value)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, new in new }))
    }

    /// The value stored under exactly `column`, or `nil` when the item has no such key.
    public subscript(_ column: String) -> Value? {
        get {
            guard let l = layout else { return dictionary[column] }
            return l.positions[column].map { row[row.startIndex + $0] }
        }
        set {
            if let l = layout {
                if let value = newValue, let n = l.positions[column] {
                    // A slice of a shared buffer is copied (its own values only) before it is written.
                    row[row.startIndex + n] = value
                    return
                }
                makeDictionary()
            }
            dictionary[column] = newValue
        }
    }

    /// The value of `column`, matched case-insensitively (ASCII), or `nil` when absent.
    public func value(forColumn column: String) -> Value? {
        if let l = layout {
            if let n = l.positions[column] ?? l.foldedPositions[Identifier.fold(column)] { return row[row.startIndex + n] }
            return nil
        }
        if let v = dictionary[column] { return v }
        let folded = Identifier.fold(column)
        for (k, v) in dictionary where Identifier.fold(k) == folded { return v }
        return nil
    }

    /// The item's `id` value (matched case-insensitively), or `nil`.
    public var id: Value? {
        if let l = layout { return l.idPosition.map { row[row.startIndex + $0] } }
        return value(forColumn: "id")
    }

    /// The item's `id` when it is a string.
    public var stringId: String? { id?.stringValue }

    /// The number of keys.
    public var count: Int { layout?.names.count ?? dictionary.count }

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
        switch (a.layout, b.layout) {
        case (nil, nil):
            return a.dictionary == b.dictionary
        case (let la?, let lb?) where la === lb:
            return a.row == b.row
        default:
            // The keys of either form are distinct, so equal counts and every pair of `a` found in
            // `b` is dictionary equality.
            guard a.count == b.count else { return false }
            if let la = a.layout {
                for (name, v) in zip(la.names, a.row) {
                    guard let w = b[name], v == w else { return false }
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
        guard let l = layout else {
            hasher.combine(dictionary)
            return
        }
        // Dictionary's own algorithm: each pair hashed by a copy of the hasher, the results combined
        // by XOR (order-independent), then that combined into the hasher.
        var commutative = 0
        for (name, value) in zip(l.names, row) {
            var element = hasher
            element.combine(name)
            element.combine(value)
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
