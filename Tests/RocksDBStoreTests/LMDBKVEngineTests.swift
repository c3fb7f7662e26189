import Foundation
import LMDBKVExample
import LocalStore
import LocalStoreKV
import Testing

/// KVStore over LMDB itself (the bench's `kv-lmdb`, Examples/RocksDBStore/Sources/LMDBKVExample): a map opened
/// at 64 KiB grows whenever a transaction finds it full, and `KVStore` replays the transaction LMDB began
/// again; a failed call in a write body is undone by a restart (abort, begin) and a replay.
@Suite("KVStore over LMDB (the example's LMDBKVEngine): a map that grows, calls undone by restarts")
struct LMDBKVEngineTests {
    private struct Boom: Error {}

    private static let schema = TableSchema("T", ["id": .string, "n": .integer, "text": .string], indexed: ["n"])

    private static func rows(_ prefix: String, _ count: Int) -> [Item] {
        (0..<count).map { i in ["id": .string("\(prefix)-\(i)"), "n": .int(Int64(i % 10)), "text": .string(String(repeating: "x", count: 200))] }
    }

    /// The rows of `n == k` through the index and by testing every row agree, for each k; returns the row count.
    private static func checkedCount(_ store: some LocalStoreAccess) throws -> Int {
        let all = try store.read(Query("T")).items
        for k in 0..<10 {
            let query = Query("T", where: Field("n") == .literal(.int(Int64(k))))
            #expect(try store.read(query).items.count == all.filter { $0["n"] == .int(Int64(k)) }.count, "n == \(k)")
        }
        #expect(try store.count("T") == all.count)
        return all.count
    }

    @Test("store calls, a write body with a failed nested write and a delete: nothing lost, nothing of the failed call kept, after reopening too")
    func growingMap() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("LMDBKVEngineTests-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engine = try LMDBKVEngine(directory: directory, mapSize: 64 << 10)
        let store = try KVStore(engine: engine)
        try store.defineTable(Self.schema)
        for batch in 0..<3 { try store.upsert(Self.rows("s\(batch)", 400), into: "T") }
        let afterStoreCalls = engine.growths
        #expect(afterStoreCalls > 0, "a 64 KiB map must grow under 1,200 rows")
        try store.write { tx in
            try tx.upsert(Self.rows("w", 400), into: "T")
            // A nested write that writes 600 rows (the map grows under it) and then throws: undone by a
            // restart of the transaction and a replay of the 400 rows before it.
            do {
                try tx.performWrite { inner in
                    try inner.upsert(Self.rows("failed", 600), into: "T")
                    throw Boom()
                }
            } catch is Boom {}
            try tx.delete(matching: Query("T", where: Field("n") == .literal(.int(3))))
        }
        #expect(engine.growths > afterStoreCalls, "the map must also grow inside the write body")
        #expect(try store.read(table: "T", id: "failed-0") == nil)
        #expect(try store.read(table: "T", id: "w-399") != nil)
        let expected = 1_600 - 160
        #expect(try Self.checkedCount(store) == expected)
        try store.close()

        let reopened = try KVStore(engine: try LMDBKVEngine(directory: directory))
        defer { try? reopened.close() }
        #expect(try Self.checkedCount(reopened) == expected)
    }
}

