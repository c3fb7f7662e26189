import Foundation
import LocalStore

/// The store's operations on one connection. The caller owns the connection for the duration and
/// provides the transaction: a reader outside any transaction, or the writer inside `BEGIN IMMEDIATE`.
struct Session {
    let engine: SQLEngine
    let connection: Connection

    /// The table `name`. A name the catalog does not know reloads it first when the file's schema
    /// changed (another process or store object defined the table): short reads on the writer
    /// connection do not look at `PRAGMA schema_version` before every call.
    func table(_ name: String) throws -> TableInfo {
        if let t = engine.tableInfo(name, on: connection) { return t }
        try engine.refreshCatalog(connection)
        guard let t = engine.tableInfo(name, on: connection) else { throw LocalStoreError.unknownTable(name) }
        return t
    }

    private func columnList(_ t: TableInfo, _ columns: [Int]) -> String {
        columns.map { t.quotedColumns[$0] }.joined(separator: ", ")
    }

    /// The items of every row of `text`, built by `shape` (values by position under a shared layout, in
    /// one buffer per result), appended to `items`; `top` (when known) is the most rows it returns.
    private func items(_ text: Fragment, _ shape: ItemShape, top: Int?, into items: inout [Item]) throws {
        try connection.withStatement(text.sql, fallbackOnSizeLimit: true) { s in
            try s.bind(text.arguments)
            let reader = RowReader(s, types: shape.types)
            // Room for a list screen's page up front; larger results grow the buffer as they come.
            try shape.appendItems(reader, to: &items, expectedRows: min(top ?? 64, 256))
        }
    }

    private func row(_ s: Statement, _ schema: TableSchema) throws -> [Value] {
        var row: [Value] = []
        row.reserveCapacity(schema.columns.count)
        for (n, c) in schema.columns.enumerated() { row.append(try s.value(Int32(n), as: c.type)) }
        return row
    }

    /// Every row of `t`, all columns in schema order (for evaluating a query in Swift).
    func allRows(_ t: TableInfo) throws -> [[Value]] {
        let sql = "SELECT \(columnList(t, Array(t.schema.columns.indices))) FROM \(t.quotedName)"
        return try connection.withStatement(sql) { s in
            var rows: [[Value]] = []
            while try s.step() { rows.append(try row(s, t.schema)) }
            return rows
        }
    }

    /// Runs `body` in one read transaction unless the connection is already in one (the writer).
    private func snapshot<R>(_ body: () throws -> R) throws -> R {
        if connection.isInTransaction { return try body() }
        try connection.run(.begin)
        do {
            let result = try body()
            try connection.run(.commit)
            return result
        } catch {
            if connection.isInTransaction { try? connection.execute("ROLLBACK") }
            throw error
        }
    }

    /// Runs `compiled`; when the query cannot be expressed in SQL on this connection (or SQLite refuses
    /// the statement for its size), runs `fallback`, which evaluates it in Swift instead.
    private func compiledOrFallback<R>(_ compiled: () throws -> R, fallback: () throws -> R) throws -> R {
        do {
            return try compiled()
        } catch is NeedsFallback {
            engine.noteFallback()
            return try fallback()
        }
    }

    private func rows(_ text: Fragment, _ body: (Statement) throws -> Void) throws {
        try connection.withStatement(text.sql, fallbackOnSizeLimit: true) { s in
            try s.bind(text.arguments)
            while try s.step() { try body(s) }
        }
    }

    // MARK: Reads

    func read(table name: String, id: Value) throws -> Item? {
        let t = try table(name)
        // A string id of a string-keyed table needs no check (the common case, without copying the schema).
        var plainStringId = false
        if t.hasStringIds, case .string = id { plainStringId = true }
        if !plainStringId { try t.schema.checkId(id) }
        return try connection.withStatement(t.selectByIdSQL) { s in
            try s.bind(id, at: 1)
            let reader = RowReader(s, types: t.allColumnsShape.types)
            return try reader.next() ? try t.allColumnsShape.item(reader) : nil
        }
    }

