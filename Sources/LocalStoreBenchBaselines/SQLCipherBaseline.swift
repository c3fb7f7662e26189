import LocalStoreSQLCipher
import LocalStoreSQLEngine

/// The library the `sqlcipher-c` baseline calls: SQLCipher as the `sqlcipher` backend loads it
/// (`dlopen("libsqlcipher.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)`, never linked).
enum SQLCipherBaseline {
    static func api() throws -> SQLiteAPI { try SQLCipherLibrary.api() }
}
