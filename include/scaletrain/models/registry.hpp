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

struct ModelEntry {
  std::string name;         // --model
  std::string task;         // kTask*
  std::string description;  // one line, for `scaletrain info`
  // `scaletrain train` options (long name without --, value as on the command line).
  std::vector<std::pair<std::string, std::string>> defaults;
};

const std::vector<ModelEntry>& model_registry();
// Throws scaletrain::Error "unknown model 'x' (known: resnet20, resnet50, ncf)".
const ModelEntry& model_entry(const std::string& name);
std::vector<std::string> model_names();

}  // namespace scaletrain::models
