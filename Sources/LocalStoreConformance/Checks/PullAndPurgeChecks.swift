import Foundation
import LocalStore

// Applying a pulled page, purge and force purge, with the SDKs' rules.

extension ConformanceSuite {
    /// `applyPulledPage`: upserts with unknown columns ignored (timestamp strings into date columns),
    /// skips items with a queued operation (id case-insensitive), deletes soft-deleted items, advances
    /// the delta token to the page's largest `updatedAt` only forward — in one transaction: a bad item
    /// anywhere in the page leaves the table, the queue and the token as they were.
    public static func pulledPageRules(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            try store.upsert([["id": "gone", "text": "old"], ["id": "mine", "text": "local"], ["id": "kept", "text": "k"]], into: "QItem")
            try store.enqueue(.update, ["id": "mine", "text": "local edit"], into: "QItem")
            let t1 = Date(timeIntervalSince1970: 1_700_000_001.5)
            let t2 = Date(timeIntervalSince1970: 1_700_000_002.25)
            let page: [Item] = [
                ["id": "new", "text": "from server", "updatedAt": .date(t1), "version": "1", "serverOnly": 7, "deleted": false],
                ["id": "MINE", "text": "server copy", "updatedAt": .date(t2), "deleted": nil],
                ["id": "gone", "updatedAt": .string("2023-11-14T22:13:21.000Z"), "deleted": true],
                ["id": "str", "text": "json form", "updatedAt": .string("2023-11-14T22:13:21.250Z")],
            ]
            let result = try store.applyPulledPage(page, into: "QItem", queryId: "all")
            try expectEqual(result.upserted, 2, "upserted")
            try expectEqual(result.deleted, 1, "deleted")
            try expectEqual(result.skipped, ["MINE"], "skipped: a queued operation exists")
            try expectEqual(result.maxUpdatedAt, DeltaTokenFormat.date(from: "2023-11-14T22:13:22.250Z"), "largest updatedAt (skipped items count)")
            try expectEqual(try store.deltaToken(table: "QItem", queryId: "all"), DeltaTokenFormat.date(from: "2023-11-14T22:13:22.250Z"), "token advanced")
            try expectEqual(result.deltaToken, try store.deltaToken(table: "QItem", queryId: "all"), "the result's token")
            try expectIdentical(
                try store.read(table: "QItem", id: "new"), ["id": "new", "text": "from server", "n": nil, "updatedAt": .date(t1), "version": "1", "deleted": false],
                "an upserted item, unknown columns ignored")
            try expectEqual(try store.read(table: "QItem", id: "str")?["updatedAt"], .date(Date(timeIntervalSince1970: 1_700_000_001.25)), "a timestamp string stored as a date")
            try expectEqual(try store.read(table: "QItem", id: "mine")?["text"], "local edit", "the local change wins")
            try expectNil(try store.read(table: "QItem", id: "gone"), "a soft delete")
            try expectEqual(try store.read(table: "QItem", id: "kept")?["text"], "k", "rows not in the page are untouched")

            // Every spelling of a pending id is skipped, also twice in one page; an id pending in another
            // table is not (a table with no queued operation at all included).
            let again = try store.applyPulledPage(
                [["id": "Mine", "text": "a"], ["id": "kept", "text": "k2"], ["id": "mINE", "text": "b"]], into: "QItem")
            try expectEqual(again.skipped, ["Mine", "mINE"], "every spelling of a pending id skipped")
            try expectEqual(again.upserted, 1, "the other item upserted")
            try expectEqual(try store.read(table: "QItem", id: "mine")?["text"], "local edit", "the local change still wins")
            try store.defineTable(TableSchema("QOther", ["id": .string, "text": .string]))
            let other = try store.applyPulledPage([["id": "mine", "text": "other table"]], into: "QOther")
            try expectEqual(other.skipped, [], "an id pending in another table is not skipped")
            try expectEqual(try store.read(table: "QOther", id: "mine")?["text"], "other table", "upserted in the other table")
            try store.enqueue(.insert, ["id": "o1", "text": "x"], into: "QOther")
            let mixed = try store.applyPulledPage([["id": "O1", "text": "s"], ["id": "mine", "text": "s"]], into: "QOther")
            try expectEqual(mixed.skipped, ["O1"], "once the table has a queued operation, only its item is skipped")

            // The token only moves forward; without a query id no token is written.
            let older = try store.applyPulledPage([["id": "late", "updatedAt": .date(t1)]], into: "QItem", queryId: "all")
            try expectEqual(older.deltaToken, DeltaTokenFormat.date(from: "2023-11-14T22:13:22.250Z"), "an older page does not move the token back")
            try store.applyPulledPage([["id": "late2", "updatedAt": .date(Date(timeIntervalSince1970: 1_800_000_000))]], into: "QItem")
            try expectEqual(try store.deltaTokens(table: "QItem").count, 1, "no token without a query id")
            let empty = try store.applyPulledPage([], into: "QItem", queryId: "other")
            try expectEqual(empty, PulledPageResult(upserted: 0, deleted: 0, skipped: [], maxUpdatedAt: nil, deltaToken: nil), "an empty page")

            // A bad item: nothing of the page is written.
            let tables = [store.operationTableName, store.configTableName, "QItem"]
            let before = try snapshot(store, tables)
            let bad: [(Item, LocalStoreError.Code)] = [
                (["text": "no id"], .missingId), (["id": 5], .missingId), (["id": "x", "deleted": "yes"], .typeMismatch),
                (["id": "x", "updatedAt": "yesterday"], .typeMismatch), (["id": "x", "n": "seven"], .typeMismatch),
            ]
            for (item, code) in bad {
                let error = try expectThrows(code: code, "bad item \(item)") {
                    try store.applyPulledPage([["id": "fine", "updatedAt": .date(Date(timeIntervalSince1970: 1_900_000_000))], item], into: "QItem", queryId: "all")
                }
                try expect(error.message.contains("QItem") || error.table == "QItem", "the error names the table: \(error.message)")
                try expectUnchanged(store, before, "a page with a bad item")
            }
            try expectThrows(code: .unknownTable, "unknown table") { try store.applyPulledPage([], into: "Nope") }
            try expectThrows(code: .invalidValue, "a bad query id") { try store.applyPulledPage([], into: "QItem", queryId: "") }
        }
    }

    /// Purge is refused while the table has queued operations (tokens untouched, nothing deleted);
    /// force purge removes the table's rows, operations, their errors and its tokens together — other
    /// tables untouched — and is refused, changing nothing, while one of its operations is in flight.
    public static func purgeRules(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            try store.defineTable(TableSchema("Other", ["text": .string]))
            try store.upsert((0..<5).map { ["id": .string("r\($0)"), "n": .int(Int64($0))] }, into: "QItem")
            try store.upsert([["id": "o1", "text": "x"]], into: "Other")
            try store.setDeltaToken(date(1), table: "QItem", queryId: "all")
            try store.setDeltaToken(date(2), table: "Other", queryId: "all")
            try expectEqual(try store.purge("QItem", where: Field("n") >= 3), 2, "purge with a predicate")
            try expectEqual(try store.count("QItem"), 3, "rows left")
            try expectEqual(try store.deltaToken(table: "QItem", queryId: "all"), date(1), "purge keeps the tokens")

            try store.enqueue(.update, ["id": "r0", "text": "edit"], into: "QItem")
            try store.enqueue(.update, ["id": "o1", "text": "edit"], into: "Other")
            let op = try unwrap(try store.queuedOperations(table: "QItem", itemId: "r0").first, "the operation")
            try store.recordError(TableOperationError(id: "e-q", operationId: op.id))
            let others = try store.queuedOperations(table: "Other", itemId: "o1")
            try store.recordError(TableOperationError(id: "e-o", operationId: try unwrap(others.first, "other op").id))
            let tables = [store.operationTableName, store.errorTableName, store.configTableName, "QItem", "Other"]
            let before = try snapshot(store, tables)
            let refused = try expectThrows(code: .constraint, "purge with pending operations") { try store.purge("QItem") }
            try expect(refused.message.contains("pending"), "says why: \(refused.message)")
            try expectUnchanged(store, before, "a refused purge")

            _ = try store.beginPush(after: op.id - 1)
            let before2 = try snapshot(store, tables)
            try expectThrows(code: .constraint, "force purge with an operation in flight") { try store.forcePurge("QItem") }
            try expectUnchanged(store, before2, "a refused force purge")
            try store.releaseInFlightOperations()

            try expectEqual(try store.forcePurge("qitem"), 3, "force purge deletes every row")
            try expectEqual(try store.count("QItem"), 0, "no rows")
            try expectEqual(try store.pendingOperations(table: "QItem"), [], "no operations")
            try expectEqual(try store.operationErrors().map(\.id), ["e-o"], "only the other table's error is left")
            try expectEqual(try store.deltaTokens(table: "QItem"), [:], "no tokens")
            try expectEqual(try store.deltaToken(table: "Other", queryId: "all"), date(2), "other tables keep their tokens")
            try expectEqual(try store.queuedOperations(table: "Other", itemId: "o1"), others, "and their operations")
            try expectEqual(try store.purge("QItem"), 0, "purging an empty table")
            try expectThrows(code: .unknownTable, "unknown table") { try store.forcePurge("Nope") }
        }
    }
}

