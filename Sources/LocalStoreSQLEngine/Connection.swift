import Foundation
import LocalStore
import Logging

/// One SQLite connection and its prepared-statement cache.
///
/// Not thread-safe: the engine hands a connection to one thread at a time (the writer under the
/// writer lock, readers through the pool).
final class Connection {
    let api: SQLiteAPI
    let db: OpaquePointer
    let path: String
    /// `SQLITE_LIMIT_VARIABLE_NUMBER` of this connection (999 before SQLite 3.32, 32766 after).
    let variableLimit: Int
    /// Whether the `localstore_*` SQL functions could be registered, once they were (`nil`: not yet).
    private var functionsRegistered: Bool?

    /// A cached statement; `inUse` while borrowed (a nested use of the same SQL prepares another).
    private final class Cached {
        let statement: OpaquePointer
        var lastUse: UInt64
        var inUse = false

        init(statement: OpaquePointer, lastUse: UInt64) {
            self.statement = statement
            self.lastUse = lastUse
        }
    }
    /// Where statements are logged (trace level), if anywhere.
    var logger: Logger?
    /// Whether logged statements include their bound values.
    var logsBoundValues = false
    /// The values bound to the statement running now, kept only when `logsBoundValues`.
    var boundValues: [Value] = []

    private var cache: [String: Cached] = [:]
    /// The statement taken last, checked before the cache: a call path that runs the same SQL again
    /// passes the same string, which compares equal without hashing or reading it.
    private var recent: (sql: String, cached: Cached)?
    /// The table a ``Session`` looked up last on this connection: the name as the caller spelled it and
    /// the catalog generation it was found in (see ``SQLEngine/tableInfo(_:on:)``).
    var lastTable: (name: String, generation: Int, info: TableInfo)?
    /// Queries resolved and compiled on this connection (``Session/read(_:)``), by query; an entry is
    /// used only while its table is the catalog's current ``TableInfo`` object.
    private var compiledQueries: [Query: CompiledQuery] = [:]
    /// The most entries ``compiledQueries`` keeps (it is emptied when full).
    static let compiledQueryCapacity = 32
    /// The system tables' statements prepared once for this connection (``SystemStatements``), finalized
    /// with it; replaced when the catalog's system table definitions change.
    var systemStatements: SystemStatements?
    /// The transaction-control statements, each prepared on first use and kept (see ``run(_:)``).
    private var controlStatements: [OpaquePointer?] = Array(repeating: nil, count: Control.allCases.count)
    private var useCounter: UInt64 = 0
    private let cacheCapacity: Int
    private var isClosed = false

    private init(api: SQLiteAPI, db: OpaquePointer, path: String, cacheCapacity: Int) {
        self.api = api
        self.db = db
        self.path = path
        self.cacheCapacity = cacheCapacity
        self.variableLimit = Int(max(1, api.limit(db, SQLite.LIMIT_VARIABLE_NUMBER, -1)))
    }

    /// `SQLITE_LIMIT_LENGTH` of this connection now: the largest value, and the largest row record, in
    /// bytes (read on each use: an open hook may lower it after the connection object exists).
    var lengthLimit: Int { Int(max(1, api.limit(db, SQLite.LIMIT_LENGTH, -1))) }

    deinit { close() }

    /// Opens a connection and runs `hook` on it right after `sqlite3_open_v2`. Nothing is read or
    /// written yet; the caller verifies the file. `readOnly` opens it `SQLITE_OPEN_READONLY` (such a
    /// connection never checkpoints, so closing it leaves the database and its log as they were).
    static func open(
        path: String, create: Bool, api: SQLiteAPI, cacheCapacity: Int, hook: SQLEngine.OpenHook?, immutable: Bool = false,
        readOnly: Bool = false
    ) throws -> Connection {
        var handle: OpaquePointer?
        var flags =
            (readOnly ? SQLite.OPEN_READONLY : SQLite.OPEN_READWRITE | (create ? SQLite.OPEN_CREATE : 0)) | SQLite.OPEN_NOMUTEX
        var name = path
        if immutable {
            // Read-only, no locks, no -wal/-shm: for a store on a location this process cannot write.
            flags = SQLite.OPEN_READONLY | SQLite.OPEN_URI | SQLite.OPEN_NOMUTEX
            name = "file:" + path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
                .replacingOccurrences(of: "#", with: "%23") + "?immutable=1"
        }
        let rc = api.open_v2(name, &handle, flags, nil)
        guard let db = handle else {
            throw LocalStoreError(.internal, "sqlite: cannot allocate a connection for '\(path)' (code \(rc))")
        }
        if rc != SQLite.OK {
            let error = SQLiteError.make(rc, message: SQLiteError.message(api, db, rc), context: "cannot open '\(path)'")
            _ = api.close_v2(db)
            throw error
        }
        let connection = Connection(api: api, db: db, path: path, cacheCapacity: cacheCapacity)
        if let hook {
            do {
                try hook(db, api)
            } catch {
                connection.close()
                throw error
            }
        }
        return connection
    }

