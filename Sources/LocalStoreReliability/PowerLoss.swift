import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLite
#if canImport(LocalStoreSQLCipher)
import LocalStoreSQLCipher
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Power-loss simulation (docs/reliability.md, "Power loss").
///
/// The helper `localstore-crash-writer powerloss-record` runs ``PowerLoss/Profile/record(directory:log:)``
/// under its recorders (the `CPowerLoss` target: a SQLite VFS shim for the SQL backends, libc
/// interposers for LMDB and for directory fsyncs), which log every write, sync, truncation, creation,
/// deletion and directory sync of the store's files, plus a mark after every transaction the API
/// reported committed. ``PowerLoss/Log`` reads that log; ``PowerLoss/Log/crashState(at:variant:rng:)``
/// builds a state a power loss at a point of the log can leave; ``PowerLoss/check(_:log:states:seed:)``
/// reopens many of them and checks each.
public enum PowerLoss {
    // MARK: Profiles

    /// A backend with the durability setting under test and what it promises.
    public struct Profile: Sendable, CustomStringConvertible {
        public var backend: ReliabilityBackend
        /// `durability: .full` (else `.normal`): the SQL backends' `synchronous = FULL` (else `NORMAL`, the
        /// default); LMDB's default full sync (else `MDB_NOMETASYNC`).
        public var strong: Bool

        public init(backend: ReliabilityBackend, strong: Bool) {
            self.backend = backend
            self.strong = strong
        }

        /// Parses `sqlite-normal`, `sqlite-full`, `sqlcipher-normal`, `sqlcipher-full`, `lmdb-sync`,
        /// `lmdb-nometasync`.
        public init?(_ text: String) {
            let parts = text.split(separator: "-").map(String.init)
            guard parts.count == 2, let backend = ReliabilityBackend(rawValue: parts[0]) else { return nil }
            let strong = backend == .lmdb ? ["sync": true, "nometasync": false][parts[1]] : ["full": true, "normal": false][parts[1]]
            guard let strong else { return nil }
            self.init(backend: backend, strong: strong)
        }

        /// Every profile, the backends' defaults first.
        public static let all: [Profile] = [
            Profile(backend: .sqlite, strong: false), Profile(backend: .sqlite, strong: true),
            Profile(backend: .sqlcipher, strong: false), Profile(backend: .sqlcipher, strong: true),
            Profile(backend: .lmdb, strong: true), Profile(backend: .lmdb, strong: false),
        ]

        public var description: String {
            "\(backend)-" + (backend == .lmdb ? (strong ? "sync" : "nometasync") : (strong ? "full" : "normal"))
        }

        /// Whether every transaction reported committed must survive a power loss (SQL `FULL`, LMDB
        /// `.synchronous`); otherwise (SQL `NORMAL`, LMDB `.noMetaSync`) only those committed before the
        /// last completed sync must, and the store must hold a prefix of the transactions, never part of one.
        public var promisesEveryCommit: Bool { strong }

        /// The LMDB map starts at its smallest size (64 KiB), so the recording grows it several times.
        public static let lmdbInitialMapSize = 1 << 16

        /// Opens (or creates) the store with this profile's options.
        public func open(path: String) throws -> any LocalStore {
            switch backend {
            case .sqlite:
                return try SQLiteStore(path: path, options: SQLiteStore.Options(durability: strong ? .full : .normal))
            case .lmdb:
                return try LMDBStore(
                    path: path,
                    options: LMDBStoreOptions(durability: strong ? .full : .normal, initialMapSize: Self.lmdbInitialMapSize))
            case .sqlcipher:
                #if canImport(LocalStoreSQLCipher)
                return try SQLCipherStore(
                    path: path, key: try SQLCipherKey.raw(ReliabilityBackend.sqlcipherKeyBytes),
                    options: SQLCipherStore.Options(durability: strong ? .full : .normal))
                #else
                throw LocalStoreError(.unsupported, "this build does not include LocalStoreSQLCipher")
                #endif
            }
        }

        /// The recorded workload: creates the store in `directory`, commits `first` CrashWorkload
        /// transactions, closes it (a checkpoint and WAL deletion for the SQL backends), reopens it and
        /// commits `second` more, then closes it. `mark` is called after each reported commit.
        public func record(directory: String, first: Int, second: Int, mark: (Int64, Int64) -> Void) throws {
            let path = backend.storePath(in: URL(fileURLWithPath: directory))
            var s: Int64 = 0
            for (phase, count) in [first, second].enumerated() {
                let store = try open(path: path)
                if phase == 0 { try CrashWorkload.prepare(store) }
                for _ in 0..<count {
                    s += 1
                    let op = try CrashWorkload.commit(s, on: store)
                    mark(s, op)
                }
                try store.close()
            }
        }
    }

