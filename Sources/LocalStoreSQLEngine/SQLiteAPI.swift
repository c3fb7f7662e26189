/// The SQLite C functions the engine calls, as a table of C function pointers.
///
/// The engine never links a SQLite library. A backend fills this table: `LocalStoreSQLite` from the
/// system `libsqlite3` it links, a SQLCipher backend from `dlopen("libsqlcipher.so.0")` + `dlsym`. `sqlite3*`
/// and `sqlite3_stmt*` (and `sqlite3_context*`, `sqlite3_value*`) are `OpaquePointer`s. Every member
/// has exactly the C prototype of the function it names (`sqlite3_` prefix dropped); all of them
/// exist in SQLite 3.15.2, the oldest version the engine supports.
package struct SQLiteAPI: Sendable {
    /// `void (*)(void*)`: a destructor for `bind_text` / `bind_blob` / `result_text`.
    package typealias Destructor = @convention(c) (UnsafeMutableRawPointer?) -> Void
    /// The callback of a SQL function (`xFunc`).
    package typealias FunctionCallback = @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void
    /// An authorizer callback (`xAuth`).
    package typealias Authorizer = @convention(c) (
        UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?
    ) -> Int32

    package var libversion_number: @convention(c) () -> Int32
    package var open_v2:
        @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, Int32, UnsafePointer<CChar>?) -> Int32
    package var close_v2: @convention(c) (OpaquePointer?) -> Int32
    package var errmsg: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    package var errstr: @convention(c) (Int32) -> UnsafePointer<CChar>?
    package var extended_errcode: @convention(c) (OpaquePointer?) -> Int32
    package var busy_timeout: @convention(c) (OpaquePointer?, Int32) -> Int32
    package var limit: @convention(c) (OpaquePointer?, Int32, Int32) -> Int32
    package var get_autocommit: @convention(c) (OpaquePointer?) -> Int32
    package var changes: @convention(c) (OpaquePointer?) -> Int32
    package var last_insert_rowid: @convention(c) (OpaquePointer?) -> Int64

    package var prepare_v2:
        @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?,
            UnsafeMutablePointer<UnsafePointer<CChar>?>?
        ) -> Int32
    package var step: @convention(c) (OpaquePointer?) -> Int32
    package var reset: @convention(c) (OpaquePointer?) -> Int32
    package var finalize: @convention(c) (OpaquePointer?) -> Int32
    package var clear_bindings: @convention(c) (OpaquePointer?) -> Int32
    package var stmt_readonly: @convention(c) (OpaquePointer?) -> Int32
    package var bind_parameter_count: @convention(c) (OpaquePointer?) -> Int32

    package var bind_int64: @convention(c) (OpaquePointer?, Int32, Int64) -> Int32
    package var bind_double: @convention(c) (OpaquePointer?, Int32, Double) -> Int32
    package var bind_text: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32, Destructor?) -> Int32
    package var bind_blob: @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?, Int32, Destructor?) -> Int32
    package var bind_zeroblob: @convention(c) (OpaquePointer?, Int32, Int32) -> Int32
    package var bind_null: @convention(c) (OpaquePointer?, Int32) -> Int32

    package var column_count: @convention(c) (OpaquePointer?) -> Int32
    package var column_type: @convention(c) (OpaquePointer?, Int32) -> Int32
    package var column_int64: @convention(c) (OpaquePointer?, Int32) -> Int64
    package var column_double: @convention(c) (OpaquePointer?, Int32) -> Double
    package var column_text: @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<UInt8>?
    package var column_blob: @convention(c) (OpaquePointer?, Int32) -> UnsafeRawPointer?
    package var column_bytes: @convention(c) (OpaquePointer?, Int32) -> Int32
    package var column_name: @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?
    package var column_decltype: @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?

    package var create_function_v2:
        @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?, FunctionCallback?,
            FunctionCallback?, (@convention(c) (OpaquePointer?) -> Void)?, Destructor?
        ) -> Int32
    package var value_type: @convention(c) (OpaquePointer?) -> Int32
    package var value_text: @convention(c) (OpaquePointer?) -> UnsafePointer<UInt8>?
    package var value_bytes: @convention(c) (OpaquePointer?) -> Int32
    package var value_int64: @convention(c) (OpaquePointer?) -> Int64
    package var value_double: @convention(c) (OpaquePointer?) -> Double
    package var user_data: @convention(c) (OpaquePointer?) -> UnsafeMutableRawPointer?
    package var result_int64: @convention(c) (OpaquePointer?, Int64) -> Void
    package var result_null: @convention(c) (OpaquePointer?) -> Void
    package var result_text: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, Destructor?) -> Void
    package var set_authorizer: @convention(c) (OpaquePointer?, Authorizer?, UnsafeMutableRawPointer?) -> Int32

    /// `sqlite3_key(db, key, length)` of SQLCipher; `nil` for plain SQLite.
    package var key: (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32)?
    /// `sqlite3_rekey(db, key, length)` of SQLCipher; `nil` for plain SQLite.
    package var rekey: (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32)?

    package init(
        libversion_number: @escaping @convention(c) () -> Int32,
        open_v2: @escaping @convention(c) (
            UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, Int32, UnsafePointer<CChar>?
        ) -> Int32,
        close_v2: @escaping @convention(c) (OpaquePointer?) -> Int32,
        errmsg: @escaping @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?,
        errstr: @escaping @convention(c) (Int32) -> UnsafePointer<CChar>?,
        extended_errcode: @escaping @convention(c) (OpaquePointer?) -> Int32,
        busy_timeout: @escaping @convention(c) (OpaquePointer?, Int32) -> Int32,
        limit: @escaping @convention(c) (OpaquePointer?, Int32, Int32) -> Int32,
        get_autocommit: @escaping @convention(c) (OpaquePointer?) -> Int32,
        changes: @escaping @convention(c) (OpaquePointer?) -> Int32,
        last_insert_rowid: @escaping @convention(c) (OpaquePointer?) -> Int64,
        prepare_v2: @escaping @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?,
            UnsafeMutablePointer<UnsafePointer<CChar>?>?
        ) -> Int32,
        step: @escaping @convention(c) (OpaquePointer?) -> Int32,
        reset: @escaping @convention(c) (OpaquePointer?) -> Int32,
        finalize: @escaping @convention(c) (OpaquePointer?) -> Int32,
        clear_bindings: @escaping @convention(c) (OpaquePointer?) -> Int32,
        stmt_readonly: @escaping @convention(c) (OpaquePointer?) -> Int32,
        bind_parameter_count: @escaping @convention(c) (OpaquePointer?) -> Int32,
        bind_int64: @escaping @convention(c) (OpaquePointer?, Int32, Int64) -> Int32,
        bind_double: @escaping @convention(c) (OpaquePointer?, Int32, Double) -> Int32,
        bind_text: @escaping @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32, Destructor?) -> Int32,
        bind_blob: @escaping @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?, Int32, Destructor?) -> Int32,
        bind_zeroblob: @escaping @convention(c) (OpaquePointer?, Int32, Int32) -> Int32,
        bind_null: @escaping @convention(c) (OpaquePointer?, Int32) -> Int32,
        column_count: @escaping @convention(c) (OpaquePointer?) -> Int32,
        column_type: @escaping @convention(c) (OpaquePointer?, Int32) -> Int32,
        column_int64: @escaping @convention(c) (OpaquePointer?, Int32) -> Int64,
        column_double: @escaping @convention(c) (OpaquePointer?, Int32) -> Double,
        column_text: @escaping @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<UInt8>?,
        column_blob: @escaping @convention(c) (OpaquePointer?, Int32) -> UnsafeRawPointer?,
        column_bytes: @escaping @convention(c) (OpaquePointer?, Int32) -> Int32,
        column_name: @escaping @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?,
        column_decltype: @escaping @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?,
        create_function_v2: @escaping @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?, FunctionCallback?,
            FunctionCallback?, (@convention(c) (OpaquePointer?) -> Void)?, Destructor?
        ) -> Int32,
        value_type: @escaping @convention(c) (OpaquePointer?) -> Int32,
        value_text: @escaping @convention(c) (OpaquePointer?) -> UnsafePointer<UInt8>?,
        value_bytes: @escaping @convention(c) (OpaquePointer?) -> Int32,
        value_int64: @escaping @convention(c) (OpaquePointer?) -> Int64,
        value_double: @escaping @convention(c) (OpaquePointer?) -> Double,
        user_data: @escaping @convention(c) (OpaquePointer?) -> UnsafeMutableRawPointer?,
        result_int64: @escaping @convention(c) (OpaquePointer?, Int64) -> Void,
        result_null: @escaping @convention(c) (OpaquePointer?) -> Void,
        result_text: @escaping @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, Destructor?) -> Void,
        set_authorizer: @escaping @convention(c) (OpaquePointer?, Authorizer?, UnsafeMutableRawPointer?) -> Int32,
        key: (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32)? = nil,
        rekey: (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32)? = nil
    ) {
        self.libversion_number = libversion_number
        self.open_v2 = open_v2
        self.close_v2 = close_v2
        self.errmsg = errmsg
        self.errstr = errstr
        self.extended_errcode = extended_errcode
        self.busy_timeout = busy_timeout
        self.limit = limit
        self.get_autocommit = get_autocommit
        self.changes = changes
        self.last_insert_rowid = last_insert_rowid
        self.prepare_v2 = prepare_v2
        self.step = step
        self.reset = reset
        self.finalize = finalize
        self.clear_bindings = clear_bindings
        self.stmt_readonly = stmt_readonly
        self.bind_parameter_count = bind_parameter_count
        self.bind_int64 = bind_int64
        self.bind_double = bind_double
        self.bind_text = bind_text
        self.bind_blob = bind_blob
        self.bind_zeroblob = bind_zeroblob
        self.bind_null = bind_null
        self.column_count = column_count
        self.column_type = column_type
        self.column_int64 = column_int64
        self.column_double = column_double
        self.column_text = column_text
        self.column_blob = column_blob
        self.column_bytes = column_bytes
        self.column_name = column_name
        self.column_decltype = column_decltype
        self.create_function_v2 = create_function_v2
        self.value_type = value_type
        self.value_text = value_text
        self.value_bytes = value_bytes
        self.value_int64 = value_int64
        self.value_double = value_double
        self.user_data = user_data
        self.result_int64 = result_int64
        self.result_null = result_null
        self.result_text = result_text
        self.set_authorizer = set_authorizer
        self.key = key
        self.rekey = rekey
    }

    /// The names of the required members, in declaration order: the symbols (with the `sqlite3_`
    /// prefix) a backend loading the library dynamically must find.
    package static let requiredSymbols: [String] = [
        "libversion_number", "open_v2", "close_v2", "errmsg", "errstr", "extended_errcode", "busy_timeout", "limit",
        "get_autocommit", "changes", "last_insert_rowid", "prepare_v2", "step", "reset", "finalize", "clear_bindings", "stmt_readonly",
        "bind_parameter_count", "bind_int64", "bind_double", "bind_text", "bind_blob", "bind_zeroblob", "bind_null",
        "column_count", "column_type", "column_int64", "column_double", "column_text", "column_blob", "column_bytes",
        "column_name", "column_decltype", "create_function_v2", "value_type", "value_text", "value_bytes", "value_int64", "user_data",
        "result_int64", "result_null", "result_text", "set_authorizer",
    ].map { "sqlite3_" + $0 }

    /// Builds the table by looking every symbol up with `lookup` (e.g. `dlsym`); `nil` when a required
    /// symbol is missing. `sqlite3_key` / `sqlite3_rekey` are optional.
    package static func load(_ lookup: (String) -> UnsafeMutableRawPointer?) -> SQLiteAPI? {
        func f<T>(_ name: String, _: T.Type) -> T? {
            guard let p = lookup("sqlite3_" + name) else { return nil }
            return unsafeBitCast(p, to: T.self)
        }
        guard let libversion_number = f("libversion_number", (@convention(c) () -> Int32).self),
            let open_v2 = f(
                "open_v2",
                (@convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, Int32, UnsafePointer<CChar>?)
                    -> Int32).self),
            let close_v2 = f("close_v2", (@convention(c) (OpaquePointer?) -> Int32).self),
            let errmsg = f("errmsg", (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self),
            let errstr = f("errstr", (@convention(c) (Int32) -> UnsafePointer<CChar>?).self),
            let extended_errcode = f("extended_errcode", (@convention(c) (OpaquePointer?) -> Int32).self),
            let busy_timeout = f("busy_timeout", (@convention(c) (OpaquePointer?, Int32) -> Int32).self),
            let limit = f("limit", (@convention(c) (OpaquePointer?, Int32, Int32) -> Int32).self),
            let get_autocommit = f("get_autocommit", (@convention(c) (OpaquePointer?) -> Int32).self),
            let changes = f("changes", (@convention(c) (OpaquePointer?) -> Int32).self),
            let last_insert_rowid = f("last_insert_rowid", (@convention(c) (OpaquePointer?) -> Int64).self),
            let prepare_v2 = f(
                "prepare_v2",
                (@convention(c) (
                    OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?,
                    UnsafeMutablePointer<UnsafePointer<CChar>?>?
                ) -> Int32).self),
            let step = f("step", (@convention(c) (OpaquePointer?) -> Int32).self),
            let reset = f("reset", (@convention(c) (OpaquePointer?) -> Int32).self),
            let finalize = f("finalize", (@convention(c) (OpaquePointer?) -> Int32).self),
            let clear_bindings = f("clear_bindings", (@convention(c) (OpaquePointer?) -> Int32).self),
            let stmt_readonly = f("stmt_readonly", (@convention(c) (OpaquePointer?) -> Int32).self),
            let bind_parameter_count = f("bind_parameter_count", (@convention(c) (OpaquePointer?) -> Int32).self),
            let bind_int64 = f("bind_int64", (@convention(c) (OpaquePointer?, Int32, Int64) -> Int32).self),
            let bind_double = f("bind_double", (@convention(c) (OpaquePointer?, Int32, Double) -> Int32).self),
            let bind_text = f(
                "bind_text",
                (@convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32, Destructor?) -> Int32).self),
            let bind_blob = f(
                "bind_blob", (@convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?, Int32, Destructor?) -> Int32).self),
            let bind_zeroblob = f("bind_zeroblob", (@convention(c) (OpaquePointer?, Int32, Int32) -> Int32).self),
            let bind_null = f("bind_null", (@convention(c) (OpaquePointer?, Int32) -> Int32).self),
            let column_count = f("column_count", (@convention(c) (OpaquePointer?) -> Int32).self),
            let column_type = f("column_type", (@convention(c) (OpaquePointer?, Int32) -> Int32).self),
            let column_int64 = f("column_int64", (@convention(c) (OpaquePointer?, Int32) -> Int64).self),
            let column_double = f("column_double", (@convention(c) (OpaquePointer?, Int32) -> Double).self),
            let column_text = f("column_text", (@convention(c) (OpaquePointer?, Int32) -> UnsafePointer<UInt8>?).self),
            let column_blob = f("column_blob", (@convention(c) (OpaquePointer?, Int32) -> UnsafeRawPointer?).self),
            let column_bytes = f("column_bytes", (@convention(c) (OpaquePointer?, Int32) -> Int32).self),
            let column_name = f("column_name", (@convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?).self),
            let column_decltype = f(
                "column_decltype", (@convention(c) (OpaquePointer?, Int32) -> UnsafePointer<CChar>?).self),
            let create_function_v2 = f(
                "create_function_v2",
                (@convention(c) (
                    OpaquePointer?, UnsafePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?, FunctionCallback?,
                    FunctionCallback?, (@convention(c) (OpaquePointer?) -> Void)?, Destructor?
                ) -> Int32).self),
            let value_type = f("value_type", (@convention(c) (OpaquePointer?) -> Int32).self),
            let value_text = f("value_text", (@convention(c) (OpaquePointer?) -> UnsafePointer<UInt8>?).self),
            let value_bytes = f("value_bytes", (@convention(c) (OpaquePointer?) -> Int32).self),
            let value_int64 = f("value_int64", (@convention(c) (OpaquePointer?) -> Int64).self),
            let value_double = f("value_double", (@convention(c) (OpaquePointer?) -> Double).self),
            let user_data = f("user_data", (@convention(c) (OpaquePointer?) -> UnsafeMutableRawPointer?).self),
            let result_int64 = f("result_int64", (@convention(c) (OpaquePointer?, Int64) -> Void).self),
            let result_null = f("result_null", (@convention(c) (OpaquePointer?) -> Void).self),
            let result_text = f(
                "result_text", (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, Destructor?) -> Void).self),
            let set_authorizer = f(
                "set_authorizer", (@convention(c) (OpaquePointer?, Authorizer?, UnsafeMutableRawPointer?) -> Int32).self)
        else { return nil }
        return SQLiteAPI(
            libversion_number: libversion_number, open_v2: open_v2, close_v2: close_v2, errmsg: errmsg, errstr: errstr,
            extended_errcode: extended_errcode, busy_timeout: busy_timeout, limit: limit, get_autocommit: get_autocommit,
            changes: changes, last_insert_rowid: last_insert_rowid, prepare_v2: prepare_v2, step: step, reset: reset, finalize: finalize,
            clear_bindings: clear_bindings, stmt_readonly: stmt_readonly, bind_parameter_count: bind_parameter_count,
            bind_int64: bind_int64, bind_double: bind_double, bind_text: bind_text, bind_blob: bind_blob,
            bind_zeroblob: bind_zeroblob, bind_null: bind_null, column_count: column_count, column_type: column_type,
            column_int64: column_int64, column_double: column_double, column_text: column_text,
            column_blob: column_blob, column_bytes: column_bytes, column_name: column_name,
            column_decltype: column_decltype, create_function_v2: create_function_v2, value_type: value_type,
            value_text: value_text, value_bytes: value_bytes, value_int64: value_int64, value_double: value_double, user_data: user_data,
            result_int64: result_int64, result_null: result_null,
            result_text: result_text, set_authorizer: set_authorizer,
            key: f("key", (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32).self),
            rekey: f("rekey", (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32).self))
    }

    /// An identity of the library the table points into (the address of its `sqlite3_libversion_number`).
    var libraryIdentity: UInt {
        UInt(bitPattern: unsafeBitCast(libversion_number, to: UnsafeRawPointer.self))
    }
}

