import Foundation

extension OData {
    /// Parses an OData query string (`$filter=…&$orderby=…&$top=…`, values percent-encoded or not) into a
    /// ``Query`` on `table`. Accepts what ``OData/queryString(for:dialect:)`` renders in `dialect`, so
    /// render → parse → render gives the same text, plus what other clients write: bare boolean fields
    /// (`done`), `startswith(…) eq true`-style tests, GUIDs (`guid'…'` in v3, bare or
    /// `cast(…,Edm.Guid)` in v4: the lower-case canonical string). ``ODataDialect/v3`` also accepts the
    /// v4 forms; ``ODataDialect/v4`` refuses the v3-only ones (``ODataDialect`` lists both). Errors are
    /// `invalidQuery` and give the position of the fault; an unknown function is named as unknown.
    ///
    /// - Parameters:
    ///   - queryString: The query string, without the `?`.
    ///   - table: The table the query reads.
    ///   - dialect: The OData version the text is written in.
    public static func parseQuery(_ queryString: String, table: String, dialect: ODataDialect = .v3) throws -> Query {
        var query = Query(table)
        guard !queryString.isEmpty else { return query }
        // Split on the bytes `&` and `=`, not on Characters (`&` and a combining mark are one Character).
        for part in queryString.unicodeScalars.split(separator: "&", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(String.UnicodeScalarView(pieces[0]))
            let raw = pieces.count > 1 ? String(String.UnicodeScalarView(pieces[1])) : ""
            let value = raw.removingPercentEncoding ?? raw
            switch name {
            case "$filter": query.predicate = try parseFilter(value, dialect: dialect)
            case "$orderby": query.sort = try parseOrderBy(value)
            case "$skip": query.skip = try parseCount(value, name)
            case "$top": query.top = try parseCount(value, name)
            case "$select":
                let names = value.isEmpty ? [] : value.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
                // Rendered as `a,b`: anything else (an empty name, spaces) would not render back the same.
                guard names.allSatisfy({ !$0.isEmpty && Identifier.isValid($0) }) else {
                    throw LocalStoreError(.invalidQuery, "$select must list column names separated by ',', not '\(value)'")
                }
                query.select = names
            case "$inlinecount":
                guard dialect != .v4 else {
                    throw LocalStoreError(.invalidQuery, "$inlinecount=\(value) is OData v3; OData v4 writes $count=true")
                }
                guard value == "allpages" || value == "none" else {
                    throw LocalStoreError(.invalidQuery, "$inlinecount must be allpages or none, not '\(value)'")
                }
                query.includeTotalCount = value == "allpages"
            case "$count":
                guard value == "true" || value == "false" else {
                    throw LocalStoreError(.invalidQuery, "$count must be true or false, not '\(value)'")
                }
                query.includeTotalCount = value == "true"
            default:
                throw LocalStoreError(.invalidQuery, "unknown query option '\(name)'")
            }
        }
        return query
    }

    static func parseCount(_ text: String, _ name: String) throws -> Int {
        guard let n = Int(text), n >= 0 else {
            throw LocalStoreError(.invalidQuery, "\(name) must be a whole number ≥ 0, not '\(text)'")
        }
        return n
    }

    /// Parses an `$orderby` value: `field [asc|desc], …` (the same in both dialects).
    public static func parseOrderBy(_ text: String) throws -> [SortKey] {
        try text.split(separator: ",").map { part in
            let words = part.split(separator: " ", omittingEmptySubsequences: true)
            guard let field = words.first, words.count <= 2 else {
                throw LocalStoreError(.invalidQuery, "bad $orderby item '\(part)'")
            }
            switch words.count == 2 ? words[1].lowercased() : "asc" {
            case "asc": return SortKey(String(field), .ascending)
            case "desc": return SortKey(String(field), .descending)
            default: throw LocalStoreError(.invalidQuery, "bad $orderby direction in '\(part)'")
            }
        }
    }