    // MARK: The log

    public enum Kind: UInt8, Sendable {
        case name = 1, create, write, writeDurable, sync, truncate, directorySync, delete, mark, mkdir
    }

    public struct Operation: Sendable {
        public var kind: Kind
        public var file: Int
        public var a: UInt64
        public var b: UInt64
        /// Where a write's bytes start in the log.
        public var dataStart: Int
    }

    /// What one crash state looked like (for the statistics).
    public struct StateInfo: Sendable {
        public var crashPoint: Int
        public var reported: [Int64: Int64] = [:]
        /// The highest transaction that must be present (at the profile's promise).
        public var floor: Int64 = 0
        /// The highest transaction reported committed before the crash point.
        public var lastReported: Int64 = 0
        public var droppedWrites = 0
        public var keptPendingWrites = 0
        public var tornWrites = 0
        public var missingEntries = 0
        public var resurrectedFiles = 0
    }

    /// How the writes after the last sync of each file are chosen.
    public enum Variant: Int, CaseIterable, Sendable {
        /// Every write reached the disk, every pending directory change too (what a process kill leaves).
        case everything
        /// Nothing after the last sync reached the disk; unsynced creations are gone, unsynced deletions undone.
        case nothing
        /// Each pending write, creation and deletion independently; some written writes torn (a random
        /// subset of their 512-byte sectors).
        case subsetTorn
    }

    public struct Log: Sendable {
        public let bytes: [UInt8]
        public let operations: [Operation]
        public let names: [Int: String]

