import Foundation
import HTTPTypes
import Hummingbird
import LocalStore
import LocalStoreSync
import LocalStoreSyncHTTP
import NIOCore
import Synchronization

/// A table service on 127.0.0.1 that speaks both wire protocols over HTTP (docs/sync-http.md), backed
/// by an ``InMemoryTableService`` (and so by a LocalStore store): the HTTP transports' tests
/// (LocalStoreSyncTests) and the sync crash test over HTTP (LocalStoreReliabilityTests) run the sync
/// engine against it. Every request is recorded (method, path, query, headers, body) so that the
/// tests can hold each one to the documented form, and the next matching request can be made to lose
/// its connection, before or after the service applied it.
///
/// A test-support target (Hummingbird): only test targets depend on it, no library product does.
public final class LoopbackService: Sendable {
    /// One request as received.
    public struct Recorded: Sendable, CustomStringConvertible {
        public var method: String
        public var path: String
        public var query: String?
        public var headers: [String: String]
        public var body: String
        public var description: String { "\(method) \(path)\(query.map { "?" + $0 } ?? "")" }
    }

    /// When a dropped connection happens: before the service applies the request, or after (the
    /// answer is lost); or the request stalls (no answer for 4 s, nothing applied).
    public enum Drop: Sendable { case beforeApplying, afterApplying, stall }

    /// The service the requests are applied to.
    public let service: InMemoryTableService
    /// The wire protocol the service speaks.
    public let serviceProtocol: SyncServiceProtocol
    private let state = Mutex<(recorded: [Recorded], drops: [(method: String, pathPrefix: String, when: Drop)])>(([], []))
    private let task: Mutex<Task<Void, any Error>?> = Mutex(nil)
    /// The port on 127.0.0.1.
    public let port: Int

    /// `http://127.0.0.1:<port>`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }
    /// Every request received so far, in order.
    public var requests: [Recorded] { state.withLock { $0.recorded } }

