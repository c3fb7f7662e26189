import LocalStore

/// A piece of SQL and the values of its parameters, in textual order. Parameters are anonymous `?`:
/// SQLite looks each numbered `?NNN` up in a list when it generates code, which makes preparing a
/// statement with thousands of them quadratic. A fragment used twice carries its values twice.
///
/// Only trusted text (keywords, operators, quoted identifiers) is interpolated with `raw:`; values
/// enter through ``parameter(_:)`` only.
struct Fragment: ExpressibleByStringInterpolation {
    var sql: String
    var arguments: [Value]

    init(sql: String, arguments: [Value]) {
        self.sql = sql
        self.arguments = arguments
    }

    init(stringLiteral value: String) {
        sql = value
        arguments = []
    }

    init(stringInterpolation i: Interpolation) {
        sql = i.sql
        arguments = i.arguments
    }

    struct Interpolation: StringInterpolationProtocol {
        var sql = ""
        var arguments: [Value] = []
        init(literalCapacity: Int, interpolationCount: Int) { sql.reserveCapacity(literalCapacity + 16 * interpolationCount) }
        mutating func appendLiteral(_ literal: String) { sql += literal }
        mutating func appendInterpolation(_ f: Fragment) {
            sql += f.sql
            arguments += f.arguments
        }
        mutating func appendInterpolation(raw text: String) { sql += text }
    }

    /// One bound value.
    static func parameter(_ v: Value) -> Fragment { Fragment(sql: "?", arguments: [v]) }

    /// The fragments joined by `separator`.
    static func joined(_ parts: [Fragment], separator: String) -> Fragment {
        var sql = ""
        var arguments: [Value] = []
        for (n, p) in parts.enumerated() {
            if n > 0 { sql += separator }
            sql += p.sql
            arguments += p.arguments
        }
        return Fragment(sql: sql, arguments: arguments)
    }

    /// `?, ?, …` for `values`.
    static func list(_ values: [Value]) -> Fragment {
        Fragment(sql: Array(repeating: "?", count: values.count).joined(separator: ", "), arguments: values)
    }
}

/// Thrown when a query cannot be expressed in SQL on this connection (too many bound variables, no
/// `localstore_*` functions); the caller evaluates it in Swift with the core's evaluator instead.
struct NeedsFallback: Error {}

/// Compiles a ``ResolvedQuery`` into SQL with exactly the semantics of the core's evaluator
/// (`ResolvedPredicate.matches`, `Arithmetic.apply`, `Collation.compare`), on SQLite 3.15.2 and later.
///
/// - Two-valued logic: the SQL of a predicate is *true* exactly when the core's predicate is true; it
///   may be NULL where the core says false. AND and OR preserve that; `NOT p` becomes
///   `NOT (p) IS 1`, which is definite. Comparisons stay bare so SQLite can use indexes.
/// - Every string comparison carries an explicit `COLLATE NOCASE` / `COLLATE BINARY`.
/// - Integer meets double: the integer side is `CAST(… AS REAL)` (SQLite 3.40 compares int and real
///   exactly, 3.15 and the core via double). An integer expression that may have overflowed into a
///   double (integer arithmetic) compared with an integer decides by `typeof` at run time.
/// - `mod` with a double operand truncates with `CAST(… AS INTEGER)`, which saturates in every version
///   (3.15's `%` on reals beyond ±2^63 does not).
/// - AND/OR lists become balanced groups of at most ``groupSize`` terms, so neither the parser stack
///   nor the expression depth limit grows with the list's length.
/// - Every value is a bound parameter; identifiers are quoted.
struct SQLCompiler {
    static let groupSize = 16

    let schema: TableSchema
    let hasFunctions: Bool
    let variableLimit: Int

    init(schema: TableSchema, hasFunctions: Bool, variableLimit: Int) {
        self.schema = schema
        self.hasFunctions = hasFunctions
        self.variableLimit = variableLimit
    }

    // MARK: Whole statements

    /// `SELECT <projection> FROM t WHERE … ORDER BY … LIMIT … OFFSET …`.
    static func select(
        _ q: ResolvedQuery, table: String, columns: [Int], hasFunctions: Bool, variableLimit: Int
    ) throws -> Fragment {
        let c = SQLCompiler(schema: q.schema, hasFunctions: hasFunctions, variableLimit: variableLimit)
        // `select: []` on a table without `version` projects nothing: rows still count, items are empty.
        let list = columns.isEmpty ? "1" : columns.map { SQLNames.quote(q.schema.columns[$0].name) }.joined(separator: ", ")
        let f: Fragment = "SELECT \(raw: list) FROM \(raw: SQLNames.quote(table))\(try c.whereClause(q.predicate))\(raw: c.orderBy(q))\(c.limit(q))"
        return try c.checked(f)
    }

