import Foundation
import LocalStore

/// The keys ``KVStore`` writes:
///
/// ```
/// 00 00                        catalog version (8 bytes, big-endian): bumped by every definition
/// 00 01 <folded table name>    a table's definition (JSON of ``KVTableRecord``)
/// 00 02                        commit counter (8 bytes, big-endian): bumped by every write transaction
/// 00 03 <table:4>             a table's row count (8 bytes, big-endian; absent: 0): the planner's statistics
/// 01 <table:4> <id key>        a row (RecordCodec)
/// 02 <table:4> <index:2> <components> <id key>   an index entry; its value is the id key
/// ```
///
/// Id keys are `KeyCodec.appendId` (NOCASE bytes for a string id, order-preserving 8 bytes for an
/// integer), components `KeyCodec.appendComponent` (complemented for a descending one,
/// `KeyCodec.appendNoCaseComponent` for a NOCASE one). A covering index's entry value is the id key's length
/// (varint), the id key and the row's record.
enum KVKeys {
    static let version: [UInt8] = [0x00, 0x00]
    static let tablePrefix: [UInt8] = [0x00, 0x01]
    /// The commit counter (8 bytes, big-endian): bumped by every write transaction, so that a store
    /// object notices the commits of others on the same engine.
    static let commits: [UInt8] = [0x00, 0x02]

    static func table(_ folded: String) -> [UInt8] { tablePrefix + Array(folded.utf8) }

    /// A table's row count (8 bytes, big-endian; absent: no rows), kept by every write: the planner's
    /// statistics, with the index entries it counts.
    static func rowCount(_ table: UInt32) -> [UInt8] { [0x00, 0x03] + rows(table).dropFirst() }

    static func rows(_ table: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        appendRows(table, into: &out)
        return out
    }

    /// Appends ``rows(_:)``'s bytes: 01 and the table number (4 bytes, big-endian).
    static func appendRows(_ table: UInt32, into out: inout [UInt8]) {
        out.append(0x01)
        KeyCodec.appendBigEndian(width: table, into: &out)
    }

    /// ``rows(_:)`` followed by `idKey`, in one allocation.
    static func row(_ table: UInt32, idKey: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(5 + idKey.count)
        appendRows(table, into: &out)
        out.append(contentsOf: idKey)
        return out
    }

    /// ``row(_:idKey:)`` of `id`'s key, built in one buffer.
    static func row(_ table: UInt32, id: Value) -> [UInt8] {
        var out: [UInt8] = []
        // The prefix, and a string id's bytes with the longest NOCASE ending (`00 01` and 8 bytes of length).
        if case .string(let s) = id { out.reserveCapacity(15 + s.utf8.count) } else { out.reserveCapacity(16) }
        appendRows(table, into: &out)
        KeyCodec.appendId(id, into: &out)
        return out
    }

    /// Calls `body` with ``row(_:id:)``'s bytes built in stack memory, or with `nil` for an id whose key is
    /// longer than ``KeyCodec/prefixLimit`` allows there (the caller builds it in an array).
    static func withRowKey<R>(_ table: UInt32, id: Value, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        try KeyCodec.withIdKey(id) { idKey in
            guard let idKey, let source = idKey.baseAddress else { return try body(nil) }
            return try withUnsafeTemporaryAllocation(byteCount: 5 + idKey.count, alignment: 8) { buffer in
                guard let base = buffer.baseAddress else { return try body(nil) }
                base.storeBytes(of: 0x01, as: UInt8.self)
                base.storeBytes(of: table.bigEndian, toByteOffset: 1, as: UInt32.self)
                (base + 5).copyMemory(from: source, byteCount: idKey.count)
                return try body(UnsafeRawBufferPointer(start: base, count: 5 + idKey.count))
            }
        }
    }

    static func index(_ table: UInt32, _ index: UInt16) -> [UInt8] {
        var out: [UInt8] = []
        appendIndex(table, index, into: &out)
        return out
    }

    /// Appends ``index(_:_:)``'s bytes: 02, the table number (4 bytes) and the index number (2 bytes), big-endian.
    static func appendIndex(_ table: UInt32, _ index: UInt16, into out: inout [UInt8]) {
        out.append(0x02)
        KeyCodec.appendBigEndian(width: table, into: &out)
        KeyCodec.appendBigEndian(width: index, into: &out)
    }

}

