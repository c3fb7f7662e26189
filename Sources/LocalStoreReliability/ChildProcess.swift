import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A helper process started with Foundation's `Process`, its stdout read continuously on a thread
/// (so the child never blocks on a full pipe) and split into lines.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    private let stdoutPipe = Pipe()
    private let stderrPipe = Pipe()
    private let stdinPipe = Pipe()
    private let condition = NSCondition()
    private var buffer: [UInt8] = []
    private var lines: [String] = []
    private var stderrBytes: [UInt8] = []
    private var stdoutClosed = false
    private var stderrClosed = false

    /// Starts `executable` with `arguments`.
    public init(executable: String, arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.standardInput = stdinPipe
        try process.run()
        let out = stdoutPipe.fileHandleForReading.fileDescriptor
        let err = stderrPipe.fileHandleForReading.fileDescriptor
        Thread.detachNewThread { [self] in pump(out, isStdout: true) }
        Thread.detachNewThread { [self] in pump(err, isStdout: false) }
    }

    private func pump(_ fd: Int32, isStdout: Bool) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            condition.lock()
            if n <= 0 {
                if isStdout { stdoutClosed = true } else { stderrClosed = true }
                condition.broadcast()
                condition.unlock()
                return
            }
            if isStdout {
                buffer.append(contentsOf: chunk[0..<n])
                while let newline = buffer.firstIndex(of: 10) {
                    lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
                    buffer.removeSubrange(...newline)
                }
            } else {
                stderrBytes.append(contentsOf: chunk[0..<n])
            }
            condition.broadcast()
            condition.unlock()
        }
    }

    public var pid: Int32 { process.processIdentifier }

    /// The complete lines read so far.
    public var outputLines: [String] {
        condition.lock()
        defer { condition.unlock() }
        return lines
    }

    /// Everything read from stderr so far.
    public var errorOutput: String {
        condition.lock()
        defer { condition.unlock() }
        return String(decoding: stderrBytes, as: UTF8.self)
    }

    /// Waits until a line satisfying `predicate` arrives (true), stdout closes or `timeout` passes (false).
    public func waitForLine(timeout: TimeInterval, _ predicate: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if lines.contains(where: predicate) { return true }
            if stdoutClosed { return false }
            if !condition.wait(until: deadline) { return lines.contains(where: predicate) }
        }
    }

    /// Writes a line to the child's stdin.
    public func send(_ line: String) {
        try? stdinPipe.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// SIGKILL.
    public func kill() { _ = Glibc.kill(process.processIdentifier, SIGKILL) }

    /// Waits for the process to end and for both pipes to be drained; returns how it ended.
    @discardableResult
    public func wait(timeout: TimeInterval = 120) -> Termination {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                kill()
                process.waitUntilExit()
                break
            }
            usleep(2000)
        }
        process.waitUntilExit()
        condition.lock()
        while !(stdoutClosed && stderrClosed) {
            if !condition.wait(until: Date().addingTimeInterval(10)) { break }
        }
        condition.unlock()
        try? stdinPipe.fileHandleForWriting.close()
        return process.terminationReason == .uncaughtSignal
            ? .signal(process.terminationStatus) : .exit(process.terminationStatus)
    }

    /// How a child process ended.
    public enum Termination: Equatable, CustomStringConvertible, Sendable {
        case exit(Int32)
        case signal(Int32)

        public var description: String {
            switch self {
            case .exit(let code): return "exit \(code)"
            case .signal(let s): return "signal \(s)\(s == SIGKILL ? " (SIGKILL)" : s == SIGSEGV ? " (SIGSEGV)" : s == SIGBUS ? " (SIGBUS)" : s == SIGILL ? " (SIGILL, a Swift trap)" : s == SIGABRT ? " (SIGABRT)" : s == SIGTRAP ? " (SIGTRAP, a Swift trap)" : "")"
            }
        }
    }
}
