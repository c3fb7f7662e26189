import Foundation
import LocalStore

/// Opens the store a ``StoreURL`` names.
enum StoreOpener {
    /// Opens `url`. With `mustExist`, a path that does not exist is an error instead of a new store.
    static func open(
        _ url: StoreURL, key: KeyOptions, mustExist: Bool, environmentKey: String = "LOCALSTORE_KEY"
    ) throws -> any LocalStore {
        if mustExist, url.scheme != .memory, !FileManager.default.fileExists(atPath: url.path) {
            throw CommandFailure("no store at '\(url.path)' (\(url))")
        }
        switch url.scheme {
        case .memory:
            return try InMemoryStore()
        default:
            throw CommandFailure("this build of localstore has no \(url.scheme.rawValue) backend")
        }
    }
}
