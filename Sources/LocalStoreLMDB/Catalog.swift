import CLMDB
import Foundation
import LocalStore
import LocalStoreKV


/// A table as stored in the catalog: its schema, its primary database and its indexes.
struct TableDefinition: Sendable {
    var schema: TableSchema
    /// The primary database: stored id key → record.
    var database: String
    var indexes: [IndexDefinition]

    static func databaseName(table: String) -> String { "t:" + Identifier.fold(table) }

    static func indexName(table: String, components: [IndexDefinition.Component]) -> String {
        "i:" + Identifier.fold(table) + ":" + components.map { String($0.column) + ($0.noCase ? "c" : "") }.joined(separator: ",")
    }

    /// Every database the table uses.
    var databases: [String] { [database] + indexes.map(\.database) }

    /// A user table: one single-column index per indexed column (the id is indexed by the primary
    /// database itself).
    static func user(_ schema: TableSchema) -> TableDefinition {
        var def = TableDefinition(schema: schema, database: databaseName(table: schema.name), indexes: [])
        def.addMissingColumnIndexes()
        return def
    }

    /// Adds a one-column index for every indexed column that has none yet, and a database for every
    /// compound index of the schema that has none yet.
    mutating func addMissingColumnIndexes() {
        for (n, c) in schema.columns.enumerated() where c.indexed && n != schema.idIndex {
            let components = [IndexDefinition.Component(column: n, noCase: false)]
            if indexes.contains(where: { $0.compound == nil && $0.components == components }) { continue }
            indexes.append(IndexDefinition(database: TableDefinition.indexName(table: schema.name, components: components), components: components))
        }
        for index in schema.indexes {
            if indexes.contains(where: { $0.compound.map { $0.hasSameKeys(as: index) } ?? false }) { continue }
            guard let positions = schema.positions(of: index) else { continue }  // validated before
            let components = positions.map { IndexDefinition.Component(column: $0.column, noCase: false, descending: $0.descending) }
            indexes.append(
                IndexDefinition(database: TableDefinition.compoundName(table: schema.name, components: components), components: components, compound: index))
        }
    }

    /// `x:<table>:<column>[d],...`: a compound index's database (`d` marks a descending component).
    static func compoundName(table: String, components: [IndexDefinition.Component]) -> String {
        "x:" + Identifier.fold(table) + ":" + components.map { String($0.column) + ($0.descending ? "d" : "") }.joined(separator: ",")
    }

    // MARK: Encoding

    /// Version 1: column indexes only. Version 2 (written only when the table has a compound index,
    /// so other tables stay readable by older code): a component flag byte with bit 0 NOCASE and bit 1
    /// descending, and after each index's components a byte 1 for a compound index followed by a
    /// name-present byte and the name, or 0.
    static let formatVersion: UInt8 = 1
    static let compoundFormatVersion: UInt8 = 2

    static func typeCode(_ t: ColumnType) -> UInt8 {
        switch t {
        case .string: return 0
        case .integer: return 1
        case .double: return 2
        case .boolean: return 3
        case .date: return 4
        case .binary: return 5
        case .json: return 6
        }
    }

    static func columnType(_ code: UInt8) -> ColumnType? {
        switch code {
        case 0: return .string
        case 1: return .integer
        case 2: return .double
        case 3: return .boolean
        case 4: return .date
        case 5: return .binary
        case 6: return .json
        default: return nil
        }
    }