/// One physical index: the positions of its columns and their directions, under the name
/// `QueryPlanReporting` reports (a column index by its column, a compound index by its resolved name).
struct KVIndexSpec: Codable, Hashable, Sendable {
    var number: UInt16
    var name: String
    var columns: [Int]
    var descending: [Bool]
    /// Whether each entry holds the row's record after its id key (``KVTable/entryValue(_:idKey:record:)``),
    /// so that a query through the index reads no row.
    var covering: Bool? = nil
    /// Per component, whether it holds a string's NOCASE key (`KeyCodec.appendNoCaseComponent`) rather than the string:
    /// such a component answers equalities ignoring case (and case-sensitive ones as a superset), never
    /// ranges or sorts. `nil`: none does.
    var noCase: [Bool]? = nil
    /// How the NOCASE components are encoded: ``noCaseFormat`` (`KeyCodec.appendNoCaseComponent`, as LMDB
    /// and the planner encode them); `nil` in a store written before, whose entries held the NOCASE key as
    /// a string component (rebuilt when the store opens).
    var noCaseFormat: Int? = nil

    /// The current ``noCaseFormat``.
    static let noCaseFormat = 2

    /// Whether component `i` holds NOCASE keys.
    func isNoCase(_ i: Int) -> Bool { noCase.map { i < $0.count && $0[i] } ?? false }

    /// Appends component `i` of an entry, holding `value`: ascending, descending (complemented) or NOCASE.
    func appendComponent(_ value: Value, _ i: Int, into key: inout [UInt8]) {
        if isNoCase(i) {
            KeyCodec.appendNoCaseComponent(value, into: &key)
        } else if descending[i] {
            KeyCodec.appendDescendingComponent(value, into: &key)
        } else {
            KeyCodec.appendComponent(value, into: &key)
        }
    }

    /// The indexes KVStore keeps on the system tables (LMDB's, except that the config table's leads with the
    /// table ignoring case, the way the delta-token lookups compare it): the operations table's
    /// `itemOperations` (table, itemId ignoring case: `pendingOperations(table:itemId:)`, the collapse rules'
    /// lookup on every enqueue), the errors table's `operationId` (a push's errors, found and removed per
    /// operation) and the config table's `deltaTokens` (table ignoring case, keyType, key: a pull's delta tokens), numbered
    /// `number`; `nil` for any other table, or a system table without the columns.
    static func system(_ schema: TableSchema, names: SystemTableNames, number: UInt16) -> KVIndexSpec? {
        let (name, columns, noCase): (String, [String], [Bool]?)
        switch Identifier.fold(schema.name) {
        case Identifier.fold(names.operations): (name, columns, noCase) = ("itemOperations", ["table", "itemId"], [false, true])
        case Identifier.fold(names.errors): (name, columns, noCase) = ("operationId", ["operationId"], nil)
        case Identifier.fold(names.config): (name, columns, noCase) = ("deltaTokens", ["table", "keyType", "key"], [true, false, false])
        default: return nil
        }
        let positions = columns.compactMap { schema.index(ofColumn: $0) }
        guard positions.count == columns.count else { return nil }
        return KVIndexSpec(
            number: number, name: name, columns: positions, descending: positions.map { _ in false }, noCase: noCase,
            noCaseFormat: noCase == nil ? nil : noCaseFormat)
    }
}

/// A table's definition as stored.
struct KVTableRecord: Codable, Sendable {
    struct Key: Codable, Sendable {
        var column: String
        var descending: Bool
    }
    struct Index: Codable, Sendable {
        var name: String?
        var keys: [Key]
    }

    var number: UInt32
    var name: String
    var columns: [Column]
    var indexes: [Index]
    var specs: [KVIndexSpec]

    init(number: UInt32, schema: TableSchema, specs: [KVIndexSpec]) {
        self.number = number
        name = schema.name
        columns = schema.columns
        indexes = schema.indexes.map { Index(name: $0.name, keys: $0.keys.map { Key(column: $0.column, descending: $0.isDescending) }) }
        self.specs = specs
    }

    var schema: TableSchema {
        TableSchema(
            name: name, columns: columns,
            indexes: indexes.map { TableIndex(name: $0.name, $0.keys.map { TableIndex.Key($0.column, $0.descending ? .descending : .ascending) }) })
    }
}

/// A table of the catalog: its definition, schema and indexes (immutable; a class, so that a lookup
/// hands out one reference instead of copying every field).
final class KVTable: Sendable {
    let record: KVTableRecord
    let schema: TableSchema
    /// Builds the items of reads by id (every column) from records.
    let wholeRows: RecordItemBuilder
    /// The indexes as the planner sees them, in the order of ``specs`` (each one's `slot` is its position).
    let indexes: [IndexDefinition]
    /// The id column's type.
    let idType: ColumnType

