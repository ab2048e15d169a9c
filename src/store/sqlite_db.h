// A thin RAII layer over the SQLite C API: a connection, prepared statements and transactions,
// with errors as exceptions that quote SQLite's message and the database's path.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace tessera {

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based, as in SQLite.
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);  // copied (SQLITE_TRANSIENT)
  Statement& bind_null(int i);
  // Steps once: true while a row is available, false when done. Throws on error.
  bool step();
  // Steps to completion (statements that return no rows).
  void run();
  void reset();  // for re-use: resets and clears bindings

  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  bool is_null(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  // Opens (creating if needed) the database file. Throws StoreError naming the path.
  explicit Db(const std::string& path);
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  void exec(std::string_view sql);  // one or more statements, no results
  Statement prepare(std::string_view sql);
  int64_t last_insert_rowid() const;
  int64_t changes() const;  // rows changed by the last statement
  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// BEGIN IMMEDIATE on construction (takes the write lock at once, so a transaction never
// fails half-way for lack of it); ROLLBACK on destruction unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Db& db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Db& db_;
  bool done_ = false;
};

}  // namespace tessera
