import Foundation
import LocalStore
import Synchronization

/// The writes of one write transaction, each call atomic: a failed call and a savepoint undo exactly their
/// own writes, in one of three ways:
/// - With the engine's savepoints, an outermost atomic call (one made in the write body, a nested write)
///   sets one and rolls back to it when it fails; the calls inside it undo from a log of what each of their
///   puts and deletes replaced. So a failure costs one engine rollback at most (RocksDB's rebuilds its
///   index of the transaction's writes).
/// - With the engine's restarts (and no savepoints), every put and delete of the transaction is kept (the
///   key and value as written: no read); a failed call restarts the engine's transaction and writes again
///   what was written before the call. A failure costs a replay of the transaction so far (as LMDBStore's).
///   The same replay answers an engine that began the transaction again on its own
///   (``OrderedKeyValueRestarted``: LMDB's map grew).
/// - Otherwise, every atomic call undoes from the log of what its writes replaced.
///
/// Inside a composite body (``compositely(_:)``, ``unguarded(_:)``), whose failure undoes all of it, the
/// calls are not atomic one by one: no savepoint, no log of their own.
final class KVWrites<Writer: OrderedKeyValueWriter> {
    let writer: Writer
    let catalog: KVCatalog
    /// Whether the engine undoes writes (``OrderedKeyValueWriter/hasSavepoints``).
    private let engineSavepoints: Bool
    /// Whether a failed call restarts the engine's transaction and replays ``redo`` (``OrderedKeyValueWriter/canRestart``).
    let restarts: Bool
    /// Whether an atomic call running set an engine savepoint (the outermost one does, with engine savepoints).
    private var inSavepoint = false
    /// The atomic calls running that undo their writes from the log (``atomically(_:)``).
    private var frames = 0
    /// The composite bodies running: a call inside one needs no undo of its own.
    private var composites = 0
    /// What each write replaced, kept while an atomic call that undoes from it runs.
    private var undo: [(key: [UInt8], old: [UInt8]?)] = []
    /// One put (key, value) or delete (key, `nil`).
    typealias Write = (key: [UInt8], value: [UInt8]?)
    /// With restarts: every put and delete of the transaction, in order (a replay after a restart, the
    /// engine's or a failed call's, writes them again) — except, unless the engine restarts on its own,
    /// those of a transaction unguarded from its start (a store call's, which no call undoes).
    private(set) var redo: [Write] = []
    /// Whether ``redo`` holds every write of the transaction.
    private(set) var redoIsComplete = true
    /// Whether the engine may restart the transaction on its own (``OrderedKeyValueWriter/restartsOnItsOwn``).
    private let keepsEverything: Bool
    /// Set when undoing failed: the transaction can then only roll back.
    private(set) var failure: LocalStoreError?

    init(_ writer: Writer, catalog: KVCatalog) {
        self.writer = writer
        self.catalog = catalog
        // An engine that restarts on its own needs the replay whatever else it offers: its savepoints
        // would not survive a restart.
        restarts = writer.canRestart && (writer.restartsOnItsOwn || !writer.hasSavepoints)
        engineSavepoints = writer.hasSavepoints && !restarts
        keepsEverything = restarts && writer.restartsOnItsOwn
    }

    /// A restart of the engine's own in a transaction that cannot replay (the engine declares no
    /// ``OrderedKeyValueWriter/canRestart``): its writes are lost, so it can only roll back.
    private func unreplayable(_ restarted: OrderedKeyValueRestarted) -> LocalStoreError {
        let error = LocalStoreError(
            .ioError, "the engine began a write transaction again (\(restarted.reason)) but cannot restart: its writes are lost, the transaction can only roll back")
        failure = error
        return error
    }

    var reads: KVReads { KVReads(reader: writer, catalog: catalog) }

    /// Whether a write must be logged: while an atomic call that undoes from the log runs.
    private var logging: Bool { frames > 0 }

    /// Whether a write must be kept for a replay: always when the engine restarts on its own, else unless the
    /// transaction runs unguarded from its start.
    private var keeping: Bool { keepsEverything || composites == 0 || frames > 0 }

    /// Keeps `write` when it must be kept (else ``redo`` is no longer complete).
    private func keep(_ write: Write) {
        if keeping { redo.append(write) } else { redoIsComplete = false }
    }

