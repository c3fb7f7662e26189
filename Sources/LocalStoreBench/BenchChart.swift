import Foundation

/// The SVG chart of a ``BenchReport`` (`localstore bench --chart FILE.svg`): one group of horizontal
/// bars per workload, one bar per backend, operations per second on a logarithmic axis (the workloads
/// span five orders of magnitude); C-API baselines are hatched. Every bar is a `rect` of class `bar`
/// with `data-backend` and `data-workload` attributes and a `title` tooltip.
public enum BenchChart {
    static let colours: [String: String] = [
        "memory": "#4c78a8", "sqlite": "#f58518", "sqlite-c": "#f58518", "sqlcipher": "#e45756",
        "sqlcipher-passphrase": "#ff9da6", "lmdb": "#54a24b", "lmdb-c": "#54a24b", "grdb": "#b279a2",
    ]
    static let spare = ["#72b7b2", "#eeca3b", "#9d755d", "#bab0ac", "#9467bd"]

    /// The chart as an SVG document; `nil` when the report has no result with a positive rate.
    public static func svg(_ report: BenchReport, title: String? = nil) -> String? {
        var summary = BenchSummary(report)
        summary.results = summary.results.filter { $0.value.opsPerSecond > 0 && $0.value.opsPerSecond.isFinite }
        summary.workloads = summary.workloads.filter { w in summary.backends.contains { summary.results[.init(w, $0)] != nil } }
        summary.backends = summary.backends.filter { b in summary.workloads.contains { summary.results[.init($0, b)] != nil } }
        let rates = summary.results.values.map(\.opsPerSecond)
        guard let minimum = rates.min(), let maximum = rates.max() else { return nil }
        let lo = pow(10, (log10(minimum)).rounded(.down))
        var hi = pow(10, (log10(maximum)).rounded(.up))
        if hi <= lo { hi = lo * 10 }

        let barHeight = 11.0, barGap = 2.0, groupGap = 14.0
        let left = 150.0, right = 70.0, top = 60.0, plotWidth = 640.0
        let backends = summary.backends, workloads = summary.workloads
        let groupHeight = Double(backends.count) * (barHeight + barGap) - barGap
        let plotHeight = Double(workloads.count) * (groupHeight + groupGap) - groupGap
        let legendHeight = 22.0 * Double((backends.count + 3) / 4)
        let width = left + plotWidth + right
        let height = top + plotHeight + 40 + legendHeight + 20
        func x(_ v: Double) -> Double { left + plotWidth * (log10(v) - log10(lo)) / (log10(hi) - log10(lo)) }
        func n(_ v: Double) -> String { String(format: "%.1f", v) }

        var assigned: [String: String] = [:]
        func colour(_ backend: String) -> String {
            if let c = colours[backend] { return c }
            if let c = assigned[backend] { return c }
            let c = spare[assigned.count % spare.count]
            assigned[backend] = c
            return c
        }

        var subtitle = "\(BenchSummary.grouped(Double(report.records))) records"
        let details = ["build", "swift", "sqlite", "sqlcipher", "lmdb", "cpus"].compactMap { k in report.environment[k].map { "\(k) \($0)" } }
        if !details.isEmpty { subtitle += " · " + details.joined(separator: " · ") }

        var out = [
            ##"<?xml version="1.0" encoding="UTF-8"?>"##,
            ##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(n(width))" height="\##(n(height))" viewBox="0 0 \##(n(width)) \##(n(height))" font-family="Helvetica, Arial, sans-serif" font-size="11">"##,
            "<defs>",
            ##"<pattern id="hatch" patternUnits="userSpaceOnUse" width="5" height="5" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="5" stroke="white" stroke-width="2"/></pattern>"##,
            "</defs>",
            ##"<rect width="\##(n(width))" height="\##(n(height))" fill="white"/>"##,
            ##"<text x="\##(n(left))" y="22" font-size="15" font-weight="bold">\##(escape(title ?? "LocalStore throughput per workload (operations per second, log scale)"))</text>"##,
            ##"<text x="\##(n(left))" y="40" fill="#555">\##(escape(subtitle))</text>"##,
        ]
        var decade = lo
        while decade <= hi * 1.0001 {
            let gx = n(x(decade))
            out.append(##"<line x1="\##(gx)" y1="\##(n(top - 6))" x2="\##(gx)" y2="\##(n(top + plotHeight))" stroke="#ddd"/>"##)
            out.append(##"<text x="\##(gx)" y="\##(n(top + plotHeight + 16))" text-anchor="middle" fill="#555">\##(BenchSummary.rate(decade))</text>"##)
            decade *= 10
        }
        out.append(
            ##"<text x="\##(n(left + plotWidth / 2))" y="\##(n(top + plotHeight + 32))" text-anchor="middle" fill="#555">operations per second (log scale; longer is faster)</text>"##)
        for (g, w) in workloads.enumerated() {
            let gy = top + Double(g) * (groupHeight + groupGap)
            out.append(##"<text x="\##(n(left - 10))" y="\##(n(gy + groupHeight / 2 + 4))" text-anchor="end" font-weight="bold">\##(escape(w))</text>"##)
            for (i, b) in backends.enumerated() {
                guard let r = summary.results[.init(w, b)] else { continue }
                let v = r.opsPerSecond
                let by = n(gy + Double(i) * (barHeight + barGap))
                let bw = n(max(1, x(v) - left))
                var tip = "\(b) \(w): \(BenchSummary.grouped(v)) ops/s"
                if let ratio = r.ratioToBaseline { tip += String(format: " (%.2f× baseline)", ratio) }
                out.append(
                    ##"<rect class="bar" data-backend="\##(escape(b))" data-workload="\##(escape(w))" x="\##(n(left))" y="\##(by)" width="\##(bw)" height="\##(n(barHeight))" fill="\##(colour(b))"><title>\##(escape(tip))</title></rect>"##)
                if BenchSummary.isBaseline(b) {
                    out.append(##"<rect x="\##(n(left))" y="\##(by)" width="\##(bw)" height="\##(n(barHeight))" fill="url(#hatch)"/>"##)
                }
                out.append(
                    ##"<text x="\##(n(left + max(1, x(v) - left) + 4))" y="\##(n(gy + Double(i) * (barHeight + barGap) + barHeight - 2))" font-size="9" fill="#333">\##(BenchSummary.rate(v))</text>"##)
            }
        }
        out.append(##"<line x1="\##(n(left))" y1="\##(n(top - 6))" x2="\##(n(left))" y2="\##(n(top + plotHeight))" stroke="#333"/>"##)
        let legendY = top + plotHeight + 50
        for (i, b) in backends.enumerated() {
            let lx = n(left + Double(i % 4) * 160)
            let ly = legendY + Double(i / 4) * 22
            out.append(##"<rect x="\##(lx)" y="\##(n(ly - 10))" width="14" height="12" fill="\##(colour(b))"/>"##)
            if BenchSummary.isBaseline(b) {
                out.append(##"<rect x="\##(lx)" y="\##(n(ly - 10))" width="14" height="12" fill="url(#hatch)"/>"##)
            }
            let label = b + (BenchSummary.isBaseline(b) ? " (C-API baseline)" : "")
            out.append(##"<text x="\##(n(left + Double(i % 4) * 160 + 20))" y="\##(n(ly))">\##(escape(label))</text>"##)
        }
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }

    /// Text with the five XML special characters escaped (element text and attribute values).
    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(c)
            }
        }
        return out
    }
}