        public init(path: String) throws {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw LocalStoreError(.ioError, "cannot read the power-loss log '\(path)'")
            }
            let raw = Array(data)
            guard raw.count >= 8, String(decoding: raw[0..<8], as: UTF8.self) == "PLOG0001" else {
                throw LocalStoreError(.corrupt, "'\(path)' is not a power-loss log")
            }
            var ops: [Operation] = []
            var names: [Int: String] = [:]
            var i = 8
            func u64(_ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(raw[at + $1]) << (8 * UInt64($1)) } }
            while i < raw.count {
                guard i + 21 <= raw.count, let kind = Kind(rawValue: raw[i]) else {
                    throw LocalStoreError(.corrupt, "power-loss log '\(path)': bad record at byte \(i)")
                }
                let file = (0..<4).reduce(0) { $0 | Int(raw[i + 1 + $1]) << (8 * $1) }
                let a = u64(i + 5)
                let b = u64(i + 13)
                var op = Operation(kind: kind, file: file, a: a, b: b, dataStart: i + 21)
                i += 21
                if kind == .name || kind == .write || kind == .writeDurable {
                    guard b <= UInt64(raw.count - i) else { throw LocalStoreError(.corrupt, "power-loss log '\(path)' is cut short") }
                    if kind == .name { names[file] = String(decoding: raw[i..<(i + Int(b))], as: UTF8.self) }
                    op.dataStart = i
                    i += Int(b)
                }
                if kind != .name { ops.append(op) }
            }
            bytes = raw
            operations = ops
            self.names = names
        }

        public var syncCount: Int { operations.count { $0.kind == .sync || $0.kind == .writeDurable || $0.kind == .directorySync } }
        public var markCount: Int { operations.count { $0.kind == .mark } }

        /// The relative directory holding `name` ("" for the root).
        static func parent(_ name: String) -> String {
            guard let slash = name.lastIndex(of: "/") else { return "" }
            return String(name[..<slash])
        }

        /// Builds the files a power loss right before operation `k` can leave (`k == operations.count`:
        /// after the last), into `directory`. Returns what it chose.
        public func crashState(
            at k: Int, variant: Variant, rng: inout SplitMix, into directory: String, promisesEveryCommit: Bool,
            durableWritesLost: Bool = false
        ) throws -> StateInfo {
            var info = StateInfo(crashPoint: k)
            var lastSyncAnywhere = -1
            var latestEntryEvent: [Int: Int] = [:]  // file -> index of its last create/mkdir/delete
            var directorySyncs: [String: [Int]] = [:]
            var marks: [(index: Int, seq: Int64, op: Int64)] = []
            for index in 0..<k {
                let op = operations[index]
                switch op.kind {
                case .create, .mkdir, .delete: latestEntryEvent[op.file] = index
                case .directorySync: directorySyncs[names[op.file] ?? "", default: []].append(index)
                case .mark: marks.append((index, Int64(bitPattern: op.a), Int64(bitPattern: op.b)))
                default: break
                }
                if op.kind == .sync || op.kind == .writeDurable { lastSyncAnywhere = index }
            }
            for m in marks { info.reported[m.seq] = m.op }
            info.lastReported = marks.last?.seq ?? 0
            info.floor = promisesEveryCommit ? info.lastReported : (marks.last { $0.index < lastSyncAnywhere }?.seq ?? 0)

            func durableAfter(_ index: Int, in parent: String) -> Bool {
                directorySyncs[parent]?.contains { $0 > index } ?? false
            }
            func choose() -> Bool {
                switch variant {
                case .everything: return true
                case .nothing: return false
                case .subsetTorn: return rng.oneIn(2)
                }
            }
            // Which entries exist (decided once per state, parents first by name length).
            var present: [String: Bool] = ["": true]
            var contentEnd: [Int: Int] = [:]  // file -> end of its instance's operations
            for (file, name) in names.sorted(by: { $0.value.count < $1.value.count }) where !name.isEmpty {
                guard let event = latestEntryEvent[file] else { present[name] = false; continue }
                let parent = Log.parent(name)
                var exists: Bool
                if operations[event].kind == .delete {
                    exists = !durableAfter(event, in: parent) && !choose()
                    if exists { info.resurrectedFiles += 1 }
                } else {
                    exists = durableAfter(event, in: parent) || choose()
                    if !exists { info.missingEntries += 1 }
                }
                if present[parent] != true { exists = false }
                present[name] = exists
                contentEnd[file] = operations[event].kind == .delete ? event : k
            }
            let root = URL(fileURLWithPath: directory)
            for (file, name) in names.sorted(by: { $0.value.count < $1.value.count }) where !name.isEmpty && present[name] == true {
                let target = root.appendingPathComponent(name).path
                if let event = latestEntryEvent[file], operations[event].kind == .mkdir {
                    try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                    continue
                }
                // The instance: from its creation to the crash point (or its deletion).
                var start = 0
                let end = contentEnd[file] ?? k
                for index in stride(from: end - 1, through: 0, by: -1) where operations[index].file == file && operations[index].kind == .create {
                    start = index + 1
                    break
                }
                var lastSync = -1
                for index in start..<end where operations[index].file == file && operations[index].kind == .sync { lastSync = index }
                var content: [UInt8] = []
                for index in start..<end where operations[index].file == file {
                    let op = operations[index]
                    guard op.kind == .write || op.kind == .writeDurable || op.kind == .truncate else { continue }
                    let durable = index < lastSync || (op.kind == .writeDurable && !durableWritesLost)
                    if !durable {
                        if !choose() {
                            info.droppedWrites += 1
                            continue
                        }
                        info.keptPendingWrites += 1
                    }
                    if op.kind == .truncate {
                        content = Array(content.prefix(Int(op.a))) + [UInt8](repeating: 0, count: max(0, Int(op.a) - content.count))
                        continue
                    }
                    let offset = Int(op.a)
                    let length = Int(op.b)
                    if content.count < offset + length { content += [UInt8](repeating: 0, count: offset + length - content.count) }
                    let torn = !durable && variant == .subsetTorn && rng.below(100) < 15
                    if torn { info.tornWrites += 1 }
                    // Sectors of 512 bytes, aligned in the file, reach the disk whole or not at all.
                    func copy(_ from: Int, _ to: Int) {
                        content.withUnsafeMutableBytes { target in
                            bytes.withUnsafeBytes { source in
                                guard let t = target.baseAddress, let s = source.baseAddress, to > from else { return }
                                (t + from).copyMemory(from: s + op.dataStart + (from - offset), byteCount: to - from)
                            }
                        }
                    }
                    if !torn {
                        copy(offset, offset + length)
                        continue
                    }
                    var position = offset
                    while position < offset + length {
                        let next = min(offset + length, (position / 512 + 1) * 512)
                        if rng.oneIn(2) { copy(position, next) }
                        position = next
                    }
                }
                try FileManager.default.createDirectory(
                    atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                guard FileManager.default.createFile(atPath: target, contents: Data(content)) else {
                    throw LocalStoreError(.ioError, "cannot write the crash state file '\(target)'")
                }
            }
            return info
        }
    }

    // MARK: Checking

    /// The totals of a checking run.
    public struct Totals: Sendable, CustomStringConvertible {
        public var states = 0
        public var lostCommitted = 0
        public var unopenable = 0
        public var damaged = 0
        public var integrityFailures = 0
        public var torn = 0
        public var dropped = 0
        public var missingEntries = 0
        public var resurrected = 0
        /// States whose store lacked transactions reported committed, but allowed by a weaker promise.
        public var rolledBackAllowed = 0
        public var problems: [String] = []

        public var description: String {
            "states \(states) lost \(lostCommitted) unopenable \(unopenable) damaged \(damaged) integrity \(integrityFailures)"
                + " rolled-back-allowed \(rolledBackAllowed) torn-writes \(torn) dropped-writes \(dropped)"
                + " missing-entries \(missingEntries) resurrected-files \(resurrected)"
        }
    }

    /// Builds `states` crash states of `log` (seeded), reopens each with `profile`'s options and checks it:
    /// it opens; it holds transactions `1...M` exactly (none half there: ``CrashWorkload/verify(_:reported:allowUnreported:)``)
    /// with `M` at least the promised floor and at most one past the last reported commit; it passes
    /// the store's integrity check and the independent one (``Integrity``).
    ///
    /// `selfTest` checks a weaker recording against a stronger promise, so the check must find lost
    /// transactions: a `NORMAL` SQL profile against the promise that every commit survives; LMDB with
    /// its O_DSYNC meta-page writes treated as unsynced (as if `MDB_NOMETASYNC`).
    public static func check(
        _ profile: Profile, log: Log, states: Int, seed: UInt64, scratch: String, selfTest: Bool = false
    ) -> Totals {
        var totals = Totals()
        var rng = SplitMix(seed: seed)
        let everyCommit = selfTest || profile.promisesEveryCommit
        let durableWritesLost = selfTest && profile.backend == .lmdb
        // Crash points: uniform over the log, and as often right before or after a sync or a mark.
        let interesting = log.operations.indices.filter {
            [.sync, .writeDurable, .directorySync, .mark, .create, .delete].contains(log.operations[$0].kind)
        }
        for n in 0..<states {
            var k = rng.below(log.operations.count + 1)
            if rng.oneIn(2), !interesting.isEmpty { k = min(log.operations.count, interesting[rng.below(interesting.count)] + rng.below(2)) }
            let variant = Variant.allCases[n % Variant.allCases.count]
            let directory = scratch + "/state-\(n)"
            defer { try? FileManager.default.removeItem(atPath: directory) }
            func problem(_ text: String) {
                if totals.problems.count < 20 { totals.problems.append("state \(n) (crash before operation \(k) of \(log.operations.count), \(variant)): \(text)") }
            }
            let info: StateInfo
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                info = try log.crashState(
                    at: k, variant: variant, rng: &rng, into: directory, promisesEveryCommit: everyCommit,
                    durableWritesLost: durableWritesLost)
            } catch {
                problem("cannot build the state: \(error)")
                continue
            }
            totals.states += 1
            totals.torn += info.tornWrites
            totals.dropped += info.droppedWrites
            totals.missingEntries += info.missingEntries
            totals.resurrected += info.resurrectedFiles
            let path = profile.backend.storePath(in: URL(fileURLWithPath: directory))
            let store: any LocalStore
            do {
                store = try profile.open(path: path)
            } catch {
                totals.unopenable += 1
                problem("the store does not open: \(error)")
                continue
            }
            var bad = false
            do {
                let floorReported = info.reported.filter { $0.key <= info.floor }
                let verification = try CrashWorkload.verify(
                    store, reported: floorReported, allowUnreported: info.lastReported + 1 - info.floor)
                if verification.lastSeq < info.floor {
                    totals.lostCommitted += 1
                    bad = true
                } else if !verification.problems.isEmpty {
                    totals.damaged += 1
                    bad = true
                }
                if verification.lastSeq < info.lastReported && verification.lastSeq >= info.floor { totals.rolledBackAllowed += 1 }
                for p in verification.problems { problem(p) }
                if let own = try Integrity.storeCheck(store), !own.isEmpty {
                    totals.integrityFailures += 1
                    bad = true
                    problem("checkIntegrity: \(own.prefix(3).joined(separator: "; "))")
                }
            } catch {
                totals.damaged += 1
                bad = true
                problem("reading the store failed: \(error)")
            }
            try? store.close()
            if !bad, let independent = Integrity.independentCheck(profile.backend, path: path), !independent.isEmpty {
                totals.integrityFailures += 1
                problem("independent check: \(independent.prefix(3).joined(separator: "; "))")
            }
        }
        return totals
    }
}
