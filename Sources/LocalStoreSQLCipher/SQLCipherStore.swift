#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LocalStore
import LocalStoreSQLEngine
import Logging

/// A `LocalStore` in one SQLCipher-encrypted SQLite file: the SQLite backend's engine, over SQLCipher
/// loaded at run time, so it can live in the same process as `SQLiteStore`-style plain stores.
///
/// ```swift
/// let key = try SQLCipherKey.raw(keyBytes)            // or .passphrase(...)
/// let store = try SQLCipherStore(path: "/var/lib/app/store.db", key: key)
/// ```
///
/// - Every page of the database and of its write-ahead log is encrypted (AES-256 with an HMAC per page);
///   temporary tables and sorts stay in memory (`temp_store = MEMORY`).
/// - The key is applied before any other statement on every connection, which are all opened when the
///   store opens; the store's copy of the key is then zeroed.
/// - A wrong key is `wrongKey`; a plain SQLite file is `notADatabase` with a hint to ``encrypt(plainDatabaseAt:to:key:options:)``;
///   in both cases the file is left untouched.
///
/// See `docs/encryption.md` for the threat model and key handling.
public final class SQLCipherStore: LocalStore, IntegrityChecking, QueryPlanReporting {
    /// Cipher and engine settings.
    ///
    /// The same names as `SQLiteStore.Options` and `LMDBStoreOptions` for what they share:
    /// ``durability``, ``busyTimeout``, ``maximumReaders``, ``cacheSizeKiB``.
    public struct Options: Sendable, Hashable {
        /// The cipher page size in bytes (default 4096). Must match the one the file was created with.
        public var cipherPageSize: Int
        /// PBKDF2 iterations for a passphrase (default 256,000). Must match the file's.
        public var kdfIterations: Int
        /// When a committed transaction is on disk (default `StoreDurability.normal`): the same WAL
        /// `PRAGMA synchronous` mapping as `SQLiteStore.Options` (`FULL`, `NORMAL`, `OFF`).
        public var durability: StoreDurability
        /// How long a call waits for a lock held by another connection or process before failing with
        /// `busy` (default 5 s; whole milliseconds, a negative duration is 0).
        public var busyTimeout: Duration
        /// Reader connections (default 2). Unlike `SQLiteStore`, all of them are opened (and keyed) when the
        /// store opens, so that the key can be wiped from memory afterwards.
        public var maximumReaders: Int
        /// The largest page cache of each connection, in KiB (default 32768, the same as `SQLiteStore`;
        /// it fills only as pages are read). Every page read from disk is decrypted and authenticated, so
        /// a cache that holds the working set matters even more than with plain SQLite: with SQLite's own
        /// default of 2 MiB, random reads on a 100,000-row store ran at 0.45× the plain backend
        /// (docs/benchmarks.md). Lower it on memory-constrained devices. Decrypted pages live only in memory.
        public var cacheSizeKiB: Int

        /// Creates options.
        public init(
            cipherPageSize: Int = 4096, kdfIterations: Int = 256_000, durability: StoreDurability = .normal,
            busyTimeout: Duration = .seconds(5), maximumReaders: Int = 2, cacheSizeKiB: Int = 32768
        ) {
            self.cipherPageSize = cipherPageSize
            self.kdfIterations = kdfIterations
            self.durability = durability
            self.busyTimeout = busyTimeout
            self.maximumReaders = maximumReaders
            self.cacheSizeKiB = cacheSizeKiB
        }

        /// The defaults of SQLCipher 3 (1024-byte pages, 64,000 iterations), for files written by other
        /// SQLCipher 3 applications.
        public static let sqlcipher3Compatible = Options(cipherPageSize: 1024, kdfIterations: 64_000)
    }

    /// The database file.
    public let path: String
    /// The options the store was opened with.
    public let options: Options
    /// The names of the system tables.
    public let systemTableNames: SystemTableNames

    /// Where committed changes are published (see docs/observation.md): commits of other processes
    /// are noticed through `PRAGMA data_version` when this store writes, and every 100 ms while observed.
    /// It outlives ``rekey(to:)``.
    public let changeCenter = ChangeCenter()

    private let logger: Logger?
    private let lock = EngineSlot()
    private let api: SQLiteAPI