    /// `SELECT count(*) FROM t WHERE …`.
    static func count(_ q: ResolvedQuery, table: String, hasFunctions: Bool, variableLimit: Int) throws -> Fragment {
        let c = SQLCompiler(schema: q.schema, hasFunctions: hasFunctions, variableLimit: variableLimit)
        return try c.checked("SELECT count(*) FROM \(raw: SQLNames.quote(table))\(try c.whereClause(q.predicate))")
    }

    /// Deletes exactly the rows `q` selects (order, skip and top honoured).
    static func delete(_ q: ResolvedQuery, table: String, hasFunctions: Bool, variableLimit: Int) throws -> Fragment {
        let c = SQLCompiler(schema: q.schema, hasFunctions: hasFunctions, variableLimit: variableLimit)
        let t = SQLNames.quote(table)
        let whereClause = try c.whereClause(q.predicate)
        if q.top == nil && q.skip == 0 { return try c.checked("DELETE FROM \(raw: t)\(whereClause)") }
        let id = SQLNames.quote(q.schema.columns[q.schema.idIndex].name)
        return try c.checked(
            "DELETE FROM \(raw: t) WHERE \(raw: id) IN (SELECT \(raw: id) FROM \(raw: t)\(whereClause)\(raw: c.orderBy(q))\(c.limit(q)))")
    }

    private func checked(_ f: Fragment) throws -> Fragment {
        if f.arguments.count > variableLimit { throw NeedsFallback() }
        return f
    }

    private func whereClause(_ p: ResolvedPredicate) throws -> Fragment {
        if case .constant(true) = p { return "" }
        return " WHERE \(try predicate(p))"
    }

    private func orderBy(_ q: ResolvedQuery) -> String {
        let keys = q.sort.map { key -> String in
            let column = q.schema.columns[key.column]
            var s = SQLNames.quote(column.name)
            if column.type == .string { s += key.noCase ? " COLLATE NOCASE" : " COLLATE BINARY" }
            // SQLite sorts NULL first ascending and last descending: the core's order.
            if key.descending { s += " DESC" }
            return s
        }
        return keys.isEmpty ? "" : " ORDER BY " + keys.joined(separator: ", ")
    }

    private func limit(_ q: ResolvedQuery) -> Fragment {
        guard q.top != nil || q.skip > 0 else { return "" }
        let top = q.top.map { Int64($0) } ?? -1
        return " LIMIT \(Fragment.parameter(.int(top))) OFFSET \(Fragment.parameter(.int(Int64(q.skip))))"
    }

    // MARK: Predicates

    /// SQL that is true exactly when `p` matches (NULL or 0 otherwise). The text is safe as an operand
    /// of AND, OR and NOT without further parentheses.
    func predicate(_ p: ResolvedPredicate) throws -> Fragment {
        switch p {
        case .constant(let b): return b ? "1" : "0"
        case .and(let ps): return try group(ps.map(predicate), "AND")
        case .or(let ps): return try group(ps.map(predicate), "OR")
        case .not(let inner): return "NOT (\(try predicate(inner))) IS 1"
        case .isNull(let e): return "\(try expression(e)) IS NULL"
        case .isNotNull(let e): return "\(try expression(e)) IS NOT NULL"
        case .compare(let l, let op, let r, let noCase): return try compare(l, op, r, noCase: noCase)
        case .in(let e, let values, let noCase): return try membership(e, values, noCase: noCase)
        case .string(let op, let s, let pattern, let noCase):
            guard hasFunctions else { throw NeedsFallback() }
            let name: String
            switch op {
            case .startsWith: name = "localstore_starts"
            case .endsWith: name = "localstore_ends"
            case .contains: name = "localstore_contains"
            }
            return "\(raw: name)(\(try text(s)), \(try text(pattern)), \(raw: noCase ? "1" : "0"))"
        }
    }

    /// `(a AND b AND …)` in groups of at most ``groupSize``, nested into a balanced tree.
    private func group(_ terms: [Fragment], _ op: String) -> Fragment {
        var parts = terms
        if parts.isEmpty { return op == "AND" ? "1" : "0" }
        repeat {
            parts = stride(from: 0, to: parts.count, by: SQLCompiler.groupSize).map { start in
                let members = Array(parts[start..<min(start + SQLCompiler.groupSize, parts.count)])
                return "(\(Fragment.joined(members, separator: " \(op) ")))"
            }
        } while parts.count > 1
        return parts[0]
    }

    private static func sqlOperator(_ op: QueryPredicate.ComparisonOperator) -> String {
        switch op {
        case .equal: return "="
        case .notEqual: return "<>"
        case .less: return "<"
        case .lessOrEqual: return "<="
        case .greater: return ">"
        case .greaterOrEqual: return ">="
        }
    }