@Suite("KVStore over LMDB with KeyLengthLimitedEngine: ids and indexed values longer than LMDB's 511-byte keys")
struct LMDBKVLongKeyTests {
    @Test("2,000-byte ids and indexed strings: read by id, queried through the index, in order, deleted, after reopening too")
    func longKeys() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("LMDBKVLongKeys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func open() throws -> KVStore<KeyLengthLimitedEngine<LMDBKVEngine>> {
            try KVStore(engine: KeyLengthLimitedEngine(LMDBKVEngine(directory: directory, mapSize: 1 << 20), maximumKeyLength: 511))
        }
        let stem = String(repeating: "k", count: 2_000)
        let store = try open()
        try store.defineTable(TableSchema("T", ["id": .string, "s": .string, "n": .integer], indexed: ["s"]))
        // 30 ids and values that share their first 2,000 bytes and differ only at the end.
        try store.upsert((0..<30).map { i in ["id": .string(stem + String(format: "%02d", i)), "s": .string(stem + String(format: "%02d", 29 - i)), "n": .int(Int64(i))] }, into: "T")
        func check(_ s: some LocalStoreAccess, deleted: Set<Int>) throws {
            for i in 0..<30 {
                let item = try s.read(table: "T", id: .string(stem + String(format: "%02d", i)))
                #expect((item?["n"] == .int(Int64(i))) == !deleted.contains(i), "id \(i)")
                let byValue = try s.read(Query("T", where: Field("s") == .literal(.string(stem + String(format: "%02d", 29 - i))))).items
                #expect(byValue.map { $0["n"] } == (deleted.contains(i) ? [] : [.int(Int64(i))]), "s of \(i)")
            }
            // Ordered by the long indexed value, through its index: whole-value order, not the hash's.
            let ordered = try s.read(Query("T", sort: [SortKey("s")], top: 10)).items.map { $0["n"] }
            #expect(ordered == (0..<30).reversed().filter { !deleted.contains($0) }.prefix(10).map { .int(Int64($0)) })
        }
        try check(store, deleted: [])
        try store.delete(ids: [.string(stem + "07"), .string(stem + "21")], from: "T")
        try check(store, deleted: [7, 21])
        try store.close()
        let reopened = try open()
        defer { try? reopened.close() }
        try check(reopened, deleted: [7, 21])
    }
}

/// Store objects of KVStore over LMDB on one directory (the whole conformance suite runs on it in
/// RocksDBStoreConformanceTests).
@Suite("KVStore over LMDB (the example's LMDBKVEngine): store objects on one directory")
struct LMDBKVConformanceTests {
    @Test("a second store object on the directory called inside the first's write body is misuse, not a wait for itself")
    func reentryFromTheWritingThreadIsMisuse() throws {
        try secondStoreInsideWriteBodyIsMisuse(name: "LMDBKVEngineTests") { try KVStore(engine: LMDBKVEngine(directory: $0, sync: false)) }
    }

