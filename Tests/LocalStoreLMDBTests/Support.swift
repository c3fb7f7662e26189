import Foundation
import Synchronization
import LocalStore
import LocalStoreConformance
@testable import LocalStoreLMDB
import Testing

/// SplitMix64: deterministic, so a failure reproduces from its seed.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A temporary directory removed when the test ends.
final class TempDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("LocalStoreLMDBTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }

    var storePath: String { url.appendingPathComponent("store.lmdb").path }
}

/// Runs `body` and returns the `LocalStoreError` code it throws (`nil` when it does not throw).
func errorCode(_ body: () throws -> Void) -> LocalStoreError.Code? {
    do {
        try body()
        return nil
    } catch let e as LocalStoreError {
        return e.code
    } catch {
        Issue.record("unexpected error type: \(error)")
        return nil
    }
}

/// The directory holding the test binary's sibling executables (the SwiftPM build directory).
func builtExecutable(_ name: String) -> String? {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    for _ in 0..<5 {
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return nil
}

/// Carries a non-Sendable value to another thread in a test that checks what happens then.
final class UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// A value behind a lock, shareable between threads.
final class Locked<T: Sendable>: Sendable {
    private let mutex: LockedValue<T>
    init(_ value: T) { mutex = LockedValue(value) }
    func withLock<R: Sendable>(_ body: (inout T) -> R) -> R { mutex.withLock { body(&$0) } }
}

