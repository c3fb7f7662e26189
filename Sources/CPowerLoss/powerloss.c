// Power-loss recording: see include/CPowerLoss.h and docs/reliability.md ("Power loss").
#define _GNU_SOURCE
#include "CPowerLoss.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

// MARK: libc functions the interposers forward to

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*fd_fn)(int);
typedef int (*ftruncate_fn)(int, off_t);
typedef int (*mkdir_fn)(const char *, mode_t);

static void *resolve(void **slot, const char *name) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}
static void *real_pwrite_p, *real_write_p, *real_writev_p, *real_fsync_p, *real_fdatasync_p, *real_ftruncate_p,
    *real_mkdir_p, *real_close_p;
#define REAL(type, name) ((type)resolve(&real_##name##_p, #name))

// MARK: The log

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int active = 0;      // read without the lock as a fast path, then re-checked under it
static int recordMode = 0;
static char root[PATH_MAX];
static size_t rootLength = 0;
static int logFd = -1;

#define MAX_NAMES 256
static char *names[MAX_NAMES];
static int nameCount = 0;

#define MAX_FDS 4096
enum { FD_UNKNOWN = 0, FD_IGNORED = 1, FD_FILE = 2, FD_DIRECTORY = 3 };
static struct { int state; int id; int durable; } fds[MAX_FDS];

static void writeAll(const void *bytes, size_t length) {
    const char *p = bytes;
    while (length > 0) {
        ssize_t n = REAL(write_fn, write)(logFd, p, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { abort(); }  // a recording with a hole would be worthless: stop loudly
        p += n;
        length -= (size_t)n;
    }
}

// Called with the lock held.
static void emit(uint8_t kind, uint32_t file, uint64_t a, uint64_t b, const void *data, size_t dataLength) {
    unsigned char header[21];
    header[0] = kind;
    memcpy(header + 1, &file, 4);
    memcpy(header + 5, &a, 8);
    memcpy(header + 13, &b, 8);
    writeAll(header, sizeof header);
    if (dataLength > 0) writeAll(data, dataLength);
}

// The path relative to the root ("" for the root itself), or NULL when outside it.
static const char *relative(const char *path) {
    if (rootLength == 0 || strncmp(path, root, rootLength) != 0) return NULL;
    if (path[rootLength] == 0) return path + rootLength;
    if (path[rootLength] == '/') return path + rootLength + 1;
    return NULL;
}

// Files that hold no data and are rebuilt by every opener: never recorded.
static int ignoredName(const char *rel) {
    size_t n = strlen(rel);
    if (n >= 4 && strcmp(rel + n - 4, "-shm") == 0) return 1;
    if (n >= 8 && strcmp(rel + n - 8, "lock.mdb") == 0) return 1;
    return 0;
}

// The id of a relative name, recording NAME (and `newKind`, CREATE or MKDIR, when not known yet). Lock held.
static int nameId(const char *rel, uint8_t newKind) {
    for (int i = 0; i < nameCount; i++) {
        if (strcmp(names[i], rel) == 0) return i;
    }
    if (nameCount == MAX_NAMES) abort();
    names[nameCount] = strdup(rel);
    if (names[nameCount] == NULL) abort();
    emit(POWERLOSS_NAME, (uint32_t)nameCount, 0, strlen(rel), rel, strlen(rel));
    if (newKind != 0) emit(newKind, (uint32_t)nameCount, 0, 0, NULL, 0);
    return nameCount++;
}

static int knownName(const char *rel) {
    for (int i = 0; i < nameCount; i++) {
        if (strcmp(names[i], rel) == 0) return 1;
    }
    return 0;
}

// The parent of a relative name ("" for the root's entries), into `out`.
static void parentOf(const char *rel, char *out, size_t size) {
    const char *slash = strrchr(rel, '/');
    size_t n = slash ? (size_t)(slash - rel) : 0;
    if (n >= size) n = size - 1;
    memcpy(out, rel, n);
    out[n] = 0;
}

// A directory fsync: first registers every entry the directory holds that is not known yet (created
// before this sync, so durable with it), then records DIRSYNC. Lock held.
static void recordDirectorySync(const char *relDirectory) {
    char path[PATH_MAX];
    if (relDirectory[0] == 0) {
        snprintf(path, sizeof path, "%s", root);
    } else {
        snprintf(path, sizeof path, "%s/%s", root, relDirectory);
    }
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char rel[PATH_MAX];
            if (relDirectory[0] == 0) {
                snprintf(rel, sizeof rel, "%s", e->d_name);
            } else {
                snprintf(rel, sizeof rel, "%s/%s", relDirectory, e->d_name);
            }
            if (ignoredName(rel) || knownName(rel)) continue;
            char full[PATH_MAX];
            snprintf(full, sizeof full, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(full, &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) {
                nameId(rel, POWERLOSS_MKDIR);
            } else if (S_ISREG(st.st_mode) && recordMode == POWERLOSS_MODE_LIBC) {
                // In VFS mode the shim names files when SQLite opens them.
                nameId(rel, POWERLOSS_CREATE);
            }
        }
        closedir(d);
    }
    emit(POWERLOSS_DIRSYNC, (uint32_t)nameId(relDirectory, POWERLOSS_MKDIR), 0, 0, NULL, 0);
}

