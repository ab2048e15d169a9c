#include "model/spelling.h"

#include <algorithm>

namespace tessera {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// adjacent characters (the commonest typos) each cost 1.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 0;
  bool tie = false;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
      tie = false;
    } else if (d == best_distance && c != best) {
      tie = true;
    }
  }
  // Close means at most a third of the word wrong (one typo in a short word).
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  if (!best.empty() && best_distance <= allowed && !tie) return best;
  // Otherwise a unique prefix: "sim" for "simulate".
  std::string prefixed;
  for (const std::string& c : candidates) {
    if (word.size() >= 2 && c.size() > word.size() && c.compare(0, word.size(), word) == 0) {
      if (!prefixed.empty()) return "";
      prefixed = c;
    }
  }
  return prefixed;
}

std::string did_you_mean(std::string_view word, std::initializer_list<std::string_view> known) {
  const std::string guess =
      closest_match(word, std::vector<std::string>(known.begin(), known.end()));
  return guess.empty() ? std::string() : " (did you mean '" + guess + "'?)";
}

}  // namespace tessera
