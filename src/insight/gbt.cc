#include "insight/gbt.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

namespace {

struct Fit {
  size_t n = 0, nf = 0;
  const GbtParams* p = nullptr;
  std::vector<std::vector<double>> cuts;  // per feature, ascending bin boundaries
  std::vector<uint8_t> bin;               // n x nf; cuts[f].size()+1 means missing
  std::vector<double> residual;
  // Scratch histograms, reused by every node.
  std::vector<double> hsum;
  std::vector<size_t> hcount;
};

}  // namespace

void GradientBoostedTrees::fit(const std::vector<double>& x, size_t features,
                               const std::vector<double>& y, const GbtParams& params) {
  trees_.clear();
  trained_ = false;
  features_ = features;
  const size_t n = y.size();
  if (n == 0 || features == 0 || x.size() != n * features) return;
  Fit f;
  f.n = n;
  f.nf = features;
  f.p = &params;
  const int bins = std::clamp(params.bins, 2, 254);
  // Quantile cut points per feature (distinct values only).
  f.cuts.resize(features);
  std::vector<double> vals;
  for (size_t c = 0; c < features; ++c) {
    vals.clear();
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i * features + c];
      if (!std::isnan(v)) vals.push_back(v);
    }
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    std::vector<double>& cut = f.cuts[c];
    if (vals.size() <= static_cast<size_t>(bins)) {
      // Every distinct value but the largest is a boundary.
      cut.assign(vals.begin(), vals.empty() ? vals.end() : vals.end() - 1);
    } else {
      for (int b = 1; b < bins; ++b) {
        const double v = vals[vals.size() * static_cast<size_t>(b) / static_cast<size_t>(bins)];
        if (cut.empty() || v > cut.back()) cut.push_back(v);
      }
    }
  }
  f.bin.resize(n * features);
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < features; ++c) {
      const double v = x[i * features + c];
      const auto& cut = f.cuts[c];
      f.bin[i * features + c] =
          std::isnan(v)
              ? static_cast<uint8_t>(cut.size() + 1)
              : static_cast<uint8_t>(std::lower_bound(cut.begin(), cut.end(), v) - cut.begin());
    }
  }
  const bool lad = params.loss == GbtLoss::kAbsolute;
  std::vector<double> scratch;
  auto median_of = [&scratch](auto begin, auto end, auto value) {
    scratch.clear();
    for (auto it = begin; it != end; ++it) scratch.push_back(value(*it));
    const auto mid = scratch.begin() + static_cast<std::ptrdiff_t>(scratch.size() / 2);
    std::nth_element(scratch.begin(), mid, scratch.end());
    return *mid;
  };
  if (lad) {
    base_ = median_of(y.begin(), y.end(), [](double v) { return v; });
  } else {
    double mean = 0;
    for (double v : y) mean += v;
    base_ = mean / static_cast<double>(n);
  }
  std::vector<double> pred(n, base_);
  f.residual.resize(n);
  std::vector<double> raw(n);  // y - prediction (the residual itself, also for LAD)
  f.hsum.resize(256);
  f.hcount.resize(256);
  std::vector<uint32_t> idx(n);

  for (int t = 0; t < params.trees; ++t) {
    for (size_t i = 0; i < n; ++i) {
      raw[i] = y[i] - pred[i];
      // LAD grows the tree on the negative gradient of |r|: its sign.
      f.residual[i] = lad ? (raw[i] > 0 ? 1.0 : raw[i] < 0 ? -1.0 : 0.0) : raw[i];
    }
    for (size_t i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(i);
    Tree tree;
    // Depth-first growth with an explicit stack of (node, begin, end, depth).
    struct Work {
      int32_t node;
      size_t begin, end;
      int depth;
    };
    tree.push_back(Node{});
    std::vector<Work> stack{{0, 0, n, 0}};
    while (!stack.empty()) {
      const Work w = stack.back();
      stack.pop_back();
      const size_t cnt = w.end - w.begin;
      double total = 0;
      for (size_t k = w.begin; k < w.end; ++k) total += f.residual[idx[k]];
      auto make_leaf = [&] {
        const double v = lad ? median_of(idx.begin() + static_cast<std::ptrdiff_t>(w.begin),
                                         idx.begin() + static_cast<std::ptrdiff_t>(w.end),
                                         [&raw](uint32_t i) { return raw[i]; })
                             : total / static_cast<double>(cnt);
        tree[static_cast<size_t>(w.node)].value = params.learning_rate * v;
      };
      if (w.depth >= params.max_depth || cnt < 2 * params.min_leaf) {
        make_leaf();
        continue;
      }
      const double parent_score = total * total / static_cast<double>(cnt);
      double best_gain = 1e-12;
      int best_feature = -1;
      size_t best_bin = 0;
      bool best_missing_left = true;
      for (size_t c = 0; c < features; ++c) {
        const size_t nb = f.cuts[c].size() + 2;  // bins plus the missing bin
        if (nb <= 2) continue;                   // one distinct value: nothing to split
        std::fill(f.hsum.begin(), f.hsum.begin() + static_cast<std::ptrdiff_t>(nb), 0.0);
        std::fill(f.hcount.begin(), f.hcount.begin() + static_cast<std::ptrdiff_t>(nb), 0);
        for (size_t k = w.begin; k < w.end; ++k) {
          const uint32_t i = idx[k];
          const uint8_t b = f.bin[i * features + c];
          f.hsum[b] += f.residual[i];
          f.hcount[b]++;
        }
        const double msum = f.hsum[nb - 1];
        const size_t mcount = f.hcount[nb - 1];
        double lsum = 0;
        size_t lcount = 0;
        for (size_t b = 0; b + 2 < nb; ++b) {  // split after bin b (the last real bin excluded)
          lsum += f.hsum[b];
          lcount += f.hcount[b];
          for (int ml = 0; ml < (mcount > 0 ? 2 : 1); ++ml) {
            const double ls = lsum + (ml ? msum : 0.0);
            const size_t lc = lcount + (ml ? mcount : 0);
            const size_t rc = cnt - lc;
            if (lc < params.min_leaf || rc < params.min_leaf) continue;
            const double rs = total - ls;
            const double gain = ls * ls / static_cast<double>(lc) +
                                rs * rs / static_cast<double>(rc) - parent_score;
            if (gain > best_gain) {
              best_gain = gain;
              best_feature = static_cast<int>(c);
              best_bin = b;
              best_missing_left = ml == 1 || mcount == 0;
            }
          }
        }
      }
      if (best_feature < 0) {
        make_leaf();
        continue;
      }
      const size_t c = static_cast<size_t>(best_feature);
      const size_t missing_bin = f.cuts[c].size() + 1;
      auto goes_left = [&](uint32_t i) {
        const uint8_t b = f.bin[i * features + c];
        return b == missing_bin ? best_missing_left : b <= best_bin;
      };
      const auto mid =
          std::stable_partition(idx.begin() + static_cast<std::ptrdiff_t>(w.begin),
                                idx.begin() + static_cast<std::ptrdiff_t>(w.end), goes_left);
      const size_t split = static_cast<size_t>(mid - idx.begin());
      const auto left = static_cast<int32_t>(tree.size());
      tree.push_back(Node{});
      tree.push_back(Node{});
      Node& node = tree[static_cast<size_t>(w.node)];
      node.feature = best_feature;
      node.threshold = f.cuts[c][best_bin];
      node.missing_left = best_missing_left;
      node.left = left;
      node.right = left + 1;
      stack.push_back({left + 1, split, w.end, w.depth + 1});
      stack.push_back({left, w.begin, split, w.depth + 1});
    }
    for (size_t i = 0; i < n; ++i) pred[i] += eval(tree, &x[i * features]);
    trees_.push_back(std::move(tree));
  }
  trained_ = true;
}

double GradientBoostedTrees::eval(const Tree& t, const double* row) const {
  size_t k = 0;
  while (t[k].feature >= 0) {
    const Node& nd = t[k];
    const double v = row[nd.feature];
    const bool left = std::isnan(v) ? nd.missing_left : v <= nd.threshold;
    k = static_cast<size_t>(left ? nd.left : nd.right);
  }
  return t[k].value;
}

double GradientBoostedTrees::predict(const double* row) const {
  if (!trained_) return 0;
  double s = base_;
  for (const Tree& t : trees_) s += eval(t, row);
  return s;
}

}  // namespace tessera
