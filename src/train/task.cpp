// Batches of named tensors, and the task of a model, from the model registry (task.hpp).
#include "scaletrain/train/task.hpp"

#include <filesystem>

#include "scaletrain/core/error.hpp"
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

// The tasks, by the name the model registry gives a model's task and a dataset's shards carry
// (their `task` attribute; image shards written before it existed have none).
struct TaskEntry {
  const char* name;
  const char* words;  // for messages
  TaskOpener open;
};
constexpr TaskEntry kTasks[] = {
    {models::kTaskImageClassification, "image classification", open_image_classification_task},
    {models::kTaskRecommendation, "recommendation", open_recommendation_task},
};

const TaskEntry* find_task(const std::string& name) {
  for (const TaskEntry& t : kTasks)
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace

std::unique_ptr<Task> open_task(const TrainConfig& c, const comm::Communicator& comm) {
  const TaskEntry* model_task_entry = find_task(models::model_entry(c.model).task);
  ST_CHECK(model_task_entry, "internal: --model " << c.model << "'s task has no entry in the task table");
  const TaskEntry& model_task = *model_task_entry;
  // --verify-data: whole shards first, before HDF5 reads any of them.
  if (c.verify_data)
    for (const char* split : {"train", "val"})
      data::require_intact((std::filesystem::path(c.data_dir) / split).string(), comm);
  // The dataset's own task; shards without the attribute are image classification's.
  std::string data_task_name = data::split_task(c.data_dir, "train");
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
  return model_task.open(c, comm);
}

}  // namespace scaletrain::train
