import LocalStore
import Testing

/// The shared evaluator's top-N selection (`ResolvedQuery.select`): whether the rows arrive in the
/// sort's order (an index walked in order), in order up to one row, or in any order, the result is the
/// full sort's, cut by skip and top, with every match counted.
@Suite("Evaluator top-N selection")
struct SelectOrderTests {
    static let schema = TableSchema("T", ["id": .string, "a": .integer, "b": .string])

    /// The reference: every match, fully sorted, then skip and top.
    static func expected(_ query: ResolvedQuery, _ rows: [[Value]]) -> [[Value]] {
        let sorted = rows.filter(query.predicate.matches).sorted { query.compareRows($0, $1) < 0 }
        let rest = sorted.dropFirst(query.skip)
        return Array(query.top.map { rest.prefix($0) } ?? rest)
    }

    @Test("in order, one row out of order, reversed and shuffled inputs give the full sort's rows")
    func arrivalOrders() throws {
        var rng = ODataParsingTests.RNG(seed: 7)
        var checked = 0
        for round in 0..<300 {
            let rows: [[Value]] = (0..<Int.random(in: 0...60, using: &rng)).map { n in
                [.string("r\(round)-\(n)"), .int(Int64.random(in: 0...5, using: &rng)), .string(["x", "y", "X", "z"].randomElement(using: &rng) ?? "x")]
            }
            let sorts: [[SortKey]] = [[SortKey("a")], [SortKey("a", .descending), SortKey("b")], [SortKey("b"), SortKey("id", .descending)], []]
            let sort = sorts[round % sorts.count]
            let predicate: QueryPredicate? = round % 3 == 0 ? Field("a") != 2 : nil
            let top = [nil, 0, 1, 5, 50].randomElement(using: &rng) ?? nil
            let query = try ResolvedQuery(
                Query("T", where: predicate, sort: sort, skip: Int.random(in: 0...3, using: &rng), top: top, includeTotalCount: true),
                schema: Self.schema)
            let inOrder = rows.sorted { query.compareRows($0, $1) < 0 }
            var oneOut = inOrder
            if oneOut.count > 2 { oneOut.swapAt(Int.random(in: 0..<oneOut.count, using: &rng), oneOut.count - 1) }
            for input in [inOrder, oneOut, inOrder.reversed(), rows.shuffled(using: &rng)] {
                let selected = query.select(input)
                #expect(selected.rows == Self.expected(query, input), "round \(round), sort \(sort), top \(String(describing: top)), skip \(query.skip)")
                #expect(selected.count == input.filter(query.predicate.matches).count)
                checked += 1
            }
        }
        #expect(checked == 1200)
    }
}
