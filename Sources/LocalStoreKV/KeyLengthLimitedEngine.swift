import LocalStore

/// An ``OrderedKeyValueEngine`` whose keys may be longer than its base engine allows (LMDB: 511 bytes by
/// default), for ``KVStore``: a long id or a long indexed value makes a long key.
///
/// ```swift
/// let store = try KVStore(engine: try KeyLengthLimitedEngine(lmdbEngine, maximumKeyLength: 511))
/// ```
///
/// A key shorter than `maximumKeyLength` is stored as it is. A longer one (or one of exactly that length) is
/// stored under its first `maximumKeyLength - 8` bytes followed by an 8-byte hash of the whole key (FNV-1a,
/// big-endian), so every stored key of exactly `maximumKeyLength` bytes is such a truncated key; its value is
/// stored after the whole key (its length as a varint, the key, the value). The views this engine gives
/// ``KVStore`` show the whole keys, in order:
///
/// - a get, put or delete of a long key finds its entry by the truncated key and checks the whole key;
/// - a scan's bounds are truncated the same way (which keeps every key in range inside) and each entry is
///   checked against the whole bounds; the entries that share their first `maximumKeyLength - 8` bytes
///   (where the hashes, not the keys, order them) are gathered and handed out in the order of their whole
///   keys.
///
/// Two long keys with the same first bytes and the same hash cannot both be stored: the second write fails
/// with `constraint` and leaves the store as it was. The layout is a format, recorded under the reserved key
/// ``markerKey`` (the limit, 8 bytes big-endian), which no put, delete or scan of the views reaches: opening
/// a store with another limit fails with `versionMismatch`, and so does opening through this engine a store
/// that already holds a key of the limit's length or more (written without it); and ``KVStore`` refuses with
/// `versionMismatch` to open, on the bare base engine, a store that holds the record. The first opening of a
/// store records the limit (and reads every key of a store that has entries but no record).
public struct KeyLengthLimitedEngine<Base: OrderedKeyValueEngine>: OrderedKeyValueEngine {
    /// The engine the entries are stored in.
    public let base: Base
    /// The length from which keys are stored truncated: the base engine's limit, or less.
    public let maximumKeyLength: Int

    /// The hash of a truncated key (FNV-1a; tests choose one that collides).
    @usableFromInline let keys: LongKeys

    /// The smallest `maximumKeyLength` allowed.
    public static var minimumKeyLength: Int { 24 }

    /// `base` with keys of `maximumKeyLength` bytes and more stored truncated; `invalidValue` when the limit is
    /// below ``minimumKeyLength``.
    public init(_ base: Base, maximumKeyLength: Int) throws {
        try self.init(base, maximumKeyLength: maximumKeyLength, hash: LongKeys.fnv1a)
    }

    /// The same with another hash of the whole keys (tests: one that collides).
    package init(_ base: Base, maximumKeyLength: Int, hash: @escaping @Sendable ([UInt8]) -> UInt64) throws {
        guard maximumKeyLength >= Self.minimumKeyLength else {
            throw LocalStoreError(
                .invalidValue, "maximumKeyLength \(maximumKeyLength) is below the smallest allowed, \(Self.minimumKeyLength)")
        }
        self.base = base
        self.maximumKeyLength = maximumKeyLength
        keys = LongKeys(limit: maximumKeyLength, hash: hash)
        try Self.checkFormat(base, limit: maximumKeyLength)
    }

    /// The reserved key under which the limit is recorded: `FF 00 4B 4C`.
    public static var markerKey: [UInt8] { LongKeys.marker }

    /// Checks the recorded limit, or records it when the store has none (after checking that no key is as long
    /// as the limit); an engine's restarts of its own are run again.
    private static func checkFormat(_ base: Base, limit: Int) throws {
        func check(_ recorded: [UInt8]) throws {
            guard recorded.count == 8, KeyCodec.readBigEndian(recorded) == UInt64(limit) else {
                throw LocalStoreError(
                    .versionMismatch, "the store's long keys were stored with another key length limit than \(limit) bytes (recorded: \(recorded))")
            }
        }
        if let recorded = try base.read({ try $0.get(LongKeys.marker) }) { return try check(recorded) }
        try OrderedKeyValueRestarted.retrying {
            try base.write { writer in
                if let recorded = try writer.get(LongKeys.marker) { return try check(recorded) }
                var long: Int?
                try writer.scan(from: [], to: nil, reverse: false) { key, _ in
                    guard key.count >= limit else { return true }
                    long = key.count
                    return false
                }
                if let long {
                    throw LocalStoreError(
                        .versionMismatch, "the store holds a key of \(long) bytes, stored without KeyLengthLimitedEngine's limit of \(limit) bytes")
                }
                var bytes: [UInt8] = []
                KeyCodec.appendBigEndian(UInt64(limit), into: &bytes)
                try writer.put(LongKeys.marker, bytes)
            }
        }
    }

