import Foundation
import LocalStore

// defineTable, tableSchemas, schema(of:), systemProperties(for:).

extension ConformanceSuite {
    /// `defineTable` creates a table; `schema(of:)` returns it with `id` added first when the definition
    /// lacks it, in the defined spelling, under any spelling of the name.
    public static func defineTableCreatesTable(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(TableSchema("TodoItem", ["title": .string, "priority": .integer], indexed: ["priority"]))
            let schema = try unwrap(try store.schema(of: "TodoItem"), "schema of a defined table")
            try expectEqual(schema.name, "TodoItem", "table name")
            try expectEqual(
                schema.columns, [Column("id", .string), Column("title", .string), Column("priority", .integer, indexed: true)],
                "columns: id added first, definition order, index flag")
            try expectEqual(try store.schema(of: "TODOITEM"), schema, "schema(of:) in another case")
            try expectEqual(try store.schema(of: "todoitem")?.name, "TodoItem", "defined spelling returned")
            try expectEqual(try store.count("TodoItem"), 0, "a new table is empty")

            let withId = TableSchema(name: "Explicit", columns: [Column("title", .string), Column("id", .string, indexed: false), Column("n", .double)])
            try store.defineTable(withId)
            try expectEqual(try store.schema(of: "Explicit")?.columns, withId.columns, "an explicit id keeps its position")

            let every = TableSchema(
                name: "EveryType",
                columns: ColumnType.allCases.map { Column("c_\($0.rawValue)", $0, indexed: $0 != .json) })
            try store.defineTable(every)
            try expectEqual(try store.schema(of: "everytype"), every, "a column of every type, most indexed")
        }
    }

    /// Defining an existing table again merges: new columns are appended (existing rows read null for
    /// them), columns left out are kept, spellings of the first definition win, and the table keeps
    /// its rows.
    public static func redefineAddsColumnsKeepingData(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(TableSchema("Notes", ["title": .string, "n": .integer]))
            try store.upsert([["id": "a", "title": "one", "n": 1], ["id": "b", "title": "two"]], into: "Notes")
            try store.defineTable(TableSchema("NOTES", ["TITLE": .string, "body": .string, "when": .date, "tags": .json]))
            let schema = try unwrap(try store.schema(of: "Notes"), "schema after redefinition")
            try expectEqual(schema.name, "Notes", "the first spelling of the table name is kept")
            try expectEqual(
                schema.columns,
                [Column("id", .string), Column("title", .string), Column("n", .integer), Column("body", .string), Column("when", .date), Column("tags", .json)],
                "new columns appended, left-out columns kept, first spellings kept")
            try expectIdentical(
                try store.read(table: "Notes", id: "a"), ["id": "a", "title": "one", "n": 1, "body": nil, "when": nil, "tags": nil],
                "an old row reads null for the new columns")
            try expectEqual(try store.count("Notes", where: Field("body").isNull), 2, "query on a new column")
            try store.upsert([["id": "b", "body": "text", "when": .date(date(1))]], into: "Notes")
            try expectIdentical(
                try store.read(table: "Notes", id: "b"), ["id": "b", "title": "two", "n": nil, "body": "text", "when": .date(date(1)), "tags": nil],
                "an old row updated through a new column")
            try store.defineTable(TableSchema("Notes", ["title": .string]))
            try expectEqual(try store.schema(of: "Notes"), schema, "a definition with fewer columns changes nothing")
            try expectEqual(try store.count("Notes"), 2, "redefinition keeps the rows")
        }
    }

    /// A redefinition may add an index to an existing column (also one with data) and add new indexed
    /// columns; queries keep working through the new index.
    public static func redefineAddsIndex(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(TableSchema("Notes", ["title": .string, "n": .integer]))
            try store.upsert((0..<30).map { ["id": .string("r\($0)"), "title": .string("t\($0 % 3)"), "n": .int(Int64($0 % 5))] }, into: "Notes")
            try store.defineTable(TableSchema("Notes", ["N": .integer, "rank": .double], indexed: ["n", "rank"]))
            let schema = try unwrap(try store.schema(of: "Notes"), "schema")
            try expectEqual(
                schema.columns,
                [Column("id", .string), Column("title", .string), Column("n", .integer, indexed: true), Column("rank", .double, indexed: true)],
                "index flags after redefinition")
            try expectEqual(try store.count("Notes", where: Field("n") == 3), 6, "equality on the newly indexed column")
            try expectEqual(try store.count("Notes", where: Field("n") >= 3), 12, "range on the newly indexed column")
            try expectEqual(try store.count("Notes", where: Field("rank").isNull), 30, "null test on a new indexed column")
            try expectSameIds(
                try readIds(store, Query("Notes", where: Field("n") < 1, sort: [SortKey("n", .descending)], top: 3)), ["r0", "r10", "r15"],
                "sorted, limited read over the new index")
            try store.upsert([["id": "r0", "n": 4, "rank": 0.5]], into: "Notes")
            try expectEqual(try store.count("Notes", where: Field("n") == 4), 7, "index kept up to date after an update")
            try expectEqual(try readIds(store, Query("Notes", where: Field("rank") == 0.5)), ["r0"], "new indexed column written")
            try store.defineTable(TableSchema("Notes", ["title": .string], indexed: ["title"]))
            try store.defineTable(TableSchema("Notes", ["title": .string]))
            try expectEqual(try store.schema(of: "Notes")?.column(named: "title")?.indexed, true, "an index is never dropped by a redefinition")
            try expectEqual(try store.count("Notes", where: Field("title") == "t1"), 10, "query on the indexed title")
        }
    }

    /// Changing a column's type, declaring a non-string id or declaring a column twice is
    /// `schemaConflict`, and the failed definition changes nothing.
    public static func defineTableSchemaConflicts(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(TableSchema("Notes", ["title": .string, "n": .integer]))
            try store.upsert([["id": "a", "title": "one", "n": 1]], into: "Notes")
            let schema = try store.schema(of: "Notes")
            let before = try snapshot(store, ["Notes"])
            try expectThrows(code: .schemaConflict, "integer column redefined as double") {
                try store.defineTable(TableSchema("Notes", ["n": .double]))
            }
            try expectThrows(code: .schemaConflict, "type change in another case, next to a new column") {
                try store.defineTable(TableSchema("notes", ["extra": .string, "TITLE": .json]))
            }
            try expectThrows(code: .schemaConflict, "id redefined as integer") {
                try store.defineTable(TableSchema("Notes", ["id": .integer]))
            }
            try expectThrows(code: .schemaConflict, "a column declared twice on redefinition") {
                try store.defineTable(TableSchema("Notes", ["extra": .string, "Extra": .string]))
            }
            try expectEqual(try store.schema(of: "Notes"), schema, "failed redefinitions change nothing (no 'extra' column)")
            try expectUnchanged(store, before, "failed redefinitions keep the rows")
            for type in ColumnType.allCases where type != .string {
                try expectThrows(code: .schemaConflict, "a new table with a \(type) id") {
                    try store.defineTable(TableSchema("IdTable", ["id": type, "x": .string]))
                }
            }
            try expectThrows(code: .schemaConflict, "a new table declaring a column twice") {
                try store.defineTable(TableSchema(name: "Twice", columns: [Column("a", .string), Column("A", .string)]))
            }
            try expectThrows(code: .schemaConflict, "a new table declaring id twice") {
                try store.defineTable(TableSchema(name: "Twice", columns: [Column("id", .string), Column("ID", .string)]))
            }
            try expectEqual(try store.tableSchemas().map(\.name), ["Notes"], "failed definitions create no table")
        }
    }

    /// Table and column names must match `^[A-Za-z_][A-Za-z0-9_]{0,127}$` (`invalidIdentifier`).
    public static func defineTableInvalidIdentifiers(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let bad = [
                "", "1abc", "9", "a-b", "a b", " a", "a ", "a.b", "é", "naïve", "tab\t", "a\u{0}", "\"quoted\"", "a;drop", "[x]",
                "$x", "a$", String(repeating: "a", count: 129), "_" + String(repeating: "9", count: 128), "🎉",
            ]
            for name in bad {
                try expectThrows(code: .invalidIdentifier, "table name \(debugText(name))") {
                    try store.defineTable(TableSchema(name, ["title": .string]))
                }
                try expectThrows(code: .invalidIdentifier, "column name \(debugText(name))") {
                    try store.defineTable(TableSchema("Valid", ["title": .string, name: .string]))
                }
            }
            try expectEqual(try store.tableSchemas(), [], "no table after invalid definitions")
            let good = ["a", "_", "__", "A1", "_9", "a_b_c", String(repeating: "a", count: 128), "Z" + String(repeating: "9", count: 127)]
            for (n, name) in good.enumerated() {
                try store.defineTable(TableSchema(name, ["c_\(n)": .string]))
                try store.defineTable(TableSchema("Valid", [name: .string]))
            }
            try expectEqual(try store.tableSchemas().count, good.count + 1, "every valid name accepted")
            try expectEqual(try store.schema(of: "valid")?.columns.count, good.count + 1, "every valid column name accepted")
        }
    }

    /// A system table's name, in any case, is `reservedName`; system tables can't be redefined.
    public static func defineTableReservedNames(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let names = [store.operationTableName, store.errorTableName, store.configTableName]
            for name in names {
                for spelling in [name, ASCII.lowercased(name), ASCII.uppercased(name), alternatingCase(name)] {
                    try expectThrows(code: .reservedName, "defining \(spelling)") {
                        try store.defineTable(TableSchema(spelling, ["extra": .string]))
                    }
                }
                try expectEqual(
                    try store.schema(of: name)?.columns.count, name == store.errorTableName ? 4 : 5, "\(name) unchanged")
            }
            try expectEqual(try store.tableSchemas(), [], "tableSchemas() excludes system tables")
            try store.defineTable(TableSchema("MS_TableOperationsX", ["x": .string]))
            try store.defineTable(TableSchema("TableOperations", ["x": .string]))
            try expectEqual(try store.tableSchemas().map(\.name), ["MS_TableOperationsX", "TableOperations"], "similar names are fine")
        }
    }

    /// A table has at most 1000 columns, `id` included (`invalidValue` beyond), also across redefinitions.
    public static func defineTableColumnLimit(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            let columns = (1..<1000).map { Column("c\($0)", .integer) }
            try store.defineTable(TableSchema(name: "Wide", columns: columns))
            try expectEqual(try store.schema(of: "Wide")?.columns.count, 1000, "1000 columns with id")
            var item = Item(["id": "a"])
            for c in columns { item[c.name] = .int(Int64(c.name.dropFirst())!) }
            try store.upsert([item], into: "Wide")
            try expectIdentical(try store.read(table: "Wide", id: "a"), item, "a 1000-column row")
            try expectThrows(code: .invalidValue, "1001 columns") {
                try store.defineTable(TableSchema(name: "TooWide", columns: (1...1000).map { Column("c\($0)", .integer) }))
            }
            try expectThrows(code: .invalidValue, "a redefinition that adds a 1001st column") {
                try store.defineTable(TableSchema("Wide", ["one_more": .string]))
            }
            try store.defineTable(TableSchema(name: "Half", columns: (1...600).map { Column("a\($0)", .integer) }))
            try expectThrows(code: .invalidValue, "two definitions of 601 columns each") {
                try store.defineTable(TableSchema(name: "Half", columns: (1...600).map { Column("b\($0)", .integer) }))
            }
            try expectEqual(try store.schema(of: "Half")?.columns.count, 601, "the failed redefinition added nothing")
            try expectEqual(try store.schema(of: "Wide")?.columns.count, 1000, "the failed redefinition added nothing")
            try expectNil(try store.schema(of: "TooWide"), "the failed definition created nothing")
        }
    }

    /// `tableSchemas()` lists the user tables (not the system tables) sorted by name, in defined spelling.
    public static func tableSchemasListsUserTables(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try expectEqual(try store.tableSchemas(), [], "a new store has no user tables")
            let b = TableSchema("beta", ["x": .string])
            let a = TableSchema("Alpha", ["y": .integer], indexed: ["y"])
            let c = TableSchema("Gamma_2", ["z": .json])
            for s in [b, a, c] { try store.defineTable(s) }
            try store.defineTable(TableSchema("BETA", ["x": .string]))
            try expectEqual(try store.tableSchemas(), [a, c, b], "sorted by name (bytes), defined spelling, no duplicates")
        }
    }

    /// `systemProperties(for:)` is the subset of createdAt/updatedAt/version/deleted the table has.
    public static func systemPropertiesOfTables(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.defineTable(TableSchema("Plain", ["title": .string]))
            try store.defineTable(TableSchema("Some", ["version": .string, "updatedAt": .date, "created": .date]))
            try store.defineTable(TableSchema("Spelled", ["VERSION": .string, "Deleted": .boolean]))
            try expectEqual(try store.systemProperties(for: "TodoItem"), Set(SystemProperty.allCases), "every property")
            try expectEqual(try store.systemProperties(for: "todoitem"), Set(SystemProperty.allCases), "table name in another case")
            try expectEqual(try store.systemProperties(for: "Plain"), [], "no property")
            try expectEqual(try store.systemProperties(for: "Some"), [.version, .updatedAt], "some properties")
            try expectEqual(try store.systemProperties(for: "Spelled"), [.version, .deleted], "columns named in another case")
            try expectEqual(try store.systemProperties(for: "Unknown"), [], "unknown table: empty, no error")
            try expectEqual(try store.systemProperties(for: store.operationTableName), [], "system table")
            try store.defineTable(TableSchema("Plain", ["deleted": .boolean]))
            try expectEqual(try store.systemProperties(for: "Plain"), [.deleted], "after adding a column")
            try store.upsert([["id": "a", "deleted": true, "VERSION": "7"]], into: "Spelled")
            try expectIdentical(try store.read(Query("Spelled", select: ["id"])).items.first, ["id": "a", "VERSION": "7"], "select adds version in its spelling")
        }
    }
}

