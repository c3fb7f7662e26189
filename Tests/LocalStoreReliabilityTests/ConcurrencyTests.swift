import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreReliability
import Synchronization
import Testing

/// Eight threads mix reads, queries, upserts, deletes, operation appends and removals on one store.
///
/// Each thread owns its item ids (`t<k>-<n>`), so its own model of those rows is exact at every
/// moment and every read of them is checked against it. Operations are shared (one queue, ids
/// assigned by the store): every append and removal runs inside a `write {}` that takes a ticket from
/// a global counter, and write bodies are serialised by every backend, so the tickets give the commit
/// order. At the end the store must equal a serial replay of every committed write (item writes per
/// thread, operation events in ticket order) into a fresh in-memory store — before and after reopening.
@Suite("Concurrency: eight threads on one store")
struct ConcurrencyTests {
    static let schema = TableSchema(
        "ConcItem", ["id": .string, "owner": .integer, "v": .integer, "text": .string, "flag": .boolean], indexed: ["owner", "v"])

    @Test("eight threads: no error, reads match each thread's model, final state equals the serial replay",
        arguments: ["memory"] + ReliabilityBackend.available.map(\.rawValue))
    func eightThreads(_ backendName: String) throws {
        let directory = try TempDirectory("threads-\(backendName)")
        let backend = ReliabilityBackend(rawValue: backendName)
        let path = backend.map { $0.storePath(in: directory.url) } ?? ""
        let store: any LocalStore = try backend.map { try $0.open(path: path) } ?? InMemoryStore()
        try store.defineTable(Self.schema)

        let operations = Settings.threadOperations
        let tickets = TicketCounter()
        let workers = (0..<8).map { Worker(k: $0, seed: 0xC0C0_0000 &+ UInt64($0), store: store, tickets: tickets) }
        let started = Date()
        runOnThreads(workers.map { worker in { worker.run(operations) } })
        let seconds = Date().timeIntervalSince(started)

        for worker in workers {
            for failure in worker.failures.prefix(10) { Issue.record("\(backendName) thread \(worker.k): \(failure)") }
        }

        // The serial replay.
        let replay = try InMemoryStore()
        try replay.defineTable(Self.schema)
        for worker in workers {
            for write in worker.log { try write.apply(to: replay) }
        }
        let events = workers.flatMap(\.operationEvents).sorted { $0.ticket < $1.ticket }
        #expect(Set(events.map(\.ticket)).count == events.count, "two committed write bodies got the same ticket")
        for event in events {
            switch event.kind {
            case .append(let op): try replay.upsert([op.item], into: replay.operationTableName)
            case .remove(let id): try replay.delete(ids: [.int(id)], from: replay.operationTableName)
            }
        }

        var equal = true
        func compare(_ label: String) throws {
            let actual = try store.read(Query("ConcItem", sort: [SortKey("id")])).items
            let expected = try replay.read(Query("ConcItem", sort: [SortKey("id")])).items
            equal = equal && actual == expected
            #expect(actual == expected, "\(backendName) \(label): items differ from the serial replay (\(actual.count) vs \(expected.count) rows)")
            let models = workers.flatMap { $0.model.values }.sorted { $0["id"]!.stringValue! < $1["id"]!.stringValue! }
            #expect(actual == models, "\(backendName) \(label): items differ from the threads' models")
            let ops = try store.pendingOperations()
            let expectedOps = try replay.pendingOperations()
            equal = equal && ops == expectedOps
            #expect(ops == expectedOps, "\(backendName) \(label): operations differ from the serial replay (\(ops.count) vs \(expectedOps.count))")
        }
        try compare("after the run")
        let counts = workers.reduce(into: [String: Int]()) { $0.merge($1.counts) { $0 + $1 } }
        if let backend {
            try store.close()
            let reopened = try backend.open(path: path)
            let own = try Integrity.storeCheck(reopened)
            #expect(own ?? [] == [], "\(backendName): \(own ?? [])")
            let actual = try reopened.read(Query("ConcItem", sort: [SortKey("id")])).items
            #expect(actual == (try replay.read(Query("ConcItem", sort: [SortKey("id")])).items), "\(backendName): items differ after reopening")
            #expect(try reopened.pendingOperations() == replay.pendingOperations(), "\(backendName): operations differ after reopening")
            try reopened.close()
            let independent = Integrity.independentCheck(backend, path: path) ?? []
            #expect(independent.isEmpty, "\(backendName): \(independent)")
        }
        report(
            "threads \(backendName): 8 threads x \(operations) operations in \(String(format: "%.1f", seconds)) s: "
                + counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                + "; \(events.count) operation events replayed; \(workers.map(\.failures.count).reduce(0, +)) failed checks; "
                + (equal ? "final state equals the serial replay" : "FINAL STATE DIFFERS from the serial replay"))
    }
}

