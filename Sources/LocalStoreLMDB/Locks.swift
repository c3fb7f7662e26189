#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import LocalStore
import Synchronization

/// The package's shared mutex (core `PThreadMutex`), under the name this module uses.
typealias PosixMutex = PThreadMutex

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
