// A set of nodes, by NodeId: the nodes a job may run on (JobSpec::eligible_nodes), e.g. those
// matching a Kubernetes pod's nodeSelector and required node affinity whose taints it tolerates.
//
// An immutable bitset over node ids with its size and a content hash computed once, so that many
// jobs share one (std::shared_ptr<const NodeSet>), membership is one load and a shift, and caches
// key on it cheaply (hash(), then operator== only on a hash match). Trailing zero words are
// trimmed, so two sets with the same members are equal whatever universe they were built over.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "model/ids.h"

namespace tessera {

class NodeSet {
 public:
  NodeSet() = default;  // the empty set
  // The given nodes (duplicates are fine; kNoId is not a node).
  explicit NodeSet(std::span<const NodeId> nodes);
  NodeSet(std::initializer_list<NodeId> nodes)
      : NodeSet(std::span<const NodeId>(nodes.begin(), nodes.size())) {}
  // The nodes n in [0, num_nodes) for which pred(n) holds.
  template <class Pred>
  static NodeSet matching(size_t num_nodes, Pred&& pred) {
    NodeSet s;
    s.words_.assign((num_nodes + 63) / 64, 0);
    for (size_t n = 0; n < num_nodes; ++n) {
      if (pred(static_cast<NodeId>(n))) s.words_[n >> 6] |= uint64_t{1} << (n & 63);
    }
    s.finish();
    return s;
  }
  // From bitset words (bit n % 64 of word n / 64 is node n).
  static NodeSet from_words(std::vector<uint64_t> words);

  bool contains(NodeId n) const {
    const size_t w = n >> 6;
    return w < words_.size() && ((words_[w] >> (n & 63)) & 1u) != 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Members in [lo, hi).
  size_t count_in(NodeId lo, NodeId hi) const;
  // The smallest member >= n, or kNoId.
  NodeId next(NodeId n) const;
  // One past the largest member (0 when empty): every member is below it.
  NodeId end_bound() const {
    return words_.empty()
               ? 0
               : static_cast<NodeId>(words_.size() * 64 -
                                     static_cast<size_t>(std::countl_zero(words_.back())));
  }
  bool is_subset_of(const NodeSet& other) const;
  // Calls f(n) for every member, ascending.
  template <class F>
  void for_each(F&& f) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1) {
        f(static_cast<NodeId>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
      }
    }
  }
  std::vector<NodeId> to_vector() const;
  std::span<const uint64_t> words() const { return words_; }
  size_t hash() const { return hash_; }

  bool operator==(const NodeSet& o) const {
    return hash_ == o.hash_ && size_ == o.size_ && words_ == o.words_;
  }

 private:
  void finish();  // trims trailing zero words, computes size and hash

  std::vector<uint64_t> words_;
  size_t size_ = 0;
  size_t hash_ = 0;
};

// Whether node n is allowed under an optional restriction (null: every node is).
inline bool node_eligible(const NodeSet* set, NodeId n) {
  return set == nullptr || set->contains(n);
}

// Two optional restrictions (null: every node) are the same restriction: the same object, or
// equal sets. For cache keys that must not conflate different node sets.
inline bool same_restriction(const NodeSet* a, const NodeSet* b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}
inline size_t restriction_hash(const NodeSet* s) {
  return s == nullptr ? 0 : s->hash();
}

}  // namespace tessera
