// The allocation ledger: what is free on every GPU and node, with indexes kept up to date on
// every allocate/release so that placement never scans the whole cluster.
//
// Invariants:
//  - gpu_free(g) in [0, 1000]; a GPU is "whole free" when gpu_free(g) == 1000 and "partial"
//    when 0 < gpu_free(g) < 1000;
//  - node n is in bucket (type(n), node_free_whole(n)) and in no other bucket;
//  - node n is in the partial list of its type iff it has at least one partial GPU;
//  - buckets and partial lists are sorted by node id, so the ledger's state (and so every
//    placement decision) depends only on what is allocated, not on the order it happened in:
//    a ledger rebuilt after a restart, or a scratch copy that tried and undid a placement,
//    decides exactly as the original would;
//  - rack/spine/type aggregates equal the sums over their nodes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/allocation.h"
#include "model/cluster.h"
#include "model/resources.h"

namespace tessera {

class ClusterState {
 public:
  explicit ClusterState(const Cluster& cluster);

  const Cluster& cluster() const { return *cluster_; }

  int32_t gpu_free(GpuId g) const { return gpu_free_[g]; }
  uint16_t node_free_whole(NodeId n) const { return node_free_whole_[n]; }
  int64_t node_free_cpu(NodeId n) const { return node_free_cpu_[n]; }
  int64_t node_free_mem(NodeId n) const { return node_free_mem_[n]; }
  uint32_t rack_free_whole(RackId r) const { return rack_free_whole_[r]; }
  uint32_t spine_free_whole(SpineId s) const { return spine_free_whole_[s]; }
  uint32_t type_free_whole(GpuTypeId t) const { return type_free_whole_[t]; }
  int64_t type_free_milli(GpuTypeId t) const { return type_free_milli_[t]; }
  uint32_t free_whole_matching(GpuTypeMask mask) const;
  int64_t free_milli_matching(GpuTypeMask mask) const;
  int64_t allocated_milli() const { return allocated_milli_; }

  // Nodes of GPU type t with exactly k whole GPUs free, 0 <= k <= cluster.max_node_gpus().
  std::span<const NodeId> bucket(GpuTypeId t, int k) const { return buckets_[bucket_index(t, k)]; }
  // Nodes of GPU type t that have at least one partially used GPU.
  std::span<const NodeId> partial_nodes(GpuTypeId t) const { return partial_[t]; }

  // Whether node n can host one member with demand d right now (GPUs, CPU, memory).
  bool can_host(NodeId n, const MemberDemand& d) const;
  // How many members with demand d node n could host right now.
  int32_t capacity_for(NodeId n, const MemberDemand& d) const;

  // Picks GPUs on node n for one member and appends them to `out` (does not allocate).
  // Whole GPUs prefer one NVLink domain, the fullest that fits; shares prefer the GPU whose
  // free capacity fits most tightly (pack) or most loosely (spread). Returns false when the
  // node cannot host the member.
  bool pick_gpus(NodeId n, const MemberDemand& d, bool pack, std::vector<GpuShare>& out) const;

  // Everything free on node n now (each GPU's free share, its free CPU and memory) as one
  // member: allocated, it holds the node out of scheduling (a failed node in the simulator, a
  // drained one in the service) without touching what already runs there.
  Allocation free_on_node(NodeId n) const;

  // Whether `a` fits what is free now, on every GPU and node (a decision may be stale by the
  // time it is applied: what it assumed free may since have been taken).
  bool fits(const Allocation& a) const;

  // Applies or reverts an allocation. allocate() requires that it fits (checked: throws
  // std::logic_error on over-commit, so a bug never silently over-commits a GPU).
  void allocate(const Allocation& a);
  void release(const Allocation& a);
  // One member at a time (used while a gang is being placed tentatively).
  void allocate_member(NodeId n, std::span<const GpuShare> shares, int64_t cpu, int64_t mem);
  void release_member(NodeId n, std::span<const GpuShare> shares, int64_t cpu, int64_t mem);

  // A journal of changes: after start_journal(), every allocate and release is noted, and
  // undo_journal() reverts them all, newest first, leaving the ledger exactly as it was (the
  // invariants above make "as it was" exact, buckets included). What lets a scheduling cycle
  // try placements on the caller's own ledger and give it back unchanged, instead of copying a
  // ledger of 200,000 GPUs every cycle (Snapshot::scratch).
  void start_journal();
  void undo_journal();
  bool journaling() const { return journaling_; }

 private:
  size_t bucket_index(GpuTypeId t, int k) const { return size_t{t} * (max_k_ + 1) + k; }
  void set_gpu_free(GpuId g, int32_t value);
  void move_bucket(NodeId n, uint16_t from, uint16_t to);
  void set_partial(NodeId n, bool in);

  const Cluster* cluster_;
  int max_k_;
  std::vector<int32_t> gpu_free_;
  std::vector<uint16_t> node_free_whole_;
  std::vector<uint16_t> node_partial_gpus_;
  std::vector<int64_t> node_free_cpu_, node_free_mem_;
  std::vector<uint32_t> rack_free_whole_, spine_free_whole_, type_free_whole_;
  std::vector<int64_t> type_free_milli_;
  int64_t allocated_milli_ = 0;
  std::vector<std::vector<NodeId>> buckets_;
  std::vector<std::vector<NodeId>> partial_;
  // The journal (start_journal): each member change, its shares in journal_shares_.
  struct JournalEntry {
    NodeId node = 0;
    bool allocated = false;
    uint32_t first = 0, count = 0;  // in journal_shares_
    int64_t cpu = 0, mem = 0;
  };
  void note(NodeId n, bool allocated, std::span<const GpuShare> shares, int64_t cpu, int64_t mem);
  bool journaling_ = false;
  std::vector<JournalEntry> journal_;
  std::vector<GpuShare> journal_shares_;
};

}  // namespace tessera
