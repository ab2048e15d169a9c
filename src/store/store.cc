#include "store/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <array>
#include <nlohmann/json.hpp>

#include "store/migrations.h"

namespace tessera {
namespace {

constexpr std::array<std::string_view, 7> kStateNames = {
    "pending", "running", "succeeded", "failed", "cancelled", "preempted", "timeout"};

void bind_optional_time(Statement& s, int i, double t) {
  if (t < 0) {
    s.bind_null(i);
  } else {
    s.bind(i, t);
  }
}

// The fields a job's transitions change, as parameters ?2..?12 of both the insert and the
// update statement (so the two cannot disagree on them): the spec too, which `tessera update`
// changes.
void bind_state(Statement& s, const JobRow& row) {
  s.bind(2, to_string(row.state));
  bind_optional_time(s, 3, row.started_at);
  bind_optional_time(s, 4, row.finished_at);
  s.bind(5, int64_t{row.attempts}).bind(6, int64_t{row.preemptions});
  if (row.exit_code) {
    s.bind(7, int64_t{*row.exit_code});
  } else {
    s.bind_null(7);
  }
  s.bind(8, row.message).bind(9, row.allocation).bind(10, row.processes);
  s.bind(11, int64_t{row.held ? 1 : 0}).bind(12, to_json(row.spec).dump());
  s.bind(20, row.power_limit_w);
}

double optional_time(const Statement& s, int col) {
  return s.is_null(col) ? -1 : s.real(col);
}

}  // namespace

std::string_view to_string(JobState s) {
  return kStateNames[static_cast<size_t>(s)];
}

bool parse_job_state(std::string_view s, JobState& out) {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == s) {
      out = static_cast<JobState>(i);
      return true;
    }
  }
  return false;
}

std::vector<std::string> job_state_list() {
  return std::vector<std::string>(kStateNames.begin(), kStateNames.end());
}

std::string job_state_names() {
  std::string out;
  for (const std::string_view n : kStateNames) {
    out += std::string(out.empty() ? "" : ", ") + std::string(n);
  }
  return out;
}

bool parse_job_states(std::string_view list, std::vector<JobState>& out, std::string& bad) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view one = list.substr(start, end - start);
    JobState s;
    if (!parse_job_state(one, s)) {
      bad = std::string(one);
      return false;
    }
    out.push_back(s);
    start = end + 1;
  }
  return true;
}

