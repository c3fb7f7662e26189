import Foundation

/// The names of the three system tables a sync engine needs.
public struct SystemTableNames: Sendable, Hashable {
    /// The pending-operation queue (`MS_TableOperations` by default).
    public var operations: String
    /// Push failures awaiting resolution (`MS_TableOperationErrors` by default).
    public var errors: String
    /// Delta tokens and other settings (`MS_TableConfig` by default).
    public var config: String

    /// Creates a set of names; each must be a valid identifier and they must differ.
    public init(operations: String, errors: String, config: String) {
        self.operations = operations
        self.errors = errors
        self.config = config
    }

    /// `MS_TableOperations`, `MS_TableOperationErrors`, `MS_TableConfig`: the Azure Mobile Apps SDK's names.
    public static let `default` = SystemTableNames(
        operations: "MS_TableOperations", errors: "MS_TableOperationErrors", config: "MS_TableConfig")

    /// The three schemas, in the order operations, errors, config.
    public var schemas: [TableSchema] { [operationsSchema, errorsSchema, configSchema] }

    /// TableOperations: `id` Int64 (ordered numerically), `table`, `tableKind`, `itemId`, `properties` (binary UTF-8 JSON).
    public var operationsSchema: TableSchema {
        TableSchema(
            name: operations,
            columns: [
                Column("id", .integer), Column("table", .string), Column("tableKind", .integer),
                Column("itemId", .string), Column("properties", .binary),
            ])
    }

    /// TableOperationErrors: `id` String, `operationId` Int64, `tableKind`, `properties` (binary).
    public var errorsSchema: TableSchema {
        TableSchema(
            name: errors,
            columns: [
                Column("id", .string), Column("operationId", .integer), Column("tableKind", .integer),
                Column("properties", .binary),
            ])
    }

    /// TableConfig: `id` String, `table`, `key`, `keyType` Int64, `value`.
    public var configSchema: TableSchema {
        TableSchema(
            name: config,
            columns: [
                Column("id", .string), Column("table", .string), Column("key", .string), Column("keyType", .integer),
                Column("value", .string),
            ])
    }

    /// Whether `table` is one of the three names (case-insensitive).
    public func isReserved(_ table: String) -> Bool {
        let f = Identifier.fold(table)
        return f == Identifier.fold(operations) || f == Identifier.fold(errors) || f == Identifier.fold(config)
    }

    /// Checks the names are valid identifiers and distinct.
    public func validate() throws {
        for n in [operations, errors, config] { try Identifier.validate(n, what: "system table name") }
        guard Set([operations, errors, config].map(Identifier.fold)).count == 3 else {
            throw LocalStoreError(.invalidIdentifier, "the three system table names must differ: \(operations), \(errors), \(config)")
        }
    }
}

/// One queued operation (a row of TableOperations).
public struct TableOperation: Sendable, Hashable {
    /// The operation's id: its position in the queue.
    public var id: Int64
    /// The user table the operation applies to.
    public var table: String
    /// The kind of table (the SDK's `MSTableTypes`: 0 for a table, ...).
    public var tableKind: Int
    /// The id of the item the operation applies to.
    public var itemId: String
    /// The operation's properties as UTF-8 JSON written by the sync layer.
    public var properties: [UInt8]

    /// Creates a record.
    public init(id: Int64, table: String, tableKind: Int = 0, itemId: String, properties: [UInt8] = []) {
        self.id = id
        self.table = table
        self.tableKind = tableKind
        self.itemId = itemId
        self.properties = properties
    }

    /// The record as an item of the operations table.
    public var item: Item {
        ["id": .int(id), "table": .string(table), "tableKind": .int(Int64(tableKind)), "itemId": .string(itemId),
         "properties": .binary(properties)]
    }

    /// Reads a record from an item of the operations table; `nil` when the id is missing.
    public init?(_ item: Item) {
        guard let id = item["id"]?.intValue else { return nil }
        self.id = id
        self.table = item["table"]?.stringValue ?? ""
        self.tableKind = Int(item["tableKind"]?.intValue ?? 0)
        self.itemId = item["itemId"]?.stringValue ?? ""
        self.properties = item["properties"]?.binaryValue ?? []
    }
}