    /// Answers a restart of the engine's own (`restarted`): writes again everything the transaction wrote.
    private func replayAfter(_ restarted: OrderedKeyValueRestarted) throws {
        guard redoIsComplete else {
            throw LocalStoreError(
                .ioError, "the engine began a write transaction again (\(restarted.reason)) without declaring restartsOnItsOwn: its writes are lost")
        }
        try Self.replay(redo, on: writer, restarted)
    }

    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        if restarts {
            keep((key, value))
            do { try writer.put(key, value) } catch let restarted as OrderedKeyValueRestarted { try replayAfter(restarted) }
            return
        }
        if logging { undo.append((key, try writer.get(key))) }
        do { try writer.put(key, value) } catch let restarted as OrderedKeyValueRestarted { throw unreplayable(restarted) }
    }

    /// Deletes `key`, which the caller read from the store (a row or an index entry of a row it read).
    func delete(_ key: [UInt8]) throws {
        if restarts {
            keep((key, nil))
            do { try writer.delete(key) } catch let restarted as OrderedKeyValueRestarted { try replayAfter(restarted) }
            return
        }
        do {
            guard logging else { return try writer.delete(key) }
            guard let old = try writer.get(key) else { return }
            undo.append((key, old))
            try writer.delete(key)
        } catch let restarted as OrderedKeyValueRestarted {
            throw unreplayable(restarted)
        }
    }

    /// Adds `delta` to `table`'s row count (``KVKeys/rowCount(_:)``).
    func adjustRowCount(_ table: KVTable, by delta: Int) throws {
        guard delta != 0 else { return }
        let key = KVKeys.rowCount(table.number)
        let count = Int(clamping: try KVCatalog.readNumber(key, writer)).addingReportingOverflow(delta)
        var bytes: [UInt8] = []
        KeyCodec.appendBigEndian(UInt64(max(0, count.overflow ? Int.max : count.partialValue)), into: &bytes)
        try put(key, bytes)
    }

    /// Writes `writes` again on `writer`, whose transaction began again (`restarted`: why, when the engine
    /// did it), and again each time the engine begins it again meanwhile (``OrderedKeyValueRestarted/retrying(after:_:)``).
    static func replay(_ writes: [Write], on writer: Writer, _ restarted: OrderedKeyValueRestarted? = nil) throws {
        try OrderedKeyValueRestarted.retrying(after: restarted) {
            for (key, value) in writes {
                if let value { try writer.put(key, value) } else { try writer.delete(key) }
            }
        }
    }

    /// Records that undoing failed (`undoError`): the transaction can then only roll back.
    private func undoFailed(_ undoError: Error) {
        failure = LocalStoreError(.ioError, "a failed call could not be undone (\(undoError)); the transaction can only roll back")
    }

    /// Runs `body`; when it throws, undoes its writes and rethrows (inside a composite body: only runs it).
    func atomically<R>(_ body: () throws -> R) throws -> R {
        if let failure { throw failure }
        if composites > 0 { return try body() }
        if engineSavepoints && !inSavepoint {
            try writer.setSavepoint()
            inSavepoint = true
            defer { inSavepoint = false }
            do {
                return try body()
            } catch {
                // The engine's stack holds one savepoint per outermost call: this call's is on top.
                do { try writer.rollbackToSavepoint() } catch let undoError { undoFailed(undoError) }
                throw error
            }
        }
        if restarts {
            let mark = redo.count
            frames += 1
            defer { frames -= 1 }
            do {
                return try body()
            } catch {
                do {
                    redo.removeSubrange(mark...)
                    try writer.restart()
                    try Self.replay(redo, on: writer)
                } catch let undoError {
                    undoFailed(undoError)
                }
                throw error
            }
        }
        let mark = undo.count
        frames += 1
        defer {
            frames -= 1
            // No running call can undo what the log holds any more.
            if frames == 0 { undo.removeAll(keepingCapacity: true) }
        }
        do {
            return try body()
        } catch {
            do {
                while undo.count > mark {
                    let (key, old) = undo.removeLast()
                    if let old { try writer.put(key, old) } else { try writer.delete(key) }
                }
            } catch let undoError {
                undoFailed(undoError)
            }
            throw error
        }
    }

    /// Runs a composite body (``CompositeWrites``: it propagates every error of its calls) as one atomic
    /// call: one savepoint or log mark for all of it, none for the calls it makes.
    func compositely<R>(_ body: () throws -> R) throws -> R {
        try atomically { try unguarded(body) }
    }

    /// Runs `body` with its calls unguarded: for a body whose failure undoes more than it (the whole write
    /// transaction of a store call, a composite body's savepoint).
    func unguarded<R>(_ body: () throws -> R) rethrows -> R {
        composites += 1
        defer { composites -= 1 }
        return try body()
    }

    func upsert(_ items: [Item], into name: String, options: UpsertOptions) throws -> (table: String, ids: [Value]) {
        let table = try catalog.table(name)
        let schema = table.schema
        // Every item is checked before anything is written.
        let prepared = try items.map { try schema.prepare($0, options: options) }
        try schema.checkMergedSizes(prepared, options: options) { id in
            try reads.row(table, idKey: KeyCodec.idKey(id)).map { $0.map(TableSchema.byteCount(of:)) }
        }
        try atomically {
            var inserted = 0
            for item in prepared {
                let idKey = KeyCodec.idKey(item.id)
                let old = try reads.row(table, idKey: idKey)
                if old == nil { inserted += 1 }
                var row = old ?? Array(repeating: .null, count: schema.columns.count)
                for assignment in item.assignments { row[assignment.column] = assignment.value }
                let record = table.encode(row)
                for spec in table.specs {
                    let newKey = table.entryKey(spec, row, idKey: idKey)
                    let oldKey = old.map { table.entryKey(spec, $0, idKey: idKey) }
                    // A covering entry holds the record: rewritten with every change of the row.
                    guard oldKey != newKey || spec.covering == true else { continue }
                    if let oldKey, oldKey != newKey { try delete(oldKey) }
                    try put(newKey, table.entryValue(spec, idKey: idKey, record: record))
                }
                try put(KVKeys.row(table.number, idKey: idKey), record)
            }
            try adjustRowCount(table, by: inserted)
        }
        return (schema.name, prepared.map(\.id))
    }

    /// Deletes the rows of `ids`; returns the ids of the rows there were, as stored.
    func delete(ids: [Value], from name: String) throws -> (table: String, ids: [Value]) {
        let table = try catalog.table(name)
        for id in ids { try table.checkId(id) }
        let deleted = try atomically {
            let deleted = try ids.compactMap { try deleteRow(table, idKey: KeyCodec.idKey($0)) }
            try adjustRowCount(table, by: -deleted.count)
            return deleted
        }
        return (table.schema.name, deleted)
    }

    func delete(matching query: Query) throws -> (table: String, count: Int) {
        let table = try catalog.table(query.table)
        let resolved = try ResolvedQuery(query, schema: table.schema)
        let plan = try reads.plan(table, resolved).plan
        if let deletion = try reads.deletion(table, resolved, plan) {
            try atomically {
                for key in deletion.keys { try delete(key) }
                try adjustRowCount(table, by: -deletion.rows)
            }
            return (table.schema.name, deletion.rows)
        }
        var matches = try reads.matches(table, resolved, plan).rows
        // Ordered only when the query cuts them (skip, top): otherwise every match goes, in any order.
        if resolved.top != nil || resolved.skip > 0 { matches = resolved.order(matches).rows }
        try atomically {
            // Each row as just read (`matches` yields each row once): its index entries are found from it,
            // without reading it again.
            for row in matches { _ = try deleteRow(table, idKey: KeyCodec.idKey(row[table.schema.idIndex]), row: row) }
            try adjustRowCount(table, by: -matches.count)
        }
        return (table.schema.name, matches.count)
    }

    /// Deletes a row and its index entries; `row`: the row as stored, when the caller has just read it.
    private func deleteRow(_ table: KVTable, idKey: [UInt8], row known: [Value]? = nil) throws -> Value? {
        guard let row = try known ?? reads.row(table, idKey: idKey) else { return nil }
        for spec in table.specs { try delete(table.entryKey(spec, row, idKey: idKey)) }
        try delete(KVKeys.row(table.number, idKey: idKey))
        return row[table.schema.idIndex]
    }
}