    /// Parses a `$filter` expression written in `dialect` (``ODataDialect`` lists the forms of each).
    ///
    /// Bounded for any input: at most 100,000 values (literals, fields, calls, the members of an `in`
    /// list) and 1,000 arithmetic operators, parentheses nested at most 269 deep (checked by a scan
    /// before parsing, so deeper text never reaches the recursive descent), `not`s up to the same parser
    /// depth; past a limit, `invalidQuery`. `and`/`or` chains and `in` lists of any length are kept flat.
    /// Parsing is linear in the text's length (docs/semantics.md, "Pull query strings").
    ///
    /// - Parameters:
    ///   - text: The `$filter` value, not percent-encoded.
    ///   - dialect: The OData version the text is written in.
    public static func parseFilter(_ text: String, dialect: ODataDialect = .v3) throws -> QueryPredicate {
        var parser = FilterParser(text: text, dialect: dialect)
        try parser.checkNesting()
        let node = try parser.parseOr()
        parser.skipSpaces()
        guard parser.atEnd else { throw parser.fail("unexpected text") }
        return try parser.predicate(node)
    }
}

private indirect enum FilterNode {
    case literal(Value, position: Int)
    /// An `Edm.Date` (`cast(1994-10-14,Edm.Date)` or bare `1994-10-14`): its midnight UTC.
    case dateOnly(Date, position: Int)
    case identifier(String, position: Int)
    case call(String, [FilterNode], position: Int)
    case binary(String, FilterNode, FilterNode, position: Int)
    /// `subject in (v1,v2,…)`: the members are literals (`.literal` or `.dateOnly`), kept flat.
    case membership(FilterNode, [FilterNode], position: Int)
    /// Operands of one `and` or `or` chain written without parentheses, kept flat: a long chain builds
    /// no deep tree (whose conversion and destruction would recurse once per term).
    case chain(String, [FilterNode])
    case not(FilterNode)
    case paren(FilterNode)
}

private struct FilterParser {
    let bytes: [UInt8]
    let text: String
    let dialect: ODataDialect
    var index = 0
    var depth = 0
    /// Values (literals, fields, calls) parsed so far, against ``maximumTerms``.
    var terms = 0
    /// Arithmetic operators parsed so far, against ``maximumArithmeticOperators``.
    var arithmeticOperators = 0

    /// The most values (literals, field names, function calls) one `$filter` may hold: 100,000 (for
    /// example 50,000 `id eq '…'` terms). A longer filter is `invalidQuery` before it is parsed further,
    /// so parsing is linear in time and bounded in memory.
    static let maximumTerms = 100_000
    /// The most arithmetic operators (`add`, `sub`, `mul`, `div`, `mod`) one `$filter` may hold: they
    /// nest (a chain `a add b add c` is a tree as deep as it is long), so their number bounds the depth
    /// of what the parser builds.
    static let maximumArithmeticOperators = 1_000

    init(text: String, dialect: ODataDialect) {
        self.text = text
        self.dialect = dialect
        self.bytes = Array(text.utf8)
    }

    var atEnd: Bool { index >= bytes.count }

    func fail(_ what: String, at position: Int? = nil) -> LocalStoreError {
        let p = position ?? index
        return LocalStoreError(.invalidQuery, "invalid $filter at position \(p + 1): \(what)")
    }