    /// A read snapshot of the base engine, showing whole keys.
    public typealias Reader = LongKeyView<Base.Reader>
    /// A write transaction of the base engine, showing whole keys; its savepoints and restarts are the base's.
    public typealias Writer = LongKeyView<Base.Writer>

    @inlinable public func read<R>(_ body: (Reader) throws -> R) throws -> R {
        try base.read { try body(Reader(base: $0, keys: keys)) }
    }

    @inlinable public func write<R>(_ body: (Writer) throws -> R) throws -> R {
        try base.write { try body(Writer(base: $0, keys: keys)) }
    }

    public func close() throws { try base.close() }
}

/// A read snapshot or write transaction of a ``KeyLengthLimitedEngine``'s base engine, showing whole keys.
public struct LongKeyView<Base: OrderedKeyValueReader>: OrderedKeyValueReader {
    @usableFromInline let base: Base
    @usableFromInline let keys: LongKeys
    @usableFromInline var limit: Int { keys.limit }

    @usableFromInline init(base: Base, keys: LongKeys) {
        self.base = base
        self.keys = keys
    }

    @inlinable public var snapshotNumber: UInt64? { base.snapshotNumber }

    @inlinable public func get(_ key: [UInt8]) throws -> [UInt8]? { try keys.get(key, base) }

    @inlinable public func withValue<R>(_ key: [UInt8], _ body: (UnsafeRawBufferPointer?) throws -> R) throws -> R {
        try keys.withValue(key, base, body)
    }

    @inlinable public func scan(
        from lower: [UInt8], to upper: [UInt8]?, reverse: Bool, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try keys.scan(base, from: lower, to: upper, reverse: reverse, body)
    }

    /// Refuses the reserved key.
    @inlinable func checkWritable(_ key: [UInt8]) throws {
        if key.count == LongKeys.marker.count && key == LongKeys.marker {
            throw LocalStoreError(.invalidValue, "the key FF 00 4B 4C is reserved by KeyLengthLimitedEngine")
        }
    }
}

extension LongKeyView: OrderedKeyValueWriter where Base: OrderedKeyValueWriter {
    @inlinable public func put(_ key: [UInt8], _ value: [UInt8]) throws {
        guard key.count >= limit else {
            try checkWritable(key)
            return try base.put(key, value)
        }
        let stored = keys.stored(key)
        if let existing = try base.get(stored), try LongKeys.split(existing).key != key[...] {
            throw LocalStoreError(
                .constraint, "two keys longer than \(limit - 1) bytes share their first \(limit - 8) bytes and their hash; the second cannot be stored")
        }
        var entry: [UInt8] = []
        entry.reserveCapacity(key.count + value.count + 3)
        RecordCodec.appendVarint(UInt64(key.count), into: &entry)
        entry.append(contentsOf: key)
        entry.append(contentsOf: value)
        try base.put(stored, entry)
    }

    @inlinable public func delete(_ key: [UInt8]) throws {
        guard key.count >= limit else {
            try checkWritable(key)
            return try base.delete(key)
        }
        let stored = keys.stored(key)
        guard let existing = try base.get(stored), try LongKeys.split(existing).key == key[...] else { return }
        try base.delete(stored)
    }

    @inlinable public var hasSavepoints: Bool { base.hasSavepoints }
    @inlinable public func setSavepoint() throws { try base.setSavepoint() }
    @inlinable public func rollbackToSavepoint() throws { try base.rollbackToSavepoint() }
    @inlinable public var canRestart: Bool { base.canRestart }
    @inlinable public func restart() throws { try base.restart() }
    @inlinable public var restartsOnItsOwn: Bool { base.restartsOnItsOwn }
}

