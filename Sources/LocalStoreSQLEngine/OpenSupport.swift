import Foundation
import LocalStore

/// What opening a store needs to know about a file: one `stat(2)` (or `lstat(2)`), where FileManager's
/// `fileExists(atPath:isDirectory:)` and `attributesOfItem(atPath:)` did more (the latter builds a dictionary
/// of every attribute and looks up the owner's user and group names).
struct FileStatus {
    let isDirectory: Bool
    let size: Int

    /// The status of `path`, or `nil` when there is nothing there (or it cannot be examined).
    /// `followingLinks: false` describes a symbolic link itself, as `attributesOfItem(atPath:)` does.
    init?(_ path: String, followingLinks: Bool = true) {
        var st = stat()
        let rc = followingLinks ? stat(path, &st) : lstat(path, &st)
        guard rc == 0 else { return nil }
        isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
        size = Int(st.st_size)
    }

    /// The directory of `path` for `access(2)`, as `NSString.deletingLastPathComponent` gives it ("." for
    /// a bare file name), without bridging to `NSString`.
    static func directory(of path: String) -> String {
        let bytes = Array(path.utf8)
        let slash = UInt8(ascii: "/")
        var end = bytes.count
        while end > 1, bytes[end - 1] == slash { end -= 1 }  // trailing slashes
        guard let last = bytes[..<end].lastIndex(of: slash) else { return "." }
        if last == 0 { return "/" }
        var stop = last
        while stop > 1, bytes[stop - 1] == slash { stop -= 1 }
        return String(decoding: bytes[..<stop], as: UTF8.self)
    }
}

/// Whether two strings hold the same bytes. `==` on `String` compares by canonical equivalence, but what
/// is stored, and what the SQL binds, are the bytes.
func sameBytes(_ a: String, _ b: String) -> Bool {
    let n = a.utf8.count
    guard n == b.utf8.count else { return false }
    if n == 0 { return true }
    let fast = a.utf8.withContiguousStorageIfAvailable { x in
        b.utf8.withContiguousStorageIfAvailable { y -> Bool in
            guard let p = x.baseAddress, let q = y.baseAddress else { return false }
            return memcmp(p, q, n) == 0
        }
    }
    return (fast ?? nil) ?? a.utf8.elementsEqual(b.utf8)
}

/// The rows of the metadata table (`localstore:meta`) and of the table definitions (`localstore:schema`),
/// read on opening in one statement (``readAll(_:)``), or each alone.
struct MetadataRows {
    /// A stored table definition, as read: the columns text is parsed by the catalog.
    struct Definition {
        let name: String
        let sqlName: String
        let kind: Int64
        let columns: String

        /// The same stored values, byte for byte.
        func isSame(as other: Definition) -> Bool {
            kind == other.kind && sameBytes(name, other.name) && sameBytes(sqlName, other.sqlName) && sameBytes(columns, other.columns)
        }
    }

    /// The `format` row's value read as an integer (`nil` without such a row).
    var format: Int64?
    /// Every metadata row's value read as text, by key.
    var metaText: [String: String] = [:]
    /// The table definitions.
    var definitions: [Definition] = []

    private mutating func addMeta(_ s: Statement, key: Int32, value: Int32) {
        let k = s.text(key)
        if k == "format" { format = s.int64(value) }
        metaText[k] = s.text(value)
    }

    private mutating func addDefinition(_ s: Statement, from n: Int32) {
        definitions.append(Definition(name: s.text(n), sqlName: s.text(n + 1), kind: s.int64(n + 2), columns: s.text(n + 3)))
    }

    /// Whether the store records that the config table's pair index was made (the metadata row
    /// ``pairIndexKey``: written with the index, at creation or by the opening that adds it to a store
    /// of an earlier version).
    var hasPairIndex: Bool { metaText[MetadataRows.pairIndexKey] == "1" }

    /// The metadata key whose value 1 records that the config table's pair index was made. Versions
    /// that do not know it ignore it (they read only the keys they know), so it needs no new format.
    static let pairIndexKey = "configPairIndex"

