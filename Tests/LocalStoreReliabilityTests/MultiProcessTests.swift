import Foundation
import LocalStore
import LocalStoreReliability
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Two processes on one store. Every persistent backend supports it (docs/reliability.md): SQLite and
/// SQLCipher through SQLite's file locks and WAL index, LMDB through its lock file and robust
/// cross-process writer mutex. A backend that did not would have to refuse the second opener with a
/// clear error; these tests would then fail and must be changed to expect that error.
@Suite("Two processes on one store")
struct MultiProcessTests {
    @Test("two processes write one store at the same time: nothing lost, operation ids unique and increasing",
        arguments: ReliabilityBackend.available)
    func twoWriters(_ backend: ReliabilityBackend) throws {
        let directory = try TempDirectory("multi-\(backend)")
        let path = backend.storePath(in: directory.url)
        let count = Settings.processTransactions
        let store = try backend.open(path: path)
        try store.defineTable(MultiProcessWorkload.schema)

        let child = try ChildProcess(executable: try helperPath(), arguments: ["multi", backend.rawValue, path, "B", "\(count)"])
        #expect(child.waitForLine(timeout: 60) { $0 == "ready" }, "\(child.errorOutput)")
        child.send("go")
        var mine: [Int64] = []
        for n in 1...count {
            mine.append(try MultiProcessWorkload.commit(tag: "A", n: n, on: store))
            // Read what the other process committed so far, in the same loop.
            _ = try store.count(MultiProcessWorkload.table, where: Field("tag") == "B")
        }
        let end = child.wait()
        #expect(end == .exit(0), "the second process ended with \(end): \(child.errorOutput)")
        let theirs = child.outputLines.compactMap { line -> Int64? in
            let parts = line.split(separator: " ")
            return parts.count == 2 ? Int64(parts[1]) : nil
        }
        #expect(theirs.count == count)

        // Each process saw its own operation ids increase; together they are unique.
        #expect(mine == mine.sorted() && Set(mine).count == mine.count)
        #expect(theirs == theirs.sorted() && Set(theirs).count == theirs.count)
        #expect(Set(mine).isDisjoint(with: theirs), "both processes got the same operation id")
        // Every item and operation of both is there, each operation with its item.
        let ops = try store.pendingOperations()
        #expect(ops.map(\.id) == (mine + theirs).sorted())
        for op in ops {
            let tag = String(decoding: op.properties, as: UTF8.self)
            #expect(op.itemId.hasPrefix(tag + "-"))
        }
        let items = try store.read(Query(MultiProcessWorkload.table)).items
        let expectedIds = Set((1...count).flatMap { ["A-\($0)", "B-\($0)"] })
        #expect(Set(items.compactMap(\.stringId)) == expectedIds)
        #expect(try Integrity.storeCheck(store) ?? [] == [])
        try store.close()
        #expect(Integrity.independentCheck(backend, path: path) ?? [] == [])
        let interleaved = zip(ops, ops.dropFirst()).filter { $0.0.properties != $0.1.properties }.count
        report("multi-process \(backend): 2 processes x \(count) transactions, all present, operation ids unique; \(interleaved) switches between the processes in the operation queue")
    }

    @Test("a table defined by another process is usable by a store that was already open", arguments: ReliabilityBackend.available)
    func tableDefinedElsewhere(_ backend: ReliabilityBackend) throws {
        let directory = try TempDirectory("define-\(backend)")
        let path = backend.storePath(in: directory.url)
        let store = try backend.open(path: path)
        defer { try? store.close() }
        #expect(try store.tableSchemas().isEmpty)
        let child = try ChildProcess(executable: try helperPath(), arguments: ["define", backend.rawValue, path, "OtherProcess"])
        let end = child.wait()
        try #require(end == .exit(0), "\(child.errorOutput)")
        // The catalog changed under this store: it must see the new table and its row.
        func check() throws {
            #expect(try store.tableSchemas().map(\.name) == ["OtherProcess"], "\(backend): tableSchemas() does not list a table another process defined")
            #expect(try store.read(table: "OtherProcess", id: "from-other-process")?["note"] != nil,
                "\(backend): a row of a table another process defined cannot be read")
            #expect(throws: Never.self, "\(backend): cannot write a table another process defined") {
                try store.upsert([["id": "here", "note": "x"]], into: "OtherProcess")
            }
        }
        try check()
    }
}

/// A writer waits for another process's write transaction at most its busy timeout, then gets `busy`
/// (issue 15: LMDB writers used to wait in liblmdb's mutex without a limit; SQLite had its busy timeout).
@Suite("Busy timeout across processes")
struct BusyTimeoutTests {
    @Test("a write blocked by another process's write is busy after the timeout, and works once it committed",
        arguments: ReliabilityBackend.available)
    func busyAfterTimeout(_ backend: ReliabilityBackend) throws {
        let directory = try TempDirectory("busy-\(backend)")
        let path = backend.storePath(in: directory.url)
        let store = try backend.open(path: path, busyTimeout: .milliseconds(300))
        defer { try? store.close() }
        try store.defineTable(TableSchema("Hold", ["id": .string, "note": .string]))
        let child = try ChildProcess(executable: try helperPath(), arguments: ["hold-write", backend.rawValue, path, "4000"])
        #expect(child.waitForLine(timeout: 60) { $0 == "holding" }, "\(child.errorOutput)")
        let clock = ContinuousClock()
        let start = clock.now
        do {
            try store.upsert([["id": "mine", "note": "blocked"]], into: "Hold")
            Issue.record("the write did not wait for the other process's transaction")
        } catch let error as LocalStoreError {
            #expect(error.code == .busy, "\(error)")
            if backend == .lmdb { #expect(error.message.contains(path), "the busy error does not name the store: \(error)") }
        }
        let waited = clock.now - start
        #expect(waited >= .milliseconds(250) && waited < .milliseconds(3000), "waited \(waited) with a 300 ms timeout")
        #expect(child.waitForLine(timeout: 60) { $0 == "committed" }, "\(child.errorOutput)")
        #expect(child.wait() == .exit(0), "\(child.errorOutput)")
        try store.upsert([["id": "mine", "note": "after"]], into: "Hold")
        #expect(try store.read(table: "Hold", id: "held") != nil)
        report("busy \(backend): busy after \(waited) with a 300 ms timeout")
    }

    @Test("a write waits for another process's short write within the timeout", arguments: ReliabilityBackend.available)
    func waitsWithinTimeout(_ backend: ReliabilityBackend) throws {
        let directory = try TempDirectory("wait-\(backend)")
        let path = backend.storePath(in: directory.url)
        let store = try backend.open(path: path, busyTimeout: .seconds(20))
        defer { try? store.close() }
        try store.defineTable(TableSchema("Hold", ["id": .string, "note": .string]))
        let child = try ChildProcess(executable: try helperPath(), arguments: ["hold-write", backend.rawValue, path, "400"])
        #expect(child.waitForLine(timeout: 60) { $0 == "holding" }, "\(child.errorOutput)")
        let clock = ContinuousClock()
        let start = clock.now
        try store.upsert([["id": "mine", "note": "waited"]], into: "Hold")
        let waited = clock.now - start
        #expect(waited >= .milliseconds(100), "the write did not wait for the other process (\(waited))")
        #expect(child.wait() == .exit(0), "\(child.errorOutput)")
        #expect(try store.read(table: "Hold", id: "held") != nil)
    }
}