    init(_ record: KVTableRecord) {
        self.record = record
        let schema = record.schema
        self.schema = schema
        idType = schema.idType
        wholeRows = RecordItemBuilder(schema: schema)
        indexes = record.specs.enumerated().map { slot, spec in
            let components = spec.columns.indices.map {
                IndexDefinition.Component(column: spec.columns[$0], noCase: spec.isNoCase($0), descending: spec.descending[$0])
            }
            // A compound index of the schema reports its resolved name; a column index, its column's.
            let compound = schema.indexes.first { index in
                guard index.resolvedName == spec.name, let positions = schema.positions(of: index) else { return false }
                return positions.map(\.column) == spec.columns && positions.map(\.descending) == spec.descending
            }
            return IndexDefinition(database: spec.name, components: components, compound: compound, slot: slot)
        }
    }

    var number: UInt32 { record.number }

    /// `TableSchema.checkId(_:)`, without copying the schema for the commonest ids (a string or an integer
    /// of the id column's type).
    @inline(__always) func checkId(_ id: Value) throws {
        if !TableSchema.isPlainId(id, ofType: idType) { try schema.checkId(id) }
    }
    var specs: [KVIndexSpec] { record.specs }

    /// The physical indexes `schema` needs: one per indexed column (the id excepted), one per compound index.
    static func wantedSpecs(_ schema: TableSchema) -> [(name: String, columns: [Int], descending: [Bool])] {
        var out: [(String, [Int], [Bool])] = []
        for (n, c) in schema.columns.enumerated() where c.indexed && n != schema.idIndex { out.append((c.name, [n], [false])) }
        for index in schema.indexes {
            guard let positions = schema.positions(of: index) else { continue }
            out.append((index.resolvedName, positions.map(\.column), positions.map(\.descending)))
        }
        return out
    }

    func rowKey(_ id: Value) -> [UInt8] { KVKeys.row(number, id: id) }

    /// The entry of `row` in `spec`: its key, whose value is the id key.
    func entryKey(_ spec: KVIndexSpec, _ row: [Value], idKey: [UInt8]) -> [UInt8] {
        // One allocation in the common case: the prefix, each component (a tag, a string's bytes and its
        // terminator, or 8 bytes) and the id key.
        var capacity = 7 + idKey.count
        for column in spec.columns {
            switch row[column] {
            case .string(let s): capacity += s.utf8.count + 3
            case .binary(let b): capacity += b.count + 3
            default: capacity += 9
            }
        }
        var key: [UInt8] = []
        key.reserveCapacity(capacity)
        KVKeys.appendIndex(number, spec.number, into: &key)
        for (i, column) in spec.columns.enumerated() { spec.appendComponent(row[column], i, into: &key) }
        key.append(contentsOf: idKey)
        return key
    }

    /// The value of an entry of `spec`: the id key, or for a covering index the id key's length (varint),
    /// the id key and the row's record.
    func entryValue(_ spec: KVIndexSpec, idKey: [UInt8], record: [UInt8]) -> [UInt8] {
        guard spec.covering == true else { return idKey }
        var value: [UInt8] = []
        value.reserveCapacity(idKey.count + record.count + 3)
        RecordCodec.appendVarint(UInt64(idKey.count), into: &value)
        value.append(contentsOf: idKey)
        value.append(contentsOf: record)
        return value
    }

    /// Calls `body` with the record of the row an index entry of `spec` names (`value`, lent by a
    /// scan): a covering entry's own, else the row's, which `reader` lends (its key built in `rowKey`).
    func withEntryRecord<R>(
        _ spec: KVIndexSpec, _ value: UnsafeRawBufferPointer, reader: some OrderedKeyValueReader, rowKey: inout [UInt8],
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        guard spec.covering == true else {
            // The row key is built in the caller's buffer: no allocation per entry of a walk.
            rowKey.removeAll(keepingCapacity: true)
            KVKeys.appendRows(number, into: &rowKey)
            rowKey.append(contentsOf: value)
            return try reader.withValue(rowKey) { record in
                guard let record else {
                    throw LocalStoreError(.corrupt, "the store is damaged: an index entry of table '\(schema.name)' names no row", table: schema.name)
                }
                return try body(record)
            }
        }
        var reader = ByteReader(value)
        let length: Int
        do { length = try reader.length() } catch {
            throw LocalStoreError(.corrupt, "the store is damaged: an entry of index '\(spec.name)' of table '\(schema.name)' is malformed", table: schema.name)
        }
        return try body(UnsafeRawBufferPointer(rebasing: value[(reader.offset + length)...]))
    }

