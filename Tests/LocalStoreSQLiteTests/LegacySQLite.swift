#if canImport(Glibc)
import Glibc
#endif
import LocalStoreSQLCipher
import LocalStoreSQLEngine

/// SQLite 3.15.2 — the version Debian's SQLCipher 3.4.1 is built on — loaded from `libsqlcipher.so.0`
/// the way a SQLCipher backend loads it (its own symbols, never linked). Used without a key it is plain
/// SQLite, so the engine's SQL can be checked against the oldest version it must support.
enum LegacySQLite {
    /// The function table, or `nil` when `libsqlcipher.so.0` is not installed or this process cannot use
    /// `RTLD_DEEPBIND` (a sanitizer runtime aborts on it; see ``unavailableReason``).
    static let api: SQLiteAPI? = {
        #if canImport(Glibc)
        if SQLCipherLibrary.deepBindRefusal() != nil { return nil }
        // RTLD_DEEPBIND (0x8): the library binds to its own symbols, not to the linked libsqlite3's.
        guard let handle = dlopen("libsqlcipher.so.0", RTLD_NOW | RTLD_LOCAL | 0x8) else { return nil }
        return SQLiteAPI.load { dlsym(handle, $0) }
        #else
        return nil
        #endif
    }()

    /// Why ``api`` is `nil`.
    static var unavailableReason: String {
        SQLCipherLibrary.deepBindRefusal().map { "RTLD_DEEPBIND cannot be used: \($0)" } ?? "libsqlcipher.so.0 is not installed"
    }

    /// `sqlite3_libversion_number()` of the loaded library.
    static var versionNumber: Int32? { api?.libversion_number() }
}
