import Foundation
import LocalStore
import LocalStoreConformance

/// Random rows and random queries, evaluated by every backend and by the conformance suite's
/// independent reference evaluator (``ReferenceOracle``); every answer must agree exactly (rows, order,
/// total count), invalid queries must fail with the same `LocalStoreError` code everywhere, and
/// `delete(matching:)` must delete exactly the rows the query returns.
public final class QueryFuzzer {
    public struct Stats: Sendable, CustomStringConvertible {
        public var queries = 0
        public var invalidQueries = 0
        public var backendEvaluations = 0
        public var deleteChecks = 0
        public var nonEmpty = 0
        public var rounds = 0
        public var rowsWritten = 0
        public var disagreements: [String] = []

        public var description: String {
            "\(queries) queries (\(invalidQueries) invalid, \(nonEmpty) with a non-empty answer) x backends = \(backendEvaluations) evaluations, \(deleteChecks) delete(matching:) checks, "
                + "\(rounds) data sets (\(rowsWritten) rows written), \(disagreements.count) disagreements"
        }
    }

    public let backends: [(name: String, store: any LocalStore)]
    private var generator: FuzzGenerator
    private var rows: [[String: Value]] = []
    private var nextRow = 0
    public private(set) var stats = Stats()
    private let seed: UInt64

    /// `backends` must be empty stores; the fuzz table is defined in each.
    public init(backends: [(name: String, store: any LocalStore)], seed: UInt64) throws {
        self.backends = backends
        self.seed = seed
        generator = FuzzGenerator(seed: seed)
        for (_, store) in backends { try store.defineTable(FuzzGenerator.schema) }
    }

    struct Rollback: Error { var rows: [Item] }

    private func disagree(_ text: String) {
        if stats.disagreements.count < 20 { stats.disagreements.append("seed \(seed), round \(stats.rounds), query \(stats.queries): \(text)") }
    }

    // MARK: Data

    /// Writes a new data set (half the time from scratch, otherwise by merging, re-spelling ids,
    /// deleting and inserting) into every backend and the reference rows.
    public func newData(rowCount: Int) throws {
        stats.rounds += 1
        var g = generator
        defer { generator = g }
        if rows.isEmpty || g.rng.oneIn(2) {
            rows = (0..<rowCount).map { _ in
                nextRow += 1
                return g.row(nextRow)
            }
            for (_, store) in backends {
                try store.write { tx in
                    try tx.delete(matching: Query(FuzzGenerator.table))
                    try tx.upsert(rows.map { Item($0) }, into: FuzzGenerator.table)
                }
            }
            stats.rowsWritten += rows.count
            return
        }
        // Merge updates (some with the id in another spelling), deletes and inserts.
        var upserts: [Item] = []
        for _ in 0..<(1 + g.rng.below(8)) where !rows.isEmpty {
            let k = g.rng.below(rows.count)
            let newId = g.respell(rows[k]["id"]!.stringValue!)
            var item: [String: Value] = ["id": .string(newId)]
            for c in FuzzGenerator.schema.columns where c.name != "id" && g.rng.oneIn(3) { item[c.name] = g.value(c.name) }
            upserts.append(Item(item))
            for (key, value) in item { rows[k][key] = value }
        }
        for _ in 0..<g.rng.below(4) {
            nextRow += 1
            let row = g.row(nextRow)
            upserts.append(Item(row))
            rows.append(row)
        }
        var deletes: [Value] = []
        for _ in 0..<g.rng.below(3) where !rows.isEmpty {
            let k = g.rng.below(rows.count)
            deletes.append(.string(g.respell(rows[k]["id"]!.stringValue!)))
            rows.remove(at: k)
        }
        for (_, store) in backends {
            try store.write { tx in
                try tx.upsert(upserts, into: FuzzGenerator.table)
                try tx.delete(ids: deletes, from: FuzzGenerator.table)
            }
        }
        stats.rowsWritten += upserts.count
    }

    // MARK: Queries

