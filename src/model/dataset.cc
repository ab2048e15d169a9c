#include "model/dataset.h"

namespace tessera {

// Sizes are the published download sizes of the training (and validation) data; read rates are
// what one V100 training the application consumes at its published throughput (docs/data.md,
// where each number's source is given).
const std::vector<Dataset>& known_datasets() {
  static const std::vector<Dataset> kAll = {
      // ILSVRC-2012: 1,281,167 training images (138 GB) + 50,000 validation (6.3 GB);
      // ResNet-50 trains at about 1,200 images/s per V100, about 110 kB each.
      {"imagenet", 144.3, 132},
      // CIFAR-10 python version: 60,000 32x32 images, 163 MB.
      {"cifar10", 0.163, 5},
      // LibriSpeech 960 h: train-clean-100 6.4 GB + train-clean-360 23 GB + train-other-500
      // 30.6 GB, plus dev and test (1.3 GB).
      {"librispeech", 61.3, 20},
      // MovieLens 20M: 20 million ratings, ml-20m.zip 190 MB.
      {"movielens", 0.19, 2},
      // SQuAD v1.1: train-v1.1.json 30 MB + dev-v1.1.json 4.9 MB.
      {"squad", 0.035, 1},
      // COCO 2017: train2017 18 GB + val2017 1 GB + annotations 0.24 GB.
      {"coco", 19.3, 60},
  };
  return kAll;
}

std::optional<Dataset> known_dataset(std::string_view name) {
  for (const Dataset& d : known_datasets()) {
    if (d.name == name) return d;
  }
  return std::nullopt;
}

std::string_view dataset_of_application(std::string_view app) {
  if (app == "bert") return "squad";
  if (app == "cifar10") return "cifar10";
  if (app == "deepspeech2") return "librispeech";
  if (app == "imagenet") return "imagenet";
  if (app == "ncf") return "movielens";
  if (app == "yolov3") return "coco";
  return "";
}

}  // namespace tessera
