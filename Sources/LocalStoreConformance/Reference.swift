import Foundation
import LocalStore

/// The suite's reference evaluator (oracle): the documented query rules of `docs/semantics.md`,
/// re-implemented plainly over raw rows.
///
/// It deliberately shares no code with `ResolvedQuery` or `Collation`: a backend's results are
/// compared against this, so a bug in the shared core shows up as a disagreement. It assumes the
/// query is valid (invalid queries are checked separately, against hand-written error codes).
enum Reference {
    /// A row: every column under its defined name.
    typealias Row = [String: Value]

    /// A table's columns and rows.
    struct Table {
        let columns: [(name: String, type: ColumnType)]
        let rows: [Row]

        init(schema: TableSchema, rows: [Row]) {
            self.columns = schema.columns.map { ($0.name, $0.type) }
            self.rows = rows
        }

        /// The defined name and type of the column called `name` in any ASCII case.
        func column(_ name: String) throws -> (name: String, type: ColumnType) {
            let wanted = Reference.lowerASCII(name)
            guard let c = columns.first(where: { Reference.lowerASCII($0.name) == wanted }) else {
                throw ConformanceFailure("suite bug: the reference table has no column '\(name)'")
            }
            return c
        }

        /// Whether `e` is the table's string `id` column itself.
        func isStringId(_ e: QueryExpression) -> Bool {
            guard case .field(let name) = e, let c = try? column(name) else { return false }
            return Reference.lowerASCII(c.name) == "id" && c.type == .string
        }
    }

    // MARK: Text rules

    static func lowerByte(_ b: UInt8) -> UInt8 { (65...90).contains(b) ? b + 32 : b }
    static func upperByte(_ b: UInt8) -> UInt8 { (97...122).contains(b) ? b - 32 : b }

    /// ASCII lower-casing (SQLite's `lower()` without ICU).
    static func lowerASCII(_ s: String) -> String { String(decoding: s.utf8.map(lowerByte), as: UTF8.self) }
    /// ASCII upper-casing (SQLite's `upper()` without ICU).
    static func upperASCII(_ s: String) -> String { String(decoding: s.utf8.map(upperByte), as: UTF8.self) }

    /// SQLite's NOCASE as documented: bytes compared after ASCII lower-casing over the shorter
    /// length; a NUL byte (in both, since the bytes are equal) ends the comparison; equal prefixes are
    /// ordered by byte length. Returns -1, 0 or 1.
    static func compareNoCase(_ a: String, _ b: String) -> Int {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        for i in 0..<min(x.count, y.count) {
            let p = lowerByte(x[i])
            let q = lowerByte(y[i])
            if p != q { return p < q ? -1 : 1 }
            if p == 0 { break }
        }
        return x.count < y.count ? -1 : (x.count == y.count ? 0 : 1)
    }

    /// Plain byte order of the UTF-8 encodings.
    static func compareBytes(_ a: String, _ b: String) -> Int {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        if x == y { return 0 }
        return x.lexicographicallyPrecedes(y) ? -1 : 1
    }

    // MARK: Values

