// Network: what every trainable model is to the training loop, the checkpoints and the optimizers:
// a name and a ParameterSet, initialised from a seed. How inputs reach it and what its outputs
// mean is its task's business (train/task.hpp): an image classifier (Model) takes a batch of
// images, NeuMF takes (user, item) pairs.
#pragma once

#include <cstdint>
#include <string>

#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/registry.hpp"

namespace scaletrain::models {

class Network {
 public:
  virtual ~Network() = default;
  // The --model name ("resnet50", "ncf"); checkpoints record it.
  virtual const std::string& name() const = 0;
  virtual nn::ParameterSet& params() = 0;
  // The model's own seeded initialisation (torchvision's, the MLPerf reference's).
  virtual void initialize(uint64_t seed) = 0;
  // The ops its forward runs in evaluation, and with `training` in training and backward too
  // (nn::Module::list_ops): --device asks each of them of the device.
  virtual ops::OpNames ops(bool training) const = 0;
  // Where the random draws of the next training forward (dropout masks) come from: the training
  // step calls it before each micro-batch's forward, with the number of optimizer steps taken
  // (RunPosition::global_step, which a checkpoint restores), the micro-batch within the step and
  // the rank, so that a resumed run draws what an uninterrupted one draws (nn/dropout.hpp). A
  // network without random layers ignores it.
  virtual void set_random_position(int64_t global_step, int micro_batch, int rank) {}
};

}  // namespace scaletrain::models
