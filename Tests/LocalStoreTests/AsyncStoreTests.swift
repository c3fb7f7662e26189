import Dispatch
import Foundation
import LocalStore
import Testing

@Suite("async API")
struct AsyncStoreTests {
    @Test func asyncCallsMirrorTheSyncOnes() async throws {
        let store = try InMemoryStore()
        try await store.defineTable(TableSchema("T", ["n": .integer]))
        try await store.upsert([["id": "a", "n": 1], ["id": "b", "n": 2]], into: "T")
        #expect(try await store.read(table: "T", id: "A")?["n"] == .int(1))
        #expect(try await store.read(Query("T", where: Field("n") > 1)).items.count == 1)
        let op = try await store.write { tx in
            try tx.upsert([["id": "c", "n": 3]], into: "T")
            return try tx.appendOperation(table: "T", itemId: "c")
        }
        #expect(op.id == 1)
        #expect(try await store.pendingOperationCount() == 1)
        try await store.removeOperation(id: op.id)
        #expect(try await store.operation(after: 0) == nil)
        try await store.delete(matching: Query("T", where: Field("n") >= 2))
        #expect(try await store.read(Query("T")).items.count == 1)
        try await store.close()
        await #expect(throws: LocalStoreError.self) { try await store.read(Query("T")) }
    }

    /// Many calls blocked inside the store at once must not occupy Swift's cooperative threads: if they
    /// did, the task that releases them could never run (the pool has one thread per core).
    @Test func blockedCallsDoNotStarveTheCooperativePool() async throws {
        let store = try InMemoryStore()
        try await store.defineTable(TableSchema("T", ["n": .integer]))
        let release = DispatchSemaphore(value: 0)
        let blockers = ProcessInfo.processInfo.activeProcessorCount * 4
        // One deadline for every blocker: a pool starved by them never runs the releaser, so they all time
        // out. It is long because in a whole-suite run other tests' synchronous bodies hold the cooperative
        // threads (two on two cores) for minutes — a 60 s deadline failed that way at 318 s with the LMDB
        // delete-walk tests running — while a working store releases them within milliseconds when alone.
        let deadline = DispatchTime.now() + 900
        let timedOut = try await withThrowingTaskGroup(of: Bool.self) { group in
            for n in 0..<blockers {
                group.addTask {
                    try await store.write { tx in
                        try tx.upsert([["id": .string("\(n)"), "n": .int(Int64(n))]], into: "T")
                        return release.wait(timeout: deadline) == .timedOut
                    }
                }
            }
            group.addTask {
                // Runs on the cooperative pool while every blocker waits.
                try await Task.sleep(nanoseconds: 50_000_000)
                for _ in 0..<blockers { release.signal() }
                return false
            }
            var any = false
            for try await t in group { any = any || t }
            return any
        }
        #expect(!timedOut)
        #expect(try await store.read(Query("T")).items.count == blockers)
    }
}
