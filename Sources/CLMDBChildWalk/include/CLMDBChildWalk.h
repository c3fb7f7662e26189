// A walk of every page of an LMDB environment in a forked child process (LocalStoreLMDB's
// checkIntegrity, docs/reliability.md): liblmdb asserts (SIGABRT) or faults (SIGSEGV, SIGBUS) on some
// damaged pages instead of returning MDB_CORRUPTED, which would kill the caller.
#ifndef CLMDBCHILDWALK_H
#define CLMDBCHILDWALK_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// How the child's walk ended.
typedef enum {
    LOCALSTORE_WALK_OK = 0,         // every database walked, every value read
    LOCALSTORE_WALK_ERROR = 1,      // liblmdb returned an error: `detail` is its code
    LOCALSTORE_WALK_SIGNAL = 2,     // the child died of signal `detail` (an assertion in liblmdb, a fault)
    LOCALSTORE_WALK_TIMEOUT = 3,    // it ran longer than the time limit and was killed
    LOCALSTORE_WALK_NOT_RUN = 4,    // fork, pipe or waitpid failed: `detail` is errno
    LOCALSTORE_WALK_NO_RESULT = 5,  // the child exited without reporting: `detail` is its exit status
} localstore_walk_outcome;

/// Forks; the child opens the environment at `path` read-only (with its own reader slot), walks the
/// free-page database, the main database and every named database with cursors, reads every key and
/// value byte, and exits. Only liblmdb and libc run in the child. `message` receives what the child
/// wrote to stderr (liblmdb's assertion text) and the database it was walking.
localstore_walk_outcome localstore_lmdb_child_walk(
    const char *path, unsigned int maxDatabases, int timeoutSeconds, int *detail, char *message, size_t messageSize);

#ifdef __cplusplus
}
#endif
#endif
