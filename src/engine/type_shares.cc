#include "engine/type_shares.h"

#include <glpk.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

namespace tessera {

namespace {

using Problem = std::unique_ptr<glp_prob, decltype(&glp_delete_prob)>;

// Below this a share is solver noise, not time on a type.
constexpr double kTiny = 1e-9;

void check(const TypeShareInput& in) {
  const size_t jobs = in.throughput.size();
  const size_t types = in.capacity.size();
  if (in.gpus.size() != jobs) {
    throw std::invalid_argument("type shares: gpus has " + std::to_string(in.gpus.size()) +
                                " entries for " + std::to_string(jobs) + " jobs");
  }
  if (!in.weight.empty() && in.weight.size() != jobs) {
    throw std::invalid_argument("type shares: weight has " + std::to_string(in.weight.size()) +
                                " entries for " + std::to_string(jobs) + " jobs");
  }
  for (size_t t = 0; t < types; ++t) {
    if (!(in.capacity[t] >= 0)) {
      throw std::invalid_argument("type shares: type " + std::to_string(t) +
                                  "'s capacity must be 0 or more");
    }
  }
  for (size_t j = 0; j < jobs; ++j) {
    const std::string who = "type shares: job " + std::to_string(j);
    if (in.throughput[j].size() != types) {
      throw std::invalid_argument(who + " has " + std::to_string(in.throughput[j].size()) +
                                  " throughputs for " + std::to_string(types) + " types");
    }
    if (!(in.gpus[j] > 0)) throw std::invalid_argument(who + ": its GPUs must be more than 0");
    if (!in.weight.empty() && !(in.weight[j] > 0)) {
      throw std::invalid_argument(who + ": its weight must be more than 0");
    }
    bool runs = false;
    for (size_t t = 0; t < types; ++t) {
      if (!(in.throughput[j][t] >= 0)) {
        throw std::invalid_argument(who + ": a throughput must be 0 or more");
      }
      runs = runs || (in.throughput[j][t] > 0 && in.gpus[j] <= in.capacity[t]);
    }
    if (!runs) throw std::invalid_argument(who + " has no GPU type it can run on");
  }
}

// Whether job j may use type t: it runs there, and its gang fits the type's GPUs.
bool usable(const TypeShareInput& in, size_t j, size_t t) {
  return in.throughput[j][t] > 0 && in.gpus[j] <= in.capacity[t];
}

// Which GLPK solver's solution a problem holds.
enum class Method : uint8_t { kSimplex, kInterior };

// Solves `p` by the simplex method; where it stalls (these LPs are highly degenerate: many jobs
// of the same model have identical rows, and the simplex can pivot for minutes without
// progress), by the interior-point method instead, whose solution is as good for time shares.
Method solve(glp_prob* p) {
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  // A well-behaved solve of a few thousand columns takes milliseconds.
  parm.it_lim = 20 * (glp_get_num_rows(p) + glp_get_num_cols(p)) + 1000;
  const int rc = glp_simplex(p, &parm);
  if (rc == 0 && glp_get_status(p) == GLP_OPT) return Method::kSimplex;
  glp_iptcp ipt;
  glp_init_iptcp(&ipt);
  ipt.msg_lev = GLP_MSG_OFF;
  const int irc = glp_interior(p, &ipt);
  if (irc == 0 && glp_ipt_status(p) == GLP_OPT) return Method::kInterior;
  throw std::runtime_error("type shares: GLPK found no optimal solution (glp_simplex returned " +
                           std::to_string(rc) + ", status " + std::to_string(glp_get_status(p)) +
                           "; glp_interior returned " + std::to_string(irc) + ", status " +
                           std::to_string(glp_ipt_status(p)) + ")");
}

double objective_of(glp_prob* p, Method m) {
  return m == Method::kSimplex ? glp_get_obj_val(p) : glp_ipt_obj_val(p);
}

double column_of(glp_prob* p, Method m, int col) {
  return m == Method::kSimplex ? glp_get_col_prim(p, col) : glp_ipt_col_prim(p, col);
}

}  // namespace

TypeShares solve_type_shares(const TypeShareInput& in, TypeShareObjective objective) {
  check(in);
  const size_t jobs = in.throughput.size();
  const size_t types = in.capacity.size();
  TypeShares out;
  out.x.assign(jobs, std::vector<double>(types, 0.0));
  if (jobs == 0) return out;

  // Each job's normalisation: its throughput under an equal share (max-min), or on its fastest
  // type (throughput).
  double total_capacity = 0, total_gpus = 0;
  for (double c : in.capacity) total_capacity += c;
  for (double g : in.gpus) total_gpus += g;
  const double fraction = std::min(1.0, total_capacity / total_gpus);
  std::vector<double> norm(jobs, 0.0);
  for (size_t j = 0; j < jobs; ++j) {
    for (size_t t = 0; t < types; ++t) {
      if (!usable(in, j, t)) continue;
      norm[j] = objective == TypeShareObjective::kMaxMinFairness
                    ? norm[j] + in.throughput[j][t] * fraction * in.capacity[t] / total_capacity
                    : std::max(norm[j], in.throughput[j][t]);
    }
    // A job that may use only types too small to count in the equal share still needs a scale.
    if (norm[j] <= 0) {
      for (size_t t = 0; t < types; ++t) {
        if (usable(in, j, t)) norm[j] = std::max(norm[j], in.throughput[j][t]);
      }
    }
  }
  const auto coef_of_job = [&](size_t j, size_t t) {
    const double w = in.weight.empty() ? 1.0 : in.weight[j];
    return in.throughput[j][t] / (w * norm[j]);
  };
  // Jobs alike (the same throughputs, GPUs and weight) are solved as one class: some optimum
  // gives them all the same shares (averaging an optimum over their permutations keeps it
  // feasible and optimal, both stages being symmetric in them), and the LP shrinks from one
  // row per job to one per class. Without this, hundreds of jobs of a few models make it so
  // degenerate that the simplex method stalls for minutes.
  std::vector<size_t> rep;             // class -> a job of it
  std::vector<double> mult;            // class -> how many jobs
  std::vector<size_t> class_of(jobs);  // job -> class
  {
    std::map<std::tuple<std::vector<double>, double, double>, size_t> seen;
    for (size_t j = 0; j < jobs; ++j) {
      auto key =
          std::make_tuple(in.throughput[j], in.gpus[j], in.weight.empty() ? 1.0 : in.weight[j]);
      auto [it, fresh] = seen.emplace(std::move(key), rep.size());
      if (fresh) {
        rep.push_back(j);
        mult.push_back(0);
      }
      class_of[j] = it->second;
      mult[it->second] += 1;
    }
  }
  const size_t classes = rep.size();
  const auto coef = [&](size_t c, size_t t) { return coef_of_job(rep[c], t); };
  const auto usable_c = [&](size_t c, size_t t) { return usable(in, rep[c], t); };

  Problem prob(glp_create_prob(), glp_delete_prob);
  glp_prob* p = prob.get();
  glp_set_obj_dir(p, GLP_MAX);
  const bool fair = objective == TypeShareObjective::kMaxMinFairness;
  // Columns: X[c][t] (class c's share of type t) at 1 + c * types + t, then z (the fairness
  // floor) when max-min.
  const int xcols = static_cast<int>(classes * types);
  const int zcol = xcols + 1;
  glp_add_cols(p, xcols + (fair ? 1 : 0));
  for (size_t j = 0; j < classes; ++j) {
    for (size_t t = 0; t < types; ++t) {
      const int c = static_cast<int>(1 + j * types + t);
      if (usable_c(j, t)) {
        glp_set_col_bnds(p, c, GLP_DB, 0.0, 1.0);
      } else {
        glp_set_col_bnds(p, c, GLP_FX, 0.0, 0.0);
      }
      glp_set_obj_coef(p, c, fair ? 0.0 : mult[j] * coef(j, t));
    }
  }
  if (fair) {
    glp_set_col_bnds(p, zcol, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(p, zcol, 1.0);
  }
  // Rows: per class a job's time (<= 1) and, when max-min, its floor (eff - z >= 0); per type
  // its GPUs (each class's jobs times their GPUs).
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};
  const auto put = [&](int row, int col, double v) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(v);
  };
  int row = 0;
  const int rows = static_cast<int>(classes * (fair ? 2 : 1) + types);
  glp_add_rows(p, rows);
  std::vector<int> floor_rows;
  for (size_t j = 0; j < classes; ++j) {
    glp_set_row_bnds(p, ++row, GLP_UP, 0.0, 1.0);
    for (size_t t = 0; t < types; ++t) {
      if (usable_c(j, t)) put(row, static_cast<int>(1 + j * types + t), 1.0);
    }
    if (!fair) continue;
    glp_set_row_bnds(p, ++row, GLP_LO, 0.0, 0.0);
    floor_rows.push_back(row);
    for (size_t t = 0; t < types; ++t) {
      if (usable_c(j, t)) put(row, static_cast<int>(1 + j * types + t), coef(j, t));
    }
    put(row, zcol, -1.0);
  }
  for (size_t t = 0; t < types; ++t) {
    glp_set_row_bnds(p, ++row, GLP_UP, 0.0, in.capacity[t]);
    for (size_t j = 0; j < classes; ++j) {
      if (usable_c(j, t)) put(row, static_cast<int>(1 + j * types + t), mult[j] * in.gpus[rep[j]]);
    }
  }
  glp_load_matrix(p, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  Method m = solve(p);
  out.objective = objective_of(p, m);
  if (fair) {
    // Second stage: every job keeps the floor (less a hair, for the solver's tolerance), and
    // the sum of normalised throughputs is maximised.
    const double floor = out.objective * (1 - 1e-7);
    glp_set_col_bnds(p, zcol, GLP_FX, floor, floor);
    glp_set_obj_coef(p, zcol, 0.0);
    for (size_t j = 0; j < classes; ++j) {
      for (size_t t = 0; t < types; ++t) {
        if (usable_c(j, t)) {
          glp_set_obj_coef(p, static_cast<int>(1 + j * types + t), mult[j] * coef(j, t));
        }
      }
    }
    m = solve(p);
  }
  for (size_t j = 0; j < jobs; ++j) {
    for (size_t t = 0; t < types; ++t) {
      const double v = column_of(p, m, static_cast<int>(1 + class_of[j] * types + t));
      out.x[j][t] = v < kTiny ? 0.0 : std::min(1.0, v);
    }
  }
  return out;
}

double effective_throughput(const TypeShareInput& in, const TypeShares& s, size_t job) {
  double eff = 0;
  for (size_t t = 0; t < in.capacity.size(); ++t) eff += in.throughput[job][t] * s.x[job][t];
  return eff;
}

}  // namespace tessera