/// One committed item write, replayable on another store.
enum LoggedWrite {
    case upsert([Item])
    case deleteIds([String])
    case deleteMatching(Query)

    func apply(to store: any LocalStore) throws {
        switch self {
        case .upsert(let items): try store.upsert(items, into: "ConcItem")
        case .deleteIds(let ids): try store.delete(ids: ids, from: "ConcItem")
        case .deleteMatching(let q): try store.delete(matching: q)
        }
    }
}

struct OperationEvent {
    enum Kind {
        case append(TableOperation)
        case remove(Int64)
    }
    var ticket: Int
    var kind: Kind
}

struct Rollback: Error {}

/// The global ticket counter: taken inside write bodies, which every backend serialises.
final class TicketCounter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .sequentiallyConsistent).newValue }
}

/// One thread's work, log and model. Used by its own thread only, read after it finished.
final class Worker: @unchecked Sendable {
    let k: Int
    var rng: SplitMix
    let store: any LocalStore
    let tickets: TicketCounter
    var model: [String: Item] = [:]
    var log: [LoggedWrite] = []
    var operationEvents: [OperationEvent] = []
    var liveOperations: [TableOperation] = []
    var failures: [String] = []
    var counts: [String: Int] = [:]

    init(k: Int, seed: UInt64, store: any LocalStore, tickets: TicketCounter) {
        self.k = k
        self.rng = SplitMix(seed: seed)
        self.store = store
        self.tickets = tickets
    }

    func nextTicket() -> Int { tickets.next() }

    func id() -> String { "t\(k)-\(rng.below(16))" }

    static let columns = ["id", "owner", "v", "text", "flag"]

    func randomItem(id: String) -> Item {
        var item: Item = ["id": .string(id), "owner": .int(Int64(k))]
        let exists = model[id] != nil
        if !exists || !rng.oneIn(3) { item["v"] = rng.oneIn(10) ? .null : .int(Int64(rng.below(101) - 50)) }
        switch rng.below(4) {
        case 0: break  // absent: merge keeps the stored text
        case 1: item["text"] = .null
        default: item["text"] = .string(rng.pick(["", "a", "B", "hello", "ünïcode", "x\u{0}y", "'; DROP TABLE ConcItem; --"]))
        }
        if rng.oneIn(2) { item["flag"] = .bool(rng.oneIn(2)) }
        return item
    }

    func applyToModel(_ item: Item) {
        let id = item["id"]!.stringValue!
        var row = model[id] ?? Item(Dictionary(uniqueKeysWithValues: Self.columns.map { ($0, Value.null) }))
        for (key, value) in item { row[key] = value }
        model[id] = row
    }

    func sortedOwnRows() -> [Item] {
        // v descending (nulls last), then id ascending.
        model.values.sorted { a, b in
            let x = a["v"]?.intValue
            let y = b["v"]?.intValue
            if x != y {
                guard let x else { return false }
                guard let y else { return true }
                return x > y
            }
            return a["id"]!.stringValue! < b["id"]!.stringValue!
        }
    }

    func run(_ count: Int) {
        for step in 0..<count {
            do {
                try one(step)
            } catch {
                failures.append("step \(step): \(error)")
            }
        }
    }

    func count(_ what: String) { counts[what, default: 0] += 1 }

