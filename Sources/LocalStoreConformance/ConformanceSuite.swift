import Foundation
import LocalStore

/// One named conformance check: a function that opens stores through a ``StoreFactory`` and throws a
/// ``ConformanceFailure`` (or the store's own error) when the backend breaks a rule of the contract.
///
/// ```swift
/// for check in ConformanceSuite.allChecks {
///     do { try check.run(factory) } catch { print("\(check): \(error)") }
/// }
/// ```
public struct ConformanceCheck: Sendable, CustomStringConvertible {
    /// The check's name (the name of the `ConformanceSuite` function that implements it).
    public let name: String
    private let body: @Sendable (StoreFactory) throws -> Void

    /// Creates a check.
    public init(name: String, _ body: @escaping @Sendable (StoreFactory) throws -> Void) {
        self.name = name
        self.body = body
    }

    /// Runs the check against the backend `factory` makes. Every store it opens lives in a new
    /// temporary directory that is removed afterwards, also on failure.
    public func run(_ factory: StoreFactory) throws { try body(factory) }

    /// The check's name.
    public var description: String { name }
}

/// The shared conformance suite: every rule of `docs/semantics.md`, checked with concrete data.
///
/// ``allChecks`` lists every check; each is also a public static function so a test target can run
/// them one by one. The predicate checks are separate, in ``predicateCases``; ``completeSuite`` is
/// both together. The library uses no test framework, so it runs anywhere:
///
/// ```swift
/// // XCTest
/// func testConformance() throws {
///     let factory = StoreFactory(name: "mine", isPersistent: true) { try MyStore(directory: $0) }
///     for check in ConformanceSuite.completeSuite {
///         XCTAssertNoThrow(try check.run(factory), "\(check)")
///     }
/// }
/// ```
///
/// A check needs no more than a few seconds on a fast backend; each one uses its own temporary
/// directories, so checks may run in parallel.
public enum ConformanceSuite {
    /// ``allChecks`` followed by every ``predicateCases`` entry as a check.
    public static var completeSuite: [ConformanceCheck] {
        allChecks + predicateCases.map { c in ConformanceCheck(name: "predicate: \(c.name)") { try c.check($0) } }
    }
}

// MARK: - Workspaces

/// A temporary directory owned by one check, and the stores opened in it.
final class Workspace {
    let factory: StoreFactory
    let directory: URL
    private var stores: [any LocalStore] = []

    init(factory: StoreFactory) throws {
        self.factory = factory
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("LocalStoreConformance-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Opens (or reopens) the store of this workspace's directory.
    func open() throws -> any LocalStore {
        let store = try factory.open(in: directory)
        stores.append(store)
        return store
    }

    /// Closes `store`; for a persistent backend opens the directory again and returns the new store,
    /// otherwise returns `nil`.
    func reopen(_ store: any LocalStore) throws -> (any LocalStore)? {
        try store.close()
        guard factory.isPersistent else { return nil }
        return try open()
    }

    /// Closes every store (closing twice is allowed) and reports the first failure.
    func closeAll() throws {
        var firstError: Error?
        for store in stores {
            do { try store.close() } catch { if firstError == nil { firstError = error } }
        }
        stores.removeAll()
        if let firstError { throw firstError }
    }

    func removeDirectory() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Runs `body` with a fresh workspace, then closes its stores and removes its directory (also on failure).
func withWorkspace(_ factory: StoreFactory, _ body: (Workspace) throws -> Void) throws {
    let workspace = try Workspace(factory: factory)
    defer { workspace.removeDirectory() }
    do {
        try body(workspace)
    } catch {
        try? workspace.closeAll()
        throw error
    }
    try workspace.closeAll()
}

/// Runs `body` with a fresh store in its own temporary directory.
func withStore(_ factory: StoreFactory, _ body: (any LocalStore) throws -> Void) throws {
    try withWorkspace(factory) { workspace in try body(try workspace.open()) }
}

// MARK: - Helpers shared by the checks

/// The ids of `items`, in order (string ids).
func ids(_ items: [Item]) throws -> [String] {
    try items.map { item in
        guard let id = item["id"]?.stringValue else { throw ConformanceFailure("item without a string 'id' key: \(abbreviated(item))") }
        return id
    }
}

/// The ids `query` returns, in order.
func readIds(_ store: any LocalStoreAccess, _ query: Query) throws -> [String] {
    try ids(store.read(query).items)
}

/// Every row of every table named, keyed by the table name as given.
func snapshot(_ store: any LocalStoreAccess, _ tables: [String]) throws -> [String: [Item]] {
    var result: [String: [Item]] = [:]
    for t in tables { result[t] = try store.read(Query(t)).items }
    return result
}

/// The names of the user tables and the three system tables.
func allTableNames(_ store: any LocalStore) throws -> [String] {
    try store.tableSchemas().map(\.name) + [store.operationTableName, store.errorTableName, store.configTableName]
}

/// Throws unless every table reads exactly as in `before`.
func expectUnchanged(
    _ store: any LocalStoreAccess, _ before: [String: [Item]], _ message: @autoclosure () -> String,
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    let after = try snapshot(store, Array(before.keys))
    for (table, rows) in before {
        let now = after[table] ?? []
        let same = now.count == rows.count && zip(now, rows).allSatisfy { identical($0, $1) }
        if !same {
            throw ConformanceFailure(
                "\(message()): table '\(table)' changed from \(abbreviated(rows)) to \(abbreviated(now))",
                fileID: fileID, filePath: filePath, line: line)
        }
    }
}

/// A string literal expression.
func lit(_ s: String) -> QueryExpression { .literal(.string(s)) }

/// A deterministic pseudo-random generator (SplitMix64), so shuffled data is the same on every run.
package struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `items` in a seeded shuffled order.
func shuffled<T>(_ items: [T], seed: UInt64) -> [T] {
    var generator = SeededGenerator(seed: seed)
    return items.shuffled(using: &generator)
}

/// A fixed date plus `seconds`.
func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: 1_600_000_000 + seconds) }

/// The common fixture: a sync table with one column of every type and every system property.
let todoSchema = TableSchema(
    name: "TodoItem",
    columns: [
        Column("id", .string), Column("title", .string), Column("priority", .integer), Column("score", .double),
        Column("complete", .boolean), Column("due", .date), Column("attachment", .binary), Column("meta", .json),
        Column("createdAt", .date), Column("updatedAt", .date), Column("version", .string), Column("deleted", .boolean),
    ])

/// The columns of ``todoSchema`` with their defined spelling.
let todoColumns = todoSchema.columns.map(\.name)

/// A full row of ``todoSchema``: `overrides` on top of nulls.
func todoRow(_ id: String, _ overrides: [String: Value] = [:]) -> Item {
    var values: [String: Value] = [:]
    for c in todoColumns { values[c] = .null }
    values["id"] = .string(id)
    for (k, v) in overrides { values[k] = v }
    return Item(values)
}
