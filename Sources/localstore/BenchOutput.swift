import Foundation
import LocalStoreBench

/// Reading saved bench reports and writing the chart (`localstore bench --report/--growth/--chart`).
enum BenchOutput {
    /// The report in `path` (`localstore bench --format json`).
    static func load(_ path: String) throws -> BenchReport {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandError(.noInput, "cannot read the bench report '\(path)'")
        }
        do {
            return try JSONDecoder().decode(BenchReport.self, from: data)
        } catch {
            throw CommandError(.dataError, "'\(path)' is not a bench report (localstore bench --format json): \(error)")
        }
    }

    /// Writes the SVG chart of `report` to `path`.
    static func writeChart(_ report: BenchReport, to path: String) throws {
        guard let svg = BenchChart.svg(report) else {
            throw CommandError(.dataError, "the report has no results to chart")
        }
        do {
            try Data(svg.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandError(.cannotWrite, "cannot write the chart to '\(path)': \(error.localizedDescription)")
        }
    }
}