    /// Starts the service on a free port of 127.0.0.1.
    public static func start(_ service: InMemoryTableService, protocol p: SyncServiceProtocol) async throws -> LoopbackService {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let handlerBox = Mutex<LoopbackService?>(nil)
        let router = Router(context: LoopbackContext.self)
        // A request that arrives before the service object exists (the port is new; not expected) is a 503.
        let route: @Sendable (Request, LoopbackContext) async throws -> Response = { request, context in
            guard let handler = handlerBox.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            return try await handler.handle(request, context)
        }
        router.on("tables/{table}", method: .get, use: route)
        router.on("tables/{table}", method: .post, use: route)
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] {
            router.on("tables/{table}/{id}", method: method, use: route)
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) })
        let task = Task { try await app.run() }
        var port = 0
        for await p in stream {
            port = p
            break
        }
        let loopback = LoopbackService(service: service, protocol: p, port: port)
        loopback.task.withLock { $0 = task }
        handlerBox.withLock { $0 = loopback }
        return loopback
    }

    private init(service: InMemoryTableService, protocol p: SyncServiceProtocol, port: Int) {
        self.service = service
        self.serviceProtocol = p
        self.port = port
    }

    /// Stops the server.
    public func stop() async {
        let task = self.task.withLock { $0 }
        task?.cancel()
        _ = try? await task?.value
    }

    /// The next request with `method` whose path starts with `pathPrefix` loses its connection.
    public func dropNext(_ method: String, pathPrefix: String, _ when: Drop) {
        state.withLock { $0.drops.append((method, pathPrefix, when)) }
    }

    // MARK: Handling

    private func takeDrop(_ method: String, _ path: String) -> Drop? {
        state.withLock { s in
            guard let i = s.drops.firstIndex(where: { $0.method == method && path.hasPrefix($0.pathPrefix) }) else { return nil }
            return s.drops.remove(at: i).when
        }
    }

    private func handle(_ request: Request, _ context: LoopbackContext) async throws -> Response {
        let body = try await request.body.collect(upTo: 16 << 20)
        let bodyBytes = Array(body.readableBytesView)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let method = request.method.rawValue
        let path = request.uri.path
        state.withLock {
            $0.recorded.append(Recorded(method: method, path: path, query: request.uri.query, headers: headers, body: String(decoding: bodyBytes, as: UTF8.self)))
        }
        let drop = takeDrop(method, path)
        if drop == .stall {
            // An answer that does not come (until the client gives up).
            try? await Task.sleep(for: .seconds(4))
            return Response(status: .serviceUnavailable)
        }
        if drop == .beforeApplying {
            try await context.channel.close()
            return Response(status: .internalServerError)
        }
        let response = await answer(request, context, bodyBytes, headers)
        if drop == .afterApplying {
            try await context.channel.close()
        }
        return response
    }

    private func answer(_ request: Request, _ context: LoopbackContext, _ body: [UInt8], _ headers: [String: String]) async -> Response {
        // 2.0.0 back ends refuse a request without the protocol version (a 400, as Node and ASP.NET do).
        if serviceProtocol == .azureMobileApps {
            guard let v = headers["zumo-api-version"], v.hasPrefix("2.0.") else {
                return json(.badRequest, ["error": .string("ZUMO-API-VERSION 2.0.x is required")])
            }
        }
        guard let table = context.parameters.get("table") else { return json(.notFound, [:]) }
        let id = context.parameters.get("id").flatMap { $0.removingPercentEncoding }
        do {
            switch (request.method, id) {
            case (.get, nil):
                return try await page(table, query: request.uri.query ?? "")
            case (.get, let id?):
                return try await read(table, id: id, query: request.uri.query ?? "")
            case (.post, nil):
                guard headers["content-type"]?.hasPrefix("application/json") == true else { return json(.unsupportedMediaType, [:]) }
                let item = try decode(body)
                let stored = try await service.insert(item, into: table)
                return itemResponse(.created, stored)
            case (.patch, let id?) where serviceProtocol == .azureMobileApps, (.put, let id?) where serviceProtocol == .datasync:
                var item = try decode(body)
                if let sent = item.stringId, sent != id { return json(.badRequest, ["error": .string("the id in the body is not the id in the URL")]) }
                item.values["id"] = .string(id)
                let stored = try await service.replace(item, in: table, ifVersion: try ifMatch(headers))
                return itemResponse(.ok, stored)
            case (.delete, let id?):
                try await service.delete(id: id, from: table, ifVersion: try ifMatch(headers))
                return Response(status: .noContent)
            default:
                return json(.methodNotAllowed, ["error": .string("\(request.method) is not a route of protocol \(serviceProtocol.version)")])
            }
        } catch let e as SyncTransportError {
            // The simulated network failures of the service (offline, injected) answer 503.
            let status = HTTPResponse.Status(code: e.statusCode ?? (e.kind == .transient ? 503 : 500))
            if let server = e.serverItem { return itemResponse(status, server) }
            // 3.0.0 answers a deleted item with 410.
            if serviceProtocol == .datasync, e.kind == .notFound, let id, (try? await isDeleted(table, id)) == true {
                return Response(status: .gone)
            }
            return json(status, ["error": .string(e.message)])
        } catch let e as BadRequest {
            return json(.badRequest, ["error": .string(e.message)])
        } catch {
            return json(.internalServerError, ["error": .string("\(error)")])
        }
    }

    struct BadRequest: Error { var message: String }

    private func decode(_ body: [UInt8]) throws -> Item {
        guard let json = try? JSON(parsing: body), case .object(let members) = json else { throw BadRequest(message: "the body is not a JSON object") }
        let lowered = Set(members.keys.map { ASCII.lowercased($0) })
        // A 2.0.0 Node back end refuses the server's own columns in a body.
        if serviceProtocol == .azureMobileApps, let bad = ["createdat", "updatedat", "deleted"].first(where: lowered.contains) {
            throw BadRequest(message: "the body holds the system property \(bad)")
        }
        return ItemJSON.item(json) ?? Item()
    }

    private func ifMatch(_ headers: [String: String]) throws -> String? {
        guard let tag = headers["if-match"] else { return nil }
        guard tag.count >= 2, tag.first == "\"", tag.last == "\"" else { throw BadRequest(message: "If-Match must be one strong tag") }
        let inner = String(tag.dropFirst().dropLast())
        return serviceProtocol == .azureMobileApps ? inner.replacingOccurrences(of: "\\\"", with: "\"") : inner
    }

    private func isDeleted(_ table: String, _ id: String) async throws -> Bool {
        try await service.items(in: table, includeDeleted: true).contains { $0.stringId == id && $0["deleted"] == .bool(true) }
    }

    private func page(_ table: String, query: String) async throws -> Response {
        let request: PullRequest
        do {
            request = try PullRequest.parse(query, table: table, dialect: serviceProtocol.dialect)
        } catch {
            throw BadRequest(message: "\(error)")
        }
        // 2.0.0 reads exactly `__includeDeleted`; 3.0.0 any case.
        let includeDeleted = request.includeDeleted
            || (serviceProtocol == .datasync && request.parameters.contains { ASCII.lowercased($0.name) == "__includedeleted" && $0.value == "true" })
        var q = request.query
        let asked = q.top
        let pageSize = serviceProtocol == .azureMobileApps ? 50 : 100
        q.top = min(asked ?? pageSize, serviceProtocol == .azureMobileApps ? 1000 : 128_000)
        let result = try await service.page(PullRequest(query: q, includeDeleted: includeDeleted, dialect: serviceProtocol.dialect))
        let rows = JSON.array(result.items.map(ItemJSON.object))
        if serviceProtocol == .azureMobileApps {
            var response = json(.ok, request.query.includeTotalCount ? .object(["results": rows, "count": .int(Int64(result.items.count))]) : rows)
            if let top = q.top, result.items.count == top, (asked ?? .max) > top, let link = HTTPField.Name("Link") {
                response.headers[link] = "\(baseURL)/tables/\(table)?$skip=\(q.skip + top); rel=next"
            }
            return response
        }
        // 3.0.0: the envelope, nextLink while the filtered count is beyond this page.
        var all = q
        all.skip = 0
        all.top = nil
        let total = try await service.page(PullRequest(query: all, includeDeleted: includeDeleted)).items.count
        let next = q.skip + result.items.count
        var nextLink: JSON = .null
        if next < total {
            var rest = request.query
            rest.skip = next
            if let t = rest.top { rest.top = max(0, t - result.items.count) }
            nextLink = .string(try PullRequest(query: rest, includeDeleted: includeDeleted, parameters: request.parameters, dialect: .v4).queryString())
        }
        return json(.ok, .object(["items": rows, "count": request.query.includeTotalCount ? .int(Int64(total)) : .null, "nextLink": nextLink]))
    }

    private func read(_ table: String, id: String, query: String) async throws -> Response {
        let includeDeleted = query.lowercased().contains("__includedeleted=true")
        guard let item = try await service.items(in: table, includeDeleted: true).first(where: { $0.stringId == id }) else {
            return json(.notFound, [:])
        }
        if item["deleted"] == .bool(true), !includeDeleted { return Response(status: serviceProtocol == .datasync ? .gone : .notFound) }
        return itemResponse(.ok, item)
    }

    private func itemResponse(_ status: HTTPResponse.Status, _ item: Item) -> Response {
        var wire = item
        if serviceProtocol == .datasync { wire.values["createdAt"] = nil }
        var response = json(status, ItemJSON.object(wire))
        if let version = item["version"]?.stringValue { response.headers[.eTag] = "\"\(version)\"" }
        return response
    }

    private func json(_ status: HTTPResponse.Status, _ body: JSON) -> Response {
        var out: [UInt8] = []
        body.write(into: &out)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: out)))
    }
}

/// The request context of the loopback service: the channel, so that a test can drop a connection.
struct LoopbackContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
