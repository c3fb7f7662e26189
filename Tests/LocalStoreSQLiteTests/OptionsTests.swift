import Foundation
import LocalStore
import LocalStoreSQLEngine
import Testing

@testable import LocalStoreSQLite

@Suite("SQLite options")
struct SQLiteOptionsTests {
    /// The integer a one-row PRAGMA returns on the store's writer connection.
    static func writerPragma(_ store: SQLiteStore, _ pragma: String) throws -> Int64 {
        try store.engine.withExclusiveWriter { db, api in
            var statement: OpaquePointer?
            guard api.prepare_v2(db, "PRAGMA \(pragma)", -1, &statement, nil) == 0, let statement else {
                throw LocalStoreError(.internal, "cannot prepare PRAGMA \(pragma)")
            }
            defer { _ = api.finalize(statement) }
            guard api.step(statement) == 100 else { throw LocalStoreError(.internal, "PRAGMA \(pragma) returned no row") }
            return api.column_int64(statement, 0)
        }
    }

    @Test(
        "durability and busyTimeout reach the writer connection",
        arguments: Library.available, [(StoreDurability.full, Int64(2)), (.normal, 1), (.off, 0)])
    func durability(_ library: Library, _ mapping: (StoreDurability, Int64)) throws {
        let dir = try TemporaryDirectory()
        let options = SQLiteStore.Options(durability: mapping.0, busyTimeout: .milliseconds(250))
        let store = try library.open(dir.path("store.sqlite"), options: options)
        defer { try? store.close() }
        #expect(try Self.writerPragma(store, "synchronous") == mapping.1)
        #expect(try Self.writerPragma(store, "busy_timeout") == 250)
        try store.defineTable(TableSchema("T", ["n": .integer]))
        try store.upsert([["id": "a", "n": 1]], into: "T")
        #expect(try store.count("T") == 1)
    }

    @Test("a busy timeout is whole milliseconds, a negative one is 0, a huge one is clamped")
    func busyTimeoutConversion() throws {
        #expect(Duration.milliseconds(1500).clampedMilliseconds == 1500)
        #expect(Duration.microseconds(2999).clampedMilliseconds == 2)
        #expect(Duration.seconds(-3).clampedMilliseconds == 0)
        #expect(Duration.zero.clampedMilliseconds == 0)
        #expect(Duration.seconds(Int64.max).clampedMilliseconds == Int32.max)
        let dir = try TemporaryDirectory()
        let store = try SQLiteStore(path: dir.path("store.sqlite"), options: .init(busyTimeout: .seconds(-1)))
        defer { try? store.close() }
        #expect(try Self.writerPragma(store, "busy_timeout") == 0)
    }

    @available(*, deprecated, message: "exercises the 0.1.0 spellings on purpose")
    @Test("the 0.1.0 option spellings still compile and map onto the new options")
    func deprecatedSpellings() {
        var options = SQLiteStore.Options(synchronous: .full, busyTimeoutMilliseconds: 100, maximumReaderCount: 1)
        #expect(options == SQLiteStore.Options(durability: .full, busyTimeout: .milliseconds(100), maximumReaders: 1))
        options.synchronous = SQLiteStore.Options.Synchronous.normal
        options.busyTimeoutMilliseconds = 7
        options.maximumReaderCount = 3
        #expect(options.durability == .normal && options.busyTimeout == .milliseconds(7) && options.maximumReaders == 3)
        #expect(options.synchronous == .normal && options.busyTimeoutMilliseconds == 7 && options.maximumReaderCount == 3)
    }
}
