/// How a store finds the rows of a query: the access path of its plan (see ``QueryPlanReporting``).
///
/// The path says which structure the store reads to find candidate rows, not how it filters, sorts or
/// cuts them afterwards: a query on an indexed column that the store answers by reading that index's
/// range (or by walking the index in order and stopping after `top` rows) is ``index(_:)``, whatever
/// else it then tests.
public enum QueryAccessPath: Sendable, Hashable, CustomStringConvertible {
    /// No row is read: the predicate can never be true (`false`, `id in ()`).
    case noRows
    /// Rows are found by primary key: `id ==`, `id in (…)`, a range of ids, or a walk in id order.
    case primaryKey
    /// Rows are found through the index named `name` — an equality, range or prefix on its leading
    /// columns, or a walk in its order. For an index of the schema the name is its
    /// ``TableIndex/resolvedName``; the index of a ``Column/indexed`` column is named after the column.
    /// A backend's own indexes (on its system tables) have names of the backend's choosing.
    case index(String)
    /// Every row of the table is read and tested.
    case fullScan

    /// `no rows`, `primary key`, `index <name>` or `full scan`.
    public var description: String {
        switch self {
        case .noRows: return "no rows"
        case .primaryKey: return "primary key"
        case .index(let name): return "index \(name)"
        case .fullScan: return "full scan"
        }
    }

    /// Whether this is ``index(_:)`` of the index named `name` (names compare case-insensitively).
    public func isIndex(named name: String) -> Bool {
        if case .index(let used) = self { return Identifier.fold(used) == Identifier.fold(name) }
        return false
    }
}

/// A store that tells how it answers a query, so that the conformance suite can hold it to the
/// indexes its tables declare.
///
/// Every backend accepts ``TableIndex`` and ``Column/indexed`` declarations, and a caller declares one
/// to make its queries fast: a list query on an indexed column of a 100,000-row table should read a
/// few index entries, not 100,000 rows. The suite cannot time a backend, so it asks for the plan
/// instead (`LocalStoreConformance`'s `queriesUseDeclaredIndexes`), and a backend that does not
/// conform, or that reports a scan where an index answers the query, fails it.
///
/// The contract of ``accessPath(for:)``:
/// - It reports the path the store's ``LocalStoreAccess/read(_:)`` takes for `query` at the moment of
///   the call — the same plan, not a separate estimate — without reading the rows.
/// - A query whose conjuncts include an equality, `in` or two-sided range on the leading column of a
///   declared index (one-column or compound: equalities on its first columns, then at most one range),
///   or only counts such rows, is answered through an index (``QueryAccessPath/index(_:)``), unless
///   `id ==` / `id in` answers it (``QueryAccessPath/primaryKey``). When several indexes could answer,
///   the store picks; the suite accepts any index that covers one of the query's conjuncts. A one-sided
///   range (`priority >= 6`) may instead walk the table in id order when the store estimates it matches
///   much of the table (SQLite does, to save the sort by id).
/// - A query with `top` sorted first on an indexed column, and no total count, may walk that index in
///   order: also ``QueryAccessPath/index(_:)``.
/// - A query that constrains no indexed column and no id, and sorts on none, is a
///   ``QueryAccessPath/fullScan``: a store never claims an index it does not read.
/// - It throws what ``LocalStoreAccess/read(_:)`` would throw for an invalid query or unknown table.
public protocol QueryPlanReporting {
    /// The access path ``LocalStoreAccess/read(_:)`` takes for `query` (see the protocol's contract).
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    func accessPath(for query: Query) throws -> QueryAccessPath
}