/// One push failure (a row of TableOperationErrors).
public struct TableOperationError: Sendable, Hashable {
    /// The error's id.
    public var id: String
    /// The operation that failed.
    public var operationId: Int64
    /// The kind of table.
    public var tableKind: Int
    /// The error's details as UTF-8 JSON written by the sync layer.
    public var properties: [UInt8]

    /// Creates a record.
    public init(id: String, operationId: Int64, tableKind: Int = 0, properties: [UInt8] = []) {
        self.id = id
        self.operationId = operationId
        self.tableKind = tableKind
        self.properties = properties
    }

    /// The record as an item of the errors table.
    public var item: Item {
        ["id": .string(id), "operationId": .int(operationId), "tableKind": .int(Int64(tableKind)),
         "properties": .binary(properties)]
    }

    /// Reads a record from an item of the errors table; `nil` when the id is missing.
    public init?(_ item: Item) {
        guard let id = item["id"]?.stringValue else { return nil }
        self.id = id
        self.operationId = item["operationId"]?.intValue ?? 0
        self.tableKind = Int(item["tableKind"]?.intValue ?? 0)
        self.properties = item["properties"]?.binaryValue ?? []
    }
}

/// One setting (a row of TableConfig).
public struct TableConfigEntry: Sendable, Hashable {
    /// Kinds of config keys (the SDK's `MSConfigKeyTypes`).
    public static let deltaTokenKeyType: Int64 = 0

    /// The entry's id.
    public var id: String
    /// The table the entry belongs to.
    public var table: String
    /// The key (for a delta token: the query id).
    public var key: String
    /// The kind of key (0 for delta tokens).
    public var keyType: Int64
    /// The value.
    public var value: String

    /// Creates an entry.
    public init(id: String, table: String, key: String, keyType: Int64, value: String) {
        self.id = id
        self.table = table
        self.key = key
        self.keyType = keyType
        self.value = value
    }

    /// The entry as an item of the config table.
    public var item: Item {
        ["id": .string(id), "table": .string(table), "key": .string(key), "keyType": .int(keyType), "value": .string(value)]
    }

    /// Reads an entry from an item of the config table; `nil` when the id is missing.
    public init?(_ item: Item) {
        guard let id = item["id"]?.stringValue else { return nil }
        self.id = id
        self.table = item["table"]?.stringValue ?? ""
        self.key = item["key"]?.stringValue ?? ""
        self.keyType = item["keyType"]?.intValue ?? 0
        self.value = item["value"]?.stringValue ?? ""
    }
}

/// Delta tokens are stored as ISO 8601 text with millisecond precision (`2026-01-02T03:04:05.678Z`),
/// the precision of the server timestamps they come from.
public enum DeltaTokenFormat {
    /// Formats a date, rounded to the millisecond. Dates in the years 0000 to 9999 (the ones
    /// ``date(from:)`` reads back, see ``isStorable(_:)``) give 24 characters; a year outside them is
    /// written with its own digits, and a time interval too large for that (or not a number) is first
    /// brought within ±8.64 × 10¹⁸ milliseconds (0 for NaN), so that no date traps.
    public static func string(from date: Date) -> String {
        let ms = milliseconds(date)
        guard storableMilliseconds.contains(ms) else { return wideString(milliseconds: ms) }
        let total = Int64(ms)
        let seconds = floorDiv(total, 1000)
        let millis = Int(total - seconds * 1000)
        let days = floorDiv(seconds, 86400)
        let secOfDay = Int(seconds - days * 86400)
        let (y, m, d) = civil(fromDays: days)
        // yyyy-MM-ddTHH:mm:ss.SSSZ, written in place (no intermediate strings).
        return String(unsafeUninitializedCapacity: 24) { out in
            func digits(_ v: Int, _ count: Int, at end: Int) {
                var v = v
                for i in stride(from: end - 1, through: end - count, by: -1) {
                    out[i] = UInt8(truncatingIfNeeded: 48 + v % 10)
                    v /= 10
                }
            }
            digits(y, 4, at: 4)
            out[4] = UInt8(ascii: "-")
            digits(m, 2, at: 7)
            out[7] = UInt8(ascii: "-")
            digits(d, 2, at: 10)
            out[10] = UInt8(ascii: "T")
            digits(secOfDay / 3600, 2, at: 13)
            out[13] = UInt8(ascii: ":")
            digits(secOfDay / 60 % 60, 2, at: 16)
            out[16] = UInt8(ascii: ":")
            digits(secOfDay % 60, 2, at: 19)
            out[19] = UInt8(ascii: ".")
            digits(millis, 3, at: 23)
            out[23] = UInt8(ascii: "Z")
            return 24
        }
    }

