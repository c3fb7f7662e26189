#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A readers-writer lock over `pthread_rwlock_t`, writer-preferring so a stream of readers cannot
/// starve the writer.
final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        #if canImport(Glibc)
        var attr = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attr)
        pthread_rwlockattr_setkind_np(&attr, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attr)
        pthread_rwlockattr_destroy(&attr)
        #else
        pthread_rwlock_init(lock, nil)
        #endif
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withReadLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withWriteLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// Remembers which thread holds a store's write lock, so that a call on the store from inside its
/// own `write {}` body is refused with `misuse` instead of deadlocking.
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
