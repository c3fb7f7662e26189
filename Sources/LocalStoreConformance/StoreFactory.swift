import Foundation
import LocalStore

/// How the conformance suite makes stores of one backend.
///
/// ```swift
/// let factory = StoreFactory(name: "sqlite", isPersistent: true) { directory in
///     try SQLiteStore(path: directory.appendingPathComponent("store.sqlite").path)
/// }
/// for check in ConformanceSuite.allChecks { try check.run(factory) }
/// ```
public struct StoreFactory: Sendable, CustomStringConvertible {
    /// The backend's name, shown in test output.
    public let name: String
    /// Whether a store reopened at the same directory sees what an earlier one wrote.
    public let isPersistent: Bool
    private let openStore: @Sendable (URL) throws -> any LocalStore

    /// Creates a factory. `open` creates a store in `directory` (an empty directory the suite owns) or,
    /// when called again with the same directory, reopens the store it created there.
    public init(name: String, isPersistent: Bool, open: @escaping @Sendable (_ directory: URL) throws -> any LocalStore) {
        self.name = name
        self.isPersistent = isPersistent
        self.openStore = open
    }

    /// Opens (or reopens) the store kept in `directory`.
    public func open(in directory: URL) throws -> any LocalStore { try openStore(directory) }

    /// The backend's name.
    public var description: String { name }
}