// What a descriptor refers to (cached until close). Lock held.
static int describe(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return FD_IGNORED;
    if (fds[fd].state != FD_UNKNOWN) return fds[fd].state;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    fds[fd].state = FD_IGNORED;
    if (n <= 0) return FD_IGNORED;
    path[n] = 0;
    const char *rel = relative(path);
    struct stat st;
    if (rel == NULL || fstat(fd, &st) != 0) return FD_IGNORED;
    if (S_ISDIR(st.st_mode)) {
        fds[fd].state = FD_DIRECTORY;
        fds[fd].id = nameId(rel, POWERLOSS_MKDIR);
    } else if (S_ISREG(st.st_mode) && recordMode == POWERLOSS_MODE_LIBC && !ignoredName(rel)) {
        fds[fd].state = FD_FILE;
        fds[fd].id = nameId(rel, POWERLOSS_CREATE);
        int flags = fcntl(fd, F_GETFL);
        fds[fd].durable = flags >= 0 && (flags & O_DSYNC) != 0;
    }
    return fds[fd].state;
}

static void recordWrite(int fd, uint64_t offset, const void *bytes, size_t length) {
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE) || length == 0) return;
    pthread_mutex_lock(&lock);
    if (active && describe(fd) == FD_FILE) {
        emit(fds[fd].durable ? POWERLOSS_WRITE_DURABLE : POWERLOSS_WRITE, (uint32_t)fds[fd].id, offset, length, bytes, length);
    }
    pthread_mutex_unlock(&lock);
}

static void recordSync(int fd) {
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&lock);
    if (active) {
        int kind = describe(fd);
        if (kind == FD_FILE) emit(POWERLOSS_SYNC, (uint32_t)fds[fd].id, 0, 0, NULL, 0);
        if (kind == FD_DIRECTORY) recordDirectorySync(names[fds[fd].id]);
    }
    pthread_mutex_unlock(&lock);
}

// MARK: Fault injection (docs/reliability.md, "I/O faults")

static int faultArmed = 0;         // counting (and failing) calls
static int faultMode = 0;          // POWERLOSS_MODE_VFS or POWERLOSS_MODE_LIBC
static char faultRoot[PATH_MAX];
static size_t faultRootLength = 0;
static long faultCalls = 0;
static long faultAt = 0;
static int faultErrno = EIO;

static int underFaultRoot(const char *path) {
    if (faultRootLength == 0 || path == NULL) return 0;
    return strncmp(path, faultRoot, faultRootLength) == 0 && (path[faultRootLength] == '/' || path[faultRootLength] == 0);
}

