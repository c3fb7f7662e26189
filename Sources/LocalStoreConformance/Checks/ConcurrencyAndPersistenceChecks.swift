import Dispatch
import Foundation
import LocalStore
import Synchronization

// Threads (readers never see half a transaction; concurrent appends) and persistence across reopen.

/// Problems found on other threads, collected for the checking thread.
final class ThreadFindings: Sendable {
    private let problems = LockedValue<[String]>([])
    private let finishedWriters = Atomic<Int>(0)

    func record(_ problem: String) { problems.withLock { $0.append(problem) } }
    var all: [String] { problems.withLock { $0 } }
    func writerFinished() { finishedWriters.add(1, ordering: .sequentiallyConsistent) }
    var writersFinished: Int { finishedWriters.load(ordering: .sequentiallyConsistent) }
}

/// Runs each body on its own `Thread` (4 MiB stacks) and waits for all of them. Shared with the
/// package's test targets.
package func runOnThreads(_ bodies: [@Sendable () -> Void]) {
    let group = DispatchGroup()
    for body in bodies {
        group.enter()
        let thread = Thread {
            body()
            group.leave()
        }
        thread.stackSize = 4 << 20
        thread.start()
    }
    group.wait()
}

extension ConformanceSuite {
    /// One writer thread runs transactions that keep two rows' counters equal (updating them with two
    /// separate calls); reader threads reading both rows in one query never see them differ, and
    /// never see a counter go back.
    public static func concurrentReadersSeeWholeTransactions(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(TableSchema("Counter", ["value": .integer, "other": .integer]))
            try store.upsert([["id": "a", "value": 0], ["id": "b", "value": 0]], into: "Counter")
            let findings = ThreadFindings()
            let transactions = 300
            let writer: @Sendable () -> Void = {
                defer { findings.writerFinished() }
                do {
                    for k in 1...transactions {
                        try store.write { tx in
                            try tx.upsert([["id": "a", "value": .int(Int64(k))]], into: "Counter")
                            try tx.upsert([["id": "b", "value": .int(Int64(k))]], into: "Counter")
                            if k % 10 == 0 {
                                try tx.upsert([["id": .string("c\(k)"), "value": .int(Int64(k))]], into: "Counter")
                                try tx.delete(ids: ["c\(k)"], from: "Counter")
                            }
                        }
                    }
                } catch {
                    findings.record("writer failed: \(error)")
                }
            }
            let reader: @Sendable () -> Void = {
                var last: Int64 = 0
                var reads = 0
                while findings.writersFinished == 0 || reads < 50 {
                    reads += 1
                    do {
                        let items = try store.read(Query("Counter", where: Field("id").isIn(["a", "b"]))).items
                        let values = items.compactMap { $0["value"]?.intValue }
                        guard values.count == 2, values[0] == values[1] else {
                            findings.record("a reader saw half a transaction: \(items)")
                            return
                        }
                        guard values[0] >= last else {
                            findings.record("a reader saw the counter go back from \(last) to \(values[0])")
                            return
                        }
                        last = values[0]
                        let count = try store.count("Counter")
                        guard count == 2 else {
                            findings.record("a reader saw \(count) rows instead of 2")
                            return
                        }
                    } catch {
                        findings.record("reader failed: \(error)")
                        return
                    }
                }
            }
            runOnThreads([writer, reader, reader, reader])
            try expect(findings.all.isEmpty, findings.all.prefix(5).joined(separator: "; "))
            try expectEqual(
                try store.read(Query("Counter")).items.compactMap { $0["value"]?.intValue }, [Int64(transactions), Int64(transactions)],
                "final counters")
        }
    }

    /// Several threads appending operations at once get distinct, gap-free ids, each thread's in
    /// increasing order.
    public static func concurrentAppendOperations(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let findings = ThreadFindings()
            let threads = 4
            let perThread = 25
            let bodies: [@Sendable () -> Void] = (0..<threads).map { t in
                {
                    var last: Int64 = 0
                    for k in 0..<perThread {
                        do {
                            let op = try store.appendOperation(table: "T\(t)", itemId: "item\(k)")
                            if op.id <= last { findings.record("thread \(t) got id \(op.id) after \(last)") }
                            last = op.id
                        } catch {
                            findings.record("thread \(t) failed: \(error)")
                            return
                        }
                    }
                }
            }
            runOnThreads(bodies)
            try expect(findings.all.isEmpty, findings.all.prefix(5).joined(separator: "; "))
            let ops = try store.pendingOperations()
            try expectEqual(ops.map(\.id), Array(1...Int64(threads * perThread)), "ids of concurrently appended operations")
            for t in 0..<threads {
                try expectEqual(
                    try store.pendingOperations(table: "T\(t)").map(\.itemId), (0..<perThread).map { "item\($0)" },
                    "thread \(t)'s operations in its order")
            }
        }
    }

    /// Reads and writes from several threads on different tables all land (every method may be called
    /// from any thread).
    public static func concurrentWritersOnSeveralTables(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            for t in 0..<3 { try store.defineTable(TableSchema("Table\(t)", ["n": .integer])) }
            let findings = ThreadFindings()
            let bodies: [@Sendable () -> Void] = (0..<3).map { t in
                {
                    do {
                        for k in 0..<60 {
                            try store.upsert([["id": .string("r\(k)"), "n": .int(Int64(k))]], into: "Table\(t)")
                            if k % 3 == 0 { try store.delete(ids: ["r\(k)"], from: "Table\(t)") }
                            _ = try store.read(Query("Table\((t + 1) % 3)", where: Field("n") > 10, top: 5))
                        }
                    } catch {
                        findings.record("thread \(t) failed: \(error)")
                    }
                }
            }
            runOnThreads(bodies)
            try expect(findings.all.isEmpty, findings.all.prefix(5).joined(separator: "; "))
            for t in 0..<3 { try expectEqual(try store.count("Table\(t)"), 40, "rows of Table\(t)") }
        }
    }

    /// A persistent store reopened in the same directory has the same tables (spelling, columns,
    /// indexes), rows (every type, bit for bit), operations, errors and delta tokens; what a
    /// rolled-back transaction wrote is not there. A non-persistent store checks the same things
    /// before closing.
    public static func persistenceAcrossReopen(_ factory: StoreFactory) throws {
        try withWorkspace(factory) { workspace in
            var store = try workspace.open()
            try store.defineTable(todoSchema)
            try store.defineTable(typedSchema)
            try store.defineTable(TableSchema("Indexed", ["key": .string, "n": .integer], indexed: ["key"]))
            let full = todoRow("Full", [
                "title": "t", "priority": .int(Int64.min), "score": .double(0.1), "complete": true, "due": .date(date(0.000_123)),
                "attachment": .binary(Array(0...255)), "meta": .json(["a": [1, 1.0, "x"]]), "createdAt": .date(Date.distantPast),
                "updatedAt": .date(Date.distantFuture), "version": "AAAA", "deleted": false,
            ])
            try store.upsert([full, ["id": "nul\u{0}id", "title": "a\u{0}b"]], into: "TodoItem")
            try store.upsert(naughtyStrings.enumerated().map { ["id": .string("n\($0.offset)"), "text": .string($0.element)] }, into: "Typed")
            try store.upsert((0..<100).map { ["id": .string("k\($0)"), "key": .string("key\($0 % 10)"), "n": .int(Int64($0))] }, into: "Indexed")
            try store.defineTable(TableSchema("Indexed", ["added": .date], indexed: ["n"]))
            _ = try store.appendOperation(table: "TodoItem", itemId: "Full", properties: Array("{}".utf8))
            _ = try store.appendOperation(table: "TodoItem", itemId: "nul\u{0}id")
            try store.recordError(TableOperationError(id: "e1", operationId: 2, properties: [9]))
            try store.setDeltaToken(date(5), table: "TodoItem", queryId: "q")
            try rolledBack(store) { tx in
                try tx.upsert([["id": "ghost"]], into: "TodoItem")
                _ = try tx.appendOperation(table: "TodoItem", itemId: "ghost")
            }
            let schemas = try store.tableSchemas()
            let systemSchemas = try [store.operationTableName, store.errorTableName, store.configTableName].map { try store.schema(of: $0) }
            let tables = try allTableNames(store)
            let before = try snapshot(store, tables)
            try expectEqual(before["TodoItem"]?.count, 2, "the rolled-back row is absent")
            guard let reopened = try workspace.reopen(store) else { return }
            store = reopened
            try expectEqual(try store.tableSchemas(), schemas, "table schemas after reopening")
            let systemAfter = try [store.operationTableName, store.errorTableName, store.configTableName].map { try store.schema(of: $0) }
            try expectEqual(systemAfter.map { $0?.columns.map(\.name) }, systemSchemas.map { $0?.columns.map(\.name) }, "system tables after reopening")
            try expectUnchanged(store, before, "after reopening")
            try expectEqual(try store.count("Indexed", where: Field("key") == "key3"), 10, "index on key after reopening")
            try expectEqual(try store.count("Indexed", where: Field("n") >= 90), 10, "index on n after reopening")
            try expectEqual(try store.deltaToken(table: "TodoItem", queryId: "q"), date(5), "delta token after reopening")
            try expectEqual(try store.appendOperation(table: "T", itemId: "x").id, 3, "the next operation id after reopening")
            try store.upsert([["id": "Full", "title": "changed"]], into: "TodoItem")
            store = try unwrap(try workspace.reopen(store), "second reopen")
            try expectEqual(try store.read(table: "TodoItem", id: "full")?["title"], "changed", "a write after reopening persists")
        }
    }
}
