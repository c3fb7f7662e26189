import Foundation
import LocalStore
import LocalStoreKV
import Testing

/// `KVStore.close()`: it waits for the calls running on other threads before it closes the engine, once;
/// from inside a write body it leaves the engine to the end of that body's call.
@Suite("KVStore: close")
struct KVStoreCloseTests {
    /// An in-memory engine whose reads can be held inside their body, and which records what happens.
    final class Recorder: @unchecked Sendable {  // `lock` guards `events` and `holdReads`
        let lock = NSLock()
        var events: [String] = []
        var holdReads = false
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        func record(_ event: String) { lock.withLock { events.append(event) } }
    }

    struct HoldingEngine: OrderedKeyValueEngine {
        let base = InMemoryKVEngine()
        let recorder: Recorder

        func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R {
            try base.read { snapshot in
                if recorder.lock.withLock({ recorder.holdReads }) {
                    recorder.entered.signal()
                    recorder.release.wait()
                    defer { recorder.record("read ended") }
                    return try body(snapshot)
                }
                return try body(snapshot)
            }
        }

        func write<R>(_ body: (InMemoryKVEngine.Transaction) throws -> R) throws -> R { try base.write(body) }

        func close() throws { recorder.record("engine closed") }
    }

    @Test("a close on another thread waits for a running read, then closes the engine once; later calls fail with closed")
    func closeWaitsForRunningCalls() throws {
        let recorder = Recorder()
        let store = try KVStore(engine: HoldingEngine(recorder: recorder))
        try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        try store.upsert([["id": "a", "n": 1]], into: "T")
        recorder.lock.withLock { recorder.holdReads = true }
        let readDone = DispatchSemaphore(value: 0)
        let closeDone = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var read: Item?
        nonisolated(unsafe) var closeError: Error?
        Thread.detachNewThread {
            read = try? store.read(table: "T", id: "a")
            readDone.signal()
        }
        #expect(recorder.entered.wait(timeout: .now() + .seconds(30)) == .success, "the read began")
        Thread.detachNewThread {
            do { try store.close() } catch { closeError = error }
            recorder.record("close returned")
            closeDone.signal()
        }
        // The close is waiting: it has not closed the engine, nor returned.
        let waited = closeDone.wait(timeout: .now() + .milliseconds(200)) == .timedOut
        #expect(waited, "close returned while a call was running")
        #expect(recorder.lock.withLock { recorder.events }.isEmpty)
        recorder.release.signal()
        // Bounded waits: a close that never ends (or a read that never returns) fails the test, not hangs it.
        #expect(readDone.wait(timeout: .now() + .seconds(30)) == .success, "the read returned")
        if waited { #expect(closeDone.wait(timeout: .now() + .seconds(30)) == .success, "the close returned") }
        #expect(closeError == nil)
        #expect(read?["n"] == .int(1), "the running read finished with its row")
        #expect(recorder.lock.withLock { recorder.events } == ["read ended", "engine closed", "close returned"])
        #expect(throws: LocalStoreError.self) { _ = try store.read(table: "T", id: "a") }
        try store.close()
        #expect(recorder.lock.withLock { recorder.events }.filter { $0 == "engine closed" }.count == 1)
    }

    @Test("a close inside a write body closes the engine when that call ends, once; the body's writes commit")
    func closeInsideAWriteBody() throws {
        let recorder = Recorder()
        let engine = HoldingEngine(recorder: recorder)
        let store = try KVStore(engine: engine)
        try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        try store.write { tx in
            try tx.upsert([["id": "a", "n": 1]], into: "T")
            try store.close()
            #expect(recorder.lock.withLock { recorder.events }.isEmpty, "the engine stays open until the body's call ends")
        }
        #expect(recorder.lock.withLock { recorder.events } == ["engine closed"])
        let error = #expect(throws: LocalStoreError.self) { _ = try store.read(table: "T", id: "a") }
        #expect(error?.code == .closed)
        let reopened = try KVStore(engine: InMemoryKVEngineView(base: engine.base))
        #expect(try reopened.read(table: "T", id: "a")?["n"] == .int(1))
    }

    /// The same in-memory entries under a second store object.
    struct InMemoryKVEngineView: OrderedKeyValueEngine {
        let base: InMemoryKVEngine
        func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R { try base.read(body) }
        func write<R>(_ body: (InMemoryKVEngine.Transaction) throws -> R) throws -> R { try base.write(body) }
        func close() throws {}
    }
}