    /// Finalizes every cached statement and closes the connection (idempotent).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        // A borrowed statement is finalized when it is given back.
        for (_, c) in cache where !c.inUse { _ = api.finalize(c.statement) }
        cache.removeAll()
        recent = nil
        compiledQueries.removeAll()
        lastTable = nil
        systemStatements?.finalize(api)
        systemStatements = nil
        for case let handle? in controlStatements { _ = api.finalize(handle) }
        controlStatements = controlStatements.map { _ in nil }
        _ = api.close_v2(db)
    }

    /// Whether the `localstore_*` SQL functions (see ``SQLFunctions``) are registered on this connection,
    /// registering them on first use: only the query compiler asks, so a connection that never compiles
    /// a query (reads by id, the system tables' statements) does not pay for seven registrations. Adding
    /// a function SQLite does not know yet leaves the connection's prepared statements valid.
    var hasFunctions: Bool {
        if let functionsRegistered { return functionsRegistered }
        let registered = SQLFunctions.register(on: db, api: api)
        functionsRegistered = registered
        return registered
    }

    /// The compiled form of `query` for table `t`, when this connection compiled it for that very table
    /// definition.
    func compiledQuery(_ query: Query, table t: TableInfo) -> CompiledQuery? {
        guard !compiledQueries.isEmpty, let c = compiledQueries[query], c.table === t else { return nil }
        return c
    }

    /// Keeps `compiled` for later reads of `query`. Queries binding many values are not kept (their
    /// literals would stay in memory and hashing them costs about as much as compiling).
    func keepCompiledQuery(_ query: Query, _ compiled: CompiledQuery) {
        let arguments = (compiled.select?.arguments.count ?? 0) + (compiled.count?.arguments.count ?? 0)
        guard arguments <= 16 else { return }
        if compiledQueries.count >= Self.compiledQueryCapacity { compiledQueries.removeAll(keepingCapacity: true) }
        compiledQueries[query] = compiled
    }

    // MARK: Errors

    func error(_ rc: Int32, _ context: String) -> LocalStoreError {
        SQLiteError.make(rc, message: SQLiteError.message(api, db, rc), context: context)
    }

    var isInTransaction: Bool { api.get_autocommit(db) == 0 }

    // MARK: Statements

    /// Runs `sql` (no parameters, no result rows expected) with a cached statement.
    func execute(_ sql: String) throws {
        try withStatement(sql) { try $0.run() }
    }

    /// Runs `sql` (one statement) and finalizes it: for statements a connection runs once, such as the
    /// PRAGMAs that set it up, which the statement cache would only hold until the connection closes.
    func executeOnce(_ sql: String) throws {
        try withUncachedStatement(sql) { try $0.run() }
    }

    /// Runs `body` with a statement prepared for `sql` alone and finalized afterwards (see ``executeOnce(_:)``).
    func withUncachedStatement<R>(_ sql: String, _ body: (Statement) throws -> R) throws -> R {
        try runFinalizing(try prepareKept(sql), sql, body)
    }

    /// Statements that every transaction runs: kept apart from the statement cache, whose lookup
    /// hashes the SQL text (about 1,000 instructions per statement, three per write transaction).
    enum Control: Int, CaseIterable {
        case beginImmediate, commit, begin, schemaVersion

        var sql: String {
            switch self {
            case .beginImmediate: return "BEGIN IMMEDIATE"
            case .commit: return "COMMIT"
            case .begin: return "BEGIN"
            case .schemaVersion: return "PRAGMA schema_version"
            }
        }
    }

    /// Runs `control` (no rows expected).
    func run(_ control: Control) throws {
        try withControl(control) { try $0.run() }
    }

    /// The file's schema version (`PRAGMA schema_version`).
    func schemaVersion() throws -> Int64? {
        try withControl(.schemaVersion) { s in try s.step() ? s.int64(0) : nil }
    }

    private func withControl<R>(_ control: Control, _ body: (Statement) throws -> R) throws -> R {
        let handle: OpaquePointer
        if let kept = controlStatements[control.rawValue] {
            handle = kept
        } else {
            guard !isClosed else { throw LocalStoreError.closed() }
            handle = try prepareKept(control.sql)
            controlStatements[control.rawValue] = handle
        }
        return try withPrepared(handle, sql: control.sql, body)
    }

    /// Runs a `PRAGMA` or query that returns one text value.
    /// The first column of every row of `sql`, as text (`NULL` for null).
    func pragmaRows(_ sql: String) throws -> [String] {
        try withStatement(sql) { stmt in
            var out: [String] = []
            while try stmt.step() { out.append(stmt.isNull(0) ? "NULL" : stmt.text(0)) }
            return out
        }
    }

    /// Every column of every row of `sql`, as text.
    func pragmaRowsAllColumns(_ sql: String) throws -> [[String]] {
        try withStatement(sql) { stmt in
            var out: [[String]] = []
            let n = api.column_count(stmt.handle)
            while try stmt.step() { out.append((0..<n).map { stmt.isNull($0) ? "NULL" : stmt.text($0) }) }
            return out
        }
    }

    /// Runs a query that returns one integer.
    func scalarInt(_ sql: String, _ arguments: [Value] = []) throws -> Int64? {
        try withStatement(sql) { s in
            try s.bind(arguments)
            return try s.step() ? s.int64(0) : nil
        }
    }

    /// The `detail` lines of SQLite's `EXPLAIN QUERY PLAN` for `sql` bound to `arguments` (the detail is the
    /// fourth column both before SQLite 3.24 — selectid, order, from, detail — and after).
    ///
    /// The plan is compiled afresh each time, after a statement that reads the schema cookie (which
    /// reloads a schema another connection changed): an `EXPLAIN` statement reads no table, so a cached
    /// one would keep describing the plan of the schema it was compiled for — without an index added since.
    func queryPlan(_ sql: String, arguments: [Value] = []) throws -> [String] {
        _ = try scalarInt("SELECT count(*) FROM sqlite_master WHERE 0")
        do {
            return try explainQueryPlan(sql, arguments: arguments)
        } catch let error as PrepareFailure where error.isSizeLimit {
            throw NeedsFallback()
        }
    }

    private func explainQueryPlan(_ sql: String, arguments: [Value]) throws -> [String] {
        try withUncachedStatement("EXPLAIN QUERY PLAN " + sql) { s in
            try s.bind(arguments)
            var lines: [String] = []
            while try s.step() { lines.append(s.text(3)) }
            return lines
        }
    }

    /// Runs `body` with a prepared statement for `sql`, taken from the cache (or prepared) and
    /// returned to it (reset, bindings cleared) afterwards.
    /// With `fallbackOnSizeLimit`, a statement SQLite refuses for its size (see
    /// ``PrepareFailure/isSizeLimit``) throws ``NeedsFallback``.
    func withStatement<R>(_ sql: String, fallbackOnSizeLimit: Bool = false, _ body: (Statement) throws -> R) throws -> R {
        let statement: Statement
        let cached: Cached?
        do {
            (statement, cached) = try take(sql)
        } catch {
            if fallbackOnSizeLimit && error.isSizeLimit { throw NeedsFallback() }
            throw error.asStoreError
        }
        defer { give(sql, statement.handle, cached) }
        return try run(statement, sql, body)
    }

    /// Runs `body` with `handle`, a statement this connection prepared once and keeps (``SystemStatements``),
    /// then resets it and clears its bindings. Logged as ``withStatement(_:fallbackOnSizeLimit:_:)`` logs.
    func withPrepared<R>(_ handle: OpaquePointer, sql: String, _ body: (Statement) throws -> R) throws -> R {
        defer {
            _ = api.reset(handle)
            _ = api.clear_bindings(handle)
        }
        return try run(Statement(handle, self), sql, body)
    }

    /// Runs `body` with a statement for `sql` prepared for this one use (not cached, finalized after);
    /// `nil`, without running anything, when SQLite cannot prepare `sql`.
    func withOneTimeStatement<R>(_ sql: String, _ body: (Statement) throws -> R) throws -> R? {
        guard let handle = try? prepareKept(sql) else { return nil }
        return try runFinalizing(handle, sql, body)
    }

    /// Runs `body` with `handle`, a statement prepared for `sql`, and finalizes it.
    private func runFinalizing<R>(_ handle: OpaquePointer, _ sql: String, _ body: (Statement) throws -> R) throws -> R {
        defer { _ = api.finalize(handle) }
        return try run(Statement(handle, self), sql, body)
    }

    /// Prepares `sql` (its first statement) for a caller that finalizes it: one that keeps it
    /// (``SystemStatements``, the control statements) or runs it once (``withUncachedStatement(_:_:)``).
    func prepareKept(_ sql: String) throws -> OpaquePointer {
        var handle: OpaquePointer?
        let rc = api.prepare_v2(db, sql, -1, &handle, nil)
        guard rc == SQLite.OK, let handle else {
            if let handle { _ = api.finalize(handle) }
            throw PrepareFailure(code: rc == SQLite.OK ? SQLite.ERROR : rc, message: SQLiteError.message(api, db, rc), sql: sql)
                .asStoreError
        }
        return handle
    }

    /// Runs `body` with `statement`, logging it at trace level when a logger wants it.
    private func run<R>(_ statement: Statement, _ sql: String, _ body: (Statement) throws -> R) throws -> R {
        guard let logger, logger.logLevel <= .trace else { return try body(statement) }
        boundValues.removeAll(keepingCapacity: true)
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let result = try body(statement)
            logStatement(logger, sql, statement, start: start, error: nil)
            return result
        } catch {
            logStatement(logger, sql, statement, start: start, error: error)
            throw error
        }
    }

    /// Logs one statement at trace level: its text and duration; the bound values only when the store
    /// was opened with `logsBoundValues` (they are user data). Keys never reach a statement.
    private func logStatement(_ logger: Logger, _ sql: String, _ statement: Statement, start: UInt64, error: (any Error)?) {
        let micros = Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
        var metadata: Logger.Metadata = ["sql": "\(sql)", "micros": "\(Int(micros))", "path": "\(path)"]
        if logsBoundValues { metadata["values"] = "\(boundValues.map(\.description))" }
        if let error { metadata["error"] = "\(error)" }
        logger.trace("statement", metadata: metadata)
    }

    /// Prepares the first statement of `sql` without caching; the caller finalizes it. Returns `nil`
    /// when `sql` holds no statement (only whitespace or comments), and the text after the statement.
    func prepareUncached(_ sql: String) throws(PrepareFailure) -> (OpaquePointer?, tail: String) {
        var handle: OpaquePointer?
        var rest = ""
        let rc = sql.withCString { text -> Int32 in
            var tail: UnsafePointer<CChar>?
            let r = api.prepare_v2(db, text, -1, &handle, &tail)
            if let tail { rest = String(cString: tail) }
            return r
        }
        guard rc == SQLite.OK else {
            if let handle { _ = api.finalize(handle) }
            throw PrepareFailure(code: rc, message: SQLiteError.message(api, db, rc), sql: sql)
        }
        return (handle, rest)
    }

    /// The statement for `sql`: the cached one when it is free (one hash of the text per use), else a
    /// newly prepared one, returned with `nil` and cached (or finalized) by ``give(_:_:_:)``.
    private func take(_ sql: String) throws(PrepareFailure) -> (Statement, Cached?) {
        if let r = recent, !r.cached.inUse, r.sql == sql {
            r.cached.inUse = true
            return (Statement(r.cached.statement, self), r.cached)
        }
        if let c = cache[sql], !c.inUse {
            c.inUse = true
            recent = (sql, c)
            return (Statement(c.statement, self), c)
        }
        var handle: OpaquePointer?
        let rc = api.prepare_v2(db, sql, -1, &handle, nil)
        guard rc == SQLite.OK, let handle else {
            if let handle { _ = api.finalize(handle) }
            throw PrepareFailure(code: rc == SQLite.OK ? SQLite.ERROR : rc, message: SQLiteError.message(api, db, rc), sql: sql)
        }
        return (Statement(handle, self), nil)
    }

    private func give(_ sql: String, _ handle: OpaquePointer, _ cached: Cached?) {
        _ = api.reset(handle)
        _ = api.clear_bindings(handle)
        useCounter &+= 1
        if let cached {
            cached.inUse = false
            cached.lastUse = useCounter
            if isClosed { _ = api.finalize(handle) }
            return
        }
        if isClosed || cache[sql] != nil {
            _ = api.finalize(handle)
            return
        }
        let added = Cached(statement: handle, lastUse: useCounter)
        cache[sql] = added
        recent = (sql, added)
        if cache.count > cacheCapacity,
            let oldest = cache.lazy.filter({ !$0.value.inUse }).min(by: { $0.value.lastUse < $1.value.lastUse })
        {
            if recent?.cached === oldest.value { recent = nil }
            _ = api.finalize(oldest.value.statement)
            cache.removeValue(forKey: oldest.key)
        }
    }
}

