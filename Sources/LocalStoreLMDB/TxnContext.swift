import CLMDB
import Foundation
import LocalStore
import LocalStoreKV

/// A mutation made through a write transaction, kept so it can be replayed after a map growth.
enum WriteOp {
    case upsert([Item], table: String, options: UpsertOptions)
    case deleteIds([Value], table: String)
    case deleteMatching(Query)
    case define(TableSchema, system: TableDefinition?)
}

/// A row found by id: where it is stored, its values and its row number.
struct StoredRow {
    var key: [UInt8]
    var row: [Value]
    var rowId: UInt64
}

/// One LMDB transaction and what the backend knows about it: the catalog of its snapshot and, for
/// the write transaction, the log of mutations.
///
/// **Map growth.** When LMDB reports `MDB_MAP_FULL` the write transaction is dead. The context
/// aborts it, grows the map (which needs every transaction of the process to end: it releases the
/// gate and waits for the exclusive side), begins a new write transaction and *replays* the log of
/// mutations made so far, then retries the mutation that failed. The `write {}` body is not run
/// again and never notices. Replay is exact because the process's `writeLock` stays held (no other
/// writer of this process runs in between) and the new transaction is checked to start from the
/// same committed state (`mdb_txn_id`); if another *process* committed in between, the body is run
/// again from the start on the new state instead (``RestartSignal``).
final class TxnContext {
    let environment: Environment
    private(set) var txn: OpaquePointer?
    let isWrite: Bool
    private(set) var catalog: Catalog
    private let initialCatalog: Catalog
    /// The transaction's id (for a write transaction, the id it commits as).
    let startTxnId: Int
    /// What the write transaction changed, when somebody observes the store.
    var changes: ChangeCollector?

    private var log: [WriteOp] = []
    private var nextRowId: UInt64?
    private var nextRowIdDirty = false
    private var createdHandles: [String: MDB_dbi] = [:]
    private var holdsHandleLock = false
    private var catalogChanged = false
    /// Set when a mutation failed half-way: the transaction can only be rolled back.
    private(set) var failure: LocalStoreError?
    /// Set when the body must run again (another process committed during a map growth).
    private(set) var needsRestart = false

    init(environment: Environment, txn: OpaquePointer, catalog: Catalog, isWrite: Bool) {
        self.environment = environment
        self.txn = txn
        self.isWrite = isWrite
        self.catalog = catalog
        self.initialCatalog = catalog
        self.startTxnId = mdb_txn_id(txn)
    }

    /// Aborts the transaction if it is still open and releases what it holds; a read transaction
    /// is handed to `reusing` instead of being aborted, when given.
    func end(reusing: ((OpaquePointer) -> Void)? = nil) {
        if let txn {
            self.txn = nil
            if let reusing, !isWrite { reusing(txn) } else { mdb_txn_abort(txn) }
        }
        createdHandles = [:]
        releaseHandleLock()
    }

    private func releaseHandleLock() {
        if holdsHandleLock {
            holdsHandleLock = false
            environment.handleLock.unlock()
        }
    }

    var env: OpaquePointer { environment.env }

    func activeTxn() throws -> OpaquePointer {
        guard let txn else { throw failure ?? LocalStoreError(.misuse, "the transaction has ended") }
        return txn
    }

    // MARK: Primitives

    func handle(_ name: String) throws -> MDB_dbi {
        if let h = createdHandles[name] ?? environment.handle(name) { return h }
        throw LocalStoreError(.internal, "the LMDB database '\(name)' has no handle")
    }

    func table(_ name: String) throws -> TableDefinition {
        guard let t = catalog.table(name) else { throw LocalStoreError.unknownTable(name) }
        return t
    }

