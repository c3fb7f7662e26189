import CLMDB
import Foundation
import LocalStore
import LocalStoreKV

// The LMDB-only parts of the record filters (the filters themselves are in LocalStoreKV).

extension SimpleRecordTest {
    /// The number of records from the cursor's current entry (`rc`, `kv`, `dv`: the result of the
    /// last `mdb_cursor_get`) to the end that match, for the `.bool` kind: ``boolAnswer(_:_:)`` per
    /// record, `general` (``RecordFilter/matchesInGeneral(_:)``) when it cannot answer. Leaves in `rc`
    /// the code that ended the walk.
    func countBool(
        _ cursor: OpaquePointer, _ rc: inout Int32, _ kv: inout MDB_val, _ dv: inout MDB_val, general: RecordFilter
    ) throws -> Int {
        // The walk's state and the test in locals (written back at the end): through the `inout`
        // parameters and `self` they were stored and loaded again for every record.
        var n = 0
        var code = rc
        var key = kv
        var data = dv
        defer {
            rc = code
            kv = key
            dv = data
        }
        let test = self
        // A version-2 record is answered from its first two bytes (version, column count) and the
        // tested column's tag, as ``tagOffsetInTagsFirst(_:_:)`` and ``boolAnswer(_:_:)`` do: the
        // count is within column + 1 ... width (so it is a one-byte varint) and the tags within the
        // record; the answers for tags 0 (null), 1 (false) and 2 (true) are bits 0, 1 and 2.
        let minimumCount = UInt(bitPattern: column &+ 1)
        let counts = UInt(bitPattern: width &- column)
        let tagAt = 2 &+ column
        let answers = (ifFalse ? 2 : 0) | (ifTrue ? 4 : 0)
        while code == 0 {
            let end = data.mv_size
            if end >= 2, let base = UnsafeRawPointer(data.mv_data) {
                let header = UInt16(littleEndian: base.loadUnaligned(as: UInt16.self))
                let count = UInt(header &>> 8)
                if UInt8(truncatingIfNeeded: header) == RecordCodec.tagsFirstVersion, count &- minimumCount < counts,
                    count &+ 2 <= UInt(bitPattern: end)
                {
                    let tag = base.load(fromByteOffset: tagAt, as: UInt8.self)
                    if tag <= RecordCodec.Tag.true {
                        n &+= (answers &>> Int(tag)) & 1
                        code = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
                        continue
                    }
                }
            }
            if let base = UnsafeRawPointer(data.mv_data), let answer = test.boolAnswer(base, end) {
                if answer { n &+= 1 }
            } else if try general.matchesInGeneral(UnsafeRawBufferPointer(start: data.mv_data, count: end)) {
                n &+= 1
            }
            code = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        return n
    }
}

/// Tests a predicate on an index entry's key alone, when the key's components carry every column
/// the predicate reads: the components are decoded back into values and the shared evaluator runs
/// on them. Each decoded component is encoded again and compared with the key's bytes, so a key
/// this decoder does not understand (a truncated long key, a NOCASE component, another encoding)
/// gives `nil` — the caller then reads the row.
final class IndexKeyTest {
    let predicate: ResolvedPredicate
    let schema: TableSchema
    /// The components to decode, in key order: (column, whether the predicate reads it).
    private let components: [(column: Int, needed: Bool)]
    private var row: [Value]
    private var scratch: [UInt8] = []

    /// `nil` when the predicate reads a column that is not a plain (case-sensitive) component.
    init?(index: IndexDefinition, predicate: ResolvedPredicate, schema: TableSchema) {
        let needed = Set(predicate.columns.members)
        var components: [(column: Int, needed: Bool)] = []
        var covered = Set<Int>()
        for c in index.components {
            if needed.isSubset(of: covered) { break }
            if c.noCase || c.descending { return nil }
            components.append((c.column, needed.contains(c.column)))
            covered.insert(c.column)
        }
        guard needed.isSubset(of: covered) else { return nil }
        self.predicate = predicate
        self.schema = schema
        self.components = components
        row = Array(repeating: .null, count: schema.columns.count)
        scratch.reserveCapacity(64)
    }

    /// Whether the entry's row matches, or `nil` when the key cannot tell.
    func matches(_ key: UnsafeRawBufferPointer) -> Bool? {
        var offset = 0
        for c in components {
            guard let n = KeyCodec.componentLength(key, at: offset) else { return nil }
            let bytes = UnsafeRawBufferPointer(rebasing: key[offset..<(offset + n)])
            offset += n
            guard c.needed else { continue }
            guard let v = IndexKeyTest.decode(bytes, type: schema.columns[c.column].type) else { return nil }
            scratch.removeAll(keepingCapacity: true)
            KeyCodec.appendComponent(v, into: &scratch)
            guard scratch.elementsEqual(bytes) else { return nil }
            row[c.column] = v
        }
        return predicate.matches(row)
    }

    /// The value of one component as ``KeyCodec/appendComponent(_:into:)`` wrote it for a column
    /// of `type`, or `nil` for a component it cannot hold.
    static func decode(_ bytes: UnsafeRawBufferPointer, type: ColumnType) -> Value? {
        guard let tag = bytes.first else { return nil }
        func fixed() -> UInt64? {
            guard bytes.count == 9 else { return nil }
            var v: UInt64 = 0
            for k in 1..<9 { v = v << 8 | UInt64(bytes[k]) }
            return v
        }
        func double(_ u: UInt64) -> Double { Double(bitPattern: u & (1 << 63) != 0 ? u & ~(1 << 63) : ~u) }
        func unescaped() -> [UInt8]? {
            // tag, escaped bytes (0x00 as 00 FF), then the terminator 00 01.
            let end = bytes.count - 2
            guard end >= 1 else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(end)
            var i = 1
            while i < end {
                let b = bytes[i]
                out.append(b)
                i += b == 0 ? 2 : 1
            }
            return out
        }
        switch (tag, type) {
        case (KeyCodec.Tag.null, _): return bytes.count == 1 ? .null : nil
        case (KeyCodec.Tag.bool, .boolean): return bytes.count == 2 ? .bool(bytes[1] != 0) : nil
        case (KeyCodec.Tag.number, .integer): return fixed().map { .int(Int64(bitPattern: $0 ^ (1 << 63))) }
        case (KeyCodec.Tag.number, .double): return fixed().map { .double(double($0)) }
        case (KeyCodec.Tag.date, .date): return fixed().map { .date(Date(timeIntervalSinceReferenceDate: double($0))) }
        case (KeyCodec.Tag.string, .string):
            guard let raw = unescaped(), let s = String(validating: raw, as: UTF8.self) else { return nil }
            return .string(s)
        case (KeyCodec.Tag.binary, .binary): return unescaped().map { .binary($0) }
        default: return nil
        }
    }
}
