import Foundation
import LocalStore
import LocalStoreReliability
import LocalStoreSQLite
import Testing

/// Hostile schemas, values, names and queries, on every backend (in-memory included): a typed
/// `LocalStoreError`, never a crash, nothing written, the store usable afterwards.
@Suite("Hostile values, names and queries")
struct HostileValuesTests {
    static let backends = ["memory"] + ReliabilityBackend.available.map(\.rawValue)

    /// A fresh store of `name` in `directory`, and a way to reopen it (nil for memory).
    static func open(_ name: String, _ directory: TempDirectory) throws -> (any LocalStore, (() throws -> any LocalStore)?) {
        guard let backend = ReliabilityBackend(rawValue: name) else { return (try InMemoryStore(), nil) }
        let path = backend.storePath(in: directory.url)
        return (try backend.open(path: path), { try backend.open(path: path) })
    }

    static func integrity(_ store: any LocalStore) throws -> [String] { try Integrity.storeCheck(store) ?? [] }

    @Test("a 10,000-column schema is invalidValue; 1000 columns (the limit) work", arguments: backends)
    func tenThousandColumns(_ name: String) throws {
        let dir = try TempDirectory("columns")
        let (store, reopen) = try Self.open(name, dir)
        let wide = TableSchema(name: "Wide", columns: [Column("id", .string)] + (0..<10_000).map { Column("c\($0)", .integer) })
        #expect(errorCode { try store.defineTable(wide) } == .invalidValue)
        #expect(try store.schema(of: "Wide") == nil, "\(name): a refused table exists")
        // Growing a table past the limit by merging definitions is refused too.
        try store.defineTable(TableSchema(name: "Grow", columns: [Column("id", .string)] + (0..<900).map { Column("a\($0)", .integer) }))
        #expect(errorCode {
            try store.defineTable(TableSchema(name: "Grow", columns: (0..<200).map { Column("b\($0)", .integer) }))
        } == .invalidValue)
        #expect(try store.schema(of: "Grow")?.columns.count == 901)
        // An item with 10,000 unknown keys.
        var item: Item = ["id": "x"]
        for i in 0..<10_000 { item["k\(i)"] = .int(Int64(i)) }
        #expect(errorCode { try store.upsert([item], into: "Grow") } == .unknownColumn)
        #expect(try store.count("Grow") == 0)
        try store.upsert([item], into: "Grow", options: .ignoringUnknownColumns)
        #expect(try store.read(table: "Grow", id: "x")?.count == 901)
        // Exactly the limit: 1000 columns, every one written and read back, also after reopening.
        let limit = TableSchema(name: "Limit", columns: [Column("id", .string)] + (0..<999).map { Column("c\($0)", .integer, indexed: $0 % 100 == 0) })
        try store.defineTable(limit)
        var full: Item = ["id": "row"]
        for i in 0..<999 { full["c\(i)"] = .int(Int64(i * 7)) }
        try store.upsert([full], into: "Limit")
        #expect(try store.read(table: "Limit", id: "row") == full)
        #expect(try store.read(Query("Limit", where: Field("c500") == 3500)).items.count == 1)
        #expect(try Self.integrity(store).isEmpty)
        try store.close()
        if let reopen {
            let again = try reopen()
            #expect(try again.read(table: "Limit", id: "row") == full)
            #expect(try again.schema(of: "Wide") == nil)
            try again.close()
        }
    }

    @Test("10 MB values (string, binary, json, operation properties, id) round-trip exactly", arguments: backends)
    func tenMegabyteValues(_ name: String) throws {
        let dir = try TempDirectory("big")
        let (store, reopen) = try Self.open(name, dir)
        try store.defineTable(TableSchema("Big", ["id": .string, "s": .string, "b": .binary, "j": .json]))
        var rng = SplitMix(seed: 10)
        let size = 10 << 20
        var textBytes = [UInt8](repeating: 0, count: size)
        for i in 0..<size { textBytes[i] = i % 1000 == 999 ? 0x0A : UInt8(0x61 + (i &* 7) % 26) }
        let text: String = String(decoding: textBytes, as: UTF8.self) + "é✓"
        let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let json = JSON.object(["payload": .string(text), "n": .int(1)])
        let bigId = String(repeating: "I", count: size)
        let row: Item = ["id": "big", "s": .string(text), "b": .binary(bytes), "j": .json(json)]
        try store.upsert([row], into: "Big")
        try store.upsert([["id": .string(bigId), "s": "small"]], into: "Big")
        let op = try store.appendOperation(table: "Big", itemId: "big", properties: bytes)
        func check(_ s: any LocalStore, _ label: String) throws {
            #expect(try s.read(table: "Big", id: "big") == row, "\(name) \(label): the 10 MB row differs")
            #expect(try s.read(table: "Big", id: .string(bigId.lowercased()))?["s"] == "small", "\(name) \(label): the 10 MB id")
            #expect(try s.operation(id: op.id)?.properties == bytes, "\(name) \(label): 10 MB operation properties")
            #expect(try Self.integrity(s).isEmpty)
        }
        try check(store, "")
        // Replace and delete work too.
        try store.upsert([["id": "big", "s": "short"]], into: "Big")
        #expect(try store.read(table: "Big", id: "big")?["b"] == .binary(bytes))
        try store.upsert([row], into: "Big")
        try store.close()
        if let reopen {
            let again = try reopen()
            try check(again, "after reopening")
            try again.delete(ids: [.string(bigId)], from: "Big")
            #expect(try again.count("Big") == 1)
            try again.close()
        }
    }

    static let injections = [
        "Robert'); DROP TABLE Students;--", "x\" OR \"1\"=\"1", "' OR 1=1 --", "a; DELETE FROM MS_TableOperations",
        "\\'; DROP TABLE Inj; --", "%' OR '%'='", "*/ DROP TABLE Inj /*", "\u{0}'; DROP TABLE Inj;", "ATTACH DATABASE '/tmp/x' AS x",
        "MS_TableOperations", "sqlite_master", "Inj\"; PRAGMA writable_schema=1; --", "$(rm -rf /)", "?1", ":name", "@x",
    ]

    @Test("identifiers and values that attempt SQL injection: invalidIdentifier / unknownColumn, values stored verbatim",
        arguments: backends)
    func sqlInjection(_ name: String) throws {
        let dir = try TempDirectory("injection")
        let (store, reopen) = try Self.open(name, dir)
        try store.defineTable(TableSchema("Inj", ["id": .string, "text": .string, "n": .integer], indexed: ["text"]))
        var legalNames: [String] = []
        for hostile in Self.injections {
            if Identifier.isValid(hostile) {
                // A legal name that is also a name inside the engine (`sqlite_master`) or a system
                // table: a table of its own, or reservedName; never the engine's object.
                let code = errorCode { try store.defineTable(TableSchema(hostile, ["id": .string, "v": .string])) }
                if code == nil {
                    legalNames.append(hostile)
                    try store.upsert([["id": "a", "v": .string("in \(hostile)")]], into: hostile)
                    #expect(try store.read(table: hostile, id: "a")?["v"] == .string("in \(hostile)"), "\(name): table \(hostile)")
                } else {
                    #expect(code == .reservedName, "\(name): table name \(hostile) gave \(code.map { "\($0)" } ?? "")")
                }
            } else {
                // As a table or column name: refused before anything reaches an engine.
                #expect(errorCode { try store.defineTable(TableSchema(hostile, ["id": .string])) } == .invalidIdentifier, "\(name): \(hostile)")
                #expect(errorCode { try store.defineTable(TableSchema(name: "Other", columns: [Column("id", .string), Column(hostile, .string)])) } == .invalidIdentifier)
                #expect(errorCode { try store.upsert([["id": "a"]], into: hostile) } != nil)
                #expect(errorCode { _ = try store.read(Query(hostile)) } != nil)
                #expect(errorCode { _ = try SystemTableNames(operations: hostile, errors: "E", config: "C").validate() } == .invalidIdentifier)
                #expect(errorCode { try store.upsert([["id": "a", .init(hostile): "v"]], into: "Inj") } == .unknownColumn)
                #expect(errorCode { _ = try store.read(Query("Inj", select: [hostile])) } == .unknownColumn)
                #expect(errorCode { _ = try store.read(Query("Inj", sort: [SortKey(hostile)])) } == .unknownColumn)
                #expect(errorCode { _ = try store.read(Query("Inj", where: Field(hostile) == "x")) } == .unknownColumn)
            }
            // As ids and values: stored and matched verbatim.
            try store.upsert([["id": .string(hostile), "text": .string(hostile), "n": 1]], into: "Inj")
            #expect(try store.read(table: "Inj", id: .string(hostile))?["text"] == .string(hostile), "\(name): \(hostile)")
            #expect(try store.read(Query("Inj", where: Field("text") == .literal(.string(hostile)))).items.map(\.stringId) == [hostile])
            _ = try store.appendOperation(table: hostile, itemId: hostile, properties: Array(hostile.utf8))
            #expect(try store.pendingOperations(table: hostile, itemId: hostile).count == 1)
            // As a delta token's table: only a valid table name; as its query id: verbatim unless it
            // holds a control character.
            let tokenTable = Identifier.isValid(hostile) ? hostile : "Inj"
            if !Identifier.isValid(hostile) {
                #expect(errorCode { try store.setDeltaToken(Date(), table: hostile, queryId: "q") } == .invalidIdentifier, "\(name): \(hostile)")
            }
            if hostile.unicodeScalars.contains(where: { $0.value < 0x20 }) {
                #expect(errorCode { try store.setDeltaToken(Date(), table: tokenTable, queryId: hostile) } == .invalidValue, "\(name): \(hostile)")
            } else {
                try store.setDeltaToken(Date(timeIntervalSince1970: 1_700_000_000), table: tokenTable, queryId: hostile)
                #expect(try store.deltaToken(table: tokenTable, queryId: hostile) == Date(timeIntervalSince1970: 1_700_000_000))
            }
        }
        // Nothing was dropped, attached or rewritten: exactly the rows written.
        let tables = (["Inj"] + legalNames).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        #expect(try store.tableSchemas().map(\.name) == tables)
        #expect(try store.count("Inj") == Set(Self.injections.map { $0.lowercased() }).count)
        #expect(try store.pendingOperationCount() == Self.injections.count)
        if let sql = store as? SQLiteStore {
            #expect(errorCode { _ = try sql.query(sql: "SELECT 1; DROP TABLE Inj") } == .invalidQuery)
            #expect(errorCode { _ = try sql.query(sql: "DROP TABLE Inj") } == .invalidQuery)
            #expect(errorCode { _ = try sql.query(sql: "ATTACH DATABASE '/tmp/evil.db' AS evil") } == .invalidQuery)
            #expect(errorCode { _ = try sql.query(sql: "PRAGMA writable_schema = 1") } == .invalidQuery)
            let bound = try sql.query(sql: "SELECT ?1 AS v", arguments: [.string(Self.injections[0])])
            #expect(bound.first?["v"] == .string(Self.injections[0]))
            #expect(try store.count("Inj") == Set(Self.injections.map { $0.lowercased() }).count)
        }
        #expect(try Self.integrity(store).isEmpty)
        try store.close()
        if let reopen {
            let again = try reopen()
            #expect(try again.tableSchemas().map(\.name) == tables)
            for legal in legalNames { #expect(try again.read(table: legal, id: "a")?["v"] == .string("in \(legal)")) }
            #expect(try again.count("Inj") == Set(Self.injections.map { $0.lowercased() }).count)
            try again.close()
        }
    }

    @Test("a predicate nested 10,000 levels deep is invalidQuery (read, count, delete), nothing deleted", arguments: backends)
    func deepPredicate(_ name: String) throws {
        let dir = try TempDirectory("deep")
        let (store, _) = try Self.open(name, dir)
        defer { try? store.close() }
        try store.defineTable(TableSchema("T", ["id": .string, "n": .integer]))
        try store.upsert((0..<10).map { ["id": .string("r\($0)"), "n": .int(Int64($0))] }, into: "T")
        // Building, resolving and destroying a 10,000-level indirect enum recurses: a big stack (see
        // the diagnostic test below for what happens on a small one).
        let codes = try onBigStack {
            var codes: [String] = []
            for expression in [false, true] {
                let p = DeepPredicate.make(depth: 10_000, expression: expression)
                codes.append("\(errorCode { _ = try store.read(Query("T", where: p)) }.map { "\($0)" } ?? "none")")
                codes.append("\(errorCode { _ = try store.count("T", where: p) }.map { "\($0)" } ?? "none")")
                codes.append("\(errorCode { try store.delete(matching: Query("T", where: p)) }.map { "\($0)" } ?? "none")")
                codes.append("\(errorCode { try store.write { tx in try tx.delete(matching: Query("T", where: p)) } }.map { "\($0)" } ?? "none")")
            }
            return codes
        }
        #expect(codes.allSatisfy { $0 == "invalidQuery" }, "\(name): \(codes)")
        #expect(try store.count("T") == 10)
        // At the limit (200) it works.
        let p200 = DeepPredicate.make(depth: 199, expression: false)
        #expect(throws: Never.self) { _ = try store.read(Query("T", where: p200)) }
    }

    /// Where a deep predicate needs stack: build (iterative, none), resolve (recursive, but stopped at
    /// level 200 by the core's depth check) and destroy (Swift's release of a 10,000-level indirect
    /// enum recurses once per level). Runs in the helper on threads of several sizes; the 8 MiB case
    /// (the size of the threads Swift Testing runs tests on here) must pass, the smaller ones are
    /// reported (docs/reliability.md).
    @Test("diagnostic: stack needed by a 10,000-level predicate (build, resolve, destroy)")
    func deepPredicateStack() throws {
        var lines: [String] = []
        for kind in ["predicate", "expression"] {
            for kib in [512, 1024, 8192] {
                let child = try ChildProcess(executable: try helperPath(), arguments: ["deep", "10000", "\(kib)", kind])
                let end = child.wait()
                let steps = child.outputLines
                let last = steps.last ?? "nothing"
                let verdict = end == .exit(0) ? "ok" : "crashed (\(end)) after '\(last)'"
                lines.append("\(kind) on \(kib) KiB: \(verdict)")
                if kib == 8192 {
                    #expect(end == .exit(0) && steps == ["built", "resolved invalidQuery", "destroyed"], "\(kind) on 8 MiB: \(end) \(steps)")
                }
            }
        }
        report("deep predicate stack (debug build unless built with -c release): " + lines.joined(separator: "; "))
    }

    /// Found by `make fuzz`: a timestamp with 20+ fraction digits overflowed an `Int` in
    /// `DeltaTokenFormat.date(from:)` and trapped — reachable from an OData `datetimeoffset'…'` literal
    /// and from any config row read by `deltaToken(table:queryId:)`.
    @Test("a damaged delta token or datetime literal: nil, a date or a typed error, never a trap", arguments: backends)
    func damagedTimestamps(_ name: String) throws {
        let dir = try TempDirectory("timestamps")
        let (store, _) = try Self.open(name, dir)
        defer { try? store.close() }
        let texts = [
            "2026-01-02T03:04:05.12345678901234567890123Z", "2026-01-02T03:04:05.\(String(repeating: "9", count: 400))Z",
            "9999-12-31T23:59:60.999Z", "0000-01-01T00:00:00Z", "2026-13-02T03:04:05Z", "2026-01-02T03:04:05.Z", "2026-01-02T03:04:05.1x2Z",
            "2026-01-02T03:04:05+01:00", "", "Z",
        ]
        for (n, text) in texts.enumerated() {
            try store.upsert(
                [["id": .string("deltaToken|T|q\(n)"), "table": "T", "key": .string("q\(n)"), "keyType": 0, "value": .string(text)]],
                into: store.configTableName)
            // A timestamp (any number of fraction digits) or a `corrupt` error naming the token.
            do {
                _ = try store.deltaToken(table: "T", queryId: "q\(n)")
            } catch let error as LocalStoreError {
                #expect(error.code == .corrupt && error.message.contains("'q\(n)'"), "\(name): \(text): \(error)")
            }
            #expect(throws: Never.self) { _ = DeltaTokenFormat.date(from: text) }
            let filter = "updatedAt gt datetimeoffset'\(text)'"
            do { _ = try OData.parseFilter(filter) } catch is LocalStoreError {}
        }
        // 23 fraction digits read as 0.123456789 s.
        let q0 = try store.deltaToken(table: "T", queryId: "q0")?.timeIntervalSince1970 ?? 0
        let expected = DeltaTokenFormat.date(from: "2026-01-02T03:04:05Z")!.timeIntervalSince1970 + 0.123456789
        #expect(abs(q0 - expected) < 1e-6, "\(q0) vs \(expected)")
    }

    @Test("an OData filter nested 10,000 levels deep: a typed error, no crash")
    func deepODataFilter() throws {
        let texts = [
            String(repeating: "(", count: 10_000) + "n eq 1" + String(repeating: ")", count: 10_000),
            String(repeating: "not ", count: 10_000) + "(n eq 1)",
            "n eq " + String(repeating: "(1 add ", count: 10_000) + "1" + String(repeating: ")", count: 10_000),
        ]
        let outcomes = try onBigStack {
            texts.map { text -> String in
                do {
                    let p = try OData.parseFilter(text)
                    return "parsed \(String(describing: p).count > 0)"
                } catch let e as LocalStoreError {
                    return "\(e.code)"
                } catch {
                    return "untyped \(error)"
                }
            }
        }
        report("hostile OData filter nested 10,000 levels: \(outcomes)")
        #expect(outcomes.allSatisfy { !$0.hasPrefix("untyped") }, "\(outcomes)")
    }
}
