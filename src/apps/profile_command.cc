// tessera profile: runs a job on one GPU for its first minutes and reports its black-box
// profile (peak GPU utilisation, peak memory allocated, peak time accessing memory), the
// features the recommendation service clusters jobs by.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "apps/data_dir.h"
#include "apps/gpu_commands.h"
#include "apps/json_file.h"
#include "backend/process_profiler.h"
#include "insight/knowledge_base.h"
#include "sim/colocation_experiment.h"
#include "sim/interference_data.h"

namespace tessera {

CLI::App* add_profile_command(CLI::App& app, ProfileArgs& a) {
  CLI::App* s = app.add_subcommand(
      "profile",
      "Run a job on one GPU and report its black-box profile: tessera profile [options] -- CMD");
  s->add_option("--gpu", a.gpu, "GPU index (as nvidia-smi numbers it) the job runs on");
  s->add_option("--window", a.window, "seconds to profile (the job's first minutes)");
  s->add_option("--interval", a.interval, "seconds between samples");
  s->add_flag("--keep-running", a.keep_running,
              "let the job run on after the window and wait for it (default: stop it)");
  s->add_option("--nvidia-smi", a.nvidia_smi, "nvidia-smi binary (default: on PATH)");
  s->add_option("--json", a.json_out, "write the profile as JSON to this file");
  s->add_option("--data-dir", a.data_dir,
                "measured data holding interference/ for the knowledge base (default: "
                "$TESSERA_DATA or ../shared/data)");
  s->add_flag("--no-kb", a.no_kb, "do not place the job in the knowledge base");
  s->add_option("command", a.command, "the job's command line (after --)")->required();
  return s;
}

namespace {

std::string data_dir(const ProfileArgs& a) {
  return data_dir_or_default(a.data_dir);
}

// Places the profile in the knowledge base built from the measured jobs (k by the elbow) and
// ranks the clusters it would best share a GPU with, by the measured interference.
nlohmann::ordered_json place_in_knowledge_base(const JobFeatures& f, const std::string& dir,
                                               std::string& text) {
  const InterferenceData data = load_interference_data(dir, "lucid");
  const KnowledgeBase kb = KnowledgeBase::build(data.kb_features, KnowledgeBaseOptions{});
  const ColocWorld world = make_colocation_world(data, kb);
  const ClusterAssignment as = kb.assign(f);
  const FeatureVec& c = kb.centres()[as.cluster];
  nlohmann::ordered_json j;
  j["k"] = kb.k();
  j["cluster"] = as.cluster;
  j["uncertainty"] = as.uncertainty;
  j["centre"] = {{"MGUP", c[0]}, {"MGMAP", c[1]}, {"MGTSAMP", c[2]}};
  std::vector<uint32_t> partners(kb.k());
  for (uint32_t b = 0; b < kb.k(); ++b) partners[b] = b;
  const InterferenceModel& m = world.seeded;
  std::stable_sort(partners.begin(), partners.end(), [&](uint32_t x, uint32_t y) {
    return m.pair_indsd(as.cluster, x) < m.pair_indsd(as.cluster, y);
  });
  text += fmt::format(
      "knowledge base ({} clusters by the elbow, from {} measured jobs): cluster {} "
      "(centre {:.1f} / {:.1f} / {:.1f}), uncertainty {:.1f}\n"
      "best partners (by measured slowdown):\n",
      kb.k(), data.kb_features.size(), as.cluster, c[0], c[1], c[2], as.uncertainty);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (uint32_t b : partners) {
    list.push_back({{"cluster", b},
                    {"indsd_self", m.indsd(as.cluster, b)},
                    {"indsd_partner", m.indsd(b, as.cluster)},
                    {"pacsav", m.pacsav(as.cluster, b)}});
    text += fmt::format(
        "  beside cluster {}: this job {:.1f} % slower, the other {:.1f} %, "
        "packing saving {:.1f} %\n",
        b, 100 * m.indsd(as.cluster, b), 100 * m.indsd(b, as.cluster),
        100 * m.pacsav(as.cluster, b));
  }
  j["partners"] = list;
  return j;
}

}  // namespace

int run_profile(const ProfileArgs& a) {
  ProfileRunOptions opt;
  opt.command = a.command;
  opt.gpu = a.gpu;
  opt.window_seconds = a.window;
  opt.interval_seconds = a.interval;
  opt.keep_running = a.keep_running;
  opt.nvidia_smi = a.nvidia_smi;
  const ProfileRunResult r = profile_command(opt);
  const JobFeatures& f = r.features;
  nlohmann::ordered_json j;
  j["gpu"] = a.gpu;
  j["gpu_name"] = r.gpu_name;
  j["features"] = {{"MGUP", f.gpu_util}, {"MGMAP", f.mem_alloc}, {"MGTSAMP", f.mem_time}};
  j["samples"] = r.samples.size();
  j["complete"] = r.complete;
  j["job_exited"] = r.job_exited;
  if (r.job_exited) j["exit_status"] = r.exit_status;
  j["counters_missing"] = r.counters_missing;
  nlohmann::ordered_json series = nlohmann::ordered_json::array();
  for (const ProfileSample& s : r.samples) {
    series.push_back({s.t, s.gpu_util, s.mem_alloc, s.mem_time});
  }
  j["series"] = {{"columns", {"t", "gpu_util", "mem_alloc", "mem_time"}}, {"rows", series}};
  std::string kb_text;
  const std::string dir = data_dir(a);
  if (!a.no_kb && std::filesystem::exists(std::filesystem::path(dir) / "interference")) {
    j["knowledge_base"] = place_in_knowledge_base(f, dir, kb_text);
  }
  write_json_file(a.json_out, j);
  std::cout << fmt::format(
      "GPU {} ({}): {} samples over {}\n"
      "peak GPU utilisation (MGUP)                {:6.1f} %\n"
      "peak GPU memory allocated (MGMAP)          {:6.1f} %\n"
      "peak GPU time accessing memory (MGTSAMP)   {:6.1f} %\n",
      a.gpu, r.gpu_name, r.samples.size(),
      r.complete ? fmt::format("the whole {:g} s window", a.window)
                 : fmt::format("{:.1f} s (the job ended before the window)",
                               r.samples.empty() ? 0.0 : r.samples.back().t),
      f.gpu_util, f.mem_alloc, f.mem_time);
  std::cout << kb_text;
  if (r.counters_missing) {
    std::cout << "note: the driver did not report some counters (e.g. under MIG); they count "
                 "as 0\n";
  }
  if (r.job_exited && r.exit_status != 0) {
    std::cout << fmt::format("note: the job exited with status {}\n", r.exit_status);
  }
  return 0;
}

}  // namespace tessera
