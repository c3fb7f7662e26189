import Foundation
import Synchronization
import Testing

@testable import LocalStoreLMDB

/// The process's transaction gate on its own: shared holders never overlap an exclusive one, exclusive
/// holders never overlap each other, a waiting exclusive holder gets the gate while readers keep coming,
/// and a reader that waits for a waiting exclusive holder goes ahead after its patience.
@Suite("LMDB: the transaction gate")
struct TransactionGateTests {
    /// What the holders saw: `shared` counts the shared holders inside, `exclusive` the exclusive ones.
    private final class Occupancy: Sendable {
        let shared = Atomic<Int>(0)
        let exclusive = Atomic<Int>(0)
        let violations = Atomic<Int>(0)
        let exclusiveEntries = Atomic<Int>(0)
        let sharedEntries = Atomic<Int>(0)
    }

    @Test("readers and exclusive holders exclude each other under contention")
    func mutualExclusion() throws {
        let gate = TransactionGate()
        let seen = Occupancy()
        let readers = 4
        let rounds = 20_000
        let exclusiveRounds = 2_000
        /// Stays inside the gate for a moment, so that holders overlap.
        @Sendable func linger() {
            var x = 0
            for i in 0..<50 { x &+= i }
            if x == -1 { print(x) }
        }
        let done = DispatchGroup()
        func spawn(_ body: @escaping @Sendable () -> Void) {
            done.enter()
            Thread {
                body()
                done.leave()
            }.start()
        }
        for _ in 0..<readers {
            spawn {
                for _ in 0..<rounds {
                    gate.lockShared()
                    seen.shared.wrappingAdd(1, ordering: .sequentiallyConsistent)
                    if seen.exclusive.load(ordering: .sequentiallyConsistent) != 0 {
                        seen.violations.wrappingAdd(1, ordering: .relaxed)
                    }
                    linger()
                    seen.sharedEntries.wrappingAdd(1, ordering: .relaxed)
                    seen.shared.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                    gate.unlockShared()
                }
            }
        }
        for _ in 0..<2 {
            spawn {
                for _ in 0..<exclusiveRounds {
                    gate.lockExclusive()
                    if seen.exclusive.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue != 1
                        || seen.shared.load(ordering: .sequentiallyConsistent) != 0
                    {
                        seen.violations.wrappingAdd(1, ordering: .relaxed)
                    }
                    linger()
                    if seen.shared.load(ordering: .sequentiallyConsistent) != 0 { seen.violations.wrappingAdd(1, ordering: .relaxed) }
                    seen.exclusiveEntries.wrappingAdd(1, ordering: .relaxed)
                    seen.exclusive.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                    gate.unlockExclusive()
                }
            }
        }
        #expect(done.wait(timeout: .now() + 120) == .success, "the holders finished (no deadlock)")
        #expect(seen.violations.load(ordering: .relaxed) == 0)
        #expect(seen.sharedEntries.load(ordering: .relaxed) == readers * rounds)
        #expect(seen.exclusiveEntries.load(ordering: .relaxed) == 2 * exclusiveRounds)
        // The gate is free again: both kinds of holder get it at once.
        gate.lockExclusive()
        gate.unlockExclusive()
        gate.lockShared()
        gate.unlockShared()
    }

    @Test("a reader waits for a waiting exclusive holder only for its patience")
    func readerPatience() throws {
        let gate = TransactionGate()
        gate.lockShared()
        let seen = Occupancy()
        let waiter = Thread {
            gate.lockExclusive()
            seen.exclusiveEntries.wrappingAdd(1, ordering: .sequentiallyConsistent)
            gate.unlockExclusive()
        }
        waiter.start()
        // Let the exclusive holder start waiting (it cannot get the gate while the first reader holds it).
        Thread.sleep(forTimeInterval: 0.05)
        #expect(seen.exclusiveEntries.load(ordering: .sequentiallyConsistent) == 0)
        // A second reader defers to the waiting exclusive holder, then goes ahead: no deadlock although
        // the first reader has not left.
        let start = DispatchTime.now().uptimeNanoseconds
        gate.lockShared()
        let waited = DispatchTime.now().uptimeNanoseconds - start
        #expect(waited >= UInt64(TransactionGate.readerPatienceNanoseconds) / 2)
        #expect(seen.exclusiveEntries.load(ordering: .sequentiallyConsistent) == 0)
        gate.unlockShared()
        gate.unlockShared()
        // The last reader left: the exclusive holder gets the gate.
        for _ in 0..<200 where seen.exclusiveEntries.load(ordering: .sequentiallyConsistent) == 0 {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(seen.exclusiveEntries.load(ordering: .sequentiallyConsistent) == 1)
    }
}
