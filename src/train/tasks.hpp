// Private to src/train: the tasks open_task (task.hpp) chooses from.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

std::unique_ptr<Task> open_image_classification_task(const TrainConfig& config, const comm::Communicator& comm);
std::unique_ptr<Task> open_recommendation_task(const TrainConfig& config, const comm::Communicator& comm);
std::unique_ptr<Task> open_translation_task(const TrainConfig& config, const comm::Communicator& comm);
std::unique_ptr<Task> translation_of_shape(const TrainConfig& config, const DataShape& shape);
std::unique_ptr<Task> translation_for_evaluation(const TrainConfig& config, const std::string& split);
DataShape translation_shape_of(const TrainConfig& config, const checkpoint::CheckpointData& data);
std::unique_ptr<Task> image_classification_of_shape(const TrainConfig& config, const DataShape& shape);
std::unique_ptr<Task> recommendation_of_shape(const TrainConfig& config, const DataShape& shape);
std::unique_ptr<Task> image_classification_for_evaluation(const TrainConfig& config, const std::string& split);
std::unique_ptr<Task> recommendation_for_evaluation(const TrainConfig& config, const std::string& split);
DataShape image_classification_shape_of(const TrainConfig& config, const checkpoint::CheckpointData& data);
DataShape recommendation_shape_of(const TrainConfig& config, const checkpoint::CheckpointData& data);

// The shape of the checkpoint's tensor `name`, which must be there with dims.size() dimensions,
// each at least 1 (dims name them for messages: {"classes", "features"}); otherwise an error
// naming the checkpoint and the tensor.
Shape checkpoint_tensor_shape(const checkpoint::CheckpointData& data, const std::string& name,
                              const std::vector<std::string>& dims);

// A task's splits as (directory, unchecked shards): report.json's "unchecked_shards" {"count",
// "paths"}, each directory once (an evaluation's task holds its split twice). The start-up warning
// is given when the task opens, before libhdf5 parses a shard (task.cpp).
using UncheckedShards = std::vector<std::pair<std::string, std::vector<std::string>>>;
Json unchecked_shards_json(const UncheckedShards& splits);

// For a task opened from a shape (its data has no files): throws naming what was asked of it.
void require_files(const std::string& dir, const char* what);

}  // namespace scaletrain::train
