import Foundation
import LocalStore
import LocalStoreBench

/// The backends and baselines this build of `localstore` knows.
enum BackendRegistry {
    static let backendNames = ["memory"]
    static let baselineNames: [String] = []

    static func backend(named name: String) -> BenchBackend? {
        switch name {
        case "memory":
            return BenchBackend(name: "memory", baseline: nil, isPersistent: false) { _ in
                LocalStoreSubject(store: try InMemoryStore(), reopen: nil)
            }
        default:
            return nil
        }
    }

    static func environment() -> [String: String] {
        var env: [String: String] = [
            "cpus": String(ProcessInfo.processInfo.activeProcessorCount),
            "swift": swiftVersion,
        ]
        #if DEBUG
        env["build"] = "debug"
        #else
        env["build"] = "release"
        #endif
        return env
    }

    static var swiftVersion: String {
        #if swift(>=6.3)
        return "6.3"
        #elseif swift(>=6.2)
        return "6.2"
        #elseif swift(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }
}
