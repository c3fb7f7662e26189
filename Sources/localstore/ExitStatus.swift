import ArgumentParser
import Foundation
import LocalStore

/// The exit codes of `localstore` (sysexits.h values where one fits), listed in `localstore --help` and
/// docs/cli.md. Every failure prints one line on stderr (`localstore: <code>: <message>`) and exits with
/// one of these; scripts can tell a mistake in the command from a missing, damaged or locked store.
enum ExitStatus: Int32, CaseIterable {
    /// The command did what it was asked.
    case success = 0
    /// `verify` ran and found damage (the problems are on stderr).
    case verificationFailed = 2
    /// EX_USAGE: the command line is wrong: an unknown option, a bad value, a malformed store URL, a
    /// `--filter`/`--orderby` that does not parse or names a table or column the store lacks, no key for a
    /// `sqlcipher:` store, a key that is not hex, `rekey` of a store without a key.
    case usage = 64
    /// EX_DATAERR: the store is damaged, is not a LocalStore store, or was written in a format this
    /// version cannot read (`corrupt`, `notADatabase`, `versionMismatch`; docs/format.md).
    case dataError = 65
    /// EX_NOINPUT: the store (or a key file) does not exist or cannot be read.
    case noInput = 66
    /// EX_UNAVAILABLE: a library the backend needs is missing (libsqlcipher).
    case unavailable = 69
    /// EX_SOFTWARE: an internal error; please report it.
    case software = 70
    /// EX_CANTCREAT: the destination cannot be written: read-only, full, or (`copy`) not empty.
    case cannotWrite = 73
    /// EX_IOERR: the operating system reported an I/O error.
    case ioError = 74
    /// EX_TEMPFAIL: the store is busy (a lock held too long, no free reader slot); try again.
    case temporaryFailure = 75
    /// EX_NOPERM: the key does not open the encrypted store.
    case wrongKey = 77

    /// One line per code for `--help` and the docs.
    static var helpText: String {
        let lines: [(ExitStatus, String)] = [
            (.success, "success"),
            (.verificationFailed, "verify found damage"),
            (.usage, "usage: bad option, URL, filter, table/column name; missing or bad key"),
            (.dataError, "damaged store, not a store, or a format this version cannot read"),
            (.noInput, "no store (or key file) at the given path"),
            (.unavailable, "a library the backend needs is missing (libsqlcipher)"),
            (.software, "internal error"),
            (.cannotWrite, "the destination is read-only, full or (copy) not empty"),
            (.ioError, "I/O error"),
            (.temporaryFailure, "the store is busy; try again"),
            (.wrongKey, "wrong key for an encrypted store"),
        ]
        return lines.map { "  \($0.0.rawValue)\(String(repeating: " ", count: max(1, 4 - String($0.0.rawValue).count)))\($0.1)" }
            .joined(separator: "\n")
    }

    /// The exit status of a store error.
    init(_ error: LocalStoreError) {
        switch error.code {
        case .wrongKey: self = .wrongKey
        case .corrupt, .notADatabase, .versionMismatch, .invalidValue, .missingId: self = .dataError
        case .unknownTable, .unknownColumn, .typeMismatch, .invalidIdentifier, .invalidQuery, .reservedName:
            self = .usage
        case .readOnly, .full, .constraint, .schemaConflict: self = .cannotWrite
        case .ioError: self = .ioError
        case .busy, .readersFull: self = .temporaryFailure
        case .libraryMissing: self = .unavailable
        default: self = .software
        }
    }

    /// The exit status of a ``CommandFailure`` (a command-line problem), from the failures the store
    /// opener reports: a path without a store or an unreadable key file is `noInput`, the rest `usage`.
    init(_ failure: CommandFailure) {
        let text = failure.description
        self = text.hasPrefix("no store at") || text.hasPrefix("cannot read key file") ? .noInput : .usage
    }
}

/// A failure of the command itself with its exit status (one line on stderr).
struct CommandError: Error, CustomStringConvertible {
    let status: ExitStatus
    let description: String
    init(_ status: ExitStatus, _ description: String) {
        self.status = status
        self.description = description
    }
}

/// Runs a command body, turning every error into one line on stderr and its ``ExitStatus``.
func reportingFailures(_ body: () throws -> Void) throws {
    func fail(_ line: String, _ status: ExitStatus) -> ExitCode {
        FileHandle.standardError.write(Data("localstore: \(line)\n".utf8))
        return ExitCode(status.rawValue)
    }
    do {
        try body()
    } catch let e as ValidationError {
        throw e
    } catch let e as LocalStoreError {
        throw fail("\(e.code): \(e.message)", ExitStatus(e))
    } catch let e as CommandFailure {
        throw fail(e.description, ExitStatus(e))
    } catch let e as CommandError {
        throw fail(e.description, e.status)
    } catch let e as ExitCode {
        throw e
    } catch {
        throw fail("\(error)", .software)
    }
}
