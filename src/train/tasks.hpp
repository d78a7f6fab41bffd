// Private to src/train: the tasks open_task (task.hpp) chooses from.
#pragma once

#include <memory>

#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

std::unique_ptr<Task> open_image_classification_task(const TrainConfig& config, const comm::Communicator& comm);
std::unique_ptr<Task> open_recommendation_task(const TrainConfig& config, const comm::Communicator& comm);

}  // namespace scaletrain::train
