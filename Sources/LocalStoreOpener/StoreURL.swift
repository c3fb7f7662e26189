import Foundation
import LocalStore

/// Names a store and its backend in one string, so an application can pick the backend from its
/// configuration: `memory:`, `sqlite:PATH`, `sqlcipher:PATH` or `lmdb:PATH`.
///
/// ```swift
/// let url = try StoreURL("lmdb:/var/lib/app/store.lmdb")
/// let store = try StoreOpener.open(url)
/// ```
///
/// - The scheme is matched case-insensitively. `PATH` is a file-system path taken literally (relative
///   paths are relative to the current directory); for SQLite and SQLCipher it names the database file,
///   for LMDB the environment directory.
/// - The `scheme:///absolute/path` form (an empty or `localhost` authority, as in `file:` URLs) is accepted
///   too; its path is percent-decoded (`%20` is a space).
/// - Rejected with `LocalStoreError.Code.invalidURL`, the message naming the part at fault: a missing or
///   unknown scheme, a missing path (or a path after `memory:`), a host, user information, and any query
///   (`?…`) — in particular a key: **a key never goes in a store URL**, pass it to
///   ``StoreOpener/open(_:key:systemTableNames:options:logger:)-(StoreURL,_,_,_,_)``. Error messages never repeat a query's
///   values or user information.
public struct StoreURL: Sendable, Hashable, CustomStringConvertible {
    /// The backend a store URL names.
    public enum Scheme: String, Sendable, Hashable, CaseIterable {
        /// `memory:`: an `InMemoryStore`.
        case memory
        /// `sqlite:PATH`: a `SQLiteStore` in the file `PATH`.
        case sqlite
        /// `sqlcipher:PATH`: an encrypted `SQLCipherStore` in the file `PATH` (the key is passed separately).
        case sqlcipher
        /// `lmdb:PATH`: an `LMDBStore` in the directory `PATH`.
        case lmdb
    }

    /// The backend.
    public let scheme: Scheme
    /// The file (SQLite, SQLCipher) or directory (LMDB); empty for `memory:`.
    public let path: String

    /// The URL of an in-memory store.
    public static let memory = StoreURL(uncheckedScheme: .memory, path: "")

    /// The URL of a store of `scheme` at `path` (an empty path for `memory` only).
    ///
    /// - Throws: `invalidURL` when `path` is empty for a persistent scheme, or not empty for `memory`.
    public init(scheme: Scheme, path: String) throws {
        if scheme == .memory {
            guard path.isEmpty else { throw LocalStoreError(.invalidURL, "memory: takes no path (got '\(path)')") }
        } else if path.isEmpty {
            throw Self.missingPath(scheme)
        }
        self.init(uncheckedScheme: scheme, path: path)
    }

    private init(uncheckedScheme scheme: Scheme, path: String) {
        self.scheme = scheme
        self.path = path
    }

    /// Parses a store URL (see the type's documentation for the accepted forms).
    ///
    /// - Throws: `invalidURL`, naming the part at fault.
    public init(_ text: String) throws {
        let shown = Self.redacted(text)
        let usage = "use memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH"
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
            throw LocalStoreError(.invalidURL, "'\(shown)' is not a store URL: it has no scheme; \(usage)")
        }
        let schemeText = String(text[..<colon])
        guard let scheme = Scheme(rawValue: schemeText.lowercased()) else {
            throw LocalStoreError(
                .invalidURL, "'\(shown)' is not a store URL: unknown scheme '\(Self.redacted(schemeText))'; \(usage)")
        }
        var rest = Substring(text[text.index(after: colon)...])
        if let question = rest.firstIndex(of: "?") {
            throw Self.queryError(scheme: scheme, query: rest[rest.index(after: question)...], shown: shown)
        }
        var decode = false
        if rest.hasPrefix("//") {
            let afterSlashes = rest.dropFirst(2)
            let authorityEnd = afterSlashes.firstIndex(of: "/") ?? afterSlashes.endIndex
            let authority = afterSlashes[..<authorityEnd]
            if authority.contains("@") {
                throw LocalStoreError(
                    .invalidURL,
                    "'\(shown)' carries user information ('…@'): a store URL never holds a key or password; "
                        + "pass the key to StoreOpener.open(_:key:)")
            }
            guard authority.isEmpty || authority.lowercased() == "localhost" else {
                throw LocalStoreError(
                    .invalidURL, "'\(shown)' names the host '\(authority)': stores are local files; use \(scheme.rawValue):///PATH or \(scheme.rawValue):PATH")
            }
            rest = afterSlashes[authorityEnd...]
            decode = true
        }
        var path = String(rest)
        if decode, !path.isEmpty {
            guard let decoded = path.removingPercentEncoding else {
                throw LocalStoreError(.invalidURL, "'\(shown)' has a malformed percent escape in its path '\(path)'")
            }
            path = decoded
        }
        if scheme == .memory {
            guard path.isEmpty else { throw LocalStoreError(.invalidURL, "memory: takes no path (got '\(shown)')") }
        } else if path.isEmpty {
            throw Self.missingPath(scheme)
        }
        if path.utf8.contains(0) {
            throw LocalStoreError(.invalidURL, "the path of '\(shown)' contains a NUL character")
        }
        self.init(uncheckedScheme: scheme, path: path)
    }

    /// `memory:` or `scheme:PATH`; ``init(_:)`` parses it back to an equal URL (for a path without `?`
    /// that does not start with `//`).
    public var description: String { scheme == .memory ? "memory:" : "\(scheme.rawValue):\(path)" }

    // MARK: Errors

    private static func missingPath(_ scheme: Scheme) -> LocalStoreError {
        LocalStoreError(
            .invalidURL,
            "\(scheme.rawValue): needs a \(scheme == .lmdb ? "directory" : "file") path, e.g. \(scheme.rawValue):/var/lib/app/store")
    }

    /// The names of query parameters that would carry a key.
    private static let keyParameters: Set<String> = [
        "key", "passphrase", "password", "pass", "pwd", "secret", "hexkey", "textkey", "cipher_key", "rawkey",
    ]

    /// A query is never accepted; when a parameter looks like a key the error says so, naming the
    /// parameter but never its value.
    private static func queryError(scheme: Scheme, query: Substring, shown: String) -> LocalStoreError {
        let names = query.split(separator: "&").map { $0.split(separator: "=", maxSplits: 1).first.map(String.init) ?? "" }
        if let keyName = names.first(where: { keyParameters.contains($0.lowercased()) }) {
            return LocalStoreError(
                .invalidURL,
                "'\(shown)' carries a key in its query ('\(keyName)='): a key never goes in a store URL; "
                    + "pass it to StoreOpener.open(_:key:)")
        }
        let listed = names.filter { !$0.isEmpty }.map { "'\($0)'" }.joined(separator: ", ")
        return LocalStoreError(
            .invalidURL,
            "'\(shown)' has a query (\(listed.isEmpty ? "'?'" : "parameters \(listed)")): store URLs take no parameters; "
                + "pass options to StoreOpener.open (a path cannot contain '?')")
    }

    /// `text` without its query and with any user information masked, for error messages.
    static func redacted(_ text: String) -> String {
        var shown = text
        if let question = shown.firstIndex(of: "?") { shown = String(shown[..<question]) + "?…" }
        if let slashes = shown.range(of: "//"), let at = shown[slashes.upperBound...].firstIndex(of: "@"),
            !shown[slashes.upperBound..<at].contains("/")
        {
            shown.replaceSubrange(slashes.upperBound...at, with: "…@")
        }
        return shown
    }
}
