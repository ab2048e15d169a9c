// The users table: people inside tenants, each with a token of their own (its hash stored).
#include "store/sqlite_db.h"
#include "store/store.h"

namespace tessera {

std::string_view to_string(UserRole r) {
  return r == UserRole::kAdmin ? "admin" : "member";
}

bool parse_user_role(std::string_view s, UserRole& out) {
  if (s == "member") {
    out = UserRole::kMember;
  } else if (s == "admin") {
    out = UserRole::kAdmin;
  } else {
    return false;
  }
  return true;
}

bool Store::add_user(const UserRow& u, const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare(
      "INSERT INTO users (tenant, name, token_sha256, role, created_at) VALUES (?1, ?2, ?3, ?4, "
      "?5) ON CONFLICT(tenant, name) DO NOTHING");
  s.bind(1, u.tenant).bind(2, u.name).bind(3, u.token_sha256).bind(4, to_string(u.role));
  s.bind(5, u.created_at);
  s.run();
  if (db_->changes() == 0) return false;
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
  return true;
}

std::vector<UserRow> Store::users(const std::string& tenant) {
  std::lock_guard lock(mu_);
  Statement s = db_->prepare(
      "SELECT tenant, name, token_sha256, role, created_at FROM users "
      "WHERE ?1 = '' OR tenant = ?1 ORDER BY tenant, name");
  s.bind(1, tenant);
  std::vector<UserRow> out;
  while (s.step()) {
    UserRow u{s.text(0), s.text(1), s.text(2), UserRole::kMember, s.real(4)};
    if (!parse_user_role(s.text(3), u.role)) {
      throw StoreError(path_ + ": user " + u.name + "@" + u.tenant + ": unknown role '" +
                       s.text(3) + "'");
    }
    out.push_back(std::move(u));
  }
  return out;
}

bool Store::remove_user(const std::string& tenant, const std::string& name,
                        const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare("DELETE FROM users WHERE tenant = ?1 AND name = ?2");
  s.bind(1, tenant).bind(2, name);
  s.run();
  if (db_->changes() == 0) return false;
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
  return true;
}

bool Store::set_user_token(const std::string& tenant, const std::string& name,
                           const std::string& token_sha256, const AuditEntry* audit) {
  std::lock_guard lock(mu_);
  Transaction tx(*db_);
  Statement s = db_->prepare("UPDATE users SET token_sha256 = ?3 WHERE tenant = ?1 AND name = ?2");
  s.bind(1, tenant).bind(2, name).bind(3, token_sha256);
  s.run();
  if (db_->changes() == 0) return false;
  if (audit != nullptr) write_audit(*audit);
  tx.commit();
  return true;
}

}  // namespace tessera
