import Foundation
import LocalStore
import LocalStoreReliability
import Testing
#if canImport(Glibc)
import Glibc
#endif
#if canImport(LocalStoreSQLCipher)
import LocalStoreSQLCipher
#endif

/// I/O faults at every write, as SQLite's own I/O-error tests do (docs/reliability.md, "I/O faults"):
/// the workload (`FaultWorkload`: typed-queue calls, a pulled page, a batch, a purge, a rekey on
/// SQLCipher) runs once in the helper to count its write, sync and truncate calls on the store's files,
/// then once per call with that call failing, with EIO and with ENOSPC. After each run the store must
/// open, pass its integrity check, and hold exactly the steps reported committed.
@Suite("I/O faults at every write", .serialized)
struct FaultInjectionTests {
    /// Failing calls tried per backend and error (`make test`: 12, spread over the run; `make stress`: 0,
    /// meaning every call).
    static var points: Int { Settings.int("LOCALSTORE_FAULT_POINTS", 12) }

    @Test("every failed write, sync or truncate: a typed error, a store that opens and is sound, nothing lost or half-applied",
          arguments: ReliabilityBackend.available)
    func everyCallFails(_ backend: ReliabilityBackend) throws {
        let started = Date()
        let base = try TempDirectory("faults-base")
        let basePath = backend.storePath(in: base.url)
        do {
            let store = try backend.open(path: basePath)
            try FaultWorkload.prepare(store)
            try store.close()
        }
        // The state after each step, from a run without faults in this process.
        let steps = FaultWorkload.steps(backend)
        var expected: [String] = []
        do {
            let copy = try TempDirectory("faults-reference")
            let path = try Self.copy(base, to: copy, backend)
            let store = try backend.open(path: path)
            expected.append(try FaultWorkload.digest(store))
            for step in steps {
                try step.run(store)
                expected.append(try FaultWorkload.digest(store))
            }
            try store.close()
        }
        // The counting run.
        let counting = try Self.run(backend, base, at: 0, error: "EIO")
        #expect(counting.committed == steps.count && counting.error == nil, "\(backend): the run without a fault: \(counting.lines)")
        let calls = counting.calls
        #expect(calls > 0, "\(backend): the workload's calls were counted")
        let points: [Int] = Self.points == 0 || Self.points >= calls
            ? Array(1...max(1, calls)) : (0..<Self.points).map { 1 + $0 * (calls - 1) / max(1, Self.points - 1) }
        var runs = 0, typed = 0, unopenable = 0, unsound = 0, lost = 0, appeared = 0, crashed = 0
        var problems: [String] = []
        var codes: [String: Int] = [:]
        for error in ["EIO", "ENOSPC"] {
            for at in points {
                runs += 1
                let outcome = try Self.run(backend, base, at: at, error: error)
                let context = "\(backend) \(error) at call \(at) of \(calls)"
                guard outcome.exited else {
                    crashed += 1
                    problems.append("\(context): the helper crashed: \(outcome.lines.suffix(3))")
                    continue
                }
                if let e = outcome.error {
                    typed += 1
                    codes[e, default: 0] += 1
                }
                let c = outcome.committed
                let store: any LocalStore
                do {
                    store = try Self.open(backend, outcome.path, rekeyed: c == steps.count && steps.last?.name == "rekey")
                } catch {
                    // A rekey whose commit failed may or may not have changed the key: try the other.
                    if backend == .sqlcipher, let other = try? Self.open(backend, outcome.path, rekeyed: !(c == steps.count)) {
                        try? other.close()
                        appeared += 1
                        problems.append("\(context): the store opens only with the key of a rekey reported failed")
                    } else {
                        unopenable += 1
                        problems.append("\(context): the store does not open: \(error)")
                    }
                    continue
                }
                if let found = try Integrity.storeCheck(store), !found.isEmpty {
                    unsound += 1
                    problems.append("\(context): integrity: \(found.prefix(2))")
                }
                let digest = try FaultWorkload.digest(store)
                try store.close()
                if digest != expected[c] {
                    if c + 1 < expected.count, digest == expected[c + 1] {
                        appeared += 1
                        problems.append("\(context): step \(c + 1) (\(steps[c].name)) was reported failed (\(outcome.error ?? "-")) but is in the store")
                    } else {
                        lost += 1
                        problems.append("\(context): the store holds neither the \(c) committed steps nor one more")
                    }
                }
            }
        }
        let codeList = codes.sorted { $0.key < $1.key }.map { "\($0.value)x \($0.key)" }.joined(separator: ", ")
        report(
            "io-faults \(backend): \(calls) write/sync/truncate calls in \(steps.count) steps, \(runs) runs (EIO and ENOSPC), \(typed) typed errors (\(codeList)), "
                + "crashed \(crashed), unopenable \(unopenable), integrity problems \(unsound), lost or half-applied \(lost), failed steps found applied \(appeared), "
                + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        #expect(crashed == 0 && unopenable == 0 && unsound == 0 && lost == 0 && appeared == 0, "\(problems.prefix(12).joined(separator: "\n"))")
    }

    struct Outcome {
        var path: String
        var lines: [String]
        var exited: Bool
        var committed: Int
        var error: String?
        var calls: Int
        let directory: TempDirectory
    }

    /// Copies the base store into a new directory and runs the helper on it.
    static func run(_ backend: ReliabilityBackend, _ base: TempDirectory, at: Int, error: String) throws -> Outcome {
        let directory = try TempDirectory("faults-run")
        let path = try copy(base, to: directory, backend)
        let child = try ChildProcess(executable: try helperPath(), arguments: ["faults", backend.rawValue, path, "\(at)", error])
        let end = child.wait()
        let lines = child.outputLines
        let committed = lines.filter { $0.hasPrefix("ok ") }.count
        let failure = lines.first { $0.hasPrefix("error ") }.map { String($0.split(separator: " ").dropFirst(2).first ?? "") }
        let calls = lines.first { $0.hasPrefix("calls ") }.flatMap { Int($0.dropFirst(6)) } ?? 0
        return Outcome(
            path: path, lines: lines, exited: end == .exit(0) && lines.last == "done", committed: committed, error: failure, calls: calls,
            directory: directory)
    }

    /// Copies the store's files from `base` into `target`; returns the store's path there.
    static func copy(_ base: TempDirectory, to target: TempDirectory, _ backend: ReliabilityBackend) throws -> String {
        for name in try FileManager.default.contentsOfDirectory(atPath: base.path) {
            try FileManager.default.copyItem(atPath: base.path(name), toPath: target.path(name))
        }
        return backend.storePath(in: target.url)
    }

    static func open(_ backend: ReliabilityBackend, _ path: String, rekeyed: Bool) throws -> any LocalStore {
        #if canImport(LocalStoreSQLCipher)
        if backend == .sqlcipher, rekeyed { return try SQLCipherStore(path: path, key: try SQLCipherKey.raw(FaultWorkload.rekeyBytes)) }
        #endif
        return try backend.open(path: path)
    }
}
