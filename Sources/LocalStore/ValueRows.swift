/// The values of items in row form: one heap buffer holding the rows of a result (or a single row),
/// each item reading `width` consecutive values from its own start (``Item``'s row form).
///
/// A `[Value]` served before; this buffer differs where it costs per read:
/// - it is allocated with this class's own metadata, where allocating a `[Value]` went through the
///   standard library's unspecialized `_allocateBufferUninitialized` and its generic metadata lookup
///   (~530 instructions per array: a read by id built one per item);
/// - ``deinit`` frees the values with one tag test each, only strings, binaries and json having
///   anything to release, where the array's storage destroyed every value through the runtime's value
///   witnesses (~20 instructions each: ~10 k per 50-row query result).
///
/// The header is the number of initialized values: they are `0 ..< header`. Once built a buffer is
/// only written by an item that holds the one reference to it (``Item``'s copy on write), so an item
/// holding one is `Sendable` as one holding an array is (`ManagedBuffer` itself is not `Sendable`).
@usableFromInline package final class ValueRows: ManagedBuffer<Int, Value> {
    deinit {
        withUnsafeMutablePointers { count, values in ValueRows.destroy(values, count: count.pointee) }
    }

    /// Deinitializes `values[0 ..< count]`: a null, boolean, integer, double or date holds nothing to
    /// release and is left as it is.
    @usableFromInline static func destroy(_ values: UnsafeMutablePointer<Value>, count: Int) {
        var p = values
        let end = values + count
        while p < end {
            switch p.pointee {
            case .null, .bool, .int, .double, .date: break
            case .string, .binary, .json: _ = p.move()
            }
            p += 1
        }
    }

    /// A buffer with room for `capacity` values, none initialized.
    package static func make(capacity: Int) -> ValueRows {
        unsafeDowncast(ValueRows.create(minimumCapacity: max(capacity, 0)) { _ in 0 }, to: ValueRows.self)
    }

    /// A buffer of `count` values initialized by `fill` (given the first element; it must initialize all
    /// `count` of them when it returns, and none when it throws).
    package static func make(count: Int, _ fill: (UnsafeMutablePointer<Value>) throws -> Void) rethrows -> ValueRows {
        let rows = make(capacity: count)
        try rows.withUnsafeMutablePointers { initialized, values in
            try fill(values)
            initialized.pointee = count
        }
        return rows
    }

    /// A buffer holding a copy of `values`.
    package static func make(copying values: some Collection<Value>) -> ValueRows {
        let rows = make(capacity: values.count)
        rows.withUnsafeMutablePointers { initialized, p in
            for v in values {
                (p + initialized.pointee).initialize(to: v)
                initialized.pointee += 1
            }
        }
        return rows
    }

    /// Replaces the `count` values of a buffer that holds exactly `count` (so it has room for them), which
    /// nothing but the caller references (it checked `isKnownUniquelyReferenced`), by `count` values
    /// initialized by `fill` (as ``make(count:_:)``); `false`, changing nothing, when it holds another
    /// number of values. When `fill` throws, the buffer is left holding no values.
    @inlinable package func refill(count: Int, _ fill: (UnsafeMutablePointer<Value>) throws -> Void) rethrows -> Bool {
        try withUnsafeMutablePointers { initialized, values in
            guard initialized.pointee == count else { return false }
            ValueRows.destroy(values, count: count)
            initialized.pointee = 0
            try fill(values)
            initialized.pointee = count
            return true
        }
    }

    /// The value at `index` (which must be initialized).
    package subscript(index: Int) -> Value {
        withUnsafeMutablePointerToElements { $0[index] }
    }

    /// Replaces the value at `index` (which must be initialized). Only for a buffer nobody else reads.
    func replace(_ index: Int, with value: Value) {
        withUnsafeMutablePointerToElements { $0[index] = value }
    }

    /// A new buffer holding a copy of the `count` values from `start`.
    func copy(from start: Int, count: Int) -> ValueRows {
        ValueRows.make(count: count) { out in
            withUnsafeMutablePointerToElements { out.initialize(from: $0 + start, count: count) }
        }
    }

    /// Appends rows to a buffer that grows as needed (a result whose row count is not known in advance).
    /// Inlinable, the count kept here and the buffer written through pointers to its header and
    /// elements (valid while `rows`, which this builder holds, lives): an `append` called across the
    /// module boundary, reading the header as a class property (a runtime exclusivity check per
    /// access), cost ~90 instructions per value.
    package struct Builder {
        /// The buffer; its header counts the values appended so far.
        @usableFromInline package private(set) var rows: ValueRows
        @usableFromInline var header: UnsafeMutablePointer<Int>
        @usableFromInline var elements: UnsafeMutablePointer<Value>
        @usableFromInline var capacity: Int
        /// The number of values appended.
        @usableFromInline package private(set) var count = 0

        /// A builder with room for `capacity` values before it first grows.
        package init(capacity: Int) {
            self.capacity = max(capacity, 4)
            rows = ValueRows.make(capacity: self.capacity)
            (header, elements) = rows.withUnsafeMutablePointers { ($0, $1) }
        }

        /// Appends `value`.
        @inlinable package mutating func append(_ value: __owned Value) {
            if count == capacity { grow() }
            (elements + count).initialize(to: value)
            count &+= 1
            header.pointee = count
        }

        /// Makes room for `n` more values and returns where they go. The caller initializes all `n`,
        /// then calls ``didAppend(_:)``; if it stops early, it deinitializes those it initialized (the
        /// buffer counts only appended values).
        @inlinable package mutating func room(for n: Int) -> UnsafeMutablePointer<Value> {
            while count &+ n > capacity { grow() }
            return elements + count
        }

        /// Counts the `n` values initialized at ``room(for:)``.
        @inlinable package mutating func didAppend(_ n: Int) {
            count &+= n
            header.pointee = count
        }

        /// Moves the values into a buffer twice as large.
        @usableFromInline mutating func grow() {
            let n = count
            capacity *= 2
            let larger = ValueRows.make(capacity: capacity)
            let (movedCount, moved) = larger.withUnsafeMutablePointers { ($0, $1) }
            moved.moveInitialize(from: elements, count: n)
            movedCount.pointee = n
            header.pointee = 0
            rows = larger
            (header, elements) = (movedCount, moved)
        }
    }
}
