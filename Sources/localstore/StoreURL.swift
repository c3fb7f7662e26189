import ArgumentParser
import Foundation
import LocalStore
import LocalStoreOpener

extension StoreURL {
    /// Parses a command's store argument with the library's parser (`LocalStoreOpener`); a bad URL is a
    /// ``CommandFailure`` naming the part at fault.
    init(parsing text: String) throws {
        do {
            try self.init(text)
        } catch let error as LocalStoreError where error.code == .invalidURL {
            throw CommandFailure(error.message)
        }
    }
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
