// Readers for the measured co-location data in ../shared/data/interference and Gavel's packed
// pairs, turned into what the job recommendation service and the co-location experiment use:
// features to build the knowledge base from, a catalogue of measured jobs (features, and the
// time alone where known) and measured pair speeds. docs/colocation.md lists the sources, the
// feature mappings and the fallbacks. Bad input throws InputError naming file, line and column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "insight/job_profile.h"

namespace tessera {

// One profiled job of alnair_profiles.csv (model name and batch size are kept only to join the
// seed study's pair table; the knowledge base never sees them).
struct AlnairProfile {
  std::string model;
  int64_t batch = 0;
  JobFeatures features;
};

struct CatalogJob {
  std::string name;    // e.g. "lucid:ResNet18/CIFAR-10/bs64/amp0"
  std::string source;  // "lucid", "gavel" or "seed"
  JobFeatures features;
  double alone_seconds = 0;  // measured completion time alone (seed table), 0 if unknown
};

struct MeasuredPair {
  uint32_t a = 0, b = 0;            // catalogue indices
  double speed_a = 1, speed_b = 1;  // each job's speed beside the other, relative to alone
  double pacsav = -1;               // measured packing saving (fraction) where given, else < 0
};

struct InterferenceData {
  std::vector<JobFeatures> kb_features;  // knowledge-base training set
  std::vector<CatalogJob> jobs;
  std::vector<MeasuredPair> pairs;
  std::vector<std::string> notes;  // mappings and fallbacks taken while reading
};

// Lucid measured memory in MB; its largest co-located pair used 20,970 MB, so we take its GPU
// to have 24 GB and express memory allocated as a percentage of that.
inline constexpr double kLucidGpuMemoryMb = 24576;

// alnair_clustering_features.csv: ID,Model,Dataset,Batch Size,MGUP,MGMAP,MGTSAMP.
std::vector<JobFeatures> read_alnair_clustering_features(const std::string& path);
std::vector<JobFeatures> parse_alnair_clustering_features(const std::string& text,
                                                          const std::string& origin);
// alnair_profiles.csv: 66 columns; Model, BS, MGUP, MGMAP and MaGTSAMP are used.
std::vector<AlnairProfile> parse_alnair_profiles(const std::string& text,
                                                 const std::string& origin);

// Lucid's jobs alone (lucid_single_data.csv) and measured pairs (lucid_colocate_info.csv).
void parse_lucid(const std::string& single_text, const std::string& single_origin,
                 const std::string& colocate_text, const std::string& colocate_origin,
                 InterferenceData& out);
// The seed study's Table II (seed_jrs_inter_cluster_pairs.csv); job features come from the
// profile of the same model at the nearest batch sizes (linear in batch size).
void parse_seed_pairs(const std::string& text, const std::string& origin,
                      const std::vector<AlnairProfile>& profiles, InterferenceData& out);
// Gavel's co-located pairs on V100 (simulation_throughputs.json, scale 1); each Gavel model
// takes the features of the closest Lucid job (same family, nearest batch size), so parse_lucid
// must have run first.
void parse_gavel_pairs(const std::string& json_text, const std::string& origin,
                       InterferenceData& out);

// Reads `sources` ("all" or a comma list of lucid, seed, gavel) from the data directory (the
// one holding interference/ and philly/gavel/).
InterferenceData load_interference_data(const std::string& data_dir, const std::string& sources);

}  // namespace tessera