    func encoded() -> [UInt8] {
        let v2 = indexes.contains { $0.compound != nil || $0.components.contains(where: \.descending) }
        var out: [UInt8] = [v2 ? TableDefinition.compoundFormatVersion : TableDefinition.formatVersion]
        RecordCodec.appendBytes(schema.name.utf8, into: &out)
        RecordCodec.appendVarint(UInt64(schema.columns.count), into: &out)
        for c in schema.columns {
            RecordCodec.appendBytes(c.name.utf8, into: &out)
            out.append(TableDefinition.typeCode(c.type))
            out.append(c.indexed ? 1 : 0)
        }
        RecordCodec.appendBytes(database.utf8, into: &out)
        RecordCodec.appendVarint(UInt64(indexes.count), into: &out)
        for index in indexes {
            RecordCodec.appendBytes(index.database.utf8, into: &out)
            RecordCodec.appendVarint(UInt64(index.components.count), into: &out)
            for c in index.components {
                RecordCodec.appendVarint(UInt64(c.column), into: &out)
                out.append((c.noCase ? 1 : 0) | (c.descending ? 2 : 0))
            }
            if v2 {
                if let compound = index.compound {
                    out.append(1)
                    if let name = compound.name {
                        out.append(1)
                        RecordCodec.appendBytes(name.utf8, into: &out)
                    } else {
                        out.append(0)
                    }
                } else {
                    out.append(0)
                }
            }
        }
        return out
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> TableDefinition {
        var r = ByteReader(bytes)
        do {
            let version = try r.byte()
            guard version == formatVersion || version == compoundFormatVersion else {
                throw ByteReader.Failure("unknown table definition version")
            }
            let v2 = version == compoundFormatVersion
            let name = try r.string()
            guard Identifier.isValid(name) else { throw ByteReader.Failure("invalid table name") }
            let count = try r.varint()
            guard count >= 1, count <= UInt64(TableSchema.maximumColumnCount) else { throw ByteReader.Failure("bad column count") }
            var columns: [Column] = []
            var seen = Set<String>()
            for _ in 0..<Int(count) {
                let columnName = try r.string()
                guard Identifier.isValid(columnName), seen.insert(Identifier.fold(columnName)).inserted else {
                    throw ByteReader.Failure("invalid column name")
                }
                guard let type = columnType(try r.byte()) else { throw ByteReader.Failure("unknown column type") }
                let indexed = try r.byte()
                guard indexed <= 1 else { throw ByteReader.Failure("bad index flag") }
                columns.append(Column(columnName, type, indexed: indexed == 1))
            }
            guard seen.contains("id") else { throw ByteReader.Failure("table without id") }
            let columnsOnly = TableSchema(name: name, columns: columns)
            guard columnsOnly.idType == .string || columnsOnly.idType == .integer else { throw ByteReader.Failure("bad id type") }
            let database = try r.string()
            let indexCount = try r.varint()
            guard indexCount <= UInt64(r.remaining) else { throw ByteReader.Failure("bad index count") }
            var indexes: [IndexDefinition] = []
            for _ in 0..<Int(indexCount) {
                let db = try r.string()
                let n = try r.varint()
                guard n >= 1, n <= 16 else { throw ByteReader.Failure("bad component count") }
                var components: [IndexDefinition.Component] = []
                for _ in 0..<Int(n) {
                    let column = try r.varint()
                    guard column < UInt64(columns.count) else { throw ByteReader.Failure("index column out of range") }
                    let flags = try r.byte()
                    guard flags <= (v2 ? 3 : 1) else { throw ByteReader.Failure("bad component flag") }
                    let noCase = flags & 1 != 0
                    if noCase && columns[Int(column)].type != .string { throw ByteReader.Failure("NOCASE component on a non-string column") }
                    components.append(.init(column: Int(column), noCase: noCase, descending: flags & 2 != 0))
                }
                var compound: TableIndex? = nil
                if v2 {
                    let kind = try r.byte()
                    guard kind <= 1 else { throw ByteReader.Failure("bad index kind") }
                    if kind == 1 {
                        let hasName = try r.byte()
                        guard hasName <= 1 else { throw ByteReader.Failure("bad index name flag") }
                        var indexName: String? = nil
                        if hasName == 1 {
                            let n = try r.string()
                            guard Identifier.isValid(n) else { throw ByteReader.Failure("invalid index name") }
                            indexName = n
                        }
                        guard !components.contains(where: \.noCase) else { throw ByteReader.Failure("NOCASE component in a compound index") }
                        compound = TableIndex(
                            name: indexName,
                            components.map { TableIndex.Key(columns[$0.column].name, $0.descending ? .descending : .ascending) })
                    }
                }
                indexes.append(IndexDefinition(database: db, components: components, compound: compound))
            }
            guard r.isAtEnd else { throw ByteReader.Failure("trailing bytes") }
            let schema = TableSchema(name: name, columns: columns, indexes: indexes.compactMap(\.compound))
            guard (try? schema.validateIndexes()) != nil else { throw ByteReader.Failure("invalid compound index") }
            return TableDefinition(schema: schema, database: database, indexes: indexes)
        } catch let f as ByteReader.Failure {
            throw LMDBErrors.corrupt("a table definition is malformed (\(f.what))")
        }
    }
}

/// The tables of an environment as seen by one snapshot.
struct Catalog: Sendable {
    /// Bumped by every committed schema change; a cached catalog is valid while it matches.
    var generation: UInt64
    /// By folded table name.
    var tables: [String: TableDefinition] {
        didSet { byDefinedName = Catalog.byDefinedName(tables) }
    }
    /// The same definitions by their defined spelling: a name spelled as defined (the common case) is found
    /// without folding it (which allocates a string for a name with capitals).
    private var byDefinedName: [String: TableDefinition]

    init(generation: UInt64, tables: [String: TableDefinition]) {
        self.generation = generation
        self.tables = tables
        byDefinedName = Catalog.byDefinedName(tables)
    }

