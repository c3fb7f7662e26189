import Foundation
import LocalStore
import LocalStoreKV

/// What a query of a read transaction needs besides the data, kept for the next read of the same
/// query in the same catalog generation: the table's definition, the resolved query and — when the
/// planner chose it without looking at the data — the plan (a plan chosen by counting index entries,
/// ``QueryPlan/walkOrRanges(walk:descending:budget:source:ranges:)`` or its alternative, is made
/// again on every read). Reading the same query again then costs a hash of the `Query` and one
/// comparison instead of resolving and planning it (docs/lmdb.md, "Queries").
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

/// The cached plans of one catalog generation (at most ``capacity``; emptied when full or when the
/// generation changes).
struct QueryPlanCache {
    static let capacity = 64

    private var generation: UInt64 = 0
    private var entries: [Query: CachedQueryPlan] = [:]

    /// The entry of `query` made in `generation`, or `nil`.
    func entry(_ query: Query, generation: UInt64) -> CachedQueryPlan? {
        guard generation == self.generation, !entries.isEmpty else { return nil }
        return entries[query]
    }

    mutating func keep(_ entry: CachedQueryPlan, for query: Query, generation: UInt64) {
        if generation != self.generation {
            guard generation > self.generation else { return }  // an older snapshot's catalog
            self.generation = generation
            entries.removeAll(keepingCapacity: true)
        }
        if entries.count >= QueryPlanCache.capacity { entries.removeAll(keepingCapacity: true) }
        entries[query] = entry
    }

    /// Whether a cached entry of `query` can serve every query equal to it. `Query` equality compares
    /// strings by Unicode canonical equivalence, while names and literals are resolved and encoded as
    /// bytes: only queries whose strings are all ASCII (where the two agree) and that hold no json
    /// literal (json objects compare their keys as strings) are kept. Neither are queries with a
    /// negative zero (equal to zero, but not the same value to every function) or a NaN (never equal).
    static func isCacheable(_ query: Query) -> Bool {
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