    func read(_ query: Query) throws -> ReadResult {
        let t = try table(query.table)
        // A query this connection already compiled for this table definition is not resolved and
        // compiled again (the SQL depends only on the query, the definition and the connection).
        let compiled: CompiledQuery
        let cacheable = query.isByteComparable
        if cacheable, let c = connection.compiledQuery(query, table: t) {
            compiled = c
        } else {
            let q = try ResolvedQuery(query, schema: t.schema)
            let hasFunctions = connection.hasFunctions
            let limit = connection.variableLimit
            do {
                let select = q.top != 0
                    ? try SQLCompiler.select(q, table: t.sqlName, columns: q.projection, hasFunctions: hasFunctions, variableLimit: limit)
                    : nil
                let count = q.includeTotalCount
                    ? try SQLCompiler.count(q, table: t.sqlName, hasFunctions: hasFunctions, variableLimit: limit) : nil
                compiled = CompiledQuery(table: t, resolved: q, select: select, count: count)
            } catch is NeedsFallback {
                engine.noteFallback()
                return q.apply(to: try allRows(t))
            }
            if cacheable { connection.keepCompiledQuery(query, compiled) }
        }
        let q = compiled.resolved
        let run = {
            try compiledOrFallback {
                var items: [Item] = []
                if let select = compiled.select {
                    try self.items(select, compiled.shape, top: q.top, into: &items)
                }
                var total: Int?
                if let count = compiled.count {
                    try rows(count) { s in total = Int(s.int64(0)) }
                }
                return ReadResult(items: items, totalCount: total)
            } fallback: {
                q.apply(to: try allRows(t))
            }
        }
        // Rows and count come from one snapshot.
        return compiled.select != nil && compiled.count != nil ? try snapshot(run) : try run()
    }

    /// The `detail` lines of SQLite's `EXPLAIN QUERY PLAN` for the statement ``read(_:)`` runs for
    /// `query` (its count statement when the query returns no rows); one line saying so when the query
    /// is answered in Swift instead.
    func queryPlan(_ query: Query) throws -> [String] {
        let t = try table(query.table)
        let q = try ResolvedQuery(query, schema: t.schema)
        let hasFunctions = connection.hasFunctions
        let limit = connection.variableLimit
        let text: Fragment
        do {
            text = q.top != 0
                ? try SQLCompiler.select(q, table: t.sqlName, columns: q.projection, hasFunctions: hasFunctions, variableLimit: limit)
                : try SQLCompiler.count(q, table: t.sqlName, hasFunctions: hasFunctions, variableLimit: limit)
        } catch is NeedsFallback {
            return ["evaluated in Swift over every row"]
        }
        return try connection.queryPlan(text.sql, arguments: text.arguments)
    }

    /// The access path of the statement ``read(_:)`` runs for `query` (see `QueryPlanReporting`), read
    /// from SQLite's `EXPLAIN QUERY PLAN` (``SQLAccessPath``).
    func accessPath(_ query: Query) throws -> QueryAccessPath {
        let t = try table(query.table)
        let q = try ResolvedQuery(query, schema: t.schema)
        let lines = try queryPlan(query)
        return SQLAccessPath.parse(lines, table: t, walksInOrder: q.top != nil && !q.sort.isEmpty)
    }

    // MARK: Writes (inside a write transaction)

    func upsert(_ items: [Item], into name: String, options: UpsertOptions) throws {
        let t = try table(name)
        let prepared = try items.map { try t.schema.prepare($0, options: options) }
        guard !prepared.isEmpty else { return }
        // Per item: INSERT OR IGNORE the columns it names (a new row gets null everywhere else); when the
        // id already had a row (nothing inserted), UPDATE exactly those columns — merge semantics, the id
        // included (its newest spelling). Plain SQL that SQLite 3.15.2 runs (no UPSERT clause).
        // Items naming more columns than one statement may bind take the slow path below.
        let limit = connection.variableLimit
        var inserts: [[Int]: String] = [:]  // SQL by the columns set: items of a batch mostly share it
        var updates: [[Int]: String] = [:]
        for p in prepared {
            let assignments = p.assignments
            guard assignments.count + 1 < limit else {  // the values, the id and the size bound
                try upsertWide(p, t, options: options)
                continue
            }
            // An item setting every column (assignments are in column order) uses the table's own SQL.
            let setsAll = assignments.count == t.quotedColumns.count
            let columns = setsAll ? [] : assignments.map(\.column)
            let insert: String
            if setsAll {
                insert = t.insertAllSQL
            } else if let cached = inserts[columns] {
                insert = cached
            } else {
                let names = columns.map { t.quotedColumns[$0] }.joined(separator: ", ")
                let marks = Array(repeating: "?", count: columns.count).joined(separator: ", ")
                insert = "INSERT OR IGNORE INTO \(t.quotedName) (\(names)) VALUES (\(marks))"
                inserts[columns] = insert
            }
            let inserted = try connection.withStatement(insert) { s in
                for (k, a) in assignments.enumerated() { try s.bind(a.value, at: Int32(k + 1)) }
                try s.run()
                return connection.api.changes(connection.db) > 0
            }
            if inserted { continue }
            let update: String
            if setsAll {
                update = t.updateAllSQL
            } else if let cached = updates[columns] {
                update = cached
            } else {
                let sets = columns.map { t.quotedColumns[$0] + " = ?" }.joined(separator: ", ")
                update = "UPDATE OR FAIL \(t.quotedName) SET \(sets) WHERE \(t.idColumn) = ?"
                    + Self.mergedSizeGuard(t, setting: columns)
                updates[columns] = update
            }
            try runUpdate(update, p, t, options: options)
        }
    }

