import Foundation

// Faster paths for the typed system-table conveniences (the operation queue, the operation-id high-water
// mark, delta tokens). A backend's store or transaction may adopt these `package` protocols; the core's
// conveniences use them when `self` adopts them (``ShortcutCasts``: `as? any SystemTableShortcuts`,
// answered once per type) and run the generic `LocalStoreAccess` calls otherwise, so a backend that
// adopts nothing (the in-memory store, a third party's) keeps working unchanged. docs/sqlite.md,
// "System tables: statements prepared once".

/// Reads of the system tables by primary key or in id order, without a `Query`. An adopter must answer
/// exactly as the generic read it replaces (same rows, same values, same errors).
package protocol SystemTableReadShortcuts {
    /// The operation with the smallest id greater than `id`, decoded as ``TableOperation/init(_:)``
    /// decodes the row that `read(Query(operations, where: id > x, sort: [id], top: 1))` returns.
    func firstOperation(after id: Int64) throws -> TableOperation?

    /// The `value` column of the config row whose id is `id` (matched as the table's string ids match,
    /// case-insensitively), as `read(table: config, id: .string(id))` returns it (`.null` when the row
    /// holds none); `nil` when there is no such row.
    func configValue(id: String) throws -> Value?

    /// The operations of one item — the rows whose `table` equals `table` (bytes) and whose `itemId`
    /// equals `itemId` ignoring ASCII case — in id order, decoded as ``TableOperation/init(_:)`` decodes the
    /// rows `read(Query(operations, where: table == t && itemId equalsIgnoringCase i, sort: [id]))`
    /// returns; `nil` when the adopter does not serve the call here (the caller then runs that query). The
    /// default returns `nil`.
    func itemOperations(table: String, itemId: String) throws -> [TableOperation]?

    /// The operation whose id is `id` — `[]` when there is none, `[operation]` otherwise — decoded as
    /// ``TableOperation/init(_:)`` decodes the row `read(table: operations, id: .int(id))` returns; `nil`
    /// when the adopter does not serve the call here. The default returns `nil`.
    func operationRow(id: Int64) throws -> [TableOperation]?

    /// For each of `itemIds`, whether ``itemOperations(table:itemId:)`` would return at least one
    /// operation — one flag per id, in order — answered in one call (a pulled page asks for all of its
    /// items at once); `nil` when the adopter does not serve the call here (the caller then asks item by
    /// item). The default returns `nil`.
    func pendingItems(table: String, itemIds: [String]) throws -> [Bool]?
}

extension SystemTableReadShortcuts {
    /// Not served: ``SystemTableReadShortcuts/pendingItems(table:itemIds:)`` is optional.
    package func pendingItems(table: String, itemIds: [String]) throws -> [Bool]? { nil }
    /// Not served: ``SystemTableReadShortcuts/itemOperations(table:itemId:)`` is optional.
    package func itemOperations(table: String, itemId: String) throws -> [TableOperation]? { nil }
    /// Not served: ``SystemTableReadShortcuts/operationRow(id:)`` is optional.
    package func operationRow(id: Int64) throws -> [TableOperation]? { nil }
}

