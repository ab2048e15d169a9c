#include "store/store.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "service_test_util.h"
#include "store/migrations.h"

namespace tessera {
namespace {

using testing::TempDir;

JobRow sample(const std::string& name) {
  JobRow r;
  r.tenant = "team-a";
  r.spec.name = name;
  r.spec.min_members = 2;
  r.spec.max_members = 2;
  r.spec.command = {"sh", "-c", "echo hi"};
  r.submitted_at = 1000;
  return r;
}

TEST(Store, JobsRoundTripThroughTheDatabase) {
  TempDir dir("store");
  const std::string db = dir.file("t.db");
  JobRow a = sample("a");
  {
    Store s(db);
    EXPECT_EQ(s.schema_version(), latest_schema_version());
    s.insert_job(a);
    JobRow b = sample("b");
    b.idempotency_key = "k1";
    s.insert_job(b);
    EXPECT_GT(b.id, a.id);
    a.state = JobState::kFailed;
    a.started_at = 1001;
    a.finished_at = 1002;
    a.attempts = 1;
    a.exit_code = 3;
    a.message = "rank 1 exited with code 3";
    a.allocation = R"({"x":1})";
    s.update_job(a);
  }
  Store s(db);  // reopened: what was committed is there
  const std::vector<JobRow> rows = s.load_jobs();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].spec, a.spec);
  EXPECT_EQ(rows[0].state, JobState::kFailed);
  EXPECT_EQ(rows[0].exit_code, 3);
  EXPECT_EQ(rows[0].message, a.message);
  EXPECT_EQ(rows[0].allocation, a.allocation);
  EXPECT_DOUBLE_EQ(rows[0].finished_at, 1002);
  EXPECT_EQ(rows[1].state, JobState::kPending);
  EXPECT_FALSE(rows[1].exit_code.has_value());
  EXPECT_DOUBLE_EQ(rows[1].started_at, -1);
  EXPECT_EQ(rows[1].idempotency_key, "k1");
}

TEST(Store, AnIdempotencyKeyIsUniquePerTenantAndAFailedInsertWritesNothing) {
  TempDir dir("store");
  Store s(dir.file("t.db"));
  JobRow a = sample("a");
  a.idempotency_key = "same";
  s.insert_job(a);
  JobRow other_tenant = sample("b");
  other_tenant.tenant = "team-b";
  other_tenant.idempotency_key = "same";
  EXPECT_NO_THROW(s.insert_job(other_tenant));
  JobRow dup = sample("c");
  dup.idempotency_key = "same";
  const AuditEntry audit{0, 5, "team-a", "POST", "/v1/jobs", 201, ""};
  EXPECT_THROW(s.insert_job(dup, &audit), StoreError);
  // The transaction rolled back whole: no job c, and no audit entry for it.
  EXPECT_EQ(s.load_jobs().size(), 2u);
  EXPECT_TRUE(s.audit_log(10).empty());
}

TEST(Store, AuditEntriesCommitWithTheirChangeNewestFirst) {
  TempDir dir("store");
  Store s(dir.file("t.db"));
  JobRow a = sample("a");
  const AuditEntry submit{0, 1, "team-a", "POST", "/v1/jobs", 201, ""};
  s.insert_job(a, &submit);
  const AuditEntry refused{0, 2, "team-b", "POST", "/v1/jobs/1/cancel", 403, ""};
  s.add_audit(refused);
  const auto log = s.audit_log(10);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].actor, "team-b");
  EXPECT_EQ(log[0].status, 403);
  EXPECT_EQ(log[1].target, "job " + std::to_string(a.id));
  EXPECT_EQ(s.audit_log(1).size(), 1u);
}

TEST(Store, TenantsAreUniqueAndKeepOnlyTheTokenHash) {
  TempDir dir("store");
  Store s(dir.file("t.db"));
  EXPECT_TRUE(s.add_tenant(TenantRow{"team-a", std::string(64, 'a'), 1}));
  EXPECT_FALSE(s.add_tenant(TenantRow{"team-a", std::string(64, 'b'), 2}));
  ASSERT_EQ(s.tenants().size(), 1u);
  EXPECT_EQ(s.tenants()[0].token_sha256, std::string(64, 'a'));
  EXPECT_FALSE(s.setting("admin").has_value());
  s.set_setting("admin", "x");
  s.set_setting("admin", "y");
  EXPECT_EQ(s.setting("admin"), "y");
}

TEST(Store, MigratesAVersionOneDatabaseAndRefusesANewerOne) {
  TempDir dir("store");
  const std::string path = dir.file("old.db");
  {
    // A database as the first release wrote it: schema version 1, no idempotency keys.
    Db db(path);
    db.exec(R"sql(
CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL,
  name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL, submitted_at REAL NOT NULL,
  started_at REAL, finished_at REAL, attempts INTEGER NOT NULL DEFAULT 0,
  preemptions INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, message TEXT NOT NULL DEFAULT '',
  allocation TEXT NOT NULL DEFAULT '', processes TEXT NOT NULL DEFAULT '');
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE tenants (name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE,
  created_at REAL NOT NULL);
CREATE TABLE audit_log (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
  actor TEXT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL, status INTEGER NOT NULL,
  target TEXT NOT NULL DEFAULT '');
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO jobs (tenant, name, spec, state, submitted_at)
  VALUES ('team-a', 'old', '{"name":"old","command":["true"]}', 'succeeded', 5);
PRAGMA user_version = 1;
)sql");
  }
  std::string id;
  {
    Store s(path);
    EXPECT_EQ(s.schema_version(), latest_schema_version());
    // An upgraded database gets its identity too, and keeps it.
    id = s.database_id();
    EXPECT_EQ(id.size(), 32u);
    const auto rows = s.load_jobs();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].spec.name, "old");
    EXPECT_EQ(rows[0].state, JobState::kSucceeded);
    EXPECT_TRUE(rows[0].idempotency_key.empty());
  }
  EXPECT_EQ(Store(path).database_id(), id);
  EXPECT_NE(Store(dir.file("other.db")).database_id(), id);
  {
    Db db(path);
    db.exec("PRAGMA user_version = 99");
  }
  try {
    Store s(path);
    FAIL() << "opened a database newer than this build";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// Two servers on one database both ran the same jobs.
TEST(Store, OneDatabaseIsOpenedByOneStoreAtATime) {
  TempDir dir("store");
  const std::string path = dir.file("t.db");
  {
    Store first(path);
    try {
      Store second(path);
      FAIL() << "a second Store opened a database in use";
    } catch (const StoreError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("in use by another process (pid " + std::to_string(::getpid()) + ")"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(path), std::string::npos) << what;
    }
    EXPECT_EQ(first.schema_version(), latest_schema_version());  // the first is unharmed
  }
  Store again(path);  // released with the first
  EXPECT_EQ(again.schema_version(), latest_schema_version());
}

TEST(Store, AnUnopenableDatabaseNamesItsPath) {
  try {
    Store s("/nonexistent-dir/x/tessera.db");
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/tessera.db"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera
