// Checkpoints: one HDF5 file holding a model's parameters and buffers under their torchvision
// state_dict names and PyTorch shapes, so that a checkpoint moves to and from PyTorch with a few
// lines of h5py, plus the whole optimizer state and the training run's own state. The format is
// specified in docs/checkpoint-format.md:
//   /model/<name>       float32, PyTorch shape, for every parameter and buffer
//   /optimizer/<name>   float32 momentum buffer of every parameter (when saved with an optimizer;
//                       Adam's first moment, PyTorch's exp_avg)
//   /optimizer/<name>.<key>  the optimizer's further state (Optimizer::extra_state(): Adam's
//                       exp_avg_sq); attribute "step" of /optimizer: its steps()
//   /run                the run's state as JSON text (attribute "state") and its tensors
//   root attributes     scaletrain_checkpoint_format (2), model (string), epoch, step (integers),
//                       checksum_crc32 (of every dataset and the run state)
// Writing is atomic: "<path>.tmp" is written, flushed, closed, sealed (its size and XXH3-64 in
// an HDF5 user block, io/file_checksum.hpp) and fsync'd, then renamed to path, so a crash never
// leaves a half-written file under the published name; the seal and the checksum catch what
// happens to the file afterwards. Not collective: the trainer calls save on rank 0 only.
// Reading checks the seal before HDF5 opens the file (a damaged byte of HDF5 metadata can crash
// or hang the library), then verifies everything (format, checksum) before any weight is touched.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/optim/optimizer.hpp"

namespace scaletrain::checkpoint {

constexpr int kCheckpointFormat = 2;  // written; format 1 (no /run, no checksum) is still read

struct CheckpointMeta {
  int format = kCheckpointFormat;
  std::string model;
  int64_t epoch = 0;  // epochs completed when the checkpoint was taken
  int64_t step = 0;   // optimizer steps taken
};

// What a training run adds besides the model and the optimizer: its state as JSON text (the
// /run attribute "state"; the trainer defines its keys) and named float32 tensors (/run/<name>).
struct RunRecord {
  std::string state;
  std::map<std::string, Tensor> tensors;
};

struct SaveOptions {
  // Whose state to store under /optimizer: the momentum, extra_state() and steps() (any optimizer).
  optim::Optimizer* optimizer = nullptr;
  // Flat buffer values (params.flat_buffers() layout) to store under /model instead of params'
  // own, e.g. the mean of every rank's batch-norm statistics.
  const Tensor* buffers = nullptr;
  const RunRecord* run = nullptr;  // /run (absent when null)
};

// Writes params (and what options add) to path atomically; meta.format is ignored. A failure
// (disk full, quota, permissions) is an error naming path and the reason, removes the temporary
// file and leaves whatever was at path before untouched.
void save_checkpoint(const std::string& path, const CheckpointMeta& meta, nn::ParameterSet& params,
                     const SaveOptions& options = {});

// A checkpoint file read whole and verified: its metadata, every dataset by its path
// ("model/conv1.weight", "optimizer/conv1.weight", "run/rank_buffers") and the run state.
struct CheckpointData {
  std::string path;
  CheckpointMeta meta;
  std::map<std::string, Tensor> tensors;  // float32
  std::string run_state;                  // empty when the file has no /run
  bool has_checksum = false;              // false for files written by other tools (format 1)
  std::string optimizer_kind;             // /optimizer attribute "kind"; empty when absent
  int64_t optimizer_step = -1;            // /optimizer attribute "step"; -1 when absent (older files)
  // Whether any tensor lies in `group` ("model", "optimizer", "run").
  bool has_group(const std::string& group) const;
};

// Reads and verifies a checkpoint file; throws a clear error naming the file when it is missing,
// its seal does not match its bytes (cut short, overwritten), it is not HDF5 (or truncated), not
// a scaletrain checkpoint, of a format this build cannot read, or when its checksum does not match
// its contents. Files without a seal (other tools', older versions') skip only the seal check.
CheckpointData read_checkpoint(const std::string& path);

// Copies /model into params and, when optimizer is not null and the file has /optimizer, the
// optimizer's whole state: momentum, extra_state() and steps() (from the "step" attribute, or the
// file's step when an older file has none). Everything is checked before anything is changed:
// clear errors name the file for a model other than expected_model ("checkpoint X is for model
// resnet50, not resnet20"; an empty expected_model skips this), for optimizer state written by
// another optimizer (its "kind") or lacking the optimizer's extra state (an Adam resume from a
// file without exp_avg_sq), and list every missing tensor, tensor of another shape (both shapes
// named) and unexpected extra tensor. PyTorch's "*.num_batches_tracked" entries are ignored.
void restore_model(const CheckpointData& data, const std::string& expected_model, nn::ParameterSet& params,
                   optim::Optimizer* optimizer /*nullable*/);

// read_checkpoint + restore_model; `path` may also be a run directory (its newest valid
// checkpoint, run_directory.hpp). Returns the file's metadata.
CheckpointMeta load_checkpoint(const std::string& path, const std::string& expected_model, nn::ParameterSet& params,
                               optim::Optimizer* optimizer /*nullable*/);

// Only the root attributes, after the seal check (no checksum verification).
CheckpointMeta read_checkpoint_meta(const std::string& path);

}  // namespace scaletrain::checkpoint