/// `s` with ASCII letters alternately lower- and upper-cased (`mS_tAbLe…`).
func alternatingCase(_ s: String) -> String {
    s.enumerated().map { $0.offset % 2 == 0 ? $0.element.lowercased() : $0.element.uppercased() }.joined()
}

extension ConformanceSuite {
    /// The same `Query` value and the same read by id, run again and again, always answer from the
    /// current rows and the current definition: after writes, after a redefinition adds a column, inside
    /// a write transaction and in another spelling of the table name. (Backends may
    /// keep what they resolved for a query or a table between calls; this is what they must not keep.)
    public static func repeatedReadsSeeCurrentRowsAndDefinition(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(TableSchema("Repeat", ["n": .integer]))
            let head = Query("Repeat", sort: [SortKey("n")], top: 1)
            let counted = Query("Repeat", where: Field("n") > 0, top: 1, includeTotalCount: true)
            let chosen = Query("Repeat", sort: [SortKey("n", .descending)], top: 1, select: ["n"])
            try expectEqual(try store.read(head).items.count, 0, "empty table")
            try expectEqual(try store.read(counted).totalCount, 0, "empty count")
            try store.upsert([["id": "a", "n": 5]], into: "Repeat")
            try expectIdentical(try store.read(head).items.first, ["id": "a", "n": 5], "the row written since")
            try expectEqual(try store.read(counted).totalCount, 1, "count after one write")
            try store.upsert([["id": "b", "n": 2], ["id": "c", "n": 9]], into: "Repeat")
            try expectIdentical(try store.read(head).items.first, ["id": "b", "n": 2], "a new head")
            try expectEqual(try store.read(counted).totalCount, 3, "count after more writes")
            try expectEqual(try store.read(chosen).items.first?["n"], 9, "projection, newest rows")
            try expectIdentical(try store.read(table: "Repeat", id: "a"), ["id": "a", "n": 5], "read by id")

            try store.defineTable(TableSchema("Repeat", ["n": .integer, "extra": .string]))
            try expectIdentical(try store.read(head).items.first, ["id": "b", "n": 2, "extra": nil], "the new column, null")
            try expectIdentical(try store.read(table: "Repeat", id: "a"), ["id": "a", "n": 5, "extra": nil], "read by id: new column")
            try store.upsert([["id": "b", "extra": "x"]], into: "Repeat")
            try expectIdentical(try store.read(head).items.first, ["id": "b", "n": 2, "extra": "x"], "the new column, set")
            try expectIdentical(try store.read(table: "REPEAT", id: "B"), ["id": "b", "n": 2, "extra": "x"], "another spelling")

            try store.defineTable(TableSchema("Repeat", ["n": .integer, "extra": .string, "more": .boolean]))
            try store.write { tx in
                try expectIdentical(
                    try tx.read(head).items.first, ["id": "b", "n": 2, "extra": "x", "more": nil], "inside a transaction")
                try tx.upsert([["id": "b", "more": true]], into: "Repeat")
                try expectIdentical(
                    try tx.read(head).items.first, ["id": "b", "n": 2, "extra": "x", "more": true], "a write of the same transaction")
                try expectIdentical(
                    try tx.read(table: "Repeat", id: "b"), ["id": "b", "n": 2, "extra": "x", "more": true],
                    "read by id in the transaction")
            }
            try expectIdentical(try store.read(head).items.first, ["id": "b", "n": 2, "extra": "x", "more": true], "after the commit")
            try expectIdentical(
                try store.read(table: "Repeat", id: "c"), ["id": "c", "n": 9, "extra": nil, "more": nil], "read by id after the commit")
            try store.delete(ids: ["b"], from: "Repeat")
            try expectEqual(try store.read(head).items.first?["id"], "a", "after a delete")
            try expectEqual(try store.read(counted).totalCount, 2, "count after a delete")
            try expectEqual(try store.read(table: "Repeat", id: "b"), nil, "a deleted row")
        }
    }
}
