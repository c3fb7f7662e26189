import Foundation
import LocalStore
import LocalStoreSync
import LocalStoreSyncHTTP
import LocalStoreLoopbackService
import LocalStoreSQLCipher
import TodoSyncKit
import Testing

/// How a test's clients reach the service: directly (``InMemoryTableService`` as the transport) or over
/// HTTP through the loopback service in one of the two protocols.
enum Wire: String, CaseIterable, Sendable, CustomStringConvertible {
    case direct, azureMobileApps, datasync

    var serviceProtocol: SyncServiceProtocol? {
        switch self {
        case .direct: nil
        case .azureMobileApps: .azureMobileApps
        case .datasync: .datasync
        }
    }
    var description: String { rawValue }

    func connect(_ service: InMemoryTableService) async throws -> Network {
        guard let p = serviceProtocol else { return Network(service: service, loopback: nil) }
        return Network(service: service, loopback: try await LoopbackService.start(service, protocol: p))
    }
}

/// The transports of one test.
struct Network: Sendable {
    let service: InMemoryTableService
    let loopback: LoopbackService?

    /// The transport of a client whose store is `store` (its schemas type the items).
    func transport(_ store: any LocalStore, retry: HTTPSyncTransport.RetryPolicy = .never) -> any SyncTransport {
        guard let loopback else { return service }
        return HTTPSyncTransport(
            .init(baseURL: loopback.baseURL, protocol: loopback.serviceProtocol, timeout: .seconds(20), retry: retry), schemas: store)
    }

    func stop() async { await loopback?.stop() }
}

/// Holds one request to the protocol's documented form (docs/sync-http.md; ../shared/service-protocols.md
/// §1–§4): the version header, JSON on writes without system columns, the protocol's replace method
/// and table route, `If-Match` as one quoted tag, and a query string in the protocol's OData dialect
/// that parses and renders back to the same text.
func checkDocumentedForm(_ r: LoopbackService.Recorded, _ p: SyncServiceProtocol, sourceLocation: SourceLocation = #_sourceLocation) {
    let label = "\(p.version) \(r)"
    #expect(r.headers["zumo-api-version"] == p.version, "\(label)", sourceLocation: sourceLocation)
    #expect(r.headers["accept"] == "application/json", "\(label)", sourceLocation: sourceLocation)
    let route = p == .azureMobileApps ? "/tables/TodoItem" : "/tables/todoitem"
    #expect(r.path == route || r.path.hasPrefix(route + "/"), "route of \(label)", sourceLocation: sourceLocation)
    switch r.method {
    case "POST", "PUT", "PATCH":
        #expect(r.method != "PUT" || p == .datasync, "\(label): PUT is 3.0.0's replace", sourceLocation: sourceLocation)
        #expect(r.method != "PATCH" || p == .azureMobileApps, "\(label): PATCH is 2.0.0's replace", sourceLocation: sourceLocation)
        #expect(r.headers["content-type"] == "application/json", "\(label)", sourceLocation: sourceLocation)
        let body = try? JSON(parsing: Array(r.body.utf8))
        guard case .object(let members)? = body else {
            Issue.record("\(label): the body is not a JSON object: \(r.body)", sourceLocation: sourceLocation)
            return
        }
        for key in members.keys {
            #expect(!["createdat", "updatedat", "deleted", "version"].contains(key.lowercased()), "\(label): body holds \(key)", sourceLocation: sourceLocation)
        }
        if r.method != "POST" {
            #expect(r.headers["if-match"].map { $0.hasPrefix("\"") && $0.hasSuffix("\"") } ?? true, "\(label)", sourceLocation: sourceLocation)
        }
    case "DELETE":
        #expect(r.body.isEmpty, "\(label)", sourceLocation: sourceLocation)
    case "GET":
        let query = r.query ?? ""
        if r.path == route {
            // Deleted items asked for in the protocol's spelling (the engine's pulls always ask).
            if query.lowercased().contains("__includedeleted") {
                #expect(query.contains(p == .azureMobileApps ? "__includeDeleted=true" : "__includedeleted=true"), "\(label)", sourceLocation: sourceLocation)
            }
            if p == .azureMobileApps {
                #expect(!query.contains("cast("), "\(label): v3 has no cast", sourceLocation: sourceLocation)
            } else {
                #expect(!query.contains("datetimeoffset'"), "\(label): v4 has no datetimeoffset literal", sourceLocation: sourceLocation)
            }
            do {
                let parsed = try PullRequest.parse(query.replacingOccurrences(of: "__includedeleted=", with: "__includeDeleted="), table: "TodoItem", dialect: p.dialect)
                var rendered = try parsed.queryString()
                if p == .datasync { rendered = rendered.replacingOccurrences(of: "__includeDeleted=", with: "__includedeleted=") }
                #expect(rendered == query, "\(label): render(parse(q)) == q", sourceLocation: sourceLocation)
            } catch {
                Issue.record("\(label): the query does not parse: \(error)", sourceLocation: sourceLocation)
            }
        }
    default:
        Issue.record("\(label): not a method of the protocol", sourceLocation: sourceLocation)
    }
}