    /// Runs `body` on the value stored under `key`; `nil` when there is none. The bytes are valid
    /// only inside `body`.
    func withValue<R>(_ dbi: MDB_dbi, _ key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let txn = try activeTxn()
        return try key.withUnsafeBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var dv = MDB_val()
            let rc = mdb_get(txn, dbi, &kv, &dv)
            if rc == MDB_NOTFOUND { return nil }
            try LMDBErrors.check(rc, "cannot read")
            return try body(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size))
        }
    }

    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        let txn = try activeTxn()
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var dv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                try LMDBErrors.check(mdb_put(txn, dbi, &kv, &dv, 0), "cannot write", env: env)
            }
        }
    }

    /// Deletes `key`; `false` when it was not there.
    @discardableResult
    func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> Bool {
        let txn = try activeTxn()
        return try key.withUnsafeBytes { k in
            var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            let rc = mdb_del(txn, dbi, &kv, nil)
            if rc == MDB_NOTFOUND { return false }
            try LMDBErrors.check(rc, "cannot delete", env: env)
            return true
        }
    }

    func entryCount(_ dbi: MDB_dbi) throws -> Int {
        var st = MDB_stat()
        try LMDBErrors.check(mdb_stat(try activeTxn(), dbi, &st), "cannot read database statistics")
        return st.ms_entries
    }

    /// Walks the keys `lower <= key < upper` (stored-key space; `nil` = unbounded) in order, or in
    /// reverse order, until `visit` returns `false`. The value bytes are valid only during `visit`,
    /// which must not write to `dbi`.
    func walk(
        _ dbi: MDB_dbi, lower: [UInt8]?, upper: [UInt8]?, descending: Bool,
        _ visit: (_ key: [UInt8], _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try walkRaw(dbi, lower: lower, upper: upper, descending: descending) { key, value in
            try visit(Array(key), value)
        }
    }

    /// The value of an entry met by a walk: with `index`, the primary key of its row (a bare entry's
    /// from its key).
    @inline(__always) private func entryValue(_ key: UnsafeRawBufferPointer, _ dv: MDB_val, _ index: IndexDefinition?) throws
        -> UnsafeRawBufferPointer
    {
        let value = UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)
        guard value.isEmpty, let index else { return value }
        return try KeyCodec.primaryKey(ofIndexEntry: key, value: value, index)
    }

    /// The number of keys `lower <= key < upper` (stored-key space) of `dbi`, counting no further
    /// than `limit`.
    func countKeys(_ dbi: MDB_dbi, lower: [UInt8]?, upper: [UInt8]?, limit: Int) throws -> Int {
        guard limit > 0 else { return 0 }
        return try withRange(dbi, lower: lower, upper: upper, descending: false) { cursor in
            var n = 0
            while n < limit, try cursor.next() != nil { n += 1 }
            return n
        }
    }

    /// What the planner may ask for a cost choice over `t`, in this transaction.
    func statistics(_ t: TableDefinition) -> PlanStatistics {
        PlanStatistics(
            rowCount: { try self.entryCount(try self.handle(t.database)) },
            countEntries: { source, ranges, limit in
                let dbi: MDB_dbi
                switch source {
                case .primary: dbi = try self.handle(t.database)
                case .index(let index): dbi = try self.handle(index.database)
                }
                var n = 0
                for r in ranges where n < limit {
                    let s = r.stored
                    n += try self.countKeys(dbi, lower: s.lower, upper: s.upper, limit: limit - n)
                }
                return n
            })
    }

    /// ``walk(_:lower:upper:descending:_:)`` handing the key bytes (valid only during `visit`).
    func walkRaw(
        _ dbi: MDB_dbi, lower: [UInt8]?, upper: [UInt8]?, descending: Bool, index: IndexDefinition? = nil,
        _ visit: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        let txn = try activeTxn()
        // LMDB refuses empty keys: an empty lower bound is no bound, an empty upper bound is empty.
        let lower = lower.flatMap { $0.isEmpty ? nil : $0 }
        if let upper, upper.isEmpty { return }
        var cursor: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, dbi, &cursor), "cannot open a cursor")
        defer { mdb_cursor_close(cursor) }
        var kv = MDB_val()
        var dv = MDB_val()
        func seek(_ key: [UInt8]) -> Int32 {
            key.withUnsafeBytes { k in
                kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                return mdb_cursor_get(cursor, &kv, &dv, MDB_SET_RANGE)
            }
        }
        var rc: Int32
        if !descending {
            rc = lower.map(seek) ?? mdb_cursor_get(cursor, &kv, &dv, MDB_FIRST)
            while rc == 0 {
                let key = UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size)
                if let upper, !KeyCodec.precedes(key, upper) { return }
                guard try visit(key, try entryValue(key, dv, index)) else { return }
                rc = mdb_cursor_get(cursor, &kv, &dv, MDB_NEXT)
            }
        } else {
            if let upper {
                rc = seek(upper)
                if rc == 0 {
                    rc = mdb_cursor_get(cursor, &kv, &dv, MDB_PREV)
                } else if rc == MDB_NOTFOUND {
                    rc = mdb_cursor_get(cursor, &kv, &dv, MDB_LAST)
                }
            } else {
                rc = mdb_cursor_get(cursor, &kv, &dv, MDB_LAST)
            }
            while rc == 0 {
                let key = UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size)
                if let lower, KeyCodec.precedes(key, lower) { return }
                guard try visit(key, try entryValue(key, dv, index)) else { return }
                rc = mdb_cursor_get(cursor, &kv, &dv, MDB_PREV)
            }
        }
        if rc != MDB_NOTFOUND { try LMDBErrors.check(rc, "cannot move a cursor") }
    }

    /// The number of records of `dbi` (every entry) that `filter` matches: a plain cursor loop,
    /// for a count over a whole table.
    func countAll(_ dbi: MDB_dbi, _ filter: RecordFilter) throws -> Int {
        let txn = try activeTxn()
        var handle: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, dbi, &handle), "cannot open a cursor")
        defer { mdb_cursor_close(handle) }
        var kv = MDB_val()
        var dv = MDB_val()
        var n = 0
        var rc = mdb_cursor_get(handle, &kv, &dv, MDB_FIRST)
        if let simple = filter.simple, case .bool = simple.kind, let handle {
            // A boolean column against a literal (`complete == true`): a loop of its own.
            n = try simple.countBool(handle, &rc, &kv, &dv, general: filter)
        } else if let simple = filter.simple {
            // The one-pass test in a loop of its own (no optional test per record).
            while rc == 0 {
                let record = UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)
                if let answer = simple.evaluate(record) {
                    if answer { n &+= 1 }
                } else if try filter.matchesInGeneral(record) {
                    n &+= 1
                }
                rc = mdb_cursor_get(handle, &kv, &dv, MDB_NEXT)
            }
        }
        while rc == 0 {
            if try filter.matches(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)) { n += 1 }
            rc = mdb_cursor_get(handle, &kv, &dv, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try LMDBErrors.check(rc, "cannot move a cursor") }
        return n
    }

    /// Runs `body` with a cursor over the keys `lower <= key < upper` (stored-key space; `nil` =
    /// unbounded) of `dbi`, in order or in reverse order. A loop over ``RangeCursor/next()`` inside
    /// `body` keeps its state in locals of `body` (a closure called per entry, as with
    /// ``walkRaw(_:lower:upper:descending:_:)``, pays dynamic exclusivity checks on the variables
    /// it captures). With `index` (the index `dbi` holds), each entry's value is its row's primary key,
    /// bare entries included.
    func withRange<R>(
        _ dbi: MDB_dbi, lower: [UInt8]?, upper: [UInt8]?, descending: Bool, index: IndexDefinition? = nil,
        _ body: (inout RangeCursor) throws -> R
    ) throws -> R {
        let txn = try activeTxn()
        var handle: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, dbi, &handle), "cannot open a cursor")
        guard let handle else { throw LocalStoreError(.internal, "mdb_cursor_open returned no cursor") }
        defer { mdb_cursor_close(handle) }
        var cursor = RangeCursor(
            cursor: handle, lower: lower.flatMap { $0.isEmpty ? nil : $0 }, upper: upper, descending: descending, index: index)
        return try body(&cursor)
    }

    /// Runs `body` over every row of `t`, streamed from a cursor in primary-key order; a decoding or
    /// cursor error ends the sequence and is thrown after `body` returns.
    /// With `filter`, the stream skips the rows that do not match (``RecordFilter``).
    /// With `withLocation`, each row carries its stored key and row number (``QueryRunner/withLocation``).
    func withAllRows<R>(_ t: TableDefinition, filter: RecordFilter? = nil, withLocation: Bool = false, _ body: (RowStream) -> R) throws -> R {
        let txn = try activeTxn()
        var cursor: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, try handle(t.database), &cursor), "cannot open a cursor")
        guard let cursor else { throw LocalStoreError(.internal, "mdb_cursor_open returned no cursor") }
        defer { mdb_cursor_close(cursor) }
        let failure = RowStream.Failure()
        let result = body(RowStream(cursor: cursor, schema: t.schema, failure: failure, filter: filter, withLocation: withLocation))
        if let error = failure.error { throw error }
        return result
    }

    // MARK: Rows

    /// The row of `t` whose id is `id` (ids compared with NOCASE for strings).
    func findRow(_ t: TableDefinition, id: Value) throws -> StoredRow? {
        let dbi = try handle(t.database)
        let schema = t.schema
        let full = KeyCodec.idKey(id)
        if full.count <= KeyCodec.prefixLimit {
            guard let decoded = try withValue(dbi, full, { try RecordCodec.decode($0, schema: schema) }) else { return nil }
            return StoredRow(key: full, row: decoded.row, rowId: decoded.rowId)
        }
        return try findLongIdRow(schema, dbi, full: full)
    }

    /// ``findRow(_:id:)`` for an id whose key passes ``KeyCodec/prefixLimit``: every row whose id shares
    /// the first `prefixLimit` bytes is stored under that prefix and its own row number; the ids
    /// themselves are compared.
    private func findLongIdRow(_ schema: TableSchema, _ dbi: MDB_dbi, full: [UInt8]) throws -> StoredRow? {
        let prefix = Array(full[0..<KeyCodec.prefixLimit])
        var found: StoredRow?
        try walk(dbi, lower: prefix, upper: KeyCodec.successor(prefix), descending: false) { key, value in
            guard key.count == KeyCodec.longKeyLength else { return true }
            let decoded = try RecordCodec.decode(value, schema: schema)
            if KeyCodec.idKey(decoded.row[schema.idIndex]) == full {
                found = StoredRow(key: key, row: decoded.row, rowId: decoded.rowId)
                return false
            }
            return true
        }
        return found
    }

    /// Runs `body` on the value stored under the key bytes `key`; `nil` when there is none.
    func withValue<R>(_ dbi: MDB_dbi, raw key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let txn = try activeTxn()
        var kv = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var dv = MDB_val()
        let rc = mdb_get(txn, dbi, &kv, &dv)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBErrors.check(rc, "cannot read")
        return try body(UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size))
    }

    /// The row stored under a primary key (as found in an index).
    func row(_ t: TableDefinition, storedKey: [UInt8], dbi: MDB_dbi) throws -> [Value] {
        guard let decoded = try withValue(dbi, storedKey, { try RecordCodec.decode($0, schema: t.schema) }) else {
            throw LMDBErrors.danglingIndexEntry(table: t.schema.name)
        }
        return decoded.row
    }

    static func indexKey(_ index: IndexDefinition, _ schema: TableSchema, row: [Value], rowId: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        appendIndexKey(index, row: row, rowId: rowId, id: .value(row[schema.idIndex]), into: &out)
        return out
    }

    /// Where an index key's id part comes from.
    enum IdPart {
        /// Encoded from the id value.
        case value(Value)
        /// The id's key bytes, already encoded (a primary key that is not truncated is exactly them).
        case key([UInt8])
    }

    /// Appends the stored index key of `row` (``indexKey(_:_:row:rowId:)``) to `out`.
    static func appendIndexKey(_ index: IndexDefinition, row: [Value], rowId: UInt64, id: IdPart, into out: inout [UInt8]) {
        let start = out.count
        for c in index.components {
            if c.noCase {
                KeyCodec.appendNoCaseComponent(row[c.column], into: &out)
            } else if c.descending {
                KeyCodec.appendDescendingComponent(row[c.column], into: &out)
            } else {
                KeyCodec.appendComponent(row[c.column], into: &out)
            }
        }
        switch id {
        case .value(let v): KeyCodec.appendId(v, into: &out)
        case .key(let k): out.append(contentsOf: k)
        }
        if out.count - start > KeyCodec.prefixLimit {
            // `KeyCodec.storedKey`: the first bytes and the row number.
            out.removeSubrange((start + KeyCodec.prefixLimit)...)
            KeyCodec.appendBigEndian(rowId, into: &out)
        }
    }

    // MARK: Reads

    func schema(of table: String) -> TableSchema? { catalog.table(table)?.schema }

    func read(table name: String, id: Value) throws -> Item? {
        // A read transaction's catalog is a committed one: its table, database handle and item
        // builder come from the plan cached for its generation (no folding, hashing or handle lookup).
        guard !isWrite else {
            let t = try table(name)
            try t.schema.checkId(id)
            return try findRow(t, id: id).map { TxnContext.item(row: $0.row, of: t.schema) }
        }
        let plan = try environment.readByIdPlan(name, in: catalog)
        let t = plan.table
        try t.schema.checkId(id)
        var key: [UInt8] = []
        key.reserveCapacity(32)
        KeyCodec.appendId(id, into: &key)
        if key.count <= KeyCodec.prefixLimit {
            return try withValue(plan.dbi, key) { try plan.items.item($0) }
        }
        return try findRow(t, id: id).map { TxnContext.item(row: $0.row, of: t.schema) }
    }

    /// A whole decoded row (values in column order) as an item keyed by the columns' defined names.
    static func item(row: [Value], of schema: TableSchema) -> Item {
        var values: [String: Value] = Dictionary(minimumCapacity: schema.columns.count)
        for (n, c) in schema.columns.enumerated() { values[c.name] = row[n] }
        return Item(values)
    }

    func read(_ query: Query) throws -> ReadResult {
        // A read transaction's catalog is committed: the table, the resolved query and (when it depends
        // on nothing else) the plan of a query read before in the same catalog generation are reused.
        let cached = isWrite ? nil : environment.queryPlans.withLock { $0.entry(query, generation: catalog.generation) }
        if let cached {
            let result = try QueryRunner(context: self, table: cached.table, query: cached.query)
                .items(wholeRows: cached.wholeRows, plan: cached.plan)
            return ReadResult(items: result.items, totalCount: cached.query.includeTotalCount ? result.count : nil)
        }
        let t = try table(query.table)
        let q = try ResolvedQuery(query, schema: t.schema)
        if q.includeTotalCount, case .constant(true) = q.predicate {
            // The count of all rows is the primary database's entry count.
            let count = try entryCount(try handle(t.database))
            var plain = query
            plain.includeTotalCount = false
            let items = try QueryRunner(context: self, table: t, query: try ResolvedQuery(plain, schema: t.schema)).items().items
            return ReadResult(items: items, totalCount: count)
        }
        // A read transaction's catalog is committed: the whole-row item builder of the table's cached
        // read-by-id plan serves every query returning all columns (no names hashed per query).
        let wholeRows = isWrite ? nil : try environment.readByIdPlan(query.table, in: catalog).items
        let result = try QueryRunner(context: self, table: t, query: q).items(wholeRows: wholeRows)
        if !isWrite, Query.isPlanCacheable(query) {
            let entry = CachedQueryPlan(table: t, query: q, plan: result.reusable, wholeRows: wholeRows)
            environment.queryPlans.withLock { $0.keep(entry, for: query, generation: catalog.generation) }
        }
        return ReadResult(items: result.items, totalCount: q.includeTotalCount ? result.count : nil)
    }

    func explain(_ query: Query) throws -> String {
        let t = try table(query.table)
        let q = try ResolvedQuery(query, schema: t.schema)
        return try QueryPlanner(table: t, query: q, statistics: statistics(t)).plan().description(schema: t.schema)
    }

    func accessPath(_ query: Query) throws -> QueryAccessPath {
        let t = try table(query.table)
        let q = try ResolvedQuery(query, schema: t.schema)
        return try QueryPlanner(table: t, query: q, statistics: statistics(t)).plan().accessPath(schema: t.schema)
    }

    // MARK: Writes

    /// Applies `op` (checking all of its input first) and logs it for replay.
    func perform(_ op: WriteOp) throws {
        if needsRestart { throw RestartSignal() }
        if let failure { throw failure }
        while true {
            do {
                try apply(op)
                log.append(op)
                return
            } catch let full as MapFullSignal {
                try regrow(full)
            }
        }
    }

    /// Runs the writing phase of a mutation: any failure but a full map leaves the transaction
    /// half-written, so it is remembered and the transaction can only roll back.
    private func executing(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let full as MapFullSignal {
            throw full
        } catch {
            let e = error as? LocalStoreError ?? LocalStoreError(.internal, "\(error)")
            failure = e
            throw e
        }
    }

    private func apply(_ op: WriteOp) throws {
        switch op {
        case .upsert(let items, let table, let options):
            let t = try self.table(table)
            let prepared = try items.map { try t.schema.prepare($0, options: options) }
            for p in prepared {
                for a in p.assignments {
                    if case .json(let j) = a.value, RecordCodec.depth(j) > RecordCodec.maximumJSONDepth {
                        let c = t.schema.columns[a.column].name
                        throw LocalStoreError(
                            .invalidValue,
                            "column '\(c)' of table '\(t.schema.name)' cannot store json nested deeper than \(RecordCodec.maximumJSONDepth) levels",
                            table: t.schema.name, column: c)
                    }
                }
            }
            if prepared.isEmpty { return }
            // Before anything is written, so a refused item leaves the transaction as it was.
            try t.schema.checkMergedSizes(prepared, options: options) { id in
                try findRow(t, id: id).map { found in found.row.map(TableSchema.byteCount(of:)) }
            }
            try executing { try upsertRows(t, prepared) }
            if changes != nil { changes?.upserted(prepared.map(\.id), in: t.schema.name) }
        case .deleteIds(let ids, let table):
            let t = try self.table(table)
            for id in ids { try t.schema.checkId(id) }
            if ids.isEmpty { return }
            try executing {
                let dbis = try DeleteHandles(self, t)
                for id in ids {
                    if let found = try findRow(t, id: id) { try deleteRow(t, found, dbis) }
                }
            }
            if changes != nil { changes?.deleted(ids, in: t.schema.name) }
        case .deleteMatching(let query):
            let t = try self.table(query.table)
            let q = try ResolvedQuery(query, schema: t.schema)
            if let deleted = try deleteWalking(t, q) {
                if deleted > 0, changes != nil { changes?.changedMany(in: t.schema.name) }
                return
            }
            // The rows come with where they are stored: deleted without being looked up again.
            let rows = try QueryRunner(context: self, table: t, query: q, withLocation: true).run().rows
            if rows.isEmpty { return }
            let width = t.schema.columns.count
            try executing {
                let dbis = try DeleteHandles(self, t)
                for row in rows {
                    guard let found = QueryRunner.location(row, width: width) else {
                        throw LocalStoreError(.internal, "a row of table '\(t.schema.name)' to delete has no location")
                    }
                    try deleteRow(t, found, dbis)
                }
            }
            if changes != nil { changes?.changedMany(in: t.schema.name) }
        case .define(let schema, let system):
            try define(schema, system: system)
        }
    }

    private func upsertRows(_ t: TableDefinition, _ prepared: [PreparedItem]) throws {
        let primary = try handle(t.database)
        let indexes = try t.indexes.map { ($0, try handle($0.database)) }
        let width = t.schema.columns.count
        let idIndex = t.schema.idIndex
        // The index keys of a row are built into these, reused from row to row; their id part is the
        // primary key's bytes when that is not truncated (it is then exactly the id's key).
        var oldKey: [UInt8] = []
        var newKey: [UInt8] = []
        if !indexes.isEmpty {
            oldKey.reserveCapacity(64)
            newKey.reserveCapacity(64)
        }
        for p in prepared {
            if var found = try findRow(t, id: p.id) {
                let old = found.row
                p.merge(into: &found.row)
                let id: IdPart = found.key.count <= KeyCodec.prefixLimit ? .key(found.key) : .value(found.row[idIndex])
                for (index, dbi) in indexes {
                    // An update that leaves the index's columns as they were (a config row's value, an
                    // item's text) keeps its entry: the keys are not built to be compared.
                    if index.components.allSatisfy({ KeyCodec.encodesAlike(old[$0.column], found.row[$0.column]) }) { continue }
                    oldKey.removeAll(keepingCapacity: true)
                    newKey.removeAll(keepingCapacity: true)
                    TxnContext.appendIndexKey(index, row: old, rowId: found.rowId, id: id, into: &oldKey)
                    TxnContext.appendIndexKey(index, row: found.row, rowId: found.rowId, id: id, into: &newKey)
                    if oldKey != newKey {
                        try delete(dbi, oldKey)
                        try put(dbi, newKey, indexValue(newKey, found.key))
                    }
                }
                try put(primary, found.key, RecordCodec.encode(found.row, rowId: found.rowId, layout: environment.recordLayout))
            } else {
                let rowId = try allocateRowId()
                let row = p.newRow(columnCount: width)
                let key = KeyCodec.storedKey(KeyCodec.idKey(p.id), rowId: rowId)
                try put(primary, key, RecordCodec.encode(row, rowId: rowId, layout: environment.recordLayout))
                let id: IdPart = key.count <= KeyCodec.prefixLimit ? .key(key) : .value(row[idIndex])
                for (index, dbi) in indexes {
                    newKey.removeAll(keepingCapacity: true)
                    TxnContext.appendIndexKey(index, row: row, rowId: rowId, id: id, into: &newKey)
                    try put(dbi, newKey, indexValue(newKey, key))
                }
            }
        }
    }

    /// The value of the index entry `key` of the row stored under `primaryKey`: empty (a bare entry)
    /// when the store writes them and the key is whole — it then ends in exactly `primaryKey`
    /// (``KeyCodec/primaryKey(ofIndexEntry:value:_:)``) — and `primaryKey` otherwise.
    @inline(__always) func indexValue(_ key: [UInt8], _ primaryKey: [UInt8]) -> [UInt8] {
        environment.bareIndexEntries && key.count <= KeyCodec.prefixLimit ? [] : primaryKey
    }

    /// The handles a deletion from a table writes to, looked up once per operation.
    final class DeleteHandles {
        let primary: MDB_dbi
        let indexes: [(IndexDefinition, MDB_dbi)]
        let idIndex: Int
        /// Space for the index keys of the row being deleted, reused from row to row.
        var scratch: [UInt8] = []

        init(_ context: TxnContext, _ t: TableDefinition) throws {
            primary = try context.handle(t.database)
            indexes = try t.indexes.map { ($0, try context.handle($0.database)) }
            idIndex = t.schema.idIndex
            scratch.reserveCapacity(64)
        }
    }

    private func deleteRow(_ t: TableDefinition, _ found: StoredRow, _ dbis: DeleteHandles) throws {
        try delete(dbis.primary, found.key)
        // A primary key that is not truncated is the id's key itself: not encoded again per index.
        let id: IdPart = found.key.count <= KeyCodec.prefixLimit ? .key(found.key) : .value(found.row[dbis.idIndex])
        var key: [UInt8] = []
        swap(&key, &dbis.scratch)
        defer { swap(&key, &dbis.scratch) }
        for (index, dbi) in dbis.indexes {
            key.removeAll(keepingCapacity: true)
            TxnContext.appendIndexKey(index, row: found.row, rowId: found.rowId, id: id, into: &key)
            // A missing index entry is not fatal here: the row is going away.
            try delete(dbi, key)
        }
    }

    /// `delete(matching:)` without `top` and `skip` over a plan that reads one key range (of an index
    /// or of the primary database) or every row: the range is walked with a cursor of the write
    /// transaction and each matching row is deleted where the walk meets it — the walked index entry
    /// by that cursor (`mdb_cursor_del`), the record by a second cursor already positioned by its
    /// lookup, the row's other index entries by key. Only the columns the other indexes hold (and the
    /// id, for a truncated primary key) are read from the record, into a row reused for every record.
    /// The number of rows deleted, or `nil` (nothing done) for any other query or plan.
    private func deleteWalking(_ t: TableDefinition, _ q: ResolvedQuery) throws -> Int? {
        guard q.top == nil, q.skip == 0 else { return nil }
        let walked: IndexDefinition?
        let range: KeyRange
        switch try QueryPlanner(table: t, query: q, statistics: statistics(t)).plan() {
        case .ranges(.primary, let ranges) where ranges.count == 1: (walked, range) = (nil, ranges[0])
        case .ranges(.index(let index), let ranges) where ranges.count == 1: (walked, range) = (index, ranges[0])
        case .compoundRanges(let index, let ranges, _) where ranges.count == 1: (walked, range) = (index, ranges[0])
        case .scan: (walked, range) = (nil, .all)
        default: return nil
        }
        let s = range.stored
        // LMDB refuses empty keys: an empty lower bound is no bound, an empty upper bound is empty.
        let lower = s.lower.flatMap { $0.isEmpty ? nil : $0 }
        if let upper = s.upper, upper.isEmpty { return 0 }
        let txn = try activeTxn()
        let schema = t.schema
        let primary = try handle(t.database)
        let others = try t.indexes.filter { $0.database != walked?.database }.map { ($0, try handle($0.database)) }
        var needed = ColumnSet()
        for (index, _) in others { for c in index.components { needed.insert(c.column) } }
        let columns = needed.members
        let fields = RecordFields(schema: schema, through: max(columns.last ?? -1, schema.idIndex))
        let filter = RecordFilter(q)
        var row = [Value](repeating: .null, count: schema.columns.count)
        var pk: [UInt8] = []
        pk.reserveCapacity(KeyCodec.longKeyLength)
        var key: [UInt8] = []
        key.reserveCapacity(64)
        var walk: OpaquePointer?
        try LMDBErrors.check(mdb_cursor_open(txn, try walked.map { try handle($0.database) } ?? primary, &walk), "cannot open a cursor")
        defer { mdb_cursor_close(walk) }
        var records = walk
        if walked != nil {
            records = nil
            try LMDBErrors.check(mdb_cursor_open(txn, primary, &records), "cannot open a cursor")
        }
        defer { if walked != nil { mdb_cursor_close(records) } }
        var deleted = 0
        var wrote = false
        do {
            var kv = MDB_val()
            var dv = MDB_val()
            var rc: Int32
            if let lower {
                rc = lower.withUnsafeBytes { k in
                    kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                    return mdb_cursor_get(walk, &kv, &dv, MDB_SET_RANGE)
                }
            } else {
                rc = mdb_cursor_get(walk, &kv, &dv, MDB_FIRST)
            }
            while rc == 0 {
                let k = UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size)
                if let upper = s.upper, !KeyCodec.precedes(k, upper) { break }
                // The primary key is copied: the page holding it changes when the entry is deleted.
                pk.removeAll(keepingCapacity: true)
                let record: UnsafeRawBufferPointer
                if walked == nil {
                    pk.append(contentsOf: k)
                    record = UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)
                } else {
                    pk.append(contentsOf: try entryValue(k, dv, walked))
                    var rv = MDB_val()
                    let found = pk.withUnsafeMutableBytes { p in
                        var pv = MDB_val(mv_size: p.count, mv_data: p.baseAddress)
                        return mdb_cursor_get(records, &pv, &rv, MDB_SET_KEY)
                    }
                    if found == MDB_NOTFOUND {
                        throw LMDBErrors.danglingIndexEntry(table: schema.name)
                    }
                    try LMDBErrors.check(found, "cannot read")
                    record = UnsafeRawBufferPointer(start: rv.mv_data, count: rv.mv_size)
                }
                guard try filter.matches(record) else {
                    rc = mdb_cursor_get(walk, &kv, &dv, MDB_NEXT)
                    continue
                }
                var rowId: UInt64 = 0
                var id = IdPart.key([])
                if !others.isEmpty {
                    try fields.locate(record)
                    for c in columns { row[c] = try fields.value(c) }
                    rowId = try fields.rowId()
                    id = pk.count <= KeyCodec.prefixLimit ? .key(pk) : .value(try fields.value(schema.idIndex))
                }
                // The record and the walked entry: deleted where the cursors are (after `mdb_cursor_del`,
                // `MDB_NEXT` returns the entry that followed the deleted one).
                wrote = true
                try LMDBErrors.check(mdb_cursor_del(records, 0), "cannot delete", env: env)
                deleted += 1
                if walked != nil { try LMDBErrors.check(mdb_cursor_del(walk, 0), "cannot delete", env: env) }
                for (index, dbi) in others {
                    key.removeAll(keepingCapacity: true)
                    TxnContext.appendIndexKey(index, row: row, rowId: rowId, id: id, into: &key)
                    // A missing index entry is not fatal here: the row is going away.
                    try delete(dbi, key)
                }
                rc = mdb_cursor_get(walk, &kv, &dv, MDB_NEXT)
            }
            if rc != 0 && rc != MDB_NOTFOUND { try LMDBErrors.check(rc, "cannot move a cursor") }
        } catch let full as MapFullSignal {
            throw full
        } catch {
            // Nothing written yet: the transaction stays usable, as after a failed read.
            guard wrote else { throw error }
            let e = error as? LocalStoreError ?? LocalStoreError(.internal, "\(error)")
            failure = e
            throw e
        }
        return deleted
    }

    private func allocateRowId() throws -> UInt64 {
        if nextRowId == nil {
            let meta = try handle(MetaKey.database)
            guard let stored = try withValue(meta, MetaKey.nextRowId, { Array($0) }), stored.count == 8 else {
                throw LMDBErrors.corrupt("the catalog has no row counter")
            }
            nextRowId = KeyCodec.readBigEndian(stored[...])
        }
        let id = nextRowId ?? 1
        nextRowId = id + 1
        nextRowIdDirty = true
        return id
    }

    private func createDatabase(_ name: String) throws {
        let txn = try activeTxn()
        if !holdsHandleLock {
            environment.handleLock.lock()
            holdsHandleLock = true
        }
        var dbi: MDB_dbi = 0
        try LMDBErrors.check(mdb_dbi_open(txn, name, UInt32(MDB_CREATE), &dbi), "cannot create database '\(name)'", env: env)
        createdHandles[name] = dbi
    }

    /// Creates a table, or merges a new definition into an existing one (new columns, new indexes).
    private func define(_ schema: TableSchema, system: TableDefinition?) throws {
        let key = Identifier.fold(schema.name)
        var def: TableDefinition
        let newIndexes: [IndexDefinition]
        let isNew: Bool
        if let existing = catalog.tables[key] {
            if let system {
                guard SystemTableShapes.isCompatible(existing.schema, system.schema) else {
                    throw LocalStoreError(
                        .schemaConflict,
                        "table '\(existing.schema.name)' exists but does not have the columns of a system table",
                        table: existing.schema.name)
                }
                return
            }
            let merged = try existing.schema.merged(with: schema)
            if merged == existing.schema { return }
            def = existing
            def.schema = merged
            def.addMissingColumnIndexes()
            newIndexes = def.indexes.filter { !existing.indexes.contains($0) }
            isNew = false
        } else {
            def = system ?? TableDefinition.user(schema)
            newIndexes = def.indexes
            isNew = true
        }
        let meta = try handle(MetaKey.database)
        try executing {
            if isNew { try createDatabase(def.database) }
            for index in newIndexes { try createDatabase(index.database) }
            if !isNew && !newIndexes.isEmpty {
                let primary = try handle(def.database)
                let targets = try newIndexes.map { ($0, try handle($0.database)) }
                let schema = def.schema
                try walk(primary, lower: nil, upper: nil, descending: false) { storedKey, value in
                    let decoded = try RecordCodec.decode(value, schema: schema)
                    for (index, dbi) in targets {
                        let key = TxnContext.indexKey(index, schema, row: decoded.row, rowId: decoded.rowId)
                        try put(dbi, key, indexValue(key, storedKey))
                    }
                    return true
                }
            }
            let encoded = def.encoded()
            if encoded.first == TableDefinition.compoundFormatVersion {
                // In the definition's transaction: older versions then refuse the store with
                // versionMismatch instead of failing on a definition they cannot parse.
                let stored = try withValue(meta, MetaKey.format) { MetaKey.version(of: $0) } ?? nil
                if (stored ?? 0) < MetaKey.compoundIndexFormatVersion {
                    try put(meta, MetaKey.format, MetaKey.formatValue(MetaKey.compoundIndexFormatVersion))
                }
            }
            try put(meta, MetaKey.table(def.schema.name), encoded)
            var generation: [UInt8] = []
            KeyCodec.appendBigEndian(catalog.generation + 1, into: &generation)
            try put(meta, MetaKey.generation, generation)
        }
        catalog.tables[key] = def
        catalog.generation += 1
        catalogChanged = true
    }

    // MARK: Savepoints

    /// Where a nested write began: the length of the mutation log.
    struct Savepoint {
        let logCount: Int
        let wasFailed: Bool
    }

    /// The current position, for ``rollback(to:)``.
    func savepoint() -> Savepoint { Savepoint(logCount: log.count, wasFailed: failure != nil || needsRestart) }

    /// Undoes the mutations made since `savepoint`: aborts the transaction, begins a new one and replays
    /// the log up to the savepoint (the same replay as after a map growth; the process's write lock and
    /// the cross-process lock are held, so the new transaction starts from the same committed state).
    /// A transaction that was already failed at the savepoint stays failed; a failed replay marks it
    /// failed (it can then only roll back).
    func rollback(to savepoint: Savepoint) {
        guard !savepoint.wasFailed, !needsRestart, txn != nil, log.count > savepoint.logCount || failure != nil else { return }
        end()
        log.removeSubrange(savepoint.logCount...)
        nextRowId = nil
        nextRowIdDirty = false
        catalog = initialCatalog
        catalogChanged = false
        failure = nil
        do {
            let fresh = try environment.beginTransaction(readOnly: false)
            txn = fresh
            guard mdb_txn_id(fresh) == startTxnId else {
                needsRestart = true
                return
            }
            if changes != nil { changes = ChangeCollector() }
            do {
                for op in log { try apply(op) }
            } catch let full as MapFullSignal {
                try regrow(full)
            }
        } catch {
            failure = error as? LocalStoreError ?? LocalStoreError(.internal, "rolling back to a savepoint: \(error)")
        }
    }

    // MARK: Growth, replay, commit

    /// Aborts the dead transaction, grows the map, begins again and replays the log.
    private func regrow(_ first: MapFullSignal) throws {
        var full = first
        while true {
            end()
            nextRowId = nil
            nextRowIdDirty = false
            catalog = initialCatalog
            catalogChanged = false
            environment.gate.unlockShared()
            do {
                try environment.growMap(from: full.mapSize)
            } catch {
                environment.gate.lockShared()
                failure = error as? LocalStoreError ?? LocalStoreError(.full, "\(error)")
                throw failure ?? error
            }
            if let hook = environment.afterGrowthAbortHook.withLock({ $0 }) { hook() }
            environment.gate.lockShared()
            do {
                txn = try environment.beginTransaction(readOnly: false)
            } catch {
                failure = error as? LocalStoreError ?? LocalStoreError(.internal, "\(error)")
                throw error
            }
            if let txn, mdb_txn_id(txn) != startTxnId {
                needsRestart = true
                throw RestartSignal()
            }
            do {
                // The replay records the logged writes again.
                if changes != nil { changes = ChangeCollector() }
                for op in log { try apply(op) }
                return
            } catch let again as MapFullSignal {
                full = again
            }
        }
    }

    /// Commits, growing the map and replaying when the commit itself finds the map full.
    func commit() throws {
        while true {
            do {
                if nextRowIdDirty, let next = nextRowId {
                    var bytes: [UInt8] = []
                    KeyCodec.appendBigEndian(next, into: &bytes)
                    try put(try handle(MetaKey.database), MetaKey.nextRowId, bytes)
                }
                let txn = try activeTxn()
                self.txn = nil
                try environment.commit(txn, signalsMapFull: true)
                environment.publish(handles: createdHandles, catalog: catalogChanged ? catalog : nil)
                createdHandles = [:]
                releaseHandleLock()
                return
            } catch let full as MapFullSignal {
                try regrow(full)
            }
        }
    }
}