    static func order<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a == b ? 0 : 1) }

    /// Compares two non-null values of compatible types: numbers numerically (an integer meeting a
    /// double becomes a double), strings by bytes or NOCASE, `false < true`, dates chronologically,
    /// binary by bytes then length. Null sorts first.
    static func compare(_ a: Value, _ b: Value, noCase: Bool) -> Int {
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case (.int(let x), .int(let y)): return order(x, y)
        case (.int(let x), .double(let y)): return order(Double(x), y)
        case (.double(let x), .int(let y)): return order(x, Double(y))
        case (.double(let x), .double(let y)): return order(x, y)
        case (.string(let x), .string(let y)): return noCase ? compareNoCase(x, y) : compareBytes(x, y)
        case (.bool(let x), .bool(let y)): return order(x ? 1 : 0, y ? 1 : 0)
        case (.date(let x), .date(let y)): return order(x.timeIntervalSinceReferenceDate, y.timeIntervalSinceReferenceDate)
        case (.binary(let x), .binary(let y)): return x == y ? 0 : (x.lexicographicallyPrecedes(y) ? -1 : 1)
        default: return 2  // incomparable: never equal, never ordered
        }
    }

    // MARK: Expressions

    static func evaluate(_ e: QueryExpression, _ row: Row, _ table: Table) throws -> Value {
        switch e {
        case .field(let name): return row[try table.column(name).name] ?? .null
        case .literal(let v): return v
        case .dateOnly(let d): return .date(d)
        case .toLower(let inner):
            if let s = text(try evaluate(inner, row, table)) { return .string(lowerASCII(s)) }
            return .null
        case .toUpper(let inner):
            if let s = text(try evaluate(inner, row, table)) { return .string(upperASCII(s)) }
            return .null
        case .length(let inner):
            if let s = text(try evaluate(inner, row, table)) { return .int(Int64(s.unicodeScalars.count)) }
            return .null
        case .arithmetic(let op, let l, let r):
            return arithmetic(op, try evaluate(l, row, table), try evaluate(r, row, table))
        case .function(let f, let args):
            return function(f, try args.map { try evaluate($0, row, table) })
        }
    }

    // MARK: Text of numbers and booleans

    /// What the string functions read from a value: a string; an integer in decimal; a boolean `True` or
    /// `False`; a double as .NET's invariant `ToString()` writes it (``dotNet(_:)``). `nil` otherwise.
    static func text(_ v: Value) -> String? {
        switch v {
        case .string(let s): return s
        case .int(let i): return "\(i)"
        case .bool(let b): return b ? "True" : "False"
        case .double(let d): return dotNet(d)
        default: return nil
        }
    }

    /// .NET Core's `Double.ToString(CultureInfo.InvariantCulture)`, derived on its own: the fewest
    /// significant digits `%.*e` needs to read back as the same double, written positionally when the
    /// decimal exponent `e` is in -4 ..< max(15, digits), else as `d.dddE±XX`.
    static func dotNet(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        let sign = d.sign == .minus ? "-" : ""
        if d == 0 { return sign + "0" }
        for precision in 1...17 {
            let s = String(format: "%.\(precision - 1)e", d.magnitude)
            guard Double(s) == d.magnitude else { continue }
            let parts = s.split(separator: "e")
            var digits = Array(parts[0].filter { $0 != "." })
            while digits.count > 1 && digits.last == "0" { digits.removeLast() }
            guard let e = Int(parts[1]) else { break }
            if e >= -4 && e < Swift.max(15, digits.count) {
                if e < 0 { return sign + "0." + String(repeating: "0", count: -e - 1) + String(digits) }
                if digits.count <= e + 1 { return sign + String(digits) + String(repeating: "0", count: e + 1 - digits.count) }
                return sign + String(digits[0...e]) + "." + String(digits[(e + 1)...])
            }
            let fraction = digits.count > 1 ? "." + String(digits[1...]) : ""
            return sign + String(digits[0]) + fraction + "E" + (e < 0 ? "-" : "+") + (abs(e) < 10 ? "0" : "") + "\(abs(e))"
        }
        return "suite bug: no digits for \(d)"
    }

    // MARK: OData functions (an implementation of their own, over arrays of Unicode scalars)

    static func function(_ f: QueryFunction, _ args: [Value]) -> Value {
        if args.contains(where: \.isNull) { return .null }
        func text(_ n: Int) -> [Unicode.Scalar] {
            if let s = Reference.text(args[n]) { return Array(s.unicodeScalars) }
            return []
        }
        func string(_ scalars: [Unicode.Scalar]) -> Value {
            var s = ""
            s.unicodeScalars.append(contentsOf: scalars)
            return .string(s)
        }
        switch f {
        case .indexOf:
            let s = text(0)
            let p = text(1)
            if p.isEmpty { return .int(0) }
            if p.count > s.count { return .int(-1) }
            for start in 0...(s.count - p.count) where Array(s[start..<(start + p.count)]) == p { return .int(Int64(start)) }
            return .int(-1)
        case .concat:
            return string(text(0) + text(1))
        case .replace:
            let s = text(0)
            let find = text(1)
            let with = text(2)
            if find.isEmpty { return string(s) }
            var out: [Unicode.Scalar] = []
            var i = 0
            while i < s.count {
                if i + find.count <= s.count && Array(s[i..<(i + find.count)]) == find {
                    out += with
                    i += find.count
                } else {
                    out.append(s[i])
                    i += 1
                }
            }
            return string(out)
        case .substring:
            let s = text(0)
            let start = truncatedInteger(args[1])
            // The window start ..< start + length, in exact (wide) arithmetic, intersected with the string.
            let from = Int128(start)
            var to = Int128(s.count)
            if args.count == 3 {
                let length = truncatedInteger(args[2])
                if length <= 0 { return .string("") }
                to = Swift.min(to, Int128(start) + Int128(length))
            }
            var out: [Unicode.Scalar] = []
            for (n, c) in s.enumerated() where Int128(n) >= from && Int128(n) < to { out.append(c) }
            return string(out)
        case .trim:
            var s = text(0)[...]
            while s.first == " " { s = s.dropFirst() }
            while s.last == " " { s = s.dropLast() }
            return string(Array(s))
        case .year, .month, .day, .hour, .minute, .second:
            guard case .date(let d) = args[0] else { return .null }
            return civil(d).map { fields in
                switch f {
                case .year: return .int(fields.year)
                case .month: return .int(fields.month)
                case .day: return .int(fields.day)
                case .hour: return .int(fields.hour)
                case .minute: return .int(fields.minute)
                default: return .int(fields.second)
                }
            } ?? .null
        case .round, .floor, .ceiling:
            guard case .double(let x) = args[0] else { return args[0] }  // an integer is already whole
            if x.isInfinite { return args[0] }  // so is an infinity (from overflowing arithmetic)
            let whole = x.magnitude - x.magnitude.truncatingRemainder(dividingBy: 1)  // |x| truncated, exact
            let fraction = x.magnitude - whole
            var magnitude = whole
            switch f {
            case .round: if fraction >= 0.5 { magnitude += 1 }
            case .floor: if x < 0 && fraction > 0 { magnitude += 1 }
            default: if x > 0 && fraction > 0 { magnitude += 1 }
            }
            return .double(x < 0 ? -magnitude : magnitude)
        }
    }

    static func isLeapYear(_ y: Int64) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    /// The UTC calendar fields of `d` rounded down to the whole second, proleptic Gregorian, counted
    /// from 2001-01-01 (the start of a 400-year cycle) by whole cycles, then years, then months.
    static func civil(_ d: Date) -> (year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64)? {
        let t = d.timeIntervalSinceReferenceDate
        var whole = t.rounded(.towardZero)
        if whole > t { whole -= 1 }
        guard whole.magnitude < 9e18 else { return nil }
        let seconds = Int64(whole)
        var days = seconds / 86_400
        var rest = seconds - days * 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let cycleDays: Int64 = 146_097
        var cycles = days / cycleDays
        if days - cycles * cycleDays < 0 { cycles -= 1 }
        var dayInCycle = days - cycles * cycleDays
        var year = 2001 + cycles * 400
        while true {
            let length: Int64 = isLeapYear(year) ? 366 : 365
            if dayInCycle < length { break }
            dayInCycle -= length
            year += 1
        }
        let lengths: [Int64] = [31, isLeapYear(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        var month: Int64 = 1
        for length in lengths {
            if dayInCycle < length { break }
            dayInCycle -= length
            month += 1
        }
        return (year, month, dayInCycle + 1, rest / 3600, (rest % 3600) / 60, rest % 60)
    }

    /// A double result, or null for NaN.
    static func real(_ d: Double) -> Value { d.isNaN ? .null : .double(d) }

    /// SQLite's conversion of a number to an integer: truncation toward zero, saturating.
    static func truncatedInteger(_ v: Value) -> Int64 {
        switch v {
        case .int(let i): return i
        case .double(let d):
            if d.isNaN { return 0 }
            if d >= 9_223_372_036_854_775_808.0 { return Int64.max }
            if d <= -9_223_372_036_854_775_808.0 { return Int64.min }
            return Int64(d.rounded(.towardZero))
        default: return 0
        }
    }

    static func arithmetic(_ op: QueryExpression.ArithmeticOperator, _ a: Value, _ b: Value) -> Value {
        if case .int(let x) = a, case .int(let y) = b {
            switch op {
            case .add:
                let (r, overflow) = x.addingReportingOverflow(y)
                return overflow ? real(Double(x) + Double(y)) : .int(r)
            case .subtract:
                let (r, overflow) = x.subtractingReportingOverflow(y)
                return overflow ? real(Double(x) - Double(y)) : .int(r)
            case .multiply:
                let (r, overflow) = x.multipliedReportingOverflow(by: y)
                return overflow ? real(Double(x) * Double(y)) : .int(r)
            case .divide:
                if y == 0 { return .null }
                if x == Int64.min && y == -1 { return real(-Double(x)) }  // the only overflowing division
                return .int(x / y)  // Swift truncates toward zero
            case .modulo:
                if y == 0 { return .null }
                if y == -1 { return .int(0) }
                return .int(x % y)  // sign of the dividend, as C
            }
        }
        let x: Double
        let y: Double
        switch (a, b) {
        case (.int(let p), .double(let q)): (x, y) = (Double(p), q)
        case (.double(let p), .int(let q)): (x, y) = (p, Double(q))
        case (.double(let p), .double(let q)): (x, y) = (p, q)
        default: return .null
        }
        switch op {
        case .add: return real(x + y)
        case .subtract: return real(x - y)
        case .multiply: return real(x * y)
        case .divide: return y == 0 ? .null : real(x / y)
        case .modulo:
            let i = truncatedInteger(a)
            let j = truncatedInteger(b)
            if j == 0 { return .null }
            if j == -1 { return .double(0) }
            return real(Double(i % j))
        }
    }

    // MARK: Predicates

    static func isNullLiteral(_ e: QueryExpression) -> Bool {
        if case .literal(.null) = e { return true }
        return false
    }

    static func matches(_ p: QueryPredicate, _ row: Row, _ table: Table) throws -> Bool {
        switch p {
        case .true: return true
        case .false: return false
        case .and(let ps):
            for q in ps where !(try matches(q, row, table)) { return false }
            return true
        case .or(let ps):
            for q in ps where try matches(q, row, table) { return true }
            return false
        case .not(let q): return !(try matches(q, row, table))
        case .isNull(let e): return try evaluate(e, row, table).isNull
        case .isNotNull(let e): return !(try evaluate(e, row, table).isNull)
        case .compare(let l, let op, let r, let caseInsensitive):
            if isNullLiteral(l) || isNullLiteral(r) {
                let other = isNullLiteral(l) ? r : l
                switch op {
                case .equal: return try evaluate(other, row, table).isNull
                case .notEqual: return !(try evaluate(other, row, table).isNull)
                default: return false
                }
            }
            let a = try evaluate(l, row, table)
            let b = try evaluate(r, row, table)
            if a.isNull || b.isNull { return false }
            let c = compare(a, b, noCase: caseInsensitive || table.isStringId(l) || table.isStringId(r))
            if c == 2 { return false }
            switch op {
            case .equal: return c == 0
            case .notEqual: return c != 0
            case .less: return c < 0
            case .lessOrEqual: return c <= 0
            case .greater: return c > 0
            case .greaterOrEqual: return c >= 0
            }
        case .in(let e, let list):
            let a = try evaluate(e, row, table)
            if a.isNull { return false }
            let noCase = table.isStringId(e)
            return list.contains { !$0.isNull && compare(a, $0, noCase: noCase) == 0 }
        case .between(let e, let low, let high):
            if low.isNull || high.isNull { return false }
            let a = try evaluate(e, row, table)
            if a.isNull { return false }
            let noCase = table.isStringId(e)
            let lo = compare(low, a, noCase: noCase)
            let hi = compare(a, high, noCase: noCase)
            return lo != 2 && hi != 2 && lo <= 0 && hi <= 0
        case .string(let op, let subject, let pattern, let caseInsensitive):
            guard var s = text(try evaluate(subject, row, table)), var t = text(try evaluate(pattern, row, table)) else {
                return false
            }
            if caseInsensitive || table.isStringId(subject) {
                s = lowerASCII(s)
                t = lowerASCII(t)
            }
            let hay = Array(s.utf8)
            let needle = Array(t.utf8)
            switch op {
            case .startsWith: return hay.count >= needle.count && Array(hay[..<needle.count]) == needle
            case .endsWith: return hay.count >= needle.count && Array(hay[(hay.count - needle.count)...]) == needle
            case .contains:
                if needle.isEmpty { return true }
                if needle.count > hay.count { return false }
                for start in 0...(hay.count - needle.count) where Array(hay[start..<(start + needle.count)]) == needle {
                    return true
                }
                return false
            }
        }
    }

    // MARK: Queries

    /// The rows `predicate` selects, sorted by `sort` then by `id` (unless `id` is a key), after
    /// `skip` and `top`.
    static func select(_ table: Table, where predicate: QueryPredicate?, sort: [SortKey], skip: Int = 0, top: Int? = nil) throws -> [Row] {
        var keys: [(column: String, descending: Bool, noCase: Bool)] = []
        for key in sort {
            let c = try table.column(key.field)
            keys.append((c.name, key.direction == .descending, table.isStringId(.field(c.name))))
        }
        let id = try table.column("id")
        if !keys.contains(where: { $0.column == id.name }) {
            keys.append((id.name, false, id.type == .string))
        }
        var matched: [Row] = []
        for row in table.rows where try predicate.map({ try matches($0, row, table) }) ?? true {
            matched.append(row)
        }
        matched.sort { a, b in
            for key in keys {
                let c = compare(a[key.column] ?? .null, b[key.column] ?? .null, noCase: key.noCase)
                if c != 0 { return key.descending ? c > 0 : c < 0 }
            }
            return false
        }
        let rest = matched.dropFirst(skip)
        return Array(top.map { rest.prefix($0) } ?? rest)
    }
}
