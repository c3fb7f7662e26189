import LocalStore
import Synchronization

/// The SQL functions the query compiler uses where SQLite's own differ from the core's semantics:
///
/// - `localstore_length(s)`: the number of Unicode scalars (SQLite's `length()` stops at a NUL).
/// - `localstore_lower(s)`, `localstore_upper(s)`: ASCII-only case mapping, whatever SQLite was built with (ICU).
/// - `localstore_starts(s, p, nocase)`, `localstore_ends(…)`, `localstore_contains(…)`: byte-exact tests
///   (`LIKE` folds case and has wildcards); `nocase` = 1 lower-cases both sides (ASCII) first. A null
///   operand gives 0.
/// - `localstore_call(name, args…)`: the core's OData function `name` (``QueryFunction``'s raw value) on
///   the arguments: text as strings, integers as integers, a REAL truncated to an integer (saturating,
///   as SQLite's own conversion; the compiler passes REALs only where an integer is expected). Date parts
///   take the date's whole seconds since 2001 as an integer. Null in, null out.
/// - `localstore_text(x)`: the text the string functions read from a number (`QueryFunctions.text`): an
///   integer in decimal, a REAL as .NET writes it (`DotNetText`); text stays text, null and blobs give null.
///
/// A C callback cannot capture anything, and the only way back to its context goes through
/// `sqlite3_user_data` of the very library that called it: with two libraries in one process (SQLite and
/// SQLCipher) the callback must know which table to use before calling anything. So each library gets a
/// *slot*: a distinct callback that reads its own table from a process-wide registry. There are
/// ``slotCount`` slots; when they are all taken (more distinct libraries than that), connections get no
/// functions and the compiler evaluates queries that need them in Swift instead.
enum SQLFunctions {
    static let slotCount = 4

    enum Op: Int {
        case length = 1, lower, upper, starts, ends, contains, call, text

        var name: String {
            switch self {
            case .length: return "localstore_length"
            case .lower: return "localstore_lower"
            case .upper: return "localstore_upper"
            case .starts: return "localstore_starts"
            case .ends: return "localstore_ends"
            case .contains: return "localstore_contains"
            case .call: return "localstore_call"
            case .text: return "localstore_text"
            }
        }

        var argumentCount: Int32 {
            switch self {
            case .length, .lower, .upper, .text: return 1
            case .starts, .ends, .contains: return 3
            case .call: return -1
            }
        }
    }

    final class Box: Sendable {
        let api: SQLiteAPI
        let identity: UInt
        init(_ api: SQLiteAPI) {
            self.api = api
            self.identity = api.libraryIdentity
        }
    }

    private static let slots = LockedValue<[Box?]>(Array(repeating: nil, count: slotCount))

    private static let callbacks: [SQLiteAPI.FunctionCallback] = [
        { ctx, argc, argv in call(slot: 0, ctx, argc, argv) },
        { ctx, argc, argv in call(slot: 1, ctx, argc, argv) },
        { ctx, argc, argv in call(slot: 2, ctx, argc, argv) },
        { ctx, argc, argv in call(slot: 3, ctx, argc, argv) },
    ]

    /// The slot of `api`'s library, claiming a free one; `nil` when all are taken.
    private static func slot(for api: SQLiteAPI) -> Int? {
        let identity = api.libraryIdentity
        return slots.withLock { s in
            if let n = s.firstIndex(where: { $0?.identity == identity }) { return n }
            guard let free = s.firstIndex(where: { $0 == nil }) else { return nil }
            s[free] = Box(api)
            return free
        }
    }

    /// Registers every function on `db`; `false` when they could not all be registered.
    static func register(on db: OpaquePointer, api: SQLiteAPI) -> Bool {
        guard let n = slot(for: api) else { return false }
        let callback = callbacks[n]
        for op in [Op.length, .lower, .upper, .starts, .ends, .contains, .call, .text] {
            let rc = api.create_function_v2(
                db, op.name, op.argumentCount, SQLite.UTF8 | SQLite.DETERMINISTIC,
                UnsafeMutableRawPointer(bitPattern: op.rawValue), callback, nil, nil, nil)
            if rc != SQLite.OK { return false }
        }
        return true
    }

