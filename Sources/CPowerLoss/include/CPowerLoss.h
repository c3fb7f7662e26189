// Power-loss recording for the reliability harness (docs/reliability.md, "Power loss").
//
// Linked only into the helper executable `localstore-crash-writer`. Two recorders write one log:
//  - a SQLite VFS shim wrapping the library's default VFS (xWrite, xSync, xTruncate, xDelete and
//    file creation), registered as the default VFS of the SQLite library in use (system SQLite or the
//    dlopen'ed SQLCipher: the caller passes that library's sqlite3_vfs_find / sqlite3_vfs_register);
//  - libc interposers (pwrite, write, writev, fsync, fdatasync, ftruncate, mkdir, close) defined in the
//    executable, which shared libraries such as liblmdb bind to, for files under the recorded root and
//    for directory fsyncs. They forward to libc and record nothing until powerloss_start().
//
// Every write/writev/close of the process goes through the interposers, sockets included: in
// `localstore-crash-writer sync --service` AsyncHTTPClient/NIO's socket writes do. That mode calls neither
// powerloss_start nor powerloss_fault_arm, so there each interposer is an atomic load or two (recording
// off, no fault armed) and the libc call, its result and errno untouched.
#ifndef CPOWERLOSS_H
#define CPOWERLOSS_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Log record kinds (each record: u8 kind, u32 file, u64 a, u64 b, then b bytes for NAME/WRITE*).
enum {
    POWERLOSS_NAME = 1,          // file id `file` is the path (relative to the root) in the data
    POWERLOSS_CREATE = 2,        // the file was created (empty); its directory entry is not yet durable
    POWERLOSS_WRITE = 3,         // a = offset, b = length, data
    POWERLOSS_WRITE_DURABLE = 4, // a write on an O_SYNC/O_DSYNC descriptor: durable when it returns
    POWERLOSS_SYNC = 5,          // fsync/fdatasync/xSync of the file
    POWERLOSS_TRUNCATE = 6,      // a = new size
    POWERLOSS_DIRSYNC = 7,       // fsync of the directory `file` (entries created in it are durable)
    POWERLOSS_DELETE = 8,        // the file was removed; not durable before a DIRSYNC of its directory
    POWERLOSS_MARK = 9,          // a = transaction, b = operation id: reported committed
    POWERLOSS_MKDIR = 10,        // directory `file` created
};

/// Which recorder reports file writes: the VFS shim (SQL backends) or the libc interposers (LMDB).
/// Directory fsyncs and mkdir are recorded by the interposers in both modes.
enum { POWERLOSS_MODE_VFS = 1, POWERLOSS_MODE_LIBC = 2 };

/// Starts recording files under `root` (an absolute directory path, no trailing slash) into `logPath`.
/// Returns 0, or -1 when the log cannot be created.
int powerloss_start(const char *root, const char *logPath, int mode);

/// Stops recording and closes the log.
void powerloss_stop(void);

/// Records that transaction `seq` was reported committed with operation id `opId`.
void powerloss_mark(int64_t seq, int64_t opId);

/// Registers the recording VFS as the default VFS of one SQLite library. `vfsFind` and `vfsRegister` are
/// that library's `sqlite3_vfs_find` and `sqlite3_vfs_register`. Returns an SQLite result code (0 = OK).
int powerloss_install_vfs(void *vfsFind, void *vfsRegister);

/// Fault injection: files under `root` (absolute, no trailing slash) opened from now on through the VFS
/// shim (`POWERLOSS_MODE_VFS`), or any descriptor of a file under it (`POWERLOSS_MODE_LIBC`), become
/// subject to ``powerloss_fault_arm``.
void powerloss_fault_prepare(const char *root, int mode);

/// Starts counting the write, sync and truncate calls on those files; the `at`-th (1-based; 0 never)
/// fails: the libc calls return -1 with `errnoValue` (EIO or ENOSPC), the VFS returns SQLITE_IOERR_* or,
/// for ENOSPC, SQLITE_FULL. Nothing is written by the failed call.
void powerloss_fault_arm(long at, int errnoValue);

/// Stops failing and counting; returns how many calls were counted since `powerloss_fault_arm`.
long powerloss_fault_stop(void);

#ifdef __cplusplus
}
#endif
#endif