/// A failed `sqlite3_prepare_v2`, kept apart so a query compiler can fall back when SQLite refuses a
/// statement for its size (parser stack, expression depth, variable count).
struct PrepareFailure: Error {
    let code: Int32
    let message: String
    let sql: String

    /// Whether SQLite refused the statement only because it is too large or too deeply nested.
    var isSizeLimit: Bool {
        guard code & 0xFF == SQLite.ERROR else { return false }
        let m = message.lowercased()
        return m.contains("parser stack overflow") || m.contains("expression tree is too large")
            || m.contains("too many sql variables") || m.contains("too many terms")
    }

    var asStoreError: LocalStoreError { SQLiteError.make(code, message: message, context: "cannot prepare SQL") }
}

/// A prepared statement borrowed from a ``Connection``.
///
/// A statement exists only inside the body of the connection call that lent it (`withStatement`,
/// `withPrepared`, `withUncachedStatement`, `withOneTimeStatement`: non-escaping closures, during which
/// the connection is alive), so it refers to its connection `unowned(unsafe)`: a checked `unowned`
/// reference took a strong retain and a release — two locked instructions — on every bind and every use
/// of the API table.
struct Statement {
    let handle: OpaquePointer
    unowned(unsafe) let connection: Connection

    init(_ handle: OpaquePointer, _ connection: Connection) {
        self.handle = handle
        self.connection = connection
    }

