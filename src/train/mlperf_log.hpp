// The run's MLPerf log (OUTPUT_DIR/mllog.txt, docs/mllog.md): what scaletrain's training loop
// says, in the keys of the MLPerf training rules for ResNet. Rank 0 writes; the other ranks hold
// a closed log. A run resumed from a checkpoint is one MLPerf run: the file is cut back to what
// it held at that checkpoint (the work after it is redone) and continued, so it has one
// init_start .. run_start .. run_stop whatever the number of job segments.
#pragma once

#include <string>

#include "scaletrain/core/json.hpp"
#include "scaletrain/report/mllog.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/training_observer.hpp"

namespace scaletrain::train {

// What the log needs to know of the run beyond its configuration.
struct MlperfRunFacts {
  int64_t global_batch = 0, micro_batch = 0;  // micro_batch: per rank, per forward (batch norm's span)
  int64_t total_steps = 0, warmup_steps = 0;
  int64_t train_samples = 0, eval_samples = 0;
  int nodes = 1;
  int ranks = 1;
  std::string optimizer = "sgd";
  double lars_epsilon = 0.0;  // for --optimizer lars
  // The task's (Task::mlperf_benchmark, Task::mlperf_keys): "resnet" or "ncf", and its own
  // hyper-parameter keys in order.
  std::string benchmark = "resnet";
  Json task_keys = Json::object();
  Json task_key_metadata = Json::object();  // key -> its metadata, for the keys that have some
};

class MlperfLog {
 public:
  MlperfLog() = default;  // closed (ranks other than 0)
  // A new run's log (the file is started afresh), or a resumed one's (cut to keep_bytes; -1, as
  // in checkpoints from before the log existed: kept whole).
  static MlperfLog open_new(const std::string& path);
  static MlperfLog open_resumed(const std::string& path, int64_t keep_bytes);

  int64_t bytes() const { return log_.bytes(); }

  // A new run: cache_clear and init_start (at the start of set-up), then, when set-up is done,
  // the submission keys and hyper-parameters, init_stop and run_start (the clock starts).
  void init_start();
  void run_start(const TrainConfig& config, const MlperfRunFacts& facts);
  // Training, epochs counted from 1. A block is the epochs between evaluations.
  void block_start(int64_t first_epoch, int64_t epoch_count);
  void epoch_start(int64_t epoch);
  void epoch_stop(int64_t epoch, int64_t samples);
  // samples: training samples seen so far (the rules' samples_count).
  void eval_start(int64_t epoch, int64_t samples);
  void eval_stop(int64_t epoch, int64_t samples, double accuracy);
  void block_stop(int64_t first_epoch);
  // "success" or "aborted" (with what stopped it); with loss scaling, the skipped steps and the
  // final scale (0: none).
  void run_stop(const std::string& status, int64_t epoch, const std::string& why = "", int64_t skipped_steps = 0,
                double loss_scale = 0.0);

 private:
  explicit MlperfLog(report::MlLog log) : log_(std::move(log)) {}
  void submission_keys(const TrainConfig& config, const MlperfRunFacts& facts);
  void hyperparameters(const TrainConfig& config, const MlperfRunFacts& facts);
  void sgd_or_lars_hyperparameters(const TrainConfig& config, const MlperfRunFacts& facts);
  report::MlLog log_;
};

// The log as an observer of the loop: its blocks, epochs, evaluations and run_stop follow the
// loop's events. MLPerf's blocks (block_start .. block_stop) are the epochs from one evaluation to
// the next: --eval-every epochs each (all of them without it), the last one cut at --epochs.
class MlperfRecorder final : public TrainingObserver {
 public:
  // Opens a new run's log on rank 0 and starts its set-up (init_start); a resumed run's log is
  // opened by start().
  MlperfRecorder(const TrainConfig& config, int rank, bool resumed);

  // Set-up is done. A new run: its keys and run_start (the clock starts); a resumed one: its log
  // cut back to `resumed_bytes`, as the checkpoint it resumes from left it.
  void start(const MlperfRunFacts& facts, int64_t resumed_bytes);
  // What a checkpoint records for a resumed run to continue from: all of the log, or for the
  // run's last checkpoint what precedes the lines of its end (a run cut by --max-steps and
  // resumed with more redoes that epoch's end).
  int64_t bytes_to_resume_from() const { return run_ended_ ? bytes_at_epoch_end_ : log_.bytes(); }

  void on_epoch_start(const RunPosition& position) override;
  void on_epoch_end(const RunPosition& position) override;
  void on_evaluation_start(const RunPosition& position) override;
  void on_evaluation_end(const RunPosition& position, const Evaluation& evaluation) override;
  void on_epoch_record(const EpochRecord& record) override;
  void on_run_end(const RunOutcome& outcome) override;
  void on_run_aborted(const RunPosition& position, const std::string& why) noexcept override;

 private:
  int64_t block_span() const { return config_.eval_every > 0 ? config_.eval_every : config_.epochs; }

  const TrainConfig& config_;
  int rank_;
  bool resumed_;
  MlperfLog log_;                    // rank 0's; closed on the others
  int64_t bytes_at_epoch_end_ = -1;  // the log's size before the last epoch end's lines
  bool run_ended_ = false;
};

}  // namespace scaletrain::train
