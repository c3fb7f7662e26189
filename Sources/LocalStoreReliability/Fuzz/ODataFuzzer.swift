import Foundation
import LocalStore

/// Fuzzes query construction through the OData renderer and parser, in both dialects (v3 and v4): a
/// random query renders (or is refused with a `LocalStoreError`), what was rendered parses back in the
/// same dialect, and rendering that again gives the same text (the documented render → parse → render
/// identity); v3's lenient parsing reads the v4 text as v4 does (binary literals aside, whose v3
/// reading is hex); damaged query strings parse or are refused with a `LocalStoreError`, never
/// anything else. Each parse is one execution.
public struct ODataFuzzer {
    public struct Stats: Sendable, CustomStringConvertible {
        public var executions = 0
        public var roundTrips = 0
        public var v4RoundTrips = 0
        public var lenientReads = 0
        public var damagedParsed = 0
        public var damagedRefused = 0
        public var renderRefused = 0
        public var invalidRefused = 0
        public var disagreements: [String] = []

        public var description: String {
            "\(executions) parses (\(roundTrips) render→parse→render round trips, \(v4RoundTrips) of them v4; \(lenientReads) v4 texts read alike by v3; \(damagedParsed + damagedRefused) damaged strings: "
                + "\(damagedRefused) refused, \(damagedParsed) parsed; \(renderRefused) queries not renderable, \(invalidRefused) invalid queries rendered to text the parser refuses), \(disagreements.count) failures"
        }
    }

    var generator: FuzzGenerator
    let seed: UInt64
    public private(set) var stats = Stats()
    var rows: [[String: Value]] = []

    public init(seed: UInt64) {
        self.seed = seed
        generator = FuzzGenerator(seed: seed)
        rows = (0..<20).map { generator.row($0) }
    }

    mutating func failure(_ text: String) {
        if stats.disagreements.count < 20 { stats.disagreements.append("seed \(seed): \(text)") }
    }

    static let tokens = [
        " ", "(", ")", "'", "''", ",", "eq", "ne", "lt", "and", "or", "not", "null", "true", "add", "mod", "tolower(", "substringof(",
        "startswith(", "datetime'", "X'", "$filter=", "&", "%", "%2", "%27", "1", "-", ".", "e", "9999999999999999999999", "i", "id",
        "cast(", ",Edm.Date)", ",Edm.DateTimeOffset)", "Edm.Guid", " in (", "in", "contains(", "binary'", "$count=", "1994-10-14",
        "T10:20:30.123Z", "+02:00", ":", "Z", "d9c8bcf9-9c85-42e6-967b-c686d92f32cb",
    ]

    mutating func damage(_ s: String) -> String {
        var scalars = Array(s.unicodeScalars)
        for _ in 0..<(1 + generator.rng.below(3)) {
            let at = generator.rng.below(scalars.count + 1)
            switch generator.rng.below(4) {
            case 0 where !scalars.isEmpty: scalars.remove(at: min(at, scalars.count - 1))
            case 1: scalars.insert(contentsOf: generator.rng.pick(Self.tokens).unicodeScalars, at: at)
            case 2 where !scalars.isEmpty: scalars = Array(scalars[..<min(at, scalars.count)])
            default: scalars.insert(Unicode.Scalar(UInt8(generator.rng.below(128))), at: at)
            }
        }
        var text = ""
        text.unicodeScalars.append(contentsOf: scalars)
        return text
    }

    public mutating func step() {
        let query = generator.query(rows: rows, invalid: generator.rng.oneIn(10))
        step(query, dialect: .v3)
        step(query, dialect: .v4)
    }

    mutating func step(_ query: Query, dialect: ODataDialect) {
        let rendered: String
        do {
            rendered = try OData.queryString(for: query, dialect: dialect)
        } catch is LocalStoreError {
            stats.renderRefused += 1
            return
        } catch {
            failure("rendering threw a non-LocalStoreError \(error) for \(query)")
            return
        }
        stats.executions += 1
        // The identity is promised for valid queries; an invalid one (negative skip, too deep, ...)
        // may render to text the parser refuses, with a LocalStoreError.
        let valid = (try? ResolvedQuery(query, schema: FuzzGenerator.schema)) != nil
        do {
            let parsed = try OData.parseQuery(rendered, table: query.table, dialect: dialect)
            let again = try OData.queryString(for: parsed, dialect: dialect)
            stats.roundTrips += 1
            if dialect == .v4 { stats.v4RoundTrips += 1 }
            if again != rendered { failure("\(dialect) render → parse → render changed '\(rendered)' into '\(again)'") }
            if dialect == .v4 && !rendered.contains("binary'") {
                stats.executions += 1
                let lenient = try OData.parseQuery(rendered, table: query.table, dialect: .v3)
                stats.lenientReads += 1
                if lenient != parsed { failure("v3 parsing reads the v4 text '\(rendered)' differently: \(lenient) vs \(parsed)") }
            }
        } catch let e as LocalStoreError where !valid {
            stats.invalidRefused += 1
            _ = e
        } catch {
            failure("a rendered \(dialect) query string does not parse back: '\(rendered)': \(error)")
        }
        for _ in 0..<3 {
            let text = damage(rendered)
            stats.executions += 1
            do {
                let parsed = try OData.parseQuery(text, table: query.table, dialect: dialect)
                stats.damagedParsed += 1
                _ = try? OData.queryString(for: parsed, dialect: dialect)
                _ = try? ResolvedQuery(parsed, schema: FuzzGenerator.schema)
            } catch is LocalStoreError {
                stats.damagedRefused += 1
            } catch {
                failure("parsing '\(text)' threw a non-LocalStoreError \(error)")
            }
        }
    }

    public mutating func run(_ count: Int) -> Stats {
        for _ in 0..<count { step() }
        return stats
    }
}
