// The cost of a small commit on the system SQLite and on SQLCipher, with no LocalStore code in between
// (docs/encryption.md, "What encryption costs per commit"). Modes:
//   plain   the system libsqlite3 (3.40 on Debian 12)
//   nokey   libsqlcipher without a key: its SQLite (3.15.2), no page cipher
//   key     libsqlcipher with a raw key, 4096-byte cipher pages, HMAC on (SQLCipherStore's defaults)
//   nohmac  the same with PRAGMA cipher_use_hmac = OFF (measured only: LocalStore does not offer it)
// Every mode: WAL, synchronous = NORMAL, cache_size 32 MiB, 4096-byte pages. Median microseconds of: a
// one-row value update in its own BEGIN IMMEDIATE ... COMMIT followed by a read of it (one page per commit,
// as a delta token), an insert of one row into a table with two indexes in its own transaction, a read by
// rowid, an empty transaction. A getppid() call marks the start of each phase for strace:
//   strace -e trace=pwrite64,pread64,getppid ./sqlcipher-commit-cost key 100000 2000
// (WAL frames = the 24-byte pwrite64s between two getppid lines).
// Build: cc -O2 -o sqlcipher-commit-cost Benchmarks/sqlcipher/sqlcipher-commit-cost.c -ldl
// usage: sqlcipher-commit-cost MODE [ROWS [OPS]]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

