#include "store/sqlite_db.h"

#include <sqlite3.h>

#include <string>

namespace tessera {
namespace {

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  const char* path = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  throw StoreError(std::string(path != nullptr && *path ? path : "database") + ": " + what + ": " +
                   (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) fail(db_, "bind");
  return *this;
}

Statement& Statement::bind(int i, double v) {
  if (sqlite3_bind_double(stmt_, i, v) != SQLITE_OK) fail(db_, "bind");
  return *this;
}

Statement& Statement::bind(int i, std::string_view v) {
  if (sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8) !=
      SQLITE_OK) {
    fail(db_, "bind");
  }
  return *this;
}

Statement& Statement::bind_null(int i) {
  if (sqlite3_bind_null(stmt_, i) != SQLITE_OK) fail(db_, "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, std::string("executing `") + sqlite3_sql(stmt_) + "`");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double Statement::real(int col) const {
  return sqlite3_column_double(stmt_, col);
}
std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}
bool Statement::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

Db::Db(const std::string& path) : path_(path) {
  const int rc =
      sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError(path + ": cannot open the database: " + msg);
  }
  // Another connection (a second server on the same file) may hold the write lock briefly.
  sqlite3_busy_timeout(db_, 5000);
}

Db::~Db() {
  sqlite3_close(db_);
}

void Db::exec(std::string_view sql) {
  const std::string s(sql);
  char* err = nullptr;
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError(path_ + ": " + msg + " (in `" + s.substr(0, 80) + "`)");
  }
}

Statement Db::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    fail(db_, "preparing `" + std::string(sql.substr(0, 80)) + "`");
  }
  return Statement(db_, stmt);
}

int64_t Db::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}
int64_t Db::changes() const {
  return sqlite3_changes64(db_);
}

Transaction::Transaction(Db& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.exec("ROLLBACK");
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failed rollback leaves SQLite's own undo
    }
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace tessera
