#include "model/node_set.h"

#include <algorithm>
#include <utility>

namespace tessera {

NodeSet::NodeSet(std::span<const NodeId> nodes) {
  for (NodeId n : nodes) {
    if (n == kNoId) continue;
    const size_t w = n >> 6;
    if (words_.size() <= w) words_.resize(w + 1, 0);
    words_[w] |= uint64_t{1} << (n & 63);
  }
  finish();
}

NodeSet NodeSet::from_words(std::vector<uint64_t> words) {
  NodeSet s;
  s.words_ = std::move(words);
  s.finish();
  return s;
}

void NodeSet::finish() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
  size_ = 0;
  // FNV-1a over the words, then a final mix: equal sets hash equally (trailing zeros trimmed).
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : words_) {
    size_ += static_cast<size_t>(std::popcount(w));
    h = (h ^ w) * 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  hash_ = static_cast<size_t>(h);
}

size_t NodeSet::count_in(NodeId lo, NodeId hi) const {
  const size_t end = std::min<size_t>(hi, words_.size() * 64);
  size_t n = 0;
  for (size_t i = lo; i < end;) {
    const size_t w = i >> 6;
    uint64_t bits = words_[w] >> (i & 63);
    const size_t span = std::min<size_t>(64 - (i & 63), end - i);
    if (span < 64) bits &= (uint64_t{1} << span) - 1;
    n += static_cast<size_t>(std::popcount(bits));
    i += span;
  }
  return n;
}

NodeId NodeSet::next(NodeId n) const {
  size_t w = n >> 6;
  if (w >= words_.size()) return kNoId;
  uint64_t bits = words_[w] & (~uint64_t{0} << (n & 63));
  while (bits == 0) {
    if (++w == words_.size()) return kNoId;
    bits = words_[w];
  }
  return static_cast<NodeId>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
}

bool NodeSet::is_subset_of(const NodeSet& other) const {
  if (words_.size() > other.words_.size()) return false;
  for (size_t w = 0; w < words_.size(); ++w) {
    if ((words_[w] & ~other.words_[w]) != 0) return false;
  }
  return true;
}

std::vector<NodeId> NodeSet::to_vector() const {
  std::vector<NodeId> out;
  out.reserve(size_);
  for_each([&](NodeId n) { out.push_back(n); });
  return out;
}

}  // namespace tessera