    /// The condition a partial update adds to its `WHERE`: the bytes the stored values of the columns it
    /// does not set take (as ``TableSchema/byteCount(of:)`` counts them) are at most the bound parameter
    /// that follows the id, the item limit less the item's own bytes. The row is updated only if the
    /// result fits the limit; ``runUpdate(_:_:_:options:)`` turns "no row changed" into the error.
    static func mergedSizeGuard(_ t: TableInfo, setting columns: [Int]) -> String {
        var unset: [String] = []
        var next = 0
        for (c, column) in t.schema.columns.enumerated() {
            if next < columns.count, columns[next] == c {
                next += 1
                continue
            }
            unset.append(storedSize(t, column: c, type: column.type))
        }
        return unset.isEmpty ? "" : " AND (" + unset.joined(separator: " + ") + ") <= ?"
    }

    /// An SQL expression for ``TableSchema/byteCount(of:)`` of the stored value of column `c`: the bytes of
    /// a string, binary or json value (json is stored as its text), 8 for any other non-null value.
    static func storedSize(_ t: TableInfo, column c: Int, type: ColumnType) -> String {
        let q = t.quotedColumns[c]
        switch type {
        case .string, .binary, .json: return "coalesce(length(CAST(\(q) AS BLOB)), 0)"
        default: return "(\(q) IS NOT NULL) * 8"
        }
    }

