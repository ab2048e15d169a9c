// A small gradient-boosted regression tree ensemble (least squares), for the runtime predictor.
//
// No Debian-packaged C++ library for boosted trees fits the project (LightGBM and XGBoost are
// not packaged as C++ development libraries for the toolchain used here), so this is a
// documented small implementation of the classic algorithm (Friedman 2001, "Greedy function
// approximation"), in the histogram style of LightGBM:
//   - every feature is cut into at most `bins` quantile bins once per fit;
//   - each tree is grown depth-first to `max_depth`, a split taking the bin boundary that
//     most reduces the squared error, with at least `min_leaf` samples on each side;
//   - leaves hold the mean residual, shrunk by `learning_rate`; the model is the base value
//     (the mean target) plus the sum of the trees.
// With the absolute loss (LAD_TreeBoost, same paper) the trees are grown on the signs of the
// residuals, each leaf holds the median residual of its samples, and the base is the median.
// Missing values are NaN: they go to the side the split learned for them (the side whose
// mean residual is closer to theirs), as in XGBoost's default direction.
// Deterministic: no randomness (no row or column subsampling), no clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

enum class GbtLoss {
  kSquared,   // least squares: fits the conditional mean
  kAbsolute,  // least absolute deviation (Friedman's LAD_TreeBoost): the conditional median
};

struct GbtParams {
  GbtLoss loss = GbtLoss::kSquared;
  int trees = 60;
  int max_depth = 4;
  double learning_rate = 0.1;
  size_t min_leaf = 20;
  int bins = 32;
};

class GradientBoostedTrees {
 public:
  // Fits to rows of `x` (row-major, `features` columns) and targets `y`; replaces any
  // previous fit. Empty input leaves an untrained model.
  void fit(const std::vector<double>& x, size_t features, const std::vector<double>& y,
           const GbtParams& params);
  // The prediction for one row of `features` values (NaN: missing). 0 when untrained.
  double predict(const double* row) const;
  bool trained() const { return trained_; }
  size_t num_trees() const { return trees_.size(); }

 private:
  struct Node {
    int32_t feature = -1;  // -1: a leaf
    double threshold = 0;  // go left when value <= threshold
    bool missing_left = true;
    int32_t left = -1, right = -1;
    double value = 0;  // leaf output (already shrunk)
  };
  using Tree = std::vector<Node>;
  double eval(const Tree& t, const double* row) const;

  bool trained_ = false;
  size_t features_ = 0;
  double base_ = 0;
  std::vector<Tree> trees_;
};

}  // namespace tessera
