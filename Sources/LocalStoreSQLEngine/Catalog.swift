import LocalStore

/// Names of the SQL objects the engine creates.
///
/// User tables keep their defined name as SQL table name, so raw SQL reads naturally — except names
/// starting with `sqlite_` (reserved by SQLite), which get the prefix `localstore:`. Every object the
/// engine adds on its own (metadata tables, indexes) has a `:` in its name: user identifiers
/// (`^[A-Za-z_][A-Za-z0-9_]*$`) cannot contain one, so no user table can ever collide with them.
enum SQLNames {
    static let metaTable = "localstore:meta"
    static let schemaTable = "localstore:schema"
    static let internalPrefix = "localstore:"

    /// `"name"` with embedded quotes doubled.
    static func quote(_ name: String) -> String {
        if !name.utf8.contains(UInt8(ascii: "\"")) { return "\"" + name + "\"" }
        return "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// `'text'`, a string literal, with embedded quotes doubled.
    static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// The SQL table name for the user-visible table `name`.
    static func table(for name: String) -> String {
        Identifier.fold(name).hasPrefix("sqlite_") ? internalPrefix + name : name
    }

    /// The name of the index `label` of SQL table `table`.
    static func index(table: String, _ label: String) -> String {
        internalPrefix + "index:" + table + ":" + label
    }

    /// The declared SQL type of a column of `type`. The names carry the LocalStore type (the raw-SQL
    /// escape hatch maps results back with them) and select the right affinity:
    ///
    /// | type | declared | affinity | stored as |
    /// | --- | --- | --- | --- |
    /// | string | TEXT | TEXT | TEXT |
    /// | integer | INTEGER | INTEGER | INTEGER |
    /// | boolean | BOOLEAN | NUMERIC | INTEGER 0 / 1 |
    /// | double | DOUBLE_BLOB | BLOB (none) | REAL |
    /// | date | DATE_BLOB | BLOB (none) | REAL (`timeIntervalSinceReferenceDate`) |
    /// | binary | BLOB | BLOB | BLOB |
    /// | json | JSON_TEXT | TEXT | TEXT (`JSON.jsonText`) |
    ///
    /// Doubles and dates deliberately get no REAL affinity: SQLite converts a REAL with no fractional
    /// part to an integer before storing it in a REAL-affinity column, which turns `-0.0` into `0`.
    /// Without affinity the 8-byte double is stored as given.
    static func declaredType(_ type: ColumnType) -> String {
        switch type {
        case .string: return "TEXT"
        case .integer: return "INTEGER"
        case .boolean: return "BOOLEAN"
        case .double: return "DOUBLE_BLOB"
        case .date: return "DATE_BLOB"
        case .binary: return "BLOB"
        case .json: return "JSON_TEXT"
        }
    }

    /// The LocalStore type a declared SQL type stands for (raw SQL results).
    static func columnType(declared: String?) -> ColumnType? {
        switch declared?.uppercased() {
        case "TEXT": return .string
        case "INTEGER": return .integer
        case "BOOLEAN": return .boolean
        case "DOUBLE_BLOB": return .double
        case "DATE_BLOB": return .date
        case "BLOB": return .binary
        case "JSON_TEXT": return .json
        default: return nil
        }
    }
}

/// What a table is to the engine.
enum TableKind: Int, Sendable {
    case user = 0, operations = 1, errors = 2, config = 3
}

/// A table known to the engine: its schema, SQL name and kind (a class: a lookup hands out one reference,
/// not a copy of every string and array in it).
final class TableInfo: Sendable {
    let schema: TableSchema
    let sqlName: String
    let kind: TableKind
    /// The quoted SQL table name.
    let quotedName: String
    /// The quoted column names, in schema order.
    let quotedColumns: [String]

    init(schema: TableSchema, sqlName: String, kind: TableKind) {
        self.schema = schema
        self.sqlName = sqlName
        self.kind = kind
        quotedName = SQLNames.quote(sqlName)
        quotedColumns = schema.columns.map { SQLNames.quote($0.name) }
        let names = quotedColumns.joined(separator: ", ")
        let marks = Array(repeating: "?", count: quotedColumns.count).joined(separator: ", ")
        let idColumn = quotedColumns[schema.idIndex]
        selectByIdSQL = "SELECT \(names) FROM \(quotedName) WHERE \(idColumn) = ?1"
        insertAllSQL = "INSERT OR IGNORE INTO \(quotedName) (\(names)) VALUES (\(marks))"
        updateAllSQL = "UPDATE OR FAIL \(quotedName) SET \(quotedColumns.map { $0 + " = ?" }.joined(separator: ", ")) WHERE \(idColumn) = ?"
        allColumns = Array(schema.columns.indices)
        allColumnsShape = ItemShape(schema, columns: allColumns)
        hasStringIds = schema.columns[schema.idIndex].type == .string
    }

    /// Whether the id column is a string column (``TableSchema/checkId(_:)`` accepts every string id).
    let hasStringIds: Bool

