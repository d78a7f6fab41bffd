// The model registry (registry.hpp). NCF's defaults are the MLPerf v0.5 reference's training run
// (mlcommons/training, retired_benchmarks/ncf: Adam at a constant learning rate, no weight decay,
// 4 negatives per positive, HR@10 against 999 negatives, target 0.635), with NVIDIA's large-batch
// learning rate and betas (optim/adam.hpp) since a cluster trains it at large global batches; the
// configuration inputs/ncf_movielens.ini spells them out.
#include "scaletrain/models/registry.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain::models {

namespace {

ModelEntry image_classifier(std::string name, std::string description, int image_size, std::string first_conv_weight,
                            std::string classifier_weight, std::string mlperf_benchmark,
                            std::vector<std::pair<std::string, std::string>> defaults = {}) {
  ModelEntry e;
  e.name = std::move(name);
  e.task = kTaskImageClassification;
  e.description = std::move(description);
  e.defaults = std::move(defaults);
  e.image_size = image_size;
  e.first_conv_weight = std::move(first_conv_weight);
  e.classifier_weight = std::move(classifier_weight);
  e.mlperf_benchmark = std::move(mlperf_benchmark);
  return e;
}

ModelEntry inception_v3_entry() {
  ModelEntry e = image_classifier("inception_v3", "Inception-v3 (torchvision's, auxiliary head at 299x299)", 299,
                                  "Conv2d_1a_3x3.conv.weight", "fc.weight", "", {{"aux-loss-weight", "0.4"}});
  e.aux_min_image_size = 299;
  return e;
}

// The MLPerf Transformer reference's training (transformer_main.py, model_params.py): Adam with
// beta2 0.997 and epsilon 1e-9, the rsqrt schedule with 16000 warmup steps at peak
// 2 / sqrt(width * 16000), label smoothing 0.1, 4096 tokens per GPU (big; base: 2048); no weight
// decay, no gradient clipping. inputs/ has the configs, NVIDIA's large-batch one too.
ModelEntry transformer_entry(const std::string& name, const std::string& description, int width,
                             const std::string& batch_tokens) {
  ModelEntry e;
  e.name = name;
  e.task = kTaskTranslation;
  e.description = description;
  char peak[32];
  std::snprintf(peak, sizeof peak, "%.6g", 2.0 / std::sqrt(width * 16000.0));
  e.defaults = {
      {"optimizer", "lazy_adam"}, {"adam-beta1", "0.9"},         {"adam-beta2", "0.997"}, {"adam-epsilon", "1e-9"},
      {"lr-schedule", "rsqrt"},   {"warmup-steps", "16000"},     {"base-lr", peak},       {"weight-decay", "0"},
      {"label-smoothing", "0.1"}, {"batch-tokens", batch_tokens}};
  e.mlperf_benchmark = name == "transformer" ? "transformer" : "";
  return e;
}

ModelEntry ncf_entry() {
  ModelEntry e;
  e.name = "ncf";
  e.task = kTaskRecommendation;
  e.description = "NeuMF (MLPerf v0.5 recommendation): GMF factor 64 + MLP 256-256-128-64";
  e.defaults = {{"optimizer", "adam"},       {"base-lr", "0.0045"}, {"adam-beta1", "0.25"}, {"adam-beta2", "0.5"},
                {"lr-schedule", "constant"}, {"weight-decay", "0"}, {"batch-size", "1024"}};
  e.mlperf_benchmark = "ncf";
  return e;
}

}  // namespace

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> entries = {
      image_classifier("resnet20", "ResNet-20 for 32x32 images (He et al. 2016, CIFAR-10 form)", 32, "conv1.weight",
                       "fc.weight", "resnet"),
      image_classifier("resnet50", "ResNet-50 v1.5 (MLPerf image classification, torchvision's layout)", 224,
                       "conv1.weight", "fc.weight", "resnet"),
      // The CNNs of the LRZ DGX-1 study (models/imagenet_cnns.hpp); their training recipes are the
      // configs in inputs/. The auxiliary heads' weights: GoogLeNet's paper (0.3 per head) and
      // TF-slim's Inception-v3 recipe (0.4). The three networks without batch norm default to the
      // 0.01 of their Caffe solvers (and of torchvision's AlexNet recipe): at the trainer's 0.1
      // googlenet-caffe's loss is NaN within 3 steps of batch 2.
      image_classifier("alexnet", "AlexNet (torchvision's one-GPU form, no LRN)", 224, "features.0.weight",
                       "classifier.6.weight", "", {{"base-lr", "0.01"}}),
      image_classifier("googlenet", "GoogLeNet (torchvision's, batch norm, two auxiliary heads)", 224,
                       "conv1.conv.weight", "fc.weight", "", {{"aux-loss-weight", "0.3"}}),
      inception_v3_entry(),
      image_classifier("alexnet-caffe", "BVLC Caffe's bvlc_alexnet (LRN, grouped convolutions, 227x227)", 227,
                       "conv1.weight", "fc8.weight", "", {{"preprocess", "caffe"}, {"base-lr", "0.01"}}),
      image_classifier("googlenet-caffe", "BVLC Caffe's bvlc_googlenet (LRN, no batch norm, loss1/loss2 heads)", 224,
                       "conv1.7x7_s2.weight", "loss3.classifier.weight", "",
                       {{"aux-loss-weight", "0.3"}, {"preprocess", "caffe"}, {"base-lr", "0.01"}}),
      ncf_entry(),
      transformer_entry("transformer",
                        "Transformer big (MLPerf translation): 6+6 layers, width 1024, 16 heads, "
                        "feed-forward 4096",
                        1024, "4096"),
      transformer_entry("transformer-base", "Transformer base: 6+6 layers, width 512, 8 heads, feed-forward 2048", 512,
                        "2048"),
      transformer_entry("transformer-tiny",
                        "Transformer for tests and demos: 2+2 layers, width 128, 4 heads, "
                        "feed-forward 512",
                        128, "2048"),
  };
  return entries;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelEntry& e : model_registry()) names.push_back(e.name);
  return names;
}

double default_aux_loss_weight(const std::string& name) {
  for (const ModelEntry& e : model_registry()) {
    if (e.name != name) continue;
    for (const auto& [option, value] : e.defaults)
      if (option == "aux-loss-weight") return std::stod(value);
  }
  return 0.0;
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
