#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import LocalStore
import Synchronization

/// A plain mutex over `pthread_mutex_t` that may be held across arbitrary (throwing, generic) code,
/// with a condition variable for waiting on the state it guards.
final class PThreadMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits for a ``broadcast()``; the caller holds the mutex.
    func wait() { pthread_cond_wait(condition, mutex) }
    /// Wakes every waiter; the caller holds the mutex.
    func broadcast() { pthread_cond_broadcast(condition) }

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// Remembers which thread runs a store's `write {}` body, so that a call on the store from inside
/// that body is refused with `misuse` instead of deadlocking on the writer lock.
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
