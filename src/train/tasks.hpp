// Private to src/train: the tasks open_task (task.hpp) chooses from.
#pragma once

#include <memory>
#include <string>

#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

std::unique_ptr<Task> open_image_classification_task(const TrainConfig& config, const comm::Communicator& comm);
std::unique_ptr<Task> open_recommendation_task(const TrainConfig& config, const comm::Communicator& comm);
std::unique_ptr<Task> image_classification_of_shape(const TrainConfig& config, const DataShape& shape);
std::unique_ptr<Task> recommendation_of_shape(const TrainConfig& config, const DataShape& shape);
std::unique_ptr<Task> image_classification_for_evaluation(const TrainConfig& config, const std::string& split);
std::unique_ptr<Task> recommendation_for_evaluation(const TrainConfig& config, const std::string& split);

// For a task opened from a shape (its data has no files): throws naming what was asked of it.
void require_files(const std::string& dir, const char* what);

}  // namespace scaletrain::train
