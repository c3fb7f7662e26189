/// How much a commit waits for the disk: the one durability setting every persistent backend takes
/// (`SQLiteStore.Options`, `SQLCipherStore.Options` and `LMDBStoreOptions` all have a `durability`
/// of this type).
///
/// Every level survives a crash of the *process*: a committed transaction is in the operating system's
/// hands before the commit returns. The levels differ in what an operating-system crash or a power loss
/// may cost. Each backend documents how it maps them:
///
/// | level | SQLite / SQLCipher (WAL) | LMDB |
/// |---|---|---|
/// | ``full`` | `PRAGMA synchronous = FULL` | flushes data and meta page (default) |
/// | ``normal`` | `PRAGMA synchronous = NORMAL` (default) | `MDB_NOMETASYNC` |
/// | ``off`` | `PRAGMA synchronous = OFF` | `MDB_NOSYNC` |
///
/// ``InMemoryStore`` keeps nothing on disk and has no durability setting.
public enum StoreDurability: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Every commit is flushed to disk before it returns: a committed transaction survives a power loss
    /// or an operating-system crash too. The slowest writes.
    case full
    /// A commit is atomic and consistent and survives a process crash; after a power loss or an
    /// operating-system crash the last transactions committed before it may be rolled back, but the
    /// store is never damaged.
    case normal
    /// Nothing is flushed at commit; the operating system writes when it likes. A process crash loses
    /// nothing, but a power loss or operating-system crash may lose recent transactions and, on file
    /// systems that reorder writes, damage the store. Only for data that can be rebuilt.
    case off

    /// `full`, `normal` or `off`.
    public var description: String {
        switch self {
        case .full: "full"
        case .normal: "normal"
        case .off: "off"
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded down, clamped to `0...Int32.max` (a negative duration is 0): the unit
    /// of the engines' busy timeouts.
    package var clampedMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        if seconds >= Int64(Int32.max) / 1000 + 1 { return Int32.max }
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
