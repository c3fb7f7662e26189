import CProcessHygiene
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Keeps key material out of places other processes and crash handlers can read.
///
/// At start, before any command runs, the CLI takes every key variable it reads out of its environment
/// (``KeyEnvironment``) and turns off core dumps (``disableCoreDumps()``).
enum ProcessHygiene {
    /// The environment variables that may hold key material.
    static let keyVariables = ["LOCALSTORE_KEY", "LOCALSTORE_NEW_KEY", "LOCALSTORE_DESTINATION_KEY"]

    /// Removes each of `names` from the process environment and returns the values it had.
    ///
    /// `unsetenv` alone only drops the pointer from `environ`: the `NAME=value` bytes stay in the
    /// initial environment block, which is what `/proc/<pid>/environ` shows. So the bytes are also
    /// overwritten with zeros. Every occurrence is removed (a hand-built environment can repeat a name);
    /// the first one is the value `getenv` would have returned.
    static func takeEnvironment(_ names: [String]) -> [String: String] {
        var taken: [String: String] = [:]
        for name in names {
            while let value = getenv(name) {
                if taken[name] == nil { taken[name] = String(cString: value) }
                // getenv returns the byte after "NAME=" inside the environ entry.
                let entry = value - (name.utf8.count + 1)
                let length = strlen(entry)
                unsetenv(name)
                memset(entry, 0, length)
            }
        }
        return taken
    }

    /// No core file for this process: `RLIMIT_CORE` 0 (soft and hard, so nothing in the process can raise
    /// it again), and on Linux `PR_SET_DUMPABLE` 0. The second one also covers a `core_pattern` that pipes
    /// to a crash collector (which the kernel runs whatever the limit) and stops other processes of the
    /// same user from attaching with ptrace or reading `/proc/<pid>/mem` and `environ`; the price is that
    /// a debugger of the same (non-root) user cannot attach to the CLI, which is acceptable for a tool
    /// that holds keys. Both are best effort: a failure is not a reason to refuse to run.
    static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &none)
        _ = localstore_set_not_dumpable()
    }
}

/// The key variables' values, taken out of the environment once, on first use (``LocalStoreCommand``
/// touches it before parsing the command line).
enum KeyEnvironment {
    static let values: [String: String] = ProcessHygiene.takeEnvironment(ProcessHygiene.keyVariables)
}