    /// Runs one random query everywhere and compares.
    public func step() throws {
        var g = generator
        let invalid = g.rng.oneIn(12)
        let query = g.query(rows: rows, invalid: invalid)
        let checkDelete = g.rng.oneIn(20)
        generator = g
        stats.queries += 1

        // Valid or not is decided by the core's resolver; the reference assumes a valid query.
        let expectedError: LocalStoreError.Code?
        do {
            _ = try ResolvedQuery(query, schema: FuzzGenerator.schema)
            expectedError = nil
        } catch let e as LocalStoreError {
            expectedError = e.code
        }
        if let expectedError {
            stats.invalidQueries += 1
            for (name, store) in backends {
                stats.backendEvaluations += 1
                do {
                    _ = try store.read(query)
                    disagree("\(name) accepted a query the core refuses with \(expectedError): \(query)")
                } catch let e as LocalStoreError {
                    if e.code != expectedError { disagree("\(name) refused with \(e.code), the core with \(expectedError): \(query)") }
                } catch {
                    disagree("\(name) threw a non-LocalStoreError \(error) for \(query)")
                }
            }
            return
        }
        let reference = try ReferenceOracle.select(query, schema: FuzzGenerator.schema, rows: rows)
        let expected = reference.rows.map { Item($0) }
        if !expected.isEmpty { stats.nonEmpty += 1 }
        for (name, store) in backends {
            stats.backendEvaluations += 1
            do {
                let got = try store.read(query)
                if got.items != expected {
                    disagree("\(name) returned \(describe(got.items)), the reference \(describe(expected)) for \(query)")
                } else if got.totalCount != (query.includeTotalCount ? reference.count : nil) {
                    disagree("\(name) counted \(got.totalCount.map(String.init) ?? "nil"), the reference \(reference.count) for \(query)")
                }
            } catch {
                disagree("\(name) threw \(error) for a valid query \(query)")
            }
        }
        if checkDelete {
            stats.deleteChecks += 1
            let deletedIds = Set(expected.compactMap { $0["id"]?.stringValue })
            let remaining = rows.filter { !deletedIds.contains($0["id"]!.stringValue!) }.map { Item($0) }
            let remainingQuery = Query(FuzzGenerator.table, sort: [SortKey("id")])
            let expectedRemaining = try ReferenceOracle.select(remainingQuery, schema: FuzzGenerator.schema, rows: remaining.map(\.values)).rows.map { Item($0) }
            for (name, store) in backends {
                do {
                    try store.write { tx in
                        try tx.delete(matching: query)
                        throw Rollback(rows: try tx.read(remainingQuery).items)
                    }
                } catch let r as Rollback {
                    if r.rows != expectedRemaining {
                        disagree("\(name): delete(matching:) left \(r.rows.count) rows, expected \(expectedRemaining.count), for \(query)")
                    }
                } catch {
                    disagree("\(name): delete(matching:) threw \(error) for \(query)")
                }
                // The rolled-back delete left everything in place.
                if let n = try? store.count(FuzzGenerator.table), n != rows.count {
                    disagree("\(name): a rolled-back delete(matching:) changed the row count to \(n) (expected \(rows.count))")
                }
            }
        }
    }

    private func describe(_ items: [Item]) -> String {
        let ids = items.prefix(8).map { ($0["id"]?.stringValue ?? "?").prefix(12) }
        return "\(items.count) rows [\(ids.joined(separator: ", "))\(items.count > 8 ? ", …" : "")]"
    }

    /// Runs `queries` queries, a new data set every `perRound`.
    public func run(queries: Int, rowsPerSet: Int = 30, perRound: Int = 100, progress: ((Stats) -> Void)? = nil) throws -> Stats {
        for n in 0..<queries {
            if n % perRound == 0 {
                try newData(rowCount: rowsPerSet)
                progress?(stats)
            }
            try step()
            if stats.disagreements.count >= 20 { break }
        }
        return stats
    }
}
