/// The type of a column. Values written to a column must have its type (an `int` is accepted by a
/// `double` column and stored as a double); anything else is a `typeMismatch` error.
public enum ColumnType: String, Sendable, Hashable, CaseIterable, Codable {
    /// UTF-8 text: ``Value/string(_:)``.
    case string
    /// 64-bit signed integer: ``Value/int(_:)``.
    case integer
    /// Double-precision number: ``Value/double(_:)`` (``Value/int(_:)`` accepted and converted).
    case double
    /// ``Value/bool(_:)``.
    case boolean
    /// ``Value/date(_:)``, full `Date` precision.
    case date
    /// ``Value/binary(_:)``.
    case binary
    /// ``Value/json(_:)``: nested arrays and objects.
    case json

    /// Whether a value may be stored in a column of this type (null is always accepted).
    public func accepts(_ value: Value) -> Bool {
        switch (self, value) {
        case (_, .null): return true
        case (.string, .string), (.integer, .int), (.double, .double), (.double, .int), (.boolean, .bool),
            (.date, .date), (.binary, .binary), (.json, .json):
            return true
        default: return false
        }
    }

    /// Whether values of this type can be ordered (`<`, `>`, sort keys, ranges).
    public var isOrderable: Bool { self != .json }

    /// Whether values of this type are numbers (`integer` or `double`).
    public var isNumeric: Bool { self == .integer || self == .double }

    /// Whether the string functions read values of this type as text: strings, and numbers and
    /// booleans converted (`QueryFunctions.text`).
    package var isTextual: Bool { self == .string || self == .integer || self == .double || self == .boolean }
}

/// One column of a ``TableSchema``.
public struct Column: Sendable, Hashable, Codable {
    /// The column's name, in its defined spelling. Matched case-insensitively.
    public var name: String
    /// The column's type.
    public var type: ColumnType
    /// Whether the backend keeps an ordered index on the column.
    public var indexed: Bool

    /// Creates a column description.
    public init(_ name: String, _ type: ColumnType, indexed: Bool = false) {
        self.name = name
        self.type = type
        self.indexed = indexed
    }
}

/// A compound index: an ordered list of columns, each ascending or descending.
///
/// An index orders a table's rows by its first column, then its second, ..., then by `id`; a query that
/// filters on a leading part of the columns (equalities, then at most one range) and sorts on the columns
/// that follow — in the index's directions, or all of them reversed — reads the index range in order and
/// stops after `top` rows. Declared with ``TableSchema/init(name:columns:indexes:)``:
///
/// ```swift
/// TableSchema(name: "TodoItem", columns: [...],
///             indexes: [TableIndex(("priority", .ascending), ("updatedAt", .descending))])
/// ```
///
/// Indexes are only ever added (a redefinition that omits one keeps it); adding one to a table with rows
/// builds it. A one-column ascending index is what ``Column/indexed`` declares.
public struct TableIndex: Sendable, Hashable, CustomStringConvertible {
    /// The most columns an index may have.
    public static let maximumColumnCount = 16

    /// One column of an index and its direction.
    public struct Key: Sendable, Hashable {
        /// The column's name (case-insensitive).
        public var column: String
        /// The direction: ascending puts nulls first, descending puts them last (as ``SortKey``).
        public var direction: SortKey.Direction

        /// Creates an index key.
        public init(_ column: String, _ direction: SortKey.Direction = .ascending) {
            self.column = column
            self.direction = direction
        }

        /// Whether the key is descending.
        public var isDescending: Bool { direction == .descending }
    }

    /// The name given at definition; `nil` for the default name (see ``resolvedName``).
    public var name: String?
    /// The columns, most significant first.
    public var keys: [Key]

    /// Creates an index over `keys`; `name` must be an identifier when given.
    public init(name: String? = nil, _ keys: [Key]) {
        self.name = name
        self.keys = keys
    }

