#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

// The lock primitives every backend of this package shares (`package` access: not public API).

/// A readers-writer lock over `pthread_rwlock_t`. Writer-preferring by default, so a stream of
/// readers cannot starve the writer; reader-preferring when readers may take it recursively.
package final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    package init(preferWriters: Bool = true) {
        lock = .allocate(capacity: 1)
        #if canImport(Glibc)
        if preferWriters {
            var attr = pthread_rwlockattr_t()
            pthread_rwlockattr_init(&attr)
            pthread_rwlockattr_setkind_np(&attr, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
            pthread_rwlock_init(lock, &attr)
            pthread_rwlockattr_destroy(&attr)
        } else {
            pthread_rwlock_init(lock, nil)
        }
        #else
        pthread_rwlock_init(lock, nil)
        #endif
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    package func withReadLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    package func withWriteLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// A plain mutex over `pthread_mutex_t` that may be held across arbitrary (throwing, generic) code,
/// with a condition variable for waiting on the state it guards.
package final class PThreadMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
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

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Takes the mutex if it is free; `false` (without waiting) when another thread holds it.
    package func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    /// Waits for a ``broadcast()``; the caller holds the mutex.
    package func wait() { pthread_cond_wait(condition, mutex) }
    /// Wakes every waiter; the caller holds the mutex.
    package func broadcast() { pthread_cond_broadcast(condition) }

    package func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A value behind a pthread mutex, with the `withLock` of `Synchronization.Mutex`.
///
/// The package uses it instead of `Synchronization.Mutex` because on Linux that `Mutex` hands a contended
/// lock to the next thread inside the kernel (`FUTEX_LOCK_PI`, a raw `syscall` ThreadSanitizer does not
/// see), so every contended use is reported as a data race (a false positive of the Swift standard
/// library's implementation, docs/reliability.md, "Sanitizers"). ThreadSanitizer intercepts
/// `pthread_mutex_lock`, so with this type it checks the code inside the lock instead of flagging it.
///
/// The value lives in memory of its own rather than in a stored `var`: the mutex already makes access
/// exclusive, and a class's stored `var` passed `inout` costs a dynamic exclusivity check
/// (`swift_beginAccess`/`swift_endAccess`) on every call. `withLock` is inlinable, so it is specialized
/// for each value and body (no generic call per lock; the backends take these locks on every read).
package final class LockedValue<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}

/// Remembers which thread holds a store's write lock, so that a call on the store from inside its
/// own `write {}` body is refused with `misuse` instead of deadlocking.
///
/// The owner is an atomic thread identity (no lock: every read of every backend asks it). Only the
/// writer thread sets and clears it, so a thread that finds its own identity there set it itself,
/// and one that does not is not the writer; a relaxed load answers both exactly.
///
/// A non-copyable value, not an object: a store holds it in place, so asking it is one load, with no
/// retain and release of an object around the call (two locked instructions on every read).
package struct WriterThread: ~Copyable, Sendable {
    /// `pthread_self()` of the thread holding the write lock, 0 when none does.
    @usableFromInline let owner = Atomic<UInt>(0)

    package init() {}

    @usableFromInline static var current: UInt {
        #if canImport(Glibc)
        return UInt(pthread_self())
        #else
        return UInt(bitPattern: pthread_self())
        #endif
    }

    @inlinable package var isCurrentThread: Bool { owner.load(ordering: .relaxed) == WriterThread.current }

    @inlinable package func set() { owner.store(WriterThread.current, ordering: .relaxed) }
    @inlinable package func clear() { owner.store(0, ordering: .relaxed) }

    @inlinable package func check() throws {
        if isCurrentThread {
            throw LocalStoreError(
                .misuse, "the store was called from inside its own write {} body; use the transaction passed to the body")
        }
    }
}
