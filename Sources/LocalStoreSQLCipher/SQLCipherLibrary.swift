#if canImport(Glibc)
import Glibc
#endif
import LocalStore
import LocalStoreSQLEngine

/// The SQLCipher shared library, loaded at run time and never linked.
///
/// `libsqlcipher` exports the same `sqlite3_*` symbols as `libsqlite3`; a process linking both crashes or,
/// worse, silently writes plaintext when the wrong library wins symbol resolution. So the library is
/// opened with `dlopen(…, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)` — `RTLD_LOCAL` keeps its symbols out of
/// the global namespace, `RTLD_DEEPBIND` makes its own internal calls resolve inside itself instead of
/// into the already loaded `libsqlite3` — and is called only through the function table it fills. It is
/// loaded once per process and never unloaded.
enum SQLCipherLibrary {
    /// The shared object loaded (Debian's `libsqlcipher0`).
    static let soname = "libsqlcipher.so.0"

    private static let loaded: Result<SQLiteAPI, LocalStoreError> = load()

    /// The function table, or the error explaining why SQLCipher cannot be used.
    static func api() throws -> SQLiteAPI { try loaded.get() }

    private static func load() -> Result<SQLiteAPI, LocalStoreError> {
        let flags = RTLD_NOW | RTLD_LOCAL | Int32(0x00008)  // RTLD_DEEPBIND
        guard let handle = dlopen(soname, flags) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown reason"
            return .failure(
                LocalStoreError(
                    .libraryMissing,
                    "cannot load \(soname) (\(reason)); install SQLCipher: apt-get install libsqlcipher0 (or libsqlcipher-dev)"
                ))
        }
        guard let api = SQLiteAPI.load({ dlsym(handle, $0) }) else {
            let missing = SQLiteAPI.requiredSymbols.filter { dlsym(handle, $0) == nil }
            return .failure(
                LocalStoreError(.libraryMissing, "\(soname) lacks \(missing.joined(separator: ", ")): it is too old or not SQLite"))
        }
        guard api.key != nil, api.rekey != nil else {
            return .failure(
                LocalStoreError(.libraryMissing, "\(soname) exports no sqlite3_key / sqlite3_rekey: it is not SQLCipher"))
        }
        return .success(api)
    }
}
