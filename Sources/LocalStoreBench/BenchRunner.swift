import Foundation
import LocalStore

#if canImport(Glibc)
import Glibc
#endif

/// A backend (or baseline) the benchmark can run.
public struct BenchBackend: Sendable {
    /// The name in result rows (`memory`, `sqlite`, `sqlite-c`, ...).
    public let name: String
    /// The baseline whose numbers this backend's `ratioToBaseline` divides by, if any.
    public let baseline: String?
    /// Whether the store survives close and reopen (enables the `open` workload).
    public let isPersistent: Bool
    /// Creates a subject whose store lives in `directory`.
    public let make: @Sendable (_ directory: URL) throws -> any BenchSubject

    /// The workloads to run; `nil` for all. (A variant that differs only in how it opens, such as
    /// SQLCipher with a passphrase, runs just `upsert` and `open`.)
    public let workloads: Set<Workload>?

    public init(
        name: String, baseline: String?, isPersistent: Bool, workloads: Set<Workload>? = nil,
        make: @escaping @Sendable (_ directory: URL) throws -> any BenchSubject
    ) {
        self.name = name
        self.baseline = baseline
        self.isPersistent = isPersistent
        self.workloads = workloads
        self.make = make
    }
}

extension BenchBackend {
    /// A persistent ``LocalStore`` backend: `open` creates the store at `path` (the file `file` inside the
    /// benchmark's temporary directory), and opens it again (same path) for the `open` workload. The path
    /// is made once per subject, so the `open` workload times the store's opening alone, as the C
    /// baselines' does (building it from the directory's URL cost ~18 k instructions, 2% of a SQLite open).
    public static func persistent(
        name: String, baseline: String?, workloads: Set<Workload>? = nil, file: String,
        open: @escaping @Sendable (_ path: String) throws -> any LocalStore
    ) -> BenchBackend {
        BenchBackend(name: name, baseline: baseline, isPersistent: true, workloads: workloads) { directory in
            let path = directory.appendingPathComponent(file).path
            return LocalStoreSubject(store: try open(path), reopen: { try open(path) })
        }
    }
}

/// One result row.
public struct BenchResult: Sendable, Codable, Hashable {
    public var backend: String
    public var workload: String
    public var ops: Int
    public var seconds: Double
    public var opsPerSecond: Double
    public var p50Micros: Double?
    public var p99Micros: Double?
    public var ratioToBaseline: Double?

    /// Creates a result row.
    public init(
        backend: String, workload: String, ops: Int, seconds: Double, opsPerSecond: Double, p50Micros: Double?,
        p99Micros: Double?, ratioToBaseline: Double?
    ) {
        self.backend = backend
        self.workload = workload
        self.ops = ops
        self.seconds = seconds
        self.opsPerSecond = opsPerSecond
        self.p50Micros = p50Micros
        self.p99Micros = p99Micros
        self.ratioToBaseline = ratioToBaseline
    }

    enum CodingKeys: String, CodingKey {
        case backend, workload, ops, seconds, opsPerSecond, p50Micros, p99Micros, ratioToBaseline
    }

    /// Encodes every key, writing `null` for absent latencies and ratios (the documented JSON shape).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(backend, forKey: .backend)
        try c.encode(workload, forKey: .workload)
        try c.encode(ops, forKey: .ops)
        try c.encode(seconds, forKey: .seconds)
        try c.encode(opsPerSecond, forKey: .opsPerSecond)
        try c.encode(p50Micros, forKey: .p50Micros)
        try c.encode(p99Micros, forKey: .p99Micros)
        try c.encode(ratioToBaseline, forKey: .ratioToBaseline)
    }
}

/// What the benchmark measured about a backend as a whole.
public struct BenchFootprint: Sendable, Codable, Hashable {
    public var backend: String
    public var storeBytes: Int64
    /// The peak resident set size (`VmHWM`) of the process that ran this backend alone.
    public var peakMemoryBytes: Int64
    /// In-memory backends: the resident set size (`VmRSS`) after loading the table minus before, per
    /// loaded row.
    public var residentBytesPerRow: Double?
    /// The raw data of the loaded rows, per row: UTF-8 bytes of strings, 8 per integer and date, 1 per
    /// boolean.
    public var payloadBytesPerRow: Double?

