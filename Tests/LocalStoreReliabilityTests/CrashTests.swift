import Foundation
import LocalStore
import LocalStoreReliability
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A writer process is killed with SIGKILL at random (seeded) moments, many times in a row on the same
/// store; after every kill the store must open, hold every reported transaction entirely, no
/// transaction partly, and pass the integrity checks. See docs/reliability.md.
@Suite("Crash safety: SIGKILL during write transactions", .serialized)
struct CrashTests {
    @Test("a killed writer loses no committed transaction and leaves none half-written", arguments: ReliabilityBackend.available)
    func killedWriter(_ backend: ReliabilityBackend) throws {
        let seed = Settings.crashSeed ^ UInt64(backend.rawValue.utf8.reduce(0) { $0 &* 31 &+ Int($1) })
        let result = try CrashCampaign.run(backend, kills: Settings.crashKills, seed: seed, rotate: Settings.crashRotate)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        #expect(result.stats.kills == Settings.crashKills)
        report("crash \(backend): \(result.summary)")
    }

    @Test("a writer killed while it creates the store leaves a store that opens and is sound", arguments: ReliabilityBackend.available)
    func killedWhileCreating(_ backend: ReliabilityBackend) throws {
        let seed = Settings.crashSeed &+ 1
        let result = try CrashCampaign.run(backend, kills: min(100, max(5, Settings.crashKills / 2)), seed: seed, rotate: 1, creating: true)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        report("crash while creating \(backend): \(result.summary)")
    }

    /// The harness must be able to fail: a writer that splits each unit of work over several
    /// transactions is caught leaving half-written work within a few kills.
    @Test("self-test: a non-atomic writer is caught", arguments: [ReliabilityBackend.lmdb, .sqlite])
    func nonAtomicWriterIsCaught(_ backend: ReliabilityBackend) throws {
        let result = try CrashCampaign.run(backend, kills: 40, seed: 99, rotate: 0, fault: "split", stopAtFirstProblem: true)
        #expect(!result.problems.isEmpty, "40 kills of a writer committing half units of work went unnoticed")
        report("crash self-test \(backend): non-atomic writer caught after \(result.stats.kills) kill(s): \(result.problems.first ?? "-")")
    }
}

/// One crash campaign: `kills` times start the writer, let it run for a random while, SIGKILL it,
/// reopen and verify.
enum CrashCampaign {
    struct Stats {
        var kills = 0
        var early = 0
        var duringStartup = 0
        var transactions = 0
        var unreportedFound = 0
        var observed = 0
        var stores = 0
        var maxSeq: Int64 = 0
    }

    struct Result {
        var stats: Stats
        var problems: [String]
        var summary: String
    }

