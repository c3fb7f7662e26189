import CLMDB
import Foundation
import LocalStore
import Testing

@testable import LocalStoreLMDB

@Suite("LMDB options")
struct LMDBOptionsTests {
    @Test(
        "each durability sets its LMDB flags",
        arguments: [(StoreDurability.full, UInt32(0)), (.normal, UInt32(MDB_NOMETASYNC)), (.off, UInt32(MDB_NOSYNC))])
    func durabilityFlags(_ mapping: (StoreDurability, UInt32)) throws {
        let dir = try TempDirectory()
        let store = try LMDBStore(path: dir.storePath, options: LMDBStore.Options(durability: mapping.0))
        defer { try? store.close() }
        var flags: UInt32 = 0
        #expect(mdb_env_get_flags(store.environment.env, &flags) == 0)
        #expect(flags & UInt32(MDB_NOMETASYNC | MDB_NOSYNC) == mapping.1)
        #expect(LMDBStore.Options().durability == .full)
    }

    @Test("system table names are an initializer argument, as on every backend")
    func systemTableNamesArgument() throws {
        let dir = try TempDirectory()
        let names = SystemTableNames(operations: "Ops", errors: "Errs", config: "Conf")
        let store = try LMDBStore(path: dir.storePath, systemTableNames: names)
        defer { try? store.close() }
        #expect(store.systemTableNames == names)
        #expect(try store.schema(of: "Ops") != nil)
    }

    @available(*, deprecated, message: "exercises the 0.1.0 spellings on purpose")
    @Test("the 0.1.0 spellings still compile: names inside the options, LMDB's durability names")
    func deprecatedSpellings() throws {
        #expect(LMDBStoreOptions.Durability.synchronous == .full)
        #expect(LMDBStoreOptions.Durability.noMetaSync == .normal)
        #expect(LMDBStoreOptions.Durability.noSync == .off)
        let names = SystemTableNames(operations: "Ops", errors: "Errs", config: "Conf")
        let dir = try TempDirectory()
        let options = LMDBStoreOptions(durability: .noSync, systemTableNames: names)
        #expect(options.systemTableNames == names && options.durability == .off)
        let store = try LMDBStore(path: dir.storePath, options: options)
        #expect(store.systemTableNames == names)
        try store.close()
        // The same names given both ways are fine; different ones are refused, naming both.
        let again = try LMDBStore(path: dir.storePath, systemTableNames: names, options: options)
        try again.close()
        do {
            _ = try LMDBStore(path: dir.storePath, systemTableNames: SystemTableNames(operations: "O2", errors: "E2", config: "C2"), options: options)
            Issue.record("conflicting system table names were accepted")
        } catch let error as LocalStoreError {
            #expect(error.code == .invalidValue)
            #expect(error.message.contains("'O2'") && error.message.contains("'Ops'"))
        }
        var defaults = LMDBStoreOptions()
        #expect(defaults.systemTableNames == .default)
        defaults.systemTableNames = names
        #expect(defaults.systemTableNames == names)
    }
}
