import Foundation
import LocalStore
import LocalStoreConformance
import Testing

/// Runs, against `backend`, the conformance check named like the calling test function, and reports a
/// ``ConformanceFailure`` at the line of the suite where the expectation failed.
private func runCheck(_ backend: StoreFactory, function: String = #function) throws {
    let name = String(function.prefix { $0 != "(" })
    #expect(ConformanceTests.testedChecks.contains(name), "add '\(name)' to ConformanceTests.testedChecks")
    guard let check = ConformanceSuite.allChecks.first(where: { $0.name == name }) else {
        Issue.record("ConformanceSuite.allChecks has no check named '\(name)'")
        return
    }
    do {
        try check.run(backend)
    } catch let failure as ConformanceFailure {
        Issue.record(
            Comment(rawValue: "[\(backend.name)] \(failure.message)"),
            sourceLocation: SourceLocation(fileID: failure.fileID, filePath: failure.filePath, line: failure.line, column: 1))
    }
}

/// The shared conformance suite, one test function per check, each run against every backend.
@Suite("Conformance")
struct ConformanceTests {
    /// The checks run by the test functions below (each function is named like its check).
    static let testedChecks: Set<String> = [
        "upsertInsertsNewRowWithNulls",
        "upsertMergesAbsentKeys",
        "upsertExplicitNullClears",
        "upsertUnknownColumnFails",
        "upsertIgnoringUnknownColumns",
        "upsertTypeMismatch",
        "upsertIntegerIntoDoubleColumn",
        "upsertNonFiniteNumbersRefused",
        "upsertValueSizeLimit",
        "upsertPartialUpdateSizeLimit",
        "upsertMissingId",
        "upsertDuplicateKeyInDifferentCase",
        "upsertNamesMatchCaseInsensitively",
        "batchIsAllOrNothing",
        "batchSameIdTwice",
        "idsMatchCaseInsensitivelyOnRead",
        "longIdsReadById",
        "idsUpsertUpdatesSameRowWithNewestSpelling",
        "idsDeleteCaseInsensitively",
        "idsFollowNoCaseRuleExactly",
        "idsOfWrongTypeAreTypeMismatch",
        "readMissingRowIsNil",
        "unknownTableForEveryCall",
        "readReturnsEveryColumn",
        "selectReturnsSelectedColumnsPlusVersion",
        "totalCountSkipAndTop",
        "sortOrderNullsAndTieBreak",
        "defineTableCreatesTable",
        "redefineAddsColumnsKeepingData",
        "redefineAddsIndex",
        "defineTableSchemaConflicts",
        "compoundIndexDefinition",
        "compoundIndexQueries",
        "compoundIndexRandomQueries",
        "deleteMatchingUpdatesEveryIndex",
        "compoundIndexLongKeys",
        "compoundIndexLongIdTies",
        "queriesUseDeclaredIndexes",
        "defineTableInvalidIdentifiers",
        "defineTableReservedNames",
        "defineTableColumnLimit",
        "tableSchemasListsUserTables",
        "systemPropertiesOfTables",
        "roundTripIntegers",
        "roundTripDoubles",
        "roundTripNegativeZero",
        "roundTripDates",
        "roundTripBinary",
        "roundTripBooleans",
        "roundTripJSON",
        "codableRecordsAndSwiftLiterals",
        "naughtyStringsAsIds",
        "naughtyStringsAsValues",
        "writeCommitsAcrossTables",
        "writeRollsBackOnError",
        "writeFailedCallInsideTransaction",
        "writeReadsSeeOwnWrites",
        "writeNestedIsASavepoint",
        "deleteIdsIgnoresAbsentIds",
        "closeMakesEveryCallFail",
        "systemTablesExistOnOpen",
        "systemTablesFollowGenericRules",
        "systemTableSyncQueries",
        "appendOperationIds",
        "appendOperationIdExhausted",
        "appendOperationIdsInsideOneWrite",
        "pendingOperationQueries",
        "queueLookupsAnswerAsTheirQueries",
        "removeOperationRemovesItsErrors",
        "operationErrorsRecordListClear",
        "deltaTokens",
        "deltaTokenKeys",
        "deltaTokenMigration",
        "queueCollapseTable",
        "queueCollapseUsesNewestOperation",
        "queueLostEditRace",
        "queueRecordLayout",
        "queueEnqueueValidation",
        "queuePushHelpers",
        "pushErrorsAndResolutions",
        "completeKeepsServerSystemColumns",
        "resolutionsKeepNewerEdits",
        "purgeResetsQueryToken",
        "collapseRemovesPushErrors",
        "upsertEmptyIdRefused",
        "sentOperationsDoNotCollapse",
        "markedOperationsAreTracked",
        "nestedTypedCallsAreAtomic",
        "nestedFailuresLeaveNothing",
        "storeCallsInsideWriteAreMisuse",
        "transactionAfterBodyIsMisuse",
        "transactionOnAnotherThreadIsMisuse",
        "pulledPageRules",
        "purgeRules",
        "pullQueryStringRoundTrip",
        "predicateHandWrittenExpectations",
        "invalidQueriesAreRejected",
        "deleteMatchingHonoursQuery",
        "odataFunctionExamples",
        "queryFunctionsOnRandomRows",
        "odataV4Queries",
        "stringFunctionsReadNumbersAsText",
        "pagingStableAscending",
        "pagingStableDescending",
        "pagingStableMultiKey",
        "concurrentReadersSeeWholeTransactions",
        "concurrentAppendOperations",
        "concurrentWritersOnSeveralTables",
        "persistenceAcrossReopen",
        "repeatedReadsSeeCurrentRowsAndDefinition",
    ]