    /// Creates an index over `(column, direction)` pairs.
    public init(name: String? = nil, _ keys: (String, SortKey.Direction)...) {
        self.init(name: name, keys.map { Key($0.0, $0.1) })
    }

    /// Creates an ascending index over `columns`.
    public init(name: String? = nil, columns: [String]) {
        self.init(name: name, columns.map { Key($0) })
    }

    /// The index's name: the given one, else the column names joined by `_` with `_desc` after a
    /// descending column (`priority_updatedAt_desc`).
    public var resolvedName: String {
        if let name { return name }
        return keys.map { $0.column + ($0.isDescending ? "_desc" : "") }.joined(separator: "_")
    }

    /// Whether two indexes order rows the same way (same columns, case-insensitive, same directions).
    public func hasSameKeys(as other: TableIndex) -> Bool {
        keys.count == other.keys.count
            && zip(keys, other.keys).allSatisfy { Identifier.fold($0.column) == Identifier.fold($1.column) && $0.direction == $1.direction }
    }

    /// `name(a, b desc)`.
    public var description: String {
        resolvedName + "(" + keys.map { $0.column + ($0.isDescending ? " desc" : "") }.joined(separator: ", ") + ")"
    }
}

/// The system properties a sync table may carry as columns.
public enum SystemProperty: String, Sendable, Hashable, CaseIterable {
    /// `createdAt` (a date set by the server).
    case createdAt
    /// `updatedAt` (a date set by the server; delta sync keys on it).
    case updatedAt
    /// `version` (the server's opaque concurrency token). Always returned by selecting reads.
    case version
    /// `deleted` (soft delete flag).
    case deleted

    /// The column name of the property.
    public var columnName: String { rawValue }
}

/// The definition of a table: its name, typed columns and which columns are indexed.
///
/// `id` is always a column: when `columns` does not declare it, a `string` id is added first.
/// Names are matched case-insensitively (ASCII) and returned in their defined spelling.
public struct TableSchema: Sendable, Hashable, CustomStringConvertible {
    /// The largest number of columns a table may have, `id` included.
    public static let maximumColumnCount = 1000

    /// The table's name.
    public let name: String
    /// The columns in definition order; `id` is among them.
    public let columns: [Column]
    /// The compound indexes, in definition order (one-column indexes declared with ``Column/indexed``
    /// are not repeated here). Their column names are in the columns' defined spelling once validated.
    public let indexes: [TableIndex]
    private let exact: [String: Int]
    private let folded: [String: Int]
    /// The position of the `id` column (``idIndex``), found once: every read by id asks for it.
    private let idPosition: Int

    /// Creates a schema. The result is checked by ``validate(idType:)`` when a store defines it.
    public init(name: String, columns: [Column], indexes: [TableIndex] = []) {
        var columns = columns
        if !columns.contains(where: { Identifier.fold($0.name) == "id" }) {
            columns.insert(Column("id", .string), at: 0)
        }
        self.name = name
        self.columns = columns
        var exact: [String: Int] = [:]
        var folded: [String: Int] = [:]
        for (n, c) in columns.enumerated() {
            if exact[c.name] == nil { exact[c.name] = n }
            let f = Identifier.fold(c.name)
            if folded[f] == nil { folded[f] = n }
        }
        self.exact = exact
        self.folded = folded
        self.idPosition = folded["id"] ?? 0
        // Column names in their defined spelling, so that equal definitions compare equal.
        self.indexes = indexes.map { index in
            var index = index
            for k in index.keys.indices {
                if let n = exact[index.keys[k].column] ?? folded[Identifier.fold(index.keys[k].column)] {
                    index.keys[k].column = columns[n].name
                }
            }
            return index
        }
    }

    /// Creates a schema from a name and `(name, type)` pairs; `indexed` lists the indexed columns and
    /// `indexes` the compound indexes.
    public init(
        _ name: String, _ columns: KeyValuePairs<String, ColumnType>, indexed: Set<String> = [], indexes: [TableIndex] = []
    ) {
        let foldedIndexed = Set(indexed.map(Identifier.fold))
        self.init(
            name: name,
            columns: columns.map { Column($0.key, $0.value, indexed: foldedIndexed.contains(Identifier.fold($0.key))) },
            indexes: indexes)
    }

