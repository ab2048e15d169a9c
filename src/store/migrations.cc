#include "store/migrations.h"

#include <array>
#include <string>
#include <string_view>

namespace tessera {
namespace {

constexpr std::array<std::string_view, 15> kMigrations = {
    // 1: jobs, tenants, audit log, settings.
    R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  state TEXT NOT NULL,
  submitted_at REAL NOT NULL,
  started_at REAL,
  finished_at REAL,
  attempts INTEGER NOT NULL DEFAULT 0,
  preemptions INTEGER NOT NULL DEFAULT 0,
  exit_code INTEGER,
  message TEXT NOT NULL DEFAULT '',
  allocation TEXT NOT NULL DEFAULT '',
  processes TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE tenants (
  name TEXT PRIMARY KEY,
  token_sha256 TEXT NOT NULL UNIQUE,
  created_at REAL NOT NULL
);
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at REAL NOT NULL,
  actor TEXT NOT NULL,
  method TEXT NOT NULL,
  path TEXT NOT NULL,
  status INTEGER NOT NULL,
  target TEXT NOT NULL DEFAULT ''
);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql",
    // 2: client retries of a submission find the job they created (Idempotency-Key).
    R"sql(
ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX jobs_idempotency ON jobs(tenant, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
)sql",
    // 3: a random identity, written into every job directory the database's jobs use, so that
    // a new database (an old one lost or truncated) never reuses another's directories.
    R"sql(
INSERT OR IGNORE INTO settings (key, value) VALUES ('database_id', lower(hex(randomblob(16))));
)sql",
    // 4: a pending job an operator or its owner holds back (tessera hold / release).
    R"sql(
ALTER TABLE jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
)sql",
    // 5: accounting (tessera usage): every run of every job, written when it ends, with what it
    // held (GPU milli by type as JSON), how it ended and, if preempted, for which job.
    R"sql(
CREATE TABLE job_runs (
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  tenant TEXT NOT NULL,
  queue TEXT NOT NULL,
  started_at REAL NOT NULL,
  ended_at REAL NOT NULL,
  outcome TEXT NOT NULL,
  gpu_milli TEXT NOT NULL,
  cpu_milli INTEGER NOT NULL,
  mem_mib INTEGER NOT NULL,
  preempted_by INTEGER,
  preempted_by_tenant TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, attempt)
);
CREATE INDEX job_runs_ended ON job_runs(ended_at);
)sql",
    // 6: each job's history (tessera job ID): submitted, each change of why it waits, started
    // where, preempted by whom, held, released, updated, how it ended.
    R"sql(
CREATE TABLE job_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  at REAL NOT NULL,
  type TEXT NOT NULL,
  message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job ON job_events(job_id, id);
)sql",
    // 7: tenants the admin deleted (tessera tenant delete): their finished jobs and usage stay,
    // the tenant leaves the tenant list and cannot submit until created again.
    R"sql(
CREATE TABLE deleted_tenants (name TEXT PRIMARY KEY, deleted_at REAL NOT NULL);
)sql",
    // 8: job arrays: each task is a job; array_id is its first task's id (0: not an array).
    R"sql(
ALTER TABLE jobs ADD COLUMN array_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN array_index INTEGER NOT NULL DEFAULT 0;
)sql",
    // 9: retention. A finished job past the server's retention leaves its memory (evicted = 1)
    // and is read from here; the partial indexes keep listing those pages fast however many
    // there are, and archiving finds the oldest.
    R"sql(
ALTER TABLE jobs ADD COLUMN evicted INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_evicted ON jobs(id) WHERE evicted = 1;
CREATE INDEX jobs_evicted_tenant ON jobs(tenant, id) WHERE evicted = 1;
CREATE INDEX jobs_evicted_state ON jobs(state, id) WHERE evicted = 1;
CREATE INDEX jobs_evicted_array ON jobs(array_id, id) WHERE evicted = 1;
CREATE INDEX jobs_evicted_finished ON jobs(finished_at) WHERE evicted = 1;
-- What accounting needs of an archived job (its runs stay in job_runs).
CREATE TABLE archived_jobs (
  id INTEGER PRIMARY KEY,
  tenant TEXT NOT NULL,
  state TEXT NOT NULL,
  submitted_at REAL NOT NULL,
  finished_at REAL NOT NULL
);
CREATE INDEX archived_jobs_finished ON archived_jobs(finished_at);
)sql",
    // 10: the dashboard's history, one sample (JSON) per row, pruned to the server's window.
    R"sql(
CREATE TABLE history (
  t REAL PRIMARY KEY,
  sample TEXT NOT NULL
);
)sql",
    // 11: the kind the workload classifier gave a job that named no class (serve --classify).
    R"sql(
ALTER TABLE jobs ADD COLUMN classified TEXT NOT NULL DEFAULT '';
)sql",
    // 12: energy: each run's estimated GPU draw in watts (0 for runs recorded before),
    // so that usage reports energy and the energy counters survive a restart.
    R"sql(
ALTER TABLE job_runs ADD COLUMN gpu_watts REAL NOT NULL DEFAULT 0;
)sql",
    // 13: power policies in serve: the GPU power limit a job runs at (W; 0: its GPUs'
    // default, the TDP), so that a restart keeps it.
    R"sql(
ALTER TABLE jobs ADD COLUMN power_limit_w REAL NOT NULL DEFAULT 0;
)sql",
    // 14: people inside tenants: each user has its own token (stored as its hash) and a role
    // (member: acts on its own jobs; admin: on all its tenant's, and manages its users); a
    // job and its runs record who submitted it ("" = the tenant's own token or the admin).
    R"sql(
CREATE TABLE users (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL,
  created_at REAL NOT NULL,
  PRIMARY KEY (tenant, name)
);
ALTER TABLE jobs ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
ALTER TABLE job_runs ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
)sql",
    // 15: the dashboard's long history: one sample per hour (the hour's samples averaged),
    // kept for weeks after the fine samples of `history` are pruned.
    R"sql(
CREATE TABLE history_hourly (
  t REAL PRIMARY KEY,
  sample TEXT NOT NULL
);
)sql",
};

}  // namespace

int schema_version(Db& db) {
  Statement s = db.prepare("PRAGMA user_version");
  s.step();
  return static_cast<int>(s.int64(0));
}

int latest_schema_version() {
  return static_cast<int>(kMigrations.size());
}

void migrate(Db& db) {
  const int have = schema_version(db);
  if (have > latest_schema_version()) {
    throw StoreError(db.path() + ": schema version " + std::to_string(have) +
                     " is newer than this build knows (" + std::to_string(latest_schema_version()) +
                     "); upgrade Tessera");
  }
  for (int v = have; v < latest_schema_version(); ++v) {
    Transaction tx(db);
    db.exec(kMigrations[static_cast<size_t>(v)]);
    db.exec("PRAGMA user_version = " + std::to_string(v + 1));
    tx.commit();
  }
}

}  // namespace tessera