@Suite("Sync over HTTP: the transports against the loopback service")
struct HTTPTransportTests {
    static let cases: [(SyncBackend, Wire)] = SyncBackend.all.flatMap { b in [Wire.azureMobileApps, .datasync].map { (b, $0) } }

    @Test("a connection dropped mid-push or mid-pull, before or after the service applied the request: nothing lost, the next sync completes",
          arguments: cases)
    func droppedConnections(_ backend: SyncBackend, _ wire: Wire) async throws {
        let dirA = try temporaryDirectory("a"), dirB = try temporaryDirectory("b")
        defer { for d in [dirA, dirB] { try? FileManager.default.removeItem(at: d) } }
        let service = try InMemoryTableService()
        try await service.defineTable(TodoClient.schema)
        let network = try await wire.connect(service)
        let loopback = try #require(network.loopback)
        let storeA = try backend.open(dirA), storeB = try backend.open(dirB)
        let a = try await TodoClient(store: storeA, service: network.transport(storeA), policy: .manual)
        let b = try await TodoClient(store: storeB, service: network.transport(storeB), policy: .manual)
        let route = wire == .azureMobileApps ? "/tables/TodoItem" : "/tables/todoitem"
        let replace = wire.serviceProtocol?.replaceMethod ?? "PUT"

        var expected: [String: String] = [:]
        for (n, (method, when)) in [
            ("POST", LoopbackService.Drop.beforeApplying), ("POST", .afterApplying), (replace, .beforeApplying), (replace, .afterApplying),
            ("DELETE", .afterApplying), ("DELETE", .beforeApplying), ("GET", .beforeApplying), ("GET", .afterApplying),
        ].enumerated() {
            let id = "d\(n)"
            // Every step starts from an item the service has, except the inserts.
            if method != "POST" {
                try await a.save(id, "\(id)-0")
                try await a.sync()
            }
            switch method {
            case "POST": try await a.save(id, "\(id)-new")
            case "DELETE": try await a.delete(id)
            case "GET":
                try await b.sync()  // B edits the item A made
                try await b.save(id, "\(id)-from-b")
            default: try await a.save(id, "\(id)-edited")
            }
            if method == "GET" { try await b.sync() }
            loopback.dropNext(method, pathPrefix: route, when)
            await #expect(throws: SyncTransportError.self, "\(method) dropped \(when)") { try await a.sync() }
            // Nothing lost: the operation is still queued (or was recognised), and the next sync completes.
            let next = try await a.sync()
            #expect(next.push?.isComplete ?? true, "\(method) \(when): \(String(describing: next.push))")
            #expect(try await storeA.pendingOperationCount() == 0, "\(method) \(when)")
            #expect(try await storeA.pushErrors().isEmpty, "\(method) \(when)")
            switch method {
            case "POST": expected[id] = "\(id)-new"
            case "DELETE": expected[id] = nil
            case "GET": expected[id] = "\(id)-from-b"
            default: expected[id] = "\(id)-edited"
            }
            #expect(try await a.text(id) == expected[id], "\(method) \(when)")
        }
        try await b.sync()
        let server = replica(try await service.items(in: "TodoItem"))
        #expect(server.mapValues { $0["text"]?.stringValue } == expected)
        #expect(replica(try await storeA.read(Query("TodoItem")).items) == server)
        #expect(replica(try await storeB.read(Query("TodoItem")).items) == server)
        for request in loopback.requests { checkDocumentedForm(request, loopback.serviceProtocol) }
        try await storeA.close()
        try await storeB.close()
        await network.stop()
    }

