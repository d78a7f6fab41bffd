// The run as explicit state: one object holds everything that decides the rest of a training
// run: the model's parameters and buffers, the optimizer's state, the learning-rate schedule and
// its position, where the data plan stands, the results so far and the run's history. A
// checkpoint is this object written down (train/checkpointing.hpp), and a resumed run is this
// object read back; later additions (device, loss scale, MLPerf log) join it and are saved by the
// same code.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/optim/lr_schedule.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/loss_scaler.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

// Where the run stands. The data plan is a pure function of (seeds and shuffling in the
// identity, epoch, ranks, batch size), so its position is (epoch, step_in_epoch).
struct RunPosition {
  int64_t epoch = 0;          // the epoch in progress, from 0 (= epochs completed)
  int64_t step_in_epoch = 0;  // its steps already taken
  int64_t global_step = 0;    // optimizer steps taken: the learning-rate schedule's position
  int64_t samples_seen = 0;   // training samples consumed, all ranks together
  int64_t units_seen = 0;     // the task's unit of work (Task::work_unit): samples, or tokens
  // The sum over the epoch's steps of the training loss averaged over ranks, for the steps
  // before this segment began the epoch (0 when it began it); see RunState::epoch_loss_here.
  double epoch_loss_sum = 0.0;
};

struct RunResults {
  double best_accuracy = -1.0;  // < 0: not evaluated yet
  double last_accuracy = -1.0;
  double time_to_target_s = -1.0;  // < 0: not reached
  // The time-to-target clock: training-loop time (steps, evaluations, checkpoints) of every
  // segment so far, up to the checkpoint each later one resumed from.
  double clock_s = 0.0;
  double train_s = 0.0;  // time in training steps alone (the slowest rank), every segment so far
};

class RunState {
 public:
  // A new run of `task`: its model initialised with config.seed, zero momentum, position 0; the
  // data plan for world_size ranks of batch_size samples each.
  RunState(const TrainConfig& config, const Task& task, int64_t steps_per_epoch, int world_size, int64_t batch_size);
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  models::Network& model() { return *model_; }
  nn::ParameterSet& params() { return model_->params(); }
  optim::Optimizer& optimizer() { return *optimizer_; }
  // Moves the parameters, gradients, buffers and optimizer state to `device` (set up on the CPU,
  // trained where the Context runs).
  void move_to(Device device) {
    params().move_to(device);
    optimizer_->move_state_to(device);
  }
  const optim::LrSchedule& schedule() const { return schedule_; }
  double learning_rate() const { return schedule_.at(position.global_step); }

  RunPosition position;
  RunResults results;
  int world_size = 1;
  int64_t batch_size =
      0;  // per rank and optimizer step (all its micro-batches); global batch = world_size x batch_size
  int64_t steps_per_epoch = 0;
  // What a checkpoint must share with this run to be resumed by it (model, dataset, global
  // batch, seeds, shuffling, augmentation, schedule, optimizer settings): option -> value.
  Json identity;
  // This rank's own training losses summed over the steps this segment trained of the epoch in
  // progress (not saved: a checkpoint adds their mean over ranks to position.epoch_loss_sum, so
  // that it does not depend on the number of ranks).
  double epoch_loss_here = 0.0;
  // The sum over the epoch's steps so far of the training loss averaged over ranks. Collective.
  double epoch_loss_sum(const comm::Communicator& comm) const;
  Json epochs = Json::array();    // one entry per epoch trained (docs/report.md)
  Json segments = Json::array();  // one entry per job segment before this one
  // Bytes of the MLPerf log (mllog.txt) that belong to the run up to this state: a resumed run
  // cuts the file back to them (-1: unknown, the file is kept whole).
  int64_t mllog_bytes = -1;
  // --precision ("fp32", "amp-fp16", "amp-bf16"), saved so that a resume in another one says so
  // (precision_note); not part of the identity: either may resume or initialise the other.
  std::string precision;
  std::string precision_note;
  // --loss-scale's scale and counters (train/loss_scaler.hpp).
  LossScaler loss_scaler;

  // Everything above but the tensors, as the checkpoint's /run state text, and back. The segment
  // in progress (`current`, may be null) is stored as the last entry of segments.
  Json to_json(const Json& current_segment) const;
  // Restores position, results and history from a checkpoint's state. A segment left "running"
  // (the job ended after that checkpoint without finishing) is marked "lost".
  void restore(const Json& state);

 private:
  std::unique_ptr<models::Network> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrSchedule schedule_;
};

// The identity of the run `config` describes on the task's dataset with a global batch of
// global_batch samples: the options every task shares, and the task's own (Task::add_identity).
Json run_identity(const TrainConfig& config, const Task& task, int64_t global_batch);

// Differences between a checkpoint's identity and this run's, one line each ("--base-lr is 0.2
// here, 0.1 in the checkpoint"); empty when they agree.
std::vector<std::string> identity_differences(const Json& checkpoint, const Json& here);

}  // namespace scaletrain::train
