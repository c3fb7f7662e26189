import Foundation
import LocalStore
import LocalStoreReliability
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// 8 KiB of zeros in the middle of `data.mdb` (issue 15): liblmdb asserts (`IS_LEAF(mp)` in
/// `mdb_cursor_next`, SIGABRT) when a scan steps onto such a page. Lookups by id, which search the tree
/// from its root, get `MDB_CORRUPTED` instead and surface `corrupt` in the calling process; the integrity
/// check walks the pages in a child process, so its caller survives and gets `corrupt`. Every step runs
/// in the helper process, so a crash shows as a failed expectation.
@Suite("LMDB: zeroed pages", .serialized)
struct LMDBDamagedPageTests {
    @Test("a scan over zeroed pages aborts liblmdb; lookups and checkIntegrity surface corrupt and the caller survives")
    func zeroedPages() throws {
        let helper = try helperPath()
        let source = try TempDirectory("zeroed-source", inSharedMemory: true)
        let sourcePath = ReliabilityBackend.lmdb.storePath(in: source.url)
        let count = 300
        let writer = try ChildProcess(executable: helper, arguments: ["crash", "lmdb", sourcePath, "\(count)"])
        #expect(writer.wait() == .exit(0), "the writer failed: \(writer.errorOutput)")
        let original = try Data(contentsOf: URL(fileURLWithPath: sourcePath + "/data.mdb"))
        let pages = original.count / 4096
        #expect(pages > 20)

        // The middle of the file first, then pages around it, until a scan aborts.
        var aborted = 0
        var tried = 0
        var lookupsCorrupt = 0
        for delta in [0, 1, -1, 2, -2, 3, -3, 5, -5, 8, -8, 13, -13, 21, -21] where aborted < 2 || lookupsCorrupt == 0 {
            let page = pages / 2 + delta
            guard page > 2, page + 2 <= pages else { continue }
            tried += 1
            let damaged = try TempDirectory("zeroed", inSharedMemory: true)
            let path = ReliabilityBackend.lmdb.storePath(in: damaged.url)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            var bytes = original
            bytes.replaceSubrange((page * 4096)..<((page + 2) * 4096), with: Data(count: 8192))
            try bytes.write(to: URL(fileURLWithPath: path + "/data.mdb"))
            let context = "8 KiB of zeros at page \(page) of \(pages)"

            // A full read (scans) in one process: records how liblmdb reacts.
            let scan = try ChildProcess(executable: helper, arguments: ["probe", "lmdb", path])
            let scanEnd = scan.wait()
            guard scanEnd == .signal(SIGABRT) || scanEnd == .signal(SIGSEGV) else {
                // Not on a page a scan trips over: then the store must report the damage as an error.
                #expect(scanEnd == .exit(0), "\(context): the probe ended with \(scanEnd)")
                continue
            }
            aborted += 1

            // Lookups by id: each is `corrupt` or found, never a crash, never another error.
            let lookups = try ChildProcess(executable: helper, arguments: ["lookups", "lmdb", path, "\(count)"])
            let lookupsEnd = lookups.wait()
            let line = lookups.outputLines.last ?? ""
            #expect(lookupsEnd == .exit(0), "\(context): lookups by id crashed: \(lookupsEnd) \(lookups.errorOutput.suffix(300))")
            // (The zeroed pages may belong to another table than the one looked up: then all are found.)
            #expect(line.hasPrefix("error open corrupt") || (line.hasPrefix("lookups ") && line.contains(" other=0 ")), "\(context): \(line)")
            if line.hasPrefix("error open corrupt") || (line.hasPrefix("lookups ") && !line.contains(" corrupt=0 ")) { lookupsCorrupt += 1 }

            // The integrity check: the caller survives and gets `corrupt`.
            let check = try ChildProcess(executable: helper, arguments: ["integrity", "lmdb", path])
            let checkEnd = check.wait()
            let result = check.outputLines.last ?? ""
            #expect(checkEnd == .exit(0), "\(context): checkIntegrity crashed its caller: \(checkEnd) \(check.errorOutput.suffix(300))")
            #expect(
                result.hasPrefix("error check corrupt") || result.hasPrefix("error open corrupt"),
                "\(context): checkIntegrity gave \(result)")
            report("lmdb zeroed pages at \(page)/\(pages): scan \(scanEnd); lookups: \(line.prefix(160)); checkIntegrity: \(result.prefix(300))")
        }
        #expect(aborted > 0, "no placement of the zeros among \(tried) made a scan abort: the abort path was not exercised")
        #expect(lookupsCorrupt > 0, "no placement of the zeros among \(tried) was noticed by a lookup by id")
    }
}
