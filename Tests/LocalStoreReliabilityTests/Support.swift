import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreReliability
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Settings read from the environment, so `make stress` can run the same tests longer.
enum Settings {
    static func int(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? fallback
    }
    static func uint64(_ name: String, _ fallback: UInt64) -> UInt64 {
        ProcessInfo.processInfo.environment[name].flatMap { UInt64($0) } ?? fallback
    }
    /// Kills per backend (`make test`: 20; `make stress`: 500).
    static var crashKills: Int { int("LOCALSTORE_CRASH_KILLS", 20) }
    /// Kills before the crash test starts over on a fresh store (0: never).
    static var crashRotate: Int { int("LOCALSTORE_CRASH_ROTATE", 0) }
    /// The crash test's seed (kill timing, observer choice).
    static var crashSeed: UInt64 { uint64("LOCALSTORE_CRASH_SEED", 20_261_122) }
    /// Operations per thread in the concurrency test.
    static var threadOperations: Int { int("LOCALSTORE_THREAD_OPS", 500) }
    /// Transactions per process in the two-process test.
    static var processTransactions: Int { int("LOCALSTORE_PROCESS_TXNS", 150) }
    /// Queries per backend in the short fuzz run of `make test`.
    static var fuzzQueries: Int { int("LOCALSTORE_FUZZ_QUERIES", 1500) }
    /// Crash states checked per power-loss profile (`make test`: 15; `make stress`: 600).
    static var powerLossStates: Int { int("LOCALSTORE_POWERLOSS_STATES", 15) }
    /// Transactions the power-loss workload commits before and after reopening the store
    /// (`LOCALSTORE_POWERLOSS_TXNS=first,second`; `make test`: 30,15; `make stress`: 200,60, past
    /// SQLite's automatic checkpoint).
    static var powerLossTransactions: (Int, Int) {
        let parts = (ProcessInfo.processInfo.environment["LOCALSTORE_POWERLOSS_TXNS"] ?? "").split(separator: ",").compactMap { Int($0) }
        return parts.count == 2 ? (parts[0], parts[1]) : (30, 15)
    }
    /// Where totals are appended (for `make stress`), if set.
    static var reportFile: String? { ProcessInfo.processInfo.environment["LOCALSTORE_RELIABILITY_REPORT"] }
}

/// Prints a result line (prefixed so `make stress` can collect them) and appends it to the report file.
func report(_ line: String) {
    let text = "RELIABILITY \(line)"
    print(text)
    if let path = Settings.reportFile, let handle = FileHandle(forWritingAtPath: path) ?? {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return FileHandle(forWritingAtPath: path)
    }() {
        handle.seekToEndOfFile()
        handle.write(Data((text + "\n").utf8))
        try? handle.close()
    }
}

/// A temporary directory removed when released.
final class TempDirectory: @unchecked Sendable {
    let url: URL
    /// `inSharedMemory`: under /dev/shm (tmpfs) when it is a writable directory.
    init(_ label: String = "reliability", inSharedMemory: Bool = false) throws {
        let base = inSharedMemory && access("/dev/shm", W_OK) == 0
            ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        url = base.appendingPathComponent("LocalStoreReliability-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    var path: String { url.path }
    func path(_ component: String) -> String { url.appendingPathComponent(component).path }
}

/// The helper executable, built next to the test bundle by `swift build --build-tests` (not a dependency of
/// the test target: that would link its libc interposers into the bundle).
func helperPath() throws -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    for _ in 0..<5 {
        let candidate = dir.appendingPathComponent("localstore-crash-writer").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    throw LocalStoreError(
        .internal, "localstore-crash-writer is not built next to \(exe): build it with `swift build --build-tests` (make test does)")
}

/// The `LocalStoreError` code `body` throws, `nil` when it does not throw; any other error is an issue.
func errorCode(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> LocalStoreError.Code? {
    do {
        try body()
        return nil
    } catch let e as LocalStoreError {
        return e.code
    } catch {
        Issue.record("expected a LocalStoreError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return .internal
    }
}

/// Runs `body` on a new thread with a large stack and waits (deep recursion in the core).
func onBigStack<T: Sendable>(_ megabytes: Int = 256, _ body: @escaping @Sendable () throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        box.result = Result { try body() }
        done.signal()
    }
    thread.stackSize = megabytes << 20
    thread.start()
    done.wait()
    return try box.result!.get()
}

final class ResultBox<T>: @unchecked Sendable { var result: Result<T, any Error>? }

/// Runs `body`, which blocks (waits for a child process, sleeps), on a new thread and awaits its result,
/// so that it takes no thread of Swift's cooperative pool (an in-process service answering on that pool,
/// such as the loopback HTTP service, keeps answering meanwhile).
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
        Thread.detachNewThread { done.resume(with: Result { try body() }) }
    }
}


/// SHA-like fingerprint of a file or directory (path → bytes), to prove nothing was written.
func fingerprint(_ path: String) -> [String: [UInt8]] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [:] }
    if !isDirectory.boolValue {
        return [path: (FileManager.default.contents(atPath: path).map { Array($0) }) ?? []]
    }
    var result: [String: [UInt8]] = [path: []]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
        result.merge(fingerprint(path + "/" + name)) { a, _ in a }
    }
    return result
}
