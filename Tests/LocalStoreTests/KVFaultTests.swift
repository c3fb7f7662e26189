import Foundation
import LocalStore
import LocalStoreKV
import Testing

/// How the engine under test undoes: not at all (KVStore's undo log), by savepoints, or by restarts.
enum UndoMode: CaseIterable, Sendable {
    case log, savepoints, restarts
}

/// `InMemoryKVEngine` with faults on demand: the `failFrom`-th put from now fails (counted from 0), and
/// every later one too when `failForever`; a rollback to a savepoint, or a restart, fails when `failRollback`.
/// KVStore's undo — the engine's savepoints, a restart and replay, or its own log — is held to "a failed
/// call leaves its transaction as before it", for every put a call can fail at; and a failed undo to "the
/// transaction can only roll back".
private final class FaultEngine: OrderedKeyValueEngine, @unchecked Sendable {  // used from one thread per test
    let base: InMemoryKVEngine
    var failFrom: Int?
    var failForever = false
    var failRollback = false
    /// The engine begins the transaction again on its own (``OrderedKeyValueRestarted``, as LMDB when its map
    /// grows) at the `restartFrom`-th put or delete from now (counted from 0; restarts mode only) …
    var restartFrom: Int?
    /// … and at the next `restartCommits` commits, running `onCommitRestart` after each (another writer, say).
    var restartCommits = 0
    var onCommitRestart: (() throws -> Void)?
    /// Whether the writers declare their own restarts (``OrderedKeyValueWriter/restartsOnItsOwn``).
    var declaresRestarts = true
    /// Whether the writers hide their restarts (``OrderedKeyValueWriter/canRestart`` false) while still
    /// restarting on their own: a contract breach KVStore must survive.
    var hidesRestart = false
    private struct CommitRestart: Error {}

    init(_ mode: UndoMode) { base = InMemoryKVEngine(savepoints: mode == .savepoints, restarts: mode == .restarts) }
    init(base: InMemoryKVEngine) { self.base = base }

    func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R { try base.read(body) }
    func write<R>(_ body: (Writer) throws -> R) throws -> R {
        do {
            return try base.write { transaction in
                let result = try body(Writer(base: transaction, engine: self))
                if restartCommits > 0 {
                    restartCommits -= 1
                    throw CommitRestart()  // the base commits nothing
                }
                return result
            }
        } catch is CommitRestart {
            try onCommitRestart?()
            throw OrderedKeyValueRestarted("injected restart of a commit")
        }
    }
    func close() throws {}

    struct Writer: OrderedKeyValueWriter {
        let base: InMemoryKVEngine.Transaction
        let engine: FaultEngine

        func get(_ key: [UInt8]) throws -> [UInt8]? { try base.get(key) }
        func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {
            try base.scan(from: lower, to: upper, reverse: reverse, body)
        }
        /// Restarts the transaction and throws when the `restartFrom` countdown reaches this write.
        private func restartIfDue() throws {
            guard let n = engine.restartFrom else { return }
            guard n > 0 else {
                engine.restartFrom = nil
                try base.restart()
                throw OrderedKeyValueRestarted("injected restart")
            }
            engine.restartFrom = n - 1
        }
        func put(_ key: [UInt8], _ value: [UInt8]) throws {
            try restartIfDue()
            if let n = engine.failFrom {
                guard n > 0 else {
                    if !engine.failForever { engine.failFrom = nil }
                    throw LocalStoreError(.ioError, "injected put failure")
                }
                engine.failFrom = n - 1
            }
            try base.put(key, value)
        }
        func delete(_ key: [UInt8]) throws {
            try restartIfDue()
            try base.delete(key)
        }
        var hasSavepoints: Bool { base.hasSavepoints }
        func setSavepoint() throws { try base.setSavepoint() }
        func rollbackToSavepoint() throws {
            if engine.failRollback { throw LocalStoreError(.ioError, "injected rollback failure") }
            try base.rollbackToSavepoint()
        }
        var canRestart: Bool { engine.hidesRestart ? false : base.canRestart }
        var restartsOnItsOwn: Bool { engine.declaresRestarts }
        func restart() throws {
            if engine.failRollback { throw LocalStoreError(.ioError, "injected restart failure") }
            try base.restart()
        }
    }
}

