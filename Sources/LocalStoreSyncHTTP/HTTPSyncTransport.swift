import AsyncHTTPClient
import Foundation
import LocalStore
import LocalStoreSync
import NIOCore
import NIOHTTP1

/// A `SyncTransport` that talks HTTP to an Azure Mobile Apps (2.0.0) or Datasync Community Toolkit
/// (3.0.0) back end, built on AsyncHTTPClient.
///
/// ```swift
/// let transport = HTTPSyncTransport(
///     HTTPSyncTransport.Configuration(baseURL: "https://todo.example.com", protocol: .datasync,
///                                     authentication: { [HTTPHeader("Authorization", "Bearer \(try await tokens.current())")] }),
///     schemas: store)
/// let sync = SyncContext(store: store, transport: transport)
/// ```
///
/// - Requests: `POST tables/{table}` (insert), `PATCH` (2.0.0) or `PUT` (3.0.0) `tables/{table}/{id}` with
///   `If-Match: "version"` (replace), `DELETE tables/{table}/{id}` with `If-Match`, and
///   `GET tables/{table}?{query}` (a page, in the protocol's OData dialect). Every request carries
///   `ZUMO-API-VERSION`, `Accept: application/json`, the configured headers and those the
///   authentication provider returns (called before every attempt, so a refreshed token is used).
/// - Answers: 409 and 412 are conflicts with the server's item (when a 2.0.0 back end answers a 409 on
///   insert with the item that was sent, or with no item, the server's item is read with a `GET`);
///   404 and 410 are `notFound`; 401 and 403 `unauthorized`; 408, 429, 502, 503, 504 and network
///   failures `transient`; any other status `rejected`. Every `SyncTransportError` keeps the status
///   and the server's message; `SyncTransportError.responseBody` keeps its body.
/// - Retries (``RetryPolicy``): a page is retried on every transient failure; a write only when the
///   service cannot have applied it — no connection was made, or it answered 408, 429 or 503 — since a
///   write whose answer was lost may have landed (the engine's push recognises those, docs/sync.md).
///   A `Retry-After` of seconds is honoured up to the policy's longest delay.
/// - Items come back with the system columns typed (`updatedAt`/`createdAt` dates, `version` a string,
///   `deleted` a boolean) and, with `schemas`, every column converted to its local type.
/// - Cancellation of the calling task cancels the request and ends the call with `CancellationError`.
public struct HTTPSyncTransport: SyncTransport {
    /// One HTTP header.
    public struct HTTPHeader: Sendable, Hashable {
        /// The header's name.
        public var name: String
        /// The header's value.
        public var value: String
        /// Creates a header.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// When and how often a failed request is tried again: exponential back-off from
    /// ``initialDelay``, doubled per attempt up to ``maximumDelay``, with ±20 % jitter.
    public struct RetryPolicy: Sendable, Hashable {
        /// The most attempts per call, the first included (1: never retry).
        public var maximumAttempts: Int
        /// The delay before the second attempt.
        public var initialDelay: Duration
        /// The longest delay between two attempts (also the cap of a `Retry-After`).
        public var maximumDelay: Duration

        /// Creates a policy.
        public init(maximumAttempts: Int = 3, initialDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(10)) {
            self.maximumAttempts = max(1, maximumAttempts)
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
        }

        /// Three attempts, 250 ms then 500 ms apart.
        public static let standard = RetryPolicy()
        /// One attempt.
        public static let never = RetryPolicy(maximumAttempts: 1)

        /// The delay before attempt `attempt + 1` (`attempt` ≥ 1).
        func delay(after attempt: Int, retryAfter: Duration?) -> Duration {
            if let retryAfter { return min(retryAfter, maximumDelay) }
            var d = initialDelay
            for _ in 1..<max(1, attempt) where d < maximumDelay { d = d * 2 }
            let jitter = Double.random(in: 0.8...1.2)
            return min(d * jitter, maximumDelay)
        }
    }

