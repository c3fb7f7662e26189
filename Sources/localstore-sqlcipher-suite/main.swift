// The SQLCipher backend's checks in a process that does not load libsqlite3.
//
// Sanitizer runtimes abort on `dlopen(…, RTLD_DEEPBIND)`, so a sanitized process loads SQLCipher without
// it, which is safe only when no plain SQLite is loaded (SQLCipherLibrary refuses otherwise). The test
// bundle links libsqlite3, so under `make sanitize` its SQLCipher cases are skipped and this executable
// (built with the same sanitizer, linking only the core, the conformance suite and the SQLCipher backend)
// runs them instead: the whole conformance suite on SQLCipher plus the encryption checks below.
// `LocalStoreSQLCipherTests` runs it on every `make test` too, with LOCALSTORE_SQLCIPHER_NO_DEEPBIND set.
//
// Usage: localstore-sqlcipher-suite [--quick | substring of check names]
// Prints one line per failure and `SQLCIPHER-SUITE mode=<…> passed=<n> failed=<n>`; exits 1 on any failure.
import Foundation
import LocalStore
import LocalStoreConformance
import LocalStoreSQLCipher

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

let key: SQLCipherKey
let otherKey: SQLCipherKey
do {
    key = try SQLCipherKey.raw((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
    otherKey = try SQLCipherKey.raw((0..<32).map { UInt8(truncatingIfNeeded: 255 &- $0) })
} catch {
    print("cannot make the test keys: \(error)")
    exit(2)
}

let factory = StoreFactory(name: "sqlcipher", isPersistent: true) { dir in
    try SQLCipherStore(path: dir.appendingPathComponent("store.db").path, key: key)
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ls-cipher-suite-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func contents(of dir: URL) throws -> [String: Data] {
    var out: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
        out[name] = FileManager.default.contents(atPath: dir.appendingPathComponent(name).path) ?? Data()
    }
    return out
}

/// No file of the store holds the marker or SQLite's plaintext header, with the store open and closed:
/// the proof that SQLCipher's internal calls did not bind to a plain SQLite.
func encryptedOnDisk() throws {
    let dir = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let marker = Data("PLAINTEXT-MARKER-\(UUID().uuidString)".utf8)
    let path = dir.appendingPathComponent("secret.db").path
    func scan(_ when: String) throws {
        let files = try contents(of: dir)
        guard files["secret.db"] != nil else { throw Failure("no secret.db \(when)") }
        for (name, bytes) in files {
            if bytes.range(of: marker) != nil { throw Failure("the marker is readable in \(name) \(when)") }
            if bytes.starts(with: Data("SQLite format 3".utf8)) { throw Failure("\(name) has a plaintext SQLite header \(when)") }
        }
    }
    let store = try SQLCipherStore(path: path, key: key)
    try store.defineTable(TableSchema("Secret", ["text": .string]))
    try store.upsert([["id": "a", "text": .string(String(decoding: marker, as: UTF8.self))]], into: "Secret")
    try scan("with the store open")
    try store.checkpoint()
    try store.close()
    try scan("after close")
}

/// A wrong key is `wrongKey` and leaves every file as it was; rekey, decrypt and encrypt round-trip.
func keysAndExport() throws {
    let dir = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let path = dir.appendingPathComponent("s.db").path
    let store = try SQLCipherStore(path: path, key: key)
    try store.defineTable(TableSchema("T", ["n": .integer]))
    try store.upsert([["id": "x", "n": 7]], into: "T")
    try store.close()
    let before = try contents(of: dir)
    do {
        _ = try SQLCipherStore(path: path, key: otherKey)
        throw Failure("the wrong key opened the store")
    } catch let e as LocalStoreError where e.code == .wrongKey {}
    guard try contents(of: dir) == before else { throw Failure("a failed open with the wrong key changed the files") }
    let rekeyed = try SQLCipherStore(path: path, key: key)
    try rekeyed.rekey(to: otherKey)
    try rekeyed.close()
    let plain = dir.appendingPathComponent("plain.db").path
    try SQLCipherStore.decrypt(databaseAt: path, key: otherKey, to: plain)
    guard FileManager.default.contents(atPath: plain)?.starts(with: Data("SQLite format 3".utf8)) == true else {
        throw Failure("decrypt did not write a plain SQLite file")
    }
    let again = dir.appendingPathComponent("again.db").path
    try SQLCipherStore.encrypt(plainDatabaseAt: plain, to: again, key: key)
    let reopened = try SQLCipherStore(path: again, key: key)
    defer { try? reopened.close() }
    guard try reopened.read(table: "T", id: "x")?["n"] == 7 else { throw Failure("the row did not survive rekey, decrypt and encrypt") }
}

/// `--quick`: the encryption checks and the conformance checks with threads or transactions (what the
/// normal test run adds to its in-process SQLCipher run); otherwise checks whose name contains the
/// argument; without an argument every check.
let argument = CommandLine.arguments.dropFirst().first
let quick = ["encryptedOnDisk", "keysAndExport", "concurrent", "write", "reopen"]
func selected(_ name: String) -> Bool {
    guard let argument else { return true }
    return argument == "--quick" ? quick.contains { name.contains($0) } : name.contains(argument)
}
let mode = SQLCipherLibrary.deepBindRefusal() == nil ? "deepbind" : "local"
if let plain = SQLCipherLibrary.globalSQLite() {
    print("a plain SQLite is loaded in this process (\(plain)); this runner must not link libsqlite3")
    exit(2)
}
let checks =
    ConformanceSuite.completeSuite.map { c in (c.name, { try c.run(factory) }) }
    + [("encryptedOnDisk", encryptedOnDisk), ("keysAndExport", keysAndExport)]
var passed = 0
var failed = 0
for (name, body) in checks where selected(name) {
    do {
        try body()
        passed += 1
    } catch {
        failed += 1
        print("FAILED \(name): \(error)")
    }
}
print("SQLCIPHER-SUITE mode=\(mode) passed=\(passed) failed=\(failed)")
exit(failed == 0 && passed > 0 ? 0 : 1)