/// The rows of a table in primary-key order, decoded one at a time from an LMDB cursor (so a full
/// scan with `top` keeps only the rows the evaluator's bounded heap keeps).
struct RowStream: Sequence, IteratorProtocol {
    final class Failure {
        var error: Error?
    }

    let cursor: OpaquePointer
    let schema: TableSchema
    let failure: Failure
    private var started = false

    let filter: RecordFilter?
    let withLocation: Bool
    private let idIndex: Int

    init(cursor: OpaquePointer, schema: TableSchema, failure: Failure, filter: RecordFilter? = nil, withLocation: Bool = false) {
        self.cursor = cursor
        self.schema = schema
        idIndex = schema.idIndex
        self.failure = failure
        self.filter = filter
        self.withLocation = withLocation
    }

    mutating func next() -> [Value]? {
        guard failure.error == nil else { return nil }
        var kv = MDB_val()
        var dv = MDB_val()
        while true {
            let rc = mdb_cursor_get(cursor, &kv, &dv, started ? MDB_NEXT : MDB_FIRST)
            started = true
            if rc == MDB_NOTFOUND { return nil }
            do {
                try LMDBErrors.check(rc, "cannot move a cursor")
                let record = UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)
                if let filter, try !filter.matches(record) { continue }
                let decoded = try RecordCodec.decode(record, schema: schema, idIndex: idIndex)
                guard withLocation else { return decoded.row }
                let key = Array(UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size))
                return QueryRunner.located(decoded.row, key: key, rowId: decoded.rowId)
            } catch {
                failure.error = error
                return nil
            }
        }
    }
}