    private var api: SQLiteAPI { connection.api }

    // MARK: Binding

    func bind(_ values: [Value], from first: Int32 = 1) throws {
        var n = first
        for v in values {
            try bind(v, at: n)
            n += 1
        }
    }

    func bind(_ value: Value, at n: Int32) throws {
        if connection.logsBoundValues { connection.boundValues.append(value) }
        let rc: Int32
        switch value {
        case .null: rc = api.bind_null(handle, n)
        case .bool(let b): rc = api.bind_int64(handle, n, b ? 1 : 0)
        case .int(let i): rc = api.bind_int64(handle, n, i)
        case .double(let d): rc = api.bind_double(handle, n, d)
        case .date(let d): rc = api.bind_double(handle, n, d.timeIntervalSinceReferenceDate)
        case .string(let s): rc = try bindText(s, at: n)
        case .json(let j): rc = try bindText(j.jsonText, at: n)
        case .binary(let bytes):
            if bytes.isEmpty {
                // A NULL pointer would bind SQL NULL; an empty blob is a zero-length zeroblob.
                rc = api.bind_zeroblob(handle, n, 0)
            } else {
                guard bytes.count <= Int(Int32.max) else { throw SQLiteError.tooBig(bytes.count) }
                rc = bytes.withUnsafeBytes { buf in
                    api.bind_blob(handle, n, buf.baseAddress, Int32(buf.count), SQLite.TRANSIENT)
                }
            }
        }
        if rc != SQLite.OK { throw connection.error(rc, "cannot bind parameter \(n)") }
    }