    @Test("every check of the suite is run by a test function")
    func everyCheckIsTested() {
        let names = ConformanceSuite.allChecks.map(\.name)
        #expect(Set(names).count == names.count, "check names must be unique")
        #expect(Set(names) == Self.testedChecks, "checks without a test: \(Set(names).subtracting(Self.testedChecks).sorted())")
        #expect(names.count >= 60)
    }

    @Test("predicate cases have unique names")
    func predicateCaseNamesAreUnique() {
        let names = ConformanceSuite.predicateCases.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(names.count >= 80)
        #expect(ConformanceSuite.completeSuite.count == ConformanceSuite.allChecks.count + names.count)
    }

    @Test("predicate case", arguments: Backends.all, ConformanceSuite.predicateCases)
    func predicate(_ backend: StoreFactory, _ predicateCase: PredicateCase) throws {
        do {
            try predicateCase.check(backend)
        } catch let failure as ConformanceFailure {
            Issue.record(
                Comment(rawValue: "[\(backend.name)] \(failure.message)"),
                sourceLocation: SourceLocation(fileID: failure.fileID, filePath: failure.filePath, line: failure.line, column: 1))
        }
    }

    // MARK: Upserts and batches

    @Test(arguments: Backends.all) func upsertInsertsNewRowWithNulls(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertMergesAbsentKeys(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertExplicitNullClears(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertUnknownColumnFails(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertIgnoringUnknownColumns(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertTypeMismatch(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertIntegerIntoDoubleColumn(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertNonFiniteNumbersRefused(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertValueSizeLimit(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertPartialUpdateSizeLimit(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertMissingId(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertDuplicateKeyInDifferentCase(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertNamesMatchCaseInsensitively(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func batchIsAllOrNothing(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func batchSameIdTwice(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Ids, reads, select, counts, order

    @Test(arguments: Backends.all) func idsMatchCaseInsensitivelyOnRead(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func longIdsReadById(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func idsUpsertUpdatesSameRowWithNewestSpelling(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func idsDeleteCaseInsensitively(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func idsFollowNoCaseRuleExactly(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func idsOfWrongTypeAreTypeMismatch(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func readMissingRowIsNil(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func unknownTableForEveryCall(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func readReturnsEveryColumn(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func selectReturnsSelectedColumnsPlusVersion(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func totalCountSkipAndTop(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func sortOrderNullsAndTieBreak(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Schemas

    @Test(arguments: Backends.all) func defineTableCreatesTable(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func redefineAddsColumnsKeepingData(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func redefineAddsIndex(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func defineTableSchemaConflicts(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func compoundIndexDefinition(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func compoundIndexQueries(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func compoundIndexRandomQueries(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func deleteMatchingUpdatesEveryIndex(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func compoundIndexLongKeys(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func compoundIndexLongIdTies(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queriesUseDeclaredIndexes(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func defineTableInvalidIdentifiers(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func defineTableReservedNames(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func defineTableColumnLimit(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func tableSchemasListsUserTables(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func systemPropertiesOfTables(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Values

    @Test(arguments: Backends.all) func roundTripIntegers(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func roundTripDoubles(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func roundTripNegativeZero(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func roundTripDates(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func roundTripBinary(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func roundTripBooleans(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func roundTripJSON(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func codableRecordsAndSwiftLiterals(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func naughtyStringsAsIds(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func naughtyStringsAsValues(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Transactions, deletes, close

    @Test(arguments: Backends.all) func writeCommitsAcrossTables(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func writeRollsBackOnError(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func writeFailedCallInsideTransaction(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func writeReadsSeeOwnWrites(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func writeNestedIsASavepoint(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func deleteIdsIgnoresAbsentIds(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func closeMakesEveryCallFail(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: System tables

    @Test(arguments: Backends.all) func systemTablesExistOnOpen(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func systemTablesFollowGenericRules(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func systemTableSyncQueries(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func appendOperationIds(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func appendOperationIdExhausted(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func appendOperationIdsInsideOneWrite(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pendingOperationQueries(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queueLookupsAnswerAsTheirQueries(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func removeOperationRemovesItsErrors(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func operationErrorsRecordListClear(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func deltaTokens(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func deltaTokenKeys(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func deltaTokenMigration(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Typed operation queue

    @Test(arguments: Backends.all) func queueCollapseTable(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queueCollapseUsesNewestOperation(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queueLostEditRace(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queueRecordLayout(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queueEnqueueValidation(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queuePushHelpers(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pushErrorsAndResolutions(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func completeKeepsServerSystemColumns(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func resolutionsKeepNewerEdits(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func purgeResetsQueryToken(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func collapseRemovesPushErrors(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func upsertEmptyIdRefused(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func sentOperationsDoNotCollapse(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func markedOperationsAreTracked(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func nestedTypedCallsAreAtomic(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func nestedFailuresLeaveNothing(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Misuse

    @Test(arguments: Backends.all) func storeCallsInsideWriteAreMisuse(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func transactionAfterBodyIsMisuse(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func transactionOnAnotherThreadIsMisuse(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pulledPageRules(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func purgeRules(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pullQueryStringRoundTrip(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Queries and paging

    @Test(arguments: Backends.all) func predicateHandWrittenExpectations(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func invalidQueriesAreRejected(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func deleteMatchingHonoursQuery(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func odataFunctionExamples(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func queryFunctionsOnRandomRows(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func odataV4Queries(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func stringFunctionsReadNumbersAsText(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pagingStableAscending(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pagingStableDescending(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func pagingStableMultiKey(_ backend: StoreFactory) throws { try runCheck(backend) }

    // MARK: Threads and persistence

    @Test(arguments: Backends.all) func concurrentReadersSeeWholeTransactions(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func concurrentAppendOperations(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func concurrentWritersOnSeveralTables(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func persistenceAcrossReopen(_ backend: StoreFactory) throws { try runCheck(backend) }
    @Test(arguments: Backends.all) func repeatedReadsSeeCurrentRowsAndDefinition(_ backend: StoreFactory) throws { try runCheck(backend) }
}

/// The in-memory store with one deliberate fault, to show that the suite notices broken backends.
final class MutantStore: LocalStore, LocalStoreTransaction, QueryPlanReporting {
    enum Fault: String, Sendable, CaseIterable {
        /// `upsert` replaces existing rows instead of merging into them.
        case replaceInsteadOfMerge
        /// Queries ignore `skip`.
        case ignoreSkip
        /// `write {}` runs every call in its own transaction, so a thrown error rolls nothing back.
        case noRollback
        /// Descending sort keys are applied ascending.
        case descendingAsAscending
        /// `delete(ids:)` with an empty list on an unknown table throws.
        case strictEmptyDelete
        /// Inside a write body, calls on the store are served by the body's transaction instead of
        /// being refused with `misuse`.
        case servesStoreInsideWrite
        /// A transaction keeps working after its body returned: its calls go to the store.
        case transactionOutlivesBody
        /// A transaction called from another thread than its body's answers (reads find nothing,
        /// writes do nothing) instead of refusing with `misuse`.
        case transactionOnAnyThread
        /// Inside a write body, a nested `write {}` on the store runs as a savepoint of the body's
        /// transaction instead of being refused with `misuse` (every other store call is refused).
        case allowsNestedStoreWrite
        /// Index declarations are accepted and dropped: every query reads the whole table (and the
        /// store reports so).
        case ignoresIndexes
        /// Every query on a table with an index is reported as answered by that index, whatever it reads.
        case claimsIndexes
    }

    /// The transaction of the write body running on each thread (for `servesStoreInsideWrite`).
    private let running = LockedValue<[ObjectIdentifier: any LocalStoreTransaction]>([:])

    /// The transaction of a write body running on this thread, when the fault serves store calls with it.
    /// `nestedWrite`: for a `write {}` call, which `allowsNestedStoreWrite` serves too.
    private func runningTransaction(nestedWrite: Bool = false) -> (any LocalStoreTransaction)? {
        guard fault == .servesStoreInsideWrite || (nestedWrite && fault == .allowsNestedStoreWrite) else { return nil }
        let thread = ObjectIdentifier(Thread.current)
        return running.withLock { $0[thread] }
    }

    let inner: InMemoryStore
    /// The fault, or `nil` for a faithful wrapper.
    let fault: Fault?

    init(_ fault: Fault?) throws {
        inner = try InMemoryStore()
        self.fault = fault
    }

    var systemTableNames: SystemTableNames { inner.systemTableNames }
    func schema(of table: String) throws -> TableSchema? { try inner.schema(of: table) }

    func read(table: String, id: Value) throws -> Item? {
        if let tx = runningTransaction() { return try tx.read(table: table, id: id) }
        return try inner.read(table: table, id: id)
    }

    func read(_ query: Query) throws -> ReadResult {
        if let tx = runningTransaction() { return try tx.read(query) }
        var q = query
        if fault == .ignoreSkip { q.skip = 0 }
        if fault == .descendingAsAscending { q.sort = q.sort.map { SortKey($0.field) } }
        return try inner.read(q)
    }

    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        if let tx = runningTransaction() { return try tx.upsert(items, into: table, options: options) }
        guard fault == .replaceInsteadOfMerge else { return try inner.upsert(items, into: table, options: options) }
        try inner.write { tx in
            for item in items { if let id = item.id, !id.isNull { try? tx.delete(ids: [id], from: table) } }
            try tx.upsert(items, into: table, options: options)
        }
    }

    func delete(ids: [Value], from table: String) throws {
        if let tx = runningTransaction() { return try tx.delete(ids: ids, from: table) }
        if fault == .strictEmptyDelete, ids.isEmpty, try inner.schema(of: table) == nil { throw LocalStoreError.unknownTable(table) }
        try inner.delete(ids: ids, from: table)
    }

    func delete(matching query: Query) throws {
        if let tx = runningTransaction() { return try tx.delete(matching: query) }
        try inner.delete(matching: query)
    }

    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        if let tx = runningTransaction(nestedWrite: true) { return try tx.performWrite(body) }
        switch fault {
        case .noRollback:
            return try body(self)
        case .servesStoreInsideWrite, .allowsNestedStoreWrite:
            let thread = ObjectIdentifier(Thread.current)
            return try inner.performWrite { tx in
                running.withLock { $0[thread] = tx }
                defer { _ = running.withLock { $0.removeValue(forKey: thread) } }
                return try body(tx)
            }
        case .transactionOutlivesBody, .transactionOnAnyThread:
            return try inner.performWrite { tx in
                let wrapper = MutantTransaction(tx, store: inner, fault: fault)
                defer { wrapper.bodyReturned() }
                return try body(wrapper)
            }
        default:
            return try inner.performWrite(body)
        }
    }

    func defineTable(_ schema: TableSchema) throws {
        // A transaction cannot define tables: inside a body the fault reports success without doing it.
        if runningTransaction() != nil { return }
        guard fault == .ignoresIndexes else { return try inner.defineTable(schema) }
        try inner.defineTable(TableSchema(name: schema.name, columns: schema.columns.map { Column($0.name, $0.type) }))
    }

    func accessPath(for query: Query) throws -> QueryAccessPath {
        if fault == .claimsIndexes, let schema = try inner.schema(of: query.table),
            let name = schema.columns.first(where: \.indexed)?.name ?? schema.indexes.first?.resolvedName
        {
            return .index(name)
        }
        return try inner.accessPath(for: query)
    }
    func tableSchemas() throws -> [TableSchema] { try inner.tableSchemas() }
    func close() throws { try inner.close() }
    var changeCenter: ChangeCenter { inner.changeCenter }
}

/// The transaction a faulty ``MutantStore`` hands to a write body: it forwards to the real one, except
/// that after the body returned (`transactionOutlivesBody`) it forwards to the store, and on another
/// thread than the body's (`transactionOnAnyThread`) it answers without doing anything.
final class MutantTransaction: LocalStoreTransaction, @unchecked Sendable {
    let inner: any LocalStoreTransaction
    let store: InMemoryStore
    let fault: MutantStore.Fault?
    let bodyThread = ObjectIdentifier(Thread.current)
    private let ended = LockedValue(false)

    init(_ inner: any LocalStoreTransaction, store: InMemoryStore, fault: MutantStore.Fault?) {
        self.inner = inner
        self.store = store
        self.fault = fault
    }

    func bodyReturned() { ended.withLock { $0 = true } }

    /// Where a call goes: `.store` after the body (outlives fault), `nil` on another thread (any-thread
    /// fault: the call answers without doing anything), otherwise the real transaction.
    private enum Target { case transaction, store, nowhere }

    private var target: Target {
        if fault == .transactionOutlivesBody, ended.withLock({ $0 }) { return .store }
        if fault == .transactionOnAnyThread, ObjectIdentifier(Thread.current) != bodyThread { return .nowhere }
        return .transaction
    }

    var systemTableNames: SystemTableNames { inner.systemTableNames }

    func schema(of table: String) throws -> TableSchema? {
        switch target {
        case .transaction: return try inner.schema(of: table)
        case .store: return try store.schema(of: table)
        case .nowhere: return nil
        }
    }

    func read(table: String, id: Value) throws -> Item? {
        switch target {
        case .transaction: return try inner.read(table: table, id: id)
        case .store: return try store.read(table: table, id: id)
        case .nowhere: return nil
        }
    }

    func read(_ query: Query) throws -> ReadResult {
        switch target {
        case .transaction: return try inner.read(query)
        case .store: return try store.read(query)
        case .nowhere: throw LocalStoreError(.internal, "mutant: no reads from another thread")
        }
    }

    func upsert(_ items: [Item], into table: String, options: UpsertOptions) throws {
        switch target {
        case .transaction: try inner.upsert(items, into: table, options: options)
        case .store: try store.upsert(items, into: table, options: options)
        case .nowhere: return
        }
    }

    func delete(ids: [Value], from table: String) throws {
        switch target {
        case .transaction: try inner.delete(ids: ids, from: table)
        case .store: try store.delete(ids: ids, from: table)
        case .nowhere: return
        }
    }

    func delete(matching query: Query) throws {
        switch target {
        case .transaction: try inner.delete(matching: query)
        case .store: try store.delete(matching: query)
        case .nowhere: return
        }
    }

    func performWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        switch target {
        case .transaction: return try inner.performWrite { tx in try body(MutantTransaction(tx, store: store, fault: fault)) }
        case .store: return try store.performWrite(body)
        case .nowhere: throw LocalStoreError(.internal, "mutant: no nested writes from another thread")
        }
    }
}

@Suite("Conformance suite self-test")
struct ConformanceSelfTests {
    /// For each fault, checks that must notice it.
    static let mutants: [(MutantStore.Fault, [String])] = [
        (.replaceInsteadOfMerge, ["upsertMergesAbsentKeys", "upsertExplicitNullClears", "idsUpsertUpdatesSameRowWithNewestSpelling"]),
        (.ignoreSkip, ["totalCountSkipAndTop", "pagingStableAscending", "pagingStableMultiKey"]),
        (.noRollback, ["writeRollsBackOnError", "removeOperationRemovesItsErrors", "writeNestedIsASavepoint", "queueEnqueueValidation", "pushErrorsAndResolutions", "nestedTypedCallsAreAtomic"]),
        (.descendingAsAscending, ["sortOrderNullsAndTieBreak", "pagingStableDescending", "predicateHandWrittenExpectations"]),
        (.strictEmptyDelete, ["unknownTableForEveryCall"]),
        (.servesStoreInsideWrite, ["storeCallsInsideWriteAreMisuse"]),
        (.transactionOutlivesBody, ["transactionAfterBodyIsMisuse"]),
        (.transactionOnAnyThread, ["transactionOnAnotherThreadIsMisuse"]),
        (.allowsNestedStoreWrite, ["storeCallsInsideWriteAreMisuse"]),
        (.ignoresIndexes, ["queriesUseDeclaredIndexes"]),
        (.claimsIndexes, ["queriesUseDeclaredIndexes"]),
    ]

    @Test("a broken backend fails the checks that cover its fault", arguments: MutantStore.Fault.allCases)
    func mutantIsCaught(_ fault: MutantStore.Fault) throws {
        let factory = StoreFactory(name: "mutant-\(fault.rawValue)", isPersistent: false) { _ in try MutantStore(fault) }
        let names = try #require(Self.mutants.first { $0.0 == fault }?.1)
        for name in names {
            let check = try #require(ConformanceSuite.allChecks.first { $0.name == name })
            #expect(throws: (any Error).self, "\(name) must notice \(fault)") { try check.run(factory) }
        }
        if fault == .descendingAsAscending {
            let sortCase = try #require(ConformanceSuite.predicateCases.first { $0.name == "sort int descending" })
            #expect(throws: (any Error).self) { try sortCase.check(factory) }
        }
    }

    @Test("the wrapper without a fault passes those checks")
    func wrapperPasses() throws {
        let plain = StoreFactory(name: "wrapper", isPersistent: false) { _ in try MutantStore(nil) }
        for name in Set(Self.mutants.flatMap(\.1)).sorted() {
            let check = try #require(ConformanceSuite.allChecks.first { $0.name == name })
            try check.run(plain)
        }
        let sortCase = try #require(ConformanceSuite.predicateCases.first { $0.name == "sort int descending" })
        try sortCase.check(plain)
    }
}
