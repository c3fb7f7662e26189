import Foundation
import LocalStore
import LocalStoreReliability
import Testing

/// One page of a store's data file replaced by random bytes or zeroes, then the typed integrity check
/// (`verifyIntegrity()`) run in the helper process: damage must be `corrupt` (or `notADatabase` when the
/// open already refuses the file) — never `internal` or another code — and the checking process must
/// survive (docs/reliability.md, "Hostile input"). `ok` is allowed only for a page the store does not use.
@Suite("Damaged pages: the integrity check reports corrupt", .serialized)
struct DamagedPageIntegrityTests {
    /// Pages damaged per backend and kind (`make test`: 12; `make stress`: 60).
    static var pages: Int { Settings.int("LOCALSTORE_DAMAGED_PAGES", 12) }

    @Test("random and zeroed single pages", arguments: ReliabilityBackend.available)
    func damagedPages(_ backend: ReliabilityBackend) throws {
        var rng = SplitMix(seed: 38_3 ^ UInt64(backend.rawValue.utf8.count))
        var tally: [String: Int] = [:]
        // What the probe (every row of every table read, then the checks) prints for an undamaged store:
        // an `ok` from the integrity check must mean the damaged page held nothing the store uses.
        let soundProbe: String = try {
            let dir = try TempDirectory("damage-sound")
            let path = backend.storePath(in: dir.url)
            try makeStore(backend, at: path, rows: 1500)
            let child = try ChildProcess(executable: try helperPath(), arguments: ["probe", backend.rawValue, path])
            _ = child.wait()
            return child.outputLines.first { $0.hasPrefix("ok rows=") } ?? "none"
        }()
        #expect(soundProbe.hasPrefix("ok rows="), "\(backend): the undamaged store probes as '\(soundProbe)'")
        for kind in ["random", "zeroed"] {
            for round in 0..<Self.pages {
                let dir = try TempDirectory("damage")
                let path = backend.storePath(in: dir.url)
                try makeStore(backend, at: path, rows: 1500)
                let file = backend.dataFile(storePath: path)
                var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: file)))
                let pageSize = 4096
                // Spare the header (SQL page 1) and LMDB's two meta pages: those are the "random bytes" case.
                let first = backend == .lmdb ? 2 : 1
                let page = first + rng.below(bytes.count / pageSize - first)
                for i in page * pageSize..<(page + 1) * pageSize { bytes[i] = kind == "zeroed" ? 0 : UInt8(truncatingIfNeeded: rng.next()) }
                try Data(bytes).write(to: URL(fileURLWithPath: file))
                let child = try ChildProcess(executable: try helperPath(), arguments: ["integrity", backend.rawValue, path])
                let end = child.wait()
                // The result line (a problem's text may continue on further lines).
                let line = child.outputLines.first { $0 == "ok" || $0.hasPrefix("error ") } ?? "nothing"
                let context = "\(backend) \(kind) page \(page) (round \(round))"
                if end != .exit(0) {
                    // LMDB too: the helper opens it with verifyPagesOnOpen, so a damaged page is found by
                    // the forked walk before this process reads it (liblmdb keeps no page checksums).
                    tally["\(kind): the process died (\(end))", default: 0] += 1
                    Issue.record("\(context): the checking process ended with \(end) after '\(line)': \(child.errorOutput.prefix(300))")
                    continue
                }
                let reported = line.hasPrefix("error check corrupt") || line.hasPrefix("error open corrupt")
                    || line.hasPrefix("error open notADatabase")
                #expect(reported || line == "ok", "\(context): damage reported as '\(line)'")
                if line == "ok" {
                    let probe = try ChildProcess(executable: try helperPath(), arguments: ["probe", backend.rawValue, path])
                    let probeEnd = probe.wait()
                    let probed = probe.outputLines.first { $0.hasPrefix("ok ") || $0.hasPrefix("damaged ") || $0.hasPrefix("error ") } ?? "nothing"
                    #expect(probeEnd == .exit(0) && probed == soundProbe,
                            "\(context): the check found no damage but reading every row gives \(probeEnd) '\(probed)', not '\(soundProbe)'")
                }
                let key = line == "ok" ? "ok (page unused)" : line.split(separator: " ").prefix(3).joined(separator: " ")
                tally["\(kind): \(key)", default: 0] += 1
            }
        }
        report("damaged pages \(backend): " + tally.sorted { $0.key < $1.key }.map { "\($0.value)x \($0.key)" }.joined(separator: ", "))
    }
}
