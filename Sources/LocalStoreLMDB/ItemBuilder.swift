import LocalStore

/// Builds items straight from stored records, without an intermediate decoded row: each item is in
/// row form (``ItemLayout``) — one `[Value]` of the returned columns under a layout of their names
/// made once per builder and shared by every item it builds — so no dictionary is built, copied or
/// hashed per record, and every string is built once.
///
/// The items equal what ``RecordCodec/decode(_:schema:)`` followed by `ResolvedQuery.project` (or, for
/// every column, a read by id) gives: the same keys (the columns' defined spelling), the same values,
/// null for a column the record is too short to hold. The record is checked exactly as the decoder
/// checks it (``RecordCodec/forEachValue(_:schema:idIndex:_:)``), the columns not returned included,
/// so a damaged record is `corrupt` here too (`ItemBuilderTests`).
struct ItemBuilder: Sendable {
    let schema: TableSchema
    let idIndex: Int
    /// The returned columns' names, shared by every item; `nil` when they are not distinct (a
    /// projection naming a column twice), and the items are then built as dictionaries.
    let layout: ItemLayout?
    /// The returned columns' names, in item (row) order.
    private let names: [String]
    /// For each column of the schema, its position in an item's row; `-1` when not returned.
    private let slots: [Int]
    /// Whether the row is every column of the schema in schema order (values are appended as decoded).
    private let isWholeRow: Bool

    /// A builder of items holding the columns at `projection` (positions in `schema`).
    init(schema: TableSchema, projection: [Int]) {
        self.schema = schema
        idIndex = schema.idIndex
        var names: [String] = []
        names.reserveCapacity(projection.count)
        var slots = [Int](repeating: -1, count: schema.columns.count)
        for n in projection {
            let name = schema.columns[n].name
            // A column returned twice is one key, at its first position (as a dictionary keeps it once).
            if slots[n] < 0 {
                slots[n] = names.count
                names.append(name)
            }
        }
        self.names = names
        self.slots = slots
        layout = ItemLayout(names: names)
        isWholeRow = names.count == schema.columns.count && slots.enumerated().allSatisfy { $0.offset == $0.element }
    }

    /// A builder of whole rows (every column).
    init(schema: TableSchema) {
        self.init(schema: schema, projection: Array(schema.columns.indices))
    }

    /// A builder of the items `query` returns (its projected columns).
    init(_ query: ResolvedQuery) {
        self.init(schema: query.schema, projection: query.projection)
    }

    /// The item of a stored record; `corrupt` when the record does not decode.
    func item(_ record: UnsafeRawBufferPointer) throws -> Item {
        var row: [Value]
        if isWholeRow {
            // The decoder hands the stored columns over in order: append them, then null for the
            // columns a short record lacks.
            row = []
            row.reserveCapacity(names.count)
            _ = try RecordCodec.forEachValue(record, schema: schema, idIndex: idIndex) { _, v in row.append(v) }
            while row.count < names.count { row.append(.null) }
        } else {
            row = [Value](repeating: .null, count: names.count)
            let slots = self.slots
            _ = try RecordCodec.forEachValue(record, schema: schema, idIndex: idIndex) { n, v in
                let slot = slots[n]
                if slot >= 0 { row[slot] = v }
            }
        }
        if let layout { return Item(layout: layout, row: row) }
        var values: [String: Value] = Dictionary(minimumCapacity: names.count)
        for (name, value) in zip(names, row) { values[name] = value }
        return Item(values)
    }
}