/// What the calls of a ``KVStore`` share, in a `Mutex` (every call takes it twice, and `NSCondition` cost
/// about 180 instructions per acquisition where it costs a few dozen). Not nested in the generic store: the
/// metadata of a generic type is looked up in the runtime's cache at each use.
struct KVStoreState {
    var cachedCatalog = KVCatalog()
    /// The catalog of the read snapshot numbered `number` (``OrderedKeyValueReader/snapshotNumber``).
    var catalogOfSnapshot: (number: UInt64, catalog: KVCatalog)?
    var isClosed = false
    /// The thread running this store's write transaction or definition.
    var writingThread: pthread_t?
    /// Calls running on the engine: `close()` waits for them before it closes the engine.
    var activeCalls = 0
    /// Set by a `close()` from inside a write body: the last call to end closes the engine.
    var closesEngineWhenIdle = false
    /// Set by a `close()` waiting for the running calls: the last one to end signals it.
    var closeWaiter: DispatchSemaphore?
}

/// The transaction a ``KVStore`` write body gets.
final class KVTransaction<Writer: OrderedKeyValueWriter>: LocalStoreTransaction, CompositeWrites {
    let systemTableNames: SystemTableNames
    let writes: KVWrites<Writer>
    private(set) var changes: ChangeCollector?
    /// The write body's thread (`pthread_self`: one load, where `Thread.current` costs a lookup per call).
    private let thread = pthread_self()
    private var isActive = true
    /// The operations table's largest id as this transaction last read or wrote it (`.some(nil)`: the
    /// table is empty), or `nil` when unknown (KVSystemShortcuts.swift).
    var knownLargestOperationId: Int64?? = nil

