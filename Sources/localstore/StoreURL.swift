import ArgumentParser
import Foundation
import LocalStore

/// `memory:`, `sqlite:PATH`, `sqlcipher:PATH`, `lmdb:PATH`: the one way every command names a store.
struct StoreURL: CustomStringConvertible, Sendable {
    enum Scheme: String, CaseIterable, Sendable {
        case memory, sqlite, sqlcipher, lmdb
    }

    let scheme: Scheme
    let path: String

    init(parsing text: String) throws {
        guard let colon = text.firstIndex(of: ":"), let scheme = Scheme(rawValue: String(text[..<colon])) else {
            throw CommandFailure(
                "'\(text)' is not a store URL; use memory:, sqlite:PATH, sqlcipher:PATH or lmdb:PATH")
        }
        let path = String(text[text.index(after: colon)...])
        if scheme == .memory {
            guard path.isEmpty else { throw CommandFailure("memory: takes no path (got '\(text)')") }
        } else if path.isEmpty {
            throw CommandFailure("\(scheme.rawValue): needs a path, e.g. \(scheme.rawValue):/var/lib/app/store")
        }
        self.scheme = scheme
        self.path = path
    }

    var description: String { scheme == .memory ? "memory:" : "\(scheme.rawValue):\(path)" }
}

/// Where a command gets an encryption key: `--key-file` or the `LOCALSTORE_KEY` environment variable, as
/// hex (64 hex digits are a raw 256-bit key; any other even-length hex is a passphrase's bytes). Never
/// a command-line argument, so keys stay out of shell history and `ps`.
struct KeyOptions: ParsableArguments {
    @Option(name: .customLong("key-file"), help: "A file holding the key in hex (or LOCALSTORE_KEY).")
    var keyFile: String?

    func keyBytes(required: Bool, environment: String = "LOCALSTORE_KEY") throws -> [UInt8]? {
        var text: String?
        if let keyFile {
            // Read to the end rather than by size, so a pipe works too (`--key-file <(pass show app)`).
            guard let handle = FileHandle(forReadingAtPath: keyFile), let data = try? handle.readToEnd() ?? Data() else {
                throw CommandFailure("cannot read key file '\(keyFile)'")
            }
            try? handle.close()
            text = String(decoding: data, as: UTF8.self)
        } else if let env = KeyEnvironment.values[environment] {
            text = env
        }
        guard let text else {
            if required { throw CommandFailure("a sqlcipher: store needs a key: use a key file or set \(environment) (hex)") }
            return nil
        }
        return try KeyHex.decode(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// A failure a shell user can act on: printed as one line on stderr, exit code 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum KeyHex {
    /// The key bytes of hex text; a clear error for anything that is not an even number of hex digits.
    static func decode(_ text: String) throws -> [UInt8] {
        guard !text.isEmpty, let bytes = Hex.bytes(text) else {
            throw CommandFailure("the key must be an even number of hex digits")
        }
        return bytes
    }
}
