import Foundation
import LocalStore
import LocalStoreSQLite
import LocalStoreSync

/// The sync crash test's workload (docs/reliability.md, "Sync under SIGKILL"): a client process edits
/// its store and syncs it with a file-backed ``InMemoryTableService`` at the same time — in its own
/// process, or over HTTP through the test's loopback service — and is killed at random moments.
/// Every edit is printed after `enqueue` returned, so a printed edit is committed; after the last
/// kill the test syncs once more and checks that the service and the client hold the newest printed
/// edit of every item, with no conflict recorded (an operation pushed with a stale version would be
/// one).
public enum SyncCrashWorkload {
    /// The client's and the service's table.
    public static let schema = TableSchema(
        "SyncItem", ["id": .string, "text": .string, "version": .string, "updatedAt": .date, "createdAt": .date, "deleted": .boolean])

    /// Opens the service's store (SQLite, so that the child and the test share it through a file).
    public static func openService(path: String) async throws -> InMemoryTableService {
        let service = try InMemoryTableService(store: try SQLiteStore(path: path, options: SQLiteStore.Options(busyTimeout: .seconds(30))))
        try await service.defineTable(schema)
        return service
    }

    /// One printed edit: `edit <seq> <insert|update|delete> <item id>` after the enqueue returned
    /// (committed), or `will …` before it (committed only if the process lived long enough).
    public struct Edit: Sendable, Hashable {
        public var seq: Int
        public var kind: OperationKind
        public var itemId: String
        public var isCommitted: Bool

        /// Parses the printed lines of one run: its committed edits, and the edit it was making when
        /// killed (announced, not confirmed), if any.
        public static func parse(_ lines: [String]) -> [Edit] {
            var edits = lines.compactMap(Edit.init(line:))
            if let last = edits.last, !last.isCommitted {
                edits.removeLast()
                edits = edits.filter(\.isCommitted)
                edits.append(last)
            } else {
                edits = edits.filter(\.isCommitted)
            }
            return edits
        }

        /// Parses a printed line; `nil` for other lines.
        public init?(line: String) {
            let parts = line.split(separator: " ")
            guard parts.count == 4, parts[0] == "edit" || parts[0] == "will", let seq = Int(parts[1]),
                let kind = OperationKind.allCases.first(where: { $0.description == parts[2] })
            else { return nil }
            self.seq = seq
            self.kind = kind
            itemId = String(parts[3])
            isCommitted = parts[0] == "edit"
        }
    }

    /// The child: edits and syncs through `transport` (the service opened with ``openService(path:)``, or
    /// an HTTP transport to the test's loopback service) until killed. Edit texts are `e<seq>` with seq =
    /// `run` × 1,000,000 + n, so texts never repeat across runs. Prints `unanswered <n>` (operations the
    /// previous run sent and never read the answer of), "ready", then one line per committed edit.
    public static func runChild(
        client: any LocalStore, transport: any SyncTransport, run: Int, seed: UInt64, say: @escaping @Sendable (String) -> Void
    ) async throws {
        try await client.defineTable(schema)
        let sync = SyncContext(store: client, transport: transport, conflicts: ConflictPolicy.manual, settings: SyncSettings(pageSize: 20))
        var live = try await client.read(Query(schema.name)).items.compactMap(\.stringId)
        // Operations the killed run had sent without reading the answer (the next push asks the service).
        say("unanswered \(try await client.operationsMayBeOnServer().count)")
        say("ready")
        let syncer = Task {
            while !Task.isCancelled {
                _ = try await sync.push()
                _ = try await sync.pull(schema.name, queryId: "all")
            }
        }
        var rng = SplitMix(seed: seed)
        for n in 0..<999_999 {
            let seq = run * 1_000_000 + n
            let choice = rng.below(10)
            let text: Value = .string("e\(seq)")
            if live.isEmpty || choice < 3 {
                let id = "r\(run)-\(n)"
                say("will \(seq) insert \(id)")
                try await client.enqueue(.insert, ["id": .string(id), "text": text], into: schema.name)
                live.append(id)
                say("edit \(seq) insert \(id)")
            } else if choice < 9 {
                // Recent items: the ones most likely on the wire right now.
                let id = live[live.count - 1 - rng.below(min(live.count, 8))]
                say("will \(seq) update \(id)")
                try await client.enqueue(.update, ["id": .string(id), "text": text], into: schema.name)
                say("edit \(seq) update \(id)")
            } else {
                let id = live.remove(at: live.count - 1 - rng.below(min(live.count, 8)))
                say("will \(seq) delete \(id)")
                try await client.enqueue(.delete, ["id": .string(id)], into: schema.name)
                say("edit \(seq) delete \(id)")
            }
            try await Task.sleep(for: .microseconds(200 + rng.below(800)))
            if syncer.isCancelled { break }
        }
        syncer.cancel()
    }