    init(_ writes: KVWrites<Writer>, systemTableNames: SystemTableNames, changes: ChangeCollector?) {
        self.writes = writes
        self.systemTableNames = systemTableNames
        self.changes = changes
    }

    func end() { isActive = false }

    /// Forgets the operations table's largest id when `table` names the operations table: before every
    /// upsert and delete of it that does not keep the id exact itself.
    private func forgetLargestOperationId(writing table: String) {
        if knownLargestOperationId != nil, Identifier.fold(table) == Identifier.fold(systemTableNames.operations) { knownLargestOperationId = nil }
    }

    func check() throws {
        guard pthread_equal(pthread_self(), thread) != 0 else {
            throw LocalStoreError(.misuse, "a transaction was used from another thread than its write body's")
        }
        guard isActive else { throw LocalStoreError(.misuse, "a transaction was used after its write body returned") }
        // A failed undo leaves the engine's transaction in no state to read (a restart that could not begin again).
        if let failure = writes.failure { throw failure }
    }

    func schema(of table: String) throws -> TableSchema? {
        try check()
        return writes.reads.schema(of: table)
    }
    func read(table: String, id: Value) throws -> Item? {
        try check()
        return try writes.reads.read(table: table, id: id)
    }
    func read(_ query: Query) throws -> ReadResult {
        try check()
        return try writes.reads.read(query)
    }
    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try check()
        forgetLargestOperationId(writing: table)
        let done = try writes.upsert(items, into: table, options: options)
        changes?.upserted(done.ids, in: done.table)
    }
    func delete(ids: [Value], from table: String) throws {
        try check()
        guard !ids.isEmpty else { return }
        forgetLargestOperationId(writing: table)
        let done = try writes.delete(ids: ids, from: table)
        if !done.ids.isEmpty { changes?.deleted(done.ids, in: done.table) }
    }
    func delete(matching query: Query) throws {
        try check()
        forgetLargestOperationId(writing: query.table)
        let done = try writes.delete(matching: query)
        if done.count > 0 { changes?.changedMany(in: done.table) }
    }

    /// A savepoint: a thrown error undoes the body's writes (and what it recorded), and the transaction goes on.
    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try nestedWrite(composite: false, body)
    }

    /// A composite call inside the transaction (the core's `CompositeWrites`): one savepoint for the whole
    /// body, none for the calls it makes (the body propagates every error; the savepoint undoes all of it).
    func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try nestedWrite(composite: true, body)
    }

    private func nestedWrite<R>(composite: Bool, _ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try check()
        let saved = changes
        do {
            return try composite ? writes.compositely { try body(self) } : writes.atomically { try body(self) }
        } catch {
            changes = saved
            // The body's writes are undone: what it learned of the operations table may no longer hold.
            knownLargestOperationId = nil
            throw error
        }
    }
}

