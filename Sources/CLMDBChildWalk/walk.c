// See include/CLMDBChildWalk.h.
#define _GNU_SOURCE
#include "CLMDBChildWalk.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned char sink;

static void say(const char *text) {
    size_t n = strlen(text);
    while (n > 0) {
        ssize_t w = write(2, text, n);
        if (w <= 0) return;
        text += w;
        n -= (size_t)w;
    }
}

static int walkDatabase(MDB_txn *txn, MDB_dbi dbi, const char *name) {
    char line[600];
    snprintf(line, sizeof line, "walking database '%s'\n", name);
    say(line);
    MDB_cursor *cursor;
    int rc = mdb_cursor_open(txn, dbi, &cursor);
    if (rc != 0) return rc;
    MDB_val key, value;
    unsigned char acc = 0;
    for (rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
        const unsigned char *k = key.mv_data, *v = value.mv_data;
        for (size_t i = 0; i < key.mv_size; i++) acc ^= k[i];
        for (size_t i = 0; i < value.mv_size; i++) acc ^= v[i];
    }
    sink = acc;
    mdb_cursor_close(cursor);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static int walk(const char *path, unsigned int maxDatabases) {
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc != 0) return rc;
    mdb_env_set_maxdbs(env, maxDatabases);
    rc = mdb_env_open(env, path, MDB_RDONLY | MDB_NOTLS, 0600);
    MDB_txn *txn = NULL;
    if (rc == 0) rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    MDB_dbi main = 0;
    if (rc == 0) rc = walkDatabase(txn, 0, "(free pages)");
    if (rc == 0) rc = mdb_dbi_open(txn, NULL, 0, &main);
    if (rc == 0) rc = walkDatabase(txn, main, "(main)");
    if (rc == 0) {
        MDB_cursor *cursor = NULL;
        rc = mdb_cursor_open(txn, main, &cursor);
        MDB_val key, value;
        int step = rc == 0 ? mdb_cursor_get(cursor, &key, &value, MDB_FIRST) : rc;
        while (rc == 0 && step == 0) {
            char name[512];
            size_t n = key.mv_size < sizeof name - 1 ? key.mv_size : sizeof name - 1;
            memcpy(name, key.mv_data, n);
            name[n] = 0;
            MDB_dbi dbi;
            int open = memchr(name, 0, n) == NULL ? mdb_dbi_open(txn, name, 0, &dbi) : MDB_INCOMPATIBLE;
            if (open == 0) {
                rc = walkDatabase(txn, dbi, name);
            } else if (open != MDB_INCOMPATIBLE && open != MDB_NOTFOUND) {
                rc = open;  // a plain key of the main database is MDB_INCOMPATIBLE: not a database
            }
            if (rc == 0) step = mdb_cursor_get(cursor, &key, &value, MDB_NEXT);
        }
        if (rc == 0 && step != MDB_NOTFOUND) rc = step;
        if (cursor != NULL) mdb_cursor_close(cursor);
    }
    if (txn != NULL) mdb_txn_abort(txn);
    mdb_env_close(env);
    return rc;
}

localstore_walk_outcome localstore_lmdb_child_walk(
    const char *path, unsigned int maxDatabases, int timeoutSeconds, int *detail, char *message, size_t messageSize) {
    *detail = 0;
    if (messageSize > 0) message[0] = 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *detail = errno;
        return LOCALSTORE_WALK_NOT_RUN;
    }
    pid_t pid = fork();
    if (pid < 0) {
        *detail = errno;
        close(fds[0]);
        close(fds[1]);
        return LOCALSTORE_WALK_NOT_RUN;
    }
    if (pid == 0) {
        // The child: stderr (liblmdb's assertion message) and the progress lines go to the pipe.
        // The parent's crash handlers (the Swift runtime's backtracer, an application's crash reporter)
        // must not run for the child: a damaged page ends it at once, and the parent reports it.
        int fatal[] = {SIGPIPE, SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP};
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], SIG_DFL);
        dup2(fds[1], 2);
        int rc = walk(path, maxDatabases);
        char line[64];
        snprintf(line, sizeof line, "result %d\n", rc);
        say(line);
        _exit(0);
    }
    close(fds[1]);
    // Keep the last part of what the child wrote (the database it was walking, the assertion).
    char buffer[4096];
    size_t used = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int timedOut = 0;
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (long)(now.tv_sec - start.tv_sec);
        if (timeoutSeconds > 0 && elapsed >= timeoutSeconds) {
            timedOut = 1;
            // Say where the child was: its state (Z: it exited, and another process holds the pipe),
            // the kernel function it waits in and its system call (number and arguments).
            char note[400];
            size_t at = (size_t)snprintf(note, sizeof note, "child %d at the time limit:", (int)pid);
            const char *files[] = {"stat", "wchan", "syscall"};
            for (size_t f = 0; f < 3 && at < sizeof note - 2; f++) {
                char procPath[64];
                snprintf(procPath, sizeof procPath, "/proc/%d/%s", (int)pid, files[f]);
                int fd = open(procPath, O_RDONLY | O_CLOEXEC);
                if (fd < 0) continue;
                char text[160];
                ssize_t n = read(fd, text, sizeof text - 1);
                close(fd);
                if (n <= 0) continue;
                text[n] = 0;
                for (ssize_t i = 0; i < n; i++) if (text[i] == '\n') text[i] = ' ';
                at += (size_t)snprintf(note + at, sizeof note - at, " %s: %s;", files[f], text);
            }
            if (at >= sizeof note - 1) at = sizeof note - 2;
            note[at++] = '\n';
            note[at] = 0;
            kill(pid, SIGKILL);
            size_t n = strlen(note);
            if (n > sizeof buffer) n = sizeof buffer;
            if (used + n > sizeof buffer) {
                memmove(buffer, buffer + (used + n - sizeof buffer), sizeof buffer - n);
                used = sizeof buffer - n;
            }
            memcpy(buffer + used, note, n);
            used += n;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int ready = poll(&p, 1, 1000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        char chunk[1024];
        ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (used + (size_t)n > sizeof buffer) {
            // Keep the tail: drop whole lines from the front.
            size_t drop = used + (size_t)n - sizeof buffer;
            memmove(buffer, buffer + drop, used - drop);
            used -= drop;
        }
        memcpy(buffer + used, chunk, (size_t)n);
        used += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    pid_t waited;
    do {
        waited = waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    if (messageSize > 0) {
        size_t n = used < messageSize - 1 ? used : messageSize - 1;
        memcpy(message, buffer + (used - n), n);
        message[n] = 0;
    }
    if (timedOut) {
        *detail = timeoutSeconds;
        return LOCALSTORE_WALK_TIMEOUT;
    }
    if (waited < 0) {
        *detail = errno;
        return LOCALSTORE_WALK_NOT_RUN;
    }
    if (WIFSIGNALED(status)) {
        *detail = WTERMSIG(status);
        return LOCALSTORE_WALK_SIGNAL;
    }
    // The child printed "result <rc>" last.
    const char *result = NULL;
    for (size_t i = used; i > 0; i--) {
        if (i - 1 + 7 <= used && memcmp(buffer + i - 1, "result ", 7) == 0) {
            result = buffer + i - 1 + 7;
            break;
        }
    }
    if (result == NULL) {
        *detail = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return LOCALSTORE_WALK_NO_RESULT;
    }
    int rc = 0;
    sscanf(result, "%d", &rc);
    *detail = rc;
    return rc == 0 ? LOCALSTORE_WALK_OK : LOCALSTORE_WALK_ERROR;
}
