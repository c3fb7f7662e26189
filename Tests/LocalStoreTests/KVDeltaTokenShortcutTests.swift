import Foundation
import LocalStore
import LocalStoreReliability
@testable import LocalStoreKV
import Testing

/// `KVTransaction.deltaTokenRowIds` (the config table's `deltaTokens` index, each entry's row checked) against
/// the generic query it replaces (`genericDeltaTokenRowIds`), over random config rows: other ids, tables and
/// query ids differing in case (ASCII and not), NULs, long tables and query ids (long keys through
/// `KeyLengthLimitedEngine`), covering indexes, a config table without the index, and damaged records.
@Suite("KVStore: delta-token rows, shortcut against the generic query")
struct KVDeltaTokenShortcutTests {
    private typealias Random = SplitMix
    private static let names = SystemTableNames.default

    /// The ids, or the error's code: the shortcut must answer as the generic query does, errors included.
    enum Outcome: Equatable, CustomStringConvertible {
        case ids([Value])
        case error(LocalStoreError.Code)
        var description: String {
            switch self {
            case .ids(let ids): return "ids \(ids)"
            case .error(let code): return "error \(code)"
            }
        }
    }

    private static func outcome(_ body: () throws -> [Value]) -> Outcome {
        do { return .ids(try body()) } catch let error as LocalStoreError { return .error(error.code) } catch { return .error(.internal) }
    }

    static let longTable = "L" + String(repeating: "aB", count: 63) + "z"  // 128 bytes
    static let longKey = String(repeating: "Qq", count: 127) + "x"  // 255 bytes
    static let tables = [
        "TodoItem", "todoitem", "TODOITEM", "TodoItems", "T", "t", "É", "é", "tÉ", "TÉ", "a\u{0}b", "A\u{0}c", "a\u{0}", "",
        longTable, longTable.lowercased(), longTable.uppercased(), longTable + "x",
    ]
    static let keys = ["q", "Q", "q\u{0}", "é", "e\u{301}", "É", "", "q|r", longKey, longKey.uppercased(), longKey + "y"]

    /// Random config rows: the pair's own ids, other code's ids (case variants, NULs, long), tables and keys
    /// from the pools above (sometimes null), key types 0 (mostly), 1, -1 or null.
    private static func fill(_ store: some LocalStore, _ random: inout Random, rows: Int) throws {
        var items: [Item] = []
        for n in 0..<rows {
            let table = random.pick(tables)
            let key = random.pick(keys)
            let id: String
            switch random.below(6) {
            case 0: id = DeltaTokenKey.rowId(table: table, queryId: key)
            case 1: id = "R\(n)"
            case 2: id = "r\(random.below(rows))"
            case 3: id = "r\u{0}\(random.below(4))"
            case 4: id = String(repeating: "I", count: 300) + "\(random.below(rows))"
            default: id = "deltaToken|\(table.lowercased())|\(random.below(3))"
            }
            var values: [String: Value] = ["id": .string(id), "value": .string("v\(n)")]
            if !random.oneIn(8) { values["table"] = .string(table) }
            if !random.oneIn(8) { values["key"] = .string(key) }
            let keyType: Value = random.pick([.int(0), .int(0), .int(0), .int(1), .int(-1), .null])
            if keyType != .null { values["keyType"] = keyType }
            items.append(Item(values))
        }
        try store.upsert(items, into: names.config)
        // A few tokens set the ordinary way (which deletes the pair's other rows, through the shortcut).
        for _ in 0..<3 {
            let table = random.pick(["TodoItem", "todoitem", "T", "t", longTable])
            let key = random.pick(["q", "Q", "q|r", longKey])
            try store.setDeltaToken(Date(timeIntervalSince1970: Double(random.below(1_000_000))), table: table, queryId: key)
        }
    }