    /// Whether `date` (rounded to the millisecond) lies in the years 0000 to 9999, which
    /// ``string(from:)`` writes with four digits and ``date(from:)`` reads back.
    public static func isStorable(_ date: Date) -> Bool { storableMilliseconds.contains(milliseconds(date)) }

    /// `date` in milliseconds since 1970, rounded as it is stored.
    private static func milliseconds(_ date: Date) -> Double { (date.timeIntervalSince1970 * 1000).rounded() }

    /// 0000-01-01T00:00:00.000Z through 9999-12-31T23:59:59.999Z, in milliseconds since 1970 (NaN is outside).
    private static let storableMilliseconds =
        Double(daysFromCivil(0, 1, 1)) * 86_400_000...Double(daysFromCivil(10000, 1, 1)) * 86_400_000 - 1

    /// ``string(from:)`` outside the years 0000 to 9999: each field padded to its width with zeros in
    /// front of its decimal digits (a negative year keeps its sign after the zeros, as it always has).
    private static func wideString(milliseconds: Double) -> String {
        let limit = 8.64e18
        let ms = milliseconds.isNaN ? 0 : min(max(milliseconds, -limit), limit)
        let seconds = Int64((ms / 1000).rounded(.down))
        let millis = Int(ms - Double(seconds) * 1000)
        let days = floorDiv(seconds, 86400)
        let secOfDay = Int(seconds - days * 86400)
        let (y, m, d) = civil(fromDays: days)
        func pad(_ v: Int, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secOfDay / 3600, 2)):\(pad(secOfDay / 60 % 60, 2)):\(pad(secOfDay % 60, 2)).\(pad(millis, 3))Z"
    }

    /// Parses `yyyy-MM-ddTHH:mm:ss[.SSS]Z`; `nil` for anything else.
    public static func date(from text: String) -> Date? {
        let b = Array(text.utf8)
        func num(_ r: Range<Int>) -> Int? {
            guard r.upperBound <= b.count else { return nil }
            var v = 0
            for i in r {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                v = v * 10 + Int(b[i] - 48)
            }
            return v
        }
        guard b.count >= 20, b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58, b.last == 90,
            let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13), let mi = num(14..<16),
            let s = num(17..<19), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
        else { return nil }
        var millis = 0.0
        if b.count > 20 {
            guard b[19] == 46, b.count > 21, b[20..<(b.count - 1)].allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            // Any number of fraction digits; beyond nanoseconds they cannot change a `Date` (and would
            // overflow `num`).
            let digits = min(b.count - 21, 9)
            guard let frac = num(20..<(20 + digits)) else { return nil }
            millis = Double(frac) / pow(10, Double(digits)) * 1000
        } else if b[19] != 90 {
            return nil
        }
        let days = daysFromCivil(y, mo, d)
        let secs = Double(days * 86400 + Int64(h * 3600 + mi * 60 + s))
        return Date(timeIntervalSince1970: secs + millis / 1000)
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    // Howard Hinnant's civil-from-days algorithms.
    static func civil(fromDays z0: Int64) -> (Int, Int, Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(m <= 2 ? y + 1 : y), Int(m), Int(d))
    }

    static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int64 {
        let y = Int64(m <= 2 ? y0 - 1 : y0)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mm = Int64(m)
        let doy = (153 * (mm > 2 ? mm - 3 : mm + 9) + 2) / 5 + Int64(d) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
