import ArgumentParser
import Foundation
import LocalStore
import LocalStoreOpener
import LocalStoreSQLCipher

struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's tables, pending operations, errors and config entries.")

    @Argument(help: "The store: memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH.")
    var store: String

    @OptionGroup var key: KeyOptions

    func run() throws {
        try reportingFailures {
            let s = try StoreOpener.open(try StoreURL(parsing: store), key: key, mustExist: true)
            defer { try? s.close() }
            print(try Self.report(s), terminator: "")
        }
    }

    static func report(_ s: any LocalStore) throws -> String {
        var out = ""
        let schemas = try s.tableSchemas()
        out += "tables: \(schemas.count)\n"
        for schema in schemas {
            out += "  \(schema.name)  \(try s.count(schema.name)) rows\n"
            for c in schema.columns {
                out += "    \(c.name)  \(c.type)\(c.indexed ? "  indexed" : "")\n"
            }
            for index in schema.indexes { out += "    index \(index)\n" }
        }
        let ops = try s.pendingOperations()
        out += "pending operations: \(ops.count)\n"
        // Operations by kind (the typed queue's properties JSON); rows it cannot read show as "damaged".
        func kind(_ op: TableOperation) -> String {
            guard let typed = try? QueuedOperation(op) else { return "damaged" }
            return typed.kind.description + (typed.isInFlight ? " (in flight)" : "")
        }
        var perTable: [String: [String: Int]] = [:]
        for op in ops { perTable[op.table, default: [:]][(try? QueuedOperation(op))?.kind.description ?? "damaged", default: 0] += 1 }
        for (table, kinds) in perTable.sorted(by: { $0.key < $1.key }) {
            let order = OperationKind.allCases.map(\.description) + ["damaged"]
            let parts = order.compactMap { k in kinds[k].map { "\(k) \($0)" } }
            out += "  \(table): \(kinds.values.reduce(0, +)) (\(parts.joined(separator: ", ")))\n"
        }
        if let first = ops.first, let last = ops.last {
            out += "  oldest: #\(first.id) \(kind(first)) \(first.table)/\(first.itemId)\n"
            out += "  newest: #\(last.id) \(kind(last)) \(last.table)/\(last.itemId)\n"
        }
        out += "  highest id given out: \((try? s.operationIdHighWaterMark()).map(String.init) ?? "damaged")\n"
        let errors = try s.operationErrors()
        out += "operation errors: \(errors.count)\n"
        for e in errors {
            out += "  \(e.id): operation #\(e.operationId) \(String(decoding: e.properties.prefix(120), as: UTF8.self))\n"
        }
        let config = try s.configEntries()
        out += "config entries: \(config.count)\n"
        for c in config {
            if c.keyType == TableConfigEntry.localStoreKeyType, c.id == TableConfigEntry.operationIdHighWaterId {
                out += "  operation id high-water mark: \(c.value)\n"
            } else if c.keyType == TableConfigEntry.deltaTokenKeyType, let d = DeltaTokenFormat.date(from: c.value) {
                out += "  delta token \(c.table) / \(c.key): \(DeltaTokenFormat.string(from: d))\n"
            } else {
                out += "  \(c.table) / \(c.key) (type \(c.keyType)): \(c.value)\n"
            }
        }
        return out
    }
}

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "Run an OData query against one table and print the rows.")

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case table, jsonl
    }

    @Argument(help: "The store URL (memory:, sqlite:PATH, sqlcipher:PATH, lmdb:PATH).") var store: String
    @Argument(help: "The table.") var table: String
    @Option(help: "An OData $filter expression, e.g. \"complete eq false and priority ge 2\".") var filter: String?
    @Option(help: "An OData $orderby, e.g. \"priority desc,text\".") var orderby: String?
    @Option(help: "Rows to return at most.") var top: Int?
    @Option(help: "Rows to skip.") var skip: Int?
    @Option(help: "Comma-separated columns to return.") var select: String?
    @Option(help: "table or jsonl.") var format: Format = .table
    @OptionGroup var key: KeyOptions

    func run() throws {
        try reportingFailures {
            var q = Query(table)
            if let filter { q.predicate = try OData.parseFilter(filter) }
            if let orderby { q.sort = try OData.parseOrderBy(orderby) }
            if let top {
                guard top >= 0 else { throw CommandError(.usage, "--top must not be negative") }
                q.top = top
            }
            if let skip {
                guard skip >= 0 else { throw CommandError(.usage, "--skip must not be negative") }
                q.skip = skip
            }
            if let select { q.select = select.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            let s = try StoreOpener.open(try StoreURL(parsing: store), key: key, mustExist: true)
            defer { try? s.close() }
            guard let schema = try s.schema(of: table) else { throw LocalStoreError.unknownTable(table) }
            let result = try s.read(q)
            switch format {
            case .jsonl:
                for item in result.items { print(Rendering.jsonLine(item)) }
            case .table:
                let resolved = try ResolvedQuery(q, schema: schema)
                let columns = resolved.projection.map { schema.columns[$0].name }
                var rows = [columns]
                for item in result.items { rows.append(columns.map { Rendering.cell(item[$0] ?? .null) }) }
                print(Rendering.align(rows), terminator: "")
                print("(\(result.items.count) row\(result.items.count == 1 ? "" : "s"))")
            }
        }
    }
}