    /// The column positions and directions of a compound index of this schema (`nil` for a column
    /// it does not have).
    public func positions(of index: TableIndex) -> [(column: Int, descending: Bool)]? {
        var out: [(column: Int, descending: Bool)] = []
        for k in index.keys {
            guard let n = lookup(k.column) else { return nil }
            out.append((n, k.isDescending))
        }
        return out
    }

    /// The position of the column named `name` (case-insensitive), or `nil`.
    @inlinable public func index(ofColumn name: String) -> Int? { lookup(name) }

    @usableFromInline func lookup(_ name: String) -> Int? {
        // A few columns: comparing the names costs less than hashing `name` (a name of up to 15 bytes is
        // two words, compared as such). The first column spelled so, as `exact` holds it; byte for byte
        // (`Identifier.isSameSpelling`: a KELVIN SIGN names no column spelled with K).
        if columns.count <= 16 {
            for n in columns.indices where Identifier.isSameSpelling(columns[n].name, name) { return n }
        } else if let n = exact[name], Identifier.isSameSpelling(columns[n].name, name) {
            return n
        }
        return folded[Identifier.fold(name)]
    }

    /// The column named `name` (case-insensitive), or `nil`.
    public func column(named name: String) -> Column? { lookup(name).map { columns[$0] } }

    /// The position of the `id` column.
    public var idIndex: Int { idPosition }

    /// The type of the `id` column (`string` for user tables).
    public var idType: ColumnType { columns[idIndex].type }

    /// The system properties the table has as columns.
    public var systemProperties: Set<SystemProperty> {
        Set(SystemProperty.allCases.filter { folded[Identifier.fold($0.columnName)] != nil })
    }

    /// Checks names, duplicates, the column count and the id type (`string` unless `idType` says otherwise).
    public func validate(idType expected: ColumnType = .string) throws {
        try Identifier.validate(name, what: "table name")
        guard columns.count <= TableSchema.maximumColumnCount else {
            throw LocalStoreError(
                .invalidValue,
                "table '\(name)' declares \(columns.count) columns; at most \(TableSchema.maximumColumnCount) are allowed",
                table: name)
        }
        var seen = Set<String>()
        for c in columns {
            try Identifier.validate(c.name, what: "column name in table '\(name)'")
            guard seen.insert(Identifier.fold(c.name)).inserted else {
                throw LocalStoreError(
                    .schemaConflict, "table '\(name)' declares column '\(c.name)' more than once", table: name,
                    column: c.name)
            }
        }
        guard idType == expected else {
            throw LocalStoreError(
                .schemaConflict, "column 'id' of table '\(name)' must have type \(expected), not \(idType)",
                table: name, column: "id")
        }
        try validateIndexes()
    }

    /// Checks the compound indexes: names are identifiers and unique, every index has 1 to
    /// ``TableIndex/maximumColumnCount`` columns of the table, none twice and none of type json.
    public func validateIndexes() throws {
        var names: [String: TableIndex] = [:]
        for index in indexes {
            let label = index.resolvedName
            if let given = index.name { try Identifier.validate(given, what: "index name in table '\(name)'") }
            guard !index.keys.isEmpty else {
                throw LocalStoreError(.invalidValue, "index '\(label)' of table '\(name)' has no columns", table: name)
            }
            guard index.keys.count <= TableIndex.maximumColumnCount else {
                throw LocalStoreError(
                    .invalidValue,
                    "index '\(label)' of table '\(name)' has \(index.keys.count) columns; at most \(TableIndex.maximumColumnCount) are allowed",
                    table: name)
            }
            var seen = Set<String>()
            for k in index.keys {
                guard let n = lookup(k.column) else {
                    throw LocalStoreError(
                        .unknownColumn, "index '\(label)' of table '\(name)' names column \(Value.string(k.column)), which the table does not have",
                        table: name, column: k.column)
                }
                let c = columns[n]
                guard c.type.isOrderable else {
                    throw LocalStoreError(
                        .invalidValue, "index '\(label)' of table '\(name)' cannot include json column '\(c.name)'", table: name,
                        column: c.name)
                }
                guard seen.insert(Identifier.fold(c.name)).inserted else {
                    throw LocalStoreError(
                        .schemaConflict, "index '\(label)' of table '\(name)' names column '\(c.name)' more than once",
                        table: name, column: c.name)
                }
            }
            let folded = Identifier.fold(label)
            if let other = names[folded] {
                guard other.hasSameKeys(as: index) else {
                    throw LocalStoreError(
                        .schemaConflict, "table '\(name)' declares two different indexes named '\(label)'", table: name)
                }
            }
            names[folded] = index
        }
    }

