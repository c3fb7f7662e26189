import Foundation
import LocalStore
import Testing

/// Compile-time and behaviour checks for Swift values used directly in predicates: every form below must
/// type-check without ambiguity (this file not compiling is the failure) and build the same predicate as
/// the explicit `.literal(...)` spelling.
@Suite("Predicate literals")
struct PredicateLiteralTests {
    enum Priority: String, Codable, QueryValueConvertible { case low, high }

    static func compare(_ field: String, _ op: QueryPredicate.ComparisonOperator, _ value: Value) -> QueryPredicate {
        .compare(.field(field), op, .literal(value), caseInsensitive: false)
    }

    @Test func swiftValuesOnTheRight() {
        let date = Date(timeIntervalSinceReferenceDate: 800_000_000.5)
        let flag = true
        let count = 3
        let big: Int64 = 1 << 40
        let ratio = 0.25
        let name = "milk"
        #expect((Field("updatedAt") >= date) == Self.compare("updatedAt", .greaterOrEqual, .date(date)))
        #expect((Field("updatedAt") < date) == Self.compare("updatedAt", .less, .date(date)))
        #expect((Field("done") == flag) == Self.compare("done", .equal, .bool(true)))
        #expect((Field("done") != flag) == Self.compare("done", .notEqual, .bool(true)))
        #expect((Field("priority") > count) == Self.compare("priority", .greater, .int(3)))
        #expect((Field("size") <= big) == Self.compare("size", .lessOrEqual, .int(1 << 40)))
        #expect((Field("ratio") > ratio) == Self.compare("ratio", .greater, .double(0.25)))
        #expect((Field("text") == name) == Self.compare("text", .equal, .string("milk")))
        #expect((Field("level") == Priority.high) == Self.compare("level", .equal, .string("high")))
    }

    /// The forms that worked before keep compiling and meaning the same.
    @Test func literalsAndExpressionsAreNotAmbiguous() {
        let p: QueryPredicate = Field("complete") == false && Field("priority") >= 2 && Field("ratio") < 0.5
            && Field("text") == "x" && Field("due") == nil && Field("due") != nil
            && Field("priority") + 1 == Field("rank") * 2 && Field("text").lowercased == "x"
            && Field("priority") % 2 == 1 && Field("a") == Field("b")
        #expect(
            p == .and([
                Self.compare("complete", .equal, .bool(false)), Self.compare("priority", .greaterOrEqual, .int(2)),
                Self.compare("ratio", .less, .double(0.5)), Self.compare("text", .equal, .string("x")),
                Self.compare("due", .equal, .null), Self.compare("due", .notEqual, .null),
                .compare(.arithmetic(.add, .field("priority"), .literal(.int(1))), .equal,
                         .arithmetic(.multiply, .field("rank"), .literal(.int(2))), caseInsensitive: false),
                .compare(.toLower(.field("text")), .equal, .literal(.string("x")), caseInsensitive: false),
                .compare(.arithmetic(.modulo, .field("priority"), .literal(.int(2))), .equal, .literal(.int(1)),
                         caseInsensitive: false),
                .compare(.field("a"), .equal, .field("b"), caseInsensitive: false),
            ]))
        // Equatable's `==` on expressions still gives a Bool where a Bool is wanted.
        let same: Bool = Field("a") == Field("a")
        #expect(same)
        let explicit: QueryPredicate = Field("updatedAt") >= .literal(.date(Date(timeIntervalSince1970: 0)))
        #expect(explicit == Self.compare("updatedAt", .greaterOrEqual, .date(Date(timeIntervalSince1970: 0))))
    }

    @Test func inAndBetweenTakeSwiftValues() {
        let low = Date(timeIntervalSinceReferenceDate: 0)
        let high = Date(timeIntervalSinceReferenceDate: 10)
        #expect(Field("d").isBetween(low, and: high) == .between(.field("d"), .date(low), .date(high)))
        let names = ["a", "b"]
        #expect(Field("t").isIn(names) == .in(.field("t"), [.string("a"), .string("b")]))
        #expect(Field("p").isIn([Priority.low]) == .in(.field("p"), [.string("low")]))
        #expect(Field("n").isBetween(1, and: 5) == .between(.field("n"), .int(1), .int(5)))
        #expect(Field("n").isIn([1, 2]) == .in(.field("n"), [.int(1), .int(2)]))
        let values: [Value] = [.null, .int(1)]
        #expect(Field("n").isIn(values) == .in(.field("n"), values))
    }

    @Test func aDatePredicateFiltersAStore() throws {
        let store = try InMemoryStore()
        try store.defineTable(TableSchema("T", ["updatedAt": .date, "done": .boolean, "priority": .integer]))
        let base = Date(timeIntervalSinceReferenceDate: 700_000_000.125)
        for i in 0..<5 {
            try store.upsert(
                [["id": .string("r\(i)"), "updatedAt": .date(base + Double(i)), "done": .bool(i % 2 == 0), "priority": .int(Int64(i))]],
                into: "T")
        }
        let since = base + 2
        let done = true
        let minimum = 1
        let ids = try store.read(Query("T", where: Field("updatedAt") >= since && Field("done") == done && Field("priority") > minimum))
            .items.compactMap(\.stringId).sorted()
        #expect(ids == ["r2", "r4"])
    }
}
