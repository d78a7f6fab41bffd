// The training loop: data-parallel training over MPI ranks, one job segment of a run that may span
// several (resumed from checkpoints). It sees the all-reduce only through comm::GradientReducer
// and the data, loss and metric only through its Task (train/task.hpp), so each can be swapped;
// the run's state is one object (run_state.hpp) that checkpoints save and restore.
#pragma once

#include <string>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/train/config.hpp"

namespace scaletrain::train {

// Exit code of `scaletrain train` after a stop signal (SIGUSR1, SIGTERM): the run is
// checkpointed and wants to be resumed (EX_TEMPFAIL of sysexits.h: "try again later"). The job
// scripts requeue on it. docs/checkpoint-format.md lists every exit code.
constexpr int kExitCheckpointed = 75;

// How a job segment ended: the run is complete (every step, or the target accuracy, or
// --max-steps), it stopped for a signal after a checkpoint, or there was nothing left to do.
enum class RunEnd { completed, target_reached, max_steps, signal, already_complete };
const char* run_end_name(RunEnd end);  // "completed", "target_reached", "max_steps", "signal", "already_complete"

struct TrainResult {
  Json report;  // report.json as written (null when already_complete)
  RunEnd end = RunEnd::completed;
};

// Runs (or, per config.resume, continues) a training: writes checkpoints into
// config.output_dir/checkpoints and report.json into config.output_dir (rank 0). Collective.
// `resolved_config` is recorded verbatim in the report.
TrainResult run_training(const comm::Communicator& comm, const TrainConfig& config, const Json& resolved_config);

struct EvalResult {
  int64_t correct = 0;
  int64_t samples = 0;
  double loss = 0.0;  // mean cross-entropy (no smoothing)
  double accuracy() const { return samples ? static_cast<double>(correct) / samples : 0.0; }
};

// Top-1 accuracy on a split, sharded over ranks (every sample exactly once) and reduced.
// Batch norm runs in evaluation mode; the split is read as `data_options` say.
EvalResult evaluate(const comm::Communicator& comm, Context& ctx, models::Model& model, const data::SplitInfo& split,
                    int64_t batch_size, const EvalDataOptions& data_options = {});

}  // namespace scaletrain::train
