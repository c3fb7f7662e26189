import Foundation
import LocalStore
#if canImport(Glibc)
import Glibc
#endif

/// Two processes writing one store: each commits items `<tag>-<n>` with one operation each.
public enum MultiProcessWorkload {
    public static let table = "MultiItem"
    public static let schema = TableSchema(table, ["id": .string, "tag": .string, "n": .integer], indexed: ["tag"])

    /// Commits item `<tag>-<n>` and its operation (properties = the tag's bytes); returns the operation id.
    public static func commit(tag: String, n: Int, on store: any LocalStore) throws -> Int64 {
        try store.write { tx in
            try tx.upsert([["id": .string("\(tag)-\(n)"), "tag": .string(tag), "n": .int(Int64(n))]], into: table)
            return try tx.appendOperation(table: table, itemId: "\(tag)-\(n)", properties: Array(tag.utf8)).id
        }
    }
}

/// Opens a possibly damaged store and reads all of it; the result is one line (see the helper).
public enum Probe {
    public static func run(_ backend: ReliabilityBackend, path: String) -> String {
        run(backend, path: path, inner: ()).replacingOccurrences(of: "\n", with: " ")
    }

    static func run(_ backend: ReliabilityBackend, path: String, inner: Void) -> String {
        func fail(_ step: String, _ error: any Error) -> String {
            if let e = error as? LocalStoreError { return "error \(step) \(e.code) \(e.message)" }
            return "untyped \(step) \(type(of: error)): \(error)"
        }
        let store: any LocalStore
        do { store = try backend.open(path: path) } catch { return fail("open", error) }
        var rows = 0
        var problems: [String] = []
        do {
            let tables = try store.tableSchemas().map(\.name) + store.systemTableNames.schemas.map(\.name)
            for table in tables {
                let result = try store.read(Query(table, includeTotalCount: true))
                rows += result.items.count
                if result.totalCount != result.items.count {
                    problems.append("\(table): \(result.items.count) rows read, count says \(result.totalCount ?? -1)")
                }
            }
            problems += try Integrity.storeCheck(store) ?? []
        } catch {
            try? store.close()
            return fail("read", error)
        }
        do { try store.close() } catch { return fail("close", error) }
        problems += Integrity.independentCheck(backend, path: path) ?? []
        return problems.isEmpty ? "ok rows=\(rows)" : "damaged rows=\(rows) " + problems.joined(separator: " | ")
    }
}

/// Predicates nested thousands of levels deep, built iteratively.
public enum DeepPredicate {
    /// `depth` levels of alternating `NOT` / `AND`, or (`expression`) one comparison whose left side is
    /// `depth` nested additions. Both refer to the integer column `n`.
    public static func make(depth: Int, expression: Bool) -> QueryPredicate {
        if expression {
            var e: QueryExpression = Field("n")
            for _ in 0..<depth { e = .arithmetic(.add, e, .literal(.int(1))) }
            return .compare(e, .equal, .literal(.int(0)), caseInsensitive: false)
        }
        var p: QueryPredicate = Field("n") == 1
        for i in 0..<depth { p = i % 2 == 0 ? .not(p) : .and([p, .true]) }
        return p
    }

    /// Builds, resolves (against an in-memory store) and destroys a deep predicate, reporting each step.
    public static func exercise(depth: Int, expression: Bool, report: (String) -> Void) {
        do {
            var p = make(depth: depth, expression: expression)
            report("built")
            do {
                let store = try InMemoryStore()
                try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
                _ = try store.read(Query("T", where: p))
                report("resolved ok")
            } catch let e as LocalStoreError {
                report("resolved \(e.code)")
            } catch {
                report("resolved untyped \(error)")
            }
            p = .true
            _ = p
        }
        report("destroyed")
    }
}
