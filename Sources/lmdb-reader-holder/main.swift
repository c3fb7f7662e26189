// A test helper for LocalStoreLMDBTests, run as a separate process.
//
//     lmdb-reader-holder <directory>          opens the environment, begins a read transaction
//                                             (taking a reader slot), prints "ready" and waits to
//                                             be killed: SIGKILL leaves a stale reader slot.
//     lmdb-reader-holder write <directory>    opens the environment, prints "ready", waits for a
//                                             line on stdin, prints "waiting", begins a write
//                                             transaction (blocking while another process writes),
//                                             puts the key "childWrote" into the `meta` database,
//                                             commits and prints "done".
import CLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

func say(_ text: String, fd: Int32) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

func fail(_ what: String, _ rc: Int32) -> Never {
    say("lmdb-reader-holder: \(what): \(String(cString: mdb_strerror(rc)))\n", fd: 2)
    exit(1)
}

func check(_ rc: Int32, _ what: String) {
    if rc != 0 { fail(what, rc) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let writing = arguments.first == "write"
guard arguments.count == (writing ? 2 : 1), let path = arguments.last else {
    say("usage: lmdb-reader-holder [write] <environment directory>\n", fd: 2)
    exit(2)
}
var env: OpaquePointer?
check(mdb_env_create(&env), "mdb_env_create")
check(mdb_env_set_maxdbs(env, 1024), "mdb_env_set_maxdbs")
check(mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600), "mdb_env_open")
var txn: OpaquePointer?
if !writing {
    check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
    say("ready\n", fd: 1)
    while true { pause() }
}
say("ready\n", fd: 1)
var byte: UInt8 = 0
while read(0, &byte, 1) == 1 && byte != UInt8(ascii: "\n") {}
say("waiting\n", fd: 1)
var rc = mdb_txn_begin(env, nil, 0, &txn)
if rc == MDB_MAP_RESIZED {
    check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize")
    rc = mdb_txn_begin(env, nil, 0, &txn)
}
check(rc, "mdb_txn_begin")
var dbi: MDB_dbi = 0
check(mdb_dbi_open(txn, "meta", 0, &dbi), "mdb_dbi_open")
var key = Array("childWrote".utf8)
var value: [UInt8] = [1]
key.withUnsafeMutableBytes { k in
    value.withUnsafeMutableBytes { v in
        var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
        var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
        check(mdb_put(txn, dbi, &kv, &vv, 0), "mdb_put")
    }
}
check(mdb_txn_commit(txn), "mdb_txn_commit")
say("done\n", fd: 1)
mdb_env_close(env)
exit(0)
