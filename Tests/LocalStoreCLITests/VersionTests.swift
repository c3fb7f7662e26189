import LocalStore
import Testing

@Suite("localstore --version")
struct VersionTests {
    @Test func versionFlagPrintsThePackageVersion() throws {
        let r = try CLI.run(["--version"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == LocalStoreVersion.string)
        let parts = LocalStoreVersion.string.split(separator: ".")
        #expect(parts.count == 3 && parts.allSatisfy { Int($0) != nil }, "not MAJOR.MINOR.PATCH: \(LocalStoreVersion.string)")
    }
}