/// A `LocalStore` on any ``OrderedKeyValueEngine``: rows and index entries under ordered keys
/// (`KeyCodec`, the LMDB backend's encodings), records in `RecordCodec`, a catalog of definitions,
/// one-column and compound indexes chosen by a planner, and the shared evaluator for everything the
/// indexes do not decide. Every store call and transaction keeps the protocol's contract: one writer
/// at a time, `misuse` for calls inside the store's own write body and for a transaction used after its
/// body or from another thread, savepoints for nested writes, and a change report per commit.
///
/// ```swift
/// let store = try KVStore(engine: InMemoryKVEngine())
/// ```
public final class KVStore<Engine: OrderedKeyValueEngine>: LocalStore, QueryPlanReporting, CompositeWrites, @unchecked Sendable {
    // `state` guards the catalog caches and the call bookkeeping; `writeLock` is held by the one running
    // write transaction or definition.
    /// The engine.
    public let engine: Engine
    public let systemTableNames: SystemTableNames
    public let changeCenter = ChangeCenter()
    private let writeLock = NSLock()
    private let state = Mutex(KVStoreState())

    /// Whether the current thread runs this store's write transaction or definition.
    private static func isCurrent(_ thread: pthread_t?) -> Bool { thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    /// Tells the commits of other store objects on the engine from this store's own by the commit counter
    /// (``KVKeys/commits``), as LMDB does by its transaction ids.
    private let tracker: CommitTracker

    /// How often an observed store looks for commits of other store objects on the same engine.
    public static var externalChangePollInterval: Duration { .milliseconds(100) }

    /// Whether the indexes this store creates are covering (see ``init(engine:systemTableNames:coveringIndexes:)``).
    public let coveringIndexes: Bool

    /// Opens a store on `engine`, creating the system tables when they are missing.
    ///
    /// `coveringIndexes`: the indexes this store object creates hold each row's record in their entries,
    /// so that a query through an index reads no row — for an engine whose point reads are costly (an
    /// LSM tree such as RocksDB), at the price of writing every record once more per index. An index keeps
    /// the kind it was created with.
    public init(engine: Engine, systemTableNames: SystemTableNames = .default, coveringIndexes: Bool = false) throws {
        try systemTableNames.validate()
        self.engine = engine
        self.coveringIndexes = coveringIndexes
        self.systemTableNames = systemTableNames
        tracker = CommitTracker(center: changeCenter)
        let catalog = try OrderedKeyValueRestarted.retrying { try engine.write { writer -> KVCatalog in
            // A store whose long keys `KeyLengthLimitedEngine` stored truncated (its record of the limit, which
            // its views hide) would be misread through an engine without it.
            if try writer.get(LongKeys.marker) != nil {
                throw LocalStoreError(
                    .versionMismatch, "the store was written through KeyLengthLimitedEngine (it holds the key FF 00 4B 4C): open it through KeyLengthLimitedEngine with the same limit")
            }
            var catalog = try KVCatalog.load(writer)
            for schema in systemTableNames.schemas where catalog.tables[Identifier.fold(schema.name)] == nil {
                let record = KVTableRecord(number: catalog.nextTableNumber, schema: schema, specs: [])
                catalog.version += 1
                try KVCatalog.write(record, version: catalog.version, writer)
                catalog.tables[Identifier.fold(schema.name)] = KVTable(record)
            }
            // A table named as a system table must have its columns, with the same types (as LMDB requires).
            for schema in systemTableNames.schemas {
                guard let existing = catalog.tables[Identifier.fold(schema.name)] else { continue }
                guard SystemTableShapes.isCompatible(existing.schema, schema) else {
                    throw LocalStoreError(
                        .schemaConflict, "table '\(existing.schema.name)' exists but does not have the columns of a system table",
                        table: existing.schema.name)
                }
            }
            // The system tables' indexes (added to a store made without them, and built; rebuilt when written
            // in an older encoding).
            for name in [systemTableNames.operations, systemTableNames.errors, systemTableNames.config] {
                guard let existing = catalog.tables[Identifier.fold(name)] else { continue }
                let first = (existing.specs.map(\.number).max() ?? 0) + 1
                guard let wanted = KVIndexSpec.system(existing.schema, names: systemTableNames, number: first) else { continue }
                var record = existing.record
                let spec: KVIndexSpec
                if let i = record.specs.firstIndex(where: { $0.name == wanted.name }) {
                    // Entries written before NOCASE components took LMDB's encoding: removed and written again.
                    guard record.specs[i].noCase != nil, record.specs[i].noCaseFormat != KVIndexSpec.noCaseFormat else { continue }
                    let prefix = KVKeys.index(existing.number, record.specs[i].number)
                    var stale: [[UInt8]] = []
                    try writer.scan(from: prefix, to: KVKeyRange.end(of: prefix), reverse: false) { key, _ in
                        stale.append(Array(key))
                        return true
                    }
                    for key in stale { try writer.delete(key) }
                    record.specs[i].noCaseFormat = KVIndexSpec.noCaseFormat
                    spec = record.specs[i]
                } else {
                    record.specs.append(wanted)
                    spec = wanted
                }
                let table = KVTable(record)
                try Self.index(table, [spec], writer)
                catalog.version += 1
                try KVCatalog.write(record, version: catalog.version, writer)
                catalog.tables[Identifier.fold(record.name)] = table
            }
            // Row counts (the planner's statistics) of a store made without them.
            for table in catalog.tables.values where try writer.get(KVKeys.rowCount(table.number)) == nil {
                let count = try KVReads(reader: writer, catalog: catalog).countEntries(table, .primary, [.all])
                if count > 0 { try KVCatalog.writeNumber(UInt64(count), KVKeys.rowCount(table.number), writer) }
            }
            return catalog
        } }
        state.withLock { $0.cachedCatalog = catalog }
        changeCenter.setExternalChangeProbe(interval: Self.externalChangePollInterval) { [weak self] baseline in
            self?.probeCommits(baseline: baseline)
        }
    }

    /// Publishes an unlisted change when another store object committed since this one last looked (the
    /// tracker ignores what it reads while an observed write of this store runs; a poll that reads an older
    /// snapshot during an unobserved one may announce this store's commit as another's: one extra unlisted
    /// change, never a missed one); with `baseline` (the first observer registers, maybe inside a write
    /// body), only records the counter.
    private func probeCommits(baseline: Bool) {
        // Counted as a call (close waits for it), not read under the state lock: an engine whose reads
        // wait for its writer would wait for a write whose body waits for that lock (`catalog(_:)`).
        guard beginCall(insideWriteBody: true) == nil else { return }
        defer { endCall() }
        let counter = try? engine.read { try KVCatalog.readNumber(KVKeys.commits, $0) }
        if let counter { tracker.sawCommitted(Int(clamping: counter), baseline: baseline) }
    }

    /// Ends a call: the last one signals a waiting `close()`, or closes the engine for a `close()` made
    /// inside a write body.
    private func endCall() {
        let (closeEngine, waiter) = state.withLock { state -> (Bool, DispatchSemaphore?) in
            state.activeCalls -= 1
            guard state.activeCalls == 0 else { return (false, nil) }
            defer {
                state.closesEngineWhenIdle = false
                state.closeWaiter = nil
            }
            return (state.closesEngineWhenIdle, state.closeWaiter)
        }
        waiter?.signal()
        if closeEngine { try? engine.close() }
    }

    /// Begins a call (counted: `close()` waits for it, and ``endCall()`` ends it), or returns why it is
    /// refused: the store is closed, or — unless `insideWriteBody` allows it — this thread runs its write body.
    private func beginCall(insideWriteBody: Bool = false) -> LocalStoreError? {
        state.withLock { state -> LocalStoreError? in
            guard !state.isClosed else { return LocalStoreError.closed() }
            guard insideWriteBody || !Self.isCurrent(state.writingThread) else {
                return LocalStoreError(.misuse, "the store was called inside its own write body; use the body's transaction")
            }
            state.activeCalls += 1
            return nil
        }
    }

    /// Runs `body` as a call on the engine: refused after close, waited for by `close()`.
    private func calling<R>(_ body: () throws -> R) throws -> R {
        if let refusal = beginCall() { throw refusal }
        defer { endCall() }
        return try body()
    }

    /// The catalog as of `reader`'s snapshot (reloaded when a definition changed it, here or elsewhere).
    private func catalog(_ reader: some OrderedKeyValueReader) throws -> KVCatalog {
        let version = try KVCatalog.readNumber(KVKeys.version, reader)
        let cached = state.withLock { $0.cachedCatalog }
        if cached.version == version { return cached }
        let loaded = try KVCatalog.load(reader)
        state.withLock { if loaded.version > $0.cachedCatalog.version { $0.cachedCatalog = loaded } }
        return loaded
    }

    /// ``catalog(_:)`` of a read snapshot: when the engine numbers its snapshots
    /// (``OrderedKeyValueReader/snapshotNumber``), the catalog last found for the same number, without a read.
    private func catalog(snapshot reader: Engine.Reader) throws -> KVCatalog {
        guard let number = reader.snapshotNumber else { return try catalog(reader) }
        if let known = state.withLock({ $0.catalogOfSnapshot }), known.number == number { return known.catalog }
        let catalog = try catalog(reader)
        state.withLock { $0.catalogOfSnapshot = (number, catalog) }
        return catalog
    }

    func reading<R>(_ body: (KVReads) throws -> R) throws -> R {
        try calling { try engine.read { reader in try body(KVReads(reader: reader, catalog: try catalog(snapshot: reader))) } }
    }

    public func schema(of table: String) throws -> TableSchema? { try reading { $0.schema(of: table) } }
    public func read(table: String, id: Value) throws -> Item? { try reading { try $0.read(table: table, id: id) } }
    public func read(_ query: Query) throws -> ReadResult { try reading { try $0.read(query) } }
    public func tableSchemas() throws -> [TableSchema] {
        try reading { reads in
            reads.catalog.tables.values.map(\.schema).filter { !systemTableNames.isReserved($0.name) }
                .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        }
    }

    /// The access path a read of `query` takes, as the shared planner chooses it: `primaryKey` for ids, a
    /// range of ids or a `top` list walked in id order; the index whose leading components the query
    /// constrains most (equalities, then one range), counted alone for a count it answers exactly, or whose
    /// order answers a `top` list's sort (a cost choice between the two, from the row count, reports the
    /// walk it tries first); else `fullScan`.
    public func accessPath(for query: Query) throws -> QueryAccessPath { try reading { try $0.accessPath(query) } }

    // A call of its own: its failure discards the engine transaction, so the call needs no undo of its own.
    public func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try write(composite: true) { try $0.upsert(items, into: table, options: options) }
    }
    public func delete(ids: [Value], from table: String) throws { try write(composite: true) { try $0.delete(ids: ids, from: table) } }
    public func delete(matching query: Query) throws { try write(composite: true) { try $0.delete(matching: query) } }