    /// Whether `e` may evaluate to a double: every double expression, and integer arithmetic, which
    /// falls back to double on overflow (`mod` only when an operand may be a double).
    static func mayBeDouble(_ e: ResolvedExpression) -> Bool {
        switch e {
        case .arithmetic(let op, let l, let r, let type):
            if type == .double { return true }
            return op != .modulo || mayBeDouble(l) || mayBeDouble(r)
        case .function(let f, let args, let type):
            if type == .double { return true }
            // round/floor/ceiling keep their argument's value kind; the others give integers or strings.
            return (f == .round || f == .floor || f == .ceiling) && mayBeDouble(args[0])
        default:
            return e.type == .double
        }
    }

    private func compare(
        _ l: ResolvedExpression, _ op: QueryPredicate.ComparisonOperator, _ r: ResolvedExpression, noCase: Bool
    ) throws -> Fragment {
        let sop = SQLCompiler.sqlOperator(op)
        let a = try expression(l)
        let b = try expression(r)
        switch (l.type, r.type) {
        case (.string, .string):
            return "\(a) COLLATE \(raw: noCase ? "NOCASE" : "BINARY") \(raw: sop) \(b)"
        case (.integer, .double):
            return "CAST(\(a) AS REAL) \(raw: sop) \(b)"
        case (.double, .integer):
            return "\(a) \(raw: sop) CAST(\(b) AS REAL)"
        case (.integer, .integer) where SQLCompiler.mayBeDouble(l) || SQLCompiler.mayBeDouble(r):
            // The core compares two integers exactly and anything else via double.
            return """
                CASE WHEN typeof(\(a)) = 'integer' AND typeof(\(b)) = 'integer' THEN \(a) \(raw: sop) \(b) \
                ELSE CAST(\(a) AS REAL) \(raw: sop) CAST(\(b) AS REAL) END
                """
        default:
            return "\(a) \(raw: sop) \(b)"
        }
    }

    private func membership(_ e: ResolvedExpression, _ values: [Value], noCase: Bool) throws -> Fragment {
        if values.isEmpty { return "0" }
        if values.count > variableLimit { throw NeedsFallback() }
        switch e.type {
        case .string:
            return "\(try expression(e)) COLLATE \(raw: noCase ? "NOCASE" : "BINARY") IN (\(Fragment.list(values)))"
        case .integer where !SQLCompiler.mayBeDouble(e):
            let x = try expression(e)
            let ints = values.filter { $0.intValue != nil }
            let doubles = values.filter { $0.intValue == nil }
            var parts: [Fragment] = []
            if !ints.isEmpty { parts.append("\(x) IN (\(Fragment.list(ints)))") }
            if !doubles.isEmpty { parts.append("CAST(\(x) AS REAL) IN (\(Fragment.list(doubles)))") }
            return parts.count == 1 ? parts[0] : "(\(Fragment.joined(parts, separator: " OR ")))"
        case .double:
            // The core compares a double with an integer via double: bind the integers as doubles.
            let converted = values.map { v -> Value in v.intValue.map { .double(Double($0)) } ?? v }
            return "\(try expression(e)) IN (\(Fragment.list(converted)))"
        case .integer:
            // An integer expression that may be a double at run time: one comparison per value.
            let terms = try values.map { v in
                try compare(e, .equal, .literal(v, v.intValue != nil ? .integer : .double), noCase: false)
            }
            return group(terms, "OR")
        default:
            return "\(try expression(e)) IN (\(Fragment.list(values)))"
        }
    }

    // MARK: Expressions

    /// The largest SQL text of an operand that a rounding function repeats; past it the query is
    /// evaluated in Swift (each rounding repeats its operand, so nesting them multiplies the text).
    static let maximumRepeatedOperand = 50_000

    /// `floor(x)` of a REAL as an INTEGER, exactly, or NULL when |x| ≥ 9·10^18 (beyond the core's
    /// date range). `CAST(x AS INTEGER)` truncates; a truncation above `x` is one too high.
    static func floorToInteger(_ x: Fragment) -> Fragment {
        "(CASE WHEN \(x) >= 9.0e18 OR \(x) <= -9.0e18 THEN NULL ELSE CAST(\(x) AS INTEGER) - (\(x) < CAST(\(x) AS INTEGER)) END)"
    }