Store::Store(const std::string& path, Options opt) : path_(path) {
  const std::string lock_path = path + ".lock";
  // O_CLOEXEC: the jobs the server starts must not inherit (and so keep) the lock.
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    throw StoreError(path + ": cannot open the lock file " + lock_path + ": " +
                     std::strerror(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(lock_fd_, buf, sizeof buf - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK) {
      std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      throw StoreError(path + ": the database is in use by another process" +
                       (holder.empty() ? std::string() : " (pid " + holder + ")") +
                       "; one database takes one server (lock " + lock_path + ")");
    }
    throw StoreError(path + ": cannot lock " + lock_path + ": " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 ||
      ::pwrite(lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The pid is for the message above only; the lock itself is held.
  }
  try {
    db_ = std::make_unique<Db>(path);
    db_->exec("PRAGMA journal_mode=WAL");
    // The database holds tenants' job specs (their environments: secrets) and token hashes:
    // its owner's alone, also when an older server created it readable by others.
    for (const std::string& f : {path, path + "-wal", path + "-shm", lock_path}) {
      ::chmod(f.c_str(), S_IRUSR | S_IWUSR);
    }
    db_->exec(opt.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    db_->exec("PRAGMA foreign_keys=ON");
    migrate(*db_);
    insert_job_.emplace(db_->prepare(
        "INSERT INTO jobs (state, started_at, finished_at, attempts, preemptions, exit_code, "
        "message, allocation, processes, held, spec, tenant, name, submitted_at, "
        "idempotency_key, array_id, array_index, classified, power_limit_w, submitted_by) "
        "VALUES (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
        "?19, ?20, ?21)"));
    update_job_.emplace(db_->prepare(
        "UPDATE jobs SET state = ?2, started_at = ?3, finished_at = ?4, attempts = ?5, "
        "preemptions = ?6, exit_code = ?7, message = ?8, allocation = ?9, processes = ?10, "
        "held = ?11, spec = ?12, power_limit_w = ?20 WHERE id = ?1"));
    insert_audit_.emplace(
        db_->prepare("INSERT INTO audit_log (at, actor, method, path, status, target) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    insert_run_.emplace(db_->prepare(
        "INSERT OR IGNORE INTO job_runs (job_id, attempt, tenant, queue, started_at, ended_at, "
        "outcome, gpu_milli, cpu_milli, mem_mib, preempted_by, preempted_by_tenant, gpu_watts, "
        "submitted_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
    // Not when the job's last event says the same: a server that restarts (and so forgets what
    // it recorded) or comes back to where it was would otherwise repeat it.
    insert_event_.emplace(db_->prepare(
        "INSERT INTO job_events (job_id, at, type, message) SELECT ?1, ?2, ?3, ?4 "
        "WHERE NOT EXISTS (SELECT 1 FROM (SELECT type, message FROM job_events WHERE job_id = ?1 "
        "ORDER BY id DESC LIMIT 1) WHERE type = ?3 AND message = ?4)"));
  } catch (...) {
    ::close(lock_fd_);  // the destructor does not run for a half-built Store
    throw;
  }
}

std::string Store::database_id() {
  const std::optional<std::string> id = setting("database_id");
  if (!id) throw StoreError(path_ + ": no database_id (schema version 3 writes it)");
  return *id;
}

Store::~Store() {
  insert_job_.reset();
  update_job_.reset();
  insert_audit_.reset();
  insert_run_.reset();
  insert_event_.reset();
  db_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

int Store::schema_version() {
  std::lock_guard lock(mu_);
  return tessera::schema_version(*db_);
}

void Store::write_audit(const AuditEntry& e) {
  Statement& s = *insert_audit_;
  s.reset();
  s.bind(1, e.at).bind(2, e.actor).bind(3, e.method).bind(4, e.path);
  s.bind(5, int64_t{e.status}).bind(6, e.target);
  s.run();
}

int64_t Store::insert_job(JobRow& row, const AuditEntry* audit, std::span<const JobEvent> events) {
  return insert_jobs({&row, 1}, audit, events);
}

int64_t Store::insert_jobs(std::span<JobRow> rows, const AuditEntry* audit,
                           std::span<const JobEvent> events) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  int64_t first = 0;
  for (JobRow& row : rows) {
    Statement& s = *insert_job_;
    s.reset();
    bind_state(s, row);
    s.bind(13, row.tenant).bind(14, row.spec.name).bind(15, row.submitted_at);
    if (row.idempotency_key.empty()) {
      s.bind_null(16);
    } else {
      s.bind(16, row.idempotency_key);
    }
    // The first task of a new array is its own array: its id is known only once inserted.
    const bool new_array = row.array_id == kNewArray;
    s.bind(17, new_array ? first : row.array_id).bind(18, int64_t{row.array_index});
    s.bind(19, row.classified).bind(21, row.user);
    s.run();
    row.id = db_->last_insert_rowid();
    if (first == 0) first = row.id;
    if (new_array) {
      row.array_id = first;
      if (row.id == first) {
        Statement fix = db_->prepare("UPDATE jobs SET array_id = ?1 WHERE id = ?1");
        fix.bind(1, first);
        fix.run();
      }
    }
    for (const JobEvent& e : events) write_event(e, e.job_id == 0 ? row.id : e.job_id);
  }
  if (audit != nullptr) {
    AuditEntry e = *audit;
    if (e.target.empty()) {
      e.target = "job " + std::to_string(first);
      if (rows.size() > 1) e.target += " (array of " + std::to_string(rows.size()) + " tasks)";
    }
    write_audit(e);
  }
  tx.commit();
  return first;
}

void Store::write_update(const JobRow& row) {
  Statement& s = *update_job_;
  s.reset();
  s.bind(1, row.id);
  bind_state(s, row);
  s.run();
}

void Store::update_jobs(std::span<const JobRow* const> rows, const AuditEntry* audit,
                        std::span<const RunRecord> ended_runs, std::span<const JobEvent> events) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  for (const JobRow* r : rows) write_update(*r);
  for (const RunRecord& r : ended_runs) write_run(r);
  for (const JobEvent& e : events) write_event(e, e.job_id);
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
}

void Store::write_run(const RunRecord& r) {
  Statement& s = *insert_run_;
  s.reset();
  nlohmann::json gpus = nlohmann::json::object();
  for (const auto& [type, milli] : r.gpu_milli) gpus[type] = milli;
  s.bind(1, r.job).bind(2, int64_t{r.attempt}).bind(3, r.tenant).bind(4, r.queue);
  s.bind(5, r.started).bind(6, r.ended).bind(7, r.outcome).bind(8, gpus.dump());
  s.bind(9, r.cpu_milli).bind(10, r.mem_mib);
  if (r.preempted_by >= 0) {
    s.bind(11, r.preempted_by);
  } else {
    s.bind_null(11);
  }
  s.bind(12, r.preempted_by_tenant);
  s.bind(13, r.gpu_watts).bind(14, r.user);
  s.run();
}

std::vector<RunRecord> Store::runs(double since, double until) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(
      "SELECT job_id, attempt, tenant, queue, started_at, ended_at, outcome, gpu_milli, "
      "cpu_milli, mem_mib, preempted_by, preempted_by_tenant, gpu_watts, submitted_by "
      "FROM job_runs WHERE ended_at >= ?1 AND started_at < ?2 ORDER BY ended_at, job_id, attempt");
  s.bind(1, since).bind(2, until);
  std::vector<RunRecord> out;
  while (s.step()) {
    RunRecord r;
    r.job = s.int64(0);
    r.attempt = static_cast<int32_t>(s.int64(1));
    r.tenant = s.text(2);
    r.queue = s.text(3);
    r.started = s.real(4);
    r.ended = s.real(5);
    r.outcome = s.text(6);
    try {
      const nlohmann::json gpus = nlohmann::json::parse(s.text(7));
      for (const auto& g : gpus.items()) r.gpu_milli[g.key()] = g.value().get<int64_t>();
    } catch (const std::exception& e) {
      throw StoreError(path_ + ": run " + std::to_string(r.job) + "/" + std::to_string(r.attempt) +
                       ": stored GPUs unreadable: " + e.what());
    }
    r.cpu_milli = s.int64(8);
    r.mem_mib = s.int64(9);
    r.preempted_by = s.is_null(10) ? -1 : s.int64(10);
    r.preempted_by_tenant = s.text(11);
    r.gpu_watts = s.real(12);
    r.user = s.text(13);
    out.push_back(std::move(r));
  }
  return out;
}

std::map<std::string, double> Store::run_energy_joules() {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(
      "SELECT tenant, SUM(gpu_watts * MAX(ended_at - started_at, 0)) FROM job_runs "
      "WHERE gpu_watts > 0 GROUP BY tenant");
  std::map<std::string, double> out;
  while (s.step()) out[s.text(0)] = s.real(1);
  return out;
}

void Store::update_job(const JobRow& row, const AuditEntry* audit,
                       std::span<const JobEvent> events) {
  const JobRow* p = &row;
  update_jobs(std::span<const JobRow* const>(&p, 1), audit, {}, events);
}

void Store::write_event(const JobEvent& e, int64_t job_id) {
  Statement& s = *insert_event_;
  s.reset();
  s.bind(1, job_id).bind(2, e.at).bind(3, e.type).bind(4, e.message);
  s.run();
}

std::vector<JobEvent> Store::job_events(int64_t job_id) {
  std::lock_guard lock(mu_);
  Statement s =
      db_->prepare("SELECT id, at, type, message FROM job_events WHERE job_id = ?1 ORDER BY id");
  s.bind(1, job_id);
  std::vector<JobEvent> out;
  while (s.step()) {
    out.push_back(JobEvent{s.int64(0), job_id, s.real(1), s.text(2), s.text(3)});
  }
  return out;
}

namespace {

constexpr const char* kRowColumns =
    "id, tenant, spec, state, submitted_at, started_at, finished_at, attempts, preemptions, "
    "exit_code, message, allocation, processes, idempotency_key, held, array_id, array_index, "
    "classified, power_limit_w, submitted_by";

}  // namespace

JobRow Store::read_row(const Statement& s) const {
  JobRow r;
  r.id = s.int64(0);
  r.tenant = s.text(1);
  try {
    r.spec = job_request_from_json(nlohmann::json::parse(s.text(2)));
  } catch (const std::exception& e) {
    throw StoreError(path_ + ": job " + std::to_string(r.id) +
                     ": stored spec unreadable: " + e.what());
  }
  const std::string state = s.text(3);
  if (!parse_job_state(state, r.state)) {
    throw StoreError(path_ + ": job " + std::to_string(r.id) + ": unknown state '" + state + "'");
  }
  r.submitted_at = s.real(4);
  r.started_at = optional_time(s, 5);
  r.finished_at = optional_time(s, 6);
  r.attempts = static_cast<int32_t>(s.int64(7));
  r.preemptions = static_cast<int32_t>(s.int64(8));
  if (!s.is_null(9)) r.exit_code = static_cast<int32_t>(s.int64(9));
  r.message = s.text(10);
  r.allocation = s.text(11);
  r.processes = s.text(12);
  r.idempotency_key = s.text(13);
  r.held = s.int64(14) != 0;
  r.array_id = s.int64(15);
  r.array_index = static_cast<int32_t>(s.int64(16));
  r.classified = s.text(17);
  r.power_limit_w = s.real(18);
  r.user = s.text(19);
  return r;
}

std::vector<JobRow> Store::load_jobs() {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(std::string("SELECT ") + kRowColumns +
                             " FROM jobs WHERE evicted = 0 ORDER BY id");
  std::vector<JobRow> out;
  while (s.step()) out.push_back(read_row(s));
  return out;
}

void Store::mark_evicted(std::span<const int64_t> ids) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare("UPDATE jobs SET evicted = 1 WHERE id = ?1");
  for (const int64_t id : ids) {
    s.reset();
    s.bind(1, id);
    s.run();
  }
  tx.commit();
}

std::vector<JobRow> Store::evicted_jobs(const EvictedQuery& q) {
  std::lock_guard lock(mu_);
  // Each filter is a condition a partial index serves: the one on (state, id) for one state,
  // (tenant, id) for a tenant, (array_id, id) for an array, else (id).
  std::string sql = std::string("SELECT ") + kRowColumns + " FROM jobs WHERE evicted = 1";
  if (!q.states.empty()) {
    sql += " AND state IN (";
    for (size_t k = 0; k < q.states.size(); ++k) sql += k == 0 ? "?" : ", ?";
    sql += ")";
  }
  if (!q.tenant.empty()) sql += " AND tenant = ?";
  if (!q.tenants_in.empty()) {
    sql += " AND tenant IN (";
    for (size_t k = 0; k < q.tenants_in.size(); ++k) sql += k == 0 ? "?" : ", ?";
    sql += ")";
  }
  if (q.array_id != 0) sql += " AND array_id = ?";
  if (q.newest_first) {
    if (q.before > 0) sql += " AND id < ?";
    sql += " ORDER BY id DESC";
  } else {
    sql += " AND id > ? ORDER BY id";
  }
  sql += " LIMIT ?";
  Statement s = db_->prepare(sql);
  int n = 0;
  for (const JobState st : q.states) s.bind(++n, std::string(to_string(st)));
  if (!q.tenant.empty()) s.bind(++n, q.tenant);
  for (const std::string& t : q.tenants_in) s.bind(++n, t);
  if (q.array_id != 0) s.bind(++n, q.array_id);
  if (q.newest_first) {
    if (q.before > 0) s.bind(++n, q.before);
  } else {
    s.bind(++n, q.after);
  }
  s.bind(++n, static_cast<int64_t>(q.limit));
  std::vector<JobRow> out;
  while (s.step()) out.push_back(read_row(s));
  return out;
}

std::vector<JobRecord> Store::evicted_records(double since) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(
      "SELECT id, tenant, state, submitted_at, finished_at, submitted_by FROM jobs "
      "WHERE evicted = 1 AND finished_at >= ?1 UNION ALL "
      "SELECT a.id, a.tenant, a.state, a.submitted_at, a.finished_at, "
      "COALESCE((SELECT r.submitted_by FROM job_runs r WHERE r.job_id = a.id LIMIT 1), '') "
      "FROM archived_jobs a WHERE a.finished_at >= ?1");
  s.bind(1, since);
  std::vector<JobRecord> out;
  while (s.step()) {
    out.push_back(JobRecord{s.int64(0), s.text(1), "", s.text(2), s.real(3), s.real(4), s.text(5)});
  }
  return out;
}

std::optional<JobRow> Store::job(int64_t id) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(std::string("SELECT ") + kRowColumns + " FROM jobs WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_row(s);
}

std::optional<JobRow> Store::job_by_key(const std::string& tenant, const std::string& key) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(std::string("SELECT ") + kRowColumns +
                             " FROM jobs WHERE tenant = ?1 AND idempotency_key = ?2");
  s.bind(1, tenant).bind(2, key);
  if (!s.step()) return std::nullopt;
  return read_row(s);
}

ArchiveResult Store::archive(double finished_before, const std::string& dir, size_t max_jobs) {
  std::lock_guard lock(mu_);
  Statement pick = db_->prepare(std::string("SELECT ") + kRowColumns +
                                " FROM jobs WHERE evicted = 1 AND finished_at < ?1 "
                                "ORDER BY finished_at LIMIT ?2");
  pick.bind(1, finished_before).bind(2, static_cast<int64_t>(max_jobs));
  std::vector<JobRow> rows;
  while (pick.step()) rows.push_back(read_row(pick));
  ArchiveResult out;
  if (rows.empty()) return out;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw StoreError(dir + ": cannot create the archive directory: " + ec.message());
  // A new file per step, named by time and the first job, so steps never overwrite each other.
  const std::string file = dir + "/jobs-" + std::to_string(static_cast<int64_t>(::time(nullptr))) +
                           "-" + std::to_string(rows.front().id) + ".jsonl";
  std::string text;
  Statement events =
      db_->prepare("SELECT at, type, message FROM job_events WHERE job_id = ?1 ORDER BY id");
  for (const JobRow& r : rows) {
    nlohmann::json line = {{"id", r.id},
                           {"tenant", r.tenant},
                           {"state", to_string(r.state)},
                           {"spec", to_json(r.spec)},
                           {"submitted_at", r.submitted_at},
                           {"started_at", r.started_at},
                           {"finished_at", r.finished_at},
                           {"attempts", r.attempts},
                           {"preemptions", r.preemptions},
                           {"message", r.message}};
    if (r.exit_code) line["exit_code"] = *r.exit_code;
    if (!r.classified.empty()) line["classified"] = r.classified;
    if (r.array_id != 0) {
      line["array_id"] = r.array_id;
      line["array_index"] = r.array_index;
    }
    nlohmann::json history = nlohmann::json::array();
    events.reset();
    events.bind(1, r.id);
    while (events.step()) {
      history.push_back(
          {{"at", events.real(0)}, {"type", events.text(1)}, {"message", events.text(2)}});
    }
    line["events"] = std::move(history);
    text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw StoreError(file + ": cannot create: " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(file.c_str());
      throw StoreError(file + ": cannot write: " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(file.c_str());
    throw StoreError(file + ": cannot sync: " + std::strerror(err));
  }
  ::close(fd);
  Transaction tx(*db_);
  Statement del_job = db_->prepare("DELETE FROM jobs WHERE id = ?1");
  Statement del_events = db_->prepare("DELETE FROM job_events WHERE job_id = ?1");
  Statement keep = db_->prepare(
      "INSERT OR REPLACE INTO archived_jobs (id, tenant, state, submitted_at, finished_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5)");
  for (const JobRow& r : rows) {
    keep.reset();
    keep.bind(1, r.id).bind(2, r.tenant).bind(3, std::string(to_string(r.state)));
    keep.bind(4, r.submitted_at).bind(5, r.finished_at);
    keep.run();
    del_job.reset();
    del_job.bind(1, r.id);
    del_job.run();
    del_events.reset();
    del_events.bind(1, r.id);
    del_events.run();
  }
  tx.commit();
  out.jobs = rows.size();
  out.files.push_back(file);
  return out;
}

void Store::add_audit(const AuditEntry& e) {
  std::lock_guard lock(mu_);
  write_audit(e);
}

std::vector<AuditEntry> Store::audit_log(size_t limit, const AuditFilter& f) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(
      "SELECT id, at, actor, method, path, status, target FROM audit_log "
      "WHERE (?2 = '' OR actor = ?2) AND (?3 = '' OR target = ?3) AND (?4 < 0 OR at >= ?4) "
      "AND (?5 < 0 OR at < ?5) AND (?6 = 0 OR status >= 400) "
      "ORDER BY id DESC LIMIT ?1");
  s.bind(1, static_cast<int64_t>(limit));
  s.bind(2, f.actor).bind(3, f.target).bind(4, f.since).bind(5, f.until);
  s.bind(6, int64_t{f.refused_only ? 1 : 0});
  std::vector<AuditEntry> out;
  while (s.step()) {
    out.push_back(AuditEntry{s.int64(0), s.real(1), s.text(2), s.text(3), s.text(4),
                             static_cast<int32_t>(s.int64(5)), s.text(6)});
  }
  return out;
}

bool Store::add_tenant(const TenantRow& t, const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare(
      "INSERT INTO tenants (name, token_sha256, created_at) VALUES (?1, ?2, ?3) "
      "ON CONFLICT(name) DO NOTHING");
  s.bind(1, t.name).bind(2, t.token_sha256).bind(3, t.created_at);
  s.run();
  if (db_->changes() == 0) return false;
  Statement undelete = db_->prepare("DELETE FROM deleted_tenants WHERE name = ?1");
  undelete.bind(1, t.name);
  undelete.run();
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
  return true;
}

void Store::delete_tenant(const std::string& name, double at, const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement token = db_->prepare("DELETE FROM tenants WHERE name = ?1");
  token.bind(1, name);
  token.run();
  Statement users = db_->prepare("DELETE FROM users WHERE tenant = ?1");
  users.bind(1, name);
  users.run();
  Statement mark = db_->prepare(
      "INSERT INTO deleted_tenants (name, deleted_at) VALUES (?1, ?2) "
      "ON CONFLICT(name) DO UPDATE SET deleted_at = excluded.deleted_at");
  mark.bind(1, name).bind(2, at);
  mark.run();
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
}

std::vector<std::string> Store::deleted_tenants() {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare("SELECT name FROM deleted_tenants ORDER BY name");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

bool Store::set_tenant_token(const std::string& name, const std::string& token_sha256,
                             const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare("UPDATE tenants SET token_sha256 = ?2 WHERE name = ?1");
  s.bind(1, name).bind(2, token_sha256);
  s.run();
  if (db_->changes() == 0) return false;
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
  return true;
}

bool Store::remove_tenant_token(const std::string& name, const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare("DELETE FROM tenants WHERE name = ?1");
  s.bind(1, name);
  s.run();
  if (db_->changes() == 0) return false;
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
  return true;
}

std::vector<TenantRow> Store::tenants() {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare("SELECT name, token_sha256, created_at FROM tenants ORDER BY name");
  std::vector<TenantRow> out;
  while (s.step()) out.push_back(TenantRow{s.text(0), s.text(1), s.real(2)});
  return out;
}

namespace {

// One sample into `table` (history or history_hourly), and those before `drop_before` out, in
// one transaction.
void append_sample(Db& db, const char* table, double t, std::string_view sample,
                   double drop_before) {
  Transaction tx(db);
  Statement add =
      db.prepare(std::string("INSERT OR REPLACE INTO ") + table + " (t, sample) VALUES (?1, ?2)");
  add.bind(1, t).bind(2, sample);
  add.run();
  Statement drop = db.prepare(std::string("DELETE FROM ") + table + " WHERE t < ?1");
  drop.bind(1, drop_before);
  drop.run();
  tx.commit();
}

}  // namespace

void Store::append_history(double t, std::string_view sample, double drop_before) {
  std::lock_guard lock(mu_);
  append_sample(*db_, "history", t, sample, drop_before);
}

void Store::append_history_hourly(double t, std::string_view sample, double drop_before) {
  std::lock_guard lock(mu_);
  append_sample(*db_, "history_hourly", t, sample, drop_before);
}

std::vector<std::pair<double, std::string>> Store::history(double since) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare("SELECT t, sample FROM history WHERE t >= ?1 ORDER BY t");
  s.bind(1, since);
  std::vector<std::pair<double, std::string>> out;
  while (s.step()) out.emplace_back(s.real(0), s.text(1));
  return out;
}

std::vector<std::pair<double, std::string>> Store::history_hourly(double since, double until) {
  std::lock_guard lock(mu_);
  Statement s =
      db_->prepare("SELECT t, sample FROM history_hourly WHERE t >= ?1 AND t <= ?2 ORDER BY t");
  s.bind(1, since).bind(2, until);
  std::vector<std::pair<double, std::string>> out;
  while (s.step()) out.emplace_back(s.real(0), s.text(1));
  return out;
}

std::optional<std::string> Store::setting(std::string_view key) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare("SELECT value FROM settings WHERE key = ?1");
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

void Store::set_setting(std::string_view key, std::string_view value, const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare(
      "INSERT INTO settings (key, value) VALUES (?1, ?2) "
      "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  s.bind(1, key).bind(2, value);
  s.run();
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
}

}  // namespace tessera
