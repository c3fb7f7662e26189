/// A row: column names mapped to values, `id` included.
///
/// Items written by callers may name columns in any case (they are matched case-insensitively);
/// items returned by a store use the columns' defined spelling and carry every column of the table
/// (null for unset ones), or exactly the selected ones.
public struct Item: Sendable, Hashable, ExpressibleByDictionaryLiteral, Sequence, CustomStringConvertible {
    /// The item's values by column name.
    public var values: [String: Value]

    /// Creates an item from a dictionary.
    @inlinable public init(_ values: [String: Value] = [:]) { self.values = values }

    /// Creates an item from a literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, Value)...) {
        self.values = Dictionary(elements, uniquingKeysWith: { _, new in new })
    }

    /// The value stored under exactly `column`, or `nil` when the item has no such key.
    @inlinable public subscript(_ column: String) -> Value? {
        get { values[column] }
        set { values[column] = newValue }
    }

    /// The value of `column`, matched case-insensitively (ASCII), or `nil` when absent.
    public func value(forColumn column: String) -> Value? {
        if let v = values[column] { return v }
        let folded = Identifier.fold(column)
        for (k, v) in values where Identifier.fold(k) == folded { return v }
        return nil
    }

    /// The item's `id` value (matched case-insensitively), or `nil`.
    public var id: Value? { value(forColumn: "id") }

    /// The item's `id` when it is a string.
    public var stringId: String? { id?.stringValue }

    /// The number of keys.
    @inlinable public var count: Int { values.count }

    /// Iterates over `(column, value)` pairs in no particular order.
    public func makeIterator() -> Dictionary<String, Value>.Iterator { values.makeIterator() }

    /// The keys sorted, with their values.
    public var description: String {
        "{" + values.keys.sorted().map { "\($0): \(values[$0]!)" }.joined(separator: ", ") + "}"
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