    /// Creates a footprint (reports are made by ``BenchRunner``; this is for combining and testing them).
    public init(
        backend: String, storeBytes: Int64, peakMemoryBytes: Int64, residentBytesPerRow: Double? = nil,
        payloadBytesPerRow: Double? = nil
    ) {
        self.backend = backend
        self.storeBytes = storeBytes
        self.peakMemoryBytes = peakMemoryBytes
        self.residentBytesPerRow = residentBytesPerRow
        self.payloadBytesPerRow = payloadBytesPerRow
    }
}

/// The whole report, as printed by `--format json`.
public struct BenchReport: Sendable, Codable {
    public var records: Int
    public var environment: [String: String]
    public var results: [BenchResult]
    public var footprints: [BenchFootprint]

    public init(records: Int, environment: [String: String], results: [BenchResult], footprints: [BenchFootprint]) {
        self.records = records
        self.environment = environment
        self.results = results
        self.footprints = footprints
    }
}

/// The workload names, in the order they run.
public enum Workload: String, CaseIterable, Sendable {
    case upsert, readById = "read-by-id", queryIndexed = "query-indexed", queryScan = "query-scan", count,
        update, localWrite = "local-write", pushDrain = "push-drain", deltaToken = "delta-token", enqueue,
        pushCycle = "push-cycle", pullPage = "pull-page", initialPull = "initial-pull", purge, open,
        deleteByQuery = "delete-by-query"

    /// The sync workloads (``BenchSyncSubject``): they start from a queue of ``BenchRunner/queue`` pending
    /// operations.
    public var isSync: Bool {
        switch self {
        case .enqueue, .pushCycle, .pullPage, .initialPull, .purge: return true
        default: return false
        }
    }

    /// Whether a round of the workload leaves the store as the next round needs it, so the workload
    /// runs up to ``BenchRunner/rounds`` times and reports its fastest round: the reads, `delta-token`
    /// (it sets and reads the same ten tokens again: after the first ten calls every set updates one)
    /// and `open` (close, open, read). The others change what the next workloads measure (rows added,
    /// the queue drained, rows deleted) and run once.
    var isRepeatable: Bool {
        switch self {
        case .readById, .queryIndexed, .queryScan, .count, .deltaToken, .open: return true
        default: return false
        }
    }

    /// The workloads ``isRepeatable`` holds for, in run order (for the report's environment).
    public static var repeatable: [Workload] { allCases.filter(\.isRepeatable) }

    /// Whether one timed call is one operation (so p50/p99 latencies are reported).
    var isPerOperation: Bool {
        switch self {
        case .upsert, .update, .deleteByQuery: return false
        default: return true
        }
    }
}

/// Deterministic data and the workload driver.
public struct BenchRunner {
    public var records: Int
    public var seed: UInt64
    public var progress: Progress?
    /// The workloads to run; `nil` for all. A selection runs each chosen workload from the state it
    /// starts from in a full run (``BenchSession/prepare(for:)``: the table loaded untimed, ...).
    public var workloads: Set<Workload>?
    /// Query observers of the TodoItem table running during `local-write` (its row is then named
    /// `local-write/<n> observers`); backends that cannot observe (the C baselines) ignore it.
    public var observers: Int
    /// The pending operations the sync workloads start from (`--queue`).
    public var queue: Int

    /// The default of ``queue``.
    public static let defaultQueue = 10_000

    public init(
        records: Int, seed: UInt64, progress: Progress? = nil, workloads: Set<Workload>? = nil, observers: Int = 0,
        queue: Int = BenchRunner.defaultQueue
    ) {
        self.queue = queue
        self.records = records
        self.seed = seed
        self.progress = progress
        self.workloads = workloads
        self.observers = observers
    }

    /// How many times each repeatable workload (``Workload/isRepeatable``) runs on every subject; its
    /// fastest round is reported. One round of `query-indexed` takes about 20 ms at 100,000 records and
    /// one of `delta-token` about 20 ms, so a single preemption by another process could move its
    /// throughput by a fifth: the fastest of three is the figure least disturbed by the machine, and
    /// every subject, baselines included, is measured the same way.
    public static let rounds = 3

