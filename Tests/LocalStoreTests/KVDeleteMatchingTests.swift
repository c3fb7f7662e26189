import Foundation
import LocalStore
@testable import LocalStoreKV
import Testing

/// `KVReads.deletion` (delete(matching:) walking one range): after random deletes over every kind
/// of plan, the engine's raw entries must be exactly those a row set implies (every index entry, covering
/// values included, and the kept row count), and the rows must be InMemoryStore's.
@Suite("KVStore delete(matching:): raw index entries and row count after random deletes")
struct KVDeleteMatchingTests {
    /// The index entries and row counts every table's rows imply, against the engine's.
    static func rawProblems(_ reader: some OrderedKeyValueReader) throws -> [String] {
        let catalog = try KVCatalog.load(reader)
        var problems: [String] = []
        for table in catalog.tables.values {
            let prefix = KVKeys.rows(table.number)
            var expected: [[UInt8]: [UInt8]] = [:]
            var rows = 0
            try reader.scan(from: prefix, to: KVKeyRange.end(of: prefix), reverse: false) { key, value in
                rows += 1
                let row = try table.decode(value)
                let idKey = Array(key[prefix.count...])
                for spec in table.specs {
                    expected[table.entryKey(spec, row, idKey: idKey)] = table.entryValue(spec, idKey: idKey, record: Array(value))
                }
                return true
            }
            var actual: [[UInt8]: [UInt8]] = [:]
            for spec in table.specs {
                let p = KVKeys.index(table.number, spec.number)
                try reader.scan(from: p, to: KVKeyRange.end(of: p), reverse: false) { key, value in
                    actual[Array(key)] = Array(value)
                    return true
                }
            }
            for (k, v) in actual where expected[k] != v {
                problems.append("\(table.schema.name): index entry \(k) (\(expected[k] == nil ? "no row implies it" : "stale value"))")
            }
            for k in expected.keys where actual[k] == nil { problems.append("\(table.schema.name): missing index entry \(k)") }
            let kept = Int(try KVCatalog.readNumber(KVKeys.rowCount(table.number), reader))
            if kept != rows { problems.append("\(table.schema.name): row count \(kept), rows \(rows)") }
        }
        return problems
    }

    static let schemaV1 = TableSchema(
        name: "T",
        columns: [Column("id", .string), Column("a", .integer, indexed: true), Column("b", .string, indexed: true), Column("c", .double)],
        indexes: [TableIndex(("b", .descending), ("a", .ascending)), TableIndex(("c", .ascending), ("id", .descending))])
    /// A column added later, indexed, alone and in a compound index: the rows written before hold short records.
    static let schemaV2 = TableSchema(
        name: "T",
        columns: schemaV1.columns + [Column("d", .string, indexed: true)],
        indexes: schemaV1.indexes + [TableIndex(("d", .ascending), ("a", .descending))])

