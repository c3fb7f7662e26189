import LocalStore

// The 0.1.0 spellings of `SQLiteStore.Options`, kept so existing code still compiles.
extension SQLiteStore.Options {
    /// When a committed transaction is on disk.
    @available(*, deprecated, renamed: "StoreDurability")
    public typealias Synchronous = StoreDurability

    /// When a committed transaction is on disk.
    @available(*, deprecated, renamed: "durability")
    public var synchronous: StoreDurability {
        get { durability }
        set { durability = newValue }
    }

    /// ``busyTimeout`` in whole milliseconds.
    @available(*, deprecated, message: "use busyTimeout (a Duration)")
    public var busyTimeoutMilliseconds: Int {
        get { Int(busyTimeout.clampedMilliseconds) }
        set { busyTimeout = .milliseconds(newValue) }
    }

    /// The largest number of reader connections.
    @available(*, deprecated, renamed: "maximumReaders")
    public var maximumReaderCount: Int {
        get { maximumReaders }
        set { maximumReaders = newValue }
    }

    /// Creates options with the 0.1.0 parameter names.
    @available(
        *, deprecated,
        message: "use init(durability:busyTimeout:maximumReaders:statementCacheCapacity:logsBoundValues:cacheSizeKiB:)"
    )
    @_disfavoredOverload
    public init(
        synchronous: StoreDurability = .normal, busyTimeoutMilliseconds: Int = 5000, maximumReaderCount: Int = 4,
        statementCacheCapacity: Int = 64, logsBoundValues: Bool = false, cacheSizeKiB: Int = 32768
    ) {
        self.init(
            durability: synchronous, busyTimeout: .milliseconds(busyTimeoutMilliseconds), maximumReaders: maximumReaderCount,
            statementCacheCapacity: statementCacheCapacity, logsBoundValues: logsBoundValues, cacheSizeKiB: cacheSizeKiB)
    }
}
