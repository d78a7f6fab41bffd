// The run's MLPerf log (mlperf_log.hpp). Keys and their order follow the MLPerf training rules
// for ResNet (mlcommons/logging, compliance_checker/training_4.0.0: common.yaml,
// closed_common.yaml, closed_resnet.yaml and its _sgd/_lars parts); tests/python/mllog_check.py
// checks a real run's log against them.
#include "train/mlperf_log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "scaletrain/config.hpp"

namespace scaletrain::train {
namespace {

using report::MlLog;

Json epoch_metadata(int64_t epoch) {
  Json m = Json::object();
  m.set("epoch_num", epoch);
  return m;
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// --submission-org, else the Slurm cluster's name, else this host's.
std::string submission_org(const TrainConfig& c) {
  if (!c.submission_org.empty()) return c.submission_org;
  if (const char* cluster = std::getenv("SLURM_CLUSTER_NAME")) return cluster;
  return host_name();
}

// --submission-platform, else "<nodes>x<what a node runs>", as MLPerf names systems ("8xDGX-1").
std::string submission_platform(const TrainConfig& c, const MlperfRunFacts& f) {
  if (!c.submission_platform.empty()) return c.submission_platform;
  const char* partition = std::getenv("SLURM_JOB_PARTITION");
  return std::to_string(f.nodes) + "x" + (partition != nullptr ? std::string(partition) : host_name()) + " (" +
         std::to_string(f.ranks / std::max(1, f.nodes)) + " CPU ranks per node)";
}

}  // namespace

MlperfLog MlperfLog::open_new(const std::string& path) { return MlperfLog(MlLog::create(path)); }

MlperfLog MlperfLog::open_resumed(const std::string& path, int64_t keep_bytes) {
  return MlperfLog(MlLog::append(path, keep_bytes));
}

void MlperfLog::init_start() {
  // The rules ask for the file system cache to be cleared before each run. scaletrain does not do
  // it (it needs root on the nodes); the value says so.
  Json note = Json::object();
  note.set("note", "scaletrain does not clear the page cache");
  log_.point("cache_clear", false, ST_MLLOG_HERE, note);
  log_.start("init_start", Json(), ST_MLLOG_HERE);
}

void MlperfLog::run_start(const TrainConfig& c, const MlperfRunFacts& f) {
  submission_keys(c, f);
  hyperparameters(c, f);
  log_.end("init_stop", Json(), ST_MLLOG_HERE);
  log_.start("run_start", Json(), ST_MLLOG_HERE);
}

void MlperfLog::submission_keys(const TrainConfig& c, const MlperfRunFacts& f) {
  log_.point("submission_benchmark", f.benchmark, ST_MLLOG_HERE);
  log_.point("submission_org", submission_org(c), ST_MLLOG_HERE);
  log_.point("submission_division", c.submission_division, ST_MLLOG_HERE);
  log_.point("submission_status", c.submission_status, ST_MLLOG_HERE);
  log_.point("submission_platform", submission_platform(c, f), ST_MLLOG_HERE);
}

// The hyper-parameters the ResNet rules name, for SGD (closed_resnet_sgd.yaml) or LARS
// (closed_resnet_lars.yaml); for Adam, MLPerf's Adam keys.
void MlperfLog::hyperparameters(const TrainConfig& c, const MlperfRunFacts& f) {
  log_.point("global_batch_size", f.global_batch, ST_MLLOG_HERE);
  log_.point("gradient_accumulation_steps", c.accumulate_steps, ST_MLLOG_HERE);
  log_.point("seed", static_cast<int64_t>(c.seed), ST_MLLOG_HERE);
  log_.point("opt_name", f.optimizer, ST_MLLOG_HERE);
  // Not a key of the rules (their checker passes keys it does not know): what the results are
  // to be compared with, and the loss scaling it brings.
  Json precision = Json::object();
  precision.set("loss_scale", resolved_loss_scale(c));
  log_.point("precision", c.precision, ST_MLLOG_HERE, precision);
  if (f.optimizer == "adam" || f.optimizer == "lazy_adam") {
    // MLPerf's keys for Adam (mlcommons/logging constants, as the NCF reference logs them); the
    // ResNet rules know only sgd and lars (closed_resnet.yaml), so mllog_check.py refuses such a log.
    log_.point("opt_base_learning_rate", c.base_lr, ST_MLLOG_HERE);
    log_.point("opt_adam_beta_1", c.adam_beta1, ST_MLLOG_HERE);
    log_.point("opt_adam_beta_2", c.adam_beta2, ST_MLLOG_HERE);
    log_.point("opt_adam_epsilon", c.adam_epsilon, ST_MLLOG_HERE);
  } else {
    sgd_or_lars_hyperparameters(c, f);
  }
  for (const auto& [key, value] : f.task_keys.items()) {
    const bool has_metadata = f.task_key_metadata.contains(key);
    log_.point(key, value, ST_MLLOG_HERE, has_metadata ? f.task_key_metadata.at(key) : Json::object());
  }
  log_.point("train_samples", f.train_samples, ST_MLLOG_HERE);
  log_.point("eval_samples", f.eval_samples, ST_MLLOG_HERE);
}

// The keys of closed_resnet_sgd.yaml or closed_resnet_lars.yaml. The decay keys describe the poly
// schedule (--lr-poly-power, to --end-lr); another --lr-schedule logs them as null, which the
// closed division refuses.
void MlperfLog::sgd_or_lars_hyperparameters(const TrainConfig& c, const MlperfRunFacts& f) {
  const bool poly = c.lr_schedule == "poly";
  const Json power = poly ? Json(c.lr_poly_power) : Json();
  const Json end_lr = poly ? Json(c.end_lr) : Json();
  const int64_t decay_steps = f.total_steps - f.warmup_steps;
  // The same six values under the optimizer's prefix; the warmup key and epsilon differ.
  const bool lars = f.optimizer == "lars";
  const std::string opt = lars ? "lars_opt_" : "sgd_opt_";
  log_.point(opt + "base_learning_rate", c.base_lr, ST_MLLOG_HERE);
  log_.point(opt + "end_learning_rate", end_lr, ST_MLLOG_HERE);
  log_.point(opt + "learning_rate_decay_poly_power", power, ST_MLLOG_HERE);
  log_.point(opt + "learning_rate_decay_steps", decay_steps, ST_MLLOG_HERE);
  log_.point(opt + "weight_decay", c.weight_decay, ST_MLLOG_HERE);
  log_.point(opt + "momentum", c.momentum, ST_MLLOG_HERE);
  log_.point(lars ? "lars_opt_learning_rate_warmup_epochs" : "opt_learning_rate_warmup_epochs", c.warmup_epochs,
             ST_MLLOG_HERE);
  if (lars) log_.point("lars_epsilon", f.lars_epsilon, ST_MLLOG_HERE);
}

void MlperfLog::block_start(int64_t first_epoch, int64_t epoch_count) {
  Json m = Json::object();
  m.set("first_epoch_num", first_epoch);
  m.set("epoch_count", epoch_count);
  log_.start("block_start", Json(), ST_MLLOG_HERE, m);
}

void MlperfLog::epoch_start(int64_t epoch) { log_.start("epoch_start", Json(), ST_MLLOG_HERE, epoch_metadata(epoch)); }

void MlperfLog::epoch_stop(int64_t epoch, int64_t samples) {
  Json m = epoch_metadata(epoch);
  m.set("samples_count", samples);
  log_.end("epoch_stop", Json(), ST_MLLOG_HERE, m);
}

void MlperfLog::eval_start(int64_t epoch, int64_t samples) {
  Json m = epoch_metadata(epoch);
  m.set("samples_count", samples);
  log_.start("eval_start", Json(), ST_MLLOG_HERE, m);
}

void MlperfLog::eval_stop(int64_t epoch, int64_t samples, double accuracy) {
  Json m = epoch_metadata(epoch);
  m.set("samples_count", samples);
  log_.end("eval_stop", Json(), ST_MLLOG_HERE, m);
  log_.point("eval_accuracy", accuracy, ST_MLLOG_HERE, m);
}

void MlperfLog::block_stop(int64_t first_epoch) {
  Json m = Json::object();
  m.set("first_epoch_num", first_epoch);
  log_.end("block_stop", Json(), ST_MLLOG_HERE, m);
}

void MlperfLog::run_stop(const std::string& status, int64_t epoch, const std::string& why, int64_t skipped_steps,
                         double loss_scale) {
  Json m = Json::object();
  m.set("status", status);
  m.set("epoch_num", epoch);
  if (!why.empty()) m.set("reason", why);
  if (loss_scale > 0.0) {
    m.set("skipped_steps", skipped_steps);
    m.set("loss_scale", loss_scale);
  }
  log_.end("run_stop", Json(), ST_MLLOG_HERE, m);
}

namespace {
std::string log_path(const TrainConfig& config) {
  return (std::filesystem::path(config.output_dir) / "mllog.txt").string();
}
}  // namespace

MlperfRecorder::MlperfRecorder(const TrainConfig& config, int rank, bool resumed)
    : config_(config), rank_(rank), resumed_(resumed) {
  if (resumed_ || rank_ != 0) return;
  log_ = MlperfLog::open_new(log_path(config_));
  log_.init_start();
}

void MlperfRecorder::start(const MlperfRunFacts& facts, int64_t resumed_bytes) {
  if (resumed_ && rank_ == 0) log_ = MlperfLog::open_resumed(log_path(config_), resumed_bytes);
  if (!resumed_) log_.run_start(config_, facts);
}

void MlperfRecorder::on_epoch_start(const RunPosition& position) {
  if (position.step_in_epoch != 0) return;  // a resumed epoch's start is in the log already
  if (position.epoch % block_span() == 0)
    log_.block_start(position.epoch + 1, std::min<int64_t>(block_span(), config_.epochs - position.epoch));
  log_.epoch_start(position.epoch + 1);
}

void MlperfRecorder::on_epoch_end(const RunPosition& position) {
  bytes_at_epoch_end_ = log_.bytes();
  log_.epoch_stop(position.epoch + 1, position.samples_seen);
}

void MlperfRecorder::on_evaluation_start(const RunPosition& position) {
  log_.eval_start(position.epoch + 1, position.samples_seen);
}

void MlperfRecorder::on_evaluation_end(const RunPosition& position, const Evaluation& evaluation) {
  log_.eval_stop(position.epoch + 1, position.samples_seen, evaluation.quality * evaluation.mlperf_scale);
}

// A block ends at every --eval-every-th epoch, at --epochs, and where the run's steps end.
void MlperfRecorder::on_epoch_record(const EpochRecord& record) {
  const int64_t epoch = record.position.epoch;
  if ((epoch + 1) % block_span() == 0 || epoch + 1 == config_.epochs || record.last)
    log_.block_stop(epoch / block_span() * block_span() + 1);  // the block's first epoch
}

// run_stop: success when the run did what it was asked (reached --target-accuracy, or without a
// target trained all its steps); aborted when it ended short of its target.
void MlperfRecorder::on_run_end(const RunOutcome& outcome) {
  run_ended_ = true;
  const bool success = config_.target_accuracy > 0 ? outcome.target_reached : true;
  const RunPosition& p = outcome.position;
  const int64_t epoch = std::min<int64_t>(p.epoch + (p.step_in_epoch > 0 ? 1 : 0), config_.epochs);
  log_.run_stop(success ? "success" : "aborted", std::max<int64_t>(epoch, 1),
                success ? "" : "the run ended without reaching --target-accuracy", outcome.skipped_steps,
                outcome.loss_scale);
}

void MlperfRecorder::on_run_aborted(const RunPosition& position, const std::string& why) noexcept {
  if (run_ended_) return;  // its run_stop is written
  try {
    log_.run_stop("aborted", position.epoch + 1, why);
  } catch (...) {  // last words: the job is failing for another reason, which is the one to report
  }
}

}  // namespace scaletrain::train
