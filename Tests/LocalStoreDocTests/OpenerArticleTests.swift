import Foundation
import LocalStore
import LocalStoreLMDB
import LocalStoreOpener
import LocalStoreSQLCipher
import Testing

// The LocalStoreOpener landing page's snippet (Sources/LocalStoreOpener/LocalStoreOpener.docc), run on a
// temporary directory.
@Suite("LocalStoreOpener landing page")
struct OpenerArticleTests {
    // Skipped, and reported as skipped, where the process refuses SQLCipher (sanitizer runs: docs/reliability.md).
    @Test(
        "the snippet opens an LMDB store and an encrypted store from URLs",
        .enabled(if: SQLCipherLibrary.processRefusal == nil, "SQLCipher is refused in this process (sanitizer)"))
    func landingSnippet() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("opener-doc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let directory = scratch.path
        let passphrase = "correct horse battery staple"

        let store = try StoreOpener.open("lmdb:" + directory + "/store.lmdb")
        let secret = try StoreOpener.open("sqlcipher:" + directory + "/secret.db", key: try .passphrase(passphrase))

        #expect(store is LMDBStore)
        #expect(secret is SQLCipherStore)
        try store.close()
        try secret.close()
        #expect(throws: LocalStoreError.self) { try StoreOpener.open("sqlcipher:" + directory + "/secret.db") }
    }
}