    /// Runs the `UPDATE` of an existing row (its `INSERT OR IGNORE` inserted nothing): binds the item's
    /// values, its id and, for a partial update, the room its other columns have
    /// (``mergedSizeGuard(_:setting:)``). A partial update that changed nothing was refused by that guard:
    /// the stored sizes are read back and ``TableSchema/checkMergedSize(_:options:storedByteCount:)``
    /// throws the error naming the column.
    private func runUpdate(_ sql: String, _ p: PreparedItem, _ t: TableInfo, options: UpsertOptions) throws {
        let assignments = p.assignments
        let partial = assignments.count < t.quotedColumns.count
        let changed = try connection.withStatement(sql) { s in
            var own = 0
            for (k, a) in assignments.enumerated() {
                try s.bind(a.value, at: Int32(k + 1))
                own += TableSchema.byteCount(of: a.value)
            }
            try s.bind(p.id, at: Int32(assignments.count + 1))
            if partial { try s.bind(.int(Int64(TableSchema.itemLimit(options) - own)), at: Int32(assignments.count + 2)) }
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
        if partial, !changed { try checkStoredMergedSize(p, t, options: options) }
    }

    /// Reads the sizes of the stored row of `p`'s id and checks the row merging `p` into it would leave.
    private func checkStoredMergedSize(_ p: PreparedItem, _ t: TableInfo, options: UpsertOptions) throws {
        let sizes = t.schema.columns.enumerated().map { Self.storedSize(t, column: $0.offset, type: $0.element.type) }
        let stored = try connection.withStatement(
            "SELECT \(sizes.joined(separator: ", ")) FROM \(t.quotedName) WHERE \(t.idColumn) = ?"
        ) { s -> [Int]? in
            try s.bind(p.id, at: 1)
            guard try s.step() else { return nil }
            return (0..<s.columnCount).map { Int(s.int64($0)) }
        }
        guard let stored else { return }
        try t.schema.checkMergedSize(p, options: options) { $0 < stored.count ? stored[$0] : 0 }
    }

    /// Upserts one item inside a `write {}` body (the caller opened no savepoint), leaving the transaction
    /// exactly as it was when it fails:
    ///
    /// - the `INSERT OR IGNORE` runs unguarded when the new row provably fits SQLite's length limit (its
    ///   values take less than half of it). It checks everything before writing — conflicts are ignored,
    ///   the id is never null — so it either adds the row and its index entries or changes nothing; only
    ///   a row too large for the limit could fail after the index entries were written;
    /// - the `UPDATE`, which runs only when the row existed, runs unguarded too when the item sets every
    ///   column (the new record is then the item's values, known to fit, and `OR FAIL` checks before it
    ///   writes); otherwise it is in a savepoint: the stored row's other columns are part of the new
    ///   record, so its size is not known in advance;
    /// - anything else (a wide item, a row that may not fit) runs wholly in a savepoint.
    ///
    /// The savepoint this saves is what matters on SQLCipher: the first change of a page inside one
    /// copies the page to the sub-journal, and SQLCipher encrypts the copy.
    func upsertOne(_ item: Item, into name: String, options: UpsertOptions) throws {
        let t = try table(name)
        let p = try t.schema.prepare(item, options: options)
        var bytes = 0
        for a in p.assignments {
            switch a.value {
            case .string(let s): bytes += s.utf8.count
            case .binary(let b): bytes += b.count
            case .json: bytes = Int.max / 2
            default: bytes += 9
            }
            bytes += 9
        }
        guard p.assignments.count + 1 < connection.variableLimit, bytes < connection.lengthLimit / 2 else {
            try inSavepoint { try upsert([item], into: name, options: options) }
            return
        }
        let assignments = p.assignments
        let setsAll = assignments.count == t.quotedColumns.count
        let insert: String
        if setsAll {
            insert = t.insertAllSQL
        } else {
            let names = assignments.map { t.quotedColumns[$0.column] }.joined(separator: ", ")
            let marks = Array(repeating: "?", count: assignments.count).joined(separator: ", ")
            insert = "INSERT OR IGNORE INTO \(t.quotedName) (\(names)) VALUES (\(marks))"
        }
        let inserted = try connection.withStatement(insert) { s in
            for (k, a) in assignments.enumerated() { try s.bind(a.value, at: Int32(k + 1)) }
            try s.run()
            return connection.api.changes(connection.db) > 0
        }
        if inserted { return }
        let update: String
        if setsAll {
            update = t.updateAllSQL
        } else {
            let sets = assignments.map { t.quotedColumns[$0.column] + " = ?" }.joined(separator: ", ")
            update = "UPDATE OR FAIL \(t.quotedName) SET \(sets) WHERE \(t.idColumn) = ?"
                + Self.mergedSizeGuard(t, setting: assignments.map(\.column))
        }
        let run = { try self.runUpdate(update, p, t, options: options) }
        if setsAll { try run() } else { try inSavepoint(run) }
    }

    /// Runs `body` in a savepoint: when it fails, what it changed is undone and the transaction goes on.
    /// If even that fails, the whole transaction is rolled back, so it cannot commit half a call.
    private func inSavepoint<R>(_ body: () throws -> R) throws -> R {
        try connection.execute("SAVEPOINT localstore_statement")
        do {
            let result = try body()
            try connection.execute("RELEASE localstore_statement")
            return result
        } catch {
            if connection.isInTransaction {
                do {
                    try connection.execute("ROLLBACK TO localstore_statement")
                    try connection.execute("RELEASE localstore_statement")
                } catch {
                    SQLEngine.rollback(connection)
                }
            }
            throw error
        }
    }

    /// Upserts an item that sets more columns than one statement can bind: insert its id, then set its
    /// columns in chunks.
    private func upsertWide(_ p: PreparedItem, _ t: TableInfo, options: UpsertOptions) throws {
        try connection.withStatement("INSERT OR IGNORE INTO \(t.quotedName) (\(t.idColumn)) VALUES (?)") { s in
            try s.bind(p.id, at: 1)
            try s.run()
        }
        try checkStoredMergedSize(p, t, options: options)
        let perUpdate = max(1, connection.variableLimit - 1)
        let assignments = p.assignments
        var from = 0
        while from < assignments.count {
            let to = min(from + perUpdate, assignments.count)
            let sets = assignments[from..<to].map { t.quotedColumns[$0.column] + " = ?" }.joined(separator: ", ")
            try connection.withStatement("UPDATE \(t.quotedName) SET \(sets) WHERE \(t.idColumn) = ?") { s in
                for (k, a) in assignments[from..<to].enumerated() { try s.bind(a.value, at: Int32(k + 1)) }
                try s.bind(p.id, at: Int32(to - from + 1))
                try s.run()
            }
            from = to
        }
    }

    func delete(ids: [Value], from name: String) throws {
        if ids.isEmpty && engine.tableInfo(name) == nil { return }
        let t = try table(name)
        for id in ids { try t.schema.checkId(id) }
        try deleteRows(t, ids: ids)
    }

    private func deleteRows(_ t: TableInfo, ids: [Value]) throws {
        let chunk = max(1, connection.variableLimit)
        var start = 0
        while start < ids.count {
            let end = min(start + chunk, ids.count)
            let list = Array(repeating: "?", count: end - start).joined(separator: ", ")
            let sql = "DELETE FROM \(t.quotedName) WHERE \(t.idColumn) IN (\(list))"
            try connection.withStatement(sql) { s in
                try s.bind(Array(ids[start..<end]))
                try s.run()
            }
            start = end
        }
    }

    func delete(matching query: Query) throws {
        let t = try table(query.table)
        let q = try ResolvedQuery(query, schema: t.schema)
        if q.top == 0 { return }
        try compiledOrFallback {
            let text = try SQLCompiler.delete(
                q, table: t.sqlName, hasFunctions: connection.hasFunctions, variableLimit: connection.variableLimit)
            try connection.withStatement(text.sql, fallbackOnSizeLimit: true) { s in
                try s.bind(text.arguments)
                try s.run()
            }
        } fallback: {
            let selected = q.select(try allRows(t)).rows
            try deleteRows(t, ids: selected.map { $0[t.schema.idIndex] })
        }
    }

    // MARK: Raw SQL

    /// Runs one read-only `SELECT` and returns its rows as items keyed by result column name.
    func rawQuery(_ sql: String, _ arguments: [Value]) throws -> [Item] {
        let api = connection.api
        let db = connection.db
        func refuse(_ why: String) -> LocalStoreError {
            LocalStoreError(.invalidQuery, "raw SQL must be one read-only SELECT statement: \(why)")
        }
        // Raw SQL may call the `localstore_*` functions: registered now if no query was compiled here yet.
        _ = connection.hasFunctions
        // The authorizer refuses everything but reading (no PRAGMA, ATTACH, BEGIN, writes...).
        _ = api.set_authorizer(db, SQLEngine.readOnlyAuthorizer, nil)
        let prepared: (OpaquePointer?, tail: String)
        do {
            defer { _ = api.set_authorizer(db, nil, nil) }
            prepared = try connection.prepareUncached(sql)
            let rest = prepared.tail.trimmingCharacters(in: .whitespacesAndNewlines)
            if prepared.0 != nil, !rest.isEmpty {
                let extra = try? connection.prepareUncached(rest)
                if let h = extra?.0 { _ = api.finalize(h) }
                if extra == nil || extra?.0 != nil {
                    if let h = prepared.0 { _ = api.finalize(h) }
                    throw refuse("it contains more than one statement")
                }
            }
        } catch let failure as PrepareFailure {
            if failure.code & 0xFF == SQLite.AUTH { throw refuse("SQLite says: \(failure.message)") }
            let e = failure.asStoreError
            throw e.code == .internal ? LocalStoreError(.invalidQuery, e.message) : e
        }
        guard let handle = prepared.0 else { throw refuse("the text contains no statement") }
        defer { _ = api.finalize(handle) }
        guard api.stmt_readonly(handle) != 0 else { throw refuse("it would write") }
        let expected = Int(api.bind_parameter_count(handle))
        guard expected == arguments.count else {
            throw LocalStoreError(.invalidQuery, "the SQL has \(expected) parameters but \(arguments.count) arguments were given")
        }
        let s = Statement(handle, connection)
        try s.bind(arguments)
        var items: [Item] = []
        let count = s.columnCount
        let names = (0..<count).map { s.columnName($0) }
        let types = (0..<count).map { SQLNames.columnType(declared: s.declaredType($0)) }
        do {
            while try s.step() {
                var values: [String: Value] = [:]
                for n in 0..<count {
                    let k = Int(n)
                    if let type = types[k], let v = try? s.value(n, as: type) {
                        values[names[k]] = v
                    } else {
                        values[names[k]] = s.dynamicValue(n)
                    }
                }
                items.append(Item(values))
            }
        } catch {
            _ = api.reset(handle)
            throw error
        }
        if connection.isInTransaction {
            try? connection.execute("ROLLBACK")
            throw refuse("it opened a transaction")
        }
        return items
    }
}
