import Foundation
import Testing

// Every ```swift block of every page of the DocC catalogs (Sources/*/*.docc/**/*.md) must appear verbatim
// (up to a constant indentation) in the snippet tests of this target, which compile and run it. An article
// edited without its test therefore fails here, and a test edited without its article too.

/// The package's root directory (this file is Tests/LocalStoreDocTests/ArticleSnippetTests.swift).
private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// One fenced Swift block of a catalog page.
struct SnippetBlock: CustomStringConvertible {
    var page: String
    var line: Int
    var lines: [String]
    var description: String { "\(page):\(line)" }
}

/// The ```swift blocks of a Markdown text.
func swiftBlocks(in text: String, page: String) -> [SnippetBlock] {
    var blocks: [SnippetBlock] = []
    var current: SnippetBlock?
    for (n, line) in text.components(separatedBy: "\n").enumerated() {
        if var block = current {
            if line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append(block)
                current = nil
            } else {
                block.lines.append(line)
                current = block
            }
        } else if line.trimmingCharacters(in: .whitespaces) == "```swift" {
            current = SnippetBlock(page: page, line: n + 1, lines: [])
        }
    }
    return blocks
}

/// Whether `block` occurs in `source` as consecutive lines, each with the same leading indentation.
func contains(_ source: [String], block: [String]) -> Bool {
    guard let first = block.first, !first.isEmpty else { return false }
    for start in source.indices where source[start].hasSuffix(first) {
        let indent = source[start].dropLast(first.count)
        guard indent.allSatisfy({ $0 == " " }), start + block.count <= source.count else { continue }
        let matches = block.indices.allSatisfy { j in
            block[j].isEmpty
                ? source[start + j].trimmingCharacters(in: .whitespaces).isEmpty
                : source[start + j] == indent + block[j]
        }
        if matches { return true }
    }
    return false
}

/// Every catalog page under Sources, by path relative to the package root.
func catalogPages() throws -> [(path: String, text: String)] {
    let sources = packageRoot.appendingPathComponent("Sources")
    var pages: [(String, String)] = []
    for target in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
        let targetURL = sources.appendingPathComponent(target)
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: targetURL.path) else { continue }
        for catalog in entries.sorted() where catalog.hasSuffix(".docc") {
            let catalogURL = targetURL.appendingPathComponent(catalog)
            guard let walker = FileManager.default.enumerator(atPath: catalogURL.path) else { continue }
            for case let file as String in walker where file.hasSuffix(".md") {
                let text = try String(contentsOf: catalogURL.appendingPathComponent(file), encoding: .utf8)
                pages.append(("Sources/\(target)/\(catalog)/\(file)", text))
            }
        }
    }
    return pages.sorted { $0.0 < $1.0 }
}

/// The lines of every snippet test file of this target.
func snippetSources() throws -> [String: [String]] {
    let directory = packageRoot.appendingPathComponent("Tests/LocalStoreDocTests")
    var sources: [String: [String]] = [:]
    for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasSuffix(".swift") {
        sources[file] = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            .components(separatedBy: "\n")
    }
    return sources
}

@Suite("Article snippets are compiled and run")
struct ArticleSnippetTests {
    @Test("every swift block of every catalog page is in a snippet test, verbatim")
    func everyBlockIsTested() throws {
        let pages = try catalogPages()
        let sources = try snippetSources()
        var blockCount = 0
        for page in pages {
            for block in swiftBlocks(in: page.text, page: page.path) {
                blockCount += 1
                let found = sources.values.contains { contains($0, block: block.lines) }
                #expect(found, "\(block): this ```swift block is in no file of Tests/LocalStoreDocTests; update the snippet test with the article")
            }
        }
        // The guides named in issue 17 exist and each has code that is tested.
        let guides = [
            "Sources/LocalStore/LocalStore.docc/GettingStarted.md",
            "Sources/LocalStore/LocalStore.docc/ChoosingABackend.md",
            "Sources/LocalStore/LocalStore.docc/TheOperationQueue.md",
            "Sources/LocalStoreSync/LocalStoreSync.docc/WritingASyncClient.md",
            "Sources/LocalStore/LocalStore.docc/WritingYourOwnBackend.md",
            "Sources/LocalStore/LocalStore.docc/ReliabilityGuarantees.md",
            "Sources/LocalStoreSQLCipher/LocalStoreSQLCipher.docc/EncryptionAndKeyHandling.md",
        ]
        for guide in guides {
            let page = pages.first { $0.path == guide }
            #expect(page != nil, "\(guide) is missing")
            #expect(page.map { swiftBlocks(in: $0.text, page: guide).isEmpty } == false, "\(guide) has no swift block")
        }
        #expect(blockCount >= 20)
    }

    @Test("the matcher finds a block only verbatim")
    func matcherIsStrict() {
        let source = ["func f() {", "    let a = 1", "", "    print(a)", "}"]
        #expect(contains(source, block: ["let a = 1", "", "print(a)"]))
        #expect(!contains(source, block: ["let a = 2", "", "print(a)"]))
        #expect(!contains(source, block: ["let a = 1", "print(a)"]))
        #expect(!contains(source, block: ["let a = 1", "", "  print(a)"]))
        let blocks = swiftBlocks(in: "text\n```swift\nlet x = 1\n```\n```sh\nls\n```\n", page: "p.md")
        #expect(blocks.map(\.lines) == [["let x = 1"]])
    }
}
