import LocalStore

/// An ordered key-value engine that ``KVStore`` turns into a `LocalStore`.
///
/// Keys and values are byte strings; keys are ordered by their bytes, a shorter key first on a common
/// prefix (`memcmp` order — RocksDB's, LevelDB's and LMDB's default). The contract:
///
/// - ``read(_:)`` runs its body on a consistent snapshot: it sees every write transaction committed
///   before it began, and nothing of one committed meanwhile.
/// - ``write(_:)`` runs its body in one atomic write transaction: its reads (``OrderedKeyValueReader/get(_:)``
///   and ``OrderedKeyValueReader/scan(from:to:reverse:_:)``) see its own puts and deletes; it commits when
///   the body returns and discards every write when the body throws. `KVStore` never runs two write
///   transactions at a time on one engine object; an engine shared by several store objects (the same
///   files opened twice) must serialize their writers itself.
/// - Failures are thrown; a `LocalStoreError` keeps its code (`ioError`, `full`, `corrupt`, ...), any
///   other error is reported as `ioError`.
///
/// Savepoints are ``KVStore``'s: the engine needs no nested transactions. It may offer savepoints
/// (``OrderedKeyValueWriter/hasSavepoints``) or restarts (``OrderedKeyValueWriter/canRestart``), each of
/// which spares `KVStore` a read before every write of a call it may have to undo.
public protocol OrderedKeyValueEngine: Sendable {
    /// The view a read transaction gets.
    associatedtype Reader: OrderedKeyValueReader
    /// The view a write transaction gets.
    associatedtype Writer: OrderedKeyValueWriter

    /// Runs `body` on a consistent snapshot.
    func read<R>(_ body: (Reader) throws -> R) throws -> R
    /// Runs `body` in one atomic write transaction (see the protocol's contract).
    func write<R>(_ body: (Writer) throws -> R) throws -> R
    /// Releases the engine; ``KVStore`` calls it once, from `close()`.
    func close() throws
}

