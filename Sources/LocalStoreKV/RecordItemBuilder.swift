import Foundation
import LocalStore

/// Builds items straight from stored records, without an intermediate decoded row: each item is in
/// row form — its values, in the order of the returned columns, under a layout of their
/// names made once per builder and shared by every item it builds — so no dictionary is built, copied
/// or hashed per record, and every string is built once. ``items(count:_:)`` puts the values of all its
/// items in one buffer, each item a slice of it (one allocation per result instead of one per item).
///
/// Records are ``RecordCodec`` records of either layout. A backend keeps one builder of whole rows
/// per table (``init(schema:)``) for reads by id and makes one per query (``init(_:)``) for its result:
///
/// ```swift
/// let builder = RecordItemBuilder(resolvedQuery)
/// let items = try builder.items(count: records.count) { records[$0] }   // UnsafeRawBufferPointer each
/// ```
///
/// The items equal what ``RecordCodec/decode(_:schema:)-(UnsafeRawBufferPointer,_)`` followed by `ResolvedQuery.project` (or, for
/// every column, a read by id) gives: the same keys (the columns' defined spelling), the same values,
/// null for a column the record is too short to hold. The record is checked exactly as the decoder
/// checks it, the columns not returned included, so a damaged record is `corrupt` here too, with the
/// decoder's message (`RecordItemBuilderTests`): a plain record (`fillPlain`) is decoded in one pass
/// over its bytes, and anything else — a json value, a malformed byte, a value of another type — by
/// ``RecordCodec/forEachValue(_:schema:idIndex:_:)``, which returns the same values or throws.
public struct RecordItemBuilder: Sendable {
    /// The table whose records this builder reads.
    public let schema: TableSchema
    let idIndex: Int
    /// The returned columns' names, shared by every item; `nil` when they are not distinct (a
    /// projection naming a column twice), and the items are then built as dictionaries.
    package let layout: ItemLayout?
    /// The returned columns' names, in item (row) order.
    private let names: [String]
    /// For each column of the schema, its position in an item's row; `-1` when not returned.
    private let slots: [Int]
    /// For each column of the schema, the record tag of its non-null values (``RecordCodec/Tag``;
    /// `false` for a boolean column, whose values carry `false` or `true`); json columns carry `0xFF`
    /// (the one-pass decoder leaves them to the checked one).
    private let tags: [UInt8]
    /// Whether the row is every column of the schema in schema order (values are stored as decoded).
    private let isWholeRow: Bool

    /// A builder of items holding the columns at `projection` (positions in `schema`).
    public init(schema: TableSchema, projection: [Int]) {
        self.schema = schema
        idIndex = schema.idIndex
        var names: [String] = []
        names.reserveCapacity(projection.count)
        var slots = [Int](repeating: -1, count: schema.columns.count)
        for n in projection {
            let name = schema.columns[n].name
            // A column returned twice is one key, at its first position (as a dictionary keeps it once).
            if slots[n] < 0 {
                slots[n] = names.count
                names.append(name)
            }
        }
        self.names = names
        self.slots = slots
        tags = schema.columns.map { c in
            switch c.type {
            case .string: return RecordCodec.Tag.string
            case .integer: return RecordCodec.Tag.int
            case .double: return RecordCodec.Tag.double
            case .boolean: return RecordCodec.Tag.false
            case .date: return RecordCodec.Tag.date
            case .binary: return RecordCodec.Tag.binary
            default: return 0xFF
            }
        }
        layout = ItemLayout(names: names)
        isWholeRow = names.count == schema.columns.count && slots.enumerated().allSatisfy { $0.offset == $0.element }
    }

    /// A builder of whole rows (every column).
    public init(schema: TableSchema) {
        self.init(schema: schema, projection: Array(schema.columns.indices))
    }

    /// A builder of the items `query` returns (its projected columns).
    public init(_ query: ResolvedQuery) {
        self.init(schema: query.schema, projection: query.projection)
    }

    /// The item of a stored record; `corrupt` when the record does not decode.
    public func item(_ record: UnsafeRawBufferPointer) throws -> Item {
        let width = names.count
        if width == 0 {
            // No column returned: the record is still checked.
            try RecordCodec.check(record, schema: schema, idIndex: idIndex)
            return item(ValueRows.make(capacity: 0), start: 0)
        }
        return item(try ValueRows.make(count: width) { _ = try fill(record, $0) }, start: 0)
    }