    /// Where the service is and how to talk to it.
    public struct Configuration: Sendable {
        /// The service's base URL (`https://host` or `https://host/prefix`); table paths are appended.
        public var baseURL: String
        /// The wire protocol.
        public var serviceProtocol: SyncServiceProtocol
        /// The path of a table's endpoint below ``baseURL``; `nil`: the protocol's
        /// ``SyncServiceProtocol/defaultTablePath(_:)``.
        public var tablePath: (@Sendable (String) -> String)?
        /// Headers sent with every request (after the protocol's own).
        public var headers: [HTTPHeader]
        /// Called before every attempt; its headers are added to the request (`Authorization`,
        /// `X-ZUMO-AUTH`, …). Refreshing a token is the provider's business; an error it throws ends
        /// the call as `SyncTransportError.Kind.unauthorized`.
        public var authentication: (@Sendable () async throws -> [HTTPHeader])?
        /// The longest one attempt may take, connection and whole answer included.
        public var timeout: Duration
        /// When a failed request is tried again.
        public var retry: RetryPolicy
        /// The largest answer read; a longer one is a `rejected` error.
        public var maximumResponseBytes: Int

        /// Creates a configuration.
        public init(
            baseURL: String, protocol serviceProtocol: SyncServiceProtocol, tablePath: (@Sendable (String) -> String)? = nil,
            headers: [HTTPHeader] = [], authentication: (@Sendable () async throws -> [HTTPHeader])? = nil,
            timeout: Duration = .seconds(30), retry: RetryPolicy = .standard, maximumResponseBytes: Int = 64 << 20
        ) {
            self.baseURL = baseURL
            self.serviceProtocol = serviceProtocol
            self.tablePath = tablePath
            self.headers = headers
            self.authentication = authentication
            self.timeout = timeout
            self.retry = retry
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    /// The configuration.
    public let configuration: Configuration
    private let client: HTTPClient
    private let schemas: (any LocalStore)?

    /// Creates a transport. `client`: the AsyncHTTPClient to send with (its shared client by default;
    /// a client you pass stays yours to shut down). `schemas`: the local store whose table schemas
    /// type the items the service returns (dates, binary, doubles); without it only the system columns
    /// are typed.
    public init(_ configuration: Configuration, client: HTTPClient = .shared, schemas: (any LocalStore)? = nil) {
        self.configuration = configuration
        self.client = client
        self.schemas = schemas
    }

    private var serviceProtocol: SyncServiceProtocol { configuration.serviceProtocol }

    // MARK: SyncTransport

    /// `POST tables/{table}`.
    public func insert(_ item: Item, into table: String) async throws -> Item {
        let answer = try await send(.POST, tablePath(table), body: WireFormat.body(item), write: true)
        if answer.status == 409, serviceProtocol == .azureMobileApps {
            // A 2.0.0 back end answers with the item that was sent (Node) or a message (ASP.NET): read
            // the server's own item for the conflict.
            let sentId = item.stringId ?? ""
            if let server = try? await read(table: table, id: sentId) {
                throw SyncTransportError(.conflict, statusCode: 409, message: answer.message, serverItem: server, responseBody: answer.text)
            }
        }
        return try await storedItem(answer, table: table, request: "POST \(table)")
    }

    /// `PATCH` (2.0.0) or `PUT` (3.0.0) `tables/{table}/{id}` with `If-Match`.
    public func replace(_ item: Item, in table: String, ifVersion version: String?) async throws -> Item {
        guard let id = item.stringId, !id.isEmpty else {
            throw SyncTransportError(.rejected, message: "cannot replace an item of \(table) without a string id")
        }
        let answer = try await send(
            HTTPMethod(rawValue: serviceProtocol.replaceMethod), itemPath(table, id), body: WireFormat.body(item), ifMatch: version, write: true)
        return try await storedItem(answer, table: table, request: "\(serviceProtocol.replaceMethod) \(table)/\(id)")
    }

    /// `DELETE tables/{table}/{id}` with `If-Match`.
    public func delete(id: String, from table: String, ifVersion version: String?) async throws {
        let answer = try await send(.DELETE, itemPath(table, id), ifMatch: version, write: true)
        try await check(answer, table: table)
    }

    /// `GET tables/{table}?{query}`: the page envelope of the protocol, more pages as its `nextLink`
    /// (3.0.0) or `Link: …; rel=next` header (2.0.0).
    public func page(_ request: PullRequest) async throws -> SyncPage {
        let table = request.query.table
        var query: String
        do {
            var inDialect = request
            inDialect.dialect = serviceProtocol.dialect
            query = try inDialect.queryString()
        } catch {
            throw SyncTransportError(.rejected, message: "the query of \(table) cannot be sent: \(error)")
        }
        if serviceProtocol == .datasync { query = query.replacingOccurrences(of: "__includeDeleted=", with: "__includedeleted=") }
        let answer = try await send(.GET, tablePath(table) + (query.isEmpty ? "" : "?" + query), write: false)
        try await check(answer, table: table)
        let schema = try await schema(table)
        let json: JSON
        do {
            json = try JSON(parsing: answer.body)
        } catch {
            throw SyncTransportError(
                .rejected, statusCode: answer.status, message: "the page of \(table) is not JSON: \(error)", responseBody: answer.text)
        }
        var rows: [JSON]
        var hasMore: Bool? = nil
        switch json {
        case .array(let list):
            rows = list
        case .object(let members):
            if case .array(let list)? = members["items"] {
                rows = list
                if case .string(let next)? = members["nextLink"], !next.isEmpty { hasMore = true } else { hasMore = false }
            } else if case .array(let list)? = members["results"] {
                rows = list
            } else {
                throw SyncTransportError(
                    .rejected, statusCode: answer.status, message: "the page of \(table) has no items, results or array", responseBody: answer.text)
            }
        default:
            throw SyncTransportError(.rejected, statusCode: answer.status, message: "the page of \(table) is not a list", responseBody: answer.text)
        }
        if hasMore == nil, let link = answer.headers.first(name: "Link"), WireFormat.hasNextLink(link) { hasMore = true }
        var items: [Item] = []
        items.reserveCapacity(rows.count)
        for (n, row) in rows.enumerated() {
            guard let item = WireFormat.item(row, schema: schema) else {
                throw SyncTransportError(.rejected, statusCode: answer.status, message: "item \(n) of the page of \(table) is not an object")
            }
            items.append(item)
        }
        return SyncPage(items: items, hasMore: hasMore)
    }

    // MARK: Requests

    /// What came back.
    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
        var message: String { WireFormat.message(body, fallback: HTTPResponseStatus(statusCode: status).reasonPhrase) }
    }