    /// Opens (or creates) the encrypted store at `path`.
    ///
    /// - Throws: `libraryMissing` when SQLCipher is not installed; `wrongKey` when the key (or the
    ///   page size / iterations) does not match the file; `notADatabase` for a plain SQLite file or a
    ///   directory; any error of `SQLiteStore.init`.
    ///
    /// - Parameters:
    ///   - path: the database file; its directory must exist.
    ///   - key: the raw key or passphrase the file is (or will be) encrypted with.
    ///   - systemTableNames: the names of the operation, error and config tables (the SDK's by default).
    ///   - options: the cipher settings (they must match the file's) and engine settings.
    ///   - logger: where to log (swift-log): statement text and durations at `trace`, write
    ///     transactions at `debug`. Keys never reach a statement, so they are never logged; bound values
    ///     are not logged either.
    public init(
        path: String, key: SQLCipherKey, systemTableNames: SystemTableNames = .default, options: Options = Options(),
        logger: Logger? = nil
    ) throws {
        guard options.cipherPageSize >= 512, options.cipherPageSize <= 65536,
            options.cipherPageSize & (options.cipherPageSize - 1) == 0
        else {
            throw LocalStoreError(.invalidValue, "cipherPageSize must be a power of two from 512 to 65536, not \(options.cipherPageSize)")
        }
        guard options.kdfIterations >= 1 else {
            throw LocalStoreError(.invalidValue, "kdfIterations must be positive, not \(options.kdfIterations)")
        }
        self.api = try SQLCipherLibrary.api()
        self.path = path
        self.options = options
        self.systemTableNames = systemTableNames
        self.logger = logger
        let engine = try Self.openEngine(
            path: path, key: key, names: systemTableNames, options: options, api: api, logger: logger,
            changes: changeCenter)
        lock.set(engine)
    }

    /// Opens an engine whose every connection gets `key`; all connections are opened before returning,
    /// then the engine's copy of the key is wiped.
    private static func openEngine(
        path: String, key: SQLCipherKey, names: SystemTableNames, options: Options, api: SQLiteAPI, logger: Logger?,
        changes: ChangeCenter
    ) throws -> SQLEngine {
        let material = try key.material.withBytes { KeyMaterial(Array($0)) }
        defer { material.wipe() }
        let hook: SQLEngine.OpenHook = { db, api in
            try Self.applyKey(material, options: options, db: db, api: api)
        }
        let configuration = SQLEngine.Configuration(
            durability: options.durability, busyTimeoutMilliseconds: options.busyTimeout.clampedMilliseconds,
            maximumReaderCount: max(1, options.maximumReaders), logger: logger, cacheSizeKiB: options.cacheSizeKiB)
        let engine: SQLEngine
        do {
            engine = try SQLEngine(
                path: path, systemTableNames: names, configuration: configuration, api: api, openHook: hook, changes: changes)
        } catch let e as LocalStoreError where e.code == .notADatabase || e.code == .wrongKey {
            throw Self.explainOpenFailure(path: path, e)
        }
        do {
            try engine.openAllReaders()
        } catch {
            try? engine.close()
            throw error
        }
        return engine
    }

    /// Applies the key and the cipher settings to a fresh connection, then checks that the library is
    /// SQLCipher and that it uses in-memory temporary storage.
    static func applyKey(_ material: KeyMaterial, options: Options, db: OpaquePointer, api: SQLiteAPI) throws {
        guard let key = api.key else { throw LocalStoreError(.libraryMissing, "the loaded library has no sqlite3_key") }
        let rc = try material.withBytes { key(db, $0.baseAddress, Int32($0.count)) }
        guard rc == SQLite.OK else { throw LocalStoreError(.internal, "sqlite3_key failed with code \(rc)") }
        let raw = RawConnection(api: api, db: db)
        try raw.execute("PRAGMA cipher_page_size = \(options.cipherPageSize)")
        try raw.execute("PRAGMA kdf_iter = \(options.kdfIterations)")
        try raw.execute("PRAGMA temp_store = MEMORY")
        guard let version = try raw.rows("PRAGMA cipher_version").first ?? nil, !version.isEmpty else {
            throw LocalStoreError(.libraryMissing, "\(SQLCipherLibrary.soname) does not answer PRAGMA cipher_version: it is not SQLCipher")
        }
    }

