import LocalStore

// The 0.1.0 spellings of `SQLCipherStore.Options`, kept so existing code still compiles.
extension SQLCipherStore.Options {
    /// `true` for `StoreDurability.full`; setting `false` selects `StoreDurability.normal`.
    @available(*, deprecated, message: "use durability (.full or .normal)")
    public var synchronousFull: Bool {
        get { durability == .full }
        set { durability = newValue ? .full : .normal }
    }

    /// ``busyTimeout`` in whole milliseconds.
    @available(*, deprecated, message: "use busyTimeout (a Duration)")
    public var busyTimeoutMilliseconds: Int {
        get { Int(busyTimeout.clampedMilliseconds) }
        set { busyTimeout = .milliseconds(newValue) }
    }

    /// The number of reader connections.
    @available(*, deprecated, renamed: "maximumReaders")
    public var readerCount: Int {
        get { maximumReaders }
        set { maximumReaders = newValue }
    }

    /// Creates options with the 0.1.0 parameter names.
    @available(
        *, deprecated, message: "use init(cipherPageSize:kdfIterations:durability:busyTimeout:maximumReaders:cacheSizeKiB:)"
    )
    @_disfavoredOverload
    public init(
        cipherPageSize: Int = 4096, kdfIterations: Int = 256_000, synchronousFull: Bool = false,
        busyTimeoutMilliseconds: Int = 5000, readerCount: Int = 2, cacheSizeKiB: Int = 32768
    ) {
        self.init(
            cipherPageSize: cipherPageSize, kdfIterations: kdfIterations, durability: synchronousFull ? .full : .normal,
            busyTimeout: .milliseconds(busyTimeoutMilliseconds), maximumReaders: readerCount, cacheSizeKiB: cacheSizeKiB)
    }
}
