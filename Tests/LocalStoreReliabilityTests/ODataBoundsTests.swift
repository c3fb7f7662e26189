import Foundation
import LocalStore
import LocalStoreReliability
import Testing

/// The OData parser is bounded in stack and time for any input (docs/semantics.md, "Pull query
/// strings"): long flat `or`/`and` chains build no deep tree, nesting and arithmetic are limited, and
/// past the limits every entry point (`OData.parseFilter`, `OData.parseQuery`, `PullRequest.parse`)
/// gives `invalidQuery`. Each case runs in the helper process on a 512 KiB thread, where the earlier
/// parser crashed with 4,000 `or` terms.
@Suite("Hostile OData text on a small stack")
struct ODataBoundsTests {
    struct Case: Sendable, CustomStringConvertible {
        let shape: String
        let size: Int
        let parses: Bool
        var description: String { "\(shape) \(size)" }
    }

    static let cases: [Case] = [
        Case(shape: "or-chain", size: 1_000_000, parses: false),
        Case(shape: "and-chain", size: 1_000_000, parses: false),
        Case(shape: "or-chain", size: 40_000, parses: true),  // 80,000 values: under the limit, no deep tree
        Case(shape: "and-chain", size: 40_000, parses: true),
        Case(shape: "nesting", size: 100_000, parses: false),
        Case(shape: "not-nesting", size: 100_000, parses: false),
        Case(shape: "arithmetic", size: 100_000, parses: false),
        Case(shape: "arithmetic", size: 150, parses: true),
        Case(shape: "arithmetic", size: 1_000, parses: true),  // the limit: a left-deep chain converted in a loop
        Case(shape: "literal", size: 4_000_000, parses: true),
        Case(shape: "in-list", size: 1_000_000, parses: false),  // past 100,000 values
        Case(shape: "in-list", size: 90_000, parses: true),  // kept flat
        Case(shape: "cast-chain", size: 200_000, parses: false),
        Case(shape: "cast-chain", size: 40_000, parses: true),
    ]

    @Test("a typed error or a result, never a crash, on a 512 KiB thread", arguments: cases)
    func boundedOnSmallStack(_ c: Case) throws {
        let started = Date()
        let child = try ChildProcess(executable: try helperPath(), arguments: ["odata", c.shape, "\(c.size)", "512"])
        let end = child.wait(timeout: 120)
        let lines = child.outputLines
        #expect(end == .exit(0), "\(c): \(end) after \(lines.last ?? "nothing"): \(child.errorOutput)")
        let outcomes = lines.filter { $0.hasPrefix("filter ") || $0.hasPrefix("query ") || $0.hasPrefix("pull ") }
        #expect(outcomes.count == 3 && lines.last == "done", "\(c): \(lines)")
        for line in outcomes {
            if c.parses {
                #expect(line.hasSuffix(" ok"), "\(c): \(line)")
            } else {
                #expect(line.contains("invalidQuery"), "\(c): \(line)")
            }
        }
        report("odata bounds \(c): \(outcomes.map { $0.prefix(90) }.joined(separator: "; ")) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }
}
