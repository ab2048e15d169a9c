// Runtime predictors: the quantile hierarchy, the boosted trees, the baseline.
#include "insight/runtime_predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "insight/gbt.h"

namespace tessera {
namespace {

JobFeatures job(uint32_t tenant, double gpus, uint32_t user = kNoId, uint32_t name = kNoId) {
  JobFeatures f;
  f.tenant = tenant;
  f.user = user;
  f.name = name;
  f.gpus = gpus;
  f.members = static_cast<int32_t>(gpus);
  return f;
}

TEST(NameClass, DropsRunSpecificTokens) {
  EXPECT_EQ(name_class("train-bert-0042"), "train-bert");
  EXPECT_EQ(name_class("philly-17"), "philly");
  EXPECT_EQ(name_class("sweep_lr0.1_7"), "sweep");
  EXPECT_EQ(name_class("bert-v2-large-3"), "bert-v2-large");
  EXPECT_EQ(name_class("12345"), "");
  EXPECT_EQ(name_class("resnet"), "resnet");
}

TEST(FeatureEncoder, InternsNameClassesAndUsers) {
  FeatureEncoder enc;
  JobSpec a;
  a.name = "exp-1";
  a.min_members = a.max_members = 2;
  a.demand.gpus = 4;
  JobSpec b = a;
  b.name = "exp-2";
  const JobFeatures fa = enc.encode(a, "alice");
  const JobFeatures fb = enc.encode(b, "alice");
  EXPECT_EQ(fa.name, fb.name);
  EXPECT_EQ(fa.user, fb.user);
  EXPECT_DOUBLE_EQ(fa.gpus, 8);
  EXPECT_EQ(enc.encode(a).user, kNoId);
}

TEST(QuantilePredictor, FallsBackAlongTheHierarchy) {
  auto p = make_quantile_predictor();
  EXPECT_EQ(p->predict(job(0, 1)).source, "prior");
  for (int i = 0; i < 3; ++i) p->observe(job(0, 1), 100);
  for (int i = 0; i < 3; ++i) p->observe(job(0, 4), 1000);
  // Same tenant and request: its own group.
  Prediction same = p->predict(job(0, 1));
  EXPECT_EQ(same.source, "tenant+shape");
  EXPECT_DOUBLE_EQ(same.point, 100);
  // Same tenant, an unseen GPU count: the tenant's median over both groups.
  Prediction other = p->predict(job(0, 2));
  EXPECT_EQ(other.source, "tenant");
  EXPECT_GE(other.point, 100);
  EXPECT_LE(other.point, 1000);
  // Unseen tenant, seen request: the request's group across tenants.
  EXPECT_EQ(p->predict(job(7, 4)).source, "shape");
  EXPECT_DOUBLE_EQ(p->predict(job(7, 4)).point, 1000);
  // Unseen tenant and request: everything.
  EXPECT_EQ(p->predict(job(7, 3)).source, "global");
  // A user's named job beats the tenant's history.
  for (int i = 0; i < 2; ++i) p->observe(job(0, 1, /*user=*/5, /*name=*/9), 10);
  const Prediction mine = p->predict(job(0, 1, 5, 9));
  EXPECT_EQ(mine.source, "user+name");
  EXPECT_DOUBLE_EQ(mine.point, 10);
  EXPECT_EQ(p->predict(job(0, 1, 5, 10)).source, "user+shape");
}

TEST(QuantilePredictor, LearnsFromObservationsWithASpread) {
  auto p = make_quantile_predictor();
  for (int i = 1; i <= 11; ++i) p->observe(job(0, 1), 10.0 * i);
  const Prediction a = p->predict(job(0, 1));
  EXPECT_DOUBLE_EQ(a.point, 60);
  EXPECT_LT(a.lower, a.point);
  EXPECT_GT(a.upper, a.point);
  // The group keeps its recent history: a shift in behaviour moves the estimate.
  for (int i = 0; i < 40; ++i) p->observe(job(0, 1), 5000);
  EXPECT_DOUBLE_EQ(p->predict(job(0, 1)).point, 5000);
}

TEST(QuantilePredictor, ARequestedTimeLimitCapsThePoint) {
  auto p = make_quantile_predictor();
  for (int i = 0; i < 5; ++i) p->observe(job(0, 1), 1000);
  JobFeatures f = job(0, 1);
  f.requested_seconds = 300;
  EXPECT_DOUBLE_EQ(p->predict(f).point, 300);
}

TEST(MeanPredictor, UsesTheUserElseTheTenantElseEveryone) {
  auto p = make_mean_predictor(42);
  EXPECT_DOUBLE_EQ(p->predict(job(0, 1)).point, 42);
  p->observe(job(0, 1, 3), 100);
  p->observe(job(0, 1, 4), 300);
  EXPECT_DOUBLE_EQ(p->predict(job(0, 1, 3)).point, 100);
  EXPECT_EQ(p->predict(job(0, 1, 3)).source, "user");
  EXPECT_DOUBLE_EQ(p->predict(job(0, 1)).point, 200);
  EXPECT_EQ(p->predict(job(1, 1)).source, "global");
}

// Durations that depend on the request: 60 s x GPUs x (CPU in cores), with +-20 % noise.
struct Sample {
  JobFeatures f;
  double seconds;
};
std::vector<Sample> generated(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Sample> out;
  for (size_t i = 0; i < n; ++i) {
    JobFeatures f;
    f.tenant = static_cast<uint32_t>(rng() % 3);
    f.gpus = static_cast<double>(1u << (rng() % 4));
    f.members = 1;
    f.cpu_milli = static_cast<int64_t>(1000 * (1 + rng() % 8));
    f.submit_time = static_cast<double>(i) * 60;
    const double noise = 0.8 + 0.4 * static_cast<double>(rng() % 1000) / 1000.0;
    out.push_back({f, 60.0 * f.gpus * static_cast<double>(f.cpu_milli) / 1000.0 * noise});
  }
  return out;
}

double median_abs_log_error(const RuntimePredictor& p, const std::vector<Sample>& test) {
  std::vector<double> e;
  for (const Sample& s : test) e.push_back(std::abs(std::log(p.predict(s.f).point / s.seconds)));
  std::nth_element(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(e.size() / 2), e.end());
  return e[e.size() / 2];
}

TEST(GbtPredictor, FitsAGeneratedRelationBetterThanTheGlobalMean) {
  GbtPredictorOptions o;
  o.first_fit = 200;
  o.retrain_every = 400;
  auto gbt = make_gbt_predictor(o);
  auto mean = make_mean_predictor();
  const auto train = generated(1500, 7);
  for (const Sample& s : train) {
    gbt->predict(s.f);  // as a scheduler would at submission
    gbt->observe(s.f, s.seconds);
    JobFeatures anon = s.f;
    anon.tenant = kNoId;  // the global mean
    mean->observe(anon, s.seconds);
  }
  const auto test = generated(400, 11);
  std::vector<Sample> anon_test = test;
  for (Sample& s : anon_test) s.f.tenant = kNoId;
  const double gbt_err = median_abs_log_error(*gbt, test);
  const double mean_err = median_abs_log_error(*mean, anon_test);
  EXPECT_EQ(gbt->predict(test.front().f).source, "gbt");
  EXPECT_LT(gbt_err, 0.5 * mean_err) << "gbt " << gbt_err << " mean " << mean_err;
  EXPECT_LT(gbt_err, 0.25);
  // An uncertainty around the point.
  const Prediction p = gbt->predict(test.front().f);
  EXPECT_LE(p.lower, p.point);
  EXPECT_GE(p.upper, p.point);
}

TEST(GbtPredictor, IsDeterministic) {
  auto a = make_gbt_predictor();
  auto b = make_gbt_predictor();
  for (const Sample& s : generated(600, 3)) {
    EXPECT_DOUBLE_EQ(a->predict(s.f).point, b->predict(s.f).point);
    a->observe(s.f, s.seconds);
    b->observe(s.f, s.seconds);
  }
}

TEST(GradientBoostedTrees, FitsANonLinearFunctionWithMissingValues) {
  std::vector<double> x, y;
  for (int i = 0; i < 400; ++i) {
    const double a = i % 20, b = (i / 20) % 2;
    x.push_back(a);
    x.push_back(i % 7 == 0 ? std::nan("") : b);
    y.push_back(a * a / 10 + (b > 0 ? 5 : 0));
  }
  double mean = 0;
  for (double v : y) mean += v / static_cast<double>(y.size());
  for (GbtLoss loss : {GbtLoss::kSquared, GbtLoss::kAbsolute}) {
    GradientBoostedTrees m;
    GbtParams p;
    p.loss = loss;
    p.trees = 100;
    p.min_leaf = 5;
    m.fit(x, 2, y, p);
    ASSERT_TRUE(m.trained());
    double sse = 0, sst = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double r = m.predict(&x[2 * i]) - y[i];
      sse += r * r;
      sst += (y[i] - mean) * (y[i] - mean);
    }
    EXPECT_LT(sse, 0.1 * sst);
  }
}

TEST(RuntimePredictor, Registry) {
  for (const std::string& n : runtime_predictor_names()) {
    auto p = make_runtime_predictor(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(p->name(), n);
  }
  EXPECT_EQ(make_runtime_predictor("oracle"), nullptr);
}

}  // namespace
}  // namespace tessera