    /// After the last kill: syncs `client` with the service until its queue is empty, then compares
    /// both with the printed edits. Returns the problems found (empty when none).
    public static func verify(client: any LocalStore, servicePath: String, edits: [Edit]) async throws -> [String] {
        let service = try await openService(path: servicePath)
        let problems = try await verify(client: client, service: service, through: service, edits: edits)
        try await service.store.close()
        return problems
    }

    /// After the last kill: syncs `client` through `transport` (the way the child reached `service`,
    /// e.g. HTTP) until its queue is empty, then compares `service`'s rows and the client's with the
    /// printed edits. Returns the problems found (empty when none).
    public static func verify(
        client: any LocalStore, service: InMemoryTableService, through transport: any SyncTransport, edits: [Edit]
    ) async throws -> [String] {
        try await client.defineTable(schema)
        return try await check(client: client, service: service, transport: transport, edits: edits)
    }

    private static func check(client: any LocalStore, service: InMemoryTableService, transport: any SyncTransport, edits: [Edit]) async throws -> [String] {
        let sync = SyncContext(store: client, transport: transport, conflicts: ConflictPolicy.manual)
        var problems: [String] = []
        for _ in 0..<5 where try await client.pendingOperationCount() > 0 {
            _ = try await sync.push()
        }
        _ = try await sync.pull(schema.name, queryId: "all")
        let errors = try await client.pushErrors()
        for e in errors.prefix(5) {
            problems.append("a push error after the final sync (an operation pushed on a stale version?): \(e.table)/\(e.itemId) #\(e.operationId) \(e.statusCode.map(String.init) ?? "-") \(e.message)")
        }
        if try await client.pendingOperationCount() > 0 { problems.append("\(try await client.pendingOperationCount()) operation(s) still queued") }
        let server = Dictionary(
            try await service.items(in: schema.name, includeDeleted: true).compactMap { i in i.stringId.map { ($0, i) } }, uniquingKeysWith: { a, _ in a })
        let local = Dictionary(try await client.read(Query(schema.name)).items.compactMap { i in i.stringId.map { ($0, i) } }, uniquingKeysWith: { a, _ in a })
        // The newest committed edit of each item, and an announced edit that may have committed after it.
        var newest: [String: Edit] = [:]
        var maybe: [String: Edit] = [:]
        for e in edits {
            if e.isCommitted {
                if (newest[e.itemId]?.seq ?? -1) < e.seq { newest[e.itemId] = e }
            } else if (maybe[e.itemId]?.seq ?? -1) < e.seq {
                maybe[e.itemId] = e
            }
        }
        func seq(_ item: Item?) -> Int? {
            guard case .string(let t)? = item?["text"], t.hasPrefix("e") else { return nil }
            return Int(t.dropFirst())
        }
        for (id, committed) in newest.sorted(by: { $0.key < $1.key }) {
            let s = server[id], l = local[id]
            let isLive = s.map { $0["deleted"] != .bool(true) } ?? false
            // An announced delete newer than the committed edit may have committed too.
            let deletedLater = maybe[id].map { $0.kind == .delete && $0.seq > committed.seq } ?? false
            if committed.kind == .delete || (deletedLater && !isLive) {
                if isLive { problems.append("\(id): deleted by edit \(committed.seq), live on the service (\(s?["text"] ?? .null))") }
                if l != nil { problems.append("\(id): deleted, still in the client store") }
                continue
            }
            guard let s, isLive else {
                problems.append("\(id): edit \(committed.seq) (\(committed.kind)) is not on the service")
                continue
            }
            // A later announced edit may have committed after the last confirmed one: never an older one.
            guard let have = seq(s), have >= committed.seq else {
                problems.append("\(id): the service has \(s["text"] ?? .null), older than edit \(committed.seq): an edit was lost")
                continue
            }
            if l?["text"] != s["text"] || l?["version"] != s["version"] {
                problems.append("\(id): the client has \(l?["text"] ?? .null)/\(l?["version"] ?? .null), the service \(s["text"] ?? .null)/\(s["version"] ?? .null)")
            }
        }
        for (id, l) in local where server[id]?["deleted"] == .bool(true) || server[id] == nil {
            problems.append("\(id): in the client store (\(l["text"] ?? .null)) but not live on the service")
        }
        return problems
    }
}