@Suite("KVStore: a call that fails after it wrote is undone, by savepoints, by a restart and by the undo log")
struct KVFaultTests {
    private static let schema = TableSchema(
        "T", ["id": .string, "n": .integer, "s": .string], indexed: ["n"], indexes: [TableIndex(name: "sn", columns: ["s", "n"])])

    private struct Boom: Error {}

    /// The rows, and a check that the indexes and the row count agree with them (a half-undone call
    /// leaves an index entry without its row, or a row count off by one).
    private static func state(_ a: any LocalStoreAccess) throws -> [String] {
        let rows = try a.read(Query("T")).items
        for n in 0..<10 {
            let byIndex = try a.read(Query("T", where: Field("n") == .literal(.int(Int64(n))))).items.map { "\($0)" }.sorted()
            let byScan = rows.filter { $0["n"] == .int(Int64(n)) }.map { "\($0)" }.sorted()
            #expect(byIndex == byScan, "n == \(n): the index answers \(byIndex), the rows are \(byScan)")
        }
        let bySn = try a.read(Query("T", where: Field("s") == .literal(.string("q")))).items.count
        #expect(bySn == rows.filter { $0["s"] == .string("q") }.count, "the compound index disagrees with the rows")
        #expect(try a.count("T") == rows.count, "the row count disagrees with the rows")
        return rows.map { "\($0)" }.sorted()
    }

    private static func seeded(_ mode: UndoMode) throws -> (FaultEngine, KVStore<FaultEngine>) {
        let engine = FaultEngine(mode)
        let store = try KVStore(engine: engine)
        try store.defineTable(schema)
        try store.upsert([["id": "a", "n": 1, "s": "x"], ["id": "b", "n": 2, "s": "y"]], into: "T")
        return (engine, store)
    }

    /// Runs `attempt` on a freshly seeded store once for each put (0..<`puts`) the engine fails at, from the
    /// point `attempt` arms it; `attempt` returns whether the call under test failed. More than `minimum` runs
    /// must fail, or the injected failures missed `what`.
    private static func failingAtEachPut(
        _ mode: UndoMode, puts: Int, minimum: Int, _ what: String,
        _ attempt: (_ engine: FaultEngine, _ store: KVStore<FaultEngine>, _ failAt: Int) throws -> Bool
    ) throws {
        var failures = 0
        for failAt in 0..<puts {
            let (engine, store) = try seeded(mode)
            if try attempt(engine, store, failAt) { failures += 1 }
        }
        #expect(failures > minimum, "the injected failures must hit \(what)")
    }

