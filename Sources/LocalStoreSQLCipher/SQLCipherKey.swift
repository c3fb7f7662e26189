#if canImport(Glibc)
import Glibc
#endif
import LocalStore

/// The key of an encrypted store: a passphrase (stretched with PBKDF2) or a raw 256-bit key.
///
/// Key material is copied once into a buffer this package allocates, handed to SQLCipher, and the
/// buffer is zeroed (`explicit_bzero`) as soon as the store has applied it. A key never appears in an
/// error message, a description or a log: printing a key prints `SQLCipherKey(<redacted>)`.
///
/// Swift arrays and strings passed in are the caller's: zero them yourself if they must not linger.
public struct SQLCipherKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// How SQLCipher turns the key into the cipher key.
    public enum Kind: Sendable, Hashable {
        /// A passphrase: the cipher key is derived with PBKDF2 (``SQLCipherStore/Options/kdfIterations``).
        case passphrase
        /// A raw 256-bit key used as is (no key derivation; opening is fast).
        case raw
    }

    /// The kind of key.
    public let kind: Kind
    let material: KeyMaterial

    /// A passphrase given as bytes (for example read from a key file). Must not be empty.
    public static func passphrase(_ bytes: [UInt8]) throws -> SQLCipherKey {
        guard !bytes.isEmpty else { throw LocalStoreError(.invalidValue, "an SQLCipher passphrase must not be empty") }
        return SQLCipherKey(kind: .passphrase, material: KeyMaterial(bytes))
    }

    /// A passphrase given as text (its UTF-8 bytes are the key). Must not be empty.
    public static func passphrase(_ text: String) throws -> SQLCipherKey { try passphrase(Array(text.utf8)) }

    /// A raw 256-bit key: exactly 32 bytes.
    public static func raw(_ bytes: [UInt8]) throws -> SQLCipherKey {
        guard bytes.count == 32 else {
            throw LocalStoreError(.invalidValue, "a raw SQLCipher key must be 32 bytes (256 bits), not \(bytes.count)")
        }
        // SQLCipher's raw-key syntax: the key string x'<64 hex digits>'.
        let hex = Array("0123456789ABCDEF".utf8)
        var text: [UInt8] = [UInt8(ascii: "x"), UInt8(ascii: "'")]
        text.reserveCapacity(67)
        for b in bytes {
            text.append(hex[Int(b >> 4)])
            text.append(hex[Int(b & 0xF)])
        }
        text.append(UInt8(ascii: "'"))
        let material = KeyMaterial(text)
        text.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
        return SQLCipherKey(kind: .raw, material: material)
    }

    /// `SQLCipherKey(<redacted>)`.
    public var description: String { "SQLCipherKey(<redacted>)" }
    /// `SQLCipherKey(<redacted>)`.
    public var debugDescription: String { description }
}

/// Key bytes in memory this package owns; zeroed by ``wipe()`` and when released.
final class KeyMaterial: @unchecked Sendable {
    private let lock = PThreadMutex()
    private var buffer: UnsafeMutableRawBufferPointer?

    init(_ bytes: [UInt8]) {
        let b = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 16)
        bytes.withUnsafeBytes { b.copyMemory(from: $0) }
        buffer = UnsafeMutableRawBufferPointer(rebasing: b[0..<bytes.count])
    }

    /// Calls `body` with the key bytes; throws `misuse` once the material has been wiped.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try lock.withLock {
            guard let buffer else {
                throw LocalStoreError(.misuse, "the key was already applied and wiped from memory; open the store again with the key")
            }
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Zeroes and frees the bytes.
    func wipe() {
        lock.withLock {
            if let b = buffer {
                if let base = b.baseAddress { explicit_bzero(base, b.count) }
                b.deallocate()
                buffer = nil
            }
        }
    }

    deinit { wipe() }
}