    struct Random {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(n))
        }
    }

    static func item(_ r: inout Random, _ n: Int, long: Bool, withD: Bool) -> Item {
        let stem = long ? String(repeating: "L", count: 40) : ""
        let ids = ["r\(n)", "R\(n)x", "n\u{0}\(n)", stem + "id\(n)", "Ä\(n)", "ä\(n)z"]
        var fields: [String: Value] = [
            "id": .string(ids[n % ids.count]),
            "a": r.next(5) == 0 ? .null : .int(Int64(r.next(4))),
            "b": r.next(6) == 0 ? .null : .string(stem + ["x", "X", "y", "x\u{0}", "b"][r.next(5)]),
            "c": r.next(4) == 0 ? .null : .double(Double(r.next(3)) * 0.5),
        ]
        if withD { fields["d"] = r.next(3) == 0 ? .null : .string(stem + ["p", "q", "P"][r.next(3)]) }
        return Item(fields)
    }

    static func predicate(_ r: inout Random, withD: Bool, long: Bool) -> QueryPredicate {
        let stem = long ? String(repeating: "L", count: 40) : ""
        let choices: [QueryPredicate] = [
            Field("a") == .literal(.int(Int64(r.next(4)))),
            Field("a") >= .literal(.int(Int64(r.next(4)))),
            Field("a").isNull,
            Field("b") == .literal(.string(stem + ["x", "X", "y", "x\u{0}"][r.next(4)])),
            Field("b").isNull,
            Field("b") == .literal(.string(stem + "x")) && Field("a") < .literal(.int(2)),
            Field("c") == .literal(.double(0.5)),
            Field("c").isNull,
            Field("id") >= .literal(.string("r")) && Field("id") < .literal(.string("s")),
            Field("id") == .literal(.string(stem + "id3")),
            Field("a") == .literal(.int(1)) || Field("c") == .literal(.double(1)),
        ]
        let withDChoices: [QueryPredicate] = [
            Field("d") == .literal(.string(stem + "p")), Field("d").isNull, Field("d") == .literal(.string(stem + "q")) && Field("a") == .literal(.int(2)),
        ]
        let all = withD ? choices + withDChoices : choices
        return all[r.next(all.count)]
    }

    static func run<E: OrderedKeyValueEngine>(_ name: String, _ engine: E, covering: Bool, long: Bool, seed: UInt64) throws {
        let store = try KVStore(engine: engine, coveringIndexes: covering)
        let reference = try InMemoryStore()
        var r = Random(state: seed)
        for s in [store as any LocalStore, reference] { try s.defineTable(schemaV1) }
        let first = (0..<60).map { item(&r, $0, long: long, withD: false) }
        for s in [store as any LocalStore, reference] { try s.upsert(first, into: "T") }
        for s in [store as any LocalStore, reference] { try s.defineTable(schemaV2) }
        let second = (40..<90).map { item(&r, $0, long: long, withD: true) }
        for s in [store as any LocalStore, reference] { try s.upsert(second, into: "T") }
        for step in 0..<30 {
            let withD = true
            let p = predicate(&r, withD: withD, long: long)
            let query = Query("T", where: p)
            let inTx = r.next(2) == 0
            for s in [store as any LocalStore, reference] {
                if inTx { try s.write { tx in try tx.delete(matching: query) } } else { try s.delete(matching: query) }
            }
            let problems = try engine.read { try rawProblems($0) }
            let path = try store.accessPath(for: query)
            let clean = problems.isEmpty
            #expect(clean, "\(name) step \(step) after delete where \(p) [\(path)]: \(problems.count) problems, first \(problems.prefix(2))")
            let got = try store.read(Query("T", sort: [SortKey("id")])).items.map { "\($0)" }
            let want = try reference.read(Query("T", sort: [SortKey("id")])).items.map { "\($0)" }
            #expect(got == want, "\(name) step \(step): rows after delete where \(p)")
            #expect(try store.count("T") == want.count, "\(name) step \(step): count")
            if !problems.isEmpty || got != want { return }
            if step % 7 == 6 {
                let more = (0..<15).map { item(&r, 90 + step * 15 + $0, long: long, withD: true) }
                for s in [store as any LocalStore, reference] { try s.upsert(more, into: "T") }
            }
        }
    }

    @Test("random deletes on every engine variant", arguments: [false, true], [false, true])
    func randomDeletes(covering: Bool, long: Bool) throws {
        for seed: UInt64 in [1, 2, 3] {
            try Self.run("log", InMemoryKVEngine(), covering: covering, long: long, seed: seed)
            try Self.run("savepoints", InMemoryKVEngine(savepoints: true), covering: covering, long: long, seed: seed)
            try Self.run("restarts", InMemoryKVEngine(restarts: true), covering: covering, long: long, seed: seed)
            try Self.run("key-limit-32", KeyLengthLimitedEngine(InMemoryKVEngine(), maximumKeyLength: 32), covering: covering, long: long, seed: seed)
            try Self.run("self-restarting", SelfRestartingEngine(), covering: covering, long: long, seed: seed)
        }
    }
}