    /// A round longer than this is not repeated: interference is a small part of it, and repeating it
    /// would be slow (`open` with a passphrase's key derivation takes about 20 s a round).
    public static let repeatBelowSeconds = 2.0

    /// Runs every workload on `backend` in a fresh temporary directory (removed afterwards).
    public func run(_ backend: BenchBackend) throws -> (results: [BenchResult], footprint: BenchFootprint) {
        let run = try BenchBackendRun(self, backend: backend)
        defer { run.removeFiles() }
        var results: [BenchResult] = []
        for workload in run.workloads {
            if let result = try run.run(workload) { results.append(result) }
        }
        return (results, try run.finish())
    }
}

/// One backend's run, one workload at a time: what ``BenchRunner/run(_:)`` does in one go, for a caller
/// that interleaves backends (`localstore bench` runs every backend's child process one workload at a
/// time, in turns, so that a backend and its baseline are measured minutes closer together).
public final class BenchBackendRun {
    private let runner: BenchRunner
    private let backend: BenchBackend
    private let session: BenchSession
    private var heapBeforeLoad: Int64?
    private var heapPerRow: Double?

    /// Resets the peak-memory counter and opens a fresh session (its store in a temporary directory).
    public init(_ runner: BenchRunner, backend: BenchBackend) throws {
        self.runner = runner
        self.backend = backend
        Memory.resetPeak()
        session = try BenchSession(backend: backend, records: runner.records, seed: runner.seed, queue: runner.queue)
    }

    /// The workloads to run, in order: the runner's selection, those the backend supports.
    public var workloads: [Workload] {
        Workload.allCases.filter { workload in session.supports(workload) && runner.workloads.map { $0.contains(workload) } ?? true }
    }

    /// Runs `workload` (one of ``workloads``) and returns its result; `nil` when it did not run (`local-write`
    /// with observers on a subject that cannot observe).
    public func run(_ workload: Workload) throws -> BenchResult? {
        let progress = runner.progress
        if runner.workloads != nil && (workload != .pushDrain || session.needsRefill(.pushDrain)) {
            try session.prepare(for: workload)
        }
        var observing: BenchObservers?
        if workload == .localWrite && runner.observers > 0 {
            observing = try session.subject.startObservers(runner.observers)
            if observing == nil { return nil }
        }
        defer { observing?.stop() }
        if workload == .upsert && !backend.isPersistent { heapBeforeLoad = Memory.residentBytes() }
        defer {
            if workload == .upsert, let before = heapBeforeLoad {
                heapPerRow = Double(Memory.residentBytes() - before) / Double(runner.records)
            }
        }
        progress?.begin(backend.name, workload)
        if let trace = ProcessInfo.processInfo.environment["LOCALSTORE_BENCH_TRACE"] {
            // "<backend> <workload>" per line as each starts, appended (several processes share the file).
            try BenchTrace.append("\(backend.name) \(workload.rawValue)\n", to: trace)
        }
        // A repeatable workload runs up to `rounds` times and reports its fastest round (the one
        // least disturbed by other processes: interference only ever adds time); a workload that
        // changes what the next ones measure runs once.
        let rounds = workload.isRepeatable ? BenchRunner.rounds : 1
        let units = session.plannedUnits(of: workload)
        var m = Measurement()
        var ops = 0
        for round in 0..<rounds {
            if round > 0 && Double(m.totalNanos) / 1e9 > BenchRunner.repeatBelowSeconds { break }
            var roundMeasurement = Measurement()
            var roundOps = 0
            for n in 0..<units {
                let done = try session.step(workload) { call in try roundMeasurement.time(call) }
                if workload == .pushDrain && done == 0 {
                    // The call that found the queue empty is not an operation.
                    roundMeasurement.dropLast()
                    break
                }
                roundOps += done
                if n % 100 == 0 || units < 100 {
                    progress?.update((Double(round) + Double(n + 1) / Double(units)) / Double(rounds))
                }
            }
            if round == 0 || roundMeasurement.totalNanos < m.totalNanos {
                m = roundMeasurement
                ops = roundOps
            }
        }
        if workload == .pushDrain {
            try BenchCheck.equal(ops, session.plannedUnits(of: .localWrite), "\(backend.name) push-drain drained")
        }
        let seconds = Double(m.totalNanos) / 1e9
        if let dir = ProcessInfo.processInfo.environment["LOCALSTORE_BENCH_SAMPLES"] {
            try m.write(to: "\(dir)/\(backend.name)-\(workload.rawValue).txt")
        }
        return BenchResult(
            backend: backend.name,
            workload: observing == nil ? workload.rawValue : "\(workload.rawValue)/\(runner.observers) observers",
            ops: ops, seconds: seconds,
            opsPerSecond: seconds > 0 ? Double(ops) / seconds : 0,
            p50Micros: workload.isPerOperation ? m.percentile(0.50) : nil,
            p99Micros: workload.isPerOperation ? m.percentile(0.99) : nil, ratioToBaseline: nil)
    }

