import Foundation
import LocalStore
import LocalStoreSQLCipher
import Testing

@Suite("SQLCipher options")
struct SQLCipherOptionsTests {
    @Test("the options share the SQLite backend's names and defaults for what they share")
    func sharedNames() {
        let options = SQLCipherStore.Options()
        #expect(options.durability == .normal && options.busyTimeout == .seconds(5) && options.maximumReaders == 2)
        #expect(options.cacheSizeKiB == 32768)
    }

    @available(*, deprecated, message: "exercises the 0.1.0 spellings on purpose")
    @Test("the 0.1.0 option spellings still compile and map onto the new options")
    func deprecatedSpellings() {
        var options = SQLCipherStore.Options(synchronousFull: true, busyTimeoutMilliseconds: 120, readerCount: 3)
        #expect(options == SQLCipherStore.Options(durability: .full, busyTimeout: .milliseconds(120), maximumReaders: 3))
        #expect(options.synchronousFull && options.busyTimeoutMilliseconds == 120 && options.readerCount == 3)
        options.synchronousFull = false
        options.busyTimeoutMilliseconds = 9
        options.readerCount = 1
        #expect(options.durability == .normal && options.busyTimeout == .milliseconds(9) && options.maximumReaders == 1)
    }
}
