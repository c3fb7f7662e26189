import Foundation
import Testing

@testable import LocalStore

/// An ``Item`` read from a store may hold its values by position under a shared ``ItemLayout`` (row
/// form) instead of a dictionary. Both forms must be the same item to every caller.
@Suite("Item: row form and dictionary form")
struct ItemRepresentationTests {
    static let names = ["id", "text", "complete", "priority", "updatedAt", "tags"]
    static let layout = ItemLayout(names: names)!

    static func row(_ n: Int) -> [Value] {
        [.string("id\(n)"), n % 3 == 0 ? .null : .string("text \(n)"), .bool(n % 2 == 0), .int(Int64(n % 7)),
         .date(Date(timeIntervalSinceReferenceDate: Double(n) * 1.5)), .json(["n": .int(Int64(n))])]
    }

    static func dictionary(_ row: [Value]) -> [String: Value] {
        Dictionary(uniqueKeysWithValues: zip(names, row))
    }

    @Test func rowFormIsKeptAndEqualsTheDictionaryForm() throws {
        for n in 0..<50 {
            let r = Self.row(n)
            let rowItem = Item(layout: Self.layout, row: r)
            let dictItem = Item(Self.dictionary(r))
            #expect(rowItem.layout != nil)
            #expect(dictItem.layout == nil)
            #expect(rowItem == dictItem)
            #expect(dictItem == rowItem)
            #expect(rowItem.values == dictItem.values)
            #expect(rowItem.hashValue == dictItem.hashValue)
            #expect(rowItem.hashValue == Item(layout: ItemLayout(names: Self.names)!, row: r).hashValue)
            #expect(rowItem == Item(layout: ItemLayout(names: Self.names)!, row: r))  // another layout object
            #expect(rowItem.count == dictItem.count)
            #expect(rowItem.description == dictItem.description)
            #expect(rowItem.id == .string("id\(n)"))
            #expect(rowItem.stringId == "id\(n)")
            for name in Self.names {
                #expect(rowItem[name] == dictItem[name])
                #expect(rowItem.value(forColumn: name.uppercased()) == dictItem.value(forColumn: name.uppercased()))
            }
            #expect(rowItem["TEXT"] == nil)  // the subscript is exact
            #expect(rowItem.value(forColumn: "missing") == nil)
            // Sequence: the same pairs.
            let pairs = rowItem.map { "\($0.key)=\($0.value)" }.sorted()
            #expect(pairs == dictItem.map { "\($0.key)=\($0.value)" }.sorted())
            #expect(rowItem.underestimatedCount == Self.names.count)
        }
        // A set and a dictionary treat both forms as one key.
        let mixed = (0..<20).map { n in n % 2 == 0 ? Item(layout: Self.layout, row: Self.row(n)) : Item(Self.dictionary(Self.row(n))) }
        let again = (0..<20).map { n in n % 2 == 1 ? Item(layout: Self.layout, row: Self.row(n)) : Item(Self.dictionary(Self.row(n))) }
        #expect(Set(mixed + again).count == 20)
    }

    @Test func unequalItemsInEitherForm() {
        let r = Self.row(4)
        let rowItem = Item(layout: Self.layout, row: r)
        var otherValue = Self.dictionary(r)
        otherValue["priority"] = .int(99)
        #expect(rowItem != Item(otherValue))
        #expect(Item(otherValue) != rowItem)
        var otherKey = Self.dictionary(r)
        otherKey["tags"] = nil
        otherKey["Tags"] = r[5]  // the same count, a key spelled differently
        #expect(rowItem != Item(otherKey))
        #expect(Item(otherKey) != rowItem)
        var fewer = Self.dictionary(r)
        fewer["text"] = nil
        #expect(rowItem != Item(fewer))
        var more = Self.dictionary(r)
        more["extra"] = .null
        #expect(rowItem != Item(more))
        #expect(rowItem != Item(layout: Self.layout, row: Self.row(5)))
        let shorter = ItemLayout(names: Array(Self.names.dropLast()))!
        #expect(rowItem != Item(layout: shorter, row: Array(r.dropLast())))
        // A null value is a key: not the same as an absent key.
        #expect(Item(layout: ItemLayout(names: ["id", "a"])!, row: [.string("x"), .null]) != Item(["id": .string("x")]))
        #expect(Item(layout: ItemLayout(names: ["id", "a"])!, row: [.string("x"), .null]) != Item(["id": .string("x"), "b": .null]))
    }

    @Test func mutationThroughSubscriptsAndValues() {
        let r = Self.row(6)
        var item = Item(layout: Self.layout, row: r)
        let copy = item
        // Setting an existing key keeps the row form and does not touch copies.
        item["priority"] = .int(42)
        #expect(item.layout != nil)
        #expect(item["priority"] == .int(42))
        #expect(copy["priority"] == r[3])
        var expected = Self.dictionary(r)
        expected["priority"] = .int(42)
        #expect(item == Item(expected))
        #expect(item.hashValue == Item(expected).hashValue)
        // Removing or adding a key turns it into a dictionary.
        item["text"] = nil
        expected["text"] = nil
        #expect(item.values == expected)
        #expect(item.count == Self.names.count - 1)
        item["new"] = .int(1)
        expected["new"] = .int(1)
        #expect(item == Item(expected))
        #expect(copy == Item(Self.dictionary(r)))
        // In-place mutation of `values`.
        var viaValues = Item(layout: Self.layout, row: r)
        viaValues.values["priority"] = .int(7)
        viaValues.values.removeValue(forKey: "tags")
        var want = Self.dictionary(r)
        want["priority"] = .int(7)
        want["tags"] = nil
        #expect(viaValues.values == want)
        #expect(viaValues == Item(want))
        // Replacing `values`.
        var replaced = Item(layout: Self.layout, row: r)
        replaced.values = ["id": .string("z")]
        #expect(replaced == ["id": .string("z")])
        #expect(replaced.count == 1)
        #expect(replaced.id == .string("z"))
        #expect(replaced.value(forColumn: "text") == nil)
    }