    func encode(_ row: [Value]) -> [UInt8] { RecordCodec.encode(row, rowId: 0, layout: .tagsFirst) }

    func decode(_ bytes: [UInt8]) throws -> [Value] { try RecordCodec.decode(bytes, schema: schema).row }

    func decode(_ bytes: UnsafeRawBufferPointer) throws -> [Value] { try RecordCodec.decode(bytes, schema: schema).row }
}

/// The definitions of all tables, by folded name, and the version they were read at.
struct KVCatalog: Sendable {
    var version: UInt64 = 0
    /// The tables by folded name.
    var tables: [String: KVTable] = [:] {
        didSet { declared = Dictionary(tables.values.map { ($0.schema.name, $0) }, uniquingKeysWith: { a, _ in a }) }
    }
    /// The tables by the names they were defined with: a call naming a table as defined (the usual case)
    /// finds it without folding the name. A hit counts only when its bytes are the name's: `String`'s `==`
    /// is canonical equivalence, under which a KELVIN SIGN (U+212A) is a `K`.
    private var declared: [String: KVTable] = [:]
    /// The plans of the queries read with this catalog (shared by its copies; keyed by version too).
    var plans = KVPlanCache()

    /// The table named `name` (compared as identifiers are: ASCII case ignored), or `nil`.
    func lookup(_ name: String) -> KVTable? {
        if let t = declared[name], Identifier.isSameSpelling(t.schema.name, name) { return t }
        return tables[Identifier.fold(name)]
    }

    func table(_ name: String) throws -> KVTable {
        guard let t = lookup(name) else { throw LocalStoreError.unknownTable(name) }
        return t
    }

    /// The 8-byte big-endian number under `key` (the catalog version, the commit counter); 0 when absent.
    static func readNumber(_ key: [UInt8], _ reader: some OrderedKeyValueReader) throws -> UInt64 {
        try reader.withValue(key) { bytes in bytes.map(KeyCodec.readBigEndian) ?? 0 }
    }

    static func writeNumber(_ value: UInt64, _ key: [UInt8], _ writer: some OrderedKeyValueWriter) throws {
        var bytes: [UInt8] = []
        KeyCodec.appendBigEndian(value, into: &bytes)
        try writer.put(key, bytes)
    }

    /// The number the next new table gets.
    var nextTableNumber: UInt32 { (tables.values.map(\.number).max() ?? 0) + 1 }

    static func load(_ reader: some OrderedKeyValueReader) throws -> KVCatalog {
        var catalog = KVCatalog(version: try readNumber(KVKeys.version, reader))
        let decoder = JSONDecoder()
        try reader.scan(from: KVKeys.tablePrefix, to: KVKeyRange.end(of: KVKeys.tablePrefix), reverse: false) { _, value in
            let record: KVTableRecord
            do {
                record = try decoder.decode(KVTableRecord.self, from: Data(value))
            } catch {
                throw LocalStoreError(.corrupt, "the store is damaged: a table definition does not decode (\(error))")
            }
            for spec in record.specs {
                let width = spec.columns.count
                guard width > 0, spec.descending.count == width, spec.noCase.map({ $0.count == width }) ?? true,
                    spec.columns.allSatisfy({ $0 >= 0 && $0 < record.columns.count })
                else {
                    throw LocalStoreError(
                        .corrupt, "the store is damaged: index '\(spec.name)' of table '\(record.name)' has a malformed definition",
                        table: record.name)
                }
            }
            catalog.tables[Identifier.fold(record.name)] = KVTable(record)
            return true
        }
        return catalog
    }

    static func write(_ record: KVTableRecord, version: UInt64, _ writer: some OrderedKeyValueWriter) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data: Data
        do { data = try encoder.encode(record) } catch { throw LocalStoreError(.internal, "cannot encode the definition of '\(record.name)': \(error)") }
        try writer.put(KVKeys.table(Identifier.fold(record.name)), Array(data))
        try writeNumber(version, KVKeys.version, writer)
    }
}

