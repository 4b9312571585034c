/* The system SQLite, for the engine's store. */
#ifndef TICKGATE_SQLITE_H
#define TICKGATE_SQLITE_H
#include <sqlite3.h>
#endif