    mutating func skipSpaces() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
    }

    static func isWordByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
    }

    /// The next word (letters, digits, _) without consuming it.
    func peekWord() -> String? {
        var j = index
        while j < bytes.count, FilterParser.isWordByte(bytes[j]) { j += 1 }
        return j > index ? String(decoding: bytes[index..<j], as: UTF8.self) : nil
    }

    mutating func consumeKeyword(_ words: [String]) -> String? {
        skipSpaces()
        guard let w = peekWord(), words.contains(w) else { return nil }
        index += w.utf8.count
        return w
    }

    /// Parser levels a query may use. The deepest rendering of one predicate level, `not (…)`, takes
    /// four (unary, unary, primary, or), so every query ``ResolvedQuery`` accepts (nesting up to
    /// ``ResolvedQuery/maximumDepth``) parses back; deeper text is refused before it can exhaust the stack.
    static let maximumDepth = 4 * (ResolvedQuery.maximumDepth + 1) + 4

    /// How deep parentheses may nest: as deep as the parser's levels allow (each parenthesis costs
    /// three of them), enough for every query ``ResolvedQuery`` accepts.
    static let maximumNesting = maximumDepth / 3

    /// Refuses text whose parentheses (outside string literals) nest deeper than ``maximumNesting``,
    /// with one pass over the bytes and no recursion.
    func checkNesting() throws {
        var open = 0
        var i = 0
        var inString = false
        while i < bytes.count {
            let b = bytes[i]
            if inString {
                if b == UInt8(ascii: "'") {
                    if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "'") { i += 1 } else { inString = false }
                }
            } else if b == UInt8(ascii: "'") {
                inString = true
            } else if b == UInt8(ascii: "(") {
                open += 1
                if open > FilterParser.maximumNesting {
                    throw fail("nested too deeply (more than \(FilterParser.maximumNesting) parentheses)", at: i)
                }
            } else if b == UInt8(ascii: ")") {
                open = max(0, open - 1)
            }
            i += 1
        }
    }

    mutating func enter() throws {
        depth += 1
        if depth > FilterParser.maximumDepth { throw fail("nested too deeply") }
    }

    mutating func parseOr() throws -> FilterNode {
        try enter()
        defer { depth -= 1 }
        var operands = [try parseAnd()]
        while consumeKeyword(["or"]) != nil { operands.append(try parseAnd()) }
        return operands.count == 1 ? operands[0] : .chain("or", operands)
    }

    mutating func parseAnd() throws -> FilterNode {
        var operands = [try parseUnary()]
        while consumeKeyword(["and"]) != nil { operands.append(try parseUnary()) }
        return operands.count == 1 ? operands[0] : .chain("and", operands)
    }

    mutating func countArithmetic() throws {
        arithmeticOperators += 1
        if arithmeticOperators > FilterParser.maximumArithmeticOperators {
            throw fail("more than \(FilterParser.maximumArithmeticOperators) arithmetic operators")
        }
    }

    mutating func parseUnary() throws -> FilterNode {
        try enter()
        defer { depth -= 1 }
        if consumeKeyword(["not"]) != nil { return .not(try parseUnary()) }
        return try parseComparison()
    }

    mutating func parseComparison() throws -> FilterNode {
        let left = try parseAdditive()
        let p = index
        if let op = consumeKeyword(["eq", "ne", "lt", "le", "gt", "ge"]) {
            return .binary(op, left, try parseAdditive(), position: p)
        }
        if consumeKeyword(["in"]) != nil { return try parseList(left, position: p) }
        return left
    }

    /// The list of `subject in (v1,v2,…)`, after `in`: literals separated by commas, read in a loop (a
    /// list of any length builds no deep tree; each member counts against ``maximumTerms``).
    mutating func parseList(_ subject: FilterNode, position p: Int) throws -> FilterNode {
        skipSpaces()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "(") else { throw fail("expected ( after in") }
        index += 1
        skipSpaces()
        if index < bytes.count, bytes[index] == UInt8(ascii: ")") { throw fail("an in list needs at least one value") }
        var members: [FilterNode] = []
        while true {
            skipSpaces()
            let memberStart = index
            let member = try parsePrimary()
            switch member {
            case .literal, .dateOnly: members.append(member)
            default: throw fail("an in list holds values (literals) only", at: memberStart)
            }
            skipSpaces()
            guard index < bytes.count else { throw fail("expected ) to close the in list") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: ")") {
                index += 1
                break
            }
            throw fail("expected , or ) in the in list")
        }
        return .membership(subject, members, position: p)
    }

    mutating func parseAdditive() throws -> FilterNode {
        var left = try parseMultiplicative()
        while true {
            let p = index
            guard let op = consumeKeyword(["add", "sub"]) else { return left }
            try countArithmetic()
            left = .binary(op, left, try parseMultiplicative(), position: p)
        }
    }

    mutating func parseMultiplicative() throws -> FilterNode {
        var left = try parsePrimary()
        while true {
            let p = index
            guard let op = consumeKeyword(["mul", "div", "mod"]) else { return left }
            try countArithmetic()
            left = .binary(op, left, try parsePrimary(), position: p)
        }
    }

    /// What ``parseAtom(_:)`` read: a whole value, or the name of a call whose `(` it consumed.
    enum Atom {
        case node(FilterNode)
        case call(String)
    }

    /// A value: a parenthesized condition, a literal, a field or a call. It recurses (through
    /// ``parseOr()``) once per level of parentheses and calls, so its frame is kept small: everything
    /// read without recursing is ``parseAtom(_:)``'s.
    mutating func parsePrimary() throws -> FilterNode {
        try enter()
        defer { depth -= 1 }
        terms += 1
        if terms > FilterParser.maximumTerms { throw tooManyValues() }
        skipSpaces()
        let start = index
        guard index < bytes.count else { throw fail("expected a value") }
        if bytes[index] == UInt8(ascii: "(") {
            index += 1
            let inner = try parseOr()
            skipSpaces()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ")") else { throw fail("expected )") }
            index += 1
            return .paren(inner)
        }
        switch try parseAtom(start) {
        case .node(let node): return node
        case .call(let name): return .call(name, try parseArguments(name), position: start)
        }
    }

    @inline(never)
    func tooManyValues() -> LocalStoreError { fail("more than \(FilterParser.maximumTerms) values") }

    /// The arguments of a call, after its `(`, up to and with its `)`.
    @inline(never)
    mutating func parseArguments(_ name: String) throws -> [FilterNode] {
        var args: [FilterNode] = []
        skipSpaces()
        if index < bytes.count, bytes[index] == UInt8(ascii: ")") {
            index += 1
            return args
        }
        while true {
            args.append(try parseOr())
            skipSpaces()
            guard index < bytes.count else { throw fail("expected ) to close \(name)(") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: ")") {
                index += 1
                return args
            }
            throw fail("expected , or )")
        }
    }

    /// A value read without recursing, at `start` (not a `(`): a literal, a field, a `cast(…)`, or the
    /// name of a call with its `(` consumed.
    @inline(never)
    mutating func parseAtom(_ start: Int) throws -> Atom {
        let b = bytes[index]
        if b == UInt8(ascii: "'") { return .node(.literal(.string(try parseQuoted()), position: start)) }
        if let guid = bareGuid() { return .node(.literal(.string(guid), position: start)) }
        if b == UInt8(ascii: "-") || (b >= 0x30 && b <= 0x39) {
            if let date = try bareDate() { return .node(date) }
            return .node(.literal(try parseNumber(), position: start))
        }
        guard let word = peekWord() else { throw fail("unexpected character '\(Character(Unicode.Scalar(b)))'") }
        index += word.utf8.count
        let quoted = index < bytes.count && bytes[index] == UInt8(ascii: "'")
        switch word {
        case "true": return .node(.literal(.bool(true), position: start))
        case "false": return .node(.literal(.bool(false), position: start))
        case "null": return .node(.literal(.null, position: start))
        case "datetimeoffset" where dialect != .v4 || quoted, "datetime" where dialect != .v4 || quoted:
            guard quoted else { throw fail("expected ' after \(word)") }
            if dialect == .v4 {
                throw fail("\(word)'…' is OData v3; OData v4 writes cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)", at: start)
            }
            let textStart = index
            let s = try parseQuoted()
            guard let date = DeltaTokenFormat.date(from: s) else { throw fail("bad date '\(s)'", at: textStart) }
            return .node(.literal(.date(date), position: start))
        case "guid" where quoted:
            if dialect == .v4 { throw fail("guid'…' is OData v3; OData v4 writes the GUID bare or as cast(…,Edm.Guid)", at: start) }
            let textStart = index
            let s = try parseQuoted()
            guard let canonical = FilterParser.canonicalGuid(s) else { throw fail("bad guid '\(s)'", at: textStart) }
            return .node(.literal(.string(canonical), position: start))
        case "X" where quoted:
            if dialect == .v4 { throw fail("X'…' is OData v3; OData v4 writes binary'…' in base64url", at: start) }
            let s = try parseQuoted()
            guard let b = Hex.bytes(s) else { throw fail("bad binary literal '\(s)' (hex digits)", at: start) }
            return .node(.literal(.binary(b), position: start))
        case "binary" where quoted:
            let s = try parseQuoted()
            // v4's binary'…' is base64url; v3's (and so v3's lenient reading) hex, as X'…'.
            if dialect == .v4 {
                guard let b = Base64URL.decode(s) else { throw fail("bad binary literal '\(s)' (base64url)", at: start) }
                return .node(.literal(.binary(b), position: start))
            }
            guard let b = Hex.bytes(s) else { throw fail("bad binary literal '\(s)' (hex digits)", at: start) }
            return .node(.literal(.binary(b), position: start))
        default:
            skipSpaces()
            if index < bytes.count, bytes[index] == UInt8(ascii: "(") {
                if word == "substringof" && dialect == .v4 {
                    throw fail("substringof() is OData v3; OData v4 writes contains(text,'x')", at: start)
                }
                index += 1
                if word == "cast" { return .node(try parseCast(start: start)) }
                return .call(word)
            }
            return .node(.identifier(word, position: start))
        }
    }

    /// A GUID written bare (OData v4: `8-4-4-4-12` hex digits not followed by a letter, digit or `_`),
    /// consumed, as its canonical text; `nil` (nothing consumed) when the text does not start with one.
    mutating func bareGuid() -> String? {
        guard index + 36 <= bytes.count, Hex.digit(bytes[index]) != nil, bytes[index + 8] == UInt8(ascii: "-") else { return nil }
        if index + 36 < bytes.count, FilterParser.isWordByte(bytes[index + 36]) || bytes[index + 36] == UInt8(ascii: "-") { return nil }
        guard let canonical = FilterParser.canonicalGuid(String(decoding: bytes[index..<(index + 36)], as: UTF8.self)) else { return nil }
        index += 36
        return canonical
    }

    /// A date written bare (OData v4): `yyyy-MM-dd` is an `Edm.Date` (``FilterNode/dateOnly(_:position:)``),
    /// `yyyy-MM-ddTHH:mm:ss.fffZ` (seconds and fraction optional, `Z` or `±hh:mm`) an
    /// `Edm.DateTimeOffset`. `nil` (nothing consumed) when the text does not start with `dddd-dd-dd`.
    mutating func bareDate() throws -> FilterNode? {
        func digits(_ at: Int, _ n: Int) -> Bool {
            guard at + n <= bytes.count else { return false }
            return bytes[at..<(at + n)].allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        }
        let start = index
        guard digits(start, 4), start + 10 <= bytes.count, bytes[start + 4] == UInt8(ascii: "-"), digits(start + 5, 2),
            bytes[start + 7] == UInt8(ascii: "-"), digits(start + 8, 2)
        else { return nil }
        // The literal runs over the characters a date can hold.
        var end = start + 10
        while end < bytes.count {
            let c = bytes[end]
            guard (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: ":") || c == UInt8(ascii: ".") || c == UInt8(ascii: "T")
                || c == UInt8(ascii: "Z") || c == UInt8(ascii: "+") || c == UInt8(ascii: "-")
            else { break }
            end += 1
        }
        let literal = String(decoding: bytes[start..<end], as: UTF8.self)
        index = end
        if end == start + 10 {
            guard let day = ODataDates.date(fromDay: literal) else { throw fail("bad date '\(literal)' (a day yyyy-MM-dd that exists)", at: start) }
            return .dateOnly(day, position: start)
        }
        guard let date = ODataDates.date(fromDateTime: literal) else {
            throw fail("bad date '\(literal)' (yyyy-MM-ddTHH:mm:ss.fffZ, a day that exists)", at: start)
        }
        return .literal(.date(date), position: start)
    }

    /// `cast(value,Edm.Type)` after `cast(`: an `Edm.DateTimeOffset` (a date), an `Edm.Date` (a day) or
    /// an `Edm.Guid` (its canonical string); the value written bare (as the Datasync toolkit does) or
    /// quoted. Anything else is `invalidQuery` naming the value or the type.
    mutating func parseCast(start: Int) throws -> FilterNode {
        skipSpaces()
        let valueStart = index
        let raw: String
        if index < bytes.count, bytes[index] == UInt8(ascii: "'") {
            raw = try parseQuoted()
        } else {
            var j = index
            while j < bytes.count, bytes[j] != UInt8(ascii: ","), bytes[j] != UInt8(ascii: ")"), bytes[j] != 0x20, bytes[j] != 0x09 { j += 1 }
            raw = String(decoding: bytes[index..<j], as: UTF8.self)
            index = j
        }
        skipSpaces()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ",") else { throw fail("cast takes a value and a type: expected ,") }
        index += 1
        skipSpaces()
        let typeStart = index
        var j = index
        while j < bytes.count, FilterParser.isWordByte(bytes[j]) || bytes[j] == UInt8(ascii: ".") { j += 1 }
        let type = String(decoding: bytes[index..<j], as: UTF8.self)
        index = j
        skipSpaces()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ")") else { throw fail("expected ) to close cast(") }
        index += 1
        switch type {
        case "Edm.DateTimeOffset":
            guard let date = ODataDates.date(fromDateTime: raw) else {
                throw fail("bad Edm.DateTimeOffset '\(raw)' (yyyy-MM-ddTHH:mm:ss.fffZ, a day that exists)", at: valueStart)
            }
            return .literal(.date(date), position: start)
        case "Edm.Date":
            guard let day = ODataDates.date(fromDay: raw) else {
                throw fail("bad Edm.Date '\(raw)' (a day yyyy-MM-dd that exists)", at: valueStart)
            }
            return .dateOnly(day, position: start)
        case "Edm.Guid":
            guard let canonical = FilterParser.canonicalGuid(raw) else { throw fail("bad guid '\(raw)'", at: valueStart) }
            return .literal(.string(canonical), position: start)
        case "Edm.TimeOfDay":
            throw fail("the time of day '\(raw)' (Edm.TimeOfDay) has no LocalStore value type", at: valueStart)
        default:
            throw fail("cast to '\(type)' is not supported (Edm.DateTimeOffset, Edm.Date, Edm.Guid)", at: typeStart)
        }
    }

    /// The canonical text of a GUID literal: `8-4-4-4-12` hex digits, lower-cased (as .NET writes a
    /// `Guid`); `nil` for anything else.
    static func canonicalGuid(_ s: String) -> String? {
        let u = Array(s.utf8)
        guard u.count == 36 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == UInt8(ascii: "-") else { return nil }
                out.append(c)
            } else {
                guard Hex.digit(c) != nil else { return nil }
                out.append(c >= 0x41 && c <= 0x46 ? c | 0x20 : c)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    mutating func parseQuoted() throws -> String {
        let start = index
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "'") {
                if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "'") {
                    out.append(UInt8(ascii: "'"))
                    index += 2
                    continue
                }
                index += 1
                return String(decoding: out, as: UTF8.self)
            }
            out.append(bytes[index])
            index += 1
        }
        throw fail("unterminated string", at: start)
    }

    mutating func parseNumber() throws -> Value {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        var isInteger = true
        while index < bytes.count {
            let c = bytes[index]
            if c >= 0x30 && c <= 0x39 {
                index += 1
            } else if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if c != UInt8(ascii: "."), index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
            } else {
                break
            }
        }
        let s = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let i = Int64(s) { return .int(i) }
        guard let d = Double(s), d.isFinite, !isInteger || Int64(s) == nil else { throw fail("bad number '\(s)'", at: start) }
        return .double(d)
    }

    // MARK: Conversion to the AST

    func predicate(_ node: FilterNode) throws -> QueryPredicate {
        switch node {
        case .paren(let inner): return try predicate(inner)
        case .not(let inner): return .not(try predicate(inner))
        case .chain(let op, let operands):
            let parts = try operands.map(predicate)
            return op == "and" ? .and(parts) : .or(parts)
        case .binary(let op, let l, let r, let p):
            let ops: [String: QueryPredicate.ComparisonOperator] = [
                "eq": .equal, "ne": .notEqual, "lt": .less, "le": .lessOrEqual, "gt": .greater, "ge": .greaterOrEqual,
            ]
            guard let c = ops[op] else { throw fail("'\(op)' gives a number, not a condition", at: p) }
            // `startswith(a,b) eq true`, `substringof(a,b) ne false`, … as older clients write them.
            if c == .equal || c == .notEqual {
                if let test = try booleanTest(l), case .literal(.bool(let b), _) = unwrapped(r) {
                    return b == (c == .equal) ? test : .not(test)
                }
                if let test = try booleanTest(r), case .literal(.bool(let b), _) = unwrapped(l) {
                    return b == (c == .equal) ? test : .not(test)
                }
            }
            return .compare(try expression(l), c, try expression(r), caseInsensitive: false)
        case .literal(.bool(true), _): return .true
        case .literal(.bool(false), _): return .false
        case .identifier(let name, _):
            return .compare(.field(name), .equal, .literal(.bool(true)), caseInsensitive: false)
        case .call(let name, _, let p):
            if let test = try booleanTest(node) { return test }
            if FilterParser.valueFunctions.contains(name) || QueryFunction(rawValue: name) != nil {
                throw fail("\(name)() gives a value, not a condition", at: p)
            }
            throw fail("unknown function \(name)()", at: p)
        case .membership(let subject, let members, _):
            return .in(try expression(subject), members.map(FilterParser.memberValue))
        case .literal(_, let p), .dateOnly(_, let p):
            throw fail("a value is not a condition", at: p)
        }
    }

    /// The value of an `in` list member (a day is its midnight: ``QueryPredicate/in(_:_:)`` holds values).
    static func memberValue(_ node: FilterNode) -> Value {
        switch node {
        case .literal(let v, _): return v
        case .dateOnly(let d, _): return .date(d)
        default: return .null
        }
    }

    /// The functions that give a value and have their own ``QueryExpression`` case.
    static let valueFunctions: Set<String> = ["tolower", "toupper", "length"]
    /// The functions that give a condition.
    static let testFunctions: Set<String> = ["startswith", "endswith", "substringof", "contains"]

    func unwrapped(_ node: FilterNode) -> FilterNode {
        if case .paren(let inner) = node { return unwrapped(inner) }
        return node
    }

    /// The string test of a call to `startswith`, `endswith`, `substringof` or `contains`; `nil` for any other node.
    func booleanTest(_ node: FilterNode) throws -> QueryPredicate? {
        guard case .call(let name, let args, let p) = unwrapped(node), FilterParser.testFunctions.contains(name) else { return nil }
        guard args.count == 2 else { throw fail("\(name) takes 2 arguments, not \(args.count)", at: p) }
        switch name {
        case "startswith": return .string(.startsWith, try expression(args[0]), try expression(args[1]), caseInsensitive: false)
        case "endswith": return .string(.endsWith, try expression(args[0]), try expression(args[1]), caseInsensitive: false)
        case "contains": return .string(.contains, try expression(args[0]), try expression(args[1]), caseInsensitive: false)
        default: return .string(.contains, try expression(args[1]), try expression(args[0]), caseInsensitive: false)
        }
    }

    static let arithmeticOperators: [String: QueryExpression.ArithmeticOperator] = [
        "add": .add, "sub": .subtract, "mul": .multiply, "div": .divide, "mod": .modulo,
    ]

    /// The expression of a node. It recurses once per level of parentheses and calls (bounded by
    /// ``maximumNesting``), so its frame is kept small: the rare cases (calls, errors) are functions of
    /// their own, and a chain of arithmetic is converted in a loop (``arithmetic(_:)``).
    func expression(_ node: FilterNode) throws -> QueryExpression {
        switch node {
        case .paren(let inner): return try expression(inner)
        case .literal(let v, _): return .literal(v)
        case .dateOnly(let d, _): return .dateOnly(d)
        case .identifier(let name, let p):
            guard Identifier.isValid(name) else { throw notAValue(node, at: p) }
            return .field(name)
        case .binary:
            return try arithmetic(node)
        case .call(let name, let args, let p):
            return try callExpression(name, args, at: p)
        case .membership(_, _, let p):
            throw notAValue(node, at: p)
        case .not, .chain:
            throw notAValue(node, at: nil)
        }
    }

    /// A chain of arithmetic operators, `a add b sub c …`: the parser builds it left-deep (one level per
    /// operator, up to ``maximumArithmeticOperators``), so its left spine is walked in a loop and only
    /// the right operands recurse.
    @inline(never)
    func arithmetic(_ node: FilterNode) throws -> QueryExpression {
        var rights: [(QueryExpression.ArithmeticOperator, FilterNode)] = []
        var current = node
        while true {
            if case .paren(let inner) = current {
                current = inner
            } else if case .binary(let op, let l, let r, let p) = current {
                guard let a = FilterParser.arithmeticOperators[op] else { throw notAValue(current, at: p) }
                rights.append((a, r))
                current = l
            } else {
                break
            }
        }
        var result = try expression(current)
        for (a, r) in rights.reversed() { result = .arithmetic(a, result, try expression(r)) }
        return result
    }

    @inline(never)
    func callExpression(_ name: String, _ args: [FilterNode], at p: Int) throws -> QueryExpression {
        if let f = QueryFunction(rawValue: name) {
            let counts = f.argumentCounts
            guard counts.contains(args.count) else {
                let wanted = counts.count == 1 ? "\(counts.lowerBound)" : "\(counts.lowerBound) or \(counts.upperBound)"
                throw fail("\(name) takes \(wanted) argument\(counts.upperBound == 1 ? "" : "s"), not \(args.count)", at: p)
            }
            return .function(f, try args.map { try expression($0) })
        }
        if FilterParser.valueFunctions.contains(name) {
            guard args.count == 1 else { throw fail("\(name) takes 1 argument, not \(args.count)", at: p) }
            switch name {
            case "tolower": return .toLower(try expression(args[0]))
            case "toupper": return .toUpper(try expression(args[0]))
            default: return .length(try expression(args[0]))
            }
        }
        if FilterParser.testFunctions.contains(name) { throw fail("\(name)() is a condition, not a value", at: p) }
        throw fail("unknown function \(name)()", at: p)
    }

    /// The error of a node that is no value where one is needed.
    @inline(never)
    func notAValue(_ node: FilterNode, at p: Int?) -> LocalStoreError {
        switch node {
        case .identifier(let name, _): return fail("'\(name)' is not a field name", at: p)
        case .binary(let op, _, _, _): return fail("a condition ('\(op)') is not a value", at: p)
        case .membership: return fail("a condition (in) is not a value", at: p)
        case .not: return fail("a condition (not) is not a value", at: p)
        case .chain(let op, _): return fail("a condition ('\(op)') is not a value", at: p)
        default: return fail("not a value", at: p)
        }
    }
}

/// Hexadecimal text ↔ bytes, shared by the OData parser and the command line's key handling.
package enum Hex {
    /// The bytes of an even-length string of hex digits (either case); `nil` for anything else.
    package static func bytes(_ s: String) -> [UInt8]? {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let hi = digit(u[i]), let lo = digit(u[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    static func digit(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
}
