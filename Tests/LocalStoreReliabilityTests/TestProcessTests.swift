import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The power-loss recorder interposes libc's write and sync calls in the process it is linked into
/// (localstore-crash-writer only). The test process must not be that process: every store the tests open
/// would write and sync through the recorder.
@Suite("The test process")
struct TestProcessTests {
    @Test("libc's write and sync calls are libc's own, not the power-loss recorder's")
    func libcIsNotInterposed() throws {
        let libc = try #require(dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD), "libc is loaded")
        defer { dlclose(libc) }
        for name in ["write", "pwrite", "writev", "fsync", "fdatasync", "ftruncate", "close", "mkdir"] {
            // What every library of the process binds to, against libc's own definition.
            let bound = try #require(dlsym(UnsafeMutableRawPointer(bitPattern: 0), name), "\(name) resolves")
            let own = try #require(dlsym(libc, name), "libc defines \(name)")
            // In a sanitized build the sanitizer runtime intercepts some of them (and calls libc's own): its
            // interceptor is the `__interceptor_trampoline_<name>` the runtime exports. Anything else in
            // front of libc fails.
            let sanitizer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__interceptor_trampoline_" + name)
            #expect(bound == own || (sanitizer != nil && bound == sanitizer), "\(name) is interposed in the test process")
        }
    }
}