    /// The metadata rows and the table definitions in one statement; `nil` when SQLite cannot prepare it
    /// (an empty file, one that is not a store, a table missing or with other columns, a file that is not
    /// a readable database: the callers then take the steps one by one, and fail where they failed
    /// before). Prepared, it shows the metadata table exists: `sqlite_master` is not read (its rows cost
    /// about a tenth of an opening).
    static func readAll(_ c: Connection) throws -> MetadataRows? {
        let sql = """
            SELECT 0, key, value, NULL, NULL FROM \(SQLNames.quote(SQLNames.metaTable)) \
            UNION ALL SELECT 1, name, sqlName, kind, columns FROM \(SQLNames.quote(SQLNames.schemaTable))
            """
        return try c.withOneTimeStatement(sql) { s in
            var rows = MetadataRows()
            while try s.step() {
                if s.int64(0) == 0 {
                    rows.addMeta(s, key: 1, value: 2)
                } else {
                    rows.addDefinition(s, from: 1)
                }
            }
            return rows
        }
    }

    /// The metadata rows alone.
    static func readMeta(_ c: Connection) throws -> MetadataRows {
        try c.withStatement("SELECT key, value FROM \(SQLNames.quote(SQLNames.metaTable))") { s in
            var rows = MetadataRows()
            while try s.step() { rows.addMeta(s, key: 0, value: 1) }
            return rows
        }
    }

    /// The table definitions alone (a catalog reload after another connection changed the schema).
    static func readDefinitions(_ c: Connection) throws -> MetadataRows {
        try c.withStatement("SELECT name, sqlName, kind, columns FROM \(SQLNames.quote(SQLNames.schemaTable))") { s in
            var rows = MetadataRows()
            while try s.step() { rows.addDefinition(s, from: 0) }
            return rows
        }
    }
}

extension TableInfo {
    private struct MemoKey: Hashable {
        let name: String
        let sqlName: String
        let kind: TableKind
        let columns: String

        // Equal only byte for byte (strings equal by canonical equivalence hash alike, so the hash stays valid).
        static func == (a: MemoKey, b: MemoKey) -> Bool {
            a.kind == b.kind && sameBytes(a.name, b.name) && sameBytes(a.sqlName, b.sqlName) && sameBytes(a.columns, b.columns)
        }
    }

    /// The catalog made last in this process and the stored definitions it was made from: a reopen of the
    /// same store finds the same rows and takes it whole (no name folded, no key hashed).
    private static let lastCatalog = LockedValue<(definitions: [MetadataRows.Definition], tables: [String: TableInfo])?>(nil)

    /// The catalog last made from exactly these stored definitions (same order, same bytes), if any.
    static func knownCatalog(_ definitions: [MetadataRows.Definition]) -> [String: TableInfo]? {
        guard let last = lastCatalog.withLock({ $0 }), last.definitions.count == definitions.count else { return nil }
        for (a, b) in zip(last.definitions, definitions) where !a.isSame(as: b) { return nil }
        return last.tables
    }

    /// Keeps `tables`, made from `definitions`, for ``knownCatalog(_:)``.
    static func rememberCatalog(_ definitions: [MetadataRows.Definition], _ tables: [String: TableInfo]) {
        lastCatalog.withLock { $0 = (definitions, tables) }
    }

    /// Definitions parsed in this process, by what is stored for them (bounded: emptied when full).
    private static let memo = LockedValue<[MemoKey: TableInfo]>([:])
    static let memoCapacity = 256

    /// The table of a stored definition (name, SQL name, kind, columns text). One parsed before from the
    /// very same stored values is returned again (a reopen, or a catalog reload after another connection
    /// changed another table, parses nothing): a `TableInfo` is immutable and depends only on them.
    /// `failure` makes the error for text that cannot be parsed (`nil`) or an invalid definition (why).
    static func memoized(
        name: String, sqlName: String, kind: TableKind, columns: String, failure: (String?) -> LocalStoreError
    ) throws -> TableInfo {
        let key = MemoKey(name: name, sqlName: sqlName, kind: kind, columns: columns)
        if let known = memo.withLock({ $0[key] }) { return known }
        guard let (parsed, indexes) = definition(fromJSON: columns) else { throw failure(nil) }
        let schema = TableSchema(name: name, columns: parsed, indexes: indexes)
        do { try schema.validateIndexes() } catch { throw failure("\(error)") }
        let info = TableInfo(schema: schema, sqlName: sqlName, kind: kind)
        memo.withLock {
            if $0.count >= memoCapacity { $0.removeAll(keepingCapacity: true) }
            $0[key] = info
        }
        return info
    }
}
