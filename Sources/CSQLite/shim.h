// The system SQLite (libsqlite3-dev). Only LocalStoreSQLite imports this module; the SQL engine
// reaches SQLite through the function table `SQLiteAPI` instead, so it can also drive SQLCipher.
#include <sqlite3.h>