/// A cursor over a range of keys (see ``TxnContext/withRange(_:lower:upper:descending:_:)``).
struct RangeCursor {
    let cursor: OpaquePointer
    let lower: [UInt8]?
    let upper: [UInt8]?
    let descending: Bool
    /// The index the cursor walks, if any: each entry's value is then the primary key of its row, taken
    /// from the key of a bare entry (``KeyCodec/primaryKey(ofIndexEntry:value:_:)``).
    let index: IndexDefinition?
    private var started = false
    private var done = false

    init(cursor: OpaquePointer, lower: [UInt8]?, upper: [UInt8]?, descending: Bool, index: IndexDefinition? = nil) {
        self.cursor = cursor
        self.lower = lower
        self.upper = upper
        self.descending = descending
        self.index = index
        // LMDB refuses empty keys: an empty upper bound is an empty range.
        if let upper, upper.isEmpty { done = true }
    }

    /// The next entry (its bytes valid until the next call), or `nil` at the end of the range.
    @inline(__always) mutating func next() throws -> (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
        if done { return nil }
        var kv = MDB_val()
        var dv = MDB_val()
        var rc: Int32
        if started {
            rc = mdb_cursor_get(cursor, &kv, &dv, descending ? MDB_PREV : MDB_NEXT)
        } else {
            started = true
            rc = first(&kv, &dv)
        }
        if rc != 0 {
            done = true
            if rc != MDB_NOTFOUND { try LMDBErrors.check(rc, "cannot move a cursor") }
            return nil
        }
        let key = UnsafeRawBufferPointer(start: kv.mv_data, count: kv.mv_size)
        if !descending {
            if let upper, !KeyCodec.precedes(key, upper) {
                done = true
                return nil
            }
        } else if let lower, KeyCodec.precedes(key, lower) {
            done = true
            return nil
        }
        let value = UnsafeRawBufferPointer(start: dv.mv_data, count: dv.mv_size)
        if value.isEmpty, let index {
            return (key, try KeyCodec.primaryKey(ofIndexEntry: key, value: value, index))
        }
        return (key, value)
    }