/// The key mapping of ``KeyLengthLimitedEngine``. A class: a view holding it then fits the inline buffer of
/// the existential reader `KVStore` keeps (three words), with no allocation per transaction.
@usableFromInline package final class LongKeys: Sendable {
    /// The length from which keys are stored truncated.
    @usableFromInline let limit: Int
    /// The hash a truncated key ends with.
    @usableFromInline let hash: @Sendable ([UInt8]) -> UInt64

    @usableFromInline init(limit: Int, hash: @escaping @Sendable ([UInt8]) -> UInt64) {
        self.limit = limit
        self.hash = hash
    }

    /// The reserved key of the recorded limit (``KeyLengthLimitedEngine/markerKey``).
    @usableFromInline static let marker: [UInt8] = [0xFF, 0x00, 0x4B, 0x4C]

    /// The stored key of `key` (at least `limit` bytes long): its first `limit - 8` bytes and its hash.
    @inlinable func stored(_ key: [UInt8]) -> [UInt8] {
        var out = Array(key[0..<(limit - 8)])
        KeyCodec.appendBigEndian(hash(key), into: &out)
        return out
    }

    /// FNV-1a, 64 bits.
    @inlinable @Sendable package static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            hash ^= UInt64(b)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// A truncated key's stored value: the whole key and the value.
    @inlinable static func split<C: Collection>(_ entry: C) throws -> (key: C.SubSequence, value: C.SubSequence) where C.Element == UInt8 {
        var length = 0
        var shift = 0
        var i = entry.startIndex
        while true {
            guard i < entry.endIndex, shift < 63 else {
                throw LocalStoreError(.corrupt, "the store is damaged: the entry of a long key is malformed")
            }
            let b = entry[i]
            entry.formIndex(after: &i)
            length |= Int(b & 0x7F) << shift
            if b < 0x80 { break }
            shift += 7
        }
        guard let end = entry.index(i, offsetBy: length, limitedBy: entry.endIndex) else {
            throw LocalStoreError(.corrupt, "the store is damaged: the entry of a long key is malformed")
        }
        return (entry[i..<end], entry[end...])
    }

    @inlinable func get(_ key: [UInt8], _ base: some OrderedKeyValueReader) throws -> [UInt8]? {
        guard key.count >= limit else { return key == Self.marker ? nil : try base.get(key) }
        guard let entry = try base.get(stored(key)) else { return nil }
        let (whole, value) = try Self.split(entry)
        return whole.elementsEqual(key) ? Array(value) : nil
    }

    @inlinable func withValue<R>(
        _ key: [UInt8], _ base: some OrderedKeyValueReader, _ body: (UnsafeRawBufferPointer?) throws -> R
    ) throws -> R {
        guard key.count >= limit else { return key == Self.marker ? try body(nil) : try base.withValue(key, body) }
        return try base.withValue(stored(key)) { entry in
            guard let entry else { return try body(nil) }
            let (whole, value) = try Self.split(entry)
            return try body(whole.elementsEqual(key) ? UnsafeRawBufferPointer(rebasing: value) : nil)
        }
    }

    /// One entry held back while the entries sharing its first `limit - 8` bytes are gathered.
    @usableFromInline struct Held {
        @usableFromInline var key: [UInt8]
        @usableFromInline var value: [UInt8]

        @inlinable init(key: [UInt8], value: [UInt8]) {
            self.key = key
            self.value = value
        }
    }

    @inlinable func scan(
        _ base: some OrderedKeyValueReader, from lower: [UInt8], to upper: [UInt8]?, reverse: Bool,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        let p = limit - 8
        // Bounds on stored keys that keep every whole key of the range inside (a key's first p bytes are
        // ordered as the key); each entry is then checked against the whole bounds.
        let storedLower = lower.count <= p ? lower : Array(lower[0..<p])
        let storedUpper: [UInt8]? = upper.flatMap { $0.count <= p ? $0 : KeyCodec.successor($0[0..<p]) }
        // With bounds of at most p bytes, the base's bounds are exact for every key shorter than p.
        let exact = lower.count <= p && (upper?.count ?? 0) <= p
        func inRange(_ key: UnsafeRawBufferPointer) -> Bool {
            !KeyCodec.precedes(key, lower) && (upper.map { KeyCodec.precedes(key, $0) } ?? true)
        }
        // The entries of at least p bytes sharing their first p bytes: a truncated key among them is ordered
        // by its hash, so they are handed out in the order of their whole keys.
        var held: [Held] = []
        var stopped = false
        func flush() throws {
            defer { held.removeAll(keepingCapacity: true) }
            if held.count > 1 {
                held.sort { reverse ? $1.key.lexicographicallyPrecedes($0.key) : $0.key.lexicographicallyPrecedes($1.key) }
            }
            for entry in held where !stopped {
                let more = try entry.key.withUnsafeBytes { k in
                    try inRange(k) ? entry.value.withUnsafeBytes { try body(k, $0) } : true
                }
                if !more { stopped = true }
            }
        }
        try base.scan(from: storedLower, to: storedUpper, reverse: reverse) { key, value in
            if key.count < p {
                if !held.isEmpty {
                    try flush()
                    if stopped { return false }
                }
                guard exact || inRange(key) else { return true }
                if key.count == Self.marker.count && key.elementsEqual(Self.marker) { return true }
                return try body(key, value)
            }
            // A stored key's first p bytes are its whole key's.
            if let first = held.first, !first.key.prefix(p).elementsEqual(key.prefix(p)) {
                try flush()
                if stopped { return false }
            }
            if key.count == limit {
                let (whole, rest) = try Self.split(value)
                held.append(Held(key: Array(whole), value: Array(rest)))
            } else {
                held.append(Held(key: Array(key), value: Array(value)))
            }
            return true
        }
        if !stopped { try flush() }
    }
}