/// Writes (and reads inside a write transaction) of the system tables with statements an adopter
/// prepares once, for a transaction. Each method leaves the store, the changes published to observers
/// and the errors thrown exactly as the generic calls named on it would.
package protocol SystemTableShortcuts: SystemTableReadShortcuts {
    /// The largest id in the operations table, `nil` when it is empty (as the first row of
    /// `read(Query(operations, sort: [id descending], top: 1))`).
    func largestOperationId() throws -> Int64?

    /// Stores `operation` as `upsert([operation.item], into: operations, options: .strict)` does.
    func insertOperation(_ operation: TableOperation) throws

    /// Writes `operation` over the row with its id, as `upsert([operation.item], into: operations,
    /// options: .strict)` does; when the row holds the same table, table kind and item id, only its
    /// `properties` is written (its index entries are left as they are).
    func rewriteOperation(_ operation: TableOperation) throws

    /// Appends `operation` (its `id` ignored) under the next operation id in the usual case, and returns
    /// that id: the high-water mark's row holds exactly the entry ``TableConfigEntry/operationIdHighWater(_:)``
    /// writes, its value the canonical decimal form of a mark below `Int64.max`, and the largest
    /// operation id is below `Int64.max`. The store, the changes published and the errors are then as
    /// `LocalStoreAccess.nextOperationId`, ``insertOperation(_:)`` and ``storeConfigEntry(_:)`` of the new
    /// mark leave them. In every other case it returns `nil` having written nothing, and the caller takes
    /// those steps. The default returns `nil`.
    func appendAtNextOperationId(_ operation: TableOperation) throws -> Int64?

    /// Stores `entry` as `upsert([entry.item], into: config, options: .strict)` does. When a row with
    /// the entry's id, table, key and key type (compared byte for byte) exists, only its `value` column
    /// is written.
    func storeConfigEntry(_ entry: TableConfigEntry) throws

    /// Writes the value of the delta-token `entry` when the row holding it — the entry's id, table,
    /// key and key type, compared byte for byte — is the only row of its pair (the rows that
    /// ``deltaTokenRowIds(table:queryId:)`` returns for the entry's table and key); returns whether it
    /// wrote. The store then is as `storeConfigEntry(entry)` leaves it; when it returns `false`, nothing
    /// was written and the caller takes the general path. The default writes nothing.
    func updateSoleDeltaTokenRow(_ entry: TableConfigEntry) throws -> Bool

    /// The ids of the delta token rows of `(table, queryId)`: the rows that
    /// `read(Query(config, where: table equalsIgnoringCase && keyType == 0 && key == queryId))` returns.
    func deltaTokenRowIds(table: String, queryId: String) throws -> [Value]

    /// Deletes the operation `id` and its errors, as `delete(ids: [.int(id)], from: operations)` followed
    /// by `delete(matching: Query(errors, where: operationId == id))`.
    func removeOperationAndErrors(id: Int64) throws

    /// Deletes the errors of operation `operationId`, as `delete(matching: Query(errors, where:
    /// operationId == id))` does (an adopter without a faster path runs
    /// `genericRemoveOperationErrors(operationId:)`).
    func removeOperationErrors(operationId: Int64) throws
}

/// Writes of the system tables that a store makes outside any transaction of its caller, each one statement
/// that commits by itself. An adopter leaves the store, the changes published and the errors as the
/// generic transaction it replaces would.
package protocol SystemTableStoreShortcuts {
    /// Writes the value of the delta-token `entry` when its row is the only one of its pair, as
    /// ``SystemTableShortcuts/updateSoleDeltaTokenRow(_:)`` does, committed on its own; `false` when it wrote
    /// nothing, and the caller then runs `setDeltaToken`'s transaction.
    func updateSoleDeltaTokenRowAlone(_ entry: TableConfigEntry) throws -> Bool
}

extension SystemTableShortcuts {
    /// Writes nothing: ``SystemTableShortcuts/appendAtNextOperationId(_:)`` is optional.
    package func appendAtNextOperationId(_ operation: TableOperation) throws -> Int64? { nil }

    /// Writes nothing: ``SystemTableShortcuts/updateSoleDeltaTokenRow(_:)`` is optional.
    package func updateSoleDeltaTokenRow(_ entry: TableConfigEntry) throws -> Bool { false }
}

// The generic calls each shortcut replaces: what the conveniences run when no shortcut is adopted, and
// what an adopter without a faster path for one of them runs (LMDB).
extension LocalStoreAccess {
    /// ``SystemTableShortcuts/removeOperationErrors(operationId:)`` through `delete(matching:)`.
    package func genericRemoveOperationErrors(operationId: Int64) throws {
        try delete(matching: Query(systemTableNames.errors, where: Field("operationId") == .literal(.int(operationId))))
    }

