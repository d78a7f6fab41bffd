// The model registry (registry.hpp). NCF's defaults are the MLPerf v0.5 reference's training run
// (mlcommons/training, retired_benchmarks/ncf: Adam at a constant learning rate, no weight decay,
// 4 negatives per positive, HR@10 against 999 negatives, target 0.635), with NVIDIA's large-batch
// learning rate and betas (optim/adam.hpp) since a cluster trains it at large global batches; the
// configuration inputs/ncf_movielens.ini spells them out.
#include "scaletrain/models/registry.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::models {

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> entries = {
      {"resnet20", kTaskImageClassification, "ResNet-20 for 32x32 images (He et al. 2016, CIFAR-10 form)", {}},
      {"resnet50", kTaskImageClassification, "ResNet-50 v1.5 (MLPerf image classification, torchvision's layout)", {}},
      {"ncf",
       kTaskRecommendation,
       "NeuMF (MLPerf v0.5 recommendation): GMF factor 64 + MLP 256-256-128-64",
       {{"optimizer", "adam"},
        {"base-lr", "0.0045"},
        {"adam-beta1", "0.25"},
        {"adam-beta2", "0.5"},
        {"lr-schedule", "constant"},
        {"weight-decay", "0"},
        {"batch-size", "1024"}}},
  };
  return entries;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelEntry& e : model_registry()) names.push_back(e.name);
  return names;
}

const ModelEntry& model_entry(const std::string& name) {
  std::string known;
  for (const ModelEntry& e : model_registry()) {
    if (e.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.name;
  }
  ST_THROW("unknown model '" << name << "' (known: " << known << ")");
}

}  // namespace scaletrain::models
