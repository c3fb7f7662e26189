import LocalStore

/// Reads a `QueryAccessPath` from the `detail` lines of SQLite's `EXPLAIN QUERY PLAN` — the forms of
/// SQLite 3.15 (`SEARCH TABLE t USING INDEX i (a=?)`) and of 3.24 and later (`SEARCH t USING INDEX i (a=?)`).
enum SQLAccessPath {
    /// The path of the first line that reads a table: `SEARCH` through an index is that index (its
    /// LocalStore name, ``reportedName(_:table:)``) or the primary key; `SCAN` is a full scan, unless it
    /// walks an index and `walksInOrder` (the query has `top` and a sort) with no sort step after it (`USE
    /// TEMP B-TREE FOR ORDER BY`; a sort of its ties is allowed), which reads the index in order and stops after `top` rows. No such line
    /// (the statement reads no table) is no rows; a statement evaluated in Swift is a full scan.
    static func parse(_ lines: [String], table: TableInfo, walksInOrder: Bool) -> QueryAccessPath {
        // `USE TEMP B-TREE FOR RIGHT PART OF ORDER BY` sorts only the ties of the walked index's order.
        let sorts = lines.contains { $0.hasPrefix("USE TEMP B-TREE FOR ORDER BY") }
        for line in lines {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let verb = words.first, verb == "SEARCH" || verb == "SCAN" else {
                if line.hasPrefix("evaluated in Swift") { return .fullScan }
                continue
            }
            // `SCAN SUBQUERY`, `SCAN CONSTANT ROW`: no table of the store.
            if verb == "SCAN", words.count > 1, words[1] == "SUBQUERY" || words[1] == "CONSTANT" { continue }
            let index = indexName(words)
            if verb == "SEARCH" {
                if line.contains("PRIMARY KEY") { return .primaryKey }
                guard let index else { return .fullScan }
                return path(of: index, table: table)
            }
            guard let index, walksInOrder, !sorts else { return .fullScan }
            return path(of: index, table: table)
        }
        return .noRows
    }

    /// The access path through `index`: the primary key for SQLite's automatic index of it, else the index
    /// by the name the store reports.
    private static func path(of index: String, table: TableInfo) -> QueryAccessPath {
        index.hasPrefix("sqlite_autoindex_") ? .primaryKey : .index(reportedName(index, table: table))
    }

    /// The name after `USING [COVERING ]INDEX`, if any.
    private static func indexName(_ words: [Substring]) -> String? {
        guard let at = words.firstIndex(of: "INDEX"), at > 0, words[at - 1] == "USING" || words[at - 1] == "COVERING",
            at + 1 < words.count
        else { return nil }
        return String(words[at + 1])
    }

    /// The LocalStore name of the SQL index `sqlName` of `table` (`SQLNames.index(table:_:)`): a column
    /// index is named after its column, a compound index by its ``TableIndex/resolvedName`` in the
    /// schema's spelling, a system table's index by its label.
    static func reportedName(_ sqlName: String, table: TableInfo) -> String {
        let prefix = SQLNames.index(table: table.sqlName, "")
        guard sqlName.hasPrefix(prefix) else { return sqlName }
        let label = String(sqlName.dropFirst(prefix.count))
        let compound = "compound:"
        guard label.hasPrefix(compound) else { return label }
        let folded = String(label.dropFirst(compound.count))
        return table.schema.indexes.first { Identifier.fold($0.resolvedName) == folded }?.resolvedName ?? folded
    }
}