// Whether `fd` is a regular file under the fault root (looked up on every call: tests only).
static int faultFd(int fd) {
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    struct stat st;
    return underFaultRoot(path) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

// Counts one call; 1 when it is the one to fail.
static int faultHit(void) {
    pthread_mutex_lock(&lock);
    long n = ++faultCalls;
    pthread_mutex_unlock(&lock);
    return n == faultAt;
}

static int libcFault(int fd) {
    return __atomic_load_n(&faultArmed, __ATOMIC_ACQUIRE) && faultMode == POWERLOSS_MODE_LIBC && faultFd(fd) && faultHit();
}

void powerloss_fault_prepare(const char *rootPath, int mode) {
    pthread_mutex_lock(&lock);
    snprintf(faultRoot, sizeof faultRoot, "%s", rootPath);
    faultRootLength = strlen(faultRoot);
    while (faultRootLength > 1 && faultRoot[faultRootLength - 1] == '/') faultRoot[--faultRootLength] = 0;
    faultMode = mode;
    pthread_mutex_unlock(&lock);
}

void powerloss_fault_arm(long at, int errnoValue) {
    pthread_mutex_lock(&lock);
    faultCalls = 0;
    faultAt = at;
    faultErrno = errnoValue;
    pthread_mutex_unlock(&lock);
    __atomic_store_n(&faultArmed, 1, __ATOMIC_RELEASE);
}

long powerloss_fault_stop(void) {
    __atomic_store_n(&faultArmed, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&lock);
    long n = faultCalls;
    pthread_mutex_unlock(&lock);
    return n;
}

// MARK: Control

int powerloss_start(const char *rootPath, const char *logPath, int mode) {
    pthread_mutex_lock(&lock);
    snprintf(root, sizeof root, "%s", rootPath);
    rootLength = strlen(root);
    while (rootLength > 1 && root[rootLength - 1] == '/') root[--rootLength] = 0;
    recordMode = mode;
    memset(fds, 0, sizeof fds);
    logFd = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logFd >= 0) {
        writeAll("PLOG0001", 8);
        __atomic_store_n(&active, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return logFd >= 0 ? 0 : -1;
}

void powerloss_stop(void) {
    pthread_mutex_lock(&lock);
    __atomic_store_n(&active, 0, __ATOMIC_RELEASE);
    if (logFd >= 0) REAL(fd_fn, close)(logFd);
    logFd = -1;
    pthread_mutex_unlock(&lock);
}

void powerloss_mark(int64_t seq, int64_t opId) {
    pthread_mutex_lock(&lock);
    if (active) emit(POWERLOSS_MARK, 0, (uint64_t)seq, (uint64_t)opId, NULL, 0);
    pthread_mutex_unlock(&lock);
}

// MARK: libc interposers (bound by liblmdb, libsqlite3 and this executable's own code)

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    if (libcFault(fd)) { errno = faultErrno; return -1; }
    ssize_t n = REAL(pwrite_fn, pwrite)(fd, buf, count, offset);
    if (n > 0) recordWrite(fd, (uint64_t)offset, buf, (size_t)n);
    return n;
}

ssize_t write(int fd, const void *buf, size_t count) {
    if (libcFault(fd)) { errno = faultErrno; return -1; }
    off_t offset = __atomic_load_n(&active, __ATOMIC_ACQUIRE) ? lseek(fd, 0, SEEK_CUR) : -1;
    ssize_t n = REAL(write_fn, write)(fd, buf, count);
    if (n > 0 && offset >= 0) recordWrite(fd, (uint64_t)offset, buf, (size_t)n);
    return n;
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    if (libcFault(fd)) { errno = faultErrno; return -1; }
    off_t offset = __atomic_load_n(&active, __ATOMIC_ACQUIRE) ? lseek(fd, 0, SEEK_CUR) : -1;
    ssize_t n = REAL(writev_fn, writev)(fd, iov, iovcnt);
    if (n > 0 && offset >= 0) {
        size_t left = (size_t)n;
        for (int i = 0; i < iovcnt && left > 0; i++) {
            size_t part = iov[i].iov_len < left ? iov[i].iov_len : left;
            recordWrite(fd, (uint64_t)offset, iov[i].iov_base, part);
            offset += (off_t)part;
            left -= part;
        }
    }
    return n;
}

int fsync(int fd) {
    if (libcFault(fd)) { errno = faultErrno; return -1; }
    int rc = REAL(fd_fn, fsync)(fd);
    if (rc == 0) recordSync(fd);
    return rc;
}

int fdatasync(int fd) {
    if (libcFault(fd)) { errno = faultErrno; return -1; }
    int rc = REAL(fd_fn, fdatasync)(fd);
    if (rc == 0) recordSync(fd);
    return rc;
}

int ftruncate(int fd, off_t length) {
    if (libcFault(fd)) { errno = faultErrno; return -1; }
    int rc = REAL(ftruncate_fn, ftruncate)(fd, length);
    if (rc == 0 && __atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&lock);
        if (active && describe(fd) == FD_FILE) emit(POWERLOSS_TRUNCATE, (uint32_t)fds[fd].id, (uint64_t)length, 0, NULL, 0);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

int mkdir(const char *path, mode_t mode) {
    int rc = REAL(mkdir_fn, mkdir)(path, mode);
    if (rc == 0 && __atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
        char full[PATH_MAX];
        if (path[0] == '/') {
            snprintf(full, sizeof full, "%s", path);
        } else {
            char cwd[PATH_MAX];
            if (getcwd(cwd, sizeof cwd) == NULL) return rc;
            snprintf(full, sizeof full, "%s/%s", cwd, path);
        }
        size_t n = strlen(full);
        while (n > 1 && full[n - 1] == '/') full[--n] = 0;
        pthread_mutex_lock(&lock);
        const char *rel = relative(full);
        if (active && rel != NULL && rel[0] != 0) nameId(rel, POWERLOSS_MKDIR);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

int close(int fd) {
    // Only a recording tracks descriptors (powerloss_start forgets them all), so outside one close takes
    // no lock. It must not: this file is linked into every process that links the helper's objects (the
    // test bundle too), and a lock taken by every close() can be held by another thread at a fork(); the
    // forked child (LMDB's integrity walk, CLMDBChildWalk) then waited for it forever (seen under load and
    // under ThreadSanitizer: the child in futex_wait on this `lock`).
    if (fd >= 0 && fd < MAX_FDS && __atomic_load_n(&active, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&lock);
        fds[fd].state = FD_UNKNOWN;
        pthread_mutex_unlock(&lock);
    }
    return REAL(fd_fn, close)(fd);
}

// MARK: The SQLite VFS shim

typedef struct PLFile {
    sqlite3_file base;
    sqlite3_file *real;
    int id;           // -1: not recorded
    int syncDirectory; // the wrapped unix VFS fsyncs the directory at this file's first xSync
    int faultable;     // under the fault root (fault injection in VFS mode)
} PLFile;

static int vfsFault(sqlite3_file *f) {
    return ((PLFile *)f)->faultable && __atomic_load_n(&faultArmed, __ATOMIC_ACQUIRE) && faultMode == POWERLOSS_MODE_VFS && faultHit();
}

static sqlite3_vfs *wrapped = NULL;
static sqlite3_vfs shim;
static sqlite3_io_methods methods;
static int methodsReady = 0;

#define REALFILE(f) (((PLFile *)(f))->real)

static int plClose(sqlite3_file *f) { return REALFILE(f)->pMethods->xClose(REALFILE(f)); }
static int plRead(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REALFILE(f)->pMethods->xRead(REALFILE(f), b, n, o); }

static int plWrite(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    if (vfsFault(f)) return faultErrno == ENOSPC ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    int rc = REALFILE(f)->pMethods->xWrite(REALFILE(f), b, n, o);
    PLFile *p = (PLFile *)f;
    if (rc == SQLITE_OK && p->id >= 0 && n > 0) {
        pthread_mutex_lock(&lock);
        if (active) emit(POWERLOSS_WRITE, (uint32_t)p->id, (uint64_t)o, (uint64_t)n, b, (size_t)n);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

static int plTruncate(sqlite3_file *f, sqlite3_int64 size) {
    if (vfsFault(f)) return faultErrno == ENOSPC ? SQLITE_FULL : SQLITE_IOERR_TRUNCATE;
    int rc = REALFILE(f)->pMethods->xTruncate(REALFILE(f), size);
    PLFile *p = (PLFile *)f;
    if (rc == SQLITE_OK && p->id >= 0) {
        pthread_mutex_lock(&lock);
        if (active) emit(POWERLOSS_TRUNCATE, (uint32_t)p->id, (uint64_t)size, 0, NULL, 0);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

static int plSync(sqlite3_file *f, int flags) {
    if (vfsFault(f)) return SQLITE_IOERR_FSYNC;
    int rc = REALFILE(f)->pMethods->xSync(REALFILE(f), flags);
    PLFile *p = (PLFile *)f;
    if (rc == SQLITE_OK && p->id >= 0) {
        pthread_mutex_lock(&lock);
        if (active) {
            emit(POWERLOSS_SYNC, (uint32_t)p->id, 0, 0, NULL, 0);
            if (p->syncDirectory) {
                char parent[PATH_MAX];
                parentOf(names[p->id], parent, sizeof parent);
                recordDirectorySync(parent);
            }
        }
        p->syncDirectory = 0;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

static int plFileSize(sqlite3_file *f, sqlite3_int64 *s) { return REALFILE(f)->pMethods->xFileSize(REALFILE(f), s); }
static int plLock(sqlite3_file *f, int l) { return REALFILE(f)->pMethods->xLock(REALFILE(f), l); }
static int plUnlock(sqlite3_file *f, int l) { return REALFILE(f)->pMethods->xUnlock(REALFILE(f), l); }
static int plCheckReserved(sqlite3_file *f, int *r) { return REALFILE(f)->pMethods->xCheckReservedLock(REALFILE(f), r); }
static int plFileControl(sqlite3_file *f, int op, void *a) { return REALFILE(f)->pMethods->xFileControl(REALFILE(f), op, a); }
static int plSectorSize(sqlite3_file *f) { return REALFILE(f)->pMethods->xSectorSize(REALFILE(f)); }
static int plDeviceCharacteristics(sqlite3_file *f) { return REALFILE(f)->pMethods->xDeviceCharacteristics(REALFILE(f)); }
static int plShmMap(sqlite3_file *f, int i, int s, int e, void volatile **pp) {
    return REALFILE(f)->pMethods->xShmMap(REALFILE(f), i, s, e, pp);
}
static int plShmLock(sqlite3_file *f, int o, int n, int fl) { return REALFILE(f)->pMethods->xShmLock(REALFILE(f), o, n, fl); }
static void plShmBarrier(sqlite3_file *f) { REALFILE(f)->pMethods->xShmBarrier(REALFILE(f)); }
static int plShmUnmap(sqlite3_file *f, int d) { return REALFILE(f)->pMethods->xShmUnmap(REALFILE(f), d); }
static int plFetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp) { return REALFILE(f)->pMethods->xFetch(REALFILE(f), o, n, pp); }
static int plUnfetch(sqlite3_file *f, sqlite3_int64 o, void *p) { return REALFILE(f)->pMethods->xUnfetch(REALFILE(f), o, p); }

static int plOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    PLFile *p = (PLFile *)f;
    p->real = (sqlite3_file *)(p + 1);
    p->id = -1;
    p->syncDirectory = 0;
    p->faultable = name != NULL && underFaultRoot(name);
    int existed = name != NULL && access(name, F_OK) == 0;
    int rc = wrapped->xOpen(wrapped, name, p->real, flags, outFlags);
    if (rc != SQLITE_OK || p->real->pMethods == NULL) {
        p->base.pMethods = NULL;
        return rc;
    }
    pthread_mutex_lock(&lock);
    if (!methodsReady) {
        int version = p->real->pMethods->iVersion;
        methods.iVersion = version < 3 ? version : 3;
        methods.xClose = plClose;
        methods.xRead = plRead;
        methods.xWrite = plWrite;
        methods.xTruncate = plTruncate;
        methods.xSync = plSync;
        methods.xFileSize = plFileSize;
        methods.xLock = plLock;
        methods.xUnlock = plUnlock;
        methods.xCheckReservedLock = plCheckReserved;
        methods.xFileControl = plFileControl;
        methods.xSectorSize = plSectorSize;
        methods.xDeviceCharacteristics = plDeviceCharacteristics;
        methods.xShmMap = plShmMap;
        methods.xShmLock = plShmLock;
        methods.xShmBarrier = plShmBarrier;
        methods.xShmUnmap = plShmUnmap;
        methods.xFetch = plFetch;
        methods.xUnfetch = plUnfetch;
        methodsReady = 1;
    }
    const char *rel = name != NULL && active ? relative(name) : NULL;
    if (rel != NULL && rel[0] != 0 && !ignoredName(rel)) {
        int known = knownName(rel);
        p->id = nameId(rel, existed ? 0 : POWERLOSS_CREATE);
        if (known && !existed) emit(POWERLOSS_CREATE, (uint32_t)p->id, 0, 0, NULL, 0);
        // The unix VFS opens journals and WALs it creates with UNIXFILE_DIRSYNC: their first xSync
        // also fsyncs the directory (SQLCipher's copy makes that fsync inside its own library).
        p->syncDirectory = !existed && (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | 0x00004000)) != 0;
    }
    pthread_mutex_unlock(&lock);
    p->base.pMethods = &methods;
    return SQLITE_OK;
}

static int plDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    int rc = wrapped->xDelete(wrapped, name, syncDirectory);
    if (rc == SQLITE_OK && name != NULL) {
        pthread_mutex_lock(&lock);
        const char *rel = active ? relative(name) : NULL;
        if (rel != NULL && rel[0] != 0 && !ignoredName(rel) && knownName(rel)) {
            emit(POWERLOSS_DELETE, (uint32_t)nameId(rel, 0), 0, 0, NULL, 0);
            if (syncDirectory) {
                char parent[PATH_MAX];
                parentOf(rel, parent, sizeof parent);
                recordDirectorySync(parent);
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

int powerloss_install_vfs(void *vfsFind, void *vfsRegister) {
    sqlite3_vfs *(*find)(const char *) = (sqlite3_vfs * (*)(const char *)) vfsFind;
    int (*reg)(sqlite3_vfs *, int) = (int (*)(sqlite3_vfs *, int))vfsRegister;
    if (wrapped != NULL) return SQLITE_MISUSE;
    wrapped = find(NULL);
    if (wrapped == NULL) return SQLITE_ERROR;
    shim = *wrapped;
    shim.pNext = NULL;
    shim.zName = "localstore-powerloss";
    shim.szOsFile = (int)sizeof(PLFile) + wrapped->szOsFile;
    shim.xOpen = plOpen;
    shim.xDelete = plDelete;
    return reg(&shim, 1);
}
