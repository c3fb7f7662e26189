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
//   localstore-crash-writer odata <shape> <n> <stack KiB>
//       On a thread with the given stack: ODataStress.exercise (a filter text of shape and size n parsed
//       by parseFilter, parseQuery and PullRequest.parse), printing "built", "filter …", "query …",
//       "pull …", "done". A crash shows as a signal and the last line printed.
//   localstore-crash-writer hold-write <backend> <path> <milliseconds>
//       Defines the table Hold (id, note), then inside one write {} upserts a row, prints "holding",
//       sleeps <milliseconds> and returns; prints "committed" once the commit returned.
//   localstore-crash-writer lmdb-walk <path>
//       The raw LMDB integrity walk, for a caller that has the environment open itself.
//   localstore-crash-writer integrity <backend> <path>
//       Opens the store and runs only its integrity check, verifyIntegrity() (no reads first): prints
//       "ok" or "error <step> <code> <message>".
//   localstore-crash-writer lookups <backend> <path> <count>
//       Opens a CrashWorkload store and reads item-1...item-<count> by id (no scans): prints
//       "lookups found=<n> missing=<n> corrupt=<n> other=<n>" and the first "corrupt"/"other" message.
//   localstore-crash-writer sync <backend> <client path> <service path> <run> <seed> [--service <URL> --protocol <p>]
//       SyncCrashWorkload.runChild: opens the client store and the SQLite-backed table service, prints
//       "unanswered <n>" (operations sent before the last kill, answer never read) and "ready", then edits the client store ("edit <seq> <kind> <id>" after each enqueue returned)
//       while a SyncContext pushes and pulls, until killed. With --service the client syncs over HTTP
//       (HTTPSyncTransport) with the service at <URL> (the test's loopback service, which serves the
//       store at <service path>; this process does not open it) in protocol <p>: azureMobileApps
//       (2.0.0) or datasync (3.0.0). Its socket writes go through CPowerLoss's interposers, which
//       forward to libc untouched in this mode (no recording or fault is ever started).
//   localstore-crash-writer faults <backend> <path> <at> <EIO|ENOSPC>
//       FaultWorkload: opens the store (SQL backends through the fault VFS), prints "ready", then runs
//       the workload's steps with the <at>-th write, sync or truncate call on the store's files failing
//       (0: none), printing "ok <step>" after each call that returned and "error <step> <code> <message>"
//       for the first that threw (then it stops); then "calls <n>" (the calls counted) and "done".
//   localstore-crash-writer powerloss-record <profile> <empty dir> <log> <first> <second>
//       Records (CPowerLoss) every write, sync, creation and directory sync of a store created in
//       <dir> by the power-loss workload (PowerLoss.Profile.record) into <log>; prints "recorded
//       <operations> <syncs> <marks>". Profiles: sqlite-normal, sqlite-full, sqlcipher-normal,
//       sqlcipher-full, lmdb-sync, lmdb-nometasync.
//   localstore-crash-writer powerloss-check <profile> <log> <states> <seed> <scratch dir> [self-test]
//       Builds <states> crash states from <log>, reopens and checks each (PowerLoss.check); prints
//       "problem <text>" lines, then "totals <figures>". `self-test`: check against a stronger promise
//       than the recording keeps (PowerLoss.check), so lost transactions must be found.
import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreReliability
import LocalStoreSync
import LocalStoreSyncHTTP
import CPowerLoss
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

/// Opens the store, or prints "error open <code> <message>" and exits normally.
func openOrSayWhy(_ backend: ReliabilityBackend, _ path: String) -> any LocalStore {
    do {
        return try backend.open(path: path)
    } catch {
        say("error open \(describe(error))")
        exit(0)
    }
}