    func tablePath(_ table: String) -> String {
        configuration.tablePath?(table) ?? serviceProtocol.defaultTablePath(table)
    }

    func itemPath(_ table: String, _ id: String) -> String { tablePath(table) + "/" + WireFormat.pathSegment(id) }

    private func url(_ path: String) -> String {
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/" + (path.hasPrefix("/") ? String(path.dropFirst()) : path)
    }

    /// Sends one request, retried by the policy; throws `SyncTransportError` for a failure that is not
    /// an HTTP answer, `CancellationError` when the task is cancelled. Any HTTP status is returned.
    func send(_ method: HTTPMethod, _ path: String, body: [UInt8]? = nil, ifMatch version: String? = nil, write: Bool) async throws -> Answer {
        var request = HTTPClientRequest(url: url(path))
        request.method = method
        request.headers.add(name: "ZUMO-API-VERSION", value: serviceProtocol.version)
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "LocalStore/1 (lang=Swift; os=Linux)")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        if let version {
            guard let tag = WireFormat.ifMatch(version, serviceProtocol) else {
                throw SyncTransportError(.rejected, message: "the version '\(version)' holds a quote, which protocol 3.0.0 cannot send in If-Match")
            }
            request.headers.add(name: "If-Match", value: tag)
        }
        for h in configuration.headers { request.headers.add(name: h.name, value: h.value) }
        var attempt = 1
        while true {
            try Task.checkCancellation()
            var attemptRequest = request
            if let authentication = configuration.authentication {
                do {
                    for h in try await authentication() { attemptRequest.headers.replaceOrAdd(name: h.name, value: h.value) }
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    throw SyncTransportError(.unauthorized, message: "the authentication provider failed: \(error)")
                }
            }
            let outcome = await attemptOnce(attemptRequest, method: method, path: path)
            let retryable: Bool
            var retryAfter: Duration? = nil
            switch outcome {
            case .answer(let answer):
                guard [408, 429, 502, 503, 504].contains(answer.status) else { return answer }
                retryable = !write || [408, 429, 503].contains(answer.status)
                if let seconds = answer.headers.first(name: "Retry-After").flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), seconds >= 0 {
                    retryAfter = .seconds(seconds)
                }
                guard retryable, attempt < configuration.retry.maximumAttempts else { return answer }
            case .failed(let error, let beforeSending):
                retryable = error.kind.isRetryable && (!write || beforeSending)
                guard retryable, attempt < configuration.retry.maximumAttempts else { throw error }
            case .cancelled:
                throw CancellationError()
            }
            try await Task.sleep(for: configuration.retry.delay(after: attempt, retryAfter: retryAfter))
            attempt += 1
        }
    }

