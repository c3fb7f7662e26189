import LocalStore

/// Builds items straight from stored records, without an intermediate `[Value]` row: a template
/// dictionary (every returned column mapped to null, hashed once when the builder is made) is copied
/// per record and each decoded value is stored at its column's precomputed position in it — no
/// name is hashed per record and every string is built once.
///
/// The items equal what ``RecordCodec/decode(_:schema:)`` followed by `ResolvedQuery.project` (or, for
/// every column, a read by id) gives: the same keys (the columns' defined spelling), the same values,
/// null for a column the record is too short to hold. The record is checked exactly as the decoder
/// checks it (``RecordCodec/forEachValue(_:schema:idIndex:_:)``), the columns not returned included,
/// so a damaged record is `corrupt` here too (`ItemBuilderTests`).
struct ItemBuilder: Sendable {
    let schema: TableSchema
    let idIndex: Int
    private let template: [String: Value]
    /// For each column of the schema, where its value goes in ``template``; `nil` when not returned.
    private let slots: [Dictionary<String, Value>.Index?]

    /// A builder of items holding the columns at `projection` (positions in `schema`).
    init(schema: TableSchema, projection: [Int]) {
        self.schema = schema
        idIndex = schema.idIndex
        var template: [String: Value] = Dictionary(minimumCapacity: projection.count)
        for n in projection { template[schema.columns[n].name] = .null }
        var slots = [Dictionary<String, Value>.Index?](repeating: nil, count: schema.columns.count)
        for n in projection { slots[n] = template.index(forKey: schema.columns[n].name) }
        self.template = template
        self.slots = slots
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
        var values = template
        let slots = self.slots
        _ = try RecordCodec.forEachValue(record, schema: schema, idIndex: idIndex) { n, v in
            if let slot = slots[n] { values.values[slot] = v }
        }
        return Item(values)
    }
}
