// Checkpoints: one HDF5 file holding a model's parameters and buffers under their torchvision
// state_dict names and PyTorch shapes, so that a checkpoint moves to and from PyTorch with a few
// lines of h5py, plus the SGD momentum. The format is specified in docs/checkpoint-format.md:
//   /model/<name>       float32, PyTorch shape, for every parameter and buffer
//   /optimizer/<name>   float32 momentum buffer of every parameter (when saved with an optimizer)
//   root attributes     scaletrain_checkpoint_format (1), model (string), epoch, step (integers)
// Writing is atomic: "<path>.tmp" is written, flushed, closed and fsync'd, then renamed to path,
// so a crash never leaves a half-written file under the published name. Not collective: the
// trainer calls save on rank 0 only.
#pragma once

#include <cstdint>
#include <string>

#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/sgd.hpp"

namespace scaletrain::checkpoint {

constexpr int kCheckpointFormat = 1;

struct CheckpointMeta {
  int format = kCheckpointFormat;
  std::string model;
  int64_t epoch = 0;  // epochs completed when the checkpoint was taken
  int64_t step = 0;   // optimizer steps taken
};

// Writes every parameter and buffer of params (and sgd's momentum when sgd is not null) to path
// atomically; meta.format is ignored (the writer writes kCheckpointFormat).
void save_checkpoint(const std::string& path, const CheckpointMeta& meta, nn::ParameterSet& params,
                     optim::Sgd* sgd /*nullable*/);

// Reads the root attributes; throws a clear error naming the file when it is missing, not HDF5,
// not a scaletrain checkpoint, or of a format this build cannot read.
CheckpointMeta read_checkpoint_meta(const std::string& path);

// Loads model weights and buffers into params; if sgd != nullptr and the file has /optimizer,
// loads the momentum too (otherwise the momentum is left as it is). Everything is checked before
// anything is changed: clear errors name the file for a model other than expected_model
// ("checkpoint X is for model resnet50, not resnet20"; an empty expected_model skips this), and
// list every missing tensor, tensor of another shape (both shapes named) and unexpected extra
// tensor. PyTorch's "*.num_batches_tracked" entries (not used here) are ignored.
CheckpointMeta load_checkpoint(const std::string& path, const std::string& expected_model, nn::ParameterSet& params,
                               optim::Sgd* sgd);

}  // namespace scaletrain::checkpoint