    @Test("requests: If-Match escaping, a 2.0.0 insert conflict reads the server's item, errors keep status and body",
          arguments: [Wire.azureMobileApps, .datasync])
    func requestsAndErrors(_ wire: Wire) async throws {
        let service = try InMemoryTableService()
        try await service.defineTable(TodoClient.schema)
        let network = try await wire.connect(service)
        let loopback = try #require(network.loopback)
        let p = try #require(wire.serviceProtocol)
        let transport = HTTPSyncTransport(.init(baseURL: loopback.baseURL, protocol: p, retry: .never))
        let stored = try await transport.insert(["id": "x/1 ?#%", "text": "a", "updatedAt": .date(Date()), "version": "v"], into: "TodoItem")
        #expect(stored["text"] == "a")
        #expect(stored["updatedAt"]?.dateValue != nil, "system dates come back typed")
        let version = try #require(stored["version"]?.stringValue)
        // The id is one path segment however it is spelled.
        let insert = try #require(loopback.requests.last)
        #expect(insert.method == "POST" && insert.body.contains("\"id\":\"x/1 ?#%\""))
        // A second insert of the id: a conflict carrying the server's item (2.0.0: read with a GET).
        let conflict = await #expect(throws: SyncTransportError.self) { _ = try await transport.insert(["id": "x/1 ?#%", "text": "b"], into: "TodoItem") }
        #expect(conflict?.kind == .conflict && conflict?.statusCode == 409)
        #expect(conflict?.serverItem?["text"] == "a" && conflict?.serverItem?["version"]?.stringValue == version)
        // A replace on a stale version: 412 with the server's item; the request's If-Match is the quoted version.
        let stale = await #expect(throws: SyncTransportError.self) {
            _ = try await transport.replace(["id": "x/1 ?#%", "text": "c"], in: "TodoItem", ifVersion: "not-\"it\"")
        }
        if p == .azureMobileApps {
            #expect(stale?.kind == .preconditionFailed && stale?.serverItem?["text"] == "a")
            #expect(loopback.requests.last?.headers["if-match"] == "\"not-\\\"it\\\"\"")
        } else {
            #expect(stale?.kind == .rejected, "3.0.0 cannot send a version holding a quote")
        }
        let replaced = try await transport.replace(["id": "x/1 ?#%", "text": "c"], in: "TodoItem", ifVersion: version)
        #expect(replaced["text"] == "c" && replaced["version"]?.stringValue != version)
        #expect(loopback.requests.last?.method == p.replaceMethod && loopback.requests.last?.headers["if-match"] == "\"\(version)\"")
        // A missing item: notFound, status and the server's body kept.
        let missing = await #expect(throws: SyncTransportError.self) { try await transport.delete(id: "nope", from: "TodoItem", ifVersion: nil) }
        #expect(missing?.kind == .notFound && missing?.statusCode == 404 && missing?.responseBody != nil)
        // A page: the protocol's envelope read, dates typed.
        let page = try await transport.page(PullRequest(query: Query("TodoItem", where: Field("updatedAt") >= .literal(.date(Date(timeIntervalSince1970: 0))), top: 10)))
        #expect(page.items.map(\.stringId) == ["x/1 ?#%"])
        #expect(page.items.first?["updatedAt"]?.dateValue != nil)
        for request in loopback.requests { checkDocumentedForm(request, p) }
        await network.stop()
    }

    @Test("a stalled request ends at the timeout as transient; cancelling the calling task ends the call at once")
    func timeoutAndCancellation() async throws {
        let service = try InMemoryTableService()
        try await service.defineTable(TodoClient.schema)
        let network = try await Wire.datasync.connect(service)
        let loopback = try #require(network.loopback)
        let quick = HTTPSyncTransport(.init(baseURL: loopback.baseURL, protocol: .datasync, timeout: .milliseconds(300), retry: .never))
        loopback.dropNext("GET", pathPrefix: "/tables/todoitem", .stall)
        let clock = ContinuousClock()
        var start = clock.now
        let timedOut = await #expect(throws: SyncTransportError.self) { _ = try await quick.page(PullRequest(query: Query("TodoItem"))) }
        #expect(timedOut?.kind == .transient)
        #expect(clock.now - start < .seconds(10))
        // Cancelled while stalled (a timeout of a minute): the call ends with CancellationError, nothing written.
        let patient = HTTPSyncTransport(.init(baseURL: loopback.baseURL, protocol: .datasync, timeout: .seconds(60), retry: .never))
        loopback.dropNext("POST", pathPrefix: "/tables/todoitem", .stall)
        start = clock.now
        let call = Task { try await patient.insert(["id": "c1", "text": "x"], into: "TodoItem") }
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        await #expect(throws: CancellationError.self) { _ = try await call.value }
        #expect(clock.now - start < .seconds(10))
        #expect(try await service.items(in: "TodoItem").isEmpty)
        await network.stop()
    }

    @Test("retries: a page is retried on 503 with the provider's fresh header; a write is not retried on 502; unreachable is transient")
    func retries() async throws {
        let service = try InMemoryTableService()
        try await service.defineTable(TodoClient.schema)
        let network = try await Wire.datasync.connect(service)
        let loopback = try #require(network.loopback)
        let calls = Box(0)
        let transport = HTTPSyncTransport(
            .init(
                baseURL: loopback.baseURL, protocol: .datasync,
                authentication: {
                    calls.value += 1
                    return [.init("Authorization", "Bearer token-\(calls.value)")]
                },
                retry: .init(maximumAttempts: 3, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50))))
        await service.failNextRequests(2, with: SyncTransportError(.transient, message: "busy"))
        let page = try await transport.page(PullRequest(query: Query("TodoItem", top: 5)))
        #expect(page.items.isEmpty && calls.value == 3)
        #expect(loopback.requests.map { $0.headers["authorization"] } == ["Bearer token-1", "Bearer token-2", "Bearer token-3"])
        // A write answered 502 may have landed: returned at once, not sent again.
        await service.failNextRequests(1, with: SyncTransportError(.transient, statusCode: 502, message: "gateway"))
        let before = loopback.requests.count
        let failed = await #expect(throws: SyncTransportError.self) { _ = try await transport.insert(["id": "w1", "text": "x"], into: "TodoItem") }
        #expect(failed?.kind == .transient && failed?.statusCode == 502 && loopback.requests.count == before + 1)
        for request in loopback.requests { checkDocumentedForm(request, .datasync) }
        // An answer longer than the limit is refused, not retried.
        let small = HTTPSyncTransport(.init(baseURL: loopback.baseURL, protocol: .datasync, retry: .standard, maximumResponseBytes: 8))
        let pagesBefore = loopback.requests.count
        let tooLong = await #expect(throws: SyncTransportError.self) { _ = try await small.page(PullRequest(query: Query("TodoItem"))) }
        #expect(tooLong?.kind == .rejected && loopback.requests.count == pagesBefore + 1)
        await network.stop()
        // Nothing listening: transient (the push stops and is tried later). AsyncHTTPClient keeps trying to
        // connect until the attempt's deadline, so this takes the whole timeout.
        let gone = HTTPSyncTransport(.init(baseURL: loopback.baseURL, protocol: .datasync, timeout: .seconds(1), retry: .never))
        let unreachable = await #expect(throws: SyncTransportError.self) { _ = try await gone.page(PullRequest(query: Query("TodoItem"))) }
        #expect(unreachable?.kind == .transient)
    }
}

