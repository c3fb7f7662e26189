/// Copies a whole store — table definitions, rows and the three system tables — into another store of
/// any backend, and verifies the copy.
public enum StoreCopier {
    /// Rows read from the source per query while copying.
    public static let pageSize = 1000

    /// Copies `source` into `destination`.
    ///
    /// User tables are defined on the destination first (a table that already exists there is merged as
    /// ``LocalStore/defineTable(_:)`` does); then every row of every table, system tables included, is
    /// written in **one** write transaction, so a failure leaves no rows behind. Every copied table must be
    /// empty on the destination beforehand (`constraint` otherwise). Afterwards the row counts and
    /// ``checksum(of:in:columns:)`` of each table are compared (`corrupt` if they differ).
    ///
    /// - Parameters:
    ///   - source: the store to copy; it is only read.
    ///   - destination: the store to copy into (any backend).
    ///   - progress: called now and then with the table being copied and the rows copied from it so far.
    /// - Returns: the rows copied per table (destination names).
    @discardableResult
    public static func copy(
        from source: any LocalStore, to destination: any LocalStore, progress: (String, Int) -> Void = { _, _ in }
    ) throws -> [String: Int] {
        let schemas = try source.tableSchemas()
        for schema in schemas { try destination.defineTable(schema) }
        // (source table, destination table, columns compared)
        var plan: [(String, String, [String])] = schemas.map { ($0.name, $0.name, $0.columns.map(\.name)) }
        let srcNames = source.systemTableNames
        let dstNames = destination.systemTableNames
        for (s, d) in [(srcNames.operations, dstNames.operations), (srcNames.errors, dstNames.errors),
                       (srcNames.config, dstNames.config)] {
            let columns = try source.schema(of: s)?.columns.map(\.name) ?? []
            plan.append((s, d, columns))
        }
        for (_, d, _) in plan {
            let n = try destination.count(d)
            guard n == 0 else {
                throw LocalStoreError(
                    .constraint, "the destination's table '\(d)' already holds \(n) rows; copy into an empty store",
                    table: d)
            }
        }
        var copied: [String: Int] = [:]
        try destination.write { tx in
            for (s, d, _) in plan {
                var n = 0
                try forEachPage(of: s, in: source) { page in
                    try tx.upsert(page, into: d, options: .strict)
                    n += page.count
                    progress(d, n)
                }
                copied[d] = n
            }
        }
        for (s, d, columns) in plan {
            let (srcCount, srcSum) = try checksum(of: s, in: source, columns: columns)
            let (dstCount, dstSum) = try checksum(of: d, in: destination, columns: columns)
            guard srcCount == dstCount, srcSum == dstSum else {
                throw LocalStoreError(
                    .corrupt,
                    "verification failed for table '\(d)': source has \(srcCount) rows (checksum \(String(srcSum, radix: 16))), destination \(dstCount) (checksum \(String(dstSum, radix: 16)))",
                    table: d)
            }
        }
        return copied
    }

    /// Visits every row of `table` in id order, a page at a time (keyset paging on `id`).
    public static func forEachPage(of table: String, in store: any LocalStoreAccess, _ body: ([Item]) throws -> Void) throws {
        var last: Value?
        while true {
            let predicate: QueryPredicate? = last.map { .compare(.field("id"), .greater, .literal($0), caseInsensitive: false) }
            let page = try store.read(Query(table, where: predicate, sort: [SortKey("id")], top: pageSize)).items
            if page.isEmpty { return }
            try body(page)
            last = page.last?.id
            if page.count < pageSize { return }
        }
    }

    /// The number of rows of `table` and a 64-bit FNV-1a hash of their `columns`, in id order. Equal
    /// contents give equal checksums on every backend.
    public static func checksum(of table: String, in store: any LocalStoreAccess, columns: [String]) throws -> (Int, UInt64) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var count = 0
        func mix<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
            for b in bytes {
                hash ^= UInt64(b)
                hash = hash &* 0x100_0000_01b3
            }
        }
        func mix(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { mix($0) } }
        try forEachPage(of: table, in: store) { page in
            for item in page {
                count += 1
                for c in columns {
                    mix(c.utf8)
                    let v = item.value(forColumn: c) ?? .null
                    mix(v.kindName.utf8)
                    switch v {
                    case .null: break
                    case .bool(let b): mix(b ? [1] : [0])
                    case .int(let i): mix(UInt64(bitPattern: i))
                    case .double(let d): mix(d.bitPattern)
                    case .string(let s): mix(UInt64(s.utf8.count)); mix(s.utf8)
                    case .date(let d): mix(d.timeIntervalSinceReferenceDate.bitPattern)
                    case .binary(let b): mix(UInt64(b.count)); mix(b)
                    case .json(let j): mix(j.jsonText.utf8)
                    }
                }
            }
        }
        return (count, hash)
    }
}