    /// Merges a new definition of the same table into this one.
    ///
    /// Columns and indexes are only ever added: a column of `newer` that this schema lacks is appended,
    /// an index requested by `newer` is added (a compound index with the keys of an existing one, under
    /// any name, is that one), and columns and indexes `newer` omits are kept. An index named like an
    /// existing one but on other keys is a `schemaConflict`. A column whose type
    /// differs is a `schemaConflict`; a result with more than ``maximumColumnCount`` columns is
    /// `invalidValue`. The result keeps this schema's spellings.
    public func merged(with newer: TableSchema) throws -> TableSchema {
        var result = columns
        for c in newer.columns {
            if let n = lookup(c.name) {
                guard result[n].type == c.type else {
                    throw LocalStoreError(
                        .schemaConflict,
                        "column '\(result[n].name)' of table '\(name)' has type \(result[n].type); it cannot become \(c.type)",
                        table: name, column: result[n].name)
                }
                if c.indexed { result[n].indexed = true }
            } else {
                result.append(c)
            }
        }
        guard result.count <= TableSchema.maximumColumnCount else {
            throw LocalStoreError(
                .invalidValue,
                "table '\(name)' would have \(result.count) columns; at most \(TableSchema.maximumColumnCount) are allowed",
                table: name)
        }
        var indexes = self.indexes
        for index in newer.indexes {
            if let existing = indexes.first(where: { Identifier.fold($0.resolvedName) == Identifier.fold(index.resolvedName) }) {
                guard existing.hasSameKeys(as: index) else {
                    throw LocalStoreError(
                        .schemaConflict,
                        "table '\(name)' already has an index named '\(existing.resolvedName)' on different columns: \(existing); it cannot become \(index)",
                        table: name)
                }
                continue
            }
            // The same keys under another name: the index exists already.
            if indexes.contains(where: { $0.hasSameKeys(as: index) }) { continue }
            indexes.append(index)
        }
        let merged = TableSchema(name: name, columns: result, indexes: indexes)
        try merged.validateIndexes()
        return merged
    }

    /// `name(col type, ...)`.
    public var description: String {
        "\(name)(" + columns.map { "\($0.name) \($0.type)\($0.indexed ? " indexed" : "")" }.joined(separator: ", ") + ")"
            + (indexes.isEmpty ? "" : " indexes " + indexes.map(\.description).joined(separator: ", "))
    }

    /// Two schemas are equal when their names, columns and indexes are equal.
    public static func == (lhs: TableSchema, rhs: TableSchema) -> Bool {
        lhs.name == rhs.name && lhs.columns == rhs.columns && lhs.indexes == rhs.indexes
    }

    /// Hashes the name, columns and indexes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(columns)
        hasher.combine(indexes)
    }
}

/// Rules for table and column names.
public enum Identifier {
    /// Checks `name` against `^[A-Za-z_][A-Za-z0-9_]{0,127}$`; throws `invalidIdentifier` otherwise.
    public static func validate(_ name: String, what: String = "identifier") throws {
        guard isValid(name) else {
            throw LocalStoreError(
                .invalidIdentifier,
                "\(what) \(Value.string(name)) is not a valid identifier (letters, digits and _, not starting with a digit, at most 128)"
            )
        }
    }