    @Test("two store objects on one directory grow the shared map from two threads: every row of both is kept")
    func concurrentWritersGrowTheSharedMap() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("LMDBKVEngineTests-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let engines = try (0..<2).map { _ in try LMDBKVEngine(directory: directory, mapSize: 64 << 10, sync: false) }
        let stores = try engines.map { try KVStore(engine: $0) }
        defer { for store in stores { try? store.close() } }
        try stores[0].defineTable(TableSchema("T", ["id": .string, "n": .integer, "text": .string], indexed: ["n"]))
        let failures = NSLock()
        nonisolated(unsafe) var errors: [Error] = []
        DispatchQueue.concurrentPerform(iterations: 2) { w in
            do {
                for batch in 0..<20 {
                    let rows: [Item] = (0..<20).map { i in
                        ["id": .string("w\(w)-\(batch)-\(i)"), "n": .int(Int64(i % 5)), "text": .string(String(repeating: "y", count: 300))]
                    }
                    try stores[w].upsert(rows, into: "T")
                    _ = try stores[1 - w].count("T")
                }
            } catch {
                failures.withLock { errors.append(error) }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(engines[0].growths > 0, "the map grew")
        for store in stores {
            #expect(try store.count("T") == 800)
            #expect(try store.count("T", where: Field("n") == 3) == 160)
        }
    }
}

/// Store objects sharing the LMDB environment of one directory (reviewed: a growth at a commit, an engine
/// object never closed, mixed use).
@Suite("KVStore over LMDB: store objects sharing one environment", .serialized)
struct LMDBKVSharingTests {
    static func directory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("LMDBKVSharing-\(UUID().uuidString)").path
    }

    /// A growth at a commit (`MDB_MAP_FULL` from `mdb_txn_commit`) is written again under the environment's
    /// write lock: were it replayed by `KVStore` in a new write, another store object on the directory could
    /// commit in between, and the replay would fail with `busy` — though nothing but this process writes.
    @Test("two store objects on one directory, map growing at commits: no write fails with busy")
    func commitGrowthKeepsTheWriteLock() throws {
        let lock = NSLock()
        nonisolated(unsafe) var errors: [String] = []
        var atCommit = 0
        for round in 0..<400 {
            let dir = LMDBKVSharingTests.directory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let engines = try (0..<2).map { _ in try LMDBKVEngine(directory: dir, mapSize: 64 << 10, sync: false) }
            let stores = try engines.map { try KVStore(engine: $0) }
            try stores[0].defineTable(TableSchema("T", ["id": .string, "n": .integer, "text": .string], indexed: ["n"]))
            DispatchQueue.concurrentPerform(iterations: 2) { w in
                for batch in 0..<40 {
                    do {
                        let rows: [Item] = (0..<4).map { i in
                            ["id": .string("w\(w)-\(batch)-\(i)"), "n": .int(Int64(i % 5)), "text": .string(String(repeating: "y", count: 200))]
                        }
                        try stores[w].upsert(rows, into: "T")
                    } catch {
                        lock.withLock { errors.append("round \(round) \(w)/\(batch): \(error)") }
                    }
                }
            }
            atCommit += engines[0].growthsAtCommit
            for store in stores { try store.close() }
        }
        let failed = errors
        #expect(atCommit > 0, "the map grew at a commit")
        #expect(failed.isEmpty, "\(failed.count) failures, first: \(failed.prefix(3))")
    }

    /// An engine object whose store never opened (`KVStore.init` threw: here the refusal of a wrapped store on
    /// the bare engine) releases its environment when dropped: a store made again after the directory is
    /// removed must not share the environment of the removed files.
    @Test("a store made again in a removed and recreated directory writes to that directory")
    func leakedEngineKeepsTheOldFiles() throws {
        let dir = LMDBKVSharingTests.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let wrapped = try KVStore(engine: KeyLengthLimitedEngine(LMDBKVEngine(directory: dir, sync: false), maximumKeyLength: 511))
        try wrapped.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        try wrapped.close()
        #expect(throws: LocalStoreError.self) { _ = try KVStore(engine: LMDBKVEngine(directory: dir, sync: false)) }
        // The application starts over.
        try FileManager.default.removeItem(atPath: dir)
        let fresh: KVStore<LMDBKVEngine>
        do { fresh = try KVStore(engine: LMDBKVEngine(directory: dir, sync: false)) } catch {
            Issue.record("a store in the recreated, empty directory sees the removed store's data: \(error)")
            return
        }
        try fresh.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        try fresh.upsert([["id": "a", "n": 1]], into: "T")
        try fresh.close()
        let data = URL(fileURLWithPath: dir).appendingPathComponent("data.mdb").path
        #expect(FileManager.default.fileExists(atPath: data), "the new store's commits went to the removed directory's files")
    }

    /// Readers on one store object, a writer on another whose write bodies read through the first (the map
    /// growing under them), and a third engine object opened and closed meanwhile: no error, no deadlock.
    @Test("readers, nested reads in write bodies, growth and opening/closing another engine object")
    func mixedUse() throws {
        let dir = LMDBKVSharingTests.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try KVStore(engine: LMDBKVEngine(directory: dir, mapSize: 64 << 10, sync: false))
        let b = try KVStore(engine: LMDBKVEngine(directory: dir, mapSize: 64 << 10, sync: false))
        defer {
            try? a.close()
            try? b.close()
        }
        try a.defineTable(TableSchema("T", ["id": .string, "n": .integer, "text": .string], indexed: ["n"]))
        let lock = NSLock()
        nonisolated(unsafe) var errors: [String] = []
        nonisolated(unsafe) var done = false
        DispatchQueue.concurrentPerform(iterations: 3) { w in
            do {
                switch w {
                case 0:
                    for batch in 0..<400 {
                        try a.write { tx in
                            try tx.upsert((0..<10).map { i in ["id": .string("\(batch)-\(i)"), "n": .int(Int64(i % 3)), "text": .string(String(repeating: "t", count: 150))] }, into: "T")
                            _ = try b.count("T")
                            try tx.delete(matching: Query("T", where: Field("n") == .literal(.int(2))))
                        }
                    }
                    lock.withLock { done = true }
                case 1:
                    while !lock.withLock({ done }) { _ = try b.read(Query("T", where: Field("n") == .literal(.int(1)))) }
                default:
                    while !lock.withLock({ done }) {
                        let c = try KVStore(engine: LMDBKVEngine(directory: dir, sync: false))
                        _ = try c.count("T")
                        try c.close()
                    }
                }
            } catch {
                lock.withLock {
                    errors.append("\(w): \(error)")
                    done = true
                }
            }
        }
        let failed = errors
        #expect(failed.isEmpty, "\(failed)")
        let expected = try a.read(Query("T")).items.count
        #expect(try b.count("T") == expected)
        #expect(expected == 400 * 7)
        #expect(a.engine.growths > 0, "the map grew")
    }
}
