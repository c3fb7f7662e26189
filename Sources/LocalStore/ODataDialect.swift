/// The version of OData a query string is written in: the two the sync services speak.
///
/// - ``v3`` (the default): the Azure Mobile Apps 2.0.0 SDKs and servers. `$inlinecount=allpages`,
///   `substringof('milk',text)`, `datetimeoffset'2024-05-01T10:20:30.123Z'`, `X'00FF'`; a list
///   membership is written as `eq` tests joined by `or`.
/// - ``v4``: the Datasync Community Toolkit 3.0.0. `$count=true`, `contains(text,'milk')`,
///   `cast(2024-05-01T10:20:30.123Z,Edm.DateTimeOffset)` (what the toolkit's client sends),
///   `cast(1994-10-14,Edm.Date)` for a ``QueryExpression/dateOnly(_:)``, `binary'AP8'` (base64url),
///   `priority in (1,2,3)`.
///
/// Rendering writes the dialect's forms only. Parsing ``v3`` also accepts every ``v4`` form (none of
/// them meant anything in v3, so no v3 text reads differently; the servers of the v3 era that rewrote
/// queries accepted both), except that `binary'…'` keeps its v3 meaning (hex digits). Parsing ``v4``
/// is strict: the v3-only forms (`$inlinecount`, `substringof`, `datetimeoffset'…'`, `datetime'…'`,
/// `guid'…'`, `X'…'`) are `invalidQuery` naming the form and its v4 spelling, as the toolkit's server
/// refuses them. Within each dialect, render → parse → render gives the same text.
///
/// ```swift
/// let q = Query("TodoItem", where: Field("text").contains("milk"), includeTotalCount: true)
/// try OData.queryString(for: q)                  // "$filter=substringof('milk',text)&$inlinecount=allpages"
/// try OData.queryString(for: q, dialect: .v4)    // "$filter=contains(text,'milk')&$count=true"
/// ```
public struct ODataDialect: Sendable, Hashable, CustomStringConvertible {
    private enum Version: Sendable, Hashable {
        case v3, v4
    }

    private let version: Version

    private init(_ version: Version) { self.version = version }

    /// OData v3, as the Azure Mobile Apps 2.0.0 SDKs and servers write it: the default everywhere.
    public static let v3 = ODataDialect(.v3)
    /// OData v4, as the Datasync Community Toolkit 3.0.0 client and server write it.
    public static let v4 = ODataDialect(.v4)

    /// `"v3"` or `"v4"`.
    public var description: String {
        switch version {
        case .v3: return "v3"
        case .v4: return "v4"
        }
    }
}