    @Test(
        "a call failing at any put, in a write body or a nested write that goes on, is undone, and the rest commits",
        arguments: UndoMode.allCases, [false, true])
    func call(mode: UndoMode, nested: Bool) throws {
        try Self.failingAtEachPut(mode, puts: 10, minimum: 3, "the call") { engine, store, failAt in
            var failed = false
            func body(_ tx: any LocalStoreTransaction) throws {
                try tx.upsert([["id": "c", "n": 3]], into: "T")
                let before = try Self.state(tx)
                engine.failFrom = failAt
                do {
                    try tx.upsert([["id": "e", "n": 5, "s": "q"], ["id": "b", "n": 7, "s": "q"]], into: "T")
                } catch {
                    failed = true
                }
                engine.failFrom = nil
                if failed { #expect(try Self.state(tx) == before, "failAt \(failAt)") }
                try tx.upsert([["id": "d", "n": 4]], into: "T")
            }
            try store.write { tx in try nested ? tx.performWrite(body) : body(tx) }
            let rows = try Self.state(store)
            #expect(rows.count == (failed ? 4 : 5), "failAt \(failAt): \(rows)")
            return failed
        }
    }

    @Test("a nested write failing at any put leaves nothing of it, the queue included", arguments: UndoMode.allCases)
    func nestedWrite(mode: UndoMode) throws {
        try Self.failingAtEachPut(mode, puts: 16, minimum: 5, "the nested write") { engine, store, failAt in
            let queued = try store.pendingOperations().count
            var failed = false
            try store.write { tx in
                try tx.upsert([["id": "c", "n": 3]], into: "T")
                let before = try Self.state(tx)
                do {
                    try tx.performWrite { inner in
                        try inner.upsert([["id": "d", "n": 4]], into: "T")
                        try inner.delete(ids: ["a"], from: "T")
                        try inner.enqueue(.update, ["id": "b", "n": 6, "s": "q"], into: "T")
                        engine.failFrom = failAt
                        try inner.upsert([["id": "e", "n": 5, "s": "q"], ["id": "c", "n": 7, "s": "z"]], into: "T")
                        try inner.delete(matching: Query("T", where: Field("n") < .literal(.int(5))))
                        try inner.enqueue(.insert, ["id": "f", "n": 8], into: "T")
                    }
                } catch {
                    failed = true
                }
                engine.failFrom = nil
                if failed { #expect(try Self.state(tx) == before, "failAt \(failAt)") }
            }
            _ = try Self.state(store)
            #expect(try store.pendingOperations().count == queued + (failed ? 0 : 2), "failAt \(failAt)")
            return failed
        }
    }

    @Test("a composite call failing at any put, in a write body or on its own, leaves nothing of it", arguments: UndoMode.allCases)
    func compositeCall(mode: UndoMode) throws {
        try Self.failingAtEachPut(mode, puts: 8, minimum: 3, "the composite call") { engine, store, failAt in
            var failed = false
            try store.write { tx in
                let before = try Self.state(tx)
                engine.failFrom = failAt
                do { try tx.enqueue(.update, ["id": "a", "n": 9, "s": "q"], into: "T") } catch { failed = true }
                engine.failFrom = nil
                if failed { #expect(try Self.state(tx) == before, "failAt \(failAt)") }
                #expect(try tx.pendingOperations().count == (failed ? 0 : 1), "failAt \(failAt)")
            }
            // On their own (no undo of their own): the store call's transaction is discarded.
            let before = try Self.state(store)
            let queued = try store.pendingOperations().count
            engine.failFrom = failAt
            if (try? store.enqueue(.insert, ["id": "g", "n": 9, "s": "q"], into: "T")) == nil {
                #expect(try Self.state(store) == before, "failAt \(failAt)")
                #expect(try store.pendingOperations().count == queued, "failAt \(failAt)")
            }
            let beforeUpsert = try Self.state(store)
            engine.failFrom = failAt
            if (try? store.upsert([["id": "h", "n": 9], ["id": "b", "n": 0]], into: "T")) == nil {
                #expect(try Self.state(store) == beforeUpsert, "failAt \(failAt)")
            }
            engine.failFrom = nil
            return failed
        }
    }

    @Test("an undo that fails: the transaction can only roll back, and commits nothing", arguments: UndoMode.allCases)
    func failedUndo(mode: UndoMode) throws {
        let (engine, store) = try Self.seeded(mode)
        let before = try Self.state(store)
        var refused = false
        do {
            try store.write { tx in
                try tx.upsert([["id": "c", "n": 3]], into: "T")
                do {
                    try tx.performWrite { inner in
                        try inner.upsert([["id": "d", "n": 4], ["id": "b", "n": 8]], into: "T")
                        // With savepoints the rollback fails, with restarts the restart; with the undo log, its puts do.
                        if mode == .log { (engine.failFrom, engine.failForever) = (0, true) } else { engine.failRollback = true }
                        throw Boom()
                    }
                } catch is Boom {}
                (engine.failRollback, engine.failFrom, engine.failForever) = (false, nil, false)
                // The body swallowed the error: every later call is refused, reads too, and so is the commit.
                #expect(throws: LocalStoreError.self) { try tx.upsert([["id": "e", "n": 5]], into: "T") }
                #expect(throws: LocalStoreError.self) { try tx.read(Query("T")) }
            }
        } catch is LocalStoreError {
            refused = true
        }
        #expect(refused, "the write whose undo failed must not commit")
        #expect(try Self.state(store) == before)
    }

    /// The writes of `body`'s test: a store call, then a write body with a call that fails and is undone, a
    /// nested write and an enqueue; `restart` runs just before the part it is given (0: the store call, 1:
    /// the body).
    private static func restartedWork(_ engine: FaultEngine, _ store: KVStore<FaultEngine>, _ restart: (Int) -> Void) throws {
        restart(0)
        try store.upsert([["id": "c", "n": 3, "s": "q"], ["id": "a", "n": 8]], into: "T")
        restart(1)
        try store.write { tx in
            try tx.upsert([["id": "d", "n": 4]], into: "T")
            engine.failFrom = 2
            #expect(throws: LocalStoreError.self) { try tx.upsert([["id": "e", "n": 5, "s": "q"], ["id": "b", "n": 6]], into: "T") }
            engine.failFrom = nil
            try tx.performWrite { inner in
                try inner.delete(ids: ["b"], from: "T")
                try inner.enqueue(.update, ["id": "c", "n": 9, "s": "z"], into: "T")
            }
            try tx.delete(matching: Query("T", where: Field("n") == .literal(.int(1))))
        }
    }

    @Test("an engine that begins a transaction again at any write, or at its commit, loses nothing: KVStore replays")
    func engineRestarts() throws {
        // The same work without restarts: the state every restarted run must end in.
        let (plainEngine, plain) = try Self.seeded(.restarts)
        try Self.restartedWork(plainEngine, plain) { _ in }
        let expected = try Self.state(plain)
        let expectedQueue = try plain.pendingOperations().map { "\($0.id) \($0.table) \($0.itemId) \($0.properties)" }
        var restarted = 0
        for part in 0..<2 {
            for at in 0..<40 {
                for commits in [0, 1, 2] {
                    let (engine, store) = try Self.seeded(.restarts)
                    try Self.restartedWork(engine, store) { p in
                        guard p == part else { return }
                        (engine.restartFrom, engine.restartCommits) = (at, commits)
                    }
                    if engine.restartFrom == nil || commits > 0 { restarted += 1 }
                    engine.restartFrom = nil
                    #expect(try Self.state(store) == expected, "part \(part), restart at write \(at), \(commits) commit restarts")
                    #expect(try store.pendingOperations().map { "\($0.id) \($0.table) \($0.itemId) \($0.properties)" } == expectedQueue)
                }
            }
        }
        #expect(restarted > 100, "the injected restarts must hit the writes")
    }

    @Test("a commit the engine begins again after another writer committed fails with busy and commits nothing")
    func commitRestartAfterAnotherWriter() throws {
        let (engine, store) = try Self.seeded(.restarts)
        let other = try KVStore(engine: engine)
        engine.restartCommits = 1
        engine.onCommitRestart = {
            engine.onCommitRestart = nil
            try other.upsert([["id": "z", "n": 7]], into: "T")
        }
        #expect {
            try store.write { tx in try tx.upsert([["id": "c", "n": 3]], into: "T") }
        } throws: { ($0 as? LocalStoreError)?.code == .busy }
        let rows = try Self.state(store)
        #expect(rows.contains { $0.contains("\"z\"") } && !rows.contains { $0.contains("\"c\"") }, "\(rows)")
    }

    @Test("a commit the engine begins again after another store object defined an index fails with busy (review)")
    func commitRestartAfterADefinition() throws {
        // A definition leaves the commit counter as it is: the replay, planned under the old catalog, would
        // write rows without entries in the index the other store built.
        let (engine, store) = try Self.seeded(.restarts)
        try store.defineTable(TableSchema("U", ["id": .string, "n": .integer]))
        try store.write { tx in try tx.upsert([["id": "a", "n": 1]], into: "U") }
        let other = try KVStore(engine: engine)
        engine.restartCommits = 1
        engine.onCommitRestart = {
            engine.onCommitRestart = nil
            try other.defineTable(TableSchema("U", ["id": .string, "n": .integer], indexed: ["n"]))
        }
        #expect {
            try store.write { tx in try tx.upsert([["id": "c", "n": 3]], into: "U") }
        } throws: { ($0 as? LocalStoreError)?.code == .busy }
        let byQuery = try store.read(Query("U", where: Field("n") == .literal(.int(3)))).items
        #expect(try store.read(table: "U", id: "c") == nil && byQuery.isEmpty)
        #expect(try store.accessPath(for: Query("U", where: Field("n") == .literal(.int(1)))) == .index("n"))
        #expect(try store.read(Query("U", where: Field("n") == .literal(.int(1)))).items.count == 1)
    }

    @Test(
        "an engine that restarts on its own but cannot replay (no restarts, or savepoints only): the call fails, the transaction rolls back (review)",
        arguments: [false, true], [false, true])
    func restartWithoutReplay(savepoints: Bool, nested: Bool) throws {
        let engine = FaultEngine(base: InMemoryKVEngine(savepoints: savepoints, restarts: true))
        let store = try KVStore(engine: engine)
        try store.defineTable(Self.schema)
        try store.upsert([["id": "a", "n": 1, "s": "x"]], into: "T")
        engine.hidesRestart = true
        let before = try Self.state(store)
        var refusedLater = false
        #expect(throws: LocalStoreError.self) {
            try store.write { tx in
                try tx.upsert([["id": "c", "n": 3]], into: "T")
                func call(_ t: any LocalStoreTransaction) throws {
                    engine.restartFrom = 0
                    do { try t.upsert([["id": "d", "n": 4]], into: "T") } catch {}
                    engine.restartFrom = nil
                }
                if nested { try? tx.performWrite(call) } else { try call(tx) }
                // The body caught the error: every later call is refused, and so is the commit.
                do { _ = try tx.read(table: "T", id: "c") } catch { refusedLater = true }
            }
        }
        engine.restartFrom = nil
        #expect(refusedLater)
        #expect(try Self.state(store) == before)
    }

