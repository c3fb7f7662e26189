import Foundation
import LocalStore
import LocalStoreLoopbackService
import LocalStoreReliability
import LocalStoreSync
import LocalStoreSyncHTTP
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A client process that edits its store while a `SyncContext` pushes and pulls against a file-backed
/// table service is SIGKILLed at random moments, then restarted; after the last kill one more sync
/// must leave the service and the client with the newest committed edit of every item, no conflict
/// recorded and nothing queued. The service is in the client's process, or behind the loopback HTTP
/// service in this process (both protocols). See docs/reliability.md, "Sync under SIGKILL".
@Suite("Crash safety: SIGKILL during sync", .serialized)
struct SyncCrashTests {
    /// Kills per backend, and over HTTP per backend and protocol (`make test`: 12; `make stress`: 300).
    static var kills: Int { Settings.int("LOCALSTORE_SYNC_CRASH_KILLS", 12) }

    @Test("a client killed while it syncs loses no edit and pushes nothing on a stale version", arguments: ReliabilityBackend.available)
    func killedSyncingClient(_ backend: ReliabilityBackend) async throws {
        let helper = try helperPath()
        let directory = try TempDirectory("sync-crash-\(backend)")
        let clientPath = backend.storePath(in: directory.url)
        let servicePath = directory.path("service.sqlite")
        let started = Date()
        guard
            let runs = try await Self.killRepeatedly(helper: helper, kills: Self.kills, seed: Settings.crashSeed ^ 0x5_1C, arguments: { run, seed in
                ["sync", backend.rawValue, clientPath, servicePath, "\(run)", "\(seed)"]
            })
        else { return }
        let client = try backend.open(path: clientPath)
        let problems = try await SyncCrashWorkload.verify(client: client, servicePath: servicePath, edits: runs.edits)
        let items = try await client.read(Query(SyncCrashWorkload.schema.name, top: 0, includeTotalCount: true)).totalCount ?? 0
        try await client.close()
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
        #expect(runs.committed > Self.kills, "the client made edits between the kills")
        report(
            "sync-crash \(backend): \(Self.kills) kills, \(runs.committed) edits committed and printed (\(runs.killedMidEdit) runs killed before their first), "
                + "\(runs.unanswered) restarts with a push unanswered, "
                + "\(items) items after the final sync, lost edits \(Self.lost(problems)), "
                + "problems \(problems.count), \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    /// Every persistent backend in both protocols (an in-memory client loses its unpushed edits with its
    /// process by nature; it syncs over HTTP in LocalStoreSyncTests' scenario instead).
    static let httpCases: [(ReliabilityBackend, SyncServiceProtocol)] = ReliabilityBackend.available.flatMap { b in SyncServiceProtocol.all.map { (b, $0) } }

    @Test("over HTTP (the loopback service in this process): a killed client loses no edit and pushes nothing on a stale version",
          arguments: httpCases)
    func killedSyncingClientOverHTTP(_ backend: ReliabilityBackend, _ wire: SyncServiceProtocol) async throws {
        let wireName = wire.name
        let kills = Self.kills
        let helper = try helperPath()
        let directory = try TempDirectory("sync-crash-http-\(backend)-\(wireName)")
        let clientPath = backend.storePath(in: directory.url)
        let servicePath = directory.path("service.sqlite")
        let started = Date()
        // The service's rows live in a SQLite file that only this process opens; the children reach it
        // through the loopback service, which outlives every kill.
        let service = try await SyncCrashWorkload.openService(path: servicePath)
        let loopback = try await LoopbackService.start(service, protocol: wire)
        let seed = Settings.crashSeed ^ 0x5_1C ^ (wire == .datasync ? 0x3_00 : 0x2_00)
        let runs = try await Self.killRepeatedly(helper: helper, kills: kills, seed: seed, arguments: { run, seed in
            ["sync", backend.rawValue, clientPath, servicePath, "\(run)", "\(seed)", "--service", loopback.baseURL, "--protocol", wireName]
        })
        let during = loopback.requests
        var problems: [String] = []
        var items = 0
        if let runs {
            // The final sync over HTTP too, in the same protocol.
            let client = try backend.open(path: clientPath)
            let transport = HTTPSyncTransport(.init(baseURL: loopback.baseURL, protocol: wire, timeout: .seconds(20)), schemas: client)
            problems = try await SyncCrashWorkload.verify(client: client, service: service, through: transport, edits: runs.edits)
            items = try await client.read(Query(SyncCrashWorkload.schema.name, top: 0, includeTotalCount: true)).totalCount ?? 0
            try await client.close()
        }
        await loopback.stop()
        try await service.store.close()
        guard let runs else { return }
        let writes = during.filter { $0.method != "GET" }.count
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
        #expect(runs.committed > kills, "the client made edits between the kills")
        #expect(writes > 0, "the killed clients pushed over HTTP")
        #expect(during.allSatisfy { $0.headers["zumo-api-version"] == wire.version }, "every request in protocol \(wire.version)")
        report(
            "sync-crash-http \(backend) \(wireName): \(kills) kills, \(runs.committed) edits committed and printed (\(runs.killedMidEdit) runs killed before their first), "
                + "\(runs.unanswered) restarts with a push unanswered, "
                + "\(during.count) requests while killed (\(writes) writes), \(items) items after the final sync, lost edits \(Self.lost(problems)), "
                + "problems \(problems.count), \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    static func lost(_ problems: [String]) -> Int { problems.filter { $0.contains("lost") || $0.contains("not on the service") }.count }

    /// The edits the runs printed.
    struct Runs {
        var edits: [SyncCrashWorkload.Edit] = []
        var killedMidEdit = 0
        /// Runs that started with an operation the run before sent and never read the answer of.
        var unanswered = 0
        var committed: Int { edits.filter(\.isCommitted).count }
    }

    /// How one run of the child ended.
    enum Run: Sendable {
        case killed(lines: [String])
        case failed(String)
    }

    /// Starts the child `kills` times (`arguments(run, seed)`), each killed 5–155 ms after it is ready;
    /// `nil` after recording an issue. The waits are on a thread of their own: the loopback service
    /// answers the child on Swift's cooperative pool, which a blocking wait would take a thread of.
    static func killRepeatedly(
        helper: String, kills: Int, seed: UInt64, arguments: (_ run: Int, _ seed: UInt64) -> [String]
    ) async throws -> Runs? {
        var rng = SplitMix(seed: seed)
        var runs = Runs()
        for run in 0..<kills {
            let args = arguments(run, rng.next())
            let delay = UInt32(5_000 + rng.below(150_000))
            switch try await onOwnThread({ try killOnce(helper: helper, arguments: args, afterReady: delay) }) {
            case .failed(let why):
                Issue.record("run \(run): \(why)")
                return nil
            case .killed(let lines):
                let printed = SyncCrashWorkload.Edit.parse(lines)
                if printed.isEmpty { runs.killedMidEdit += 1 }
                if lines.contains(where: { $0.hasPrefix("unanswered ") && $0 != "unanswered 0" }) { runs.unanswered += 1 }
                runs.edits += printed
            }
        }
        return runs
    }

    /// One run: the child started, SIGKILLed `microseconds` after it printed "ready", waited for. Blocks.
    static func killOnce(helper: String, arguments: [String], afterReady microseconds: UInt32) throws -> Run {
        let child = try ChildProcess(executable: helper, arguments: arguments)
        guard child.waitForLine(timeout: 60, { $0 == "ready" }) else {
            child.kill()
            return .failed("the client never became ready (\(child.wait())): \(child.errorOutput)")
        }
        usleep(microseconds)
        child.kill()
        let end = child.wait()
        guard end == .signal(SIGKILL) else { return .failed("the client ended with \(end) before it was killed: \(child.errorOutput)") }
        return .killed(lines: child.outputLines)
    }
}