    @Test func layoutsNeedDistinctNames() {
        #expect(ItemLayout(names: ["id", "a", "a"]) == nil)
        #expect(ItemLayout(names: ["id", "a", "A"]) == nil)
        #expect(ItemLayout(names: []) != nil)
        // A row of the wrong length is built as a dictionary of the pairs that exist.
        let item = Item(layout: Self.layout, row: [.string("x"), .int(1)])
        #expect(item == ["id": .string("x"), "text": .int(1)])
        let empty = Item(layout: ItemLayout(names: [])!, row: [])
        #expect(empty == Item())
        #expect(empty.hashValue == Item().hashValue)
        #expect(empty.id == nil)
    }

    /// Items of one result share one buffer of values: writing one copies its own values first and
    /// leaves the others (and a copy of itself) as they were.
    @Test func itemsSharingOneBufferAreIndependent() throws {
        let rows = (0..<4).map(Self.row)
        let width = Self.names.count
        let buffer = ValueRows.make(copying: rows.joined())
        var items = (0..<4).map { Item(layout: Self.layout, values: buffer, start: $0 * width) }
        let before = items
        items[2]["priority"] = .int(99)
        items[2]["text"] = .string("changed")
        for n in 0..<4 {
            var expected = Self.dictionary(rows[n])
            if n == 2 {
                expected["priority"] = .int(99)
                expected["text"] = .string("changed")
            }
            #expect(items[n] == Item(expected))
            #expect(items[n].hashValue == Item(expected).hashValue)
            #expect(items[n].layout != nil)
            #expect(before[n] == Item(Self.dictionary(rows[n])))
        }
        // The buffer itself was not written.
        #expect(buffer[2 * width + 3] == rows[2][3])
    }

    /// Freeing a buffer of values releases what its strings, binaries and json hold (nothing is kept
    /// alive, nothing is released twice): afterwards each original is the only reference to its storage
    /// again, so writing it happens in place.
    @Test func freeingValuesReleasesTheirStorage() {
        var text = String(repeating: "x", count: 100)
        text.reserveCapacity(400)
        var bytes = [UInt8](repeating: 7, count: 64)
        var list: [JSON] = [.string("a"), .int(1)]
        list.reserveCapacity(16)
        let textAddress = text.utf8.withContiguousStorageIfAvailable { UInt(bitPattern: $0.baseAddress) }
        let bytesAddress = bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        let listAddress = list.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        for _ in 0..<3 {
            let values: [Value] = [.null, .string(text), .bool(true), .binary(bytes), .int(5), .json(.array(list)), .double(1.5),
                .date(Date(timeIntervalSinceReferenceDate: 3))]
            let buffer = ValueRows.make(copying: values + values)
            let item = Item(layout: ItemLayout(names: (0..<16).map { "c\($0)" })!, values: buffer, start: 0)
            #expect(item["c1"] == .string(text))
            #expect(item["c13"] == .json(.array(list)))
        }
        text.append("y")
        bytes[0] = 8
        list.append(.null)
        #expect(text.utf8.withContiguousStorageIfAvailable { UInt(bitPattern: $0.baseAddress) } == textAddress)
        #expect(bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == bytesAddress)
        #expect(list.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == listAddress)
    }

    /// A growing buffer (a SQL result of unknown length) keeps every value it moves.
    @Test func growingBufferKeepsItsValues() {
        var builder = ValueRows.Builder(capacity: 1)
        let values = (0..<40).flatMap(Self.row)
        for v in values { builder.append(v) }
        #expect(builder.count == values.count)
        for (n, v) in values.enumerated() { #expect(builder.rows[n] == v) }
    }

    struct Record: Codable, Equatable {
        var id: String
        var text: String?
        var complete: Bool
        var priority: Int
        var updatedAt: Date
        var tags: [String: Double]
    }

    @Test func codableRoundTripThroughTheRowForm() throws {
        for n in 0..<10 {
            let item = Item(layout: Self.layout, row: Self.row(n))
            let record = try ItemDecoder().decode(Record.self, from: item)
            #expect(record.id == "id\(n)")
            #expect(record.text == (n % 3 == 0 ? nil : "text \(n)"))
            #expect(record.tags == ["n": Double(n)])
            let encoded = try ItemEncoder().encode(record)
            // Encoding gives back the same item (the nil text is encoded as null).
            #expect(encoded == item)
            #expect(try ItemDecoder().decode(Record.self, from: encoded) == record)
        }
    }
}