    @Test("an engine with savepoints that also restarts on its own: KVStore replays instead, and loses nothing (review)")
    func savepointEngineThatRestarts() throws {
        let engine = FaultEngine(base: InMemoryKVEngine(savepoints: true, restarts: true))
        let store = try KVStore(engine: engine)
        try store.defineTable(Self.schema)
        try store.write { tx in
            try tx.upsert([["id": "c", "n": 3]], into: "T")
            try tx.performWrite { inner in
                engine.restartFrom = 0
                try inner.upsert([["id": "d", "n": 4]], into: "T")
                engine.restartFrom = nil
                engine.failFrom = 0
                do { try inner.upsert([["id": "e", "n": 5]], into: "T") } catch {}
                engine.failFrom = nil
            }
        }
        let rows = try Self.state(store)
        #expect(rows.count == 2 && rows.allSatisfy { !$0.contains("\"e\"") }, "\(rows)")
    }

    @Test("an engine that keeps beginning a transaction again: the write fails after the limit and commits nothing")
    func endlessRestarts() throws {
        let (engine, store) = try Self.seeded(.restarts)
        let before = try Self.state(store)
        engine.restartCommits = 1_000
        #expect(throws: LocalStoreError.self) { try store.upsert([["id": "c", "n": 3]], into: "T") }
        engine.restartCommits = 0
        #expect(try Self.state(store) == before)
    }

    @Test("an engine that begins a store call's transaction again without declaring it: the call fails and commits nothing")
    func undeclaredRestart() throws {
        let (engine, store) = try Self.seeded(.restarts)
        let before = try Self.state(store)
        engine.declaresRestarts = false
        engine.restartFrom = 1
        #expect(throws: LocalStoreError.self) { try store.upsert([["id": "c", "n": 3], ["id": "d", "n": 4]], into: "T") }
        engine.restartFrom = nil
        engine.restartCommits = 1
        #expect(throws: LocalStoreError.self) { try store.upsert([["id": "c", "n": 3], ["id": "d", "n": 4]], into: "T") }
        #expect(try Self.state(store) == before)
        // In a write body every write is kept: a restart there is replayed, declared or not.
        engine.restartFrom = 1
        try store.write { tx in try tx.upsert([["id": "c", "n": 3], ["id": "d", "n": 4]], into: "T") }
        #expect(try Self.state(store).count == before.count + 2)
    }
}
