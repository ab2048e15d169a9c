// Training datasets (docs/data.md): how large a job's data is and how fast its GPUs read it,
// for the storage tiers of a cluster (ClusterStorage) to move. The published datasets of
// Pollux's applications are built in by name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct Dataset {
  std::string name;
  double size_gb = 0;           // 10^9 bytes, what is copied to a node
  double read_mbs_per_gpu = 0;  // what one training GPU reads, MB/s (streaming from a tier)
};

// The built-in datasets (imagenet, cifar10, librispeech, movielens, squad, coco), by name.
std::optional<Dataset> known_dataset(std::string_view name);
const std::vector<Dataset>& known_datasets();
// The dataset a Pollux application trains on (bert: squad, cifar10, deepspeech2: librispeech,
// imagenet, ncf: movielens, yolov3: coco); "" for anything else.
std::string_view dataset_of_application(std::string_view app);

}  // namespace tessera