    private static func byDefinedName(_ tables: [String: TableDefinition]) -> [String: TableDefinition] {
        Dictionary(tables.values.map { ($0.schema.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func table(_ name: String) -> TableDefinition? {
        // The defined spelling's bytes, not `String`'s `==` (canonical equivalence: a KELVIN SIGN is a `K`).
        if let t = byDefinedName[name], Identifier.isSameSpelling(t.schema.name, name) { return t }
        return tables[Identifier.fold(name)]
    }
}

/// Keys of the `meta` database.
enum MetaKey {
    static let format = Array("format".utf8)
    static let generation = Array("generation".utf8)
    static let nextRowId = Array("nextRowId".utf8)
    static let tablePrefix = Array("table:".utf8)
    static func table(_ name: String) -> [UInt8] { tablePrefix + Array(Identifier.fold(name).utf8) }

    /// `LSLMDB` followed by the big-endian format version.
    static let magic = Array("LSLMDB".utf8)
    /// The newest store format this version reads and writes (docs/format.md): 1 — tables, columns,
    /// column indexes, records of version 1 (0.1.0; table definitions of version 1); 2 — also compound
    /// indexes (definitions of version 2); 3 — records of version 2 (tags first); 4 — index entries
    /// whose whole key ends in the row's primary key are stored with an empty value ("bare entries":
    /// the key already names the row). A new store is created as format 4 and writes version-2 records
    /// and bare entries; a store of format 3 keeps writing entries with the primary key as their value
    /// (so it stays readable by the builds that wrote it). Entries of every format are read. A store of format 1 keeps writing version-1
    /// records (so it stays readable by 0.1.0) and becomes format 2 in the transaction that first
    /// stores a version-2 definition; a store of format 2 keeps writing version-1 records too. A
    /// store of a higher format is refused with `versionMismatch`.
    static let formatVersion: UInt32 = 4
    /// The format of a new store.
    static let initialFormatVersion: UInt32 = 4
    /// The format a store needs once a table definition has version 2.
    static let compoundIndexFormatVersion: UInt32 = 2
    /// The first format whose records are of version 2.
    static let tagsFirstRecordsFormatVersion: UInt32 = 3

    /// The first format whose whole-key index entries are bare (empty values).
    static let bareIndexEntriesFormatVersion: UInt32 = 4

    /// Whether a store of format `format` writes bare index entries.
    static func bareIndexEntries(format: UInt64) -> Bool { format >= UInt64(bareIndexEntriesFormatVersion) }

    /// How a store of format `format` writes its records.
    static func recordLayout(format: UInt64) -> RecordCodec.Layout {
        format >= UInt64(tagsFirstRecordsFormatVersion) ? .tagsFirst : .inline
    }

    static func formatValue(_ version: UInt32) -> [UInt8] {
        var out = magic
        KeyCodec.appendBigEndian(UInt64(version), into: &out)
        return out
    }

    /// The version in a `format` value; `nil` when the value is not one.
    static func version(of value: UnsafeRawBufferPointer) -> UInt64? {
        guard value.count == magic.count + 8, value.prefix(magic.count).elementsEqual(magic) else { return nil }
        return value.suffix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The name of the catalog database.
    static let database = "meta"
}

/// What a read by id of one table needs, resolved once per catalog generation and table spelling: the
/// definition, the primary database's handle and an ``RecordItemBuilder`` of whole rows (every column mapped
/// to its position in the item's row, under one shared `ItemLayout`), so that a read decodes the record
/// straight into the item without hashing a column name.
final class ReadByIdPlan: Sendable {
    let generation: UInt64
    /// The table name as the caller spelled it.
    let name: String
    let table: TableDefinition
    let dbi: MDB_dbi
    let items: RecordItemBuilder
    /// The type of the id column.
    let idType: ColumnType

    init(generation: UInt64, name: String, table: TableDefinition, dbi: MDB_dbi) {
        self.generation = generation
        self.name = name
        self.table = table
        self.dbi = dbi
        items = RecordItemBuilder(schema: table.schema)
        idType = table.schema.idType
    }

    /// Whether a read of `id` must be looked up through a ``TxnContext`` (``read(_:id:spare:)`` cannot
    /// find it): the id's key is longer than a stored key's prefix (docs/lmdb.md, "Long keys").
    static func needsContext(_ id: Value) -> Bool {
        switch id {
        case .int: return false
        case .string(let s) where s.utf8.count <= KeyCodec.prefixLimit - 10: return false
        default: break
        }
        var key: [UInt8] = []
        KeyCodec.appendId(id, into: &key)
        return key.count > KeyCodec.prefixLimit
    }

    /// The item stored under `id` in `txn`'s snapshot; `nil` when there is none or when the id's key is
    /// too long to be looked up directly (then ``needsContext(_:)`` is true). Throws the `typeMismatch` of
    /// `TableSchema.checkId` for an id of another type. The values go into `spare` when it is free.
    func read(_ txn: OpaquePointer, id: Value, spare: inout ValueRows?) throws -> Item? {
        if !TableSchema.isPlainId(id, ofType: idType) { try items.schema.checkId(id) }
        // The key is built in stack memory (no array per read).
        return try KeyCodec.withIdKey(id) { k in
            guard let k else { return nil }
            var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var dv = MDB_val()
            let rc = mdb_get(txn, dbi, &kv, &dv)
            if rc == MDB_NOTFOUND { return nil }
            try LMDBErrors.check(rc, "cannot read")
            return try items.item(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size), reusing: &spare)
        }
    }
}

extension QueryPlanner {
    /// The planner of `query` on a table of the catalog.
    init(table: TableDefinition, query: ResolvedQuery, statistics: PlanStatistics? = nil) {
        self.init(schema: table.schema, indexes: table.indexes, query: query, statistics: statistics)
    }
}
