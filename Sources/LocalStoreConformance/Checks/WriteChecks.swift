import Foundation
import LocalStore

// Upsert: merge semantics, nulls, unknown columns, types and ids of items.

/// A table with one column of every type, for type checks.
let typedSchema = TableSchema(
    name: "Typed",
    columns: [
        Column("id", .string), Column("text", .string), Column("count", .integer), Column("ratio", .double),
        Column("flag", .boolean), Column("moment", .date), Column("blob", .binary), Column("doc", .json),
    ])

/// One value of every kind.
let sampleValuesByKind: [Value] = [
    .bool(true), .int(5), .double(2.5), .string("x"), .date(date(0)), .binary([1, 2]), .json(["a": 1]),
]

extension ConformanceSuite {
    /// A new row gets null for every column it does not set; a read returns every column and nothing else.
    public static func upsertInsertsNewRowWithNulls(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a", "title": "Buy milk"]], into: "TodoItem")
            let expected = todoRow("a", ["title": "Buy milk"])
            try expectIdentical(try store.read(table: "TodoItem", id: "a"), expected, "read by id of a new row")
            let items = try store.read(Query("TodoItem")).items
            try expectEqual(items.count, 1, "rows after one insert")
            try expectIdentical(items[0], expected, "read by query of a new row")
        }
    }

    /// Keys absent from an item keep their stored values (merge, not replace).
    public static func upsertMergesAbsentKeys(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            let full: Item = [
                "id": "a", "title": "one", "priority": 1, "score": 1.5, "complete": false, "due": .date(date(1)),
                "attachment": .binary([1, 2, 3]), "meta": .json(["k": [1, 2]]), "version": "v1",
            ]
            try store.upsert([full], into: "TodoItem")
            try store.upsert([["id": "a", "title": "two"]], into: "TodoItem")
            try store.upsert([["id": "a", "priority": 9, "version": "v2"]], into: "TodoItem")
            var expected = todoRow("a", full.values)
            expected["title"] = "two"
            expected["priority"] = 9
            expected["version"] = "v2"
            try expectIdentical(try store.read(table: "TodoItem", id: "a"), expected, "after two partial updates")
            try store.upsert([["id": "a"]], into: "TodoItem")
            try expectIdentical(try store.read(table: "TodoItem", id: "a"), expected, "an item with only an id changes nothing")
            try expectEqual(try store.count("TodoItem"), 1, "updates must not add rows")
        }
    }

    /// An explicit null clears a column, whatever its type; other columns keep their values.
    public static func upsertExplicitNullClears(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            let full: Item = [
                "id": "a", "title": "one", "priority": 1, "score": 1.5, "complete": true, "due": .date(date(1)),
                "attachment": .binary([0]), "meta": .json([]), "createdAt": .date(date(2)), "updatedAt": .date(date(3)),
                "version": "v1", "deleted": false,
            ]
            try store.upsert([full], into: "TodoItem")
            try store.upsert([["id": "a", "title": nil]], into: "TodoItem")
            var expected = full
            expected["title"] = .null
            try expectIdentical(try store.read(table: "TodoItem", id: "a"), expected, "after clearing title")
            var clearAll = Item(["id": "a"])
            for c in todoColumns where c != "id" { clearAll[c] = .null }
            try store.upsert([clearAll], into: "TodoItem")
            try expectIdentical(try store.read(table: "TodoItem", id: "a"), todoRow("a"), "after clearing every column")
        }
    }

    /// A key that is not a column fails with `unknownColumn` and writes nothing.
    public static func upsertUnknownColumnFails(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a", "title": "one"]], into: "TodoItem")
            let before = try snapshot(store, ["TodoItem"])
            try expectThrows(code: .unknownColumn, "update with an unknown key") {
                try store.upsert([["id": "a", "title": "two", "colour": "red"]], into: "TodoItem")
            }
            try expectThrows(code: .unknownColumn, "insert with an unknown key") {
                try store.upsert([["id": "b", "titel": "typo"]], into: "TodoItem")
            }
            try expectThrows(code: .unknownColumn, "a key that is not even an identifier") {
                try store.upsert([["id": "b", "bad key!": 1]], into: "TodoItem")
            }
            try expectThrows(code: .unknownColumn, "explicit strict options") {
                try store.upsert([["id": "b", "colour": nil]], into: "TodoItem", options: .strict)
            }
            try expectUnchanged(store, before, "a failed upsert must write nothing")
        }
    }

    /// With `ignoreUnknownColumns` keys that are not columns are dropped and the rest is written.
    public static func upsertIgnoringUnknownColumns(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert(
                [["id": "a", "title": "one", "colour": "red", "bad key!": 1, "__meta": .json(["x": 1])]], into: "TodoItem",
                options: .ignoringUnknownColumns)
            try expectIdentical(
                try store.read(table: "TodoItem", id: "a"), todoRow("a", ["title": "one"]), "unknown keys must be dropped")
            try store.upsert([["id": "b", "colour": "blue"]], into: "TodoItem", options: UpsertOptions(ignoreUnknownColumns: true))
            try expectIdentical(
                try store.read(table: "TodoItem", id: "b"), todoRow("b"), "an item with only unknown keys still creates its row")
            try store.upsert([["id": "a", "priority": 3, "colour": nil]], into: "TodoItem", options: .ignoringUnknownColumns)
            try expectIdentical(
                try store.read(table: "TodoItem", id: "a"), todoRow("a", ["title": "one", "priority": 3]),
                "update with unknown keys merges the known ones")
            let before = try snapshot(store, ["TodoItem"])
            try expectThrows(code: .typeMismatch, "ignoreUnknownColumns does not ignore type errors") {
                try store.upsert([["id": "a", "priority": "high", "colour": "red"]], into: "TodoItem", options: .ignoringUnknownColumns)
            }
            try expectThrows(code: .missingId, "ignoreUnknownColumns does not invent ids") {
                try store.upsert([["colour": "red"]], into: "TodoItem", options: .ignoringUnknownColumns)
            }
            try expectUnchanged(store, before, "failed upserts with ignoreUnknownColumns")
        }
    }

    /// A value of the wrong type is `typeMismatch`, whose message names the table, the column and the
    /// value's type; nothing is written.
    public static func upsertTypeMismatch(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            try store.upsert([["id": "existing", "text": "keep"]], into: "Typed")
            let before = try snapshot(store, ["Typed"])
            var mismatches = 0
            for column in typedSchema.columns where column.name != "id" {
                for value in sampleValuesByKind where !column.type.accepts(value) {
                    mismatches += 1
                    for id in ["existing", "new"] {
                        let error = try expectThrows(code: .typeMismatch, "\(value.kindName) into \(column.type) column '\(column.name)'") {
                            try store.upsert([["id": .string(id), column.name: value]], into: "Typed")
                        }
                        for part in ["Typed", column.name, value.kindName] {
                            try expect(
                                error.message.contains(part),
                                "the typeMismatch message must name '\(part)' (\(value.kindName) into \(column.name)): \(error.message)")
                        }
                    }
                }
            }
            try expectEqual(mismatches, 41, "the suite's own count of mismatching pairs")
            try expectThrows(code: .typeMismatch, "an integer id on a user table") {
                try store.upsert([["id": 1, "text": "x"]], into: "Typed")
            }
            try expectThrows(code: .typeMismatch, "a json string is not a string") {
                try store.upsert([["id": "j", "text": .json("x")]], into: "Typed")
            }
            try expectThrows(code: .typeMismatch, "a double with an integral value is still not an integer") {
                try store.upsert([["id": "j", "count": 2.0]], into: "Typed")
            }
            try expectUnchanged(store, before, "type mismatches must write nothing")
        }
    }

    /// An integer written to a double column is stored and returned as a double.
    public static func upsertIntegerIntoDoubleColumn(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            let ints: [Int64] = [3, -7, 0, Int64.max, Int64.min, 9_007_199_254_740_993]
            try store.upsert(ints.enumerated().map { ["id": .string("r\($0.offset)"), "ratio": .int($0.element)] }, into: "Typed")
            for (n, i) in ints.enumerated() {
                let item = try unwrap(try store.read(table: "Typed", id: "r\(n)"), "row r\(n)")
                try expectIdentical(item["ratio"], .double(Double(i)), "int \(i) written to a double column")
            }
            try expectEqual(try readIds(store, Query("Typed", where: Field("ratio") == 3)), ["r0"], "query for the converted value")
            try expectEqual(
                try readIds(store, Query("Typed", where: Field("ratio") == .literal(.double(-7)))), ["r1"], "query with a double literal")
            try store.upsert([["id": "r0", "ratio": .int(4)]], into: "Typed")
            try expectIdentical(try store.read(table: "Typed", id: "r0")?["ratio"], .double(4), "update with an int")
        }
    }

    /// NaN and ±infinity are `invalidValue`, also nested inside json and as a date's time interval;
    /// nothing is written.
    public static func upsertNonFiniteNumbersRefused(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            try store.upsert([["id": "a", "ratio": 1.5, "doc": .json(["x": 1.5])]], into: "Typed")
            let before = try snapshot(store, ["Typed"])
            for d in [Double.nan, -Double.nan, Double.signalingNaN, Double.infinity, -Double.infinity] {
                for id in ["a", "b"] {
                    try expectThrows(code: .invalidValue, "\(d) in a double column") {
                        try store.upsert([["id": .string(id), "ratio": .double(d)]], into: "Typed")
                    }
                    let error = try expectThrows(code: .invalidValue, "a date \(d) seconds from 2001") {
                        try store.upsert([["id": .string(id), "moment": .date(Date(timeIntervalSinceReferenceDate: d))]], into: "Typed")
                    }
                    try expect(error.message.contains("moment") && error.message.contains("Typed"), "the error names table and column: \(error.message)")
                    let documents: [JSON] = [.double(d), [1, .double(d)], ["x": ["y": .double(d)]], [["a": [.double(d)]]]]
                    for doc in documents {
                        try expectThrows(code: .invalidValue, "\(d) inside json \(doc)") {
                            try store.upsert([["id": .string(id), "doc": .json(doc)]], into: "Typed")
                        }
                    }
                }
            }
            try expectUnchanged(store, before, "non-finite numbers must write nothing")
        }
    }

    /// A string, binary or json value larger than `TableSchema.maximumValueBytes`, and an item larger
    /// than `TableSchema.maximumItemBytes`, are `invalidValue` naming the table, column and size;
    /// nothing is written. The boundary is checked exactly with limits lowered through `UpsertOptions`
    /// (a value at the limit is stored and read back identically, one byte more is refused): the same
    /// code enforces the defaults, and values of hundreds of MB on every backend would make the suite slow.
    /// One byte over the real maximum is refused too, also when the options ask for more.
    public static func upsertValueSizeLimit(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            let limit = 1000
            let options = UpsertOptions(maximumValueBytes: limit)
            // "é" is 2 UTF-8 bytes; a json string of tabs takes 2 bytes per tab (`\t`): {"k":"…"} is 8 + 2n.
            let atLimit: [(String, Value)] = [
                ("text", .string(String(repeating: "é", count: limit / 2))),
                ("blob", .binary([UInt8](repeating: 7, count: limit))),
                ("doc", .json(["k": .string(String(repeating: "\t", count: (limit - 8) / 2))])),
            ]
            let overLimit: [(String, Value)] = [
                ("text", .string(String(repeating: "é", count: limit / 2 - 1) + "abc")),
                ("blob", .binary([UInt8](repeating: 7, count: limit + 1))),
                ("doc", .json(["kk": .string(String(repeating: "\t", count: (limit - 8) / 2))])),
            ]
            for (column, value) in atLimit {
                try expectEqual(TableSchema.byteCount(of: value), limit, "the size of the \(column) value at the limit")
                try store.upsert([["id": .string(column), column: value]], into: "Typed", options: options)
                try expectIdentical(try store.read(table: "Typed", id: .string(column))?[column], value, "\(column) at the limit")
            }
            let before = try snapshot(store, ["Typed"])
            for (column, value) in overLimit {
                for id in [column, "new"] {
                    let error = try expectThrows(code: .invalidValue, "\(column) one byte over the limit") {
                        try store.upsert([["id": .string(id), column: value]], into: "Typed", options: options)
                    }
                    try expectEqual(error.table, "Typed", "the table of the error")
                    try expectEqual(error.column, column, "the column of the error")
                    try expect(error.message.contains("\(limit + 1) bytes"), "the message names the size: \(error.message)")
                }
            }
            // The item limit: the id "i" (1 byte) + 499 + 500 bytes.
            let itemOptions = UpsertOptions(maximumItemBytes: limit)
            let blob = Value.binary(Array(repeating: 1, count: 500))
            let item: Item = ["id": "i", "text": .string(String(repeating: "x", count: 499)), "blob": blob]
            var over = item
            over["blob"] = .binary(Array(repeating: 1, count: 501))
            let error = try expectThrows(code: .invalidValue, "an item one byte over the limit") {
                try store.upsert([over], into: "Typed", options: itemOptions)
            }
            try expectEqual(error.table, "Typed", "the table of the item error")
            try expectEqual(error.column, "blob", "the column where the item passes the limit in schema order")
            try expect(error.message.contains("\(limit + 1) bytes"), "the message names the size: \(error.message)")
            try expectThrows(code: .invalidValue, "a value one byte over the real maximum, with options asking for more") {
                let big = Value.binary([UInt8](repeating: 0, count: TableSchema.maximumValueBytes + 1))
                try store.upsert([["id": "big", "blob": big]], into: "Typed", options: UpsertOptions(maximumValueBytes: .max))
            }
            try expectUnchanged(store, before, "values and items over the limit must write nothing")
            try store.upsert([item], into: "Typed", options: itemOptions)
            try expectIdentical(try store.read(table: "Typed", id: "i")?["blob"], blob, "an item at the limit")
        }
    }

    /// An item that leaves columns unset keeps their stored values, so the item limit applies to the row the
    /// update leaves: a partial update that would grow a stored row past `UpsertOptions.maximumItemBytes`
    /// is `invalidValue` naming the table and the column where the sum passes the limit in schema order
    /// (possibly a column the item does not set), and writes nothing — also for a second item of a batch
    /// merging into the row the first one wrote, and inside a `write {}` that goes on after the error. A
    /// row at the limit exactly is accepted.
    public static func upsertPartialUpdateSizeLimit(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(typedSchema)
            let options = UpsertOptions(maximumItemBytes: 1000)
            // "i" (1 byte) + 499: the item alone is 500 bytes.
            try store.upsert([["id": "i", "text": .string(String(repeating: "x", count: 499))]], into: "Typed", options: options)
            // + 500 bytes of blob, not set together with the text: the row is at the limit exactly.
            let blob = Value.binary(Array(repeating: 3, count: 500))
            try store.upsert([["id": "i", "blob": blob]], into: "Typed", options: options)
            guard let atLimit = try store.read(table: "Typed", id: "i") else {
                throw ConformanceFailure("the row at the limit was not stored")
            }
            try expectIdentical(atLimit["blob"], blob, "a partial update leaving a row at the limit is stored")
            try expectIdentical(atLimit["text"], .string(String(repeating: "x", count: 499)), "the text kept by the partial update")
            let before = try snapshot(store, ["Typed"])
            // 8 more bytes: the sum in schema order (id, text, count, …, blob) passes the limit at blob.
            let error = try expectThrows(code: .invalidValue, "a partial update growing the row one value past the limit") {
                try store.upsert([["id": "I", "count": 5]], into: "Typed", options: options)
            }
            try expectEqual(error.table, "Typed", "the table of the error")
            try expectEqual(error.column, "blob", "the column where the row passes the limit in schema order")
            try expect(error.message.contains("1008 bytes"), "the message names the size of the row: \(error.message)")
            try expectThrows(code: .invalidValue, "the same, one item of a batch") {
                try store.upsert([["id": "j", "count": 1], ["id": "i", "flag": true]], into: "Typed", options: options)
            }
            try expectThrows(code: .invalidValue, "a second item of a batch merging into the row the first one writes") {
                try store.upsert(
                    [["id": "n", "text": .string(String(repeating: "y", count: 600))], ["id": "N", "blob": blob]],
                    into: "Typed", options: options)
            }
            try expectUnchanged(store, before, "refused partial updates must write nothing")
            // Inside a transaction: the refused call changes nothing and the transaction goes on.
            try store.write { tx in
                do {
                    try tx.upsert([["id": "i", "moment": .date(date(5))]], into: "Typed", options: options)
                    throw LocalStoreError(.internal, "a partial update past the limit inside write {} was accepted")
                } catch let e as LocalStoreError where e.code == .invalidValue {}
                try tx.upsert([["id": "k", "count": 2]], into: "Typed", options: options)
            }
            try expectIdentical(try store.read(table: "Typed", id: "i"), atLimit, "the row the refused update left alone")
            try expectEqual(try store.read(table: "Typed", id: "k")?["count"], .int(2), "the write after the refused call")
            // Clearing a value makes room: the same update fits once the text is null.
            try store.upsert([["id": "i", "text": nil, "count": 5]], into: "Typed", options: options)
            try expectEqual(try store.read(table: "Typed", id: "i")?["count"], .int(5), "a partial update that fits")
        }
    }

    /// An item without an id, or with a null id, is `missingId`.
    public static func upsertMissingId(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a"]], into: "TodoItem")
            let before = try snapshot(store, ["TodoItem"])
            try expectThrows(code: .missingId, "an empty item") { try store.upsert([[:]], into: "TodoItem") }
            try expectThrows(code: .missingId, "an item without id") { try store.upsert([["title": "x"]], into: "TodoItem") }
            try expectThrows(code: .missingId, "a null id") { try store.upsert([["id": nil, "title": "x"]], into: "TodoItem") }
            try expectThrows(code: .missingId, "a null ID") { try store.upsert([["ID": nil]], into: "TodoItem") }
            try expectThrows(code: .missingId, "a missing id on the operations table") {
                try store.upsert([["table": "TodoItem", "itemId": "a"]], into: store.operationTableName)
            }
            try expectUnchanged(store, before, "missing ids must write nothing")
        }
    }

    /// An item that sets one column twice under different case is `invalidValue`.
    public static func upsertDuplicateKeyInDifferentCase(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a", "title": "one"]], into: "TodoItem")
            let before = try snapshot(store, ["TodoItem"])
            try expectThrows(code: .invalidValue, "title and Title") {
                try store.upsert([["id": "a", "title": "x", "Title": "y"]], into: "TodoItem")
            }
            try expectThrows(code: .invalidValue, "the same value twice still sets the column twice") {
                try store.upsert([["id": "b", "PRIORITY": 1, "priority": 1]], into: "TodoItem")
            }
            try expectThrows(code: .invalidValue, "id and ID") {
                try store.upsert([["id": "c", "ID": "c"]], into: "TodoItem")
            }
            try expectThrows(code: .invalidValue, "with ignoreUnknownColumns too") {
                try store.upsert([["id": "a", "score": 1, "SCORE": 2, "colour": "red"]], into: "TodoItem", options: .ignoringUnknownColumns)
            }
            try expectUnchanged(store, before, "duplicate keys must write nothing")
        }
    }

    /// Item keys and table names match case-insensitively; returned items use the defined spelling.
    public static func upsertNamesMatchCaseInsensitively(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["ID": "a", "TITLE": "one", "Priority": 2, "UPDATEDAT": .date(date(5))]], into: "todoitem")
            try store.upsert([["Id": "a", "sCoRe": 0.5]], into: "TODOITEM")
            let expected = todoRow("a", ["title": "one", "priority": 2, "updatedAt": .date(date(5)), "score": 0.5])
            try expectIdentical(try store.read(table: "tOdOiTeM", id: "a"), expected, "keys in any case, defined spelling returned")
            try expectIdentical(try store.read(Query("TODOitem")).items.first, expected, "query on the table in another case")
            // Names match ignoring ASCII case only, byte for byte otherwise: a KELVIN SIGN (U+212A, canonically
            // equivalent to `K` for Swift's `==`) names no table, nor does an `e` with a combining accent.
            try store.defineTable(TableSchema("Kelvin", ["n": .integer]))
            try store.upsert([["id": "k", "n": 1]], into: "Kelvin")
            for name in ["\u{212A}elvin", "\u{212A}ELVIN", "TodoIt\u{212A}em"] {
                try expectThrows(code: .unknownTable, "read by id from \(name.debugDescription)") { _ = try store.read(table: name, id: "k") }
                try expectThrows(code: .unknownTable, "query of \(name.debugDescription)") { _ = try store.read(Query(name)) }
                try expectThrows(code: .unknownTable, "upsert into \(name.debugDescription)") { try store.upsert([["id": "k", "n": 2]], into: name) }
                try expectThrows(code: .unknownTable, "delete(ids:) from \(name.debugDescription)") { try store.delete(ids: ["k"], from: name) }
                try expectThrows(code: .unknownTable, "delete(matching:) of \(name.debugDescription)") { try store.delete(matching: Query(name)) }
                try expectNil(try store.schema(of: name), "schema(of: \(name.debugDescription))")
                try store.write { tx in
                    try expectThrows(code: .unknownTable, "in a write: read by id from \(name.debugDescription)") { _ = try tx.read(table: name, id: "k") }
                    try expectThrows(code: .unknownTable, "in a write: upsert into \(name.debugDescription)") { try tx.upsert([["id": "k", "n": 2]], into: name) }
                }
            }
            try expectIdentical(try store.read(table: "Kelvin", id: "k")?["n"], .int(1), "the Kelvin table untouched")
            // Column names likewise.
            try store.defineTable(TableSchema("Kinds", ["Kind": .integer]))
            try store.upsert([["id": "a", "Kind": 1]], into: "Kinds")
            for column in ["\u{212A}ind", "\u{212A}IND"] {
                try expectThrows(code: .unknownColumn, "upsert of column \(column.debugDescription)") {
                    try store.upsert([Item(["id": .string("a"), column: .int(2)])], into: "Kinds")
                }
                try expectThrows(code: .unknownColumn, "a query on column \(column.debugDescription)") {
                    _ = try store.read(Query("Kinds", where: Field(column) == 1))
                }
                try expectThrows(code: .unknownColumn, "a sort on column \(column.debugDescription)") {
                    _ = try store.read(Query("Kinds", sort: [SortKey(column)]))
                }
            }
            try expectIdentical(try store.read(table: "Kinds", id: "a")?["Kind"], .int(1), "the Kind column untouched")
        }
    }

    /// Empty batches are no-ops; a bad item anywhere in a batch leaves the store exactly as before.
    public static func batchIsAllOrNothing(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a", "title": "one", "priority": 1], ["id": "b", "title": "two"]], into: "TodoItem")
            let before = try snapshot(store, ["TodoItem"])
            let good: [Item] = [["id": "a", "title": "changed"], ["id": "c", "title": "new"], ["id": "b", "priority": nil]]
            let bad: [(String, Item, LocalStoreError.Code)] = [
                ("type mismatch", ["id": "d", "priority": "high"], .typeMismatch),
                ("unknown column", ["id": "d", "colour": "red"], .unknownColumn),
                ("missing id", ["title": "no id"], .missingId),
                ("null id", ["id": nil], .missingId),
                ("NaN", ["id": "d", "score": .double(.nan)], .invalidValue),
                ("duplicate key", ["id": "d", "title": "x", "TITLE": "y"], .invalidValue),
                ("integer id", ["id": 4], .typeMismatch),
            ]
            for (what, item, code) in bad {
                for position in 0...good.count {
                    var batch = good
                    batch.insert(item, at: position)
                    try expectThrows(code: code, "\(what) at position \(position) of a batch") {
                        try store.upsert(batch, into: "TodoItem")
                    }
                    try expectUnchanged(store, before, "a failed batch (\(what) at position \(position))")
                }
            }
            try store.upsert([], into: "TodoItem")
            try store.upsert([], into: "todoitem", options: .ignoringUnknownColumns)
            try expectUnchanged(store, before, "an empty batch")
            try expectThrows(code: .unknownTable, "an empty batch on an unknown table") { try store.upsert([], into: "Nope") }
            try store.upsert(good, into: "TodoItem")
            try expectEqual(try store.count("TodoItem"), 3, "the good batch on its own")
        }
    }

    /// Items with the same id in one batch are applied in order (merging), under any spelling of the id.
    public static func batchSameIdTwice(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert(
                [
                    ["id": "a", "title": "first", "priority": 1],
                    ["id": "a", "title": "second"],
                    ["id": "A", "score": 2.5],
                    ["id": "b", "title": "only"],
                    ["id": "a", "priority": nil],
                ], into: "TodoItem")
            try expectEqual(try store.count("TodoItem"), 2, "rows after a batch with repeated ids")
            try expectIdentical(
                try store.read(table: "TodoItem", id: "a"), todoRow("a", ["title": "second", "score": 2.5]),
                "repeated ids are merged in order; the newest spelling wins")
            try store.upsert([["id": "c", "title": "x"], ["id": "C", "title": "y"]], into: "TodoItem")
            try expectIdentical(try store.read(table: "TodoItem", id: "c"), todoRow("C", ["title": "y"]), "last write wins")
        }
    }
}