    /// Whether `name` matches `^[A-Za-z_][A-Za-z0-9_]{0,127}$`.
    public static func isValid(_ name: String) -> Bool {
        let utf8 = name.utf8
        // Over the contiguous bytes of a native string (every name a caller builds): iterating the
        // UTF-8 view checks for a bridged string at every byte. This runs for every delta-token call
        // and every table name a transaction resolves.
        if let valid = utf8.withContiguousStorageIfAvailable(isValid) { return valid }
        return isValid(Array(utf8)[...])
    }

    private static func isValid<C: Collection>(_ bytes: C) -> Bool where C.Element == UInt8, C.Index == Int {
        guard !bytes.isEmpty, bytes.count <= 128 else { return false }
        var i = bytes.startIndex
        let digitsAllowedFrom = i + 1
        while i < bytes.endIndex {
            let b = bytes[i]
            let letter = (b | 0x20) &- UInt8(ascii: "a") < 26  // A-Z and a-z (0x20 maps A-Z onto a-z)
            let digit = b &- UInt8(ascii: "0") < 10
            guard letter || b == UInt8(ascii: "_") || (digit && i >= digitsAllowedFrom) else { return false }
            i += 1
        }
        return true
    }

    /// ASCII lower-casing: the folding under which identifiers and ids are matched.
    @inlinable public static func fold(_ s: String) -> String { ASCII.lowercased(s) }

    /// Whether `name` is spelled exactly as `stored` — the same bytes — where `stored` is ASCII (a defined
    /// identifier, or a spelling that found one). `String`'s `==` is canonical equivalence, under which a
    /// KELVIN SIGN (U+212A) is a `K`; a string equal to an ASCII one but not its bytes holds a non-ASCII
    /// character standing for an ASCII one and is longer in UTF-8, so `==` with equal UTF-8 lengths (O(1)
    /// on native strings) is the byte comparison, at the cost of `==`.
    @inlinable package static func isSameSpelling(_ stored: String, _ name: String) -> Bool {
        stored == name && stored.utf8.count == name.utf8.count
    }
}

/// ASCII-only case mapping, the one every backend uses (SQLite's `lower()`, `upper()` and `NOCASE`).
public enum ASCII {
    /// `s` with `A`–`Z` mapped to `a`–`z`; every other byte unchanged.
    @inlinable public static func lowercased(_ s: String) -> String {
        var needs = false
        for b in s.utf8 where b >= 0x41 && b <= 0x5A { needs = true; break }
        if !needs { return s }
        return String(decoding: s.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// `s` with `a`–`z` mapped to `A`–`Z`; every other byte unchanged.
    @inlinable public static func uppercased(_ s: String) -> String {
        var needs = false
        for b in s.utf8 where b >= 0x61 && b <= 0x7A { needs = true; break }
        if !needs { return s }
        return String(decoding: s.utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 & ~0x20 : $0 }, as: UTF8.self)
    }

    /// Compares the UTF-8 bytes of two strings after ASCII lower-casing; returns -1, 0 or 1.
    @inlinable public static func compareFolded(_ a: String, _ b: String) -> Int {
        var ia = a.utf8.makeIterator()
        var ib = b.utf8.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (var x?, var y?):
                if x >= 0x41 && x <= 0x5A { x |= 0x20 }
                if y >= 0x41 && y <= 0x5A { y |= 0x20 }
                if x != y { return x < y ? -1 : 1 }
            }
        }
    }

    /// Compares the UTF-8 bytes of two strings; returns -1, 0 or 1.
    @inlinable public static func compareBytes(_ a: String, _ b: String) -> Int {
        var ia = a.utf8.makeIterator()
        var ib = b.utf8.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?):
                if x != y { return x < y ? -1 : 1 }
            }
        }
    }
}
