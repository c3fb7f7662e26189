import Foundation
import LocalStore
import LocalStoreConformance
import Testing

/// Runs, against `backend`, the observation check named like the calling test function.
private func runObservationCheck(_ backend: StoreFactory, function: String = #function) async throws {
    let name = String(function.prefix { $0 != "(" })
    guard let check = ConformanceSuite.observationChecks.first(where: { $0.name == name }) else {
        Issue.record("ConformanceSuite.observationChecks has no check named '\(name)'")
        return
    }
    do {
        try await check.run(backend)
    } catch let failure as ConformanceFailure {
        Issue.record(
            Comment(rawValue: "[\(backend.name)] \(failure.message)"),
            sourceLocation: SourceLocation(fileID: failure.fileID, filePath: failure.filePath, line: failure.line, column: 1))
    }
}

/// The shared suite's observation checks (docs/observation.md), each run against every backend.
@Suite("Observation conformance")
struct ObservationConformanceTests {
    @Test("every observation check is run by a test function")
    func everyCheckIsTested() {
        let names = ConformanceSuite.observationChecks.map(\.name)
        let tested: Set<String> = [
            "observeChangesInCommitOrderWithIds", "observeChangesOnlyAfterCommit", "observeNoChangeForRollback",
            "observeManyForDeleteMatchingAndHugeBatches", "observeConsumerThatNeverReads",
            "observeCancellationEndsObservation", "observeCloseEndsObservation", "observeQueryResults",
            "observePendingOperations", "observeSystemTableConveniences", "observeCommitsOfAnotherStoreObject",
        ]
        #expect(Set(names).count == names.count)
        #expect(Set(names) == tested)
    }

    @Test(arguments: Backends.all) func observeChangesInCommitOrderWithIds(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeChangesOnlyAfterCommit(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeNoChangeForRollback(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeManyForDeleteMatchingAndHugeBatches(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeConsumerThatNeverReads(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeCancellationEndsObservation(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeCloseEndsObservation(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeQueryResults(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observePendingOperations(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeSystemTableConveniences(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
    @Test(arguments: Backends.all) func observeCommitsOfAnotherStoreObject(_ backend: StoreFactory) async throws { try await runObservationCheck(backend) }
}