    /// ``item(_:)`` with its values in `spare` when the caller's is free — referenced by nothing else (the
    /// item built from it last was dropped) and holding a row as wide as this builder's
    /// (``ValueRows/refill(count:_:)``) — instead of a new buffer; otherwise in a new one, which becomes
    /// `spare`. A record longer than ``RecordItemBuilder/spareRecordLimit`` is built in a buffer of its own and
    /// `spare` let go, so a thread's spare never keeps large values alive; so is a record the one-pass
    /// decoder does not take (a json value, …): a json value is a tree of boxes, and Swift's enum
    /// pointers carry their case in bits LeakSanitizer does not mask, so a json value a thread's spare
    /// kept alive at exit was reported as leaked.
    package func item(_ record: UnsafeRawBufferPointer, reusing spare: inout ValueRows?) throws -> Item {
        let width = names.count
        guard let layout, width > 0, record.count <= RecordItemBuilder.spareRecordLimit else {
            spare = nil
            return try item(record)
        }
        var plain = true
        if isKnownUniquelyReferenced(&spare), let rows = spare {
            do {
                if try rows.refill(count: width, { plain = try fill(record, $0) }) {
                    if !plain { spare = nil }
                    return Item(layout: layout, values: rows, start: 0)
                }
            } catch {
                spare = nil
                throw error
            }
        }
        let rows = try ValueRows.make(count: width) { plain = try fill(record, $0) }
        spare = plain ? rows : nil
        return Item(layout: layout, values: rows, start: 0)
    }

    /// The longest record whose values a thread's spare buffer may keep until its next read.
    package static let spareRecordLimit = 4096

    /// The items of `count` stored records (`record(k)` is the `k`th), their values in one buffer;
    /// `corrupt` when one does not decode.
    public func items(count: Int, _ record: (Int) -> UnsafeRawBufferPointer) throws -> [Item] {
        if count == 0 { return [] }
        let width = names.count
        if width == 0 {
            // No column returned: the records are still checked.
            for k in 0..<count { try RecordCodec.check(record(k), schema: schema, idIndex: idIndex) }
            let none = ValueRows.make(capacity: 0)
            return (0..<count).map { _ in item(none, start: 0) }
        }
        let values = try ValueRows.make(count: count * width) { p in
            var initialized = 0
            do {
                for k in 0..<count {
                    _ = try fill(record(k), p + initialized)
                    initialized += width
                }
            } catch {
                p.deinitialize(count: initialized)
                throw error
            }
        }
        var items: [Item] = []
        items.reserveCapacity(count)
        var start = 0
        if let layout {
            for _ in 0..<count {
                items.append(Item(layout: layout, values: values, start: start))
                start += width
            }
        } else {
            for _ in 0..<count {
                items.append(item(values, start: start))
                start += width
            }
        }
        return items
    }

    /// The item whose values (in item order) are the `names.count` values of `values` from `start`.
    @inline(__always)
    private func item(_ values: ValueRows, start: Int) -> Item {
        if let layout { return Item(layout: layout, values: values, start: start) }
        var d: [String: Value] = Dictionary(minimumCapacity: names.count)
        for (n, name) in names.enumerated() { d[name] = values[start + n] }
        return Item(d)
    }

    /// Initializes `out[0..<names.count]` with the returned columns' values of `record`, in item
    /// order; `corrupt` when the record does not decode (then `out` is left uninitialized). Returns
    /// whether the one-pass decoder took the record (``fillPlain(_:_:)``); `false` when the checked one did.
    private func fill(_ record: UnsafeRawBufferPointer, _ out: UnsafeMutablePointer<Value>) throws -> Bool {
        if fillPlain(record, out) { return true }
        // Not a plain record: the checked decoder answers (the same values, or `corrupt`).
        var row = [Value](repeating: .null, count: names.count)
        let slots = self.slots
        _ = try RecordCodec.forEachValue(record, schema: schema, idIndex: idIndex) { n, v in
            let slot = slots[n]
            if slot >= 0 { row[slot] = v }
        }
        for (k, v) in row.enumerated() { (out + k).initialize(to: v) }
        return false
    }