    /// Closes the store and returns the backend's footprint (store size, peak memory, bytes per row).
    public func finish() throws -> BenchFootprint {
        runner.progress?.end()
        try session.close()
        return BenchFootprint(
            backend: backend.name, storeBytes: session.storeBytes, peakMemoryBytes: Memory.peakBytes(),
            residentBytesPerRow: heapPerRow, payloadBytesPerRow: heapPerRow == nil ? nil : session.payloadBytesPerRow)
    }

    /// Removes the store's files.
    public func removeFiles() { session.removeFiles() }
}

enum BenchCheck {
    static func equal<T: Equatable>(_ a: T, _ b: T, _ what: String) throws {
        guard a == b else {
            throw LocalStoreError(.internal, "benchmark self-check failed: \(what): got \(a), expected \(b)")
        }
    }
}

/// Per-call timings of one workload.
struct Measurement {
    private(set) var samples: [UInt64] = []
    private(set) var totalNanos: UInt64 = 0

    mutating func time<R>(_ body: () throws -> R) throws -> R {
        let start = DispatchTime.now().uptimeNanoseconds
        let r = try body()
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        samples.append(elapsed)
        totalNanos += elapsed
        return r
    }

    mutating func dropLast() {
        if let last = samples.popLast() { totalNanos -= last }
    }

    /// Writes the samples, one per line in nanoseconds, to `path` (`LOCALSTORE_BENCH_SAMPLES`).
    func write(to path: String) throws {
        let text = samples.map(String.init).joined(separator: "\n") + "\n"
        do {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw LocalStoreError(.ioError, "LOCALSTORE_BENCH_SAMPLES: cannot write '\(path)': \(error.localizedDescription)")
        }
    }

    func percentile(_ p: Double) -> Double? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
        return Double(sorted[max(0, index)]) / 1000
    }
}

/// The benchmark's deterministic data set.
struct BenchData {
    var records: [TodoRecord] = []
    var priorityCounts = [Int](repeating: 0, count: 10)
    /// How many records' text contains `#k#`, by `k` (the `query-scan` needles).
    var needleCounts = [Int](repeating: 0, count: 1000)
    var completeCount = 0
    /// `priorityCounts` of the generated records (the sync workloads' deletes change `priorityCounts`).
    var initialPriorityCounts: [Int] { initial }
    private var initial = [Int](repeating: 0, count: 10)

    init(count: Int, rng: inout SplitMix64) {
        records.reserveCapacity(count)
        for i in 0..<count {
            let r = BenchData.record(i, rng: &rng)
            priorityCounts[Int(r.priority)] += 1
            needleCounts[i % 1000] += 1
            if r.complete { completeCount += 1 }
            records.append(r)
        }
        initial = priorityCounts
    }

    static let words = ["buy", "milk", "call", "mom", "write", "report", "fix", "bug", "plan", "trip", "read", "book"]

