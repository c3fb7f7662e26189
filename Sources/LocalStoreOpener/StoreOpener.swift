import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite
import Logging

/// Opens any backend from a ``StoreURL``, so an application picks its store from configuration in one line:
///
/// ```swift
/// import LocalStoreOpener
///
/// let store = try StoreOpener.open(configuration.storeURL)                 // memory:, sqlite:…, lmdb:…
/// let secret = try StoreOpener.open("sqlcipher:/var/lib/app/store.db", key: try .raw(keyBytes))
/// ```
///
/// The product `LocalStoreOpener` links every backend (SQLCipher itself is loaded only when a
/// `sqlcipher:` store is opened); an application that uses one backend can depend on that backend's
/// product alone.
public enum StoreOpener {
    /// Each backend's options; only those of the URL's backend are used.
    public struct Options: Sendable, Hashable {
        /// Options of `sqlite:` stores.
        public var sqlite: SQLiteStore.Options
        /// Options of `sqlcipher:` stores.
        public var sqlcipher: SQLCipherStore.Options
        /// Options of `lmdb:` stores.
        public var lmdb: LMDBStore.Options

        /// Creates options; every backend's defaults unless given.
        public init(
            sqlite: SQLiteStore.Options = .init(), sqlcipher: SQLCipherStore.Options = .init(),
            lmdb: LMDBStore.Options = .init()
        ) {
            self.sqlite = sqlite
            self.sqlcipher = sqlcipher
            self.lmdb = lmdb
        }
    }

    /// Opens (or creates) the store `url` names.
    ///
    /// - Parameters:
    ///   - url: the store to open.
    ///   - key: the key of a `sqlcipher:` store (required there, refused for every other backend: a key
    ///     never goes in the URL).
    ///   - systemTableNames: the system tables' names, for every backend.
    ///   - options: each backend's options; only those of `url`'s backend apply.
    ///   - logger: where the store logs (swift-log), as each backend's initializer documents.
    /// - Throws: `invalidValue` for a `sqlcipher:` URL without `key`, or a `key` for another backend;
    ///   otherwise whatever the backend's initializer throws (`notADatabase`, `wrongKey`, `libraryMissing`, …).
    public static func open(
        _ url: StoreURL, key: SQLCipherKey? = nil, systemTableNames: SystemTableNames = .default,
        options: Options = Options(), logger: Logger? = nil
    ) throws -> any LocalStore {
        if url.scheme != .sqlcipher, key != nil {
            throw LocalStoreError(
                .invalidValue, "a key was given for '\(url)', which is not encrypted: only sqlcipher: stores take a key")
        }
        switch url.scheme {
        case .memory:
            return try InMemoryStore(systemTableNames: systemTableNames, logger: logger)
        case .sqlite:
            return try SQLiteStore(path: url.path, systemTableNames: systemTableNames, options: options.sqlite, logger: logger)
        case .lmdb:
            return try LMDBStore(path: url.path, systemTableNames: systemTableNames, options: options.lmdb, logger: logger)
        case .sqlcipher:
            guard let key else {
                throw LocalStoreError(.invalidValue, "'\(url)' is encrypted and needs a key: pass key: (never in the URL)")
            }
            return try SQLCipherStore(
                path: url.path, key: key, systemTableNames: systemTableNames, options: options.sqlcipher, logger: logger)
        }
    }

    /// Parses `url` (see ``StoreURL``) and opens the store it names.
    ///
    /// - Parameters:
    ///   - url: the store URL: `memory:`, `sqlite:PATH`, `sqlcipher:PATH` or `lmdb:PATH`.
    ///   - key: the key of a `sqlcipher:` store (required there, refused for every other backend).
    ///   - systemTableNames: the system tables' names, for every backend.
    ///   - options: each backend's options; only those of `url`'s backend apply.
    ///   - logger: where the store logs (swift-log).
    /// - Throws: `invalidURL` naming the part of `url` at fault, or any error of
    ///   ``open(_:key:systemTableNames:options:logger:)-(StoreURL,_,_,_,_)``.
    public static func open(
        _ url: String, key: SQLCipherKey? = nil, systemTableNames: SystemTableNames = .default,
        options: Options = Options(), logger: Logger? = nil
    ) throws -> any LocalStore {
        try open(StoreURL(url), key: key, systemTableNames: systemTableNames, options: options, logger: logger)
    }
}