    private static func call(slot n: Int, _ ctx: OpaquePointer?, _ argc: Int32, _ argv: UnsafeMutablePointer<OpaquePointer?>?) {
        guard let box = slots.withLock({ $0[n] }) else { return }
        let api = box.api
        guard let op = userData(api, ctx).flatMap(Op.init(rawValue:)), argc == op.argumentCount || op.argumentCount < 0, let argv else {
            api.result_null(ctx)
            return
        }
        switch op {
        case .length:
            guard let s = bytes(api, argv[0]) else { return api.result_null(ctx) }
            var count: Int64 = 0
            for b in s where b & 0xC0 != 0x80 { count += 1 }
            api.result_int64(ctx, count)
        case .lower, .upper:
            guard let s = bytes(api, argv[0]) else { return api.result_null(ctx) }
            var out = [UInt8](s)
            if op == .lower {
                for i in out.indices where out[i] >= 0x41 && out[i] <= 0x5A { out[i] |= 0x20 }
            } else {
                for i in out.indices where out[i] >= 0x61 && out[i] <= 0x7A { out[i] &= ~0x20 }
            }
            out.append(0)  // a valid pointer even when empty
            out.withUnsafeBufferPointer { buf in
                buf.withMemoryRebound(to: CChar.self) { chars in
                    api.result_text(ctx, chars.baseAddress, Int32(s.count), SQLite.TRANSIENT)
                }
            }
        case .starts, .ends, .contains:
            guard let s = bytes(api, argv[0]), let p = bytes(api, argv[1]) else { return api.result_int64(ctx, 0) }
            let noCase = api.value_type(argv[2]) == SQLite.INTEGER && api.value_int64(argv[2]) != 0
            api.result_int64(ctx, test(op, s, p, noCase: noCase) ? 1 : 0)
        case .call:
            callFunction(api, ctx, Int(argc), argv)
        case .text:
            let v = argv[0]
            let text: String
            switch api.value_type(v) {
            case SQLite.INTEGER: text = String(api.value_int64(v))
            case SQLite.FLOAT: text = DotNetText.double(api.value_double(v))
            case SQLite.TEXT:
                guard let s = bytes(api, v) else { return api.result_null(ctx) }
                text = String(decoding: s, as: UTF8.self)
            default: return api.result_null(ctx)
            }
            resultText(api, ctx, text)
        }
    }

    /// `localstore_call(name, args…)`.
    private static func callFunction(_ api: SQLiteAPI, _ ctx: OpaquePointer?, _ argc: Int, _ argv: UnsafeMutablePointer<OpaquePointer?>) {
        guard argc >= 2, let name = bytes(api, argv[0]),
            let f = QueryFunction(rawValue: String(decoding: name, as: UTF8.self))
        else { return api.result_null(ctx) }
        var args: [Value] = []
        args.reserveCapacity(argc - 1)
        for n in 1..<argc {
            let v = argv[n]
            switch api.value_type(v) {
            case SQLite.NULL: return api.result_null(ctx)
            case SQLite.INTEGER, SQLite.FLOAT: args.append(.int(api.value_int64(v)))
            default:
                guard let b = bytes(api, v) else { return api.result_null(ctx) }
                args.append(.string(String(decoding: b, as: UTF8.self)))
            }
        }
        let result: Value
        switch f {
        case .year, .month, .day, .hour, .minute, .second:
            guard args.count == 1, case .int(let seconds) = args[0] else { return api.result_null(ctx) }
            result = QueryFunctions.datePart(f, wholeSecondsSinceReferenceDate: seconds)
        default:
            result = QueryFunctions.apply(f, args)
        }
        switch result {
        case .int(let i): api.result_int64(ctx, i)
        case .string(let s): resultText(api, ctx, s)
        default: api.result_null(ctx)
        }
    }

    /// Returns `s` as the function's TEXT result.
    private static func resultText(_ api: SQLiteAPI, _ ctx: OpaquePointer?, _ s: String) {
        var out = Array(s.utf8)
        let count = out.count
        out.append(0)  // a valid pointer even when empty
        out.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { chars in
                api.result_text(ctx, chars.baseAddress, Int32(count), SQLite.TRANSIENT)
            }
        }
    }

    /// The op code registered as the function's user data.
    private static func userData(_ api: SQLiteAPI, _ ctx: OpaquePointer?) -> Int? {
        api.user_data(ctx).map { Int(bitPattern: $0) }
    }

    /// The bytes of a text argument, or `nil` for SQL NULL.
    private static func bytes(_ api: SQLiteAPI, _ value: OpaquePointer?) -> UnsafeBufferPointer<UInt8>? {
        if api.value_type(value) == SQLite.NULL { return nil }
        let p = api.value_text(value)
        let n = Int(api.value_bytes(value))
        guard let p else { return n == 0 ? UnsafeBufferPointer(start: nil, count: 0) : nil }
        return UnsafeBufferPointer(start: p, count: n)
    }

    static func test(_ op: Op, _ s: UnsafeBufferPointer<UInt8>, _ p: UnsafeBufferPointer<UInt8>, noCase: Bool) -> Bool {
        @inline(__always) func fold(_ b: UInt8) -> UInt8 { noCase && b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
        let n = s.count
        let m = p.count
        if m == 0 { return true }
        if m > n { return false }
        func matches(at offset: Int) -> Bool {
            for j in 0..<m where fold(s[offset + j]) != fold(p[j]) { return false }
            return true
        }
        switch op {
        case .starts: return matches(at: 0)
        case .ends: return matches(at: n - m)
        default:
            let first = fold(p[0])
            for i in 0...(n - m) where fold(s[i]) == first && matches(at: i) { return true }
            return false
        }
    }
}
