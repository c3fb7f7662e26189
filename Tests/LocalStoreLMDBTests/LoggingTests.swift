import Foundation
import LocalStore
import LocalStoreLMDB
import Logging
import Synchronization
import Testing

@Suite("LMDB logging")
struct LMDBLoggingTests {
    final class Sink: Sendable {
        let lines = LockedValue<[String]>([])
        struct Handler: LogHandler {
            let sink: Sink
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) {
                let md = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                sink.lines.withLock { $0.append("\(event.level) \(event.message) \(md.joined(separator: " "))") }
            }
        }
    }

    @Test func queriesLogTheirPlanAndWritesTheirDuration() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ls-lmdb-log-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let sink = Sink()
        var logger = Logger(label: "test") { _ in Sink.Handler(sink: sink) }
        logger.logLevel = .trace
        let store = try LMDBStore(path: dir.path, logger: logger)
        try store.defineTable(TableSchema("T", ["n": .integer, "secret": .string], indexed: ["n"]))
        try store.write { tx in try tx.upsert([["id": "a", "n": 1, "secret": "SECRET-VALUE"]], into: "T") }
        _ = try store.read(Query("T", where: Field("n") == 1))
        try store.close()
        let lines = sink.lines.withLock { $0 }
        #expect(lines.contains { $0.hasPrefix("debug write transaction committed") && $0.contains("micros=") })
        #expect(lines.contains { $0.hasPrefix("trace query") && $0.contains("plan=index n") && $0.contains("rows=1") })
        #expect(!lines.contains { $0.contains("SECRET-VALUE") })
    }
}