/// Puts the recording (and fault) VFS into the SQLite library `backend`'s store will use, before it
/// opens anything; LMDB needs none (the libc interposers see its calls).
func installRecordingVFS(_ backend: ReliabilityBackend) {
    switch backend {
    case .sqlite:
        let library = dlopen(nil, RTLD_NOW)
        guard let find = dlsym(library, "sqlite3_vfs_find"), let register = dlsym(library, "sqlite3_vfs_register") else {
            die("the system SQLite's sqlite3_vfs_find/sqlite3_vfs_register are not in this process")
        }
        guard powerloss_install_vfs(find, register) == 0 else { die("cannot register the recording VFS") }
    case .sqlcipher:
        // The same flags as LocalStoreSQLCipher's loader: this returns the instance it will use.
        guard let library = dlopen("libsqlcipher.so.0", RTLD_NOW | RTLD_LOCAL | Int32(0x00008)),
            let find = dlsym(library, "sqlite3_vfs_find"), let register = dlsym(library, "sqlite3_vfs_register")
        else { die("cannot load libsqlcipher.so.0's sqlite3_vfs_find/sqlite3_vfs_register") }
        guard powerloss_install_vfs(find, register) == 0 else { die("cannot register the recording VFS in SQLCipher") }
    case .lmdb:
        break
    }
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

case "sync":
    let syncUsage = "usage: sync <backend> <client path> <service path> <run> <seed> [--service <URL> --protocol azureMobileApps|datasync]"
    guard arguments.count == 6 || arguments.count == 10, let run = Int(arguments[4]), let seed = UInt64(arguments[5]) else {
        die(syncUsage, code: 2)
    }
    // Over HTTP: --service <URL> --protocol <p>, in either order.
    let http: (url: String, wire: SyncServiceProtocol)?
    if arguments.count == 10 {
        var flags: [String: String] = [:]
        for i in stride(from: 6, to: 10, by: 2) { flags[arguments[i]] = arguments[i + 1] }
        guard flags.count == 2, let url = flags["--service"], let p = flags["--protocol"].flatMap(SyncServiceProtocol.init(name:)) else {
            die(syncUsage, code: 2)
        }
        http = (url, p)
    } else {
        http = nil
    }
    let client = openOrSayWhy(backend(1), arguments[2])
    let servicePath = arguments[3]
    Task {
        do {
            let transport: any SyncTransport
            if let http {
                transport = HTTPSyncTransport(.init(baseURL: http.url, protocol: http.wire, timeout: .seconds(20)), schemas: client)
            } else {
                transport = try await SyncCrashWorkload.openService(path: servicePath)
            }
            try await SyncCrashWorkload.runChild(client: client, transport: transport, run: run, seed: seed, say: { say($0) })
            say("done")
            exit(0)
        } catch {
            die(describe(error))
        }
    }
    dispatchMain()

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
    _ = OnThread.run(stackKiB: stackKiB) { DeepPredicate.exercise(depth: depth, expression: kind == "expression") { say($0) } }

case "odata":
    guard arguments.count == 4, let n = Int(arguments[2]), let stackKiB = Int(arguments[3]) else {
        die("usage: odata <shape> <n> <stack KiB>", code: 2)
    }
    let shape = arguments[1]
    _ = OnThread.run(stackKiB: stackKiB) { ODataStress.exercise(shape, n) { say($0) } }

case "hold-write":
    guard arguments.count == 4, let milliseconds = UInt32(arguments[3]) else { die("usage: hold-write <backend> <path> <milliseconds>", code: 2) }
    do {
        let store = try backend(1).open(path: arguments[2])
        try store.defineTable(TableSchema("Hold", ["id": .string, "note": .string]))
        try store.write { tx in
            try tx.upsert([["id": "held", "note": .string("pid \(getpid())")]], into: "Hold")
            say("holding")
            usleep(milliseconds * 1000)
        }
        say("committed")
        try store.close()
    } catch {
        die(describe(error))
    }

case "lmdb-walk":
    guard arguments.count == 2 else { die("usage: lmdb-walk <path>", code: 2) }
    let problems = LMDBWalk.check(path: arguments[1])
    say(problems.isEmpty ? "ok" : "damaged " + problems.joined(separator: " | "))

case "integrity":
    guard arguments.count == 3 else { die("usage: integrity <backend> <path>", code: 2) }
    // LMDB: the pages are walked in a forked child before this process reads any (a damaged page can
    // make liblmdb abort), as a program that must survive damage opens it.
    let store: any LocalStore
    if backend(1) == .lmdb {
        do {
            store = try LMDBStore(path: arguments[2], options: LMDBStoreOptions(verifyPagesOnOpen: true))
        } catch {
            say("error open \(describe(error))")
            exit(0)
        }
    } else {
        store = openOrSayWhy(backend(1), arguments[2])
    }
    do {
        // The typed form: damage found by the check is `corrupt` too, as a caller sees it.
        guard let checking = store as? any IntegrityChecking else { die("\(arguments[1]) has no integrity check", code: 2) }
        try checking.verifyIntegrity()
        say("ok")
    } catch {
        say("error check \(describe(error))")
    }

case "lookups":
    guard arguments.count == 4, let count = Int(arguments[3]) else { die("usage: lookups <backend> <path> <count>", code: 2) }
    let store = openOrSayWhy(backend(1), arguments[2])
    var tally = (found: 0, missing: 0, corrupt: 0, other: 0)
    var first = ""
    for k in 1...max(count, 1) {
        do {
            if try store.read(table: CrashWorkload.itemTable, id: "item-\(k)") != nil { tally.found += 1 } else { tally.missing += 1 }
        } catch let e as LocalStoreError where e.code == .corrupt {
            tally.corrupt += 1
            if first.isEmpty { first = "item-\(k): \(e.message)" }
        } catch {
            tally.other += 1
            first = "item-\(k): \(describe(error))"
        }
    }
    say("lookups found=\(tally.found) missing=\(tally.missing) corrupt=\(tally.corrupt) other=\(tally.other) \(first)")

case "faults":
    guard arguments.count == 5, let at = Int(arguments[3]), ["EIO", "ENOSPC"].contains(arguments[4]) else {
        die("usage: faults <backend> <path> <at> <EIO|ENOSPC>", code: 2)
    }
    let faultBackend = backend(1)
    let storePath = URL(fileURLWithPath: arguments[2]).standardizedFileURL.resolvingSymlinksInPath().path
    let root = (storePath as NSString).deletingLastPathComponent
    installRecordingVFS(faultBackend)
    powerloss_fault_prepare(root, Int32(faultBackend == .lmdb ? POWERLOSS_MODE_LIBC : POWERLOSS_MODE_VFS))
    let store = openOrSayWhy(faultBackend, storePath)
    say("ready")
    powerloss_fault_arm(at, arguments[4] == "EIO" ? EIO : ENOSPC)
    for (n, step) in FaultWorkload.steps(faultBackend).enumerated() {
        do {
            try step.run(store)
            say("ok \(n + 1)")
        } catch {
            say("error \(n + 1) \(describe(error))")
            break
        }
    }
    say("calls \(powerloss_fault_stop())")
    try? store.close()
    say("done")

case "powerloss-record":
    guard arguments.count == 6, let profile = PowerLoss.Profile(arguments[1]), let first = Int(arguments[4]),
        let second = Int(arguments[5])
    else { die("usage: powerloss-record <profile> <empty dir> <log> <first> <second>", code: 2) }
    let directory = URL(fileURLWithPath: arguments[2]).standardizedFileURL.resolvingSymlinksInPath().path
    installRecordingVFS(profile.backend)
    let mode = Int32(profile.backend == .lmdb ? POWERLOSS_MODE_LIBC : POWERLOSS_MODE_VFS)
    guard powerloss_start(directory, arguments[3], mode) == 0 else { die("cannot create the log '\(arguments[3])'") }
    do {
        try profile.record(directory: directory, first: first, second: second) { powerloss_mark($0, $1) }
    } catch {
        die(describe(error))
    }
    powerloss_stop()
    do {
        let log = try PowerLoss.Log(path: arguments[3])
        say("recorded \(log.operations.count) \(log.syncCount) \(log.markCount)")
    } catch {
        die(describe(error))
    }

case "powerloss-check":
    guard arguments.count == 6 || arguments.count == 7, let profile = PowerLoss.Profile(arguments[1]),
        let states = Int(arguments[3]), let seed = UInt64(arguments[4])
    else { die("usage: powerloss-check <profile> <log> <states> <seed> <scratch dir> [self-test]", code: 2) }
    do {
        let log = try PowerLoss.Log(path: arguments[2])
        let totals = PowerLoss.check(
            profile, log: log, states: states, seed: seed, scratch: arguments[5],
            selfTest: arguments.count == 7 && arguments[6] == "self-test")
        for p in totals.problems { say("problem \(p)") }
        say("totals \(totals)")
    } catch {
        die(describe(error))
    }

default:
    die("unknown mode '\(mode)'", code: 2)
}
