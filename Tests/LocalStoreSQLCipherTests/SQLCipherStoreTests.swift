import Foundation
import LocalStore
import LocalStoreSQLCipher
import LocalStoreSQLite
import Testing

/// A fresh directory per test, removed afterwards.
final class TempDir {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ls-cipher-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Fast settings for tests (few KDF iterations); the defaults are checked separately.
let fast = SQLCipherStore.Options(kdfIterations: 4000)
let rawKey = try! SQLCipherKey.raw((0..<32).map { UInt8($0 * 7 & 0xFF) })
let otherRawKey = try! SQLCipherKey.raw((0..<32).map { UInt8(255 - $0) })

func fileBytes(_ path: String) -> [UInt8] {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
}

func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    let first = needle[0]
    var i = 0
    while i <= haystack.count - needle.count {
        if haystack[i] == first, Array(haystack[i..<(i + needle.count)]) == needle { return true }
        i += 1
    }
    return false
}

@Suite("SQLCipher backend", .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
struct SQLCipherStoreTests {
    static let schema = TableSchema("Secret", ["text": .string, "doc": .json], indexed: ["text"])

    /// Every file in the directory (database, -wal, -shm, anything else) must be free of the marker and
    /// the passphrase: with the store open, after a checkpoint, and after close.
    @Test func nothingReadableReachesTheDisk() throws {
        let dir = try TempDir()
        let marker = "MARKER-\(UUID().uuidString)-PLAINTEXT"
        let passphrase = "correct horse battery staple \(UUID().uuidString)"
        let path = dir.path("secret.db")
        func scan(_ when: String) throws {
            let files = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
            #expect(files.contains("secret.db"))
            for f in files {
                let bytes = fileBytes(dir.path(f))
                #expect(!contains(bytes, Array(marker.utf8)), "marker found in \(f) \(when)")
                #expect(!contains(bytes, Array(passphrase.utf8)), "passphrase found in \(f) \(when)")
                #expect(!contains(bytes, Array("Secret".utf8)), "table name found in \(f) \(when)")
            }
        }
        let store = try SQLCipherStore(path: path, key: try .passphrase(passphrase), options: fast)
        try store.defineTable(Self.schema)
        for n in 0..<200 {
            try store.write { tx in
                try tx.upsert(
                    [["id": .string("\(marker)-\(n)"), "text": .string("text \(marker) \(n)"),
                      "doc": .json(["nested": .string(marker), "n": .int(Int64(n))])]], into: "Secret")
                _ = try tx.appendOperation(table: "Secret", itemId: "\(marker)-\(n)", properties: Array(marker.utf8))
            }
        }
        #expect(try store.count("Secret", where: Field("text").contains(.literal(.string(marker)))) == 200)
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try scan("while open")
        try store.checkpoint()
        try scan("after a checkpoint")
        try store.close()
        try scan("after close")
        let reopened = try SQLCipherStore(path: path, key: try .passphrase(passphrase), options: fast)
        #expect(try reopened.read(table: "Secret", id: "\(marker)-7")?["text"] == .string("text \(marker) 7"))
        try reopened.close()
    }

    @Test func wrongKeyFailsAndLeavesTheFileUntouched() throws {
        let dir = try TempDir()
        let path = dir.path("s.db")
        let store = try SQLCipherStore(path: path, key: rawKey, options: fast)
        try store.defineTable(Self.schema)
        try store.upsert([["id": "a", "text": "x"]], into: "Secret")
        try store.close()
        let before = fileBytes(path)
        #expect {
            try SQLCipherStore(path: path, key: otherRawKey, options: fast)
        } throws: { ($0 as? LocalStoreError)?.code == .wrongKey }
        #expect {
            try SQLCipherStore(path: path, key: try .passphrase("nope"), options: fast)
        } throws: { ($0 as? LocalStoreError)?.code == .wrongKey }
        #expect(fileBytes(path) == before)
        // An encrypted file is not a database to the plain backend.
        #expect {
            try SQLiteStore(path: path)
        } throws: { ($0 as? LocalStoreError)?.code == .notADatabase }
        #expect(fileBytes(path) == before)
        #expect(try SQLCipherStore(path: path, key: rawKey, options: fast).read(table: "Secret", id: "A") != nil)
    }

    @Test func plainFileOpenedWithAKeyIsAClearError() throws {
        let dir = try TempDir()
        let path = dir.path("plain.sqlite")
        let plain = try SQLiteStore(path: path)
        try plain.defineTable(Self.schema)
        try plain.close()
        let before = fileBytes(path)
        #expect {
            try SQLCipherStore(path: path, key: rawKey, options: fast)
        } throws: { error in
            guard let e = error as? LocalStoreError else { return false }
            return e.code == .notADatabase && e.message.contains("unencrypted")
        }
        #expect(fileBytes(path) == before)
    }

    @Test func rekeyChangesTheKey() throws {
        let dir = try TempDir()
        let path = dir.path("s.db")
        let store = try SQLCipherStore(path: path, key: try .passphrase("old"), options: fast)
        try store.defineTable(Self.schema)
        try store.upsert((0..<100).map { ["id": .string("r\($0)"), "text": .string("v\($0)")] }, into: "Secret")
        try store.rekey(to: rawKey)
        // Still usable, by every connection, after the rekey.
        #expect(try store.count("Secret") == 100)
        try store.upsert([["id": "after", "text": "rekey"]], into: "Secret")
        try store.close()
        #expect {
            try SQLCipherStore(path: path, key: try .passphrase("old"), options: fast)
        } throws: { ($0 as? LocalStoreError)?.code == .wrongKey }
        let reopened = try SQLCipherStore(path: path, key: rawKey, options: fast)
        #expect(try reopened.count("Secret") == 101)
        #expect(try reopened.checkIntegrity() == [])
        try reopened.close()
    }

    @Test func plainToEncryptedAndBack() throws {
        let dir = try TempDir()
        let plainPath = dir.path("plain.sqlite")
        let plain = try SQLiteStore(path: plainPath)
        try plain.defineTable(Self.schema)
        try plain.upsert([["id": "a", "text": "hello", "doc": .json(["k": [1, 2.5, "x"]])]], into: "Secret")
        _ = try plain.appendOperation(table: "Secret", itemId: "a")
        try plain.close()

        let encPath = dir.path("enc.db")
        try SQLCipherStore.encrypt(plainDatabaseAt: plainPath, to: encPath, key: rawKey, options: fast)
        #expect(!contains(fileBytes(encPath), Array("hello".utf8)))
        let enc = try SQLCipherStore(path: encPath, key: rawKey, options: fast)
        #expect(try enc.read(table: "Secret", id: "a")?["doc"] == .json(["k": [1, 2.5, "x"]]))
        #expect(try enc.pendingOperationCount() == 1)
        try enc.close()

        let backPath = dir.path("back.sqlite")
        try SQLCipherStore.decrypt(databaseAt: encPath, key: rawKey, to: backPath, options: fast)
        let back = try SQLiteStore(path: backPath)
        #expect(try back.read(table: "Secret", id: "a")?["text"] == .string("hello"))
        #expect(try back.pendingOperationCount() == 1)
        try back.close()

        // Wrong key on decrypt: typed error, no output file.
        #expect {
            try SQLCipherStore.decrypt(databaseAt: encPath, key: otherRawKey, to: dir.path("x.sqlite"), options: fast)
        } throws: { ($0 as? LocalStoreError)?.code == .wrongKey }
        #expect(!FileManager.default.fileExists(atPath: dir.path("x.sqlite")))
    }

    @Test func plainAndEncryptedStoresInOneProcess() throws {
        let dir = try TempDir()
        let plain = try SQLiteStore(path: dir.path("plain.sqlite"))
        let secret = try SQLCipherStore(path: dir.path("secret.db"), key: rawKey, options: fast)
        for s in [plain as any LocalStore, secret] { try s.defineTable(Self.schema) }
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for n in 0..<50 {
                let store: any LocalStore = worker % 2 == 0 ? plain : secret
                try? store.upsert([["id": .string("w\(worker)-\(n)"), "text": .string("plain-or-secret")]], into: "Secret")
            }
        }
        #expect(try plain.count("Secret") == 100)
        #expect(try secret.count("Secret") == 100)
        try plain.close()
        try secret.close()
        // The plain file is readable SQLite text; the encrypted one is not.
        #expect(contains(fileBytes(dir.path("plain.sqlite")) + fileBytes(dir.path("plain.sqlite") + "-wal"), Array("plain-or-secret".utf8)))
        #expect(!contains(fileBytes(dir.path("secret.db")) + fileBytes(dir.path("secret.db") + "-wal"), Array("plain-or-secret".utf8)))
    }

    @Test func keysNeverAppearInDescriptionsOrErrors() throws {
        let key = try SQLCipherKey.passphrase("hunter2-very-secret")
        #expect("\(key)" == "SQLCipherKey(<redacted>)")
        #expect(String(reflecting: key) == "SQLCipherKey(<redacted>)")
        let dir = try TempDir()
        let path = dir.path("s.db")
        try SQLCipherStore(path: path, key: rawKey, options: fast).close()
        do {
            _ = try SQLCipherStore(path: path, key: key, options: fast)
            Issue.record("a wrong passphrase opened the store")
        } catch {
            #expect(!"\(error)".contains("hunter2"))
        }
        #expect(throws: LocalStoreError.self) { try SQLCipherKey.raw([1, 2, 3]) }
        #expect(throws: LocalStoreError.self) { try SQLCipherKey.passphrase("") }
    }

    @Test func defaultsAreStrongAndSQLCipher3IsSelectable() throws {
        let d = SQLCipherStore.Options()
        #expect(d.cipherPageSize == 4096)
        #expect(d.kdfIterations >= 256_000)
        #expect(SQLCipherStore.Options.sqlcipher3Compatible.cipherPageSize == 1024)
        #expect(SQLCipherStore.Options.sqlcipher3Compatible.kdfIterations == 64_000)
        let dir = try TempDir()
        let path = dir.path("v3.db")
        let v3 = try SQLCipherStore(path: path, key: rawKey, options: .sqlcipher3Compatible)
        try v3.defineTable(Self.schema)
        try v3.close()
        // A different page size cannot read it: the settings are part of the file.
        #expect {
            try SQLCipherStore(path: path, key: rawKey, options: SQLCipherStore.Options(cipherPageSize: 4096))
        } throws: { ($0 as? LocalStoreError)?.code == .wrongKey }
        #expect(SQLCipherStore.cipherVersion?.hasPrefix("3.") == true)
    }

    @Test func closedStoreRefusesCalls() throws {
        let dir = try TempDir()
        let store = try SQLCipherStore(path: dir.path("s.db"), key: rawKey, options: fast)
        try store.close()
        try store.close()
        #expect { try store.read(Query("MS_TableOperations")) } throws: { ($0 as? LocalStoreError)?.code == .closed }
        #expect { try store.rekey(to: otherRawKey) } throws: { ($0 as? LocalStoreError)?.code == .closed }
    }
}
