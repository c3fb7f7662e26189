import Foundation
import LocalStore
import LocalStoreKV

/// What a query of a read transaction needs besides the data, kept for the next read of the same
/// query in the same catalog generation: the table's definition, the resolved query and — when the
/// planner chose it without looking at the data — the plan (a plan chosen by counting index entries,
/// ``QueryPlan/walkOrRanges(walk:descending:budget:source:ranges:)`` or its alternative, is made
/// again on every read). Reading the same query again then costs a hash of the `Query` and one
/// comparison instead of resolving and planning it (docs/lmdb.md, "Queries"). Kept in the toolkit's
/// ``QueryPlanCache``, one per environment.
final class CachedQueryPlan: Sendable {
    let table: TableDefinition
    let query: ResolvedQuery
    let plan: QueryPlan?
    /// The builder of whole rows of the table's read-by-id plan (every column), for a query returning
    /// every column.
    let wholeRows: RecordItemBuilder?

    init(table: TableDefinition, query: ResolvedQuery, plan: QueryPlan?, wholeRows: RecordItemBuilder?) {
        self.table = table
        self.query = query
        self.plan = plan
        self.wholeRows = wholeRows
    }
}
