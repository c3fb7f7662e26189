import LocalStore

/// The wire protocol of an offline-sync table service: the one the Azure Mobile Apps back ends speak
/// (protocol 2.0.0) or the one of their successor, the Datasync Community Toolkit (3.0.0).
///
/// | | ``azureMobileApps`` (2.0.0) | ``datasync`` (3.0.0) |
/// | --- | --- | --- |
/// | `ZUMO-API-VERSION` | `2.0.0` (the servers refuse a request without it) | `3.0.0` |
/// | table route | `tables/{table}` (the name as given) | `tables/{table lowercased}` |
/// | replace | `PATCH tables/{table}/{id}` | `PUT tables/{table}/{id}` |
/// | query | OData v3: `datetimeoffset'…'`, `substringof`, `__includeDeleted=true` | OData v4: `cast(…,Edm.DateTimeOffset)`, `contains`, `__includedeleted=true` |
/// | page | a JSON array, or `{"results": […], "count": n}`; more pages: a `Link: …; rel=next` header | `{"items": […], "count": n, "nextLink": "…"}` |
/// | system columns | `id`, `createdAt`, `updatedAt`, `version`, `deleted` | `id`, `updatedAt`, `version`, `deleted` |
///
/// Both send the version as `If-Match: "version"`; 2.0.0 escapes a `"` inside it as `\"`, 3.0.0
/// refuses such a version. docs/sync-http.md lists every difference and where it comes from.
public struct SyncServiceProtocol: Sendable, Hashable, CustomStringConvertible {
    enum Generation: Sendable, Hashable { case azureMobileApps, datasync }
    let generation: Generation

    init(generation: Generation) { self.generation = generation }

    /// Azure Mobile Apps, protocol 2.0.0 (the Node and ASP.NET back ends, the iOS/.NET/JS/Android SDKs).
    public static let azureMobileApps = SyncServiceProtocol(generation: .azureMobileApps)
    /// The Datasync Community Toolkit, protocol 3.0.0.
    public static let datasync = SyncServiceProtocol(generation: .datasync)

    /// The value of the `ZUMO-API-VERSION` header: `2.0.0` or `3.0.0`.
    public var version: String { generation == .azureMobileApps ? "2.0.0" : "3.0.0" }

    /// The OData dialect of the query strings: v3 for 2.0.0, v4 for 3.0.0.
    public var dialect: ODataDialect { generation == .azureMobileApps ? .v3 : .v4 }

    /// The HTTP method that replaces an item: `PATCH` (2.0.0) or `PUT` (3.0.0).
    public var replaceMethod: String { generation == .azureMobileApps ? "PATCH" : "PUT" }

    /// The path of a table's endpoint below the base URL, as the protocol's clients build it:
    /// `tables/{table}` (2.0.0) or `tables/{table lowercased}` (3.0.0), the name percent-encoded.
    public func defaultTablePath(_ table: String) -> String {
        "tables/" + WireFormat.pathSegment(generation == .azureMobileApps ? table : ASCII.lowercased(table))
    }

    /// Both protocols.
    public static let all: [SyncServiceProtocol] = [.azureMobileApps, .datasync]

    /// The protocol's name on a command line: `azureMobileApps` or `datasync`.
    public var name: String { generation == .azureMobileApps ? "azureMobileApps" : "datasync" }

    /// The protocol named `name` (``name``), or `nil` for any other name.
    public init?(name: String) {
        guard let found = Self.all.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    /// `2.0.0 (Azure Mobile Apps)` or `3.0.0 (Datasync)`.
    public var description: String { generation == .azureMobileApps ? "2.0.0 (Azure Mobile Apps)" : "3.0.0 (Datasync)" }
}
