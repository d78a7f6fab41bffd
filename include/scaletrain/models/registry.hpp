// The models --model can name, each with its task and the training options it brings: a model's
// defaults replace the command's own where the user set neither the option nor a config file
// line (ResNet needs none: the command's defaults are the MLPerf ResNet-50 reference's). The
// registry is what `scaletrain info` lists.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace scaletrain::models {

// Tasks (train/task.hpp): what a model learns and how it is judged.
constexpr const char* kTaskImageClassification = "image_classification";
constexpr const char* kTaskRecommendation = "recommendation";
constexpr const char* kTaskTranslation = "translation";

struct ModelEntry {
  std::string name;         // --model
  std::string task;         // kTask*
  std::string description;  // one line, for `scaletrain info`
  // `scaletrain train` options (long name without --, value as on the command line).
  std::vector<std::pair<std::string, std::string>> defaults;
  // Image classifiers: the input size the model is defined for (square), and the checkpoint
  // tensors that tell a checkpoint's input channels (the first convolution's weight, dimension 1)
  // and classes (the classifier's weight, dimension 0).
  int image_size = 0;
  // The smallest input (height and width) the auxiliary heads can run on in training, where it
  // is larger than what the trunk takes (Inception-v3's head needs a 17x17 Mixed_6e map: 299);
  // 0 where any input the trunk takes will do.
  int aux_min_image_size = 0;
  std::string first_conv_weight;
  std::string classifier_weight;
  // The MLPerf benchmark the model is ("resnet", "ncf"), the MLPerf log's submission_benchmark;
  // empty for a model outside MLPerf, whose log names the model instead.
  std::string mlperf_benchmark;
};

const std::vector<ModelEntry>& model_registry();
// Throws scaletrain::Error "unknown model 'x' (known: resnet20, resnet50, ncf)".
const ModelEntry& model_entry(const std::string& name);
std::vector<std::string> model_names();
// The default weight of a model's auxiliary losses (its "aux-loss-weight" default; 0 for a model
// without auxiliary heads or a name outside the registry).
double default_aux_loss_weight(const std::string& name);

}  // namespace scaletrain::models