struct Copy: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a whole store (schemas, data, system tables) to another store, then verify it.",
        discussion: """
            The destination must not hold rows of the copied tables yet. Tables are defined first; all rows \
            are then written in one transaction on the destination. Afterwards row counts and a per-table \
            content checksum of source and destination are compared. Keys: --key-file / LOCALSTORE_KEY for \
            the source, --destination-key-file / LOCALSTORE_DESTINATION_KEY for the destination (hex).
            """)

    @Argument(help: "The source store URL.") var source: String
    @Argument(help: "The destination store URL.") var destination: String
    @OptionGroup var key: KeyOptions
    @Option(name: .customLong("destination-key-file"), help: "Key file of the destination (hex).")
    var destinationKeyFile: String?

    func run() throws {
        try reportingFailures {
            let src = try StoreOpener.open(try StoreURL(parsing: source), key: key, mustExist: true)
            defer { try? src.close() }
            var dstKey = KeyOptions()
            dstKey.keyFile = destinationKeyFile
            let dst = try StoreOpener.open(
                try StoreURL(parsing: destination), key: dstKey, mustExist: false, environmentKey: "LOCALSTORE_DESTINATION_KEY")
            defer { try? dst.close() }
            let progress = CopyProgress()
            let copied = try StoreCopier.copy(from: src, to: dst, progress: progress.report)
            progress.finish()
            print("copied \(copied.values.reduce(0, +)) rows in \(copied.count) tables; counts and checksums match")
        }
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a store's files for damage (integrity check / full traversal with record decoding).")

    @Argument(help: "The store URL (memory:, sqlite:PATH, sqlcipher:PATH, lmdb:PATH).") var store: String
    @OptionGroup var key: KeyOptions

    func run() throws {
        try reportingFailures {
            let s = try StoreOpener.open(try StoreURL(parsing: store), key: key, mustExist: true)
            defer { try? s.close() }
            guard let checkable = s as? any IntegrityChecking else {
                throw CommandError(.usage, "\(store) has no integrity check")
            }
            let problems: [String]
            do {
                problems = try checkable.checkIntegrity()
            } catch let e as LocalStoreError where e.code == .corrupt {
                // The store opened, and the check itself ran into the damage: that is what it found.
                problems = ["\(e.code): \(e.message)"]
            }
            if problems.isEmpty {
                print("ok")
            } else {
                for p in problems { FileHandle.standardError.write(Data("localstore: \(p)\n".utf8)) }
                throw ExitCode(ExitStatus.verificationFailed.rawValue)
            }
        }
    }
}

enum Rendering {
    static func cell(_ v: Value) -> String {
        switch v {
        case .null: return "NULL"
        case .string(let s): return s
        case .date(let d): return DeltaTokenFormat.string(from: d)
        case .binary(let b): return "<\(b.count) bytes>"
        case .json(let j): return j.jsonText
        default: return v.description
        }
    }

    static func jsonLine(_ item: Item) -> String {
        ItemJSON.object(item).jsonText
    }

    static func align(_ rows: [[String]]) -> String {
        guard let width = rows.first?.count else { return "" }
        var widths = [Int](repeating: 0, count: width)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], min(60, c.count)) } }
        var out = ""
        for (n, r) in rows.enumerated() {
            out += r.enumerated().map { i, c in
                let cut = c.count > 60 ? String(c.prefix(59)) + "…" : c
                return cut + String(repeating: " ", count: max(0, widths[i] - cut.count))
            }.joined(separator: "  ") + "\n"
            if n == 0 { out += widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n" }
        }
        return out
    }
}

final class CopyProgress {
    private let start = Date()
    private var last = Date.distantPast
    private var shown = false

    func report(_ table: String, _ rows: Int) {
        let now = Date()
        guard now.timeIntervalSince(start) > 1, now.timeIntervalSince(last) > 0.2 else { return }
        last = now
        shown = true
        FileHandle.standardError.write(Data("\r\u{1B}[Kcopying \(table): \(rows) rows".utf8))
    }

    func finish() {
        if shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}

struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-encrypt a sqlcipher: store with a new key.",
        discussion: """
            The current key comes from --key-file or LOCALSTORE_KEY, the new one from --new-key-file or \
            LOCALSTORE_NEW_KEY (hex; 64 hex digits are a raw 256-bit key, anything else a passphrase). Keys \
            are never command-line arguments.
            """)

    @Argument(help: "The store URL (sqlcipher:PATH).") var store: String
    @OptionGroup var key: KeyOptions
    @Option(name: .customLong("new-key-file"), help: "A file holding the new key in hex (or LOCALSTORE_NEW_KEY).")
    var newKeyFile: String?

    func run() throws {
        try reportingFailures {
            guard try StoreURL(parsing: store).scheme == .sqlcipher else {
                throw CommandError(.usage, "only sqlcipher: stores have a key (got \(store))")
            }
            var newKeyOptions = KeyOptions()
            newKeyOptions.keyFile = newKeyFile
            guard let newBytes = try newKeyOptions.keyBytes(required: true, environment: "LOCALSTORE_NEW_KEY") else {
                throw CommandError(.usage, "no new key")
            }
            let s = try StoreOpener.open(try StoreURL(parsing: store), key: key, mustExist: true)
            defer { try? s.close() }
            guard let cipher = s as? SQLCipherStore else { throw CommandError(.usage, "\(store) is not an encrypted store") }
            try cipher.rekey(to: try StoreOpener.cipherKey(newBytes))
            print("rekeyed \(store)")
        }
    }
}