static int (*p_open)(const char *, sqlite3 **);
static int (*p_exec)(sqlite3 *, const char *, void *, void *, char **);
static int (*p_prepare)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
static int (*p_step)(sqlite3_stmt *);
static int (*p_reset)(sqlite3_stmt *);
static int (*p_bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
static int (*p_bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
static sqlite3_int64 (*p_col_int64)(sqlite3_stmt *, int);
static int (*p_key)(sqlite3 *, const void *, int);
static const char *(*p_errmsg)(sqlite3 *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static void ex(sqlite3 *db, const char *sql) {
    char *err = 0;
    if (p_exec(db, sql, 0, 0, &err)) { fprintf(stderr, "%s: %s\n", sql, err); exit(1); }
}
static sqlite3_stmt *prep(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s;
    if (p_prepare(db, sql, -1, &s, 0)) { fprintf(stderr, "%s: %s\n", sql, p_errmsg(db)); exit(1); }
    return s;
}
static void run(sqlite3_stmt *s) { while (p_step(s) == SQLITE_ROW) {} p_reset(s); }
static double median(double *v, int n) { qsort(v, n, sizeof *v, cmp); return v[n / 2]; }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "plain";
    int rows = argc > 2 ? atoi(argv[2]) : 100000, ops = argc > 3 ? atoi(argv[3]) : 2000;
    int plain = !strcmp(mode, "plain");
    void *h = plain ? dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL)
                    : dlopen("libsqlcipher.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    if (strcmp(mode, "plain") && strcmp(mode, "nokey") && strcmp(mode, "key") && strcmp(mode, "nohmac")) {
        fprintf(stderr, "usage: %s plain|nokey|key|nohmac [rows [ops]]\n", argv[0]);
        return 2;
    }
#define L(v, n) *(void **)&v = dlsym(h, n)
    L(p_open, "sqlite3_open"); L(p_exec, "sqlite3_exec"); L(p_prepare, "sqlite3_prepare_v2"); L(p_step, "sqlite3_step");
    L(p_reset, "sqlite3_reset"); L(p_bind_int64, "sqlite3_bind_int64"); L(p_bind_text, "sqlite3_bind_text");
    L(p_col_int64, "sqlite3_column_int64"); L(p_key, "sqlite3_key"); L(p_errmsg, "sqlite3_errmsg");
    char path[256];
    snprintf(path, sizeof path, "/tmp/sqlcipher-commit-cost-%s-%d.db", mode, getpid());
    sqlite3 *db;
    if (p_open(path, &db)) return 1;
    if (!plain && strcmp(mode, "nokey")) {
        unsigned char k[32];
        for (int i = 0; i < 32; i++) k[i] = (unsigned char)(i * 7 + 1);
        char hex[100] = "x'";
        for (int i = 0; i < 32; i++) sprintf(hex + 2 + 2 * i, "%02x", k[i]);
        strcat(hex, "'");
        p_key(db, hex, (int)strlen(hex));
        ex(db, "PRAGMA cipher_page_size = 4096");
        if (!strcmp(mode, "nohmac")) ex(db, "PRAGMA cipher_use_hmac = OFF");
    }
    ex(db, "PRAGMA page_size = 4096");
    ex(db, "PRAGMA cache_size = -32768");
    ex(db, "PRAGMA journal_mode = WAL");
    ex(db, "PRAGMA synchronous = NORMAL");
    ex(db, "CREATE TABLE item (id TEXT PRIMARY KEY NOT NULL, text TEXT, priority INTEGER, updatedAt REAL, complete INTEGER)");
    ex(db, "CREATE INDEX item_p ON item(priority)");
    ex(db, "CREATE INDEX item_u ON item(updatedAt)");
    ex(db, "CREATE TABLE config (id TEXT PRIMARY KEY NOT NULL, value TEXT)");
    ex(db, "INSERT INTO config VALUES ('token', 'x')");
    sqlite3_stmt *ins = prep(db, "INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)");
    char id[64], text[128];
    srand(42);
    ex(db, "BEGIN");
    for (int i = 0; i < rows; i++) {
        snprintf(id, sizeof id, "%08x-%04x-item", rand(), i);
        snprintf(text, sizeof text, "some text of a todo item #%d# with words", i % 1000);
        p_bind_text(ins, 1, id, -1, SQLITE_TRANSIENT);
        p_bind_text(ins, 2, text, -1, SQLITE_TRANSIENT);
        p_bind_int64(ins, 3, i % 10);
        p_bind_int64(ins, 4, rand());
        p_bind_int64(ins, 5, i & 1);
        run(ins);
        if (i % 500 == 499) { ex(db, "COMMIT"); ex(db, "BEGIN"); }
    }
    ex(db, "COMMIT");
    double *t = malloc(sizeof(double) * ops);
    getppid();
    // 1. token: one-row value update in its own transaction (1 page), then read it back.
    sqlite3_stmt *up = prep(db, "UPDATE config SET value = ?1 WHERE id = 'token'");
    sqlite3_stmt *get = prep(db, "SELECT length(value) FROM config WHERE id = 'token'");
    sqlite3_stmt *begin = prep(db, "BEGIN IMMEDIATE"), *commit = prep(db, "COMMIT");
    for (int i = 0; i < ops; i++) {
        snprintf(text, sizeof text, "token-%d", i);
        double a = now();
        run(begin);
        p_bind_text(up, 1, text, -1, SQLITE_TRANSIENT);
        run(up);
        run(commit);
        run(get);
        t[i] = now() - a;
    }
    double token = median(t, ops);
    getppid();
    // 2. insert: one new row (table + 2 indexes + pk index) in its own transaction.
    for (int i = 0; i < ops; i++) {
        snprintf(id, sizeof id, "%08x-%04x-new", rand(), i);
        double a = now();
        run(begin);
        p_bind_text(ins, 1, id, -1, SQLITE_TRANSIENT);
        p_bind_text(ins, 2, "a new item", -1, SQLITE_TRANSIENT);
        p_bind_int64(ins, 3, i % 10);
        p_bind_int64(ins, 4, rand());
        p_bind_int64(ins, 5, 0);
        run(ins);
        run(commit);
        t[i] = now() - a;
    }
    double insert = median(t, ops);
    getppid();
    // 3. read by rowid (random).
    sqlite3_stmt *rd = prep(db, "SELECT id, text, priority, updatedAt, complete FROM item WHERE rowid = ?1");
    for (int i = 0; i < ops * 10; i++) {
        double a = now();
        p_bind_int64(rd, 1, 1 + rand() % rows);
        run(rd);
        if (i < ops) t[i] = now() - a; else t[i % ops] = now() - a;
    }
    double readid = median(t, ops);
    getppid();
    // 4. an empty transaction (BEGIN IMMEDIATE; COMMIT): the fixed cost of a commit that writes nothing.
    for (int i = 0; i < ops; i++) {
        double a = now();
        run(begin);
        run(commit);
        t[i] = now() - a;
    }
    double empty = median(t, ops);
    printf("%-7s token %.2f us  insert %.2f us  read %.2f us  empty-tx %.2f us\n", mode, token, insert, readid, empty);
    char side[300];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return 0;
}