    /// `round`, `floor`, `ceiling` in SQL (SQLite 3.15 has no floor or ceiling, and its `round` adds
    /// 0.5, which is wrong for 0.49999999999999994): an integer stays as it is; a double of magnitude
    /// ≥ 2^52 is already whole; any other double is split into its truncation `t` (exact) and the
    /// exact remainder `x - t`, which decides the step. The result is REAL, as the core's.
    private func rounding(_ f: QueryFunction, _ arg: ResolvedExpression) throws -> Fragment {
        let x = try expression(arg)
        if arg.type == .integer && !SQLCompiler.mayBeDouble(arg) { return x }
        if x.sql.utf8.count > SQLCompiler.maximumRepeatedOperand { throw NeedsFallback() }
        let t: Fragment = "CAST(\(x) AS INTEGER)"
        let step: Fragment
        switch f {
        case .floor: step = "(CASE WHEN \(x) < \(t) THEN -1 ELSE 0 END)"
        case .ceiling: step = "(CASE WHEN \(x) > \(t) THEN 1 ELSE 0 END)"
        default: step = "(CASE WHEN \(x) - \(t) >= 0.5 THEN 1 WHEN \(x) - \(t) <= -0.5 THEN -1 ELSE 0 END)"
        }
        let double: Fragment = "(CASE WHEN abs(\(x)) >= 4503599627370496.0 THEN \(x) ELSE CAST(\(t) + \(step) AS REAL) END)"
        if arg.type == .double { return double }
        // Integer arithmetic that may have overflowed into a double.
        return "(CASE WHEN typeof(\(x)) = 'integer' THEN \(x) ELSE \(double) END)"
    }

    /// SQL for a string argument (of a string function or test): a string expression as it is; a
    /// boolean (stored as 0 or 1) as `'True'` or `'False'`; a number through `localstore_text`, the core's
    /// text of an integer or double (SQLite's own `CAST(x AS TEXT)` writes doubles with 15 digits, and
    /// differently across versions). Null stays null.
    func text(_ e: ResolvedExpression) throws -> Fragment {
        let x = try expression(e)
        switch e.type {
        case .string:
            return x
        case .boolean:
            return "(CASE \(x) WHEN 1 THEN 'True' WHEN 0 THEN 'False' END)"
        default:
            guard hasFunctions else { throw NeedsFallback() }
            return "localstore_text(\(x))"
        }
    }

    /// SQL for a value expression, self-delimited (a name, a parameter, a call or parenthesized).
    func expression(_ e: ResolvedExpression) throws -> Fragment {
        switch e {
        case .column(let n, _, _):
            return "\(raw: SQLNames.quote(schema.columns[n].name))"
        case .literal(let v, _):
            return .parameter(v)
        case .toLower(let inner):
            guard hasFunctions else { throw NeedsFallback() }
            return "localstore_lower(\(try text(inner)))"
        case .toUpper(let inner):
            guard hasFunctions else { throw NeedsFallback() }
            return "localstore_upper(\(try text(inner)))"
        case .length(let inner):
            guard hasFunctions else { throw NeedsFallback() }
            return "localstore_length(\(try text(inner)))"
        case .function(let f, let args, _):
            switch f {
            case .round, .floor, .ceiling:
                return try rounding(f, args[0])
            case .year, .month, .day, .hour, .minute, .second:
                // Dates are stored as seconds since 2001 (REAL): pass their exact floor as an integer.
                guard hasFunctions else { throw NeedsFallback() }
                return "localstore_call('\(raw: f.rawValue)', \(SQLCompiler.floorToInteger(try expression(args[0]))))"
            case .indexOf, .concat, .replace, .substring, .trim:
                // SQLite's instr/substr/replace/trim stop at a NUL byte and differ in their edge cases:
                // the registered function runs the core's implementation.
                guard hasFunctions else { throw NeedsFallback() }
                // The string arguments (all but substring's positions) are read as text.
                let list = try args.enumerated().map { n, arg in f == .substring && n > 0 ? try expression(arg) : try text(arg) }
                return "localstore_call('\(raw: f.rawValue)', \(Fragment.joined(list, separator: ", ")))"
            }
        case .arithmetic(let op, let l, let r, _):
            let a = try expression(l)
            let b = try expression(r)
            switch op {
            case .add: return "(\(a) + \(b))"
            case .subtract: return "(\(a) - \(b))"
            case .multiply: return "(\(a) * \(b))"
            case .divide: return "(\(a) / \(b))"
            case .modulo:
                let real: Fragment = "CAST((CAST(\(a) AS INTEGER) % CAST(\(b) AS INTEGER)) AS REAL)"
                if l.type == .double || r.type == .double { return real }
                if !SQLCompiler.mayBeDouble(l) && !SQLCompiler.mayBeDouble(r) { return "(\(a) % \(b))" }
                return "(CASE WHEN typeof(\(a)) = 'integer' AND typeof(\(b)) = 'integer' THEN (\(a) % \(b)) ELSE \(real) END)"
            }
        }
    }
}
