// Batches of named tensors, and the task of a model, from the model registry (task.hpp).
#include "scaletrain/train/task.hpp"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/data/manifest.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/models/registry.hpp"
#include "train/tasks.hpp"

namespace scaletrain::train {

Tensor& Batch::slot(const std::string& name) {
  for (auto& [n, t] : tensors_)
    if (n == name) return t;
  tensors_.emplace_back(name, Tensor());
  return tensors_.back().second;
}

const Tensor& Batch::at(const std::string& name) const {
  std::string names;
  for (const auto& [n, t] : tensors_) {
    if (n == name) return t;
    names += (names.empty() ? "" : ", ") + n;
  }
  ST_THROW("internal: the batch has no tensor '" << name << "' (it has: " << names << ")");
}

int64_t Batch::size() const { return tensors_.empty() ? 0 : tensors_.front().second.dim(0); }

std::vector<std::string> Batch::names() const {
  std::vector<std::string> out;
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

Batch Batch::rows(int64_t first, int64_t count) const {
  Batch out;
  for (const auto& [name, t] : tensors_) {
    ST_CHECK(first >= 0 && count >= 0 && first + count <= t.dim(0),
             "internal: rows [" << first << ", " << first + count << ") of a batch of " << t.dim(0));
    if (first == 0 && count == t.dim(0)) {
      out.slot(name) = t;
      continue;
    }
    Shape shape = t.shape();
    const int64_t row = t.numel() / shape[0];
    shape[0] = count;
    out.slot(name) = Tensor::view_of(t, first * row, shape);
  }
  return out;
}

namespace {

using TaskOpener = std::unique_ptr<Task> (*)(const TrainConfig&, const comm::Communicator&);
using ShapeOpener = std::unique_ptr<Task> (*)(const TrainConfig&, const DataShape&);
using EvaluationOpener = std::unique_ptr<Task> (*)(const TrainConfig&, const std::string& split);
using CheckpointShape = DataShape (*)(const TrainConfig&, const checkpoint::CheckpointData&);

// The tasks, by the name the model registry gives a model's task and a dataset's shards carry
// (their `task` attribute; image shards written before it existed have none).
struct TaskEntry {
  const char* name;
  const char* words;  // for messages
  TaskOpener open;
  ShapeOpener of_shape;
  EvaluationOpener for_evaluation;
  CheckpointShape shape_of_checkpoint;  // the network's shape, read from a checkpoint's tensors
  const char* only_split;               // the one split it evaluates (null: any)
  const char* only_split_holds;         // and what that split holds, for the refusal of another
};
constexpr TaskEntry kTasks[] = {
    {models::kTaskImageClassification, "image classification", open_image_classification_task,
     image_classification_of_shape, image_classification_for_evaluation, image_classification_shape_of, nullptr,
     nullptr},
    {models::kTaskRecommendation, "recommendation", open_recommendation_task, recommendation_of_shape,
     recommendation_for_evaluation, recommendation_shape_of, "val", "the held-out items and their negatives"},
    {models::kTaskTranslation, "translation", open_translation_task, translation_of_shape, translation_for_evaluation,
     translation_shape_of, nullptr, nullptr},
};

const TaskEntry* find_task(const std::string& name) {
  for (const TaskEntry& t : kTasks)
    if (name == t.name) return &t;
  return nullptr;
}

const TaskEntry& task_of_model(const std::string& model) {
  const TaskEntry* entry = find_task(models::model_entry(model).task);
  ST_CHECK(entry, "internal: --model " << model << "'s task has no entry in the task table");
  return *entry;
}

// --require-checksums on every split, the verdict agreed over the ranks (data::require_checksums_agreed).
void require_checksums(const TrainConfig& c, const std::vector<std::string>& splits, const comm::Communicator& comm) {
  std::vector<std::string> dirs;
  for (const std::string& split : splits) dirs.push_back((std::filesystem::path(c.data_dir) / split).string());
  data::require_checksums_agreed(dirs, c.verify_data, comm);
}

// Rank 0 names each split's unchecked shards before libhdf5 parses any of them, so that a damaged
// one that libhdf5 then fails on (or reads out of bounds) has been named first.
void warn_of_unchecked_shards(const TrainConfig& c, const std::vector<std::string>& splits,
                              const comm::Communicator& comm) {
  if (comm.rank() != 0) return;
  for (const std::string& split : splits) {
    const std::string dir = (std::filesystem::path(c.data_dir) / split).string();
    const std::vector<std::string> unchecked = data::unchecked_shards_of_split(dir);
    if (!unchecked.empty()) ST_WARN(data::unchecked_shards_warning(dir, unchecked));
  }
}

// The dataset's split must be of the model's task (its shards' attribute; shards without one are
// image classification's). --require-checksums, then --verify-data: the splits' whole shards
// first, before HDF5 reads any; then the warning about shards nothing checks.
void check_dataset_task(const TrainConfig& c, const TaskEntry& model_task, const std::vector<std::string>& splits,
                        const comm::Communicator& comm) {
  if (c.require_checksums) require_checksums(c, splits, comm);
  if (c.verify_data)
    for (const std::string& split : splits)
      data::require_intact((std::filesystem::path(c.data_dir) / split).string(), comm);
  warn_of_unchecked_shards(c, splits, comm);
  std::string data_task_name = data::split_task(c.data_dir, splits.front());
  if (data_task_name.empty()) data_task_name = models::kTaskImageClassification;
  const TaskEntry* data_task_entry = find_task(data_task_name);
  if (!data_task_entry)
    throw UsageError("dataset " + c.data_dir + " is for the task '" + data_task_name + "', which --model " + c.model +
                     " (" + model_task.words + ") is not");
  const TaskEntry& data_task = *data_task_entry;
  if (&data_task != &model_task)
    throw UsageError("dataset " + c.data_dir + " is for the " + data_task.words + " task, but --model " + c.model +
                     " is " + (model_task.name == std::string(models::kTaskImageClassification) ? "an " : "a ") +
                     model_task.words + " model");
}

}  // namespace

Json unchecked_shards_json(const UncheckedShards& splits) {
  std::vector<std::string> paths;
  std::set<std::string> seen;
  for (const auto& [dir, unchecked] : splits)
    if (seen.insert(dir).second) paths.insert(paths.end(), unchecked.begin(), unchecked.end());
  Json j = Json::object();
  j.set("count", static_cast<int64_t>(paths.size()));
  j.set("paths", Json::array_of(paths));
  return j;
}

void require_files(const std::string& dir, const char* what) {
  ST_CHECK(!dir.empty(), "internal: " << what << " of a dataset known by its shape only (it has no files)");
}

std::unique_ptr<Task> open_task_of_shape(const TrainConfig& c, const DataShape& shape) {
  return task_of_model(c.model).of_shape(c, shape);
}

Shape checkpoint_tensor_shape(const checkpoint::CheckpointData& data, const std::string& name,
                              const std::vector<std::string>& dims) {
  const auto it = data.tensors.find(name);
  ST_CHECK(it != data.tensors.end(), "checkpoint " << data.path << " has no " << name);
  const Shape& shape = it->second.shape();
  bool fits = shape.size() == dims.size();
  for (int64_t d : shape) fits = fits && d >= 1;
  if (!fits) {
    std::string expected;
    for (const std::string& d : dims) expected += (expected.empty() ? "" : ", ") + d;
    ST_THROW("checkpoint " << data.path << ": " << name << " has shape " << shape_string(shape) << ", expected ["
                           << expected << "], each at least 1");
  }
  return shape;
}

// The model's name first: another model's tensors would be reported missing, which misleads.
std::unique_ptr<Task> open_task_of_checkpoint(const TrainConfig& c, const checkpoint::CheckpointData& data) {
  ST_CHECK(data.meta.model == c.model,
           "checkpoint " << data.path << " is for model " << data.meta.model << ", not " << c.model);
  const TaskEntry& task = task_of_model(c.model);
  return task.of_shape(c, task.shape_of_checkpoint(c, data));
}

std::unique_ptr<Task> open_task(const TrainConfig& c, const comm::Communicator& comm) {
  const TaskEntry& model_task = task_of_model(c.model);
  check_dataset_task(c, model_task, {"train", "val"}, comm);
  return model_task.open(c, comm);
}

std::unique_ptr<Task> open_task_for_evaluation(const TrainConfig& c, const std::string& split,
                                               const comm::Communicator& comm) {
  const TaskEntry& model_task = task_of_model(c.model);
  if (model_task.only_split && split != model_task.only_split)
    throw UsageError("--split " + split + ": --model " + c.model + " evaluates its dataset's " + model_task.only_split +
                     " split (" + model_task.only_split_holds + ")");
  check_dataset_task(c, model_task, {split}, comm);
  return model_task.for_evaluation(c, split);
}

}  // namespace scaletrain::train
