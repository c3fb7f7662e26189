#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import LocalStore
import Synchronization

/// A plain mutex over `pthread_mutex_t`, usable around generic, non-`Sendable` results (which
/// `Synchronization.Mutex.withLock` does not accept without `sending`).
final class PosixMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// The gate every LMDB transaction of this process passes: a transaction holds it shared for its
/// whole life; changing the map size (which LMDB allows only while the process has no active
/// transaction) and closing the environment hold it exclusively.
///
/// Fairness: while an exclusive holder waits, new shared holders wait too — but only for
/// ``readerPatience``, then they go ahead. Waiting keeps a stream of short reads from starving a
/// map resize; going ahead after a while keeps a pathological pattern from deadlocking (a write
/// body holding the gate shared and waiting for a helper thread that reads, while another thread
/// waits to adopt a map size grown by another process). Exclusive holders never wait for anything
/// while they hold the gate.
final class TransactionGate: @unchecked Sendable {
    /// How long a new reader defers to a waiting resize.
    static let readerPatienceNanoseconds = 20_000_000

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let changed: UnsafeMutablePointer<pthread_cond_t>
    // Guarded by `mutex`.
    private var readers = 0
    private var exclusive = false
    private var waitingExclusive = 0

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        changed = .allocate(capacity: 1)
        changed.initialize(to: pthread_cond_t())
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        changed.deinitialize(count: 1)
        changed.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    private static func deadline(afterNanoseconds n: Int) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Int(now.tv_nsec) + n
        return timespec(tv_sec: now.tv_sec + total / 1_000_000_000, tv_nsec: total % 1_000_000_000)
    }

    private static func isPast(_ deadline: timespec) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)
    }

    func lockShared() {
        pthread_mutex_lock(mutex)
        if exclusive || waitingExclusive > 0 {
            var deadline = TransactionGate.deadline(afterNanoseconds: TransactionGate.readerPatienceNanoseconds)
            while exclusive || (waitingExclusive > 0 && !TransactionGate.isPast(deadline)) {
                if exclusive {
                    pthread_cond_wait(changed, mutex)
                } else {
                    pthread_cond_timedwait(changed, mutex, &deadline)
                }
            }
        }
        readers += 1
        pthread_mutex_unlock(mutex)
    }

    func unlockShared() {
        pthread_mutex_lock(mutex)
        readers -= 1
        if readers == 0 { pthread_cond_broadcast(changed) }
        pthread_mutex_unlock(mutex)
    }

    func lockExclusive() {
        pthread_mutex_lock(mutex)
        waitingExclusive += 1
        while exclusive || readers > 0 { pthread_cond_wait(changed, mutex) }
        waitingExclusive -= 1
        exclusive = true
        pthread_mutex_unlock(mutex)
    }

    func unlockExclusive() {
        pthread_mutex_lock(mutex)
        exclusive = false
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
    }
}

/// Remembers which thread runs the environment's write transaction, so that a call on the store
/// from inside its own `write {}` body is refused with `misuse` instead of deadlocking on LMDB's
/// writer lock (the same idea as the core's `WriterThread`).
final class WriterThread: Sendable {
    private let owner = Mutex<pthread_t?>(nil)

    var isCurrentThread: Bool {
        owner.withLock { o in o.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    func set() { owner.withLock { $0 = pthread_self() } }
    func clear() { owner.withLock { $0 = nil } }

    func check() throws {
        if isCurrentThread {
            throw LocalStoreError(
                .misuse, "the store was called from inside its own write {} body; use the transaction passed to the body")
        }
    }
}