extension ConformanceSuite {
    /// A pull's query string read back (`PullRequest.parse(_:table:dialect:)`) selects exactly the rows the
    /// original query selects, page by page with the explicit `$skip`, and renders to the same text.
    public static func pullQueryStringRoundTrip(_ factory: StoreFactory) throws {
        try withStore(factory) { store in
            try store.defineTable(queueSchema)
            let base = Date(timeIntervalSince1970: 1_700_000_000)
            var rows: [Item] = []
            for k in 0..<30 {
                let text: String = k % 3 == 0 ? "it's a&b" : "plain \(k)"
                let updated: Date = base.addingTimeInterval(Double(k / 2))
                var row = Item()
                row["id"] = .string("p\(k)")
                row["text"] = .string(text)
                row["n"] = .int(Int64(k % 7))
                row["updatedAt"] = .date(updated)
                rows.append(row)
            }
            try store.upsert(rows, into: "QItem")
            let token = base.addingTimeInterval(4)
            let queries = [
                PullRequest.incremental(Query("QItem", top: 4), since: token),
                PullRequest.incremental(Query("QItem", where: Field("text").contains("a&b") || Field("n") >= 5, top: 3), since: nil),
                Query("QItem", where: Field("n").isIn([1, 2]), sort: [SortKey("n", .descending)], top: 5),
            ]
            for original in queries {
                var skip = 0
                var pages = 0
                while pages < 20 {
                    var q = original
                    q.skip = skip
                    let request = PullRequest(query: q, parameters: [.init("tenant", "a'b")])
                    let text = try request.queryString()
                    try expect(text.contains("$skip=\(skip)"), "an explicit $skip: \(text)")
                    let parsed = try PullRequest.parse(text, table: "QItem")
                    try expectEqual(try parsed.queryString(), text, "render → parse → render")
                    let expected = try store.read(q).items
                    try expectEqual(try store.read(parsed.query).items, expected, "the parsed query's rows: \(text)")
                    if expected.isEmpty { break }
                    skip += expected.count
                    pages += 1
                }
                try expect(pages >= 2, "at least two pages for \(original)")
            }
        }
    }
}
