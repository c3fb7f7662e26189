import Foundation
import LocalStore
import LocalStoreReliability
import Testing

/// Power loss and OS crashes, simulated (docs/reliability.md, "Power loss"): the helper records every
/// write, sync, creation and directory sync a store's files get while it is created and written
/// (`powerloss-record`), then builds crash states from that log — everything synced is on disk,
/// after the last sync of each file any subset of its writes, some torn at 512-byte sectors, unsynced
/// directory entries there or not — and reopens and checks each one (`powerloss-check`): it opens,
/// holds every transaction the promise covers, none partly, and passes both integrity checks.
@Suite("Power loss: simulated crash states of the persistent backends", .serialized)
struct PowerLossTests {
    static var profiles: [PowerLoss.Profile] { PowerLoss.Profile.all.filter(\.backend.isCompiledIn) }

    @Test("every crash state opens, keeps what the durability level promises, nothing half-written", arguments: profiles)
    func crashStates(_ profile: PowerLoss.Profile) throws {
        let run = try PowerLossRun(profile)
        let states = Settings.powerLossStates
        let seed = Settings.crashSeed ^ UInt64(profile.description.utf8.reduce(0) { $0 &* 31 &+ Int($1) })
        let result = try run.check(states: states, seed: seed)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        #expect(result.termination == .exit(0), "powerloss-check ended with \(result.termination): \(result.stderr)")
        #expect(result.figure("states") == states)
        #expect(result.figure("lost") == 0)
        #expect(result.figure("unopenable") == 0)
        #expect(result.figure("damaged") == 0)
        #expect(result.figure("integrity") == 0)
        let f = { (name: String) in result.figure(name).map(String.init) ?? "?" }
        report(
            "power-loss \(profile): \(f("states")) crash states (\(run.summary), seed \(seed)), lost committed \(f("lost")),"
                + " unopenable \(f("unopenable")), damaged \(f("damaged")), integrity failures \(f("integrity"));"
                + " rolled back within the promise \(f("rolled-back-allowed")), torn writes \(f("torn-writes")),"
                + " dropped writes \(f("dropped-writes")), missing entries \(f("missing-entries")), resurrected files \(f("resurrected-files"))")
    }

    /// The check must be able to fail: a NORMAL recording checked against the promise that every commit
    /// survives, and an LMDB recording whose O_DSYNC meta-page writes are treated as unsynced, must
    /// both show lost transactions.
    @Test("self-test: a weaker recording checked against a stronger promise loses transactions",
          arguments: [PowerLoss.Profile(backend: .sqlite, strong: false), PowerLoss.Profile(backend: .lmdb, strong: true)])
    func selfTest(_ profile: PowerLoss.Profile) throws {
        let run = try PowerLossRun(profile)
        let result = try run.check(states: 60, seed: 7, selfTest: true)
        let lost = result.figure("lost") ?? 0
        #expect(lost > 0, "60 crash states checked against a promise the recording does not keep lost nothing")
        #expect(result.figure("unopenable") == 0)
        report("power-loss self-test \(profile): \(lost) of \(result.figure("states") ?? 0) states lost reported transactions")
    }
}

/// One recording of the power-loss workload, in a scratch directory (on tmpfs when there is one:
/// the simulation needs no real disk, and the states' syncs then cost nothing).
struct PowerLossRun {
    let profile: PowerLoss.Profile
    let scratch: TempDirectory
    let log: String
    let summary: String

    struct Check {
        var termination: ChildProcess.Termination
        var problems: [String]
        var totals: [String: Int]
        var stderr: String
        func figure(_ name: String) -> Int? { totals[name] }
    }

    init(_ profile: PowerLoss.Profile) throws {
        self.profile = profile
        scratch = try TempDirectory("powerloss-\(profile)", inSharedMemory: true)
        log = scratch.path("log")
        let store = scratch.path("store")
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let (first, second) = Settings.powerLossTransactions
        let child = try ChildProcess(
            executable: try helperPath(), arguments: ["powerloss-record", profile.description, store, log, "\(first)", "\(second)"])
        let end = child.wait()
        let line = child.outputLines.last ?? ""
        let parts = line.split(separator: " ")
        guard end == .exit(0), parts.count == 4, parts[0] == "recorded" else {
            throw LocalStoreError(.internal, "powerloss-record \(profile) ended with \(end): \(line) \(child.errorOutput)")
        }
        summary = "log of \(parts[1]) operations, \(parts[2]) syncs, \(parts[3]) transactions"
    }

    func check(states: Int, seed: UInt64, selfTest: Bool = false) throws -> Check {
        let statesDirectory = scratch.path("states")
        let child = try ChildProcess(
            executable: try helperPath(),
            arguments: ["powerloss-check", profile.description, log, "\(states)", "\(seed)", statesDirectory] + (selfTest ? ["self-test"] : []))
        let end = child.wait(timeout: 3600)
        let lines = child.outputLines
        var totals: [String: Int] = [:]
        if let last = lines.last, last.hasPrefix("totals ") {
            let words = last.split(separator: " ").dropFirst().map(String.init)
            for i in stride(from: 0, to: words.count - 1, by: 2) { totals[words[i]] = Int(words[i + 1]) }
        }
        return Check(
            termination: end, problems: lines.filter { $0.hasPrefix("problem ") }, totals: totals, stderr: child.errorOutput)
    }
}