    func one(_ step: Int) throws {
        let r = rng.below(100)
        switch r {
        case 0..<18:
            let item = randomItem(id: id())
            try store.upsert([item], into: "ConcItem")
            applyToModel(item)
            log.append(.upsert([item]))
            count("upserts")
        case 18..<23:
            var items: [Item] = []
            for _ in 0..<(2 + rng.below(4)) {
                let item = randomItem(id: id())
                items.append(item)
            }
            try store.upsert(items, into: "ConcItem")
            for item in items { applyToModel(item) }
            log.append(.upsert(items))
            count("batch upserts")
        case 23..<31:
            let ids = (0..<(1 + rng.below(3))).map { _ in id() }
            try store.delete(ids: ids, from: "ConcItem")
            for id in ids { model[id] = nil }
            log.append(.deleteIds(ids))
            count("deletes")
        case 31..<35:
            let x = Int64(rng.below(101) - 50)
            let q = Query("ConcItem", where: Field("owner") == .literal(.int(Int64(k))) && Field("v") < .literal(.int(x)))
            try store.delete(matching: q)
            model = model.filter { _, row in !(row["v"]?.intValue.map { $0 < x } ?? false) }
            log.append(.deleteMatching(q))
            count("deletes by query")
        case 35..<50:
            let id = id()
            let got = try store.read(table: "ConcItem", id: .string(id))
            if got != model[id] { failures.append("step \(step): read \(id) = \(got.map { "\($0)" } ?? "nil"), model \(model[id].map { "\($0)" } ?? "nil")") }
            count("reads")
        case 50..<62:
            let got = try store.read(Query("ConcItem", where: Field("owner") == .literal(.int(Int64(k))), sort: [SortKey("v", .descending)]))
            if got.items != sortedOwnRows() { failures.append("step \(step): query of own rows returned \(got.items.count) rows, model has \(model.count)") }
            count("queries")
        case 62..<67:
            let x = Int64(rng.below(101) - 50)
            let got = try store.read(Query("ConcItem", where: Field("v") > .literal(.int(x)), sort: [SortKey("v")], top: 20, includeTotalCount: true))
            let vs = got.items.compactMap { $0["v"]?.intValue }
            if vs.count != got.items.count || !vs.allSatisfy({ $0 > x }) || vs != vs.sorted() || (got.totalCount ?? -1) < got.items.count {
                failures.append("step \(step): global query v > \(x) returned rows that do not match")
            }
            count("global queries")
        case 67..<79:
            let item = randomItem(id: id())
            let itemId = item["id"]!.stringValue!
            let properties = Array("\(k):\(step)".utf8)
            let (ticket, op) = try store.write { tx -> (Int, TableOperation) in
                let ticket = nextTicket()
                try tx.upsert([item], into: "ConcItem")
                return (ticket, try tx.appendOperation(table: "ConcItem", itemId: itemId, properties: properties))
            }
            applyToModel(item)
            log.append(.upsert([item]))
            operationEvents.append(OperationEvent(ticket: ticket, kind: .append(op)))
            if op.itemId != itemId || op.properties != properties { failures.append("step \(step): appendOperation returned \(op)") }
            // The next id is above every live one (an id comes back only after the highest was removed).
            if let highest = liveOperations.map(\.id).max(), op.id <= highest {
                failures.append("step \(step): operation id \(op.id) while this thread's \(highest) is pending")
            }
            liveOperations.append(op)
            count("write {} with appendOperation")
        case 79..<85:
            guard !liveOperations.isEmpty else { return }
            let op = liveOperations.remove(at: rng.below(liveOperations.count))
            let ticket = try store.write { tx -> Int in
                let ticket = nextTicket()
                try tx.removeOperation(id: op.id)
                return ticket
            }
            operationEvents.append(OperationEvent(ticket: ticket, kind: .remove(op.id)))
            count("removeOperation")
        case 85..<90:
            let id = id()
            do {
                try store.write { tx in
                    try tx.upsert([["id": .string(id), "owner": .int(Int64(k)), "v": 9999]], into: "ConcItem")
                    _ = try tx.appendOperation(table: "ConcItem", itemId: id, properties: [0xFF])
                    throw Rollback()
                }
                failures.append("step \(step): a throwing write {} did not throw")
            } catch is Rollback {}
            let got = try store.read(table: "ConcItem", id: .string(id))
            if got != model[id] { failures.append("step \(step): a rolled-back write {} left \(got.map { "\($0)" } ?? "nil") behind") }
            count("rolled-back write {}")
        case 90..<95:
            let id = id()
            let got = try store.pendingOperations(table: "ConcItem", itemId: id)
            let expected = liveOperations.filter { $0.itemId == id }.sorted { $0.id < $1.id }
            if got != expected { failures.append("step \(step): operations of \(id): \(got.map(\.id)), expected \(expected.map(\.id))") }
            count("operation reads")
        default:
            let n = try store.count("ConcItem", where: Field("owner") == .literal(.int(Int64(k))))
            if n != model.count { failures.append("step \(step): count \(n), model \(model.count)") }
            count("counts")
        }
    }
}
