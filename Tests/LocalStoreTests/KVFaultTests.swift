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

    init(_ mode: UndoMode) { base = InMemoryKVEngine(savepoints: mode == .savepoints, restarts: mode == .restarts) }

    func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R { try base.read(body) }
    func write<R>(_ body: (Writer) throws -> R) throws -> R { try base.write { try body(Writer(base: $0, engine: self)) } }
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
        func put(_ key: [UInt8], _ value: [UInt8]) throws {
            if let n = engine.failFrom {
                guard n > 0 else {
                    if !engine.failForever { engine.failFrom = nil }
                    throw LocalStoreError(.ioError, "injected put failure")
                }
                engine.failFrom = n - 1
            }
            try base.put(key, value)
        }
        func delete(_ key: [UInt8]) throws { try base.delete(key) }
        var hasSavepoints: Bool { base.hasSavepoints }
        func setSavepoint() throws { try base.setSavepoint() }
        func rollbackToSavepoint() throws {
            if engine.failRollback { throw LocalStoreError(.ioError, "injected rollback failure") }
            try base.rollbackToSavepoint()
        }
        var canRestart: Bool { base.canRestart }
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

    @Test(
        "a call failing at any put, in a write body or a nested write that goes on, is undone, and the rest commits",
        arguments: UndoMode.allCases, [false, true])
    func call(mode: UndoMode, nested: Bool) throws {
        var failures = 0
        for failAt in 0..<10 {
            let (engine, store) = try Self.seeded(mode)
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
            if failed { failures += 1 }
        }
        #expect(failures > 3, "the injected failures must hit the call")
    }

    @Test("a nested write failing at any put leaves nothing of it, the queue included", arguments: UndoMode.allCases)
    func nestedWrite(mode: UndoMode) throws {
        var failures = 0
        for failAt in 0..<16 {
            let (engine, store) = try Self.seeded(mode)
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
            if failed { failures += 1 }
        }
        #expect(failures > 5, "the injected failures must hit the nested write")
    }

    @Test("a composite call failing at any put, in a write body or on its own, leaves nothing of it", arguments: UndoMode.allCases)
    func compositeCall(mode: UndoMode) throws {
        var failures = 0
        for failAt in 0..<8 {
            let (engine, store) = try Self.seeded(mode)
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
            if failed { failures += 1 }
        }
        #expect(failures > 3, "the injected failures must hit the composite call")
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
}
