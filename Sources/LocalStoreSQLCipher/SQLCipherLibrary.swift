#if canImport(Glibc)
import Glibc
#endif
import Foundation
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
///
/// Sanitizer runtimes (ThreadSanitizer, AddressSanitizer, MemorySanitizer) abort the process on any
/// `dlopen` with `RTLD_DEEPBIND`. In such a process the library is opened with `RTLD_NOW | RTLD_LOCAL`
/// only, and only when no other library exports `sqlite3_*` functions to the global namespace (checked
/// before and after loading): then every internal call of SQLCipher can only bind inside SQLCipher.
/// When a plain SQLite library is loaded, SQLCipher is refused (`unsupported`) rather than risk
/// writing plaintext. See docs/reliability.md, "Sanitizers".
package enum SQLCipherLibrary {
    /// The shared object loaded (Debian's `libsqlcipher0`).
    static let soname = "libsqlcipher.so.0"

    /// How the library gets loaded.
    package enum Mode: Equatable {
        /// `RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND`: safe next to a plain `libsqlite3`.
        case deepBind
        /// `RTLD_NOW | RTLD_LOCAL`: safe only while no other `sqlite3_*` definition is global.
        case local
    }

    private static let loaded: Result<SQLiteAPI, LocalStoreError> = load()

    /// The function table, or the error explaining why SQLCipher cannot be used.
    package static func api() throws -> SQLiteAPI { try loaded.get() }

    /// Why this process refuses to load SQLCipher (it cannot use `RTLD_DEEPBIND` and a plain SQLite is
    /// loaded), or `nil` when it may. Does not load the library. Tests skip their in-process SQLCipher
    /// cases with this reason (the sanitizer runs cover them in `localstore-sqlcipher-suite`).
    package static var processRefusal: String? {
        guard case .failure(let error) = mode(noDeepBind: deepBindRefusal(), plainSQLite: globalSQLite()) else { return nil }
        return error.message
    }

    /// The loading mode for a process (`noDeepBind` says why `RTLD_DEEPBIND` cannot be used, if it
    /// cannot; `plainSQLite` names the file that exports `sqlite3_*` globally, if any), or the refusal.
    package static func mode(noDeepBind: String?, plainSQLite: String?) -> Result<Mode, LocalStoreError> {
        guard let noDeepBind else { return .success(.deepBind) }
        guard let plainSQLite else { return .success(.local) }
        return .failure(
            LocalStoreError(
                .unsupported,
                "cannot load \(soname) safely in this process: RTLD_DEEPBIND cannot be used (\(noDeepBind)), and without it "
                    + "SQLCipher's own sqlite3_* calls would bind to the plain SQLite already loaded from '\(plainSQLite)' "
                    + "(unencrypted writes); use SQLCipher in a process that does not load libsqlite3"))
    }

    /// Why this process cannot use `RTLD_DEEPBIND`: a sanitizer runtime linked into it (it exports its
    /// `__<name>_init`), or the environment variable `LOCALSTORE_SQLCIPHER_NO_DEEPBIND` (set by tests to
    /// exercise the other mode without a sanitizer); `nil` when it can.
    package static func deepBindRefusal() -> String? {
        let runtimes = [("__tsan_init", "ThreadSanitizer"), ("__asan_init", "AddressSanitizer"), ("__msan_init", "MemorySanitizer")]
        if let runtime = runtimes.first(where: { dlsym(nil, $0.0) != nil }) {
            return "the \(runtime.1) runtime aborts on it"
        }
        if getenv("LOCALSTORE_SQLCIPHER_NO_DEEPBIND") != nil { return "LOCALSTORE_SQLCIPHER_NO_DEEPBIND is set" }
        return nil
    }

    /// The file of a library that exports `sqlite3_*` functions to the global namespace (the
    /// executable, its dependencies, `RTLD_GLOBAL` libraries), or `nil` when there is none.
    package static func globalSQLite() -> String? {
        for symbol in ["sqlite3_libversion_number", "sqlite3_open_v2", "sqlite3_malloc", "sqlite3_mutex_enter"] {
            guard let address = dlsym(nil, symbol) else { continue }
            return mappedFile(containing: UInt(bitPattern: address)) ?? "an unknown library (\(symbol))"
        }
        return nil
    }

    /// The file mapped at `address`, from `/proc/self/maps` (`dladdr` is not visible to Swift here).
    private static func mappedFile(containing address: UInt) -> String? {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return nil }
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            let range = fields.first?.split(separator: "-") ?? []
            guard fields.count == 6, range.count == 2, let low = UInt(range[0], radix: 16), let high = UInt(range[1], radix: 16),
                low <= address, address < high
            else { continue }
            return fields[5].trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    private static func load() -> Result<SQLiteAPI, LocalStoreError> {
        let mode: Mode
        switch Self.mode(noDeepBind: deepBindRefusal(), plainSQLite: globalSQLite()) {
        case .success(let m): mode = m
        case .failure(let e): return .failure(e)
        }
        let flags = RTLD_NOW | RTLD_LOCAL | (mode == .deepBind ? Int32(0x00008) : 0)  // 0x8: RTLD_DEEPBIND
        guard let handle = dlopen(soname, flags) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown reason"
            return .failure(
                LocalStoreError(
                    .libraryMissing,
                    "cannot load \(soname) (\(reason)); install SQLCipher: apt-get install libsqlcipher0 (or libsqlcipher-dev)"
                ))
        }
        if mode == .local, let plain = globalSQLite() {
            // Another thread made a plain SQLite global while SQLCipher was being bound: its relocations
            // may point there. Never use it (the handle stays open: unloading could race that thread).
            return .failure(
                LocalStoreError(
                    .unsupported, "cannot use \(soname): '\(plain)' was loaded globally while it was being loaded without RTLD_DEEPBIND"))
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