    /// The names and types of every column, in schema order: items of whole rows share its layout (no
    /// dictionary per row, no hashing of column names).
    let allColumnsShape: ItemShape

    /// Statements built once per table: reading a row by id, and the upsert of an item that sets
    /// every column (`INSERT OR IGNORE`, then `UPDATE … WHERE id = ?` when the row existed).
    /// `OR FAIL` rather than the default `ABORT`: an update of one row by its key is checked before it
    /// writes anything, so it needs no statement journal (with `ABORT` SQLite keeps one for the `NOT
    /// NULL` id, copying — and on SQLCipher encrypting — every page the update changes).
    let selectByIdSQL: String
    let insertAllSQL: String
    let updateAllSQL: String
    /// Every column position, in schema order.
    let allColumns: [Int]

    var idColumn: String { quotedColumns[schema.idIndex] }

    /// `CREATE TABLE` for the whole schema.
    var createSQL: String {
        let columns = schema.columns.enumerated().map { n, c in TableInfo.columnDefinition(c, isId: n == schema.idIndex) }
        return "CREATE TABLE \(quotedName) (\(columns.joined(separator: ", ")))"
    }

    static func columnDefinition(_ c: Column, isId: Bool) -> String {
        let name = SQLNames.quote(c.name)
        if isId {
            // An integer id is the rowid (numeric order); a string id matches with SQLite's NOCASE.
            return c.type == .integer ? "\(name) INTEGER PRIMARY KEY" : "\(name) TEXT COLLATE NOCASE PRIMARY KEY NOT NULL"
        }
        return "\(name) \(SQLNames.declaredType(c.type))"
    }

    /// The label of the config table's `(table COLLATE NOCASE, key, keyType, id)` index (see ``indexes``).
    static let configPairIndexLabel = "pair_nocase"

    /// The indexes the table should have: `(name, CREATE INDEX statement)`.
    var indexes: [(name: String, sql: String)] {
        func make(_ label: String, _ columns: [String]) -> (name: String, sql: String) {
            let name = SQLNames.index(table: sqlName, label)
            return (name, "CREATE INDEX IF NOT EXISTS \(SQLNames.quote(name)) ON \(quotedName) (\(columns.joined(separator: ", ")))")
        }
        func col(_ name: String) -> String {
            let c = schema.column(named: name)
            let q = SQLNames.quote(c?.name ?? name)
            return c?.type == .string && Identifier.fold(name) == "itemid" ? q + " COLLATE NOCASE" : q
        }
        switch kind {
        case .operations: return [make("table_itemId", [col("table"), col("itemId")])]
        case .errors: return [make("operationId", [col("operationId")])]
        case .config:
            // The second index serves the delta-token pair lookup, which matches `table` ignoring case
            // (`SystemStatements`, `.deltaTokenRowIds`): the first compares it as bytes. It holds the id
            // too, so that the lookup reads the index alone. Stores created before it get it when they
            // are opened (`SQLEngine.addMissingSystemIndexes`).
            return [
                make("table_key_keyType", [col("table"), col("key"), col("keyType")]),
                make(
                    TableInfo.configPairIndexLabel,
                    [col("table") + " COLLATE NOCASE", col("key") + " COLLATE BINARY", col("keyType"), col("id")]),
            ]
        case .user:
            let single = schema.columns.enumerated().compactMap { n, c in
                c.indexed && n != schema.idIndex ? make(c.name, [SQLNames.quote(c.name)]) : nil
            }
            // Compound indexes get a label of their own (`index:T:compound:name`), so that a compound
            // index named like a column never meets that column's index. The id ends every one (as in
            // the other backends' index entries): a query sorted on the index's columns then by the id
            // tie-break reads the index in order, with no sort at all.
            let idName = schema.columns[schema.idIndex].name
            let compound = schema.indexes.map { index in
                var columns = index.keys.map { SQLNames.quote(schema.column(named: $0.column)?.name ?? $0.column) + ($0.isDescending ? " DESC" : "") }
                if !index.keys.contains(where: { Identifier.fold($0.column) == Identifier.fold(idName) }) { columns.append(SQLNames.quote(idName)) }
                return make("compound:" + Identifier.fold(index.resolvedName), columns)
            }
            return single + compound
        }
    }

    /// The columns as stored in the metadata table: a JSON array of `{name, type, indexed}`; when the
    /// table has compound indexes, an object `{"columns": [...], "indexes": [{"name", "keys": [{"column",
    /// "descending"}]}]}` (stores written before compound indexes hold the array, which stays readable).
    var columnsJSON: String {
        let columns = JSON.array(
            schema.columns.map {
                JSON.object(["name": .string($0.name), "type": .string($0.type.rawValue), "indexed": .bool($0.indexed)])
            }
        )
        if schema.indexes.isEmpty { return columns.jsonText }
        let indexes = JSON.array(
            schema.indexes.map { index in
                var o: [String: JSON] = [
                    "keys": .array(index.keys.map { .object(["column": .string($0.column), "descending": .bool($0.isDescending)]) })
                ]
                if let name = index.name { o["name"] = .string(name) }
                return .object(o)
            })
        return JSON.object(["columns": columns, "indexes": indexes]).jsonText
    }