    /// Turns the engine's `notADatabase` into the precise reason, without touching the file.
    static func explainOpenFailure(path: String, _ error: LocalStoreError) -> LocalStoreError {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return error }
        guard let handle = FileHandle(forReadingAtPath: path) else { return error }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        if header == Data("SQLite format 3\u{0}".utf8) {
            return LocalStoreError(
                .notADatabase,
                "'\(path)' is a plain, unencrypted SQLite database; open it with SQLiteStore, or convert it with SQLCipherStore.encrypt(plainDatabaseAt:to:key:)"
            )
        }
        if error.message.contains("LocalStore") { return error }
        return LocalStoreError(
            .wrongKey,
            "cannot decrypt '\(path)': wrong key, wrong cipher settings (page size, KDF iterations), or not an SQLCipher database")
    }

    /// The SQLCipher version of the loaded library (e.g. `3.4.1`), or `nil` when it cannot be loaded.
    public static var cipherVersion: String? {
        guard let api = try? SQLCipherLibrary.api(), let conn = try? RawConnection.open(":memory:", api: api, create: true)
        else { return nil }
        defer { conn.close() }
        return (try? conn.rows("PRAGMA cipher_version").first) ?? nil
    }

    // MARK: LocalStore

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func defineTable(_ schema: TableSchema) throws { try lock.with { try $0.defineTable(schema) } }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func tableSchemas() throws -> [TableSchema] { try lock.with { try $0.tableSchemas() } }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func schema(of table: String) throws -> TableSchema? { try lock.with { try $0.schema(of: table) } }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(table: String, id: Value) throws -> Item? { try lock.with { try $0.read(table: table, id: id) } }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func read(_ query: Query) throws -> ReadResult { try lock.with { try $0.read(query) } }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        try lock.with { try $0.upsert(items, into: table, options: options) }
    }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(ids: [Value], from table: String) throws { try lock.with { try $0.delete(ids: ids, from: table) } }
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func delete(matching query: Query) throws { try lock.with { try $0.delete(matching: query) } }
    public func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try lock.with { try $0.performWrite(body) }
    }

    /// A composite call's transaction (the core's `CompositeWrites`): no savepoint per call.
    package func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        try lock.with { try $0.performCompositeWrite(body) }
    }

    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func close() throws {
        defer { changeCenter.finish() }
        try lock.close()
    }

    /// Runs one read-only SQL statement and returns its rows (see `SQLiteStore.query(sql:arguments:)`).
    public func query(sql: String, arguments: [Value] = []) throws -> [Item] {
        try lock.with { try $0.query(sql: sql, arguments: arguments) }
    }

    /// How SQLite answers `query` (see `SQLiteStore.explain(_:)`).
    public func explain(_ query: Query) throws -> String {
        try lock.with { try $0.explain(query) }
    }

    /// The access path a read of `query` takes (see `QueryPlanReporting` and `SQLiteStore.accessPath(for:)`).
    public func accessPath(for query: Query) throws -> QueryAccessPath {
        try lock.with { try $0.accessPath(for: query) }
    }

    /// Moves every committed page from the write-ahead log into the database file and truncates the log.
    public func checkpoint() throws { try lock.with { try $0.checkpoint() } }

    /// `PRAGMA cipher_integrity_check` (HMAC of every page) and `PRAGMA integrity_check`.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func checkIntegrity() throws -> [String] {
        try lock.with { try $0.integrityCheck(pragmas: ["cipher_integrity_check", "integrity_check"]) }
    }

    // MARK: Keys

    /// Re-encrypts the whole file with `newKey`. Afterwards only `newKey` opens the store.
    ///
    /// Waits for running calls, checkpoints the WAL, and writes a copy of the store encrypted with
    /// `newKey` next to it (`<path>.rekey`, with `sqlcipher_export` through the writer connection, the
    /// same cipher settings); only when that copy is complete and synced does it replace the store, by
    /// `rename` (atomic), after which every connection is reopened with the new key. So a failure at any
    /// step — an I/O error, a full disk, a crash — leaves a store that one of the two keys opens whole:
    /// the old one until the rename, the new one after it (an in-place `sqlite3_rekey` that fails half-way
    /// leaves pages under both keys, which neither opens; docs/reliability.md, "I/O faults"). Needs room
    /// for a second copy of the file. No other process may have the store open.
    public func rekey(to newKey: SQLCipherKey) throws {
        try lock.replace { engine in
            let staging = path + ".rekey"
            let fm = FileManager.default
            try? fm.removeItem(atPath: staging)  // left by an interrupted rekey: the store itself is whole
            do {
                try engine.withExclusiveWriter { db, api in
                    let raw = RawConnection(api: api, db: db)
                    try raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    try raw.execute("PRAGMA cipher_default_page_size = \(options.cipherPageSize)")
                    try raw.execute("PRAGMA cipher_default_kdf_iter = \(options.kdfIterations)")
                    try newKey.material.withBytes { bytes in
                        try raw.execute("ATTACH DATABASE ? AS rekey_target KEY ?", [.text(staging), .bytes(bytes)])
                    }
                    defer { try? raw.execute("DETACH DATABASE rekey_target") }
                    do {
                        try raw.execute("SELECT sqlcipher_export('rekey_target')")
                    } catch let e as LocalStoreError where e.code == .internal {
                        // SQLCipher 3.4's export runs its statements itself and reports any failure of
                        // them as SQLITE_ERROR, whose message then is the generic "SQL logic error": what
                        // fails there is writing the copy (the store is only read), so it is an I/O error.
                        throw LocalStoreError(
                            .ioError,
                            "rekey: writing the re-encrypted copy '\(staging)' failed (\(e.message)); the store is unchanged and still opens with its current key")
                    }
                }
                try Self.syncFile(staging)
            } catch {
                try? fm.removeItem(atPath: staging)
                throw error
            }
            try engine.close()
            // The WAL was checkpointed into the file and is empty; a stale one must not meet the new file.
            for suffix in ["-wal", "-shm"] { try? fm.removeItem(atPath: path + suffix) }
            guard Glibc.rename(staging, path) == 0 else {
                let code = errno
                try? fm.removeItem(atPath: staging)
                throw LocalStoreError(.ioError, "rekey: cannot replace '\(path)' with its re-encrypted copy: \(String(cString: strerror(code)))")
            }
            // From here the store is under the new key: the rekey is done, whatever happens next.
            let directory = (path as NSString).deletingLastPathComponent
            try? Self.syncFile(directory.isEmpty ? "." : directory)
            var attempt = 0
            while true {
                do {
                    return try Self.openEngine(
                        path: path, key: newKey, names: systemTableNames, options: options, api: api, logger: logger,
                        changes: changeCenter)
                } catch let e as LocalStoreError where attempt == 0 && (e.code == .ioError || e.code == .full || e.code == .internal) {
                    attempt += 1  // one more try: a passing I/O failure must not look like a failed rekey
                } catch {
                    throw LocalStoreError(
                        .ioError,
                        "'\(path)' was re-encrypted with the new key (only it opens the file now), but reopening it failed: \(error)")
                }
            }
        }
    }

    /// `fsync` of a file or directory; `ioError` when it fails.
    private static func syncFile(_ path: String) throws {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LocalStoreError(.ioError, "cannot open '\(path)' to sync it: \(String(cString: strerror(errno)))") }
        defer { _ = Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw LocalStoreError(.ioError, "cannot sync '\(path)': \(String(cString: strerror(errno)))") }
    }

    /// Writes an encrypted copy of the plain SQLite store at `plainPath` to the new file `encryptedPath`
    /// (`ATTACH … KEY` + `sqlcipher_export`). The plain store must be closed; it is only read.
    public static func encrypt(plainDatabaseAt plainPath: String, to encryptedPath: String, key: SQLCipherKey, options: Options = Options()) throws {
        try export(from: plainPath, sourceKey: nil, to: encryptedPath, destinationKey: key, options: options)
    }

    /// Writes a plain (unencrypted) copy of the encrypted store at `encryptedPath` to the new file
    /// `plainPath`. The encrypted store must be closed; it is only read.
    public static func decrypt(databaseAt encryptedPath: String, key: SQLCipherKey, to plainPath: String, options: Options = Options()) throws {
        try export(from: encryptedPath, sourceKey: key, to: plainPath, destinationKey: nil, options: options)
    }

    private static func export(
        from source: String, sourceKey: SQLCipherKey?, to destination: String, destinationKey: SQLCipherKey?,
        options: Options
    ) throws {
        guard FileManager.default.fileExists(atPath: source) else {
            throw LocalStoreError(.ioError, "no database at '\(source)'")
        }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw LocalStoreError(.constraint, "'\(destination)' already exists; export writes a new file")
        }
        let api = try SQLCipherLibrary.api()
        // CREATE lets ATTACH create the destination file; the source exists (checked above).
        let conn = try RawConnection.open(source, api: api, create: true)
        defer { conn.close() }
        if let sourceKey {
            let material = try sourceKey.material.withBytes { KeyMaterial(Array($0)) }
            defer { material.wipe() }
            do {
                try applyKey(material, options: options, db: conn.db, api: api)
                _ = try conn.rows("SELECT count(*) FROM sqlite_master")
            } catch let e as LocalStoreError where e.code == .notADatabase {
                throw explainOpenFailure(path: source, e)
            }
        } else {
            try conn.execute("PRAGMA temp_store = MEMORY")
            do {
                _ = try conn.rows("SELECT count(*) FROM sqlite_master")
            } catch let e as LocalStoreError where e.code == .notADatabase {
                throw LocalStoreError(.notADatabase, "'\(source)' is not a plain SQLite database (is it encrypted?)")
            }
        }
        try conn.execute("PRAGMA cipher_default_page_size = \(options.cipherPageSize)")
        try conn.execute("PRAGMA cipher_default_kdf_iter = \(options.kdfIterations)")
        do {
            if let destinationKey {
                try destinationKey.material.withBytes { bytes in
                    try conn.execute("ATTACH DATABASE ? AS export_target KEY ?", [.text(destination), .bytes(bytes)])
                }
            } else {
                try conn.execute("ATTACH DATABASE ? AS export_target KEY ''", [.text(destination)])
            }
            defer { try? conn.execute("DETACH DATABASE export_target") }
            try conn.execute("SELECT sqlcipher_export('export_target')")
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            throw error
        }
    }
}

