// Batches of named tensors, and the choice of task by model (task.hpp).
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

std::unique_ptr<Task> open_task(const TrainConfig& c, const comm::Communicator& comm) {
  const models::ModelEntry& model = models::model_entry(c.model);
  // --verify-data: whole shards first, before HDF5 reads any of them.
  if (c.verify_data)
    for (const char* split : {"train", "val"})
      data::require_intact((std::filesystem::path(c.data_dir) / split).string(), comm);
  // The dataset's own task (its shards' `task` attribute; image shards may have none).
  const std::string data_task = data::split_task(c.data_dir, "train");
  const bool recommendation_data = data_task == data::kTaskRecommendation;
  const bool recommendation_model = model.task == models::kTaskRecommendation;
  if (recommendation_data != recommendation_model)
    throw UsageError("dataset " + c.data_dir + " is for the " +
                     (recommendation_data ? std::string("recommendation") : std::string("image classification")) +
                     " task, but --model " + c.model + " is " +
                     (recommendation_model ? "a recommendation" : "an image classification") + " model");
  if (recommendation_model) return open_recommendation_task(c, comm);
  return open_image_classification_task(c, comm);
}

}  // namespace scaletrain::train