    /// ``SystemTableReadShortcuts/firstOperation(after:)`` through `read(_:)`.
    package func genericFirstOperation(after id: Int64) throws -> TableOperation? {
        try read(Query(systemTableNames.operations, where: Field("id") > .literal(.int(id)), sort: [SortKey("id")], top: 1))
            .items.first.flatMap(TableOperation.init)
    }

    /// ``SystemTableReadShortcuts/configValue(id:)`` through `read(table:id:)`.
    package func genericConfigValue(id: String) throws -> Value? {
        guard let item = try read(table: systemTableNames.config, id: .string(id)) else { return nil }
        return item["value"] ?? .null
    }
}

extension LocalStoreTransaction {
    /// ``SystemTableShortcuts/largestOperationId()`` through `read(_:)`.
    package func genericLargestOperationId() throws -> Int64? {
        try read(Query(systemTableNames.operations, sort: [SortKey("id", .descending)], top: 1)).items.first?["id"]?.intValue
    }

    /// ``SystemTableShortcuts/insertOperation(_:)`` through `upsert(_:into:options:)`.
    package func genericInsertOperation(_ operation: TableOperation) throws {
        try upsert([operation.item], into: systemTableNames.operations, options: .strict)
    }

    /// ``SystemTableShortcuts/storeConfigEntry(_:)`` through `upsert(_:into:options:)`.
    package func genericStoreConfigEntry(_ entry: TableConfigEntry) throws {
        try upsert([entry.item], into: systemTableNames.config, options: .strict)
    }

    /// ``SystemTableShortcuts/deltaTokenRowIds(table:queryId:)`` through `read(_:)`.
    package func genericDeltaTokenRowIds(table: String, queryId: String) throws -> [Value] {
        try read(Query(systemTableNames.config, where: deltaTokenPredicate(table: table, queryId: queryId))).items.compactMap(\.id)
    }

    /// ``SystemTableShortcuts/removeOperationAndErrors(id:)`` through `delete(ids:from:)` and `delete(matching:)`.
    package func genericRemoveOperationAndErrors(id: Int64) throws {
        try delete(ids: [.int(id)], from: systemTableNames.operations)
        try genericRemoveOperationErrors(operationId: id)
    }
}

/// Reading the value of one config row by primary key, for the operation-id high-water mark and delta
/// tokens: through ``SystemTableReadShortcuts/configValue(id:)`` when the store or transaction offers it,
/// else with `read(table:id:)`.
enum ConfigValueReading {
    static func value(_ access: some LocalStoreAccess, id: String) throws -> Value? {
        try value(access, id: id, shortcuts: ShortcutCasts.readShortcuts(access))
    }

    /// ``value(_:id:)`` with `access`'s shortcuts already cast by the caller (`nil`: it has none).
    static func value(_ access: some LocalStoreAccess, id: String, shortcuts: (any SystemTableReadShortcuts)?) throws -> Value? {
        if let shortcuts { return try shortcuts.configValue(id: id) }
        return try access.genericConfigValue(id: id)
    }
}

/// A store or transaction that can run a composite call's body without guarding each call of it.
///
/// Inside a `write {}` body a backend may make every call atomic on its own (the SQL engine runs each
/// in a savepoint, so that a caller who catches a failed call keeps a transaction without its partial
/// writes). A composite call of the core (enqueue, a completion, a resolution, a pulled page, a purge)
/// never catches an error of a call it makes: any error ends the whole body, which
/// ``LocalStoreAccess/performWrite(_:)`` already undoes (the transaction, or the savepoint of a nested
/// write). Its calls need no savepoint of their own — on SQLCipher each one copies and encrypts every
/// page the call first changes (docs/encryption.md).
package protocol CompositeWrites {
    /// Runs `body` exactly as ``LocalStoreAccess/performWrite(_:)`` does — all of its writes or none —
    /// where `body` propagates every error a call of it throws (it catches none, calls no code of the
    /// user's): the calls it makes need not each be atomic.
    func performCompositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R
}