/// The plans of recent queries, kept for the next read of the same query in the same catalog generation
/// (at most ``capacity``; emptied when full or when a newer generation keeps one). LMDB keeps one per
/// environment, ``KVStore`` one per loaded catalog. A query whose equal queries may differ from it
/// (``Query/isPlanCacheable(_:)``: non-ASCII strings, json, -0, NaN) is never kept nor looked up.
package struct QueryPlanCache<Entry> {
    package static var capacity: Int { 64 }

    private var generation: UInt64 = 0
    private var entries: [Query: Entry] = [:]

    package init() {}

    /// The entry of `query` kept in `generation`, or `nil`. A query that is not ``Query/isPlanCacheable(_:)``
    /// gets `nil` too: it may equal a kept query (`==` on strings is canonical equivalence, `-0 == 0`)
    /// whose answer is not its own.
    package func entry(_ query: Query, generation: UInt64) -> Entry? {
        guard generation == self.generation, !entries.isEmpty, Query.isPlanCacheable(query) else { return nil }
        return entries[query]
    }

    /// Keeps `entry` for `query` in `generation` (nothing, for an older generation than the one kept, or a
    /// query that is not ``Query/isPlanCacheable(_:)``).
    package mutating func keep(_ entry: Entry, for query: Query, generation: UInt64) {
        guard Query.isPlanCacheable(query) else { return }
        if generation != self.generation {
            guard generation > self.generation else { return }  // an older snapshot's catalog
            self.generation = generation
            entries.removeAll(keepingCapacity: true)
        }
        if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
        entries[query] = entry
    }
}

/// ``KVStore``'s plans of one loaded catalog: the resolved query, its plan and an exact walk's item builder.
final class KVPlanCache: Sendable {
    struct Entry: Sendable {
        let resolved: ResolvedQuery
        /// `nil` when the planner counted rows or entries to choose it: then it is made again.
        let plan: QueryPlan?
        /// The builder of an exact walk's items.
        let items: RecordItemBuilder?
    }

    private let cache = LockedValue(QueryPlanCache<Entry>())

    /// The entry of `query` at `version`, made by `make` when none is kept.
    func entry(_ query: Query, version: UInt64, _ make: () throws -> Entry) rethrows -> Entry {
        if let found = cache.withLock({ $0.entry(query, generation: version) }) { return found }
        let made = try make()
        cache.withLock { $0.keep(made, for: query, generation: version) }
        return made
    }
}

extension Query {
    /// Whether a cached entry of `query` can serve every query equal to it. `Query` equality compares
    /// strings by Unicode canonical equivalence, while names and literals are resolved and encoded as
    /// bytes: only queries whose strings are all ASCII (where the two agree) and that hold no json
    /// literal (json objects compare their keys as strings) are kept. Neither are queries with a
    /// negative zero (equal to zero, but not the same value to every function) or a NaN (never equal).
    package static func isPlanCacheable(_ query: Query) -> Bool {
        guard isASCII(query.table), query.sort.allSatisfy({ isASCII($0.field) }) else { return false }
        if let select = query.select, !select.allSatisfy(isASCII) { return false }
        return query.predicate.map(isCacheable) ?? true
    }

    private static func isASCII(_ s: String) -> Bool { s.utf8.allSatisfy { $0 < 0x80 } }

    /// Not NaN and not negative zero: `==` is then the identity of the number.
    private static func isPlain(_ d: Double) -> Bool { !d.isNaN && !(d == 0 && d.sign == .minus) }

    private static func isCacheable(_ v: Value) -> Bool {
        switch v {
        case .string(let s): return isASCII(s)
        case .json: return false
        case .double(let d): return isPlain(d)
        case .date(let d): return isPlain(d.timeIntervalSinceReferenceDate)
        default: return true
        }
    }

    private static func isCacheable(_ p: QueryPredicate) -> Bool {
        switch p {
        case .true, .false: return true
        case .and(let ps), .or(let ps): return ps.allSatisfy(isCacheable)
        case .not(let p): return isCacheable(p)
        case .compare(let l, _, let r, _), .string(_, let l, let r, _): return isCacheable(l) && isCacheable(r)
        case .isNull(let e), .isNotNull(let e): return isCacheable(e)
        case .in(let e, let vs): return isCacheable(e) && vs.allSatisfy(isCacheable)
        case .between(let e, let a, let b): return isCacheable(e) && isCacheable(a) && isCacheable(b)
        }
    }

    private static func isCacheable(_ e: QueryExpression) -> Bool {
        switch e {
        case .field(let name): return isASCII(name)
        case .literal(let v): return isCacheable(v)
        case .dateOnly(let d): return isCacheable(.date(d))
        case .arithmetic(_, let l, let r): return isCacheable(l) && isCacheable(r)
        case .toLower(let e), .toUpper(let e), .length(let e): return isCacheable(e)
        case .function(_, let args): return args.allSatisfy(isCacheable)
        }
    }
}
