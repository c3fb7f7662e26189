import Foundation
import LocalStore

// Ids (case-insensitive matching, newest spelling, NUL rule), unknown tables, reads, select, counts.

extension ConformanceSuite {
    /// String ids match case-insensitively on read (by id and by query).
    public static func idsMatchCaseInsensitivelyOnRead(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "Item-A", "title": "a"], ["id": "item-b", "title": "b"]], into: "TodoItem")
            for spelling in ["Item-A", "item-a", "ITEM-A", "iTeM-a"] {
                let item = try unwrap(try store.read(table: "TodoItem", id: spelling), "read with id \(spelling)")
                try expectSameIds([item["id"]?.stringValue ?? ""], ["Item-A"], "the stored spelling is returned")
                try expectSameIds(try readIds(store, Query("TodoItem", where: Field("id") == lit(spelling))), ["Item-A"], "id == \(spelling)")
                try expectSameIds(
                    try readIds(store, Query("TodoItem", where: Field("id").isIn([.string(spelling), "ITEM-B"]))), ["Item-A", "item-b"],
                    "id IN [\(spelling), ITEM-B]")
            }
            try expectNil(try store.read(table: "TodoItem", id: "Item-A "), "a trailing space is a different id")
            try expectNil(try store.read(table: "TodoItem", id: "Item_A"), "'_' is not a wildcard")
        }
    }

    /// Long string ids (keys longer than an engine's key limit: LMDB stores a prefix and compares the
    /// rest) are read by id exactly: ids sharing a 600-character prefix each read their own row, in any
    /// letter case, a long id that only shares the prefix reads nothing, and reads of long and short
    /// ids in turn each get their own row.
    public static func longIdsReadById(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            let shared = String(repeating: "Long", count: 150)
            let ids = [shared + "-a", shared + "-b", shared + String(repeating: "z", count: 400), "short"]
            try store.upsert(ids.enumerated().map { n, id in ["id": .string(id), "priority": .int(Int64(n))] }, into: "TodoItem")
            for round in 0..<2 {
                for (n, id) in ids.enumerated() {
                    let spelling = round == 0 ? id : id.uppercased()
                    let item = try unwrap(try store.read(table: "TodoItem", id: .string(spelling)), "read of id #\(n) (round \(round))")
                    try expectEqual(item["id"], .string(id), "id #\(n) reads its own row (round \(round))")
                    try expectEqual(item["priority"], .int(Int64(n)), "id #\(n) reads its own values (round \(round))")
                }
            }
            try expectNil(try store.read(table: "TodoItem", id: .string(shared + "-c")), "a long id sharing only the prefix")
            try expectNil(try store.read(table: "TodoItem", id: .string(shared)), "the shared prefix alone")
            try expectNil(try store.read(table: "TodoItem", id: .string(shared + "-a ")), "a long id with a trailing space")
        }
    }

    /// An upsert under another spelling of an id updates the same row and stores the newest spelling.
    public static func idsUpsertUpdatesSameRowWithNewestSpelling(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "abc", "title": "one", "priority": 1]], into: "TodoItem")
            try store.upsert([["id": "ABC", "priority": 2]], into: "TodoItem")
            try expectEqual(try store.count("TodoItem"), 1, "one row after an update under another spelling")
            try expectIdentical(
                try store.read(table: "TodoItem", id: "abc"), todoRow("ABC", ["title": "one", "priority": 2]),
                "merged, stored under the newest spelling")
            try store.upsert([["id": "aBc"]], into: "TodoItem")
            try expectSameIds(try readIds(store, Query("TodoItem")), ["aBc"], "an update with only the id still respells it")
            try store.write { tx in try tx.upsert([["id": "AbC", "title": "tx"]], into: "TodoItem", options: .strict) }
            try expectIdentical(
                try store.read(table: "TodoItem", id: "ABC"), todoRow("AbC", ["title": "tx", "priority": 2]), "inside a transaction")
        }
    }

    /// Deleting by id (and by an id predicate) matches case-insensitively.
    public static func idsDeleteCaseInsensitively(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "Item-A"], ["id": "item-b"], ["id": "ITEM-C"], ["id": "item-d"]], into: "TodoItem")
            try store.delete(ids: ["ITEM-a"], from: "TodoItem")
            try expectSameIds(try readIds(store, Query("TodoItem")), ["item-b", "ITEM-C", "item-d"], "after delete(ids: [ITEM-a])")
            try store.delete(ids: [.string("Item-B"), .string("item-c")], from: "todoitem")
            try expectSameIds(try readIds(store, Query("TodoItem")), ["item-d"], "after deleting two ids in other spellings")
            try store.delete(matching: Query("TodoItem", where: Field("ID") == "ITEM-D"))
            try expectEqual(try store.count("TodoItem"), 0, "after delete(matching: id == ITEM-D)")
        }
    }

    /// Ids follow SQLite's NOCASE rule exactly: an embedded NUL ends the comparison (then lengths
    /// decide), and only ASCII letters fold. Nothing else collides.
    public static func idsFollowNoCaseRuleExactly(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a\u{0}b", "title": "first"]], into: "TodoItem")
            try store.upsert([["id": "A\u{0}c", "priority": 1]], into: "TodoItem")
            try expectSameIds(try readIds(store, Query("TodoItem")), ["A\u{0}c"], "'a\\0b' and 'A\\0c' are the same id (same length)")
            try expectIdentical(
                try store.read(table: "TodoItem", id: "a\u{0}z"), todoRow("A\u{0}c", ["title": "first", "priority": 1]),
                "read with a third spelling after the NUL")
            try expectNil(try store.read(table: "TodoItem", id: "a\u{0}"), "a shorter id is different")
            try expectNil(try store.read(table: "TodoItem", id: "a\u{0}bc"), "a longer id is different")
            try expectNil(try store.read(table: "TodoItem", id: "a"), "the part before the NUL is different")
            try store.upsert([["id": "a\u{0}"], ["id": "a\u{0}bc"], ["id": "a"], ["id": "\u{0}"], ["id": "\u{0}\u{0}"]], into: "TodoItem")
            try expectEqual(try store.count("TodoItem"), 6, "ids of other lengths are distinct")

            // Non-ASCII case variants, canonically equivalent spellings and look-alikes are all distinct.
            let distinct = [
                "é", "É", "e\u{301}", "straße", "STRASSE", "ı", "i", "ﬀ", "ff", "Ω", "ω", "\u{212A}", "k", "Ä", "A\u{308}",
            ]
            try store.defineTable(TableSchema("Distinct", ["n": .integer]))
            try store.upsert(distinct.enumerated().map { ["id": .string($0.element), "n": .int(Int64($0.offset))] }, into: "Distinct")
            try expectEqual(try store.count("Distinct"), distinct.count, "non-ASCII case variants and equivalent spellings are distinct ids")
            for (n, id) in distinct.enumerated() {
                let item = try unwrap(try store.read(table: "Distinct", id: id), "read \(debugText(id))")
                try expectIdentical(item["id"], .string(id), "the id bytes of \(debugText(id))")
                try expectIdentical(item["n"], .int(Int64(n)), "the row of \(debugText(id))")
                try expectSameIds(try readIds(store, Query("Distinct", where: Field("id") == lit(id))), [id], "id == \(debugText(id))")
            }
            try store.upsert([["id": "I", "n": 100], ["id": "K", "n": 101]], into: "Distinct")
            try expectEqual(try store.count("Distinct"), distinct.count, "'I' is 'i' and 'K' is 'k' (ASCII folding)")
            try expectIdentical(try store.read(table: "Distinct", id: "ı")?["n"], .int(5), "dotless i untouched")
            try expectIdentical(try store.read(table: "Distinct", id: "\u{212A}")?["n"], .int(11), "the Kelvin sign untouched")
        }
    }

    /// Reading or deleting with an id of the wrong type is `typeMismatch`.
    public static func idsOfWrongTypeAreTypeMismatch(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "1"]], into: "TodoItem")
            _ = try store.appendOperation(table: "TodoItem", itemId: "1")
            let before = try snapshot(store, try allTableNames(store))
            for wrong: Value in [.int(1), .double(1), .bool(true), .binary([0x31])] {
                try expectThrows(code: .typeMismatch, "read a user table with id \(wrong)") {
                    try store.read(table: "TodoItem", id: wrong)
                }
                try expectThrows(code: .typeMismatch, "delete from a user table with id \(wrong)") {
                    try store.delete(ids: [wrong], from: "TodoItem")
                }
                try expectThrows(code: .typeMismatch, "delete a valid and a wrong id") {
                    try store.delete(ids: [.string("1"), wrong], from: "TodoItem")
                }
            }
            for wrong: Value in [.string("1"), .double(1)] {
                try expectThrows(code: .typeMismatch, "read the operations table with id \(wrong)") {
                    try store.read(table: store.operationTableName, id: wrong)
                }
                try expectThrows(code: .typeMismatch, "delete from the operations table with id \(wrong)") {
                    try store.delete(ids: [.int(1), wrong], from: store.operationTableName)
                }
            }
            try expectThrows(code: .typeMismatch, "an integer id on the errors table") {
                try store.read(table: store.errorTableName, id: .int(1))
            }
            try expectUnchanged(store, before, "failed deletes must delete nothing")
        }
    }

    /// A missing row reads as `nil`, not as an error, on user and system tables.
    public static func readMissingRowIsNil(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try expectNil(try store.read(table: "TodoItem", id: "nope"), "empty table")
            try store.upsert([["id": "a"]], into: "TodoItem")
            try expectNil(try store.read(table: "TodoItem", id: "b"), "absent id")
            try expectNil(try store.read(table: "TodoItem", id: ""), "empty id")
            try expectNil(try store.read(table: store.operationTableName, id: .int(1)), "operations table")
            try expectNil(try store.operation(id: 7), "operation(id:)")
            try expectNil(try store.read(table: store.errorTableName, id: "x"), "errors table")
            try expectNil(try store.read(table: store.configTableName, id: "x"), "config table")
            try expectNil(try store.deltaToken(table: "TodoItem", queryId: "q"), "absent delta token")
        }
    }

    /// Every call on an unknown table is `unknownTable`, except `delete(ids:)` with an empty list (a
    /// no-op), `schema(of:)` (nil) and `systemProperties(for:)` (empty).
    public static func unknownTableForEveryCall(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            func checkAll(_ access: any LocalStoreAccess, _ context: String) throws {
                try expectThrows(code: .unknownTable, "\(context): read by id") { try access.read(table: "Nope", id: "a") }
                try expectThrows(code: .unknownTable, "\(context): read by query") { try access.read(Query("Nope")) }
                try expectThrows(code: .unknownTable, "\(context): query with a predicate") {
                    try access.read(Query("Nope", where: Field("x") == 1, sort: [SortKey("y")], select: ["z"]))
                }
                try expectThrows(code: .unknownTable, "\(context): count") { try access.count("Nope") }
                try expectThrows(code: .unknownTable, "\(context): upsert") { try access.upsert([["id": "a"]], into: "Nope") }
                try expectThrows(code: .unknownTable, "\(context): upsert ignoring unknown columns") {
                    try access.upsert([["id": "a"]], into: "Nope", options: .ignoringUnknownColumns)
                }
                try expectThrows(code: .unknownTable, "\(context): empty upsert") { try access.upsert([], into: "Nope") }
                try expectThrows(code: .unknownTable, "\(context): delete ids") { try access.delete(ids: ["a"], from: "Nope") }
                try expectThrows(code: .unknownTable, "\(context): delete matching") { try access.delete(matching: Query("Nope")) }
                try access.delete(ids: [Value](), from: "Nope")
                try access.delete(ids: [String](), from: "Nope")
                try expectNil(try access.schema(of: "Nope"), "\(context): schema(of:) of an unknown table")
                try expectEqual(try access.systemProperties(for: "Nope"), [], "\(context): systemProperties(for:) of an unknown table")
            }
            let before = try snapshot(store, try allTableNames(store))
            try checkAll(store, "store")
            try store.write { tx in try checkAll(tx, "transaction") }
            try expectUnchanged(store, before, "calls on an unknown table")
            try expectEqual(try store.tableSchemas().map(\.name), ["TodoItem"], "no table was created on the way")
        }
    }

    /// A read returns every column (null for unset ones) and nothing else, with the defined spelling.
    public static func readReturnsEveryColumn(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert([["id": "a"], ["id": "b", "title": "b", "meta": .json(nil)]], into: "TodoItem")
            for item in try store.read(Query("todoitem")).items {
                try expectEqual(Set(item.values.keys), Set(todoColumns), "the keys of a read item")
            }
            try expectIdentical(
                try store.read(table: "TodoItem", id: "b"), todoRow("b", ["title": "b", "meta": .json(.null)]),
                "json null is a value, not a null column")
            try store.defineTable(TableSchema("OnlyId", [:]))
            try store.upsert([["id": "x"]], into: "OnlyId")
            try expectIdentical(try store.read(table: "OnlyId", id: "x"), ["id": "x"], "a table with only an id")
        }
    }

    /// `select` returns exactly the selected columns plus `version` when the table has one; an unknown
    /// selected name is `unknownColumn`.
    public static func selectReturnsSelectedColumnsPlusVersion(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.defineTable(TableSchema("Plain", ["title": .string, "n": .integer]))
            try store.upsert([["id": "a", "title": "t", "priority": 1, "version": "v1"]], into: "TodoItem")
            try store.upsert([["id": "a", "title": "t", "n": 1]], into: "Plain")
            func selected(_ table: String, _ columns: [String]) throws -> Item {
                let items = try store.read(Query(table, select: columns)).items
                try expectEqual(items.count, 1, "one row selected from \(table)")
                return items[0]
            }
            try expectIdentical(try selected("TodoItem", ["title"]), ["title": "t", "version": "v1"], "title plus version")
            try expectIdentical(try selected("TodoItem", ["TITLE", "Priority"]), ["title": "t", "priority": 1, "version": "v1"], "names in any case")
            try expectIdentical(try selected("TodoItem", ["id", "version"]), ["id": "a", "version": "v1"], "id and version")
            try expectIdentical(try selected("TodoItem", ["title", "title", "TITLE"]), ["title": "t", "version": "v1"], "repeated names")
            try expectIdentical(try selected("TodoItem", []), ["version": "v1"], "an empty selection still has version")
            try expectIdentical(try selected("TodoItem", ["due"]), ["due": nil, "version": "v1"], "a null column is returned")
            try expectIdentical(try selected("Plain", ["n"]), ["n": 1], "no version column, nothing added")
            try expectIdentical(try selected("Plain", ["ID", "title"]), ["id": "a", "title": "t"], "id selected in another case")
            try expectIdentical(try selected("Plain", []), [:], "an empty selection without version")
            let filtered = try store.read(
                Query("TodoItem", where: Field("priority") == 1, sort: [SortKey("score")], select: ["priority"], includeTotalCount: true))
            try expectEqual(filtered, ReadResult(items: [["priority": 1, "version": "v1"]], totalCount: 1), "select with predicate and sort on other columns")
            try expectThrows(code: .unknownColumn, "select an unknown column") { try store.read(Query("TodoItem", select: ["title", "colour"])) }
            try expectThrows(code: .unknownColumn, "select version on a table without it") { try store.read(Query("Plain", select: ["version"])) }
        }
    }

    /// `includeTotalCount` gives the number of all matches ignoring skip and top (nil without it);
    /// `top: 0` returns no items and still the count; negative skip or top is `invalidQuery`.
    public static func totalCountSkipAndTop(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            try store.upsert((1...20).map { ["id": .string("r\($0)"), "priority": .int(Int64($0 % 4))] }, into: "TodoItem")
            let matching = Field("priority") != 0  // 15 rows
            for (skip, top) in [(0, nil), (0, 5), (5, 5), (14, 5), (15, 5), (100, nil), (0, 0), (3, 0), (0, 100), (100, 0)] as [(Int, Int?)] {
                let counted = try store.read(Query("TodoItem", where: matching, skip: skip, top: top, includeTotalCount: true))
                try expectEqual(counted.totalCount, 15, "total count with skip \(skip) top \(String(describing: top))")
                let expectedCount = max(0, min(top ?? Int.max, 15 - skip))
                try expectEqual(counted.items.count, expectedCount, "items with skip \(skip) top \(String(describing: top))")
                let uncounted = try store.read(Query("TodoItem", where: matching, skip: skip, top: top))
                try expectNil(uncounted.totalCount, "totalCount without includeTotalCount")
                try expectEqual(uncounted.items, counted.items, "the same items with and without the count")
            }
            try expectEqual(try store.read(Query("TodoItem", includeTotalCount: true)).totalCount, 20, "count without predicate")
            try expectEqual(try store.read(Query("TodoItem", where: .false, includeTotalCount: true)).totalCount, 0, "count of nothing")
            try expectEqual(try store.read(Query("TodoItem", where: .false, includeTotalCount: true)).items, [], "no items")
            try expectEqual(try store.count("TodoItem", where: Field("priority") == 0), 5, "count(where:)")
            for (skip, top) in [(-1, nil), (0, -1), (-5, -5), (Int.min, nil), (0, Int.min)] as [(Int, Int?)] {
                try expectThrows(code: .invalidQuery, "skip \(skip) top \(String(describing: top))") {
                    try store.read(Query("TodoItem", skip: skip, top: top, includeTotalCount: true))
                }
                try expectThrows(code: .invalidQuery, "delete with skip \(skip) top \(String(describing: top))") {
                    try store.delete(matching: Query("TodoItem", skip: skip, top: top))
                }
            }
            try expectEqual(try store.read(Query("TodoItem", skip: Int.max, top: Int.max)).items, [], "huge skip and top")
            try expectEqual(try store.read(Query("TodoItem", skip: 19, top: Int.max)).items.count, 1, "huge top")
            try expectEqual(try store.count("TodoItem"), 20, "failed deletes delete nothing")
        }
    }

    /// Sorting: keys in order, nulls first ascending and last descending, `id` (case-insensitive)
    /// as the final tie-break, field names in any case.
    public static func sortOrderNullsAndTieBreak(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(todoSchema)
            let rows: [Item] = [
                ["id": "b", "priority": 2, "title": "x"],
                ["id": "A", "priority": nil, "title": "y"],
                ["id": "c", "priority": 1, "title": nil],
                ["id": "D", "priority": 2, "title": "x"],
                ["id": "e", "priority": nil, "title": "x"],
                ["id": "_f", "priority": 1, "title": "Y"],
            ]
            try store.upsert(shuffled(rows, seed: 7), into: "TodoItem")
            try expectSameIds(try readIds(store, Query("TodoItem")), ["_f", "A", "b", "c", "D", "e"], "no sort: id order, case-insensitive")
            try expectSameIds(try readIds(store, Query("TodoItem", sort: [SortKey("id", .descending)])), ["e", "D", "c", "b", "A", "_f"], "id descending")
            try expectSameIds(try readIds(store, Query("TodoItem", sort: [SortKey("priority")])), ["A", "e", "_f", "c", "b", "D"], "priority ascending, nulls first")
            try expectSameIds(
                try readIds(store, Query("TodoItem", sort: [SortKey("PRIORITY", .descending)])), ["b", "D", "_f", "c", "A", "e"],
                "priority descending, nulls last, ties by id ascending")
            try expectSameIds(
                try readIds(store, Query("TodoItem", sort: [SortKey("title", .descending), SortKey("priority")])), ["A", "e", "b", "D", "_f", "c"],
                "title descending (bytes: 'y' > 'x' > 'Y'), then priority")
            try expectSameIds(
                try readIds(store, Query("TodoItem", sort: [SortKey("title"), SortKey("priority", .descending)])), ["c", "_f", "b", "D", "e", "A"],
                "title ascending, then priority descending")
            try expectSameIds(
                try readIds(store, Query("TodoItem", sort: [SortKey("title"), SortKey("id", .descending)])), ["c", "_f", "e", "D", "b", "A"],
                "an explicit id key replaces the tie-break")
        }
    }
}
