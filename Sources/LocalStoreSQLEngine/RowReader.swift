import Foundation
import LocalStore

/// Reads the result rows of one statement as `[Value]`, each column as the value of its schema type
/// (the mapping of ``Statement/value(_:as:)``, docs/sqlite.md). The column functions are taken from the
/// connection's API once per statement, not through the connection for every value, and SQLite is asked
/// for a column's storage class only when its value could be NULL (a NULL text pointer, a zero number).
struct RowReader {
    let statement: Statement
    /// The type of each result column, in order.
    let types: [ColumnType]
    private let handle: OpaquePointer
    private let step: @convention(c) (OpaquePointer?) -> Int32
    private let columnType: @convention(c) (OpaquePointer?, Int32) -> Int32
    private let columnInt64: @convention(c) (OpaquePointer?, Int32) -> Int64
    private let columnDouble: @convention(c) (OpaquePointer?, Int32) -> Double
    private let columnText: @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<UInt8>?
    private let columnBlob: @convention(c) (OpaquePointer?, Int32) -> UnsafeRawPointer?
    private let columnBytes: @convention(c) (OpaquePointer?, Int32) -> Int32

    init(_ statement: Statement, types: [ColumnType]) {
        let api = statement.connection.api
        self.statement = statement
        self.types = types
        handle = statement.handle
        step = api.step
        columnType = api.column_type
        columnInt64 = api.column_int64
        columnDouble = api.column_double
        columnText = api.column_text
        columnBlob = api.column_blob
        columnBytes = api.column_bytes
    }

    /// Steps once: `true` when a row is available, `false` when done (as ``Statement/step()``).
    func next() throws -> Bool {
        let rc = step(handle)
        if rc == SQLite.ROW { return true }
        if rc == SQLite.DONE { return false }
        throw statement.connection.error(rc, "cannot run SQL")
    }

    /// The current row: one value per entry of ``types``.
    func row() throws -> [Value] {
        var row: [Value] = []
        row.reserveCapacity(types.count)
        try append(to: &row)
        return row
    }

    /// Appends the current row's values to `values`, one per entry of ``types``; on an error `values`
    /// may hold some of them.
    func append(to values: inout [Value]) throws {
        var n: Int32 = 0
        for type in types {
            values.append(try value(n, type))
            n += 1
        }
    }

    /// Appends the current row's values to `values`, the buffer of a result's item rows; on an error
    /// `values` is left as it was.
    func append(to values: inout ValueRows.Builder) throws {
        // The row's values are written in place, and counted once the row is whole.
        let width = types.count
        let out = values.room(for: width)
        var n = 0
        do {
            try types.withUnsafeBufferPointer { types in
                while n < width {
                    (out + n).initialize(to: try value(Int32(truncatingIfNeeded: n), types[n]))
                    n &+= 1
                }
            }
        } catch {
            out.deinitialize(count: n)
            throw error
        }
        values.didAppend(width)
    }

    private func text(_ p: UnsafePointer<UInt8>, _ n: Int32) -> String {
        String(decoding: UnsafeBufferPointer(start: p, count: Int(columnBytes(handle, n))), as: UTF8.self)
    }

    /// Column `n` as a value of `type`: the same value as ``Statement/value(_:as:)``.
    private func value(_ n: Int32, _ type: ColumnType) throws -> Value {
        switch type {
        case .string:
            // column_text is NULL for a NULL value (and when SQLite is out of memory, which
            // Statement.text reads as "").
            guard let p = columnText(handle, n) else { return columnType(handle, n) == SQLite.NULL ? .null : .string("") }
            return .string(text(p, n))
        case .json:
            guard let p = columnText(handle, n) else {
                if columnType(handle, n) == SQLite.NULL { return .null }
                return try json("")
            }
            return try json(text(p, n))
        default:
            break
        }
        // A NULL reads as 0 from column_int64 and column_double: the storage class is asked only then.
        switch type {
        case .integer, .boolean:
            let i = columnInt64(handle, n)
            if i == 0, columnType(handle, n) == SQLite.NULL { return .null }
            return type == .integer ? .int(i) : .bool(i != 0)
        // REAL values with no fractional part may be stored as integers; column_double restores them.
        case .double, .date:
            let d = columnDouble(handle, n)
            if d == 0, columnType(handle, n) == SQLite.NULL { return .null }
            return type == .double ? .double(d) : .date(Date(timeIntervalSinceReferenceDate: d))
        case .binary:
            if columnType(handle, n) == SQLite.NULL { return .null }
            let p = columnBlob(handle, n)
            let count = Int(columnBytes(handle, n))
            guard let p, count > 0 else { return .binary([]) }
            return .binary(Array(UnsafeRawBufferPointer(start: p, count: count)))
        case .string, .json:
            return .null  // handled above
        }
    }

    private func json(_ raw: String) throws -> Value {
        do {
            return .json(try JSON(parsing: raw))
        } catch {
            throw LocalStoreError(.corrupt, "a json column holds text that is not JSON: \(Value.string(raw))")
        }
    }
}

/// How the rows of one statement become items: the shared column names (``ItemLayout``) and the
/// column types, in result order.
struct ItemShape: Sendable {
    /// `nil` when the names are not distinct (a projection naming a column twice): items are then
    /// built as dictionaries.
    let layout: ItemLayout?
    let names: [String]
    let types: [ColumnType]

    init(_ schema: TableSchema, columns: [Int]) {
        names = columns.map { schema.columns[$0].name }
        types = columns.map { schema.columns[$0].type }
        layout = ItemLayout(names: names)
    }

    /// The item of the row `reader` is on.
    func item(_ reader: RowReader) throws -> Item {
        if let layout {
            var values = ValueRows.Builder(capacity: types.count)
            try reader.append(to: &values)
            return Item(layout: layout, values: values.rows, start: 0)
        }
        return item(try reader.row()[...])
    }

    /// The items of the remaining rows of `reader`, appended to `items`. Their values are read into one
    /// buffer (room for `expectedRows` rows is made first) and each item is a slice of it: one
    /// allocation per result instead of one per row, and one to free. On an error `items` is unchanged.
    func appendItems(_ reader: RowReader, to items: inout [Item], expectedRows: Int) throws {
        let width = types.count
        var values = ValueRows.Builder(capacity: expectedRows * width)
        var rows = 0
        while try reader.next() {
            try reader.append(to: &values)
            rows += 1
        }
        guard rows > 0 else { return }
        items.reserveCapacity(items.count + rows)
        var start = 0
        for _ in 0..<rows {
            if let layout {
                items.append(Item(layout: layout, values: values.rows, start: start))
            } else {
                items.append(item((0..<width).map { values.rows[start + $0] }[...]))
            }
            start += width
        }
    }

    /// The dictionary-form item of `row` (names not distinct: a repeated name keeps its last value).
    private func item(_ row: ArraySlice<Value>) -> Item {
        var values: [String: Value] = Dictionary(minimumCapacity: names.count)
        for (name, value) in zip(names, row) { values[name] = value }
        return Item(values)
    }
}