/// The reads of a snapshot or a write transaction.
public protocol OrderedKeyValueReader {
    /// The value of `key`, or `nil` when there is none.
    func get(_ key: [UInt8]) throws -> [UInt8]?
    /// Calls `body` with the value of `key` (`nil` when there is none), lent: valid only until `body`
    /// returns. `KVStore` reads rows, index targets and counters through it, so an engine that can hand
    /// out its own buffer (LMDB's memory map, a pinned RocksDB slice) saves a copy per read; `KVStore` copies
    /// what it keeps and never writes from inside `body`. The default implementation calls ``get(_:)``.
    func withValue<R>(_ key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R
    /// ``withValue(_:_:)`` with the key lent as raw bytes (valid only during the call): `KVStore` builds a
    /// read by id's key in stack memory and asks through it, so an engine whose API takes a pointer and a
    /// length (LMDB's `MDB_val`, RocksDB's C API) saves an array per read. The default copies the key into
    /// an array and calls ``withValue(_:_:)``.
    func withValue<R>(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R
    /// A number naming the committed state a read snapshot sees, or `nil` (the default) when the engine has
    /// none. Two snapshots of one engine given the same number must see the same entries: LMDB's
    /// transaction id qualifies (it names the last commit); a number that a rolled-back write can reuse, or
    /// that restarts when the engine is opened again, does not. `KVStore` asks it only of ``OrderedKeyValueEngine/read(_:)``'s
    /// reader, and with it checks its catalog once per committed state instead of once per call.
    var snapshotNumber: UInt64? { get }
    /// Calls `body` with every entry whose key is at least `lower` and below `upper` (no upper bound when
    /// `nil`), in key order — descending when `reverse` — until `body` returns `false`.
    ///
    /// The key and value are lent to `body`: valid only until it returns (an engine can pass its own
    /// buffers, such as a cursor's current entry, without copying). `KVStore` copies what it keeps and
    /// never writes from inside `body`.
    func scan(
        from lower: [UInt8], to upper: [UInt8]?, reverse: Bool,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws
}

extension OrderedKeyValueReader {
    /// Calls `body` with ``get(_:)``'s value.
    public func withValue<R>(_ key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        guard let value = try get(key) else { return try body(nil) }
        return try value.withUnsafeBytes { try body($0) }
    }

    /// Copies the key into an array and calls ``withValue(_:_:)``.
    public func withValue<R>(forKey key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        try withValue(Array(key), body)
    }

    /// No number: `KVStore` checks its catalog in every snapshot.
    public var snapshotNumber: UInt64? { nil }
}

/// The writes of a write transaction.
public protocol OrderedKeyValueWriter: OrderedKeyValueReader {
    /// Sets the value of `key`.
    func put(_ key: [UInt8], _ value: [UInt8]) throws
    /// Removes `key` (nothing when it is absent).
    func delete(_ key: [UInt8]) throws

    /// Whether the transaction keeps savepoints (``setSavepoint()``, ``rollbackToSavepoint()``). Without them
    /// (the default), `KVStore` undoes a failed call from a log of the values its writes replaced, which
    /// costs a read before every put and delete — a lookup through every level of an LSM tree.
    var hasSavepoints: Bool { get }
    /// Pushes a savepoint on the transaction's stack of savepoints. Only called when ``hasSavepoints``.
    func setSavepoint() throws
    /// Undoes every write made since the most recent savepoint still on the stack, and removes it. `KVStore`
    /// never removes a savepoint otherwise: one set for a call that succeeded stays on the stack until the
    /// transaction ends (RocksDB's `RollbackToSavePoint`, as it is). Only called when ``hasSavepoints``.
    ///
    /// `KVStore` sets a savepoint for each call made directly in a write body (a nested write is one such
    /// call) and rolls back to it only when that call fails: the calls inside it undo from `KVStore`'s own
    /// log, so a failure costs one rollback. A store call of its own and the calls inside a composite call
    /// of the sync engine (enqueue, a pulled page) set none. Keeping a savepoint must therefore cost little;
    /// a rollback may cost more (RocksDB's rebuilds the transaction's index of its writes).
    func rollbackToSavepoint() throws

    /// Whether the transaction can ``restart()`` (the default: no). An engine without savepoints that can
    /// begin its write transaction again on the same committed state (LMDB: abort, begin, and the same
    /// transaction id) offers it, and `KVStore` then undoes a failed call by replaying the writes made
    /// before it instead of reading before every write. An engine that offers savepoints needs none.
    var canRestart: Bool { get }
    /// Discards every write of the transaction and begins it again on the committed state it began on:
    /// its reads then see that state, as at the start of ``OrderedKeyValueEngine/write(_:)``'s body. Only
    /// called when ``canRestart`` and not ``hasSavepoints``.
    ///
    /// `KVStore` calls it when a call made in a write body fails, then puts and deletes again what the
    /// transaction wrote before that call (it keeps the keys and values it wrote, without reading). When
    /// the engine cannot begin on the same state — another writer committed in between — it throws, and
    /// `KVStore` refuses every later call of the transaction and its commit, so the body's work is rolled
    /// back whole.
    func restart() throws

    /// Whether the engine may begin the transaction again on its own, throwing ``OrderedKeyValueRestarted``
    /// from a put, a delete or the commit (the default: no); such an engine must offer ``canRestart``.
    /// `KVStore` then undoes by restarts even when the engine has savepoints too (a savepoint does not
    /// survive a restart), and keeps every write of every write transaction until it commits, a store
    /// call's too (a replay needs them all); otherwise only those of a write body, which a failed call's
    /// undo replays. A restart of its own in a transaction that cannot replay (no ``canRestart``) fails
    /// the transaction: it refuses every later call and its commit. Keeping them costs a store call a few percent (the
    /// bench's batch upsert on LMDB: 7%), so an engine declares it only when it restarts (LMDB with a map
    /// that grows; not with a map sized once).
    var restartsOnItsOwn: Bool { get }
}

/// Thrown by an engine whose writers can restart (``OrderedKeyValueWriter/canRestart``) when its write
/// transaction had to begin again and lost its writes — LMDB's map was full, and has been grown:
///
/// - from ``OrderedKeyValueWriter/put(_:_:)`` or ``OrderedKeyValueWriter/delete(_:)``: the transaction
///   has begun again, on the committed state it began on, and the failed write was not made. `KVStore`
///   writes again everything the transaction wrote, the failed write last, and the body goes on without
///   noticing.
/// - from ``OrderedKeyValueEngine/write(_:)`` after its body returned (the commit found the map full):
///   nothing was committed. `KVStore` begins a new write transaction and writes again everything the
///   first one wrote, without running the body again; when another store object committed or defined
///   anything in between (the new transaction does not see the commit counter and catalog version the
///   first began on), the write fails with `busy` and commits nothing.
///
/// So that a replay is possible, the engine declares it (``OrderedKeyValueWriter/restartsOnItsOwn``), and
/// `KVStore` keeps every put and delete of each write transaction until it commits (the keys and values it
/// wrote: no read). An engine that cannot begin again on the same state throws another error instead, and
/// the transaction fails; so does one that restarts a transaction without declaring it, where `KVStore`
/// kept nothing to replay.
public struct OrderedKeyValueRestarted: Error, Sendable {
    /// Why the transaction began again, for messages (for example "the map grew to 64 MiB").
    public var reason: String

    /// A restart, with its reason.
    public init(_ reason: String = "the engine began the transaction again") { self.reason = reason }
}

extension OrderedKeyValueRestarted {
    /// How many times in a row an engine may begin a transaction again before the write fails.
    static var limit: Int { 64 }

    /// Runs `body`, and again each time it throws a restart, up to ``limit`` restarts in a row (counting
    /// `first`, one that already happened); then fails with `ioError`.
    static func retrying<T>(after first: OrderedKeyValueRestarted? = nil, _ body: () throws -> T) throws -> T {
        var restarts = first == nil ? 0 : 1
        while true {
            do {
                return try body()
            } catch let again as OrderedKeyValueRestarted {
                restarts += 1
                guard restarts < limit else {
                    throw LocalStoreError(.ioError, "the engine began the write transaction again \(restarts) times in a row (\(again.reason))")
                }
            }
        }
    }
}

extension OrderedKeyValueWriter {
    /// No savepoints: `KVStore` logs what each write replaces.
    public var hasSavepoints: Bool { false }
    /// Refused: the transaction has no savepoints.
    public func setSavepoint() throws { throw LocalStoreError(.internal, "this engine's transactions have no savepoints") }
    /// Refused: the transaction has no savepoints.
    public func rollbackToSavepoint() throws { throw LocalStoreError(.internal, "this engine's transactions have no savepoints") }
    /// No restarts: `KVStore` undoes from its log or the engine's savepoints.
    public var canRestart: Bool { false }
    /// Refused: the transaction cannot restart.
    public func restart() throws { throw LocalStoreError(.internal, "this engine's transactions cannot restart") }
    /// No restarts of its own.
    public var restartsOnItsOwn: Bool { false }
}