    /// `creating`: every kill hits a brand-new store between the writer's start and the moment it has
    /// created the store and its tables (measured once): during start-up or creation (no second
    /// connection).
    static func run(
        _ backend: ReliabilityBackend, kills: Int, seed: UInt64, rotate: Int, fault: String? = nil, stopAtFirstProblem: Bool = true,
        creating: Bool = false
    ) throws -> Result {
        let helper = try helperPath()
        var rng = SplitMix(seed: seed)
        var directory = try TempDirectory("crash-\(backend)")
        var path = backend.storePath(in: directory.url)
        var reported: [Int64: Int64] = [:]  // transaction -> operation id, as printed by the writer
        var floor: Int64 = 0  // the highest transaction known committed
        var stats = Stats()
        stats.stores = creating ? 0 : 1
        var problems: [String] = []
        let started = Date()

        // The tables exist before the first writer starts, so the observer connection below never
        // depends on seeing a table another process created (that is MultiProcessTests' subject).
        func prepare() throws {
            let store = try backend.open(path: path)
            try CrashWorkload.prepare(store)
            try store.close()
        }
        if !creating { try prepare() }
        // While creating: kill at a uniform moment between the start and the writer's "ready" (the
        // store created and its tables defined), measured once on a throwaway store.
        var creationWindow: UInt32 = 60_000
        if creating {
            let scratch = try TempDirectory("crash-calibration")
            let start = Date()
            let probe = try ChildProcess(executable: helper, arguments: ["crash", backend.rawValue, backend.storePath(in: scratch.url), "1"])
            if probe.waitForLine(timeout: 60, { $0.hasPrefix("ready") }) {
                creationWindow = UInt32(max(5_000, Date().timeIntervalSince(start) * 1_000_000))
            }
            probe.wait()
        }
        campaign: for cycle in 0..<kills {
            if creating || (rotate > 0 && cycle > 0 && cycle % rotate == 0) {
                directory = try TempDirectory("crash-\(backend)")
                path = backend.storePath(in: directory.url)
                if !creating { try prepare() }
                reported = [:]
                floor = 0
                stats.stores += 1
            }
            let context = "\(backend), seed \(seed), kill #\(cycle + 1)"
            func fail(_ text: String) { problems.append("\(context): \(text)") }
            // Half of the time this process keeps another connection open across the kill and reads
            // while the writer writes: multi-process recovery, and snapshot reads checked below.
            let observer: (any LocalStore)? = !creating && rng.oneIn(2) ? try backend.open(path: path) : nil
            if observer != nil { stats.observed += 1 }

            let child = try ChildProcess(
                executable: helper, arguments: ["crash", backend.rawValue, path],
                environment: fault.map { ["LOCALSTORE_CRASH_FAULT": $0] } ?? [:])
            let early = creating || rng.oneIn(4)
            if early {
                stats.early += 1
                usleep(UInt32(rng.below(Int(creating ? creationWindow : 70_000))))  // start-up, opening, recovery, first commits
            } else if !child.waitForLine(timeout: 60, { $0.hasPrefix("ready") }) {
                child.kill()
                fail("the writer never became ready (\(child.wait())): \(child.errorOutput)")
                break
            }
            // Let it write for a random while (0.5–150 ms), reading through the observer meanwhile:
            // a reader must never see part of a transaction (operations == counter in every snapshot).
            let deadline = Date().addingTimeInterval(early ? 0 : Double(rng.below(150_000) + 500) / 1_000_000)
            repeat {
                if let observer {
                    let c1 = try CrashWorkload.lastSeq(observer)
                    let ops = try Int64(observer.pendingOperationCount())
                    let c2 = try CrashWorkload.lastSeq(observer)
                    if fault == nil && !(CrashWorkload.expectedOperationCount(c1) <= ops && ops <= CrashWorkload.expectedOperationCount(c2)) {
                        fail("a reader saw \(ops) operations between counters \(c1) and \(c2)")
                    }
                } else {
                    usleep(2000)
                }
            } while Date() < deadline
            child.kill()
            let end = child.wait()
            stats.kills += 1
            guard end == .signal(SIGKILL) else {
                fail("the writer ended with \(end) before it was killed: \(child.errorOutput)")
                break
            }

            // What the writer reported.
            var previous: Int64? = nil
            var wasReady = false
            for line in child.outputLines {
                let parts = line.split(separator: " ")
                if parts.first == "ready", parts.count == 2, let start = Int64(parts[1]) {
                    wasReady = true
                    if start < floor { fail("the writer reopened the store at \(start), below \(floor)") }
                    previous = start
                    continue
                }
                guard parts.count == 2, let s = Int64(parts[0]), let op = Int64(parts[1]), let p = previous, s == p + 1 else {
                    fail("unexpected output '\(line)' after \(previous.map(String.init) ?? "nothing")")
                    continue
                }
                previous = s
                reported[s] = op
                stats.transactions += 1
            }
            if !wasReady { stats.duringStartup += 1 }
            try observer?.close()

            // After the kill: the store opens, holds everything reported, nothing half, passes integrity.
            let store: any LocalStore
            do {
                store = try backend.open(path: path)
            } catch {
                fail("the store does not open after the kill: \(error)")
                break
            }
            let verification = try CrashWorkload.verify(store, reported: reported)
            if verification.lastSeq > (reported.keys.max() ?? 0) {
                // Committed, then killed before the line was written: from now on it must stay.
                stats.unreportedFound += 1
                reported[verification.lastSeq] = verification.lastSeq
            }
            floor = max(floor, verification.lastSeq)
            stats.maxSeq = max(stats.maxSeq, verification.lastSeq)
            let own = try Integrity.storeCheck(store)
            try store.close()
            let independent = Integrity.independentCheck(backend, path: path)
            for p in verification.problems + (own ?? []) + (independent ?? []) { fail(p) }
            if stopAtFirstProblem && !problems.isEmpty { break campaign }
        }
        let seconds = Date().timeIntervalSince(started)
        let summary =
            "\(stats.kills) kills (\(stats.early) within \(creating ? Int(creationWindow / 1000) : 70) ms of the start, \(stats.duringStartup) before the store was open), "
            + "\(stats.transactions) transactions reported committed, \(stats.unreportedFound) kills between commit and report, "
            + "\(stats.observed) with a second connection open, \(stats.stores) store(s)\(creating ? " (each killed while being created)" : ""), highest seq \(stats.maxSeq), "
            + "integrity: \(integrityMethods(backend)), seed \(seed), \(String(format: "%.1f", seconds)) s"
        return Result(stats: stats, problems: problems, summary: summary)
    }
}

/// Which integrity checks run for `backend` (the store's own only when it implements IntegrityChecking).
func integrityMethods(_ backend: ReliabilityBackend) -> String {
    switch backend {
    case .sqlite:
        return "PRAGMA integrity_check on a separate connection"
            + (ownCheckExists(backend) ? " + store.checkIntegrity()" : " (SQLiteStore has no IntegrityChecking)")
    case .sqlcipher:
        return ownCheckExists(backend) ? "store.checkIntegrity() (cipher_integrity_check + integrity_check)" : "none (no IntegrityChecking)"
    case .lmdb:
        return "raw LMDB walk" + (ownCheckExists(backend) ? " + store.checkIntegrity()" : " (LMDBStore has no IntegrityChecking)")
            + " + full decode of every record"
    }
}

func ownCheckExists(_ backend: ReliabilityBackend) -> Bool {
    guard let dir = try? TempDirectory("probe"), let store = try? backend.open(path: backend.storePath(in: dir.url)) else { return false }
    defer { try? store.close() }
    return store is any IntegrityChecking
}
