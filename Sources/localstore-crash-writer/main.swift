// The reliability tests' helper process (see docs/reliability.md). Every mode prints its results on
// stdout, one line each, written with write(2) right away (no buffering), so a line the test reads
// is a fact that happened before the process died.
//
//   localstore-crash-writer crash <backend> <path> [<max>]
//       Opens the store, defines the crash tables, then commits CrashWorkload transactions
//       last+1, last+2, ... printing "<seq> <operation id>" after each commit returned, until <max>
//       (then "done") or until killed. Prints "ready" once the store is open.
//   localstore-crash-writer multi <backend> <path> <tag> <count>
//       Opens the store, prints "ready", waits for a line on stdin, then commits <count>
//       transactions, each upserting MultiItem "<tag>-<n>" and appending its operation, printing
//       "<n> <operation id>"; then "done".
//   localstore-crash-writer define <backend> <path> <table>
//       Defines <table> (id, note), upserts the row "from-other-process", prints "done".
//   localstore-crash-writer probe <backend> <path>
//       Opens a (possibly damaged) store read-only in spirit: lists tables, reads every row of every
//       table, runs the integrity checks. Prints "ok rows=<n>", "damaged <problems>" or
//       "error <step> <code> <message>". A crash shows as a signal to the caller.
//   localstore-crash-writer deep <depth> <stack KiB> <predicate|expression>
//       On a thread with the given stack: builds a predicate nested <depth> levels deep, resolves a
//       query with it against an in-memory store, and destroys it, printing "built",
//       "resolved <code>", "destroyed". The last line printed tells which step crashed.
//   localstore-crash-writer lmdb-walk <path>
//       The raw LMDB integrity walk, for a caller that has the environment open itself.
import Foundation
import LocalStore
import LocalStoreReliability
#if canImport(Glibc)
import Glibc
#endif

func say(_ text: String, fd: Int32 = 1) {
    let bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n <= 0 { if errno == EINTR { continue } else { exit(4) } }
        offset += n
    }
}

func die(_ text: String, code: Int32 = 3) -> Never {
    say("localstore-crash-writer: \(text)", fd: 2)
    exit(code)
}

func describe(_ error: any Error) -> String {
    if let e = error as? LocalStoreError { return "\(e.code) \(e.message)" }
    return "non-LocalStoreError \(type(of: error)): \(error)"
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else { die("usage: see the comment at the top of main.swift", code: 2) }

func backend(_ index: Int) -> ReliabilityBackend {
    guard arguments.count > index, let b = ReliabilityBackend(rawValue: arguments[index]) else {
        die("unknown backend '\(arguments.count > index ? arguments[index] : "")'", code: 2)
    }
    return b
}

switch mode {
case "crash":
    guard arguments.count >= 3 else { die("usage: crash <backend> <path> [<max>]", code: 2) }
    let max = arguments.count > 3 ? Int64(arguments[3]) ?? Int64.max : Int64.max
    // Fault injection for the harness's self-test: commit each unit of work in four transactions.
    let faultySplit = ProcessInfo.processInfo.environment["LOCALSTORE_CRASH_FAULT"] == "split"
    do {
        let store = try backend(1).open(path: arguments[2])
        try CrashWorkload.prepare(store)
        var s = try CrashWorkload.lastSeq(store)
        say("ready \(s)")
        while s < max {
            s += 1
            let op = try CrashWorkload.commit(s, on: store, faultySplit: faultySplit)
            say("\(s) \(op)")
        }
        try store.close()
        say("done")
    } catch {
        die(describe(error))
    }

case "multi":
    guard arguments.count == 5, let count = Int(arguments[4]) else { die("usage: multi <backend> <path> <tag> <count>", code: 2) }
    let tag = arguments[3]
    do {
        let store = try backend(1).open(path: arguments[2])
        try store.defineTable(MultiProcessWorkload.schema)
        say("ready")
        _ = readLine()
        for n in 1...max(count, 1) {
            let op = try MultiProcessWorkload.commit(tag: tag, n: n, on: store)
            say("\(n) \(op)")
        }
        try store.close()
        say("done")
    } catch {
        die(describe(error))
    }

case "define":
    guard arguments.count == 4 else { die("usage: define <backend> <path> <table>", code: 2) }
    do {
        let store = try backend(1).open(path: arguments[2])
        try store.defineTable(TableSchema(arguments[3], ["id": .string, "note": .string]))
        try store.upsert([["id": "from-other-process", "note": .string("written by pid \(getpid())")]], into: arguments[3])
        try store.close()
        say("done")
    } catch {
        die(describe(error))
    }

case "probe":
    guard arguments.count == 3 else { die("usage: probe <backend> <path>", code: 2) }
    say(Probe.run(backend(1), path: arguments[2]))

case "deep":
    guard arguments.count == 4, let depth = Int(arguments[1]), let stackKiB = Int(arguments[2]) else {
        die("usage: deep <depth> <stack KiB> <predicate|expression>", code: 2)
    }
    let kind = arguments[3]
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        DeepPredicate.exercise(depth: depth, expression: kind == "expression") { say($0) }
        done.signal()
    }
    thread.stackSize = stackKiB << 10
    thread.start()
    done.wait()

case "lmdb-walk":
    guard arguments.count == 2 else { die("usage: lmdb-walk <path>", code: 2) }
    let problems = LMDBWalk.check(path: arguments[1])
    say(problems.isEmpty ? "ok" : "damaged " + problems.joined(separator: " | "))

default:
    die("unknown mode '\(mode)'", code: 2)
}
