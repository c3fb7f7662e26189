import LocalStore
import LocalStoreConformance
import Testing

@testable import LocalStoreSQLite

/// The whole conformance suite on the engine driven by SQLite 3.15.2 (SQLCipher's library, loaded with
/// `dlopen`, no key): every SQL statement the engine issues must work, with the same results, on the
/// oldest SQLite a SQLCipher backend will give it. The main run on the system SQLite is in
/// `LocalStoreTests/ConformanceTests.swift`.
@Suite("Conformance on SQLite 3.15.2", .enabled(if: LegacySQLite.api != nil, Comment(rawValue: LegacySQLite.unavailableReason)))
struct LegacyConformanceTests {
    static let factory = StoreFactory(name: "sqlite-3.15.2", isPersistent: true) { directory in
        guard let api = LegacySQLite.api else { throw LocalStoreError(.libraryMissing, "libsqlcipher.so.0 is not installed") }
        return try SQLiteStore(path: directory.appendingPathComponent("store.sqlite").path, api: api)
    }

    @Test("the library is SQLite 3.15.2")
    func version() {
        #expect(LegacySQLite.versionNumber == 3_015_002)
    }

    @Test("conformance check", arguments: ConformanceSuite.completeSuite)
    func check(_ check: ConformanceCheck) throws {
        do {
            try check.run(Self.factory)
        } catch let failure as ConformanceFailure {
            Issue.record(
                Comment(rawValue: "[sqlite-3.15.2] \(failure.message)"),
                sourceLocation: SourceLocation(fileID: failure.fileID, filePath: failure.filePath, line: failure.line, column: 1))
        }
    }
}