    /// Binds the string `text` at `n` (as ``bind(_:at:)`` binds `.string(text)`), without making a `Value`.
    func bind(text: String, at n: Int32) throws {
        if connection.logsBoundValues { connection.boundValues.append(.string(text)) }
        let rc = try bindText(text, at: n)
        if rc != SQLite.OK { throw connection.error(rc, "cannot bind parameter \(n)") }
    }

    /// Binds the UTF-8 bytes of `s` (copied by SQLite): a native string's bytes where they are, any other
    /// string's through a contiguous copy.
    private func bindText(_ s: String, at n: Int32) throws -> Int32 {
        if let rc = try s.utf8.withContiguousStorageIfAvailable({ try bindUTF8($0, at: n) }) { return rc }
        var s = s
        return try s.withUTF8 { try bindUTF8($0, at: n) }
    }

    private func bindUTF8(_ buf: UnsafeBufferPointer<UInt8>, at n: Int32) throws -> Int32 {
        guard buf.count <= Int(Int32.max) else { throw SQLiteError.tooBig(buf.count) }
        // A NULL pointer would bind SQL NULL: an empty string is bound from a literal.
        guard let base = buf.baseAddress, !buf.isEmpty else {
            return "".withCString { api.bind_text(handle, n, $0, 0, SQLite.TRANSIENT) }
        }
        return base.withMemoryRebound(to: CChar.self, capacity: buf.count) {
            api.bind_text(handle, n, $0, Int32(buf.count), SQLite.TRANSIENT)
        }
    }