/// `InMemoryKVEngine` whose `failAt`-th delete from now throws (counted from 0).
final class DeleteFaultEngine: OrderedKeyValueEngine, @unchecked Sendable {  // one thread per test
    let base: InMemoryKVEngine
    var failAt: Int?
    init(_ base: InMemoryKVEngine) { self.base = base }
    func read<R>(_ body: (InMemoryKVEngine.Snapshot) throws -> R) throws -> R { try base.read(body) }
    func write<R>(_ body: (Writer) throws -> R) throws -> R { try base.write { try body(Writer(base: $0, engine: self)) } }
    func close() throws {}
    struct Writer: OrderedKeyValueWriter {
        let base: InMemoryKVEngine.Transaction
        let engine: DeleteFaultEngine
        func get(_ key: [UInt8]) throws -> [UInt8]? { try base.get(key) }
        func scan(
            from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws { try base.scan(from: lower, to: upper, reverse: reverse, body) }
        func put(_ key: [UInt8], _ value: [UInt8]) throws { try base.put(key, value) }
        func delete(_ key: [UInt8]) throws {
            if let n = engine.failAt {
                engine.failAt = n > 0 ? n - 1 : nil
                if n == 0 { throw LocalStoreError(.ioError, "injected delete failure") }
            }
            try base.delete(key)
        }
        var hasSavepoints: Bool { base.hasSavepoints }
        func setSavepoint() throws { try base.setSavepoint() }
        func rollbackToSavepoint() throws { try base.rollbackToSavepoint() }
        var canRestart: Bool { base.canRestart }
        func restart() throws { try base.restart() }
        var restartsOnItsOwn: Bool { false }
    }
}

extension KVDeleteMatchingTests {
    @Test("a delete(matching:) whose engine delete fails at any point leaves the transaction as before it", arguments: [0, 1, 2])
    func deleteFailsHalfway(mode: Int) throws {
        for failAt in 0..<40 {
            let engine = DeleteFaultEngine(InMemoryKVEngine(savepoints: mode == 1, restarts: mode == 2))
            let store = try KVStore(engine: engine)
            try store.defineTable(Self.schemaV1)
            var r = Random(state: 7)
            try store.upsert((0..<30).map { Self.item(&r, $0, long: false, withD: false) }, into: "T")
            var failed = false
            try store.write { tx in
                let before = try tx.read(Query("T", sort: [SortKey("id")])).items.map { "\($0)" }
                engine.failAt = failAt
                do { try tx.delete(matching: Query("T", where: Field("a") >= .literal(.int(1)))) } catch { failed = true }
                engine.failAt = nil
                if failed {
                    let after = try tx.read(Query("T", sort: [SortKey("id")])).items.map { "\($0)" }
                    #expect(after == before, "mode \(mode) failAt \(failAt)")
                    #expect(try tx.count("T") == before.count, "mode \(mode) failAt \(failAt): count")
                }
            }
            let problems = try engine.read { try Self.rawProblems($0) }
            let clean = problems.isEmpty
            #expect(clean, "mode \(mode) failAt \(failAt): \(problems.prefix(2))")
        }
    }
}

extension KVDeleteMatchingTests {
    @Test("delete(matching:) on the operations table (NOCASE itemId component) keeps its index exact")
    func operationsTable() throws {
        for (name, base) in [("log", InMemoryKVEngine()), ("restarts", InMemoryKVEngine(restarts: true))] {
            let engine = try KeyLengthLimitedEngine(base, maximumKeyLength: 32)
            let store = try KVStore(engine: engine)
            try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
            let ids = ["a", "b\u{0}", "B\u{0}x", String(repeating: "Z", count: 40), String(repeating: "z", count: 40) + "1", "ä"]
            try store.write { tx in
                for (i, id) in ids.enumerated() { try tx.enqueue(.insert, ["id": .string(id), "n": .int(Int64(i))], into: "T") }
            }
            let ops = SystemTableNames.default.operations
            for target in ["A", "b\u{0}", String(repeating: "z", count: 40) + "1", "ä", "Ä"] {
                try store.delete(matching: Query(ops, where: Field("itemId") == .literal(.string(target))))
                let path = try store.accessPath(for: Query(ops, where: Field("itemId") == .literal(.string(target))))
                let problems = try engine.read { try Self.rawProblems($0) }
                let clean = problems.isEmpty
                #expect(clean, "\(name) after deleting itemId \(target) [\(path)]: \(problems.prefix(2))")
            }
            let left = try store.read(Query(ops)).items.compactMap { $0["itemId"]?.stringValue }.sorted()
            let want = ids.filter { !["A", "b\u{0}", String(repeating: "z", count: 40) + "1", "ä", "Ä"].contains($0) }.sorted()
            #expect(left == want, "\(name)")
        }
    }
}
