#ifndef CROCKSDB_SHIM_H
#define CROCKSDB_SHIM_H
// RocksDB's C API (Debian: librocksdb-dev, which also ships rocksdb.pc).
#include <rocksdb/c.h>
#endif