    private enum Outcome {
        case answer(Answer)
        /// `beforeSending`: no connection was made, so the service never saw the request.
        case failed(SyncTransportError, beforeSending: Bool)
        case cancelled
    }

    private func attemptOnce(_ request: HTTPClientRequest, method: HTTPMethod, path: String) async -> Outcome {
        let timeout = TimeAmount.nanoseconds(Int64(configuration.timeout.components.seconds) * 1_000_000_000
            + configuration.timeout.components.attoseconds / 1_000_000_000)
        do {
            let response = try await client.execute(request, timeout: timeout)
            let buffer = try await response.body.collect(upTo: configuration.maximumResponseBytes)
            return .answer(Answer(status: Int(response.status.code), headers: response.headers, body: Array(buffer.readableBytesView)))
        } catch {
            if Task.isCancelled || error is CancellationError || (error as? HTTPClientError) == .cancelled { return .cancelled }
            let what = "\(method.rawValue) \(path)"
            // `collect(upTo:)` past the limit: the answer is refused, not retried.
            if error is NIOTooManyBytesError {
                return .failed(
                    SyncTransportError(.rejected, message: "\(what): the answer is longer than \(configuration.maximumResponseBytes) bytes"),
                    beforeSending: false)
            }
            if let e = error as? HTTPClientError,
                e == .connectTimeout || e == .getConnectionFromPoolTimeout || e == .invalidURL || e == .emptyHost || e == .emptyScheme
            {
                let kind: SyncTransportError.Kind = e == .invalidURL || e == .emptyHost || e == .emptyScheme ? .rejected : .transient
                return .failed(SyncTransportError(kind, message: "\(what): \(e)"), beforeSending: kind == .transient)
            }
            if let io = error as? IOError, [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH].contains(io.errnoCode) {
                return .failed(SyncTransportError(.transient, message: "\(what): \(io)"), beforeSending: true)
            }
            if "\(error)".contains("connectionRefused") || "\(error)".contains("Connection refused") {
                return .failed(SyncTransportError(.transient, message: "\(what): \(error)"), beforeSending: true)
            }
            return .failed(SyncTransportError(.transient, message: "\(what): \(error)"), beforeSending: false)
        }
    }

    // MARK: Answers

    /// Throws the `SyncTransportError` of a status that is not 2xx (with the server's item for 409
    /// and 412).
    private func check(_ answer: Answer, table: String) async throws {
        guard !(200..<300).contains(answer.status) else { return }
        let kind = SyncTransportError.kind(forStatus: answer.status)
        var server: Item? = nil
        if kind.isConflict, let json = try? JSON(parsing: answer.body) {
            server = WireFormat.item(json, schema: try? await schema(table))
            if var s = server, s.value(forColumn: "version") == nil, let etag = answer.headers.first(name: "ETag"),
                let v = WireFormat.version(fromETag: etag)
            {
                s.values["version"] = .string(v)
                server = s
            }
            if server?.stringId == nil { server = nil }
        }
        throw SyncTransportError(kind, statusCode: answer.status, message: answer.message, serverItem: server, responseBody: answer.text)
    }

    /// The item of a successful write's answer (its `version` from the `ETag` when the body has none).
    private func storedItem(_ answer: Answer, table: String, request: String) async throws -> Item {
        try await check(answer, table: table)
        guard let json = try? JSON(parsing: answer.body), var item = WireFormat.item(json, schema: try await schema(table)) else {
            throw SyncTransportError(
                .rejected, statusCode: answer.status, message: "\(request): the answer is not a JSON object", responseBody: answer.text)
        }
        if item.value(forColumn: "version") == nil, let etag = answer.headers.first(name: "ETag"), let v = WireFormat.version(fromETag: etag) {
            item.values["version"] = .string(v)
        }
        return item
    }

    /// `GET tables/{table}/{id}` with deleted items included: the server's item, `nil` when missing.
    func read(table: String, id: String) async throws -> Item? {
        let flag = serviceProtocol == .datasync ? "__includedeleted=true" : "__includeDeleted=true"
        let answer = try await send(.GET, itemPath(table, id) + "?" + flag, write: false)
        if answer.status == 404 || answer.status == 410 { return nil }
        return try await storedItem(answer, table: table, request: "GET \(table)/\(id)")
    }

    private func schema(_ table: String) async throws -> TableSchema? {
        guard let schemas else { return nil }
        return try? await schemas.schema(of: table)
    }
}
