import CLMDB
import Foundation
import LocalStore
import LocalStoreKV
import LocalStoreConformance
@testable import LocalStoreLMDB
import Synchronization
import Testing

@Suite("LMDB store")
struct StoreTests {
    static let blobSchema = TableSchema("Blob", ["data": .binary, "n": .integer], indexed: ["n"])

    // MARK: Map growth

    @Test("writing far more than the initial map grows it, and everything survives a reopen")
    func mapGrows() throws {
        let dir = try TempDirectory()
        let options = LMDBStoreOptions(initialMapSize: 1 << 20)
        var store: LMDBStore? = try LMDBStore(path: dir.storePath, options: options)
        let initial = try store!.mapSize()
        #expect(initial <= 1 << 20)
        try store!.defineTable(Self.blobSchema)
        // 40 MiB in batches of 1 MiB (single upserts).
        let chunk = [UInt8](repeating: 0xAB, count: 64 << 10)
        for batch in 0..<40 {
            let items: [Item] = (0..<16).map { k in
                ["id": .string("b\(batch)-\(k)"), "data": .binary(chunk), "n": .int(Int64(batch * 16 + k))]
            }
            try store!.upsert(items, into: "Blob")
        }
        // One transaction writing 16 MiB: the map fills in the middle of the body. The body runs
        // once (the writes before the growth are replayed, not re-run).
        let bodyRuns = Locked(0)
        try store!.write { tx in
            bodyRuns.withLock { $0 += 1 }
            for k in 0..<256 {
                try tx.upsert([["id": .string("w\(k)"), "data": .binary(chunk), "n": .int(Int64(10_000 + k))]], into: "Blob")
                // Reads inside the body see the writes made before a growth.
                if k % 64 == 63 { #expect(try tx.count("Blob", where: Field("n") >= 10_000) == k + 1) }
            }
        }
        #expect(bodyRuns.withLock { $0 } == 1)
        let grown = try store!.mapSize()
        #expect(grown > 56 << 20)
        #expect(try store!.count("Blob") == 40 * 16 + 256)
        try store!.close()
        store = nil

        let reopened = try LMDBStore(path: dir.storePath, options: options)
        #expect(try reopened.mapSize() >= grown)
        #expect(try reopened.count("Blob") == 40 * 16 + 256)
        #expect(try reopened.read(table: "Blob", id: "W255")?["data"] == .binary(chunk))
        #expect(try reopened.read(Query("Blob", where: Field("n") == 10_255)).items.first?["id"] == "w255")
        #expect(try reopened.explain(Query("Blob", where: Field("n") == 10_255)) == "index n")
        try reopened.close()
    }

    /// Another process commits while this process's transaction waits for the map to grow: the
    /// writes made so far cannot simply be replayed (the state changed under them), so the body runs
    /// again from the start, and both processes' writes land exactly once.
    @Test("a map growth interleaved with another process's commit re-runs the body")
    func growthWithConcurrentProcess() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath, options: LMDBStoreOptions(initialMapSize: 1 << 20))
        defer { try? store.close() }
        try store.defineTable(Self.blobSchema)
        try store.upsert([["id": "before", "n": 0]], into: "Blob")

