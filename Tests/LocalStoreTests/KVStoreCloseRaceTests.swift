import Foundation
import LocalStore
import LocalStoreKV
import Testing

/// `KVStore`'s call bookkeeping under races: closes (two at once, or one from inside a write body) racing
/// with calls starting on other threads; the observation probe, which reads the engine holding the
/// store's state lock, next to a write on an engine whose reads wait for its writer.
@Suite("KVStore: close and calls racing")
struct KVStoreCloseRaceTests {
    /// An in-memory engine that checks that no read or write runs after its close, that it is closed once,
    /// and that nothing runs on it when it closes.
    final class Checked: @unchecked Sendable {  // `lock` guards everything
        let lock = NSLock()
        var running = 0
        var closes = 0
        var violations: [String] = []
        func begin() { lock.withLock { if closes > 0 { violations.append("a call on the closed engine") }; running += 1 } }
        func end() { lock.withLock { running -= 1 } }
        func close() {
            lock.withLock {
                closes += 1
                if running > 0 { violations.append("closed with \(running) transactions running") }
            }
        }
    }

    struct CheckedEngine: OrderedKeyValueEngine {
        let base = InMemoryKVEngine()
        let checked: Checked
        func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R {
            checked.begin()
            defer { checked.end() }
            return try base.read(body)
        }
        func write<R>(_ body: (InMemoryKVEngine.Transaction) throws -> R) throws -> R {
            checked.begin()
            defer { checked.end() }
            return try base.write(body)
        }
        func close() throws { checked.close() }
    }

    @Test("two closes and a close from inside a write body, racing with reads and writes on other threads: every call succeeds or fails with closed, the engine closes once, after the last")
    func closesRacingWithCalls() throws {
        for round in 0..<60 {
            let checked = Checked()
            let store = try KVStore(engine: CheckedEngine(checked: checked))
            try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
            let others = LockedErrors()
            let group = DispatchGroup()
            let start = DispatchSemaphore(value: 0)
            let threads = 4
            for t in 0..<threads {
                group.enter()
                Thread.detachNewThread {
                    start.wait()
                    defer { group.leave() }
                    for n in 0..<30 {
                        do {
                            switch (t + n) % 3 {
                            case 0: _ = try store.read(table: "T", id: .string("r\(n)"))
                            case 1: try store.upsert([["id": .string("r\(n)"), "n": .int(Int64(t))]], into: "T")
                            default:
                                try store.write { tx in
                                    try tx.upsert([["id": .string("w\(t)"), "n": .int(Int64(n))]], into: "T")
                                    // Sometimes the close comes from inside a write body.
                                    if round % 3 == 0 && t == 0 && n == 5 { try store.close() }
                                }
                            }
                        } catch let error as LocalStoreError where error.code == .closed {
                            return
                        } catch {
                            others.add("\(error)")
                            return
                        }
                    }
                }
            }
            for _ in 0..<2 {
                group.enter()
                Thread.detachNewThread {
                    start.wait()
                    defer { group.leave() }
                    usleep(UInt32(round % 5) * 200)
                    do { try store.close() } catch { others.add("close: \(error)") }
                }
            }
            for _ in 0..<(threads + 2) { start.signal() }
            guard group.wait(timeout: .now() + .seconds(10)) == .success else {
                Issue.record("round \(round): a call or a close did not return")
                return  // its threads stay blocked: no further round
            }
            // Every close has returned; the one that closed the engine may be the last call's (inside a body).
            let deadline = Date().addingTimeInterval(5)
            while checked.lock.withLock({ checked.closes }) == 0 && Date() < deadline { usleep(1_000) }
            #expect(others.errors.isEmpty, "round \(round): \(others.errors)")
            checked.lock.withLock {
                #expect(checked.closes == 1, "round \(round)")
                #expect(checked.violations.isEmpty, "round \(round): \(checked.violations)")
            }
            #expect(throws: LocalStoreError.self) { _ = try store.read(table: "T", id: "r1") }
        }
    }

    final class LockedErrors: @unchecked Sendable {
        let lock = NSLock()
        var list: [String] = []
        func add(_ s: String) { lock.withLock { list.append(s) } }
        var errors: [String] { lock.withLock { list } }
    }

    /// An engine whose reads wait while a write transaction is open (one lock for the whole store, as a
    /// single-connection engine has), which the engine contract allows. Its writes can be held between
    /// taking the lock and running their body.
    final class Serializing: @unchecked Sendable {
        let condition = NSCondition()
        var writing = false
        var holdWrites = false
        let writerEntered = DispatchSemaphore(value: 0)
        let writerGo = DispatchSemaphore(value: 0)
        let readerWaiting = DispatchSemaphore(value: 0)
    }

    struct SerializingEngine: OrderedKeyValueEngine {
        let base = InMemoryKVEngine()
        let s: Serializing
        func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R {
            s.condition.withLock {
                if s.writing { s.readerWaiting.signal() }
                while s.writing { s.condition.wait() }
            }
            return try base.read(body)
        }
        func write<R>(_ body: (InMemoryKVEngine.Transaction) throws -> R) throws -> R {
            let hold = s.condition.withLock { () -> Bool in
                s.writing = true
                return s.holdWrites
            }
            defer { s.condition.withLock { s.writing = false; s.condition.broadcast() } }
            if hold {
                s.writerEntered.signal()
                s.writerGo.wait()
            }
            return try base.write(body)
        }
        func close() throws {}
    }

    @Test("the observation probe (an observer registering) next to a write on an engine whose reads wait for its writer: no deadlock")
    func probeDoesNotHoldTheStateLockAcrossAnEngineRead() throws {
        let s = Serializing()
        let store = try KVStore(engine: SerializingEngine(s: s))
        try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        s.condition.withLock { s.holdWrites = true }
        let writeDone = DispatchSemaphore(value: 0)
        let observerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? store.upsert([["id": "a", "n": 1]], into: "T")
            writeDone.signal()
        }
        s.writerEntered.wait()
        // An observer registers: the center runs the store's probe on this thread, which reads the engine.
        nonisolated(unsafe) var changes: StoreChanges?
        Thread.detachNewThread {
            changes = store.changes()
            observerDone.signal()
        }
        #expect(s.readerWaiting.wait(timeout: .now() + .seconds(5)) == .success, "the probe did not read the engine")
        // The write goes on: its body reads the store's catalog.
        s.writerGo.signal()
        let wrote = writeDone.wait(timeout: .now() + .seconds(5)) == .success
        let observed = observerDone.wait(timeout: .now() + .seconds(5)) == .success
        #expect(wrote, "the write never finished (the probe holds the store's state lock while it waits for the engine's writer)")
        #expect(observed, "the observer's registration never returned")
        if wrote && observed {
            _ = changes
            try store.close()
        }
    }
}
