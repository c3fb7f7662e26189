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
///
/// Shared holders are counted in one atomic word, whose `blocked` bit is set while an exclusive holder
/// holds the gate or waits for it. While it is clear, taking and leaving the gate shared is one atomic
/// operation each (every LMDB read and write passes here; the mutex round trips were two of a read by
/// id's ~9 locked operations). While it is set, shared holders take the mutex: to wait, and the last one
/// to leave wakes the exclusive waiter. The count and the bit live in the same word, so a shared holder
/// that counted itself before the bit was set is seen by the exclusive waiter, and one that tries after
/// it finds the bit.
final class TransactionGate: @unchecked Sendable {
    /// How long a new reader defers to a waiting resize.
    static let readerPatienceNanoseconds = 20_000_000

    /// The shared holders (low bits) and ``blocked``.
    private let word = Atomic<Int>(0)
    /// Set in ``word`` while an exclusive holder holds or waits (guarded by `mutex` for its writers).
    private static let blocked = 1 << 62

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let changed: UnsafeMutablePointer<pthread_cond_t>
    // Guarded by `mutex`.
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
        var current = word.load(ordering: .relaxed)
        while current & TransactionGate.blocked == 0 {
            let (exchanged, original) = word.compareExchange(expected: current, desired: current + 1, ordering: .acquiring)
            if exchanged { return }
            current = original
        }
        lockSharedWaiting()
    }

    /// ``lockShared()`` while an exclusive holder holds or waits: under the mutex, with the patience above.
    private func lockSharedWaiting() {
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
        // Counted even when `blocked` is still set (a reader that waited long enough): the waiting
        // exclusive holder then waits for it.
        word.wrappingAdd(1, ordering: .acquiring)
        pthread_mutex_unlock(mutex)
    }

    func unlockShared() {
        let left = word.wrappingSubtract(1, ordering: .releasing).newValue
        // The last shared holder left while an exclusive holder waits: wake it (under the mutex, so that
        // the wake-up cannot fall between its check of the count and its wait).
        if left == TransactionGate.blocked {
            pthread_mutex_lock(mutex)
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(mutex)
        }
    }

    func lockExclusive() {
        pthread_mutex_lock(mutex)
        waitingExclusive += 1
        word.bitwiseOr(TransactionGate.blocked, ordering: .acquiringAndReleasing)
        while exclusive || word.load(ordering: .acquiring) & ~TransactionGate.blocked > 0 { pthread_cond_wait(changed, mutex) }
        waitingExclusive -= 1
        exclusive = true
        pthread_mutex_unlock(mutex)
    }

    func unlockExclusive() {
        pthread_mutex_lock(mutex)
        exclusive = false
        if waitingExclusive == 0 { word.bitwiseAnd(~TransactionGate.blocked, ordering: .releasing) }
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
    }
}

/// The cross-process writer lock of LocalStore's LMDB stores, taken before LMDB's own writer mutex
/// (which waits without a timeout): an open-file-description lock on one byte of `lock.mdb` far beyond
/// anything LMDB locks there (LMDB locks byte 0 and, for its reader check, the byte at each reader's
/// pid). A writer polls it until ``LMDBStoreOptions/busyTimeout`` has passed, then gives up with `busy`,
/// as SQLite's busy timeout does. The kernel releases it when its process dies.
///
/// Within a process the environment's `writeLock` serializes writers, so only one thread of a process
/// ever waits here. The descriptor stays open until the environment is closed: closing any descriptor
/// of `lock.mdb` would drop LMDB's own (classic POSIX) locks of this process.
final class CrossProcessWriterLock: @unchecked Sendable {
    /// The byte locked: 1 TiB, far above any pid (LMDB's reader check locks the byte at each pid).
    static let offset: Int = 1 << 40
    /// `F_OFD_SETLK` (Linux 3.15+): a lock owned by the open file description, not by the process.
    private static let setLock: Int32 = 37

    private let fd: Int32
    private let path: String

    /// Opens `lockFile` (LMDB's `lock.mdb`, which exists once the environment is open); `nil` when it
    /// cannot be opened for writing (then writers wait in LMDB's mutex as before).
    init?(lockFile: String, storePath: String) {
        let fd = open(lockFile, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.path = storePath
    }

    /// Closes the descriptor. Call only after `mdb_env_close` (see the type's documentation).
    func close() { closeDescriptor(fd) }

    private func set(_ type: Int32) -> Int32 {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(Self.offset)
        lock.l_len = 1
        lock.l_pid = 0
        return fcntl(fd, Self.setLock, &lock)
    }

    /// Takes the lock, waiting at most `timeout`; `busy` naming the store after that.
    func lock(timeout: Duration) throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var pause: Duration = .microseconds(500)
        while true {
            if set(Int32(F_WRLCK)) == 0 { return }
            let code = errno
            guard code == EAGAIN || code == EACCES || code == EINTR else {
                throw LocalStoreError(.ioError, "cannot lock the writer lock of LMDB store '\(path)': \(String(cString: strerror(code)))")
            }
            let now = clock.now
            guard now < deadline else {
                throw LocalStoreError(
                    .busy,
                    "LMDB store '\(path)' is being written by another process; gave up after the busy timeout of \(timeout)")
            }
            let sleep = min(pause, deadline - now)
            let micros = max(1, sleep.components.seconds * 1_000_000 + sleep.components.attoseconds / 1_000_000_000_000)
            usleep(UInt32(clamping: micros))
            pause = min(pause * 2, .milliseconds(10))
        }
    }

    func unlock() { _ = set(Int32(F_UNLCK)) }
}

private func closeDescriptor(_ fd: Int32) { _ = close(fd) }
