import LocalStore

extension LMDBStore {
    /// How an ``LMDBStore`` is opened: the same spelling as `SQLiteStore.Options` and `SQLCipherStore.Options`.
    public typealias Options = LMDBStoreOptions
}

// The 0.1.0 spellings of `LMDBStoreOptions`, kept so existing code still compiles.
extension LMDBStoreOptions {
    /// How much a commit waits for the disk.
    @available(*, deprecated, renamed: "StoreDurability")
    public typealias Durability = StoreDurability

    /// The names of the system tables. Pass them to ``LMDBStore/init(path:systemTableNames:options:logger:)``
    /// instead, as with every other backend; `.default` unless set here.
    @available(*, deprecated, message: "pass systemTableNames: to LMDBStore.init(path:systemTableNames:options:logger:)")
    public var systemTableNames: SystemTableNames {
        get { legacySystemTableNames ?? .default }
        set { legacySystemTableNames = newValue }
    }

    /// Creates options that carry the system table names (0.1.0 spelling).
    @available(*, deprecated, message: "pass systemTableNames: to LMDBStore.init(path:systemTableNames:options:logger:)")
    public init(
        durability: StoreDurability = .full, initialMapSize: Int = 16 << 20, maximumDatabases: Int = 1024,
        maximumReaders: Int = 126, systemTableNames: SystemTableNames
    ) {
        self.init(
            durability: durability, initialMapSize: initialMapSize, maximumDatabases: maximumDatabases,
            maximumReaders: maximumReaders)
        legacySystemTableNames = systemTableNames
    }
}

extension StoreDurability {
    /// LMDB's 0.1.0 name of `full`.
    @available(*, deprecated, renamed: "full")
    public static var synchronous: StoreDurability { .full }
    /// LMDB's 0.1.0 name of `normal` (`MDB_NOMETASYNC`).
    @available(*, deprecated, renamed: "normal")
    public static var noMetaSync: StoreDurability { .normal }
    /// LMDB's 0.1.0 name of `off` (`MDB_NOSYNC`).
    @available(*, deprecated, renamed: "off")
    public static var noSync: StoreDurability { .off }
}