    static func record(_ i: Int, rng: inout SplitMix64) -> TodoRecord {
        let id = String(rng.next(), radix: 16) + "-" + String(i)
        let text = "\(words[Int(rng.next() % 12)]) \(words[Int(rng.next() % 12)]) #\(i % 1000)# item \(i)"
        let created = Date(timeIntervalSince1970: 1_600_000_000 + Double(rng.next() % 100_000_000) / 1000 * 1000)
        return TodoRecord(
            id: id, text: text, complete: rng.next() % 2 == 0, priority: Int64(rng.next() % 10), createdAt: created,
            updatedAt: created.addingTimeInterval(Double(rng.next() % 1_000_000) / 1000), version: "AAAAAAAAB9E=",
            deleted: false)
    }

    func updates(fraction: Double, rng: inout SplitMix64) -> [TodoRecord] {
        let n = max(1, Int(Double(records.count) * fraction))
        return (0..<n).map { _ in
            // Changed fields only in the text and timestamps, so counts checked later stay valid.
            var r = records[Int(rng.next() % UInt64(records.count))]
            r.text += " (edited)"
            r.updatedAt = r.updatedAt.addingTimeInterval(60)
            r.version = "AAAAAAAAB9F="
            return r
        }
    }

    func newRecord(_ n: Int, rng: inout SplitMix64) -> TodoRecord {
        var r = BenchData.record(records.count + n, rng: &rng)
        r.id = "local-\(n)-" + String(rng.next(), radix: 36)
        r.priority = 10 + Int64(n % 5)  // outside 0..<10, so query-indexed expectations stay exact
        r.complete = false
        return r
    }
}

/// A small, fast, seedable generator (SplitMix64).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum DiskUsage {
    static func bytes(of directory: URL) -> Int64 {
        guard let e = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey])
        else { return 0 }
        var total: Int64 = 0
        for case let url as URL in e {
            total += Int64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
        }
        return total
    }
}

enum Memory {
    /// Resets the kernel's peak-RSS counter for this process (Linux: `echo 5 > /proc/self/clear_refs`).
    static func resetPeak() {
        if let h = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
            h.write(Data("5".utf8))
            try? h.close()
        }
    }

    /// The resident set size now (`VmRSS`), in bytes.
    static func residentBytes() -> Int64 { statusField("VmRSS:") }

    /// The peak resident set size since the last reset (`VmHWM`), in bytes.
    static func peakBytes() -> Int64 { statusField("VmHWM:") }

    private static func statusField(_ name: String) -> Int64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(name) {
            let digits = line.split(separator: " ").dropFirst().first.flatMap { Int64($0) } ?? 0
            return digits * 1024
        }
        return 0
    }
}

/// Progress on stderr, shown once a backend's run has taken more than a second.
public final class Progress {
    private var start = DispatchTime.now().uptimeNanoseconds
    private var lastDraw: UInt64 = 0
    private var label = ""
    private let isTTY = isatty(2) != 0
    private var shown = false

    public init() {}

    func begin(_ backend: String, _ workload: Workload) {
        if label.isEmpty || !label.hasPrefix(backend + " ") { start = DispatchTime.now().uptimeNanoseconds }
        label = "\(backend) \(workload.rawValue)"
        update(0)
    }

    func update(_ fraction: Double) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - start > 1_000_000_000, now - lastDraw > 200_000_000 || fraction == 0 else { return }
        lastDraw = now
        shown = true
        let text = "\(label) \(Int(fraction * 100))%"
        if isTTY {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(text)".utf8))
        } else if fraction == 0 {
            FileHandle.standardError.write(Data("\(label)…\n".utf8))
        }
    }

    func end() {
        if shown && isTTY { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        shown = false
        label = ""
    }
}

/// `LOCALSTORE_BENCH_TRACE=FILE`: the order in which workloads start, across processes.
enum BenchTrace {
    static func append(_ line: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard fd >= 0 else { throw LocalStoreError(.ioError, "bench: cannot open the trace file '\(path)' (errno \(errno))") }
        defer { close(fd) }
        let bytes = Array(line.utf8)
        // One write of a short line with O_APPEND: lines of concurrent writers do not interleave.
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw LocalStoreError(.ioError, "bench: cannot write the trace file '\(path)' (errno \(errno))")
        }
    }
}