    /// Runs `body` holding the write lock, with the store marked as written by this thread.
    private func exclusively<R>(_ body: () throws -> R) throws -> R {
        try calling {
            writeLock.lock()
            defer { writeLock.unlock() }
            state.withLock { $0.writingThread = pthread_self() }
            defer { state.withLock { $0.writingThread = nil } }
            return try body()
        }
    }

    public func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try write(composite: false, body)
    }

    /// A composite call's transaction (the core's `CompositeWrites`): the body propagates every error, which
    /// discards the whole engine transaction, so its calls run without a savepoint or an undo log.
    package func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try write(composite: true, body)
    }

    private func write<R>(composite: Bool, _ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try exclusively {
            var began: ChangeCollector?
            var changes: ChangeCollector?
            var commit = 0
            // When the engine can restart: the body's result, every write of the transaction and the commit
            // counter it began on, for a replay when the commit restarts (``OrderedKeyValueRestarted``).
            var finished: (result: R, writes: [KVWrites<Engine.Writer>.Write], state: [UInt64])?
            do {
                let result: R
                do {
                    result = try engine.write { writer -> R in
                        // This write's commit number: what other store objects committed before it is published first.
                        let counter = try KVCatalog.readNumber(KVKeys.commits, writer)
                        commit = Int(clamping: counter &+ 1)
                        began = tracker.writeBegan(txnId: commit)
                        let writes = KVWrites(writer, catalog: try catalog(writer))
                        let transaction = KVTransaction(writes, systemTableNames: systemTableNames, changes: began)
                        defer { transaction.end() }
                        let result = try composite ? writes.unguarded { try body(transaction) } : body(transaction)
                        if let failure = writes.failure { throw failure }
                        changes = transaction.changes
                        var next: [UInt8] = []
                        KeyCodec.appendBigEndian(counter &+ 1, into: &next)
                        try writes.put(KVKeys.commits, next)
                        if writes.restarts && writes.redoIsComplete { finished = (result, writes.redo, [counter, writes.catalog.version]) }
                        return result
                    }
                } catch let restarted as OrderedKeyValueRestarted {
                    guard let done = finished else {
                        throw LocalStoreError(.ioError, "the engine began a write transaction again where it cannot be replayed (\(restarted.reason))")
                    }
                    try replayCommit(done.writes, state: done.state, restarted)
                    result = done.result
                }
                tracker.committed(txnId: commit, changes)
                return result
            } catch {
                tracker.aborted(began)
                throw error
            }
        }
    }

    /// The catalog version `writer` sees: bumped by every definition, index build and system-table creation
    /// (which leave the commit counter as it is).
    private static func definitions(_ writer: Engine.Writer) throws -> UInt64 { try KVCatalog.readNumber(KVKeys.version, writer) }

    /// Commits `writes` in a new write transaction, after the engine began the commit of the transaction
    /// that wrote them again (`restarted`): on the same committed state (`state`: the commit counter and the
    /// catalog version the transaction began on: no write and no definition of any store object since), or
    /// not at all (`busy`).
    private func replayCommit(_ writes: [KVWrites<Engine.Writer>.Write], state: [UInt64], _ restarted: OrderedKeyValueRestarted) throws {
        try OrderedKeyValueRestarted.retrying(after: restarted) {
            try engine.write { writer in
                guard try [KVCatalog.readNumber(KVKeys.commits, writer), Self.definitions(writer)] == state else {
                    throw LocalStoreError(.busy, "another writer committed while the engine began this transaction's commit again (\(restarted.reason)): nothing was committed")
                }
                try KVWrites<Engine.Writer>.replay(writes, on: writer)
            }
        }
    }

    public func defineTable(_ schema: TableSchema) throws {
        try exclusively {
            guard !systemTableNames.isReserved(schema.name) else {
                throw LocalStoreError(.reservedName, "'\(schema.name)' is the name of a system table", table: schema.name)
            }
            try schema.validate()
            try OrderedKeyValueRestarted.retrying { try engine.write { writer in
                var catalog = try catalog(writer)
                let existing = catalog.tables[Identifier.fold(schema.name)]
                let merged = try existing.map { try $0.schema.merged(with: schema) } ?? schema
                var specs = existing?.specs ?? []
                var added: [KVIndexSpec] = []
                for wanted in KVTable.wantedSpecs(merged)
                where !specs.contains(where: { $0.columns == wanted.columns && $0.descending == wanted.descending }) {
                    let spec = KVIndexSpec(
                        number: (specs.map(\.number).max() ?? 0) + 1, name: wanted.name, columns: wanted.columns, descending: wanted.descending,
                        covering: coveringIndexes ? true : nil)
                    specs.append(spec)
                    added.append(spec)
                }
                if let existing, existing.schema == merged, added.isEmpty { return }
                let number = existing?.number ?? catalog.nextTableNumber
                let table = KVTable(KVTableRecord(number: number, schema: merged, specs: specs))
                if existing != nil, !added.isEmpty { try Self.index(table, added, writer) }
                catalog.version += 1
                try KVCatalog.write(table.record, version: catalog.version, writer)
            } }
        }
    }

    /// Writes the entries of `specs` for the rows `table` already holds.
    private static func index(_ table: KVTable, _ specs: [KVIndexSpec], _ writer: Engine.Writer) throws {
        let prefix = KVKeys.rows(table.number)
        var entries: [[UInt8]: [UInt8]] = [:]
        try writer.scan(from: prefix, to: KVKeyRange.end(of: prefix), reverse: false) { key, value in
            let row = try table.decode(value)
            let idKey = Array(key[prefix.count...])
            let record = Array(value)
            for spec in specs { entries[table.entryKey(spec, row, idKey: idKey)] = table.entryValue(spec, idKey: idKey, record: record) }
            return true
        }
        for (key, value) in entries { try writer.put(key, value) }
    }

    /// Closes the store once the calls running on other threads are done; then closes the engine.
    public func close() throws {
        let wasOpen = state.withLock { state in
            defer { state.isClosed = true }
            return !state.isClosed
        }
        guard wasOpen else { return }
        changeCenter.finish()
        let (closeNow, waiter) = state.withLock { state -> (Bool, DispatchSemaphore?) in
            // From inside a write body, the engine is closed when that body's call ends.
            if Self.isCurrent(state.writingThread) {
                state.closesEngineWhenIdle = true
                return (false, nil)
            }
            guard state.activeCalls > 0 else { return (true, nil) }
            // The last running call signals (the store is closed: no call begins meanwhile).
            let waiter = DispatchSemaphore(value: 0)
            state.closeWaiter = waiter
            return (true, waiter)
        }
        waiter?.wait()
        if closeNow { try engine.close() }
    }
}