        let helper = try #require(builtExecutable("lmdb-reader-holder"))
        let child = Process()
        child.executableURL = URL(fileURLWithPath: helper)
        child.arguments = ["write", dir.storePath]
        let input = Pipe()
        let output = Pipe()
        child.standardInput = input
        child.standardOutput = output
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL) } }
        var received = ""
        func waitFor(_ word: String) {
            while !received.contains(word) {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { return }
                received += String(decoding: chunk, as: UTF8.self)
            }
        }
        waitFor("ready")

        // Give the child time to take the writer lock while this process grows the map (without
        // the pause this process usually wins the lock back first, and replay is then correct).
        store.environment.afterGrowthAbortHook.withLock { $0 = { usleep(300_000) } }
        let chunk = [UInt8](repeating: 0x5A, count: 64 << 10)
        var runs = 0
        try store.write { tx in
            runs += 1
            try tx.upsert([["id": .string("small\(runs)"), "n": .int(Int64(runs))]], into: "Blob")
            if runs == 1 {
                // Let the child queue up for the writer lock, which this transaction holds.
                input.fileHandleForWriting.write(Data("go\n".utf8))
                waitFor("waiting")
                usleep(300_000)
            }
            // 4 MiB into a 1 MiB map: the map fills, this transaction is aborted, the child takes
            // the writer lock and commits before the map has grown.
            for k in 0..<64 {
                try tx.upsert([["id": .string("big\(k)"), "data": .binary(chunk), "n": .int(Int64(100 + k))]], into: "Blob")
            }
        }
        waitFor("done")
        child.waitUntilExit()
        #expect(child.terminationStatus == 0)
        #expect(runs == 2)
        // The first run's writes were rolled back; the second run's committed once.
        #expect(try store.read(table: "Blob", id: "small1") == nil)
        #expect(try store.read(table: "Blob", id: "small2")?["n"] == 2)
        #expect(try store.count("Blob") == 1 + 1 + 64)
        let childWrote = try store.environment.read { context in
            try context.withValue(try context.handle(MetaKey.database), Array("childWrote".utf8)) { Array($0) }
        }
        #expect(childWrote == [1])
    }

    /// The map is remapped many times while other threads read and write: no reader sees a torn
    /// state or freed memory, every write lands.
    @Test("map growth under concurrent readers and writers")
    func growthUnderConcurrency() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath, options: LMDBStoreOptions(initialMapSize: 1 << 20))
        defer { try? store.close() }
        try store.defineTable(Self.blobSchema)
        let problems = Locked<[String]>([])
        let writersDone = Locked(0)
        let writers = 3
        let perWriter = 60
        var bodies: [@Sendable () -> Void] = []
        for w in 0..<writers {
            bodies.append({
                let chunk = [UInt8](repeating: UInt8(w), count: 48 << 10)
                do {
                    for k in 0..<perWriter {
                        try store.write { tx in
                            // Two rows per transaction: readers must always see an even count.
                            try tx.upsert([["id": .string("w\(w)-\(k)-a"), "data": .binary(chunk), "n": .int(Int64(k))]], into: "Blob")
                            try tx.upsert([["id": .string("w\(w)-\(k)-b"), "data": .binary(chunk), "n": .int(Int64(k))]], into: "Blob")
                        }
                    }
                } catch {
                    problems.withLock { $0.append("writer \(w): \(error)") }
                }
                writersDone.withLock { $0 += 1 }
            })
        }
        for r in 0..<4 {
            bodies.append({
                var last = 0
                while writersDone.withLock({ $0 }) < writers {
                    do {
                        let count = try store.count("Blob")
                        if count % 2 != 0 || count < last { problems.withLock { $0.append("reader \(r) saw \(count) after \(last)") } }
                        last = count
                        let rows = try store.read(Query("Blob", where: Field("n") >= 50, top: 5)).items
                        for row in rows where row["data"]?.binaryValue?.count != 48 << 10 {
                            problems.withLock { $0.append("reader \(r) saw a damaged row") }
                        }
                    } catch {
                        problems.withLock { $0.append("reader \(r): \(error)") }
                        return
                    }
                }
            })
        }
        runOnThreads(bodies)
        #expect(problems.withLock { $0 }.isEmpty, "\(problems.withLock { $0 }.prefix(5))")
        #expect(try store.count("Blob") == writers * perWriter * 2)
        #expect(try store.mapSize() > 8 << 20)
    }

    @Test("a schema change that fills the map is retried")
    func defineTableGrows() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath, options: LMDBStoreOptions(initialMapSize: 1 << 20))
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["s": .string, "n": .integer]))
        let text = String(repeating: "x", count: 2000)
        try store.upsert((0..<2000).map { ["id": .string("r\($0)"), "s": .string(text + "\($0)"), "n": .int(Int64($0))] }, into: "T")
        // Building two new indexes over 4 MB of rows needs more room than the map has left.
        try store.defineTable(TableSchema("T", ["s": .string, "n": .integer], indexed: ["s", "n"]))
        #expect(try store.explain(Query("T", where: Field("s") == .literal(.string(text + "7")))) == "index s")
        #expect(try store.read(Query("T", where: Field("s") == .literal(.string(text + "7")))).items.map { $0["id"] } == ["r7"])
        #expect(try store.count("T", where: Field("n") < 10) == 10)
    }

    @Test("running out of LMDB databases is a clean `full` error")
    func databaseLimit() throws {
        let dir = try TempDirectory()
        // The catalog and the system tables take 7 of the 9 databases.
        let store = try LMDBStore(path: dir.storePath, options: LMDBStoreOptions(maximumDatabases: 9))
        defer { try? store.close() }
        try store.defineTable(TableSchema("A", ["n": .integer], indexed: ["n"]))
        #expect(errorCode { try store.defineTable(TableSchema("B", ["n": .integer])) } == .full)
        #expect(try store.tableSchemas().map(\.name) == ["A"])
        try store.upsert([["id": "x", "n": 1]], into: "A")
        #expect(try store.read(Query("A", where: Field("n") == 1)).items.count == 1)
    }

    // MARK: Opening

    @Test("reopening keeps tables, rows, indexes and the operation queue")
    func reopen() throws {
        let dir = try TempDirectory()
        do {
            let store = try LMDBStore(path: dir.storePath)
            try store.defineTable(TableSchema("Todo", ["title": .string, "due": .date], indexed: ["due"]))
            try store.upsert([["id": "A", "title": "one", "due": .date(Date(timeIntervalSinceReferenceDate: 5))]], into: "Todo")
            _ = try store.appendOperation(table: "Todo", itemId: "A")
            try store.close()
            try store.close()  // twice is fine
            #expect(errorCode { _ = try store.read(table: "Todo", id: "a") } == .closed)
        }
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        #expect(try store.tableSchemas().map(\.name) == ["Todo"])
        #expect(try store.read(table: "Todo", id: "a")?["title"] == "one")
        #expect(try store.appendOperation(table: "Todo", itemId: "B").id == 2)
        #expect(try store.explain(Query("Todo", where: Field("due") > .literal(.date(Date(timeIntervalSinceReferenceDate: 0))))) == "index due")
    }

    @Test("two stores on one directory share the environment")
    func sharedEnvironment() throws {
        let dir = try TempDirectory()
        let a = try LMDBStore(path: dir.storePath)
        let b = try LMDBStore(path: dir.storePath)
        try a.defineTable(TableSchema("T", ["n": .integer]))
        try b.upsert([["id": "x", "n": 1]], into: "T")
        #expect(try a.read(table: "T", id: "X")?["n"] == 1)
        try a.close()
        #expect(errorCode { _ = try a.count("T") } == .closed)
        #expect(try b.count("T") == 1)
        try b.close()
    }

    @Test("a garbage data file is notADatabase (or corrupt), never a crash", arguments: [0, 100, 4096, 1 << 16])
    func garbageDataFile(size: Int) throws {
        let dir = try TempDirectory()
        try FileManager.default.createDirectory(atPath: dir.storePath, withIntermediateDirectories: true)
        var rng = SeededRNG(seed: UInt64(size) + 1)
        let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        try Data(bytes).write(to: URL(fileURLWithPath: dir.storePath + "/data.mdb"))
        if size == 0 {
            // An empty data file is a new environment.
            let store = try LMDBStore(path: dir.storePath)
            try store.close()
            return
        }
        let code = errorCode { _ = try LMDBStore(path: dir.storePath) }
        #expect(code == .notADatabase || code == .corrupt, "got \(String(describing: code))")
    }

    @Test("a file or a foreign directory is notADatabase")
    func notADatabase() throws {
        let dir = try TempDirectory()
        let file = dir.url.appendingPathComponent("file").path
        try Data("hello".utf8).write(to: URL(fileURLWithPath: file))
        #expect(errorCode { _ = try LMDBStore(path: file) } == .notADatabase)
        let foreign = dir.url.appendingPathComponent("foreign").path
        try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: foreign + "/notes.txt"))
        #expect(errorCode { _ = try LMDBStore(path: foreign) } == .notADatabase)
        // An LMDB environment with data LocalStore did not write.
        let other = dir.url.appendingPathComponent("other").path
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        var env: OpaquePointer?
        #expect(mdb_env_create(&env) == 0)
        #expect(mdb_env_open(env, other, 0, 0o600) == 0)
        var txn: OpaquePointer?
        #expect(mdb_txn_begin(env, nil, 0, &txn) == 0)
        var dbi: MDB_dbi = 0
        #expect(mdb_dbi_open(txn, nil, 0, &dbi) == 0)
        var key = Array("hello".utf8)
        var value = Array("world".utf8)
        key.withUnsafeMutableBytes { k in
            value.withUnsafeMutableBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                #expect(mdb_put(txn, dbi, &kv, &vv, 0) == 0)
            }
        }
        #expect(mdb_txn_commit(txn) == 0)
        mdb_env_close(env)
        #expect(errorCode { _ = try LMDBStore(path: other) } == .notADatabase)
    }

    /// LMDB resets its reader table when the first process opens an environment, so a stale slot
    /// matters (it pins old pages forever) while another process keeps the environment open. Here
    /// this process keeps it open, a child takes a reader slot and is killed, and opening a store
    /// again clears the slot.
    @Test("a reader slot left by a killed process is cleared when a store is opened")
    func staleReaderCleared() throws {
        let dir = try TempDirectory()
        let holder = try LMDBStore(path: dir.storePath)
        defer { try? holder.close() }
        try holder.upsert([["id": "x", "table": "T", "key": "k", "keyType": 0, "value": "v"]], into: holder.configTableName)
        #expect(try holder.readerSlotProcesses().isEmpty)

        let helper = try #require(builtExecutable("lmdb-reader-holder"), "the lmdb-reader-holder helper is built next to the tests")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: helper)
        process.arguments = [dir.storePath]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // Wait until the child has its read transaction open.
        var received = Data()
        while !String(decoding: received, as: UTF8.self).contains("ready") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            received.append(chunk)
        }
        #expect(String(decoding: received, as: UTF8.self).contains("ready"))
        #expect(try holder.readerSlotProcesses() == [process.processIdentifier])
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        // The dead child's slot is still taken.
        #expect(try holder.readerSlotProcesses() == [process.processIdentifier])

        let store = try LMDBStore(path: dir.storePath)
        #expect(store.clearedStaleReaders == 1)
        #expect(try store.readerSlotProcesses().isEmpty)
        #expect(try store.clearStaleReaders() == 0)
        #expect(try store.read(table: store.configTableName, id: "X")?["value"] == "v")
        try store.close()
    }

    // MARK: Transactions

    @Test("calling the store inside its own write body is misuse; a transaction is bound to its body and thread")
    func misuse() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["n": .integer]))
        var escaped: (any LocalStoreTransaction)?
        try store.write { tx in
            escaped = tx
            #expect(errorCode { _ = try store.read(table: "T", id: "a") } == .misuse)
            #expect(errorCode { try store.upsert([["id": "a"]], into: "T") } == .misuse)
            #expect(errorCode { try store.close() } == .misuse)
            let box = UncheckedBox(tx)
            let done = DispatchSemaphore(value: 0)
            let other = Thread {
                #expect(errorCode { _ = try box.value.read(table: "T", id: "a") } == .misuse)
                done.signal()
            }
            other.start()
            done.wait()
            try tx.upsert([["id": "a", "n": 1]], into: "T")
        }
        #expect(errorCode { _ = try escaped?.read(table: "T", id: "a") } == .misuse)
        #expect(try store.read(table: "T", id: "a")?["n"] == 1)
    }

    @Test("readers run while a write transaction is open (they do not wait for it)")
    func readersDoNotWaitForWriter() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["n": .integer]))
        try store.upsert([["id": "a", "n": 1]], into: "T")
        let seen = Locked<[Value?]>([])
        try store.write { tx in
            try tx.upsert([["id": "a", "n": 2]], into: "T")
            let reader = Thread {
                let v = try? store.read(table: "T", id: "a")?["n"]
                seen.withLock { $0.append(v) }
            }
            reader.start()
            var waited = 0
            while seen.withLock({ $0.isEmpty }) && waited < 5000 {
                usleep(1000)
                waited += 1
            }
        }
        #expect(seen.withLock { $0 } == [.int(1)])
        #expect(try store.read(table: "T", id: "a")?["n"] == 2)
    }

    @Test("json nested deeper than the stored limit is refused on write")
    func deepJSON() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("J", ["j": .json]))
        var ok: JSON = 1
        for _ in 0..<RecordCodec.maximumJSONDepth { ok = [ok] }
        try store.upsert([["id": "ok", "j": .json(ok)]], into: "J")
        #expect(try store.read(table: "J", id: "ok")?["j"] == .json(ok))
        #expect(errorCode { try store.upsert([["id": "deep", "j": .json([ok])]], into: "J") } == .invalidValue)
    }

    // MARK: Maintenance

    @Test("compact(to:) writes a copy that opens with the same data")
    func compact() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        try store.defineTable(TableSchema("T", ["s": .string], indexed: ["s"]))
        try store.upsert((0..<500).map { ["id": .string("r\($0)"), "s": .string(String(repeating: "y", count: 300))] }, into: "T")
        try store.delete(matching: Query("T", where: Field("id") >= "r2"))
        let copy = dir.url.appendingPathComponent("copy").path
        try store.compact(to: copy)
        #expect(errorCode { try store.compact(to: copy) } == .invalidValue)
        try store.close()
        let compacted = try LMDBStore(path: copy)
        defer { try? compacted.close() }
        let original = try LMDBStore(path: dir.storePath)
        #expect(try compacted.count("T") == original.count("T"))
        try original.close()
        #expect(try compacted.count("T", where: Field("s") == .literal(.string(String(repeating: "y", count: 300)))) == 112)
    }

    @Test("the fast durability modes work and sync() flushes", arguments: [StoreDurability.off, .normal, .full])
    func durability(mode: StoreDurability) throws {
        let dir = try TempDirectory()
        do {
            let store = try LMDBStore(path: dir.storePath, options: LMDBStoreOptions(durability: mode))
            try store.defineTable(TableSchema("T", ["n": .integer]))
            try store.upsert([["id": "a", "n": 1]], into: "T")
            try store.sync()
            try store.close()
        }
        let store = try LMDBStore(path: dir.storePath)
        #expect(try store.read(table: "T", id: "a")?["n"] == 1)
        try store.close()
    }

    // MARK: Planner

    @Test("an ordered walk chosen by cost gives up on correlated data and reads the range instead")
    func orderedWalkBudget() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(TableSchema("E", ["old": .boolean, "at": .integer], indexed: ["old", "at"]))
        // The matching rows (old == true) are the oldest: a newest-first walk meets 1,500 others first.
        try store.upsert((0..<3000).map { ["id": .string("e\($0)"), "old": .bool($0 < 1500), "at": .int(Int64($0))] }, into: "E")
        for top in [1, 3, 40] {
            let q = Query("E", where: Field("old") == true, sort: [SortKey("at", .descending)], skip: 1, top: top)
            #expect(try store.explain(q) == "ordered index at")
            let ids = try store.read(q).items.map { $0["id"] }
            #expect(ids == (0..<1500).reversed().dropFirst().prefix(top).map { Value.string("e\($0)") })
            let inTransaction = try store.write { tx in try tx.read(q) }.items.map { $0["id"] }
            #expect(inTransaction == ids)
        }
        #expect(try store.count("E", where: Field("old") == true) == 1500)
    }

    @Test("indexed queries use their index")
    func explainUsesIndexes() throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath)
        defer { try? store.close() }
        try store.defineTable(
            TableSchema("Todo", ["title": .string, "priority": .integer, "score": .double, "done": .boolean, "note": .string],
                        indexed: ["title", "priority", "score", "done"]))
        try store.upsert((0..<50).map { ["id": .string("t\($0)"), "title": .string("task \($0)"), "priority": .int(Int64($0 % 5))] }, into: "Todo")
        func plan(_ p: QueryPredicate?, sort: [SortKey] = [], top: Int? = nil, count: Bool = false) throws -> String {
            try store.explain(Query("Todo", where: p, sort: sort, top: top, includeTotalCount: count))
        }
        #expect(try plan(Field("id") == "t1") == "primary key")
        #expect(try plan(Field("id").isIn(["t1", "t2"])) == "primary key")
        #expect(try plan(Field("id") > "t3") == "primary key range")
        #expect(try plan(Field("title") == "task 3") == "index title")
        #expect(try plan(Field("priority") >= 3) == "index priority")
        #expect(try plan(Field("priority").isBetween(1, and: 2)) == "index priority")
        #expect(try plan(Field("score") < 2) == "index score")
        #expect(try plan(Field("priority").isIn([1, 4])) == "index priority")
        #expect(try plan(Field("title").starts(with: "task 1")) == "index title")
        #expect(try plan(Field("done").isNull) == "index done")
        #expect(try plan(Field("note") == "x" && Field("priority") == 2) == "index priority")
        #expect(try plan(Field("note") == "x") == "full scan")
        #expect(try plan(Field("title").equalsIgnoringCase("TASK 3")) == "full scan")
        #expect(try plan(nil, sort: [SortKey("priority", .descending)], top: 5) == "ordered index priority")
        #expect(try plan(Field("priority") > 1, sort: [SortKey("priority")], top: 5) == "ordered index priority")
        #expect(try plan(nil, sort: [SortKey("priority")], top: 5, count: true) == "full scan")
        #expect(try plan(nil, sort: [SortKey("note")], top: 5) == "full scan")
        #expect(try plan(nil, top: 5) == "ordered primary key")
        #expect(try plan(.false) == "empty")
        // Cost choice: with top, an equality range holding many rows is traded for a walk of the
        // sort key's index when matches² > (skip + top) × rows.
        #expect(try plan(Field("done").isNull, sort: [SortKey("priority", .descending)], top: 5) == "ordered index priority")  // 50² > 5 × 50
        #expect(try plan(Field("priority") == 2, sort: [SortKey("title")], top: 1) == "ordered index title")  // 10² > 1 × 50
        #expect(try plan(Field("priority") == 2, sort: [SortKey("title")], top: 5) == "index priority")  // 10² < 5 × 50
        #expect(try plan(Field("priority") == 2, sort: [SortKey("title")], top: 1, count: true) == "index priority")
        #expect(try plan(Field("priority") == 2, sort: [SortKey("note")], top: 1) == "index priority")
        for (p, sort, top) in [
            (Field("priority") == 2, [SortKey("title", .descending)], 1), (Field("done").isNull, [SortKey("priority"), SortKey("title")], 7),
            (Field("done").isNull && Field("priority") >= 3, [SortKey("title")], 3),
        ] as [(QueryPredicate, [SortKey], Int)] {
            for skip in [0, 2] {
                let q = Query("Todo", where: p, sort: sort, skip: skip, top: top)
                let all = try store.read(Query("Todo")).items.map { item in
                    try! ResolvedQuery(q, schema: store.schema(of: "Todo")!).schema.columns.map { item[$0.name] ?? .null }
                }
                #expect(try store.read(q) == (try ResolvedQuery(q, schema: try store.schema(of: "Todo")!)).apply(to: all), "\(q)")
            }
        }
        // The results are the ones of a full scan.
        let ordered = try store.read(Query("Todo", sort: [SortKey("priority", .descending)], skip: 3, top: 7)).items.map { $0["id"] }
        let expected = (0..<50).map { $0 }.sorted { a, b in
            a % 5 != b % 5 ? a % 5 > b % 5 : "t\(a)".utf8.lexicographicallyPrecedes("t\(b)".utf8)
        }.dropFirst(3).prefix(7).map { Value.string("t\($0)") }
        #expect(ordered == expected)

        // System tables: the sync engine's queries use their indexes.
        _ = try store.appendOperation(table: "Todo", itemId: "t1")
        _ = try store.appendOperation(table: "Todo", itemId: "T1")
        let ops = store.operationTableName
        #expect(try store.explain(Query(ops, where: Field("table") == "Todo" && Field("itemId").equalsIgnoringCase("t1"))) == "index (table, itemId[c])")
        #expect(try store.explain(Query(ops, where: Field("table") == "Todo", sort: [SortKey("id")])) == "index (table, itemId[c])")
        #expect(try store.explain(Query(ops, sort: [SortKey("id", .descending)], top: 1)) == "ordered primary key")
        #expect(try store.explain(Query(ops, where: Field("id") > 1, sort: [SortKey("id")], top: 1)) == "ordered primary key")
        #expect(try store.explain(Query(store.errorTableName, where: Field("operationId") == 1)) == "index operationId")
        #expect(try store.explain(Query(store.configTableName, where: Field("table") == "T" && Field("key") == "q" && Field("keyType") == 0))
                == "index (table, key, keyType)")
        #expect(try store.pendingOperations(table: "Todo", itemId: "T1").map(\.id) == [1, 2])
        #expect(try store.operation(after: 1)?.id == 2)
    }
}