/// The store's engine behind a readers-writer lock, so ``SQLCipherStore/rekey(to:)`` can swap it.
private final class EngineSlot: @unchecked Sendable {
    // Reader-preferring: a call holds it shared and must not wait behind a pending rekey while it
    // already holds it (the misuse check inside needs to run).
    private let rw = ReadWriteLock(preferWriters: false)
    private var current: SQLEngine?
    private var closed = false

    func set(_ engine: SQLEngine) {
        rw.withWriteLock { current = engine }
    }

    /// Runs one call on the engine, holding the lock shared so that a rekey waits for running calls.
    func with<R>(_ body: (SQLEngine) throws -> R) throws -> R {
        try rw.withReadLock {
            guard let current, !closed else { throw LocalStoreError.closed() }
            return try body(current)
        }
    }

    func replace(_ body: (SQLEngine) throws -> SQLEngine) throws {
        try rw.withWriteLock {
            guard let engine = current, !closed else { throw LocalStoreError.closed() }
            do {
                current = try body(engine)
            } catch {
                // When the old engine was already closed (the file is rekeyed but could not be reopened),
                // the store stays closed rather than half-keyed.
                if engine.isClosed { closed = true }
                throw error
            }
        }
    }

    func close() throws {
        try rw.withWriteLock {
            closed = true
            try current?.close()
        }
    }
}

/// A delta token's value written in one statement that commits by itself (the core's `setDeltaToken` on
/// the store uses it).
extension SQLCipherStore: SystemTableStoreShortcuts {
    package func updateSoleDeltaTokenRowAlone(_ entry: TableConfigEntry) throws -> Bool {
        try lock.with { try $0.updateSoleDeltaTokenRowAlone(entry) }
    }
}

/// The head of the operation queue and config rows by primary key with statements prepared once per
/// connection (the core's `operation(after:)`, `deltaToken` and `operationIdHighWaterMark()` use them).
extension SQLCipherStore: SystemTableReadShortcuts {
    package func firstOperation(after id: Int64) throws -> TableOperation? { try lock.with { try $0.firstOperation(after: id) } }
    package func configValue(id: String) throws -> Value? { try lock.with { try $0.configValue(id: id) } }
    package func itemOperations(table: String, itemId: String) throws -> [TableOperation]? {
        try lock.with { try $0.itemOperations(table: table, itemId: itemId) }
    }
    package func operationRow(id: Int64) throws -> [TableOperation]? { try lock.with { try $0.operationRow(id: id) } }
}
extension SQLCipherStore: CompositeWrites {}
