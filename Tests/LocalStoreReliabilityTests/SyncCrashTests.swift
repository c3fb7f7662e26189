import Foundation
import LocalStore
import LocalStoreReliability
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A client process that edits its store while a `SyncContext` pushes and pulls against a file-backed
/// table service is SIGKILLed at random moments, then restarted; after the last kill one more sync
/// must leave the service and the client with the newest committed edit of every item, no conflict
/// recorded and nothing queued. See docs/reliability.md, "Sync under SIGKILL".
@Suite("Crash safety: SIGKILL during sync", .serialized)
struct SyncCrashTests {
    /// Kills per backend (`make test`: 12; `make stress`: 300).
    static var kills: Int { Settings.int("LOCALSTORE_SYNC_CRASH_KILLS", 12) }

    @Test("a client killed while it syncs loses no edit and pushes nothing on a stale version", arguments: ReliabilityBackend.available)
    func killedSyncingClient(_ backend: ReliabilityBackend) async throws {
        let helper = try helperPath()
        let directory = try TempDirectory("sync-crash-\(backend)")
        let clientPath = backend.storePath(in: directory.url)
        let servicePath = directory.path("service.sqlite")
        var rng = SplitMix(seed: Settings.crashSeed ^ 0x5_1C)
        var edits: [SyncCrashWorkload.Edit] = []
        var killedMidEdit = 0
        let started = Date()
        for run in 0..<Self.kills {
            let child = try ChildProcess(
                executable: helper, arguments: ["sync", backend.rawValue, clientPath, servicePath, "\(run)", "\(rng.next())"])
            guard child.waitForLine(timeout: 60, { $0 == "ready" }) else {
                child.kill()
                Issue.record("run \(run): the client never became ready (\(child.wait())): \(child.errorOutput)")
                return
            }
            usleep(UInt32(5_000 + rng.below(150_000)))
            child.kill()
            let end = child.wait()
            guard end == .signal(SIGKILL) else {
                Issue.record("run \(run): the client ended with \(end) before it was killed: \(child.errorOutput)")
                return
            }
            let printed = SyncCrashWorkload.Edit.parse(child.outputLines)
            if printed.isEmpty { killedMidEdit += 1 }
            edits += printed
        }
        let client = try backend.open(path: clientPath)
        let problems = try await SyncCrashWorkload.verify(client: client, servicePath: servicePath, edits: edits)
        let items = try await client.read(Query(SyncCrashWorkload.schema.name, top: 0, includeTotalCount: true)).totalCount ?? 0
        try await client.close()
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
        #expect(edits.filter(\.isCommitted).count > Self.kills, "the client made edits between the kills")
        report(
            "sync-crash \(backend): \(Self.kills) kills, \(edits.filter(\.isCommitted).count) edits committed and printed (\(killedMidEdit) runs killed before their first), "
                + "\(items) items after the final sync, lost edits \(problems.filter { $0.contains("lost") || $0.contains("not on the service") }.count), "
                + "problems \(problems.count), \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }
}
