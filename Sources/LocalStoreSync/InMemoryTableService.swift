import Foundation
import LocalStore

/// A table service with the rules of the Azure Mobile Apps and Datasync back ends, for tests: it
/// implements ``SyncTransport`` without a network.
///
/// - Every table has the system columns `version` (a new UUID string on every change), `updatedAt`
///   and `createdAt` (strictly increasing, millisecond precision) and `deleted` (soft delete).
/// - An insert of an existing id (deleted or not) is a 409 with the server's item; a replace or delete
///   whose version is not the server's is a 412 with the server's item; a replace or delete of a
///   missing or deleted item is a 404. A replace sets every column the service knows (absent ones to
///   null); system columns sent by the client are ignored.
/// - A page is the query's result (filter, order, `$skip`, `$top`), deleted items only with
///   `PullRequest.includeDeleted`; at most `maximumPageSize` items.
///
/// Its rows live in a `LocalStore` — an `InMemoryStore` by default, or any store, so that two
/// processes can share a service through a file. Each request is one transaction of that store.
/// `setOffline(_:)` and `failNextRequests(_:with:)` simulate the network for tests.
public actor InMemoryTableService: SyncTransport {
    /// The store holding the service's tables.
    public nonisolated let store: any LocalStore
    /// The most items a page returns, whatever `$top` asks (the services' page-size limit).
    public let maximumPageSize: Int
    private var offline = false
    private var injected: [SyncTransportError] = []
    private nonisolated let clock: @Sendable () -> Date
    /// Every request received, in order, as `METHOD table[/id][?query]` (a refused one too).
    public private(set) var requests: [String] = []

    /// Creates a service over `store` (a new `InMemoryStore` by default). `clock` gives the time
    /// stamped into `updatedAt` (made strictly increasing).
    public init(
        store: (any LocalStore)? = nil, maximumPageSize: Int = 1_000, clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.store = try store ?? InMemoryStore()
        self.maximumPageSize = maximumPageSize
        self.clock = clock
    }

    /// Creates the service's table for `schema`: its columns plus the system columns
    /// (`version` string, `updatedAt` and `createdAt` dates, `deleted` boolean, `updatedAt` indexed).
    public func defineTable(_ schema: TableSchema) async throws {
        try await store.defineTable(Self.serviceSchema(schema))
    }

    /// `schema` with the service's system columns added.
    public static func serviceSchema(_ schema: TableSchema) throws -> TableSchema {
        var columns = schema.columns
        let system: [(String, ColumnType)] = [("version", .string), ("updatedAt", .date), ("createdAt", .date), ("deleted", .boolean)]
        for (name, type) in system where schema.column(named: name) == nil { columns.append(Column(name, type)) }
        columns = columns.map { $0.name == "updatedAt" || ASCII.lowercased($0.name) == "updatedat" ? Column($0.name, $0.type, indexed: true) : $0 }
        return TableSchema(name: schema.name, columns: columns, indexes: schema.indexes)
    }

    // MARK: Simulating the network

    /// While `offline`, every request fails with ``SyncTransportError/Kind/transient`` and changes nothing.
    public func setOffline(_ offline: Bool) { self.offline = offline }

    /// The next `count` requests fail with `error` (and change nothing).
    public func failNextRequests(_ count: Int = 1, with error: SyncTransportError) {
        injected += Array(repeating: error, count: count)
    }

    // MARK: SyncTransport

    /// `POST /tables/{table}`.
    public func insert(_ item: Item, into table: String) async throws -> Item {
        let id = try requireId(item, "POST \(table)")
        try admit()
        let schema = try await schema(table)
        return try await write { tx in
            if let existing = try tx.read(table: schema.name, id: .string(id)) {
                throw SyncTransportError(.conflict, statusCode: 409, message: "\(schema.name)/\(id) already exists", serverItem: Self.wire(existing))
            }
            return try self.stamp(Self.userColumns(of: item, schema: schema, id: id), created: true, in: tx, schema: schema)
        }
    }

    /// `PUT /tables/{table}/{id}` with `If-Match`.
    public func replace(_ item: Item, in table: String, ifVersion version: String?) async throws -> Item {
        let id = try requireId(item, "PUT \(table)/\(item.stringId ?? "")")
        try admit()
        let schema = try await schema(table)
        return try await write { tx in
            let existing = try Self.live(tx, schema: schema, id: id)
            try Self.checkVersion(version, existing, schema: schema)
            var row = Self.userColumns(of: item, schema: schema, id: id)
            for column in schema.columns where row.value(forColumn: column.name) == nil { row.values[column.name] = .null }
            row.values["createdAt"] = existing["createdAt"] ?? .null
            return try self.stamp(row, created: false, in: tx, schema: schema)
        }
    }

    /// `DELETE /tables/{table}/{id}` with `If-Match`: a soft delete.
    public func delete(id: String, from table: String, ifVersion version: String?) async throws {
        requests.append("DELETE \(table)/\(id)")
        try admit()
        let schema = try await schema(table)
        _ = try await write { tx in
            var row = try Self.live(tx, schema: schema, id: id)
            try Self.checkVersion(version, row, schema: schema)
            row.values["deleted"] = .bool(true)
            return try self.stamp(row, created: false, in: tx, schema: schema)
        }
    }

    /// `GET /tables/{table}?{query}`.
    public func page(_ request: PullRequest) async throws -> SyncPage {
        requests.append("GET \(request.query.table)?\((try? request.queryString()) ?? "")")
        try admit()
        let schema = try await schema(request.query.table)
        var query = request.query
        query.table = schema.name
        if !request.includeDeleted {
            let live: QueryPredicate = .or([Field("deleted") == false, Field("deleted") == nil])
            query.predicate = query.predicate.map { .and([$0, live]) } ?? live
        }
        let asked = query.top ?? Int.max
        query.top = min(asked, maximumPageSize)
        let items = try await store.read(query).items.map(Self.wire)
        // Cut to the service's page size: say whether more may follow, as a nextLink does.
        return SyncPage(items: items, hasMore: asked > maximumPageSize ? items.count == maximumPageSize : nil)
    }

    // MARK: Reading the service's state (tests)

    /// Every item of `table` in id order, deleted ones only when `includeDeleted`.
    public func items(in table: String, includeDeleted: Bool = false) async throws -> [Item] {
        let predicate: QueryPredicate? = includeDeleted ? nil : .or([Field("deleted") == false, Field("deleted") == nil])
        return try await store.read(Query(table, where: predicate, sort: [SortKey("id")])).items.map(Self.wire)
    }

    /// Another client's write, made directly on the service: upserts `item`'s columns and stamps it.
    @discardableResult
    public func serverSave(_ item: Item, in table: String) async throws -> Item {
        let id = try requireId(item, "SAVE \(table)")
        let schema = try await schema(table)
        return try await write { tx in
            let existing = try tx.read(table: schema.name, id: .string(id))
            var row = existing ?? ["id": .string(id), "deleted": .bool(false)]
            for (k, v) in Self.userColumns(of: item, schema: schema, id: id) { row[k] = v }
            return try self.stamp(row, created: existing == nil, in: tx, schema: schema)
        }
    }

    // MARK: Helpers

    private func requireId(_ item: Item, _ request: String) throws -> String {
        requests.append(request)
        guard let id = item.stringId, !id.isEmpty else {
            throw SyncTransportError(.rejected, statusCode: 400, message: "the item has no string id")
        }
        return id
    }

    private func admit() throws {
        if offline { throw SyncTransportError(.transient, message: "the service is offline") }
        if !injected.isEmpty { throw injected.removeFirst() }
    }

    private func schema(_ table: String) async throws -> TableSchema {
        guard let schema = try await store.run({ try $0.schema(of: table) }) else {
            throw SyncTransportError(.notFound, statusCode: 404, message: "no table \(table)")
        }
        return schema
    }

    /// Runs `body` in one transaction of the service's store.
    private func write<R: Sendable>(_ body: @escaping @Sendable (any LocalStoreTransaction) throws -> R) async throws -> R {
        try await store.run { try $0.write(body) }
    }

    /// Stamps `row` (new version, `updatedAt`, `createdAt` when `created`) and writes it. `updatedAt`
    /// is the clock's time at millisecond precision, but always after the table's latest `updatedAt`,
    /// read in the same transaction: stamps follow commit order even across processes sharing the
    /// store, so a client whose delta token is the latest `updatedAt` it saw cannot miss a later commit.
    private nonisolated func stamp(_ row: Item, created: Bool, in tx: any LocalStoreTransaction, schema: TableSchema) throws -> Item {
        var row = row
        let latest = try tx.read(Query(schema.name, sort: [SortKey("updatedAt", .descending)], top: 1)).items.first?.value(forColumn: "updatedAt")?
            .dateValue
        let ms = (clock().timeIntervalSince1970 * 1000).rounded(.down)
        var now = Date(timeIntervalSince1970: ms / 1000)
        if let latest, now <= latest { now = Date(timeIntervalSince1970: ((latest.timeIntervalSince1970 * 1000).rounded() + 1) / 1000) }
        row.values["version"] = .string(UUID().uuidString)
        row.values["updatedAt"] = .date(now)
        if created { row.values["createdAt"] = .date(now) }
        if row.value(forColumn: "deleted") == nil || row.value(forColumn: "deleted") == .null { row.values["deleted"] = .bool(false) }
        try tx.upsert([row], into: schema.name, options: .ignoringUnknownColumns)
        return Self.wire(try tx.read(table: schema.name, id: row.id ?? .null) ?? row)
    }

    private static func live(_ tx: any LocalStoreTransaction, schema: TableSchema, id: String) throws -> Item {
        guard let row = try tx.read(table: schema.name, id: .string(id)), row.value(forColumn: "deleted") != .bool(true) else {
            throw SyncTransportError(.notFound, statusCode: 404, message: "\(schema.name)/\(id) does not exist")
        }
        return row
    }

    private static func checkVersion(_ version: String?, _ stored: Item, schema: TableSchema) throws {
        guard let version else { return }
        let current = stored.value(forColumn: "version") ?? .null
        guard current == .string(version) else {
            throw SyncTransportError(
                .preconditionFailed, statusCode: 412,
                message: "\(schema.name)/\(stored.stringId ?? "?") has version \(current), not '\(version)'", serverItem: wire(stored))
        }
    }

    /// The columns a client may set: the schema's columns except the system columns; `id` as given.
    private static func userColumns(of item: Item, schema: TableSchema, id: String) -> Item {
        var out: Item = ["id": .string(id)]
        for (key, value) in item {
            guard let column = schema.column(named: key), ASCII.lowercased(column.name) != "id",
                !SystemProperty.allCases.contains(where: { ASCII.lowercased($0.columnName) == ASCII.lowercased(column.name) })
            else { continue }
            out.values[column.name] = value
        }
        return out
    }

    /// What goes over the wire: every column, nulls left out.
    static func wire(_ row: Item) -> Item { Item(row.values.filter { !$0.value.isNull }) }
}

