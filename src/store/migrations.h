// The schema, as an ordered list of migrations. The database's PRAGMA user_version is the
// number of migrations applied; opening applies the rest, each in its own transaction, so a
// crash during an upgrade leaves the database at the last complete version. Migrations are
// append-only: never edit one that has shipped, add the next.
#pragma once

#include "store/sqlite_db.h"

namespace tessera {

int latest_schema_version();
// The migrations applied to `db` (its PRAGMA user_version).
int schema_version(Db& db);
// Applies the missing migrations. Throws StoreError if the database is newer than this build.
void migrate(Db& db);

}  // namespace tessera
