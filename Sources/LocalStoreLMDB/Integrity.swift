import LocalStore

extension LMDBStore: IntegrityChecking {
    /// Walks the whole store: decodes every record of every table (system tables included) through a
    /// full scan, then walks every column index and compound index in order and checks that it names exactly the table's
    /// rows, in the order of the column's values. LMDB itself checks every page it reads. Returns one line
    /// per problem; empty when the store is sound.
    ///
    /// liblmdb keeps no page checksums and, on some damaged pages, asserts (`SIGABRT`) or faults instead
    /// of returning an error, which would end the calling process. So the pages are first walked in a
    /// forked child process (only liblmdb and libc run there: every database with a cursor, every key
    /// and value read); when that child dies or liblmdb reports damage, this throws `corrupt` naming the
    /// database and liblmdb's message, and nothing of the store is read in this process.
    /// - Throws: `corrupt` as above; `ioError` when the walk could not run or did not finish in 10 minutes.
    @available(*, noasync, message: "blocks the calling thread; use the async overload (top-level code: try await store.run { … })")
    public func checkIntegrity() throws -> [String] {
        try ChildWalk.run(path: path, maximumDatabases: options.maximumDatabases)
        do {
            return try checkRecords()
        } catch let e as LocalStoreError where e.code == .internal {
            // liblmdb failing on a page (MDB_BAD_VALSIZE, …) while the catalog is read: damage.
            throw LocalStoreError(.corrupt, "the integrity check of '\(path)' could not read the store: \(e.message)")
        }
    }

    /// Every table's records decoded and every index compared with its table.
    private func checkRecords() throws -> [String] {
        var problems: [String] = []
        let names = systemTableNames
        var tables = try tableSchemas()
        for system in [names.operations, names.errors, names.config] {
            if let schema = try schema(of: system) { tables.append(schema) }
        }
        for schema in tables {
            let rows: [Item]
            do {
                rows = try read(Query(schema.name)).items
            } catch let e as LocalStoreError where e.code == .corrupt || e.code == .versionMismatch || e.code == .internal {
                // `internal` here is liblmdb failing on a damaged page (MDB_BAD_VALSIZE, …).
                problems.append("table '\(schema.name)': \(e.message)")
                continue
            }
            let ids = rows.compactMap(\.id)
            if ids.count != rows.count { problems.append("table '\(schema.name)': \(rows.count - ids.count) rows without an id") }
            // Column indexes, then compound indexes: a sort on the index's keys with top walks the index.
            var walks: [(label: String, sort: [SortKey], first: String)] = schema.columns
                .filter { $0.indexed && $0.name != "id" }.map { ($0.name, [SortKey($0.name)], $0.name) }
            for index in schema.indexes {
                walks.append((index.resolvedName, index.keys.map { SortKey($0.column, $0.direction) }, index.keys[0].column))
            }
            for walk in walks where !rows.isEmpty {
                let column = (label: walk.label, name: walk.first)
                let descending = walk.sort[0].direction == .descending
                let q = Query(schema.name, sort: walk.sort, top: rows.count)
                let viaIndex: [Item]
                do {
                    viaIndex = try read(q).items
                } catch let e as LocalStoreError where e.code == .corrupt || e.code == .internal {
                    problems.append("index '\(schema.name).\(column.label)': \(e.message)")
                    continue
                }
                if viaIndex.count != rows.count {
                    problems.append(
                        "index '\(schema.name).\(column.label)' names \(viaIndex.count) rows; the table has \(rows.count)")
                    continue
                }
                let tableIds = Set(ids.map { Collation.noCaseKeyOf($0) })
                let indexIds = Set(viaIndex.compactMap(\.id).map { Collation.noCaseKeyOf($0) })
                if tableIds != indexIds {
                    problems.append("index '\(schema.name).\(column.label)' and the table hold different rows")
                }
                let values = viaIndex.map { $0.value(forColumn: column.name) ?? .null }
                for k in values.indices.dropFirst() where Collation.compare(values[k - 1], values[k]) * (descending ? -1 : 1) > 0 {
                    problems.append("index '\(schema.name).\(column.label)' is out of order at entry \(k)")
                    break
                }
            }
        }
        return problems
    }
}

extension Collation {
    /// A hashable key equal for two ids exactly when the store treats them as the same id.
    static func noCaseKeyOf(_ id: Value) -> String {
        switch id {
        case .string(let s): return "s" + noCaseKey(s)
        default: return "v" + id.description
        }
    }
}