/// SQLite's constants, as the engine needs them (values from `sqlite3.h`, identical since 3.7).
package enum SQLite {
    package static let OK: Int32 = 0
    package static let ERROR: Int32 = 1
    package static let PERM: Int32 = 3
    package static let ABORT: Int32 = 4
    package static let BUSY: Int32 = 5
    package static let LOCKED: Int32 = 6
    package static let NOMEM: Int32 = 7
    package static let READONLY: Int32 = 8
    package static let INTERRUPT: Int32 = 9
    package static let IOERR: Int32 = 10
    package static let CORRUPT: Int32 = 11
    package static let FULL: Int32 = 13
    package static let CANTOPEN: Int32 = 14
    package static let PROTOCOL: Int32 = 15
    package static let SCHEMA: Int32 = 17
    package static let TOOBIG: Int32 = 18
    package static let CONSTRAINT: Int32 = 19
    package static let MISMATCH: Int32 = 20
    package static let MISUSE: Int32 = 21
    package static let NOLFS: Int32 = 22
    package static let AUTH: Int32 = 23
    package static let RANGE: Int32 = 25
    package static let NOTADB: Int32 = 26
    package static let ROW: Int32 = 100
    package static let DONE: Int32 = 101

    package static let OPEN_READONLY: Int32 = 0x0000_0001
    package static let OPEN_READWRITE: Int32 = 0x0000_0002
    package static let OPEN_CREATE: Int32 = 0x0000_0004
    package static let OPEN_URI: Int32 = 0x0000_0040
    package static let OPEN_NOMUTEX: Int32 = 0x0000_8000
    package static let OPEN_FULLMUTEX: Int32 = 0x0001_0000
    package static let OPEN_PRIVATECACHE: Int32 = 0x0004_0000

    package static let INTEGER: Int32 = 1
    package static let FLOAT: Int32 = 2
    package static let TEXT: Int32 = 3
    package static let BLOB: Int32 = 4
    package static let NULL: Int32 = 5

    package static let UTF8: Int32 = 1
    package static let DETERMINISTIC: Int32 = 0x800

    package static let LIMIT_LENGTH: Int32 = 0
    package static let LIMIT_SQL_LENGTH: Int32 = 1
    package static let LIMIT_EXPR_DEPTH: Int32 = 3
    package static let LIMIT_VARIABLE_NUMBER: Int32 = 9

    // Authorizer results and the action codes a read-only query may use.
    package static let DENY: Int32 = 1
    package static let AUTH_READ: Int32 = 20
    package static let AUTH_SELECT: Int32 = 21
    package static let AUTH_FUNCTION: Int32 = 31
    package static let AUTH_RECURSIVE: Int32 = 33

    /// `SQLITE_TRANSIENT`: SQLite copies the bytes before the bind call returns.
    package static let TRANSIENT: SQLiteAPI.Destructor = unsafeBitCast(-1 as Int, to: SQLiteAPI.Destructor.self)
}