    /// Every probe pair inside one write transaction (rolled back): the shortcut's answer against the generic one.
    private static func compare<E>(_ store: KVStore<E>, _ label: String) throws {
        #expect(throws: CancellationError.self) {
            try store.write { tx in
                let shortcuts = try #require(tx as? any SystemTableShortcuts)
                for table in tables {
                    for key in keys {
                        let fast = outcome { try shortcuts.deltaTokenRowIds(table: table, queryId: key) }
                        let generic = outcome { try tx.genericDeltaTokenRowIds(table: table, queryId: key) }
                        #expect(fast == generic, "\(label): table \(Value.string(table).description.prefix(24)), key \(Value.string(key).description.prefix(24))")
                    }
                }
                throw CancellationError()
            }
        }
    }

    /// Whether the shortcut itself answers (not its fallback to the generic query).
    private static func served<E>(_ store: KVStore<E>) throws -> Bool {
        try store.reading { try $0.deltaTokenRowIds(names.config, table: "T", queryId: "q") } != nil
    }

    private static func engines() throws -> [(String, () throws -> any LocalStore)] {
        [
            ("in-memory", { try KVStore(engine: InMemoryKVEngine()) }),
            ("in-memory covering", { try KVStore(engine: InMemoryKVEngine(), coveringIndexes: true) }),
            ("key limit 64", { try KVStore(engine: try KeyLengthLimitedEngine(InMemoryKVEngine(), maximumKeyLength: 64)) }),
        ]
    }

    private static func check(_ store: any LocalStore, _ label: String) throws {
        if let s = store as? KVStore<InMemoryKVEngine> {
            #expect(try served(s), "\(label)")
            try compare(s, label)
        } else if let s = store as? KVStore<KeyLengthLimitedEngine<InMemoryKVEngine>> {
            #expect(try served(s), "\(label)")
            try compare(s, label)
        } else {
            Issue.record("unexpected store type")
        }
    }

    @Test("random config rows: the same ids in the same order as the generic query")
    func randomRows() throws {
        for (name, make) in try Self.engines() {
            for seed in UInt64(0)..<12 {
                var random = Random(seed: seed &* 7919 &+ 17)
                let store = try make()
                defer { try? store.close() }
                try Self.fill(store, &random, rows: 60)
                try Self.check(store, "\(name), seed \(seed)")
            }
        }
    }

    /// Replaces, in the record of config row `id`, the bytes of `marker` (which only its `value` holds) by
    /// `0xFF` bytes (invalid UTF-8), or cuts the record's last byte (`truncate`).
    private static func damage<E: OrderedKeyValueEngine>(_ engine: E, id: String, marker: String, truncate: Bool) throws {
        try engine.write { writer in
            let number = try KVCatalog.load(writer).table(names.config).number
            let key = KVKeys.row(number, id: .string(id))
            var record = try #require(try writer.get(key))
            if truncate {
                record.removeLast()
            } else {
                let m = Array(marker.utf8)
                let at = try #require((0...(record.count - m.count)).first { Array(record[$0..<$0 + m.count]) == m })
                for i in at..<at + m.count { record[i] = 0xFF }
            }
            try writer.put(key, record)
        }
    }

    @Test("a pair's row whose value is damaged (invalid UTF-8, or a record cut short): the generic query fails with corrupt, so must the shortcut")
    func damagedValue() throws {
        for truncate in [false, true] {
            let engine = InMemoryKVEngine()
            let store = try KVStore(engine: engine)
            defer { try? store.close() }
            try store.upsert(
                [
                    Item(["id": "other", "table": "todoitem", "key": "q", "keyType": 0, "value": "MARKER-VALUE"]),
                    Item(["id": "fine", "table": "TodoItem", "key": "q", "keyType": 0, "value": "2020-01-01T00:00:00.000Z"]),
                ], into: Self.names.config)
            try Self.damage(engine, id: "other", marker: "MARKER-VALUE", truncate: truncate)
            #expect(try Self.served(store))
            try Self.compare(store, truncate ? "value cut short" : "value not UTF-8")
        }
    }

    @Test("setDeltaToken next to a damaged row of its pair still reports corrupt (the delete or upsert that follows the lookup decodes the row)")
    func setDeltaTokenNextToADamagedRow() throws {
        let engine = InMemoryKVEngine()
        let store = try KVStore(engine: engine)
        defer { try? store.close() }
        for (n, id) in ["other", DeltaTokenKey.rowId(table: "TodoItem", queryId: "q")].enumerated() {
            for truncate in [false, true] {
                let table = "TodoItem\(n)\(truncate)"
                let id = id == "other" ? "other\(truncate)" : DeltaTokenKey.rowId(table: table, queryId: "q")
                try store.upsert([Item(["id": .string(id), "table": .string(table), "key": "q", "keyType": 0, "value": "MARKER-VALUE"])], into: Self.names.config)
                try Self.damage(engine, id: id, marker: "MARKER-VALUE", truncate: truncate)
                let error = #expect(throws: LocalStoreError.self, "\(id) \(truncate)") { try store.setDeltaToken(Date(timeIntervalSince1970: 0), table: table, queryId: "q") }
                #expect(error?.code == .corrupt, "\(id) \(truncate)")
            }
        }
    }

    @Test("random rows with one damaged: the same ids, or the same error, as the generic query")
    func randomDamaged() throws {
        for seed in UInt64(0)..<8 {
            var random = Random(seed: seed &+ 1_000)
            let engine = InMemoryKVEngine()
            let store = try KVStore(engine: engine)
            defer { try? store.close() }
            try Self.fill(store, &random, rows: 30)
            let table = random.pick(["TodoItem", "todoitem", "T"])
            let key = random.pick(["q", "Q", "q|r"])
            try store.upsert([Item(["id": "victim", "table": .string(table), "key": .string(key), "keyType": 0, "value": "MARKER-VALUE"])], into: Self.names.config)
            try Self.damage(engine, id: "victim", marker: "MARKER-VALUE", truncate: random.oneIn(2))
            try Self.compare(store, "seed \(seed), damaged \(table)/\(key)")
        }
    }

    @Test("a config table without the deltaTokens index (a store written before it): the generic query answers")
    func withoutTheIndex() throws {
        var random = Random(seed: 99)
        let engine = InMemoryKVEngine()
        let store = try KVStore(engine: engine)
        defer { try? store.close() }
        try Self.fill(store, &random, rows: 40)
        // The index dropped from the catalog while the store is open (the store reloads a changed catalog).
        try engine.write { writer in
            var catalog = try KVCatalog.load(writer)
            var record = try catalog.table(Self.names.config).record
            record.specs.removeAll()
            catalog.version += 1
            try KVCatalog.write(record, version: catalog.version, writer)
        }
        #expect(try !Self.served(store))
        try Self.compare(store, "without the index")
    }
}
