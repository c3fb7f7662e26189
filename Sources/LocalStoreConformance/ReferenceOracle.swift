import LocalStore

/// The suite's reference evaluator (`Reference`) for other harnesses: fuzzers compare backends
/// against it on random rows and predicates.
///
/// It shares no code with the core's evaluator. It assumes a valid query: resolve the query with any
/// store first (an invalid one throws there) and ask the oracle only about valid ones.
public enum ReferenceOracle {
    /// The rows of `rows` that `query`'s predicate selects, in its order (`id` ascending breaks ties),
    /// after skip and top, and the number of matches before skip and top. Rows are keyed by the
    /// columns' defined names; `query.select` is ignored (every column is returned).
    public static func select(_ query: Query, schema: TableSchema, rows: [[String: Value]]) throws -> (rows: [[String: Value]], count: Int) {
        let table = Reference.Table(schema: schema, rows: rows)
        let all = try Reference.select(table, where: query.predicate, sort: query.sort)
        let page = try Reference.select(table, where: query.predicate, sort: query.sort, skip: query.skip, top: query.top)
        return (page, all.count)
    }
}
