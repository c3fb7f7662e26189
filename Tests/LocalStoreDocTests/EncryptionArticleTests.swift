import Foundation
import LocalStore
import LocalStoreSQLCipher
import LocalStoreSQLite
import Testing

// The snippets of "Encryption and key handling"
// (Sources/LocalStoreSQLCipher/LocalStoreSQLCipher.docc/EncryptionAndKeyHandling.md), verbatim
// (ArticleSnippetTests checks that), on temporary files.

@Suite("Article: Encryption and key handling", .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
struct EncryptionArticleTests {
    @Test("open with a raw key, a wrong key, rekey, convert")
    func encryption() throws {
        let (directory, remove) = try DocBackend.temporaryDirectory()
        defer { remove() }

        let key = try SQLCipherKey.raw(keyBytes)   // exactly 32 bytes: no derivation, a fast open
        let store = try SQLCipherStore(path: directory.appendingPathComponent("secret.db").path, key: key)
        try store.defineTable(todoSchema)
        try store.upsert([["id": "1", "text": "a secret"]], into: "TodoItem")
        #expect(try store.checkIntegrity().isEmpty)
        let path = store.path

        do {
            _ = try SQLCipherStore(path: path, key: try SQLCipherKey.passphrase("not the passphrase"))
        } catch let error as LocalStoreError where error.code == .wrongKey {
            print("wrong key; the file is untouched")
        }
        let error = #expect(throws: LocalStoreError.self) { try SQLCipherStore(path: path, key: .raw(Array(repeating: 1, count: 32))) }
        #expect(error?.code == .wrongKey)
        #expect(try store.read(table: "TodoItem", id: "1")?["text"] == "a secret")

        let newKey = try SQLCipherKey.raw(Array(keyBytes.reversed()))
        try store.rekey(to: newKey)   // re-encrypts every page; afterwards only newKey opens the file
        try store.close()
        #expect(throws: LocalStoreError.self) { try SQLCipherStore(path: path, key: key) }
        let reopened = try SQLCipherStore(path: path, key: newKey)
        #expect(try reopened.read(table: "TodoItem", id: "1")?["text"] == "a secret")
        try reopened.close()

        // A plain store converted to an encrypted one and back; the sources stay as they were.
        let plainPath = directory.appendingPathComponent("plain.sqlite").path
        let encryptedPath = directory.appendingPathComponent("converted.db").path
        let plainAgainPath = directory.appendingPathComponent("plain-again.sqlite").path
        let plain = try SQLiteStore(path: plainPath)
        try plain.defineTable(todoSchema)
        try plain.upsert([["id": "p", "text": "was plain"]], into: "TodoItem")
        try plain.close()

        try SQLCipherStore.encrypt(plainDatabaseAt: plainPath, to: encryptedPath, key: key)
        try SQLCipherStore.decrypt(databaseAt: encryptedPath, key: key, to: plainAgainPath)

        #expect(throws: LocalStoreError.self) { try SQLiteStore(path: encryptedPath) }   // notADatabase
        let encrypted = try SQLCipherStore(path: encryptedPath, key: key)
        #expect(try encrypted.read(table: "TodoItem", id: "p")?["text"] == "was plain")
        try encrypted.close()
        let plainAgain = try SQLiteStore(path: plainAgainPath)
        #expect(try plainAgain.read(table: "TodoItem", id: "p")?["text"] == "was plain")
        try plainAgain.close()
    }
}
