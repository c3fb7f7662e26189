import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreSQLCipher
import LocalStoreSQLite
import Testing

@Suite("Errors: localized descriptions and engine result codes")
struct ErrorReportingTests {
    @Test("localizedDescription is the error's description, not Foundation's generic text")
    func localizedDescription() {
        let error: any Error = LocalStoreError.unknownColumn("colour", table: "Todo")
        #expect(error.localizedDescription == "unknownColumn: table 'Todo' has no column 'colour'")
        #expect(LocalStoreError.unknownTable("Todo").engineResultCode == nil)
    }

    /// A file that is not a database: each engine's own code travels with the typed error.
    @Test("the engine's result code is a property of the error", arguments: ["sqlite", "sqlcipher", "lmdb"].filter { $0 != "sqlcipher" || SQLCipherLibrary.processRefusal == nil })
    func engineResultCode(_ backend: String) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ls-errcode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let garbage = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
        let path: String
        switch backend {
        case "lmdb":
            path = dir.appendingPathComponent("store").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try garbage.write(to: URL(fileURLWithPath: path).appendingPathComponent("data.mdb"))
        default:
            path = dir.appendingPathComponent("store.db").path
            try garbage.write(to: URL(fileURLWithPath: path))
        }
        do {
            let store: any LocalStore
            switch backend {
            case "sqlite": store = try SQLiteStore(path: path)
            case "sqlcipher": store = try SQLCipherStore(path: path, key: try .raw([UInt8](repeating: 7, count: 32)))
            default: store = try LMDBStore(path: path)
            }
            try store.close()
            Issue.record("a garbage file opened as a \(backend) store")
        } catch let error as LocalStoreError {
            #expect(error.code == .notADatabase || error.code == .corrupt || error.code == .wrongKey, "\(error)")
            if backend == "sqlite" {
                // SQLITE_NOTADB (26), in the error and in its message.
                #expect(error.engineResultCode.map { $0 & 0xFF } == 26, "\(error)")
            }
            if backend == "lmdb", let rc = error.engineResultCode {
                #expect(error.message.contains("(LMDB \(rc))"), "\(error)")
            }
        }
    }

    /// A check that reports what it is given: verifyIntegrity turns a non-empty list into `corrupt`.
    struct Reporting: IntegrityChecking {
        var problems: [String]
        func checkIntegrity() throws -> [String] { problems }
    }

    @Test("verifyIntegrity: problems are `corrupt` naming them, a sound store passes")
    func verifyIntegrity() throws {
        try Reporting(problems: []).verifyIntegrity()
        let one = #expect(throws: LocalStoreError.self) { try Reporting(problems: ["page 7: bad checksum"]).verifyIntegrity() }
        #expect(one?.code == .corrupt)
        #expect(one?.message == "the integrity check found 1 problem: page 7: bad checksum")
        let many = #expect(throws: LocalStoreError.self) {
            try Reporting(problems: (1...8).map { "problem \($0)" }).verifyIntegrity()
        }
        #expect(many?.code == .corrupt)
        #expect(many?.message == "the integrity check found 8 problems: problem 1; problem 2; problem 3; problem 4; problem 5; and 3 more")
        // A sound store passes.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ls-verify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sqlite = try SQLiteStore(path: dir.appendingPathComponent("s.sqlite").path)
        defer { try? sqlite.close() }
        try sqlite.defineTable(TableSchema("T", ["id": .string]))
        try sqlite.upsert([["id": "a"]], into: "T")
        try sqlite.verifyIntegrity()
    }
}