    /// The columns and compound indexes stored by ``columnsJSON``; nil when malformed.
    static func definition(fromJSON text: String) -> ([Column], [TableIndex])? {
        guard let json = try? JSON(parsing: text) else { return nil }
        switch json {
        case .array:
            return columns(fromJSON: json).map { ($0, []) }
        case .object(let o):
            guard let c = o["columns"], let columns = columns(fromJSON: c), case .array(let items)? = o["indexes"] else { return nil }
            var indexes: [TableIndex] = []
            for item in items {
                guard case .object(let i) = item, case .array(let keys)? = i["keys"] else { return nil }
                var name: String? = nil
                if let n = i["name"] {
                    guard case .string(let s) = n else { return nil }
                    name = s
                }
                var parsed: [TableIndex.Key] = []
                for k in keys {
                    guard case .object(let ko) = k, case .string(let column)? = ko["column"], case .bool(let d)? = ko["descending"]
                    else { return nil }
                    parsed.append(TableIndex.Key(column, d ? .descending : .ascending))
                }
                indexes.append(TableIndex(name: name, parsed))
            }
            return (columns, indexes)
        default:
            return nil
        }
    }

    static func columns(fromJSON json: JSON) -> [Column]? {
        guard case .array(let items) = json else { return nil }
        var columns: [Column] = []
        for item in items {
            guard case .object(let o) = item, case .string(let name)? = o["name"], case .string(let t)? = o["type"],
                let type = ColumnType(rawValue: t)
            else { return nil }
            var indexed = false
            if case .bool(let b)? = o["indexed"] { indexed = b }
            columns.append(Column(name, type, indexed: indexed))
        }
        return columns
    }
}

/// A read query resolved against one table definition and compiled to SQL on one connection (the
/// connection's limits and functions shape the text): reused while that definition is current, so a
/// query a call path runs again and again (the head of the operation queue, the delta-token lookup of
/// one pair) is resolved and compiled once.
final class CompiledQuery {
    let table: TableInfo
    let resolved: ResolvedQuery
    /// The row statement (`nil` when the query returns no rows).
    let select: Fragment?
    /// The total-count statement (`nil` unless the query asks for the count).
    let count: Fragment?

    /// How the selected columns become items: the table's shape when every column is selected (so
    /// items of every read of the table share one layout).
    let shape: ItemShape

    init(table: TableInfo, resolved: ResolvedQuery, select: Fragment?, count: Fragment?) {
        self.table = table
        self.resolved = resolved
        self.select = select
        self.count = count
        shape = resolved.projection == table.allColumns
            ? table.allColumnsShape : ItemShape(table.schema, columns: resolved.projection)
    }
}

extension Query {
    /// Whether a query equal to this one (`==`) is this one byte for byte, so that what was compiled for
    /// one may serve the other: every string in it (table, columns, literals) is ASCII, it holds no json
    /// literal and no negative zero. Swift compares strings by canonical equivalence (`"\u{212A}"`, the
    /// Kelvin sign, equals `"K"`) and doubles by value (`-0.0 == 0.0`), but the SQL binds the bytes.
    var isByteComparable: Bool {
        func ascii(_ s: String) -> Bool { s.utf8.allSatisfy { $0 < 0x80 } }
        func value(_ v: Value) -> Bool {
            switch v {
            case .string(let s): return ascii(s)
            case .json: return false
            case .double(let d): return !(d == 0 && d.sign == .minus)
            case .date(let d): return !(d.timeIntervalSinceReferenceDate == 0 && d.timeIntervalSinceReferenceDate.sign == .minus)
            case .null, .bool, .int, .binary: return true
            }
        }
        func expression(_ e: QueryExpression) -> Bool {
            switch e {
            case .field(let name): return ascii(name)
            case .literal(let v): return value(v)
            case .dateOnly(let d): return value(.date(d))
            case .arithmetic(_, let l, let r): return expression(l) && expression(r)
            case .toLower(let x), .toUpper(let x), .length(let x): return expression(x)
            case .function(_, let arguments): return arguments.allSatisfy(expression)
            }
        }
        func predicate(_ p: QueryPredicate) -> Bool {
            switch p {
            case .true, .false: return true
            case .and(let ps), .or(let ps): return ps.allSatisfy(predicate)
            case .not(let inner): return predicate(inner)
            case .compare(let l, _, let r, _): return expression(l) && expression(r)
            case .isNull(let e), .isNotNull(let e): return expression(e)
            case .in(let e, let values): return expression(e) && values.allSatisfy(value)
            case .between(let e, let low, let high): return expression(e) && value(low) && value(high)
            case .string(_, let l, let r, _): return expression(l) && expression(r)
            }
        }
        return ascii(table) && sort.allSatisfy { ascii($0.field) } && (select ?? []).allSatisfy(ascii)
            && (self.predicate.map(predicate) ?? true)
    }
}