extension LocalStoreAccess {
    /// A composite call's transaction: ``CompositeWrites/performCompositeWrite(_:)`` when `self` adopts
    /// it, else ``LocalStoreAccess/performWrite(_:)``. `body` must propagate every error it meets.
    package func compositeWrite<R>(_ body: (any LocalStoreTransaction) throws -> R) throws -> R {
        if let composite = ShortcutCasts.compositeWrites(self) { return try composite.performCompositeWrite(body) }
        return try performWrite(body)
    }
}

/// The casts of a store or transaction to the shortcut protocols, answered per type once.
///
/// `value as? any SystemTableShortcuts` asks the runtime's conformance cache every time: about 1,300
/// instructions when the type adopts the protocol (two witness tables: it refines
/// ``SystemTableReadShortcuts``), 3,300 when it does not (callgrind) — on every append, removal, queue
/// read and delta token. Here the answer for the value's dynamic type is looked up once, kept as an
/// existential metatype (which carries the witness tables), and every later cast only opens it.
package enum ShortcutCasts {
    private struct Entry {
        let type: ObjectIdentifier
        let full: (any SystemTableShortcuts.Type)?
        let read: (any SystemTableReadShortcuts.Type)?
        let store: (any SystemTableStoreShortcuts.Type)?
        let composite: (any CompositeWrites.Type)?
    }

    /// One entry per dynamic type seen (stores and transactions of the backends in the process).
    private static let entries = LockedValue<[Entry]>([])

    private static func entry(_ type: Any.Type) -> Entry {
        let id = ObjectIdentifier(type)
        if let found = entries.withLock({ list in list.first { $0.type == id } }) { return found }
        let made = Entry(
            type: id, full: type as? any SystemTableShortcuts.Type, read: type as? any SystemTableReadShortcuts.Type,
            store: type as? any SystemTableStoreShortcuts.Type, composite: type as? any CompositeWrites.Type)
        entries.withLock { list in
            if !list.contains(where: { $0.type == id }) { list.append(made) }
        }
        return made
    }

    /// `value as? any SystemTableShortcuts`.
    package static func shortcuts<S: LocalStoreAccess>(_ value: S) -> (any SystemTableShortcuts)? {
        guard let type = entry(Swift.type(of: value)).full else { return nil }
        // `value` is of the dynamic type `T` (a class reference of a subclass of `S`, or `S` itself).
        func open<T: SystemTableShortcuts>(_: T.Type) -> any SystemTableShortcuts { unsafeBitCast(value, to: T.self) }
        return open(type)
    }

    /// `value as? any SystemTableReadShortcuts`.
    package static func readShortcuts<S: LocalStoreAccess>(_ value: S) -> (any SystemTableReadShortcuts)? {
        guard let type = entry(Swift.type(of: value)).read else { return nil }
        func open<T: SystemTableReadShortcuts>(_: T.Type) -> any SystemTableReadShortcuts { unsafeBitCast(value, to: T.self) }
        return open(type)
    }

    /// `value as? any CompositeWrites`.
    package static func compositeWrites<S: LocalStoreAccess>(_ value: S) -> (any CompositeWrites)? {
        guard let type = entry(Swift.type(of: value)).composite else { return nil }
        func open<T: CompositeWrites>(_: T.Type) -> any CompositeWrites { unsafeBitCast(value, to: T.self) }
        return open(type)
    }

    /// `value as? any SystemTableStoreShortcuts`.
    package static func storeShortcuts<S: LocalStoreAccess>(_ value: S) -> (any SystemTableStoreShortcuts)? {
        guard let type = entry(Swift.type(of: value)).store else { return nil }
        func open<T: SystemTableStoreShortcuts>(_: T.Type) -> any SystemTableStoreShortcuts { unsafeBitCast(value, to: T.self) }
        return open(type)
    }
}