/// The example client in its `--service URL` mode, against the loopback service in each protocol.
@Suite("todo-sync --service: the example over HTTP")
struct TodoSyncOverHTTPTests {
    static let cases: [(String, Wire)] = ["memory", "sqlite", "sqlcipher", "lmdb"].flatMap { b in [Wire.azureMobileApps, .datasync].map { (b, $0) } }
        .filter { $0.0 != "sqlcipher" || SQLCipherLibrary.processRefusal == nil }

    @Test("the scripted session ends with the service's items, nothing queued, the token at the latest change", arguments: cases)
    func example(_ backend: String, _ wire: Wire) async throws {
        let dir = try temporaryDirectory("todo")
        defer { try? FileManager.default.removeItem(at: dir) }
        let service = try InMemoryTableService()
        try await service.defineTable(Todo.schema)
        let network = try await wire.connect(service)
        let loopback = try #require(network.loopback)
        let store = backend == "memory" ? "memory:" : "\(backend):\(dir.appendingPathComponent("todo").path)"
        let version = loopback.serviceProtocol.version
        // Waited for on a thread of its own: the service answers on Swift's cooperative pool, which a
        // blocking wait would take a thread of.
        let result = try await withCheckedThrowingContinuation { (done: CheckedContinuation<(status: Int32, output: String), any Error>) in
            Thread.detachNewThread {
                done.resume(
                    with: Result {
                        try runTodoSync(["--store", store, "--service", loopback.baseURL, "--protocol", version], environment: [
                            "TODO_SYNC_KEY": String(repeating: "ab", count: 32), "TODO_SYNC_TOKEN": "t0ken",
                        ])
                    })
            }
        }
        #expect(result.status == 0, "todo-sync failed: \(result.output)")
        #expect(result.output.contains("pull: 3 items in 2 pages"), "\(result.output)")
        #expect(result.output.contains("push: 3 sent, 1 conflict resolved, 0 failed"), "\(result.output)")
        #expect(result.output.contains("final: 4 items, 0 pending operations, 0 push errors"), "\(result.output)")
        let texts = try await service.items(in: Todo.table).compactMap { $0["text"]?.stringValue }.sorted()
        #expect(texts == TodoSyncDemo.expectedTexts)
        let header = wire == .azureMobileApps ? "x-zumo-auth" : "authorization"
        let expected = wire == .azureMobileApps ? "t0ken" : "Bearer t0ken"
        #expect(loopback.requests.allSatisfy { $0.headers[header] == expected })
        for request in loopback.requests { checkDocumentedForm(request, loopback.serviceProtocol) }
        await network.stop()
    }
}

/// Runs the `todo-sync` executable built next to the test bundle.
func runTodoSync(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let p = Process()
    p.executableURL = here.appendingPathComponent("todo-sync")
    p.arguments = arguments
    p.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("SyncServiceProtocol's command-line names")
struct ServiceProtocolNameTests {
    @Test("each protocol is found by its name, and only by it (case-sensitively)")
    func namesRoundTrip() {
        for p in SyncServiceProtocol.all { #expect(SyncServiceProtocol(name: p.name) == p) }
        #expect(Set(SyncServiceProtocol.all.map(\.name)) == ["azureMobileApps", "datasync"])
        #expect(SyncServiceProtocol(name: "Datasync") == nil)
        #expect(SyncServiceProtocol(name: "") == nil)
    }
}
