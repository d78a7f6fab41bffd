// The run state (run_state.hpp) written to and read from the checkpoints of a run directory,
// collectively: rank 0 reads and writes the files, the other ranks send or receive their tensors,
// and every rank learns the outcome, so that a failure stops all of them with one message and
// no rank waits for one that gave up.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/run_state.hpp"

namespace scaletrain::train {

struct CheckpointWritten {
  std::string path;
  double seconds = 0.0;  // rank 0: writing, syncing and publishing the file
  int64_t bytes = 0;
};

// Writes the run (with `segment`, the job segment in progress) to
// <run_dir>/checkpoints/step-<global step>.h5: /model holds the batch-norm statistics averaged
// over ranks, /run/rank_buffers each rank's own (so that a resume on as many ranks continues
// bit for bit). Then points `latest` at it and keeps the newest `keep`. Collective.
CheckpointWritten write_checkpoint(const comm::Communicator& comm, RunState& state, const Json& segment,
                                   const std::string& run_dir, int keep);

// A checkpoint to resume from, agreed by every rank.
struct ResumePoint {
  std::string path;
  Json state;                                              // its run state, on every rank
  std::shared_ptr<const checkpoint::CheckpointData> data;  // its tensors, on rank 0 only
  int world_size() const { return static_cast<int>(state.at("world_size").as_int()); }
  int64_t global_batch() const { return state.at("world_size").as_int() * state.at("batch_size").as_int(); }
};

// Prepares --output-dir (rank 0 creates it and proves it writable) and applies --resume and
// --overwrite to what it holds (docs/checkpoint-format.md, "Resuming"):
//   never (the default): a directory that already holds checkpoints is refused (UsageError),
//     unless --overwrite, which deletes them and report.json first;
//   auto: the newest valid checkpoint of --output-dir, or none (a new run) when it has none;
//   a file or directory: that checkpoint (the newest valid one of a directory); --output-dir
//     must then hold no checkpoints of its own.
// Damaged checkpoints are skipped with a warning naming them. Collective.
std::optional<ResumePoint> prepare_run_directory(const comm::Communicator& comm, const TrainConfig& config);

// Checks that the resume point belongs to this run (identity_differences; UsageError listing
// every difference) and copies its tensors and position into state on every rank. Collective.
void restore_run(const comm::Communicator& comm, const ResumePoint& point, RunState& state);

// Checks that a dataset fits a checkpoint of `model` (channels and classes, read from the tensors
// the registry names), with a message naming the checkpoint and the dataset.
void check_checkpoint_fits(const checkpoint::CheckpointData& data, const std::string& model, int channels,
                           int num_classes, const std::string& data_dir);

// --init-from: rank 0 reads the checkpoint's weights and buffers into state's model (checked
// against the task's dataset: Task::check_fits); every rank gets them. Collective.
void load_initial_weights(const comm::Communicator& comm, const TrainConfig& config, const Task& task, RunState& state);

}  // namespace scaletrain::train