    private func seek(_ key: [UInt8], _ kv: inout MDB_val, _ dv: inout MDB_val) -> Int32 {
        key.withUnsafeBytes { k in
            kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            return mdb_cursor_get(cursor, &kv, &dv, MDB_SET_RANGE)
        }
    }

    private func first(_ kv: inout MDB_val, _ dv: inout MDB_val) -> Int32 {
        if !descending {
            if let lower { return seek(lower, &kv, &dv) }
            return mdb_cursor_get(cursor, &kv, &dv, MDB_FIRST)
        }
        guard let upper else { return mdb_cursor_get(cursor, &kv, &dv, MDB_LAST) }
        let rc = seek(upper, &kv, &dv)
        if rc == 0 { return mdb_cursor_get(cursor, &kv, &dv, MDB_PREV) }
        if rc == MDB_NOTFOUND { return mdb_cursor_get(cursor, &kv, &dv, MDB_LAST) }
        return rc
    }
}

/// Builds a query's items exactly as `ResolvedQuery.project` does (the projected columns under their
/// defined names) from decoded rows. A query of every column, in schema order, of a read transaction
/// gets row-form items under the table's cached whole-row layout, each holding its decoded row as it
/// is (no name hashed, no dictionary per row). Otherwise the names are hashed once per query into a
/// dictionary of column positions, and each item is that dictionary's `mapValues` — same keys, same
/// hash table layout, the row's values filled in. (Making a layout for every other query costs more
/// than the dictionaries of a small result: +14.8 k instructions per `setDeltaToken`, whose write
/// transaction reads one row.)
struct ItemProjector {
    private let positions: [String: Int]
    /// The whole-row layout, when the query returns every column in schema order and one is cached.
    private let wholeRowLayout: ItemLayout?
    private let width: Int

    init(_ query: ResolvedQuery, wholeRows: RecordItemBuilder? = nil) {
        var positions: [String: Int] = Dictionary(minimumCapacity: query.projection.count)
        for n in query.projection { positions[query.schema.columns[n].name] = n }
        self.positions = positions
        let width = query.schema.columns.count
        self.width = width
        var whole = query.projection.count == width
        if whole {
            for (k, n) in query.projection.enumerated() where k != n {
                whole = false
                break
            }
        }
        wholeRowLayout = whole ? wholeRows?.layout.flatMap { $0.names.count == width ? $0 : nil } : nil
    }

    func item(_ row: [Value]) -> Item {
        if let layout = wholeRowLayout, row.count == width { return Item(layout: layout, row: row) }
        return Item(positions.mapValues { row[$0] })
    }

    func items(_ rows: [[Value]]) -> [Item] {
        if rows.isEmpty { return [] }
        return rows.map(item)
    }
}