    /// One pass over a plain record: the version byte, the row number and the column count (version
    /// 1; version 2: the column count, the tags and the row number), then
    /// each stored column — null, or a value of its column's type other than json: booleans, integers,
    /// finite doubles, dates, binaries and strings (ASCII, or valid UTF-8) — with the id column not
    /// null and no byte left over. Initializes `out[0..<names.count]` with the returned columns' values
    /// (item order, null for the columns a short record lacks) and returns `true`; returns `false`
    /// (leaving `out` uninitialized) at anything else. Every record it accepts is one the decoder
    /// accepts with the same values, so it never decides that a record is damaged.
    private func fillPlain(_ record: UnsafeRawBufferPointer, _ out: UnsafeMutablePointer<Value>) -> Bool {
        guard let p = record.baseAddress else { return false }
        let end = record.count
        guard end > 0 else { return false }
        var i = 1
        let stored: UInt64
        // Version 2: where the tags are (-1: each before its payload, version 1).
        var tagAt = -1
        switch p.load(as: UInt8.self) {
        case RecordCodec.version:
            guard RecordCodec.skipRawRowNumber(p, &i, end), let count = RecordCodec.rawVarint(p, &i, end) else { return false }
            stored = count
        case RecordCodec.tagsFirstVersion:
            guard let count = RecordCodec.rawVarint(p, &i, end), count <= UInt64(end &- i) else { return false }
            stored = count
            tagAt = i
            i &+= Int(count)
            guard RecordCodec.skipRawRowNumber(p, &i, end) else { return false }
        default:
            return false
        }
        let width = names.count
        if isWholeRow {
            guard stored <= UInt64(width) else { return false }
            return tags.withUnsafeBufferPointer { tags in
                guard let t = tags.baseAddress else { return false }
                return RecordItemBuilder.fillWholePlain(
                    p, from: i, end: end, count: Int(stored), width: width, tags: t, tagAt: tagAt, idIndex: idIndex, out)
            }
        }
        return tags.withUnsafeBufferPointer { tags -> Bool in
            guard stored <= UInt64(tags.count) else { return false }
            let count = Int(stored)
            // Every slot starts as null and a returned value is stored over it.
            out.initialize(repeating: .null, count: width)
            var hasId = false
            let ok = slots.withUnsafeBufferPointer { slots -> Bool in
                for n in 0..<count {
                    let tag: UInt8
                    if tagAt < 0 {
                        guard i < end else { return false }
                        tag = p.load(fromByteOffset: i, as: UInt8.self)
                        i += 1
                    } else {
                        tag = p.load(fromByteOffset: tagAt &+ n, as: UInt8.self)
                    }
                    let slot = slots[n]
                    let value: Value
                    switch tag {
                    case RecordCodec.Tag.null:
                        continue
                    case RecordCodec.Tag.false, RecordCodec.Tag.true:
                        guard tags[n] == RecordCodec.Tag.false else { return false }
                        value = .bool(tag == RecordCodec.Tag.true)
                    case RecordCodec.Tag.int:
                        guard tags[n] == RecordCodec.Tag.int, let u = RecordCodec.rawVarint(p, &i, end) else { return false }
                        value = .int(RecordCodec.unzigzag(u))
                    case RecordCodec.Tag.double, RecordCodec.Tag.date:
                        guard tags[n] == tag, end - i >= 8 else { return false }
                        let d = Double(bitPattern: UInt64(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                        i += 8
                        if tag == RecordCodec.Tag.date {
                            value = .date(Date(timeIntervalSinceReferenceDate: d))
                        } else {
                            guard d.isFinite else { return false }
                            value = .double(d)
                        }
                    case RecordCodec.Tag.string:
                        guard tags[n] == tag, let raw = RecordItemBuilder.lengthPrefixed(p, &i, end) else { return false }
                        if ByteReader.isASCII(raw) {
                            if slot < 0 {
                                if n == idIndex { hasId = true }
                                continue
                            }
                            value = .string(String(decoding: raw, as: UTF8.self))
                        } else {
                            guard let s = String(validating: raw, as: UTF8.self) else { return false }
                            value = .string(s)
                        }
                    case RecordCodec.Tag.binary:
                        guard tags[n] == tag, let raw = RecordItemBuilder.lengthPrefixed(p, &i, end) else { return false }
                        if n == idIndex { hasId = true }
                        if slot < 0 { continue }
                        value = .binary(Array(raw))
                    default:
                        return false
                    }
                    if n == idIndex { hasId = true }
                    if slot >= 0 { out[slot] = value }
                }
                return true
            }
            guard ok, i == end, hasId else {
                out.deinitialize(count: width)
                return false
            }
            return true
        }
    }

    /// The bytes of a string or binary value whose length varint starts at `i` (past its tag), with `i`
    /// moved past them; `nil` when the length does not decode or runs past `end`.
    @inline(__always)
    private static func lengthPrefixed(_ p: UnsafeRawPointer, _ i: inout Int, _ end: Int) -> UnsafeRawBufferPointer? {
        guard let length = RecordCodec.rawVarint(p, &i, end), length <= UInt64(end &- i) else { return nil }
        let raw = UnsafeRawBufferPointer(start: p + i, count: Int(length))
        i &+= Int(length)
        return raw
    }

    /// ``fillPlain(_:_:)`` for a builder of whole rows (every column, in schema order), past the
    /// record's header: the `count` stored values from offset `i`, then null for the columns a short
    /// record lacks. One loop whose only state is the offset and the column, so each value costs its
    /// tag test and its payload (the general loop also carries a projection's slots). Accepts exactly
    /// the records ``fillPlain(_:_:)`` accepts, with the same values; on `false`, `out` is left
    /// uninitialized. `tagAt`: where a version-2 record's tags are, -1 for version 1 (each tag before
    /// its payload).
    private static func fillWholePlain(
        _ p: UnsafeRawPointer, from start: Int, end: Int, count: Int, width: Int, tags: UnsafePointer<UInt8>, tagAt: Int,
        idIndex: Int, _ out: UnsafeMutablePointer<Value>
    ) -> Bool {
        var i = start
        // `n` values are initialized; the loop ends early (`break scan`, `n < count`) at anything the
        // one-pass decoder does not accept.
        var n = 0
        scan: while n < count {
            let tag: UInt8
            if tagAt < 0 {
                guard i < end else { break scan }
                tag = p.load(fromByteOffset: i, as: UInt8.self)
                i &+= 1
            } else {
                tag = p.load(fromByteOffset: tagAt &+ n, as: UInt8.self)
            }
            let expected = tags[n]
            let value: Value
            switch tag {
            case RecordCodec.Tag.null:
                // The id is never null.
                guard n != idIndex else { break scan }
                value = .null
            case RecordCodec.Tag.false, RecordCodec.Tag.true:
                guard expected == RecordCodec.Tag.false else { break scan }
                value = .bool(tag == RecordCodec.Tag.true)
            case RecordCodec.Tag.int:
                guard expected == RecordCodec.Tag.int, let u = RecordCodec.rawVarint(p, &i, end) else { break scan }
                value = .int(RecordCodec.unzigzag(u))
            case RecordCodec.Tag.double, RecordCodec.Tag.date:
                guard expected == tag, end &- i >= 8 else { break scan }
                let d = Double(bitPattern: UInt64(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                i &+= 8
                if tag == RecordCodec.Tag.date {
                    value = .date(Date(timeIntervalSinceReferenceDate: d))
                } else {
                    guard d.isFinite else { break scan }
                    value = .double(d)
                }
            case RecordCodec.Tag.string:
                guard expected == tag, let raw = RecordItemBuilder.lengthPrefixed(p, &i, end) else { break scan }
                if ByteReader.isASCII(raw) {
                    value = .string(String(decoding: raw, as: UTF8.self))
                } else {
                    guard let s = String(validating: raw, as: UTF8.self) else { break scan }
                    value = .string(s)
                }
            case RecordCodec.Tag.binary:
                guard expected == tag, let raw = RecordItemBuilder.lengthPrefixed(p, &i, end) else { break scan }
                value = .binary(Array(raw))
            default:
                break scan
            }
            (out + n).initialize(to: consume value)
            n &+= 1
        }
        // Every byte read, and the id stored (a column the record is too short to hold is null).
        guard n == count, i == end, idIndex < count else {
            out.deinitialize(count: n)
            return false
        }
        if count < width { (out + count).initialize(repeating: .null, count: width &- count) }
        return true
    }
}
