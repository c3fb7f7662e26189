import Foundation

/// The one error type every ``LocalStore`` backend throws.
///
/// Switch over ``code`` to react to a kind of failure. ``Code`` is a struct, not an enum, so new codes
/// can be added in later versions without breaking a caller's `switch` (always include a `default:`).
/// The ``message`` names the table, column, id or value at fault; it never contains key material.
///
/// ```swift
/// do {
///     try store.upsert([item], into: "TodoItem")
/// } catch let error as LocalStoreError where error.code == .unknownColumn {
///     print(error.column ?? "?", error.message)
/// }
/// ```
public struct LocalStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case unknownTable, unknownColumn, typeMismatch, invalidIdentifier, invalidQuery, schemaConflict
            case reservedName, closed, invalidValue, missingId
            case wrongKey, notADatabase, corrupt, full, busy, ioError, readOnly, constraint
            case versionMismatch, readersFull, libraryMissing, unsupported, misuse, `internal`
            case invalidURL
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The table named by the call is not defined in the store.
        public static let unknownTable = Code(.unknownTable)
        /// An item or query names a column the table does not have.
        public static let unknownColumn = Code(.unknownColumn)
        /// A value does not have the type of its column (or a query compares incompatible types).
        public static let typeMismatch = Code(.typeMismatch)
        /// A table or column name does not match `^[A-Za-z_][A-Za-z0-9_]{0,127}$`.
        public static let invalidIdentifier = Code(.invalidIdentifier)
        /// A query cannot be evaluated (unsupported form, bad operand, nesting too deep...).
        public static let invalidQuery = Code(.invalidQuery)
        /// A table definition conflicts with the stored one (a column's type changed, `id` dropped...).
        public static let schemaConflict = Code(.schemaConflict)
        /// User code tried to define a table with one of the system tables' names.
        public static let reservedName = Code(.reservedName)
        /// The store was closed.
        public static let closed = Code(.closed)
        /// A value cannot be stored (NaN, malformed JSON text, duplicate column key in one item...).
        public static let invalidValue = Code(.invalidValue)
        /// An item to upsert has no `id`, or a null one.
        public static let missingId = Code(.missingId)
        /// An encrypted store was opened with the wrong key.
        public static let wrongKey = Code(.wrongKey)
        /// The file or directory is not a store of this backend.
        public static let notADatabase = Code(.notADatabase)
        /// The store's files are damaged.
        public static let corrupt = Code(.corrupt)
        /// The disk (or the store's size limit) is full.
        public static let full = Code(.full)
        /// Another connection or process holds a lock for too long.
        public static let busy = Code(.busy)
        /// The operating system reported an I/O failure.
        public static let ioError = Code(.ioError)
        /// The store's files cannot be written.
        public static let readOnly = Code(.readOnly)
        /// A constraint of the storage engine was violated.
        public static let constraint = Code(.constraint)
        /// The store was written by an incompatible version of the engine or of LocalStore.
        public static let versionMismatch = Code(.versionMismatch)
        /// The engine has no free reader slot.
        public static let readersFull = Code(.readersFull)
        /// A native library needed by the backend could not be loaded.
        public static let libraryMissing = Code(.libraryMissing)
        /// The backend does not support the requested operation or configuration.
        public static let unsupported = Code(.unsupported)
        /// The API was used in a way it does not allow (for example a transaction used after it ended).
        public static let misuse = Code(.misuse)
        /// An unexpected engine failure; the message carries the engine's own text.
        public static let `internal` = Code(.internal)
        /// A store URL (`memory:`, `sqlite:PATH`, `sqlcipher:PATH`, `lmdb:PATH`) cannot be parsed, or
        /// carries something it must not (a key, a query, a host); the message names the part at fault.
        public static let invalidURL = Code(.invalidURL)

        /// The code's name, e.g. `unknownTable`.
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation naming the table / column / id / value at fault.
    public var message: String
    /// The table at fault, when there is one.
    public var table: String?
    /// The column at fault, when there is one.
    public var column: String?
    /// The result code the storage engine returned, when the error comes from the engine: SQLite's
    /// (extended) result code on the SQL backends, LMDB's return code (an `MDB_*` value or an `errno`) on
    /// LMDB; `nil` for errors LocalStore itself detected.
    public var engineResultCode: Int32?

    /// Creates an error.
    public init(
        _ code: Code, _ message: String, table: String? = nil, column: String? = nil, engineResultCode: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.table = table
        self.column = column
        self.engineResultCode = engineResultCode
    }

    /// `"<code>: <message>"`.
    public var description: String { "\(code): \(message)" }
}

extension LocalStoreError {
    /// The standard `unknownTable` error for `table`.
    public static func unknownTable(_ table: String) -> LocalStoreError {
        LocalStoreError(.unknownTable, "no table named '\(table)'", table: table)
    }

    /// The standard `unknownColumn` error for `column` of `table`.
    public static func unknownColumn(_ column: String, table: String) -> LocalStoreError {
        LocalStoreError(.unknownColumn, "table '\(table)' has no column '\(column)'", table: table, column: column)
    }

    /// The standard `closed` error.
    public static func closed() -> LocalStoreError {
        LocalStoreError(.closed, "the store is closed")
    }
}

extension LocalStoreError: LocalizedError {
    /// ``description``: `"<code>: <message>"`, so `localizedDescription` says what failed.
    public var errorDescription: String? { description }
}