    // MARK: Stepping

    /// Steps once: `true` when a row is available, `false` when done.
    func step() throws -> Bool {
        let rc = api.step(handle)
        if rc == SQLite.ROW { return true }
        if rc == SQLite.DONE { return false }
        throw connection.error(rc, "cannot run SQL")
    }

    /// Steps to the end, ignoring rows.
    func run() throws {
        while try step() {}
    }

    // MARK: Columns

    var columnCount: Int32 { api.column_count(handle) }

    func isNull(_ n: Int32) -> Bool { api.column_type(handle, n) == SQLite.NULL }

    func int64(_ n: Int32) -> Int64 { api.column_int64(handle, n) }

    func double(_ n: Int32) -> Double { api.column_double(handle, n) }

    func text(_ n: Int32) -> String {
        guard let p = api.column_text(handle, n) else { return "" }
        let count = Int(api.column_bytes(handle, n))
        return String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self)
    }

    func blob(_ n: Int32) -> [UInt8] {
        let p = api.column_blob(handle, n)
        let count = Int(api.column_bytes(handle, n))
        guard let p, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }

    /// The value of column `n` read as a value of `type` (see the type mapping in docs/sqlite.md).
    func value(_ n: Int32, as type: ColumnType) throws -> Value {
        let storage = api.column_type(handle, n)
        if storage == SQLite.NULL { return .null }
        switch type {
        case .string: return .string(text(n))
        case .integer: return .int(int64(n))
        case .boolean: return .bool(int64(n) != 0)
        // REAL values with no fractional part may be stored as integers; column_double restores them.
        case .double: return .double(double(n))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: double(n)))
        case .binary: return .binary(blob(n))
        case .json:
            let raw = text(n)
            do {
                return .json(try JSON(parsing: raw))
            } catch {
                throw LocalStoreError(.corrupt, "a json column holds text that is not JSON: \(Value.string(raw))")
            }
        }
    }

    /// The value of column `n` by its storage class (for raw SQL results).
    func dynamicValue(_ n: Int32) -> Value {
        switch api.column_type(handle, n) {
        case SQLite.INTEGER: return .int(int64(n))
        case SQLite.FLOAT: return .double(double(n))
        case SQLite.TEXT: return .string(text(n))
        case SQLite.BLOB: return .binary(blob(n))
        default: return .null
        }
    }

    func columnName(_ n: Int32) -> String {
        api.column_name(handle, n).map { String(cString: $0) } ?? "column\(n)"
    }

    func declaredType(_ n: Int32) -> String? {
        api.column_decltype(handle, n).map { String(cString: $0) }
    }
}

/// Mapping of SQLite result codes to ``LocalStoreError`` codes.
package enum SQLiteError {
    static func message(_ api: SQLiteAPI, _ db: OpaquePointer?, _ rc: Int32) -> String {
        if let db, let m = api.errmsg(db) { return String(cString: m) }
        if let m = api.errstr(rc) { return String(cString: m) }
        return "error \(rc)"
    }

    /// The ``LocalStoreError`` for SQLite result code `rc` (primary or extended), keeping SQLite's message.
    package static func make(_ rc: Int32, message: String, context: String) -> LocalStoreError {
        let code: LocalStoreError.Code
        switch rc & 0xFF {
        case SQLite.BUSY, SQLite.LOCKED, SQLite.PROTOCOL: code = .busy
        case SQLite.FULL: code = .full
        case SQLite.CORRUPT: code = .corrupt
        case SQLite.NOTADB: code = .notADatabase
        case SQLite.READONLY, SQLite.PERM: code = .readOnly
        case SQLite.IOERR, SQLite.CANTOPEN, SQLite.NOLFS: code = .ioError
        case SQLite.CONSTRAINT: code = .constraint
        case SQLite.MISUSE: code = .misuse
        case SQLite.TOOBIG: code = .invalidValue
        default: code = .internal
        }
        return LocalStoreError(code, "sqlite: \(context): \(message) (code \(rc))", engineResultCode: rc)
    }

    static func tooBig(_ count: Int) -> LocalStoreError {
        LocalStoreError(.invalidValue, "a value of \(count) bytes is too large for SQLite")
    }
}
