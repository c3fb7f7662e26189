import Foundation
import LocalStore

/// The workload of the crash test: transaction number `s` (1, 2, 3, ...) writes, in one `write {}`,
///
/// 1. the item `item-s` of `CrashItem` with `seq = s`, a payload whose length and bytes are a pure
///    function of `s` (mostly small, sometimes a few pages, now and then a few hundred kilobytes, so
///    overflow pages and page splits happen), and a blob carrying `s`;
/// 2. when `s` is a multiple of 7, a merge-update of the older item `item-(s/2)` (`touched = s`), so
///    crashes also hit in-place updates;
/// 3. an operation for `item-s` whose properties are `s` (8 bytes, big-endian); when `s` is a multiple
///    of 5 the operation is removed again in the same transaction (as a push completing it would), so
///    the newest operation id is often absent from the table;
/// 4. the single row `counter` of `CrashCounter`: `lastSeq = s`, `lastOp = ` the operation's id.
///
/// A sound store holding transactions `1...M` has exactly the items `item-1...item-M`, the operations
/// with the ids `1...M` that are not multiples of 5 (operation `k` for `item-k`), an operation id
/// high-water mark of `M` (so the next append gets `M + 1` even when operation `M` was removed) and
/// `counter` at `M`, every payload byte for byte as computed here.
/// ``verify(_:reported:allowUnreported:)`` checks all of that.
public enum CrashWorkload {
    public static let itemTable = "CrashItem"
    public static let counterTable = "CrashCounter"

    public static let itemSchema = TableSchema(
        itemTable, ["id": .string, "seq": .integer, "payload": .string, "blob": .binary, "touched": .integer],
        indexed: ["seq"])
    public static let counterSchema = TableSchema(counterTable, ["id": .string, "lastSeq": .integer, "lastOp": .integer])

    /// Defines both tables (idempotent).
    public static func prepare(_ store: any LocalStore) throws {
        try store.defineTable(itemSchema)
        try store.defineTable(counterSchema)
    }

    /// The last committed transaction number (0 for an empty store).
    public static func lastSeq(_ store: any LocalStoreAccess) throws -> Int64 {
        try store.read(table: counterTable, id: "counter")?["lastSeq"]?.intValue ?? 0
    }

    // MARK: Deterministic content

    /// The payload's length: 90% up to 200 bytes, 9% 1–12 kB, 1% 50–200 kB.
    public static func payloadLength(_ s: Int64) -> Int {
        let h = SplitMix.hash(UInt64(bitPattern: s) &* 31 &+ 7)
        let r = h % 1000
        let x = Int((h >> 10) % 1_000_000)
        if r < 900 { return x % 201 }
        if r < 990 { return 1000 + x % 11_000 }
        return 50_000 + x % 150_000
    }

    /// The payload of transaction `s`: a `#s#` header then letters from a generator seeded by `s`.
    public static func payload(_ s: Int64) -> String {
        let n = payloadLength(s)
        var bytes = Array("#\(s)#".utf8)
        var g = SplitMix(seed: UInt64(bitPattern: s) ^ 0x5EED)
        while bytes.count < n {
            let r = g.next()
            for k in 0..<8 where bytes.count < n { bytes.append(UInt8(97 + (r >> (k * 8)) % 26)) }
        }
        return String(decoding: bytes.prefix(max(n, 0)), as: UTF8.self)
    }

    /// Whether transaction `s` removes the operation it appended.
    public static func removesItsOperation(_ s: Int64) -> Bool { s % 5 == 0 }

    /// The number of operations a sound store holding transactions `1...m` has.
    public static func expectedOperationCount(_ m: Int64) -> Int64 { m - m / 5 }

