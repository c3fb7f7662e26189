import Foundation
import LocalStore
#if canImport(LocalStoreSQLCipher)
import LocalStoreSQLCipher
#endif

/// The I/O fault test's workload (docs/reliability.md, "I/O faults"): a fixed sequence of store calls —
/// typed-queue calls, a pulled page, a batch, a purge and, on SQLCipher, a rekey — each one transaction,
/// run by the helper with one write, sync or truncate call failing. After it the store must open, pass
/// its integrity check and hold exactly the steps reported committed.
public enum FaultWorkload {
    static let schema = TableSchema(
        "FItem", ["id": .string, "text": .string, "n": .integer, "version": .string, "updatedAt": .date, "deleted": .boolean], indexed: ["n"])
    static let purgeSchema = TableSchema("PItem", ["id": .string, "n": .integer])
    static let d0 = Date(timeIntervalSince1970: 1_750_000_000)

    /// The store every run starts from (made once, copied per run).
    public static func prepare(_ store: any LocalStore) throws {
        try store.defineTable(schema)
        try store.defineTable(purgeSchema)
        try store.upsert((0..<300).map { ["id": .string("r\($0)"), "text": .string(String(repeating: "t", count: 100)), "n": .int(Int64($0))] }, into: "FItem")
        try store.upsert((0..<200).map { ["id": .string("p\($0)"), "n": .int(Int64($0))] }, into: "PItem")
        try store.enqueue(.update, ["id": "r1", "text": "queued"], into: "FItem")
        try store.setDeltaToken(d0, table: "PItem", queryId: "q")
    }

    /// The steps, in order; each is one store call, so one transaction.
    public static func steps(_ backend: ReliabilityBackend) -> [(name: String, run: (any LocalStore) throws -> Void)] {
        var steps: [(name: String, run: (any LocalStore) throws -> Void)] = [
            ("enqueue insert", { try $0.enqueue(.insert, ["id": "new1", "text": "inserted", "n": 1000], into: "FItem") }),
            ("enqueue update", { try $0.enqueue(.update, ["id": "r5", "text": "updated"], into: "FItem") }),
            ("enqueue delete", { try $0.enqueue(.delete, ["id": "r6"], into: "FItem") }),
            ("beginPush", { _ = try $0.beginPush() }),
            ("complete", { store in
                guard let op = try store.nextOperation() else { throw LocalStoreError(.internal, "no head") }
                try store.complete(op, serverItem: ["id": .string(op.itemId), "text": "queued", "version": "v2", "updatedAt": .date(d0)])
            }),
            ("recordPushError", { store in
                guard let op = try store.nextOperation() else { throw LocalStoreError(.internal, "no head") }
                try store.recordPushError(for: op, statusCode: 500, message: "server error")
            }),
            ("applyPulledPage", { store in
                let page: [Item] = (0..<40).map {
                    ["id": .string("s\($0)"), "text": "pulled", "n": .int(Int64(2000 + $0)), "updatedAt": .date(d0.addingTimeInterval(Double($0)))]
                }
                try store.applyPulledPage(page + [["id": "r7", "deleted": true]], into: "FItem", queryId: "all")
            }),
            ("upsert batch", { try $0.upsert((0..<150).map { ["id": .string("b\($0)"), "text": .string(String(repeating: "b", count: 300))] }, into: "FItem") }),
            ("purge", { try $0.purge("PItem", where: Field("n") < 100, queryId: "q") }),
            ("delete by query", { try $0.delete(matching: Query("FItem", where: Field("n") >= 200 && Field("n") < 280)) }),
        ]
        #if canImport(LocalStoreSQLCipher)
        if backend == .sqlcipher {
            steps.append(("rekey", { store in
                guard let cipher = store as? SQLCipherStore else { throw LocalStoreError(.internal, "not a SQLCipher store") }
                try cipher.rekey(to: try SQLCipherKey.raw(rekeyBytes))
            }))
        }
        #endif
        return steps
    }

    /// The raw key the rekey step sets (a test key).
    public static let rekeyBytes: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0x31 + $0 * 3) }

    /// Every row of every table (user and system), sorted, as text: equal for equal stores. Error rows
    /// are listed without their ids (new UUIDs on every run).
    public static func digest(_ store: any LocalStore) throws -> String {
        var lines: [String] = []
        let tables = try store.tableSchemas().map(\.name) + [store.operationTableName, store.errorTableName, store.configTableName]
        for table in tables {
            for item in try store.read(Query(table, sort: [SortKey("id")])).items {
                var values = item.values
                if table == store.errorTableName { values["id"] = nil }
                lines.append(table + " " + values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))
            }
        }
        return lines.sorted().joined(separator: "\n")
    }
}
