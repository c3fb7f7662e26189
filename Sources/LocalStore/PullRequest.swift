import Foundation

/// The query string of one page of a pull, as the Azure Mobile Apps iOS SDK sends it: the query's
/// OData options with an explicit `$skip` (also `$skip=0` on the first page), `__includeDeleted=true`,
/// then the user's parameters verbatim (`key1=someValue&key2=14`).
///
/// ```swift
/// let page = PullRequest(query: PullRequest.incremental(Query("TodoItem", top: 50), since: token),
///                        parameters: [.init("tenant", "7")])
/// try page.queryString()
/// // $filter=updatedAt%20ge%20datetimeoffset'2023-11-14T22:13:20.000Z'&$orderby=updatedAt%20asc&$skip=0&$top=50&__includeDeleted=true&tenant=7
/// ```
///
/// ``dialect`` picks the OData version of the options (``ODataDialect``): the default ``ODataDialect/v3``
/// for Azure Mobile Apps 2.0.0 services; with ``ODataDialect/v4`` (Datasync Community Toolkit 3.0.0) the
/// same page is `$filter=updatedAt%20ge%20cast(2023-11-14T22:13:20.000Z,Edm.DateTimeOffset)&…`, and a
/// total count is asked with `$count=true`. The rest of the string is the same in both.
///
/// ``parse(_:table:dialect:)`` reads such a string back, so render → parse → render gives the same text.
public struct PullRequest: Sendable, Hashable {
    /// One user parameter, sent as `name=value` without any encoding.
    public struct Parameter: Sendable, Hashable {
        /// The parameter's name: not empty, not starting with `$`, not `__includeDeleted`.
        public var name: String
        /// The parameter's value.
        public var value: String
        /// Creates a parameter.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The query: its predicate, order, `skip` (always rendered), `top` (the page size), `select`.
    public var query: Query
    /// Whether `__includeDeleted=true` is sent (so soft-deleted items come back and are deleted locally).
    public var includeDeleted: Bool
    /// The user's parameters, in order.
    public var parameters: [Parameter]
    /// The OData version the query's options are written in.
    public var dialect: ODataDialect

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - query: The query of the page.
    ///   - includeDeleted: Whether `__includeDeleted=true` is sent.
    ///   - parameters: The user's parameters, sent verbatim after the options.
    ///   - dialect: The OData version of the options.
    public init(query: Query, includeDeleted: Bool = true, parameters: [Parameter] = [], dialect: ODataDialect = .v3) {
        self.query = query
        self.includeDeleted = includeDeleted
        self.parameters = parameters
        self.dialect = dialect
    }

    /// The SDK's incremental pull query: `query`'s predicate AND `updatedAt ge <token>` (the epoch when
    /// there is no token), ordered by `updatedAt` ascending.
    public static func incremental(_ query: Query, since token: Date?) -> Query {
        var q = query
        let since: QueryPredicate = Field("updatedAt") >= .literal(.date(token ?? Date(timeIntervalSince1970: 0)))
        q.predicate = q.predicate.map { .and([$0, since]) } ?? since
        q.sort = [SortKey("updatedAt")]
        return q
    }

    /// The query string. A parameter whose name or value would change the string's structure (`&`,
    /// `#`, whitespace or control characters, `=` in a name) or that collides with the SDK's own
    /// options is an `invalidQuery` error naming it.
    public func queryString() throws -> String {
        for p in parameters { try Self.validate(p) }
        var q = query
        q.skip = 0
        var params = try OData.parameters(for: q, dialect: dialect)
        let at = params.firstIndex { ["$top", "$select", "$inlinecount", "$count"].contains($0.name) } ?? params.count
        params.insert(("$skip", String(query.skip)), at: at)
        var parts = params.map { "\($0.name)=\(OData.percentEncode($0.value))" }
        if includeDeleted { parts.append("__includeDeleted=true") }
        parts += parameters.map { "\($0.name)=\($0.value)" }
        return parts.joined(separator: "&")
    }

    /// Reads a query string back: `$` options as ``OData/parseQuery(_:table:dialect:)`` reads them in
    /// `dialect`, `__includeDeleted` (in any case: the toolkit's client writes `__includedeleted`), and
    /// every other `name=value` as a user parameter, verbatim and in order. The request has `dialect`, so
    /// it renders back in the same version.
    ///
    /// - Parameters:
    ///   - queryString: The query string, without the `?`.
    ///   - table: The table the query reads.
    ///   - dialect: The OData version the options are written in.
    public static func parse(_ queryString: String, table: String, dialect: ODataDialect = .v3) throws -> PullRequest {
        var options: [String] = []
        var includeDeleted = false
        var parameters: [Parameter] = []
        // Split on the bytes `&` and `=`, not on Characters: `&` followed by a combining mark is one Character.
        for part in queryString.unicodeScalars.split(separator: "&", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(String.UnicodeScalarView(pieces[0]))
            let value = pieces.count > 1 ? String(String.UnicodeScalarView(pieces[1])) : ""
            if name.hasPrefix("$") {
                options.append(String(String.UnicodeScalarView(part)))
            } else if ASCII.lowercased(name) == "__includedeleted" {
                guard value == "true" || value == "false" else {
                    throw LocalStoreError(.invalidQuery, "__includeDeleted must be true or false, not '\(value)'")
                }
                includeDeleted = value == "true"
            } else {
                let p = Parameter(name, value)
                try validate(p)
                parameters.append(p)
            }
        }
        let query = try OData.parseQuery(options.joined(separator: "&"), table: table, dialect: dialect)
        return PullRequest(query: query, includeDeleted: includeDeleted, parameters: parameters, dialect: dialect)
    }

    static func validate(_ p: Parameter) throws {
        func bad(_ b: UInt8) -> Bool { b < 0x21 || b == 0x7F || b == UInt8(ascii: "&") || b == UInt8(ascii: "#") }
        // Whitespace and control characters beyond ASCII too (U+0085, U+00A0, U+2028, …), and a
        // combining mark first (it would join the `&` or `=` before it into one Character).
        func badScalar(_ u: Unicode.Scalar) -> Bool {
            let category = u.properties.generalCategory
            return u.properties.isWhitespace || category == .control || category == .format || category == .lineSeparator
                || category == .paragraphSeparator || category == .spaceSeparator
        }
        func startsWithMark(_ s: String) -> Bool {
            guard let first = s.unicodeScalars.first else { return false }
            return [.nonspacingMark, .spacingMark, .enclosingMark].contains(first.properties.generalCategory)
        }
        guard !p.name.isEmpty, !p.name.hasPrefix("$"), ASCII.lowercased(p.name) != "__includedeleted",
            !p.name.utf8.contains(where: { bad($0) || $0 == UInt8(ascii: "=") }), !p.value.utf8.contains(where: bad),
            !p.name.unicodeScalars.contains(where: badScalar), !p.value.unicodeScalars.contains(where: badScalar),
            !startsWithMark(p.name), !startsWithMark(p.value)
        else {
            throw LocalStoreError(
                .invalidQuery,
                "the pull parameter \(Value.string(p.name))=\(Value.string(p.value)) cannot be sent verbatim: names are not empty, do not start with $ and are not __includeDeleted; neither part holds &, #, whitespace or control characters, nor the name =")
        }
    }
}