    /// `s` as 8 big-endian bytes.
    public static func seqBytes(_ s: Int64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: s) >> (56 - 8 * $0)) } }

    /// The blob of transaction `s`: `seqBytes(s)` then 16 bytes derived from it.
    public static func blob(_ s: Int64) -> [UInt8] {
        var g = SplitMix(seed: UInt64(bitPattern: s))
        return seqBytes(s) + (0..<16).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }

    /// The transaction that touches item `k` last among `1...m`, if any (`s % 7 == 0`, `s / 2 == k`).
    public static func expectedTouched(_ k: Int64, upTo m: Int64) -> Int64? {
        [2 * k + 1, 2 * k].first { $0 <= m && $0 >= 2 && $0 % 7 == 0 }
    }

    // MARK: Writing

    /// Commits transaction `s` and returns the id of the operation it appended.
    ///
    /// `faultySplit` is fault injection for the harness's self-test: the operation is appended in a
    /// second transaction, so a kill between the two leaves a half-written unit of work that
    /// ``verify(_:reported:allowUnreported:)`` must report.
    @discardableResult
    public static func commit(_ s: Int64, on store: any LocalStore, faultySplit: Bool = false) throws -> Int64 {
        if faultySplit {
            try store.upsert(
                [["id": .string("item-\(s)"), "seq": .int(s), "payload": .string(payload(s)), "blob": .binary(blob(s))]],
                into: itemTable)
            if s % 7 == 0 && s >= 2 { try store.upsert([["id": .string("item-\(s / 2)"), "touched": .int(s)]], into: itemTable) }
            let op = try store.appendOperation(table: itemTable, itemId: "item-\(s)", properties: seqBytes(s))
            if removesItsOperation(s) { try store.removeOperation(id: op.id) }
            try store.upsert([["id": "counter", "lastSeq": .int(s), "lastOp": .int(op.id)]], into: counterTable)
            return op.id
        }
        return try store.write { tx in
            try tx.upsert(
                [["id": .string("item-\(s)"), "seq": .int(s), "payload": .string(payload(s)), "blob": .binary(blob(s))]],
                into: itemTable)
            if s % 7 == 0 && s >= 2 {
                try tx.upsert([["id": .string("item-\(s / 2)"), "touched": .int(s)]], into: itemTable)
            }
            let op = try tx.appendOperation(table: itemTable, itemId: "item-\(s)", properties: seqBytes(s))
            if removesItsOperation(s) { try tx.removeOperation(id: op.id) }
            try tx.upsert([["id": "counter", "lastSeq": .int(s), "lastOp": .int(op.id)]], into: counterTable)
            return op.id
        }
    }

    // MARK: Verification

    /// What ``verify(_:reported:allowUnreported:)`` found.
    public struct Verification: Sendable {
        /// The last transaction present (`counter.lastSeq`).
        public var lastSeq: Int64
        /// Everything wrong; empty for a sound store.
        public var problems: [String]
    }

    /// Checks the store against the workload: every transaction `1...M` fully present and nothing
    /// else, where `M` (the counter) is at least the highest `reported` one and at most
    /// `allowUnreported` above it (a transaction may commit and the writer die before reporting it).
    /// `reported` maps each reported transaction to the operation id the writer saw.
    public static func verify(_ store: any LocalStore, reported: [Int64: Int64], allowUnreported: Int64 = 1) throws -> Verification {
        var problems: [String] = []
        func problem(_ text: String) { if problems.count < 30 { problems.append(text) } }
        // Killed before the tables were defined: then nothing can have been committed.
        if try store.schema(of: itemTable) == nil || store.schema(of: counterTable) == nil {
            if let s = reported.keys.max() { problem("the crash tables are missing but transaction \(s) was reported committed") }
            let ops = try store.pendingOperationCount()
            if ops != 0 { problem("the crash tables are missing but there are \(ops) operations") }
            return Verification(lastSeq: 0, problems: problems)
        }
        let counter = try store.read(table: counterTable, id: "counter")
        let m = counter?["lastSeq"]?.intValue ?? 0
        let reportedMax = reported.keys.max() ?? 0
        if m < reportedMax { problem("lost committed work: counter is at \(m) but transaction \(reportedMax) was reported committed") }
        if m > reportedMax + allowUnreported {
            problem("counter is at \(m), more than \(allowUnreported) past the last reported transaction \(reportedMax)")
        }
        if let counter, counter["lastOp"]?.intValue != m {
            problem("counter.lastOp is \(counter["lastOp"].map { "\($0)" } ?? "nil"), expected \(m)")
        }

        // Items, in seq order, page by page (payloads can be large).
        var expected: Int64 = 1
        var last: Int64 = 0
        while true {
            let page = try store.read(
                Query(itemTable, where: Field("seq") > .literal(.int(last)), sort: [SortKey("seq")], top: 500)).items
            if page.isEmpty { break }
            for item in page {
                guard let s = item["seq"]?.intValue else {
                    problem("an item without seq: \(item["id"].map { "\($0)" } ?? "?")")
                    continue
                }
                last = s
                if s != expected {
                    problem(s > expected ? "transactions \(expected)...\(s - 1) have no item (half-written or lost)" : "duplicate seq \(s)")
                }
                expected = s + 1
                if item["id"]?.stringValue != "item-\(s)" { problem("item \(s) has id \(item["id"].map { "\($0)" } ?? "nil")") }
                if item["payload"]?.stringValue != payload(s) {
                    let got = item["payload"]?.stringValue?.utf8.count ?? -1
                    problem("item \(s): payload differs (\(got) bytes, expected \(payloadLength(s)))")
                }
                if item["blob"]?.binaryValue != blob(s) { problem("item \(s): blob differs") }
                let touched = item["touched"]?.intValue
                if touched != expectedTouched(s, upTo: m) {
                    problem("item \(s): touched is \(touched.map(String.init) ?? "nil"), expected \(expectedTouched(s, upTo: m).map(String.init) ?? "nil")")
                }
            }
        }
        if expected - 1 != m { problem("items run to \(expected - 1) but the counter says \(m) (half-written transaction)") }
        let itemCount = try store.count(itemTable)
        if itemCount != Int(m) { problem("CrashItem has \(itemCount) rows, expected \(m)") }

        // Operations: ids 1...M except multiples of 5, operation k for item-k, in id order; the
        // high-water mark at M.
        let ops = try store.pendingOperations()
        let rawOpCount = try store.pendingOperationCount()
        if rawOpCount != ops.count { problem("\(rawOpCount) operation rows but only \(ops.count) decode as operations") }
        if ops.count != Int(expectedOperationCount(m)) {
            problem("\(ops.count) operations, expected \(expectedOperationCount(m)) (half-written transaction)")
        }
        let mark = try store.operationIdHighWaterMark()
        if mark != m { problem("the operation id high-water mark is \(mark), expected \(m)") }
        let keptIds = (1...max(m, 1)).filter { $0 <= m && !removesItsOperation($0) }
        var previous: Int64 = 0
        for (n, op) in ops.enumerated() {
            let k = n < keptIds.count ? keptIds[n] : -1
            if op.id <= previous { problem("operation ids do not increase: \(op.id) after \(previous)") }
            previous = op.id
            if op.id != k { problem("operation #\(k) has id \(op.id)") }
            if op.itemId != "item-\(k)" || op.table != itemTable || op.properties != seqBytes(k) {
                problem("operation \(op.id) is for \(op.table)/\(op.itemId), properties \(op.properties); expected item-\(k)")
            }
        }
        for (s, opId) in reported where s <= m && opId != s {
            problem("transaction \(s) reported operation id \(opId)")
        }
        return Verification(lastSeq: m, problems: problems)
    }
}
