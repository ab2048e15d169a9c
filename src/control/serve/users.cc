// People inside tenants: each user has a token of their own, so the audit log and a job's
// history say who did what (alice@team-a), and a member cannot stop a colleague's work. The
// admin, the tenant's own token and the tenant's admins manage its users.
#include <algorithm>
#include <tuple>

#include "control/serve/service.h"
#include "control/token.h"
#include "store/job_request.h"

namespace tessera {

// Far beyond any team, and a bound on what one tenant's admin can make the server keep.
constexpr size_t kMaxUsersPerTenant = 1000;

void Service::check_manages_locked(const Caller& caller, const std::string& tenant) const {
  // Another tenant's users are refused alike whether it exists or not: no oracle of names.
  if (!caller.admin && caller.tenant != tenant) {
    throw ServiceError(ServiceError::kForbidden, "",
                       "only the admin or " + tenant + "'s own admins manage its users");
  }
  if (!tenants_.find(tenant) || deleted_tenants_.contains(tenant)) {
    throw ServiceError(ServiceError::kNotFound, "", "no tenant " + tenant);
  }
  if (!caller.manages(tenant)) {
    throw ServiceError(ServiceError::kForbidden, "",
                       caller.tenant == tenant
                           ? "only a tenant admin manages " + tenant + "'s users (" +
                                 caller.actor() + " is a member)"
                           : "only the admin or " + tenant + "'s own admins manage its users");
  }
}

std::string Service::add_user(const RequestContext& ctx, const std::string& tenant,
                              const std::string& name, UserRole role) {
  if (!is_valid_name(name) || name.find_first_not_of('.') == std::string::npos) {
    throw ServiceError(ServiceError::kInvalid, "name",
                       "user names are 1-63 characters of letters, digits, '-', '_', '.' (not "
                       "only dots)");
  }
  std::lock_guard lock(mu_);
  check_manages_locked(ctx.caller, tenant);
  const auto users =
      static_cast<size_t>(std::count_if(token_user_.begin(), token_user_.end(),
                                        [&](const auto& e) { return e.second.tenant == tenant; }));
  if (users >= kMaxUsersPerTenant) {
    throw ServiceError(ServiceError::kTooMany, "",
                       "tenant " + tenant + " has " + std::to_string(users) +
                           " users, the most one tenant may have; remove some first");
  }
  const std::string token = new_token();
  const double t = now();
  const UserRow row{tenant, name, sha256_hex(token), role, t};
  const std::string who = name + "@" + tenant;
  const AuditEntry audit{0,
                         t,
                         ctx.caller.actor(),
                         ctx.method,
                         ctx.path,
                         201,
                         "user " + who + " (" + std::string(to_string(role)) + ")"};
  bool added = false;
  api_write([&] { added = store_->add_user(row, &audit); });
  if (!added) throw ServiceError(ServiceError::kConflict, "name", "user " + who + " exists");
  token_user_[row.token_sha256] = row;
  return token;
}

std::vector<UserRow> Service::users(const Caller& caller, const std::string& tenant) const {
  std::lock_guard lock(mu_);
  if (tenant.empty()) {
    if (!caller.admin) {
      throw ServiceError(ServiceError::kForbidden, "", "only the admin lists every tenant's users");
    }
  } else {
    check_manages_locked(caller, tenant);
  }
  std::vector<UserRow> out;
  for (const auto& [hash, u] : token_user_) {
    if (tenant.empty() || u.tenant == tenant) out.push_back(u);
  }
  std::sort(out.begin(), out.end(), [](const UserRow& a, const UserRow& b) {
    return std::tie(a.tenant, a.name) < std::tie(b.tenant, b.name);
  });
  for (UserRow& u : out) u.token_sha256.clear();  // not for anyone to see
  return out;
}

void Service::remove_user(const RequestContext& ctx, const std::string& tenant,
                          const std::string& name) {
  std::lock_guard lock(mu_);
  check_manages_locked(ctx.caller, tenant);
  const std::string who = name + "@" + tenant;
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "user " + who};
  bool removed = false;
  api_write([&] { removed = store_->remove_user(tenant, name, &audit); });
  if (!removed) throw ServiceError(ServiceError::kNotFound, "", "no user " + who);
  std::erase_if(token_user_,
                [&](const auto& e) { return e.second.tenant == tenant && e.second.name == name; });
}

std::string Service::rotate_user_token(const RequestContext& ctx, const std::string& tenant,
                                       const std::string& name) {
  std::lock_guard lock(mu_);
  const bool self = !ctx.caller.admin && ctx.caller.tenant == tenant && ctx.caller.user == name;
  if (!self) check_manages_locked(ctx.caller, tenant);
  const std::string token = new_token();
  const std::string hash = sha256_hex(token);
  const std::string who = name + "@" + tenant;
  const AuditEntry audit{0, now(), ctx.caller.actor(), ctx.method, ctx.path, 200, "user " + who};
  bool changed = false;
  api_write([&] { changed = store_->set_user_token(tenant, name, hash, &audit); });
  if (!changed) throw ServiceError(ServiceError::kNotFound, "", "no user " + who);
  auto old = std::find_if(token_user_.begin(), token_user_.end(), [&](const auto& e) {
    return e.second.tenant == tenant && e.second.name == name;
  });
  UserRow row = old != token_user_.end() ? old->second : UserRow{tenant, name, "", {}, 0};
  if (old != token_user_.end()) token_user_.erase(old);
  row.token_sha256 = hash;
  token_user_[hash] = std::move(row);
  return token;
}

}  // namespace tessera
