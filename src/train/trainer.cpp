// The training loop. A run is one RunState (run_state.hpp) carried through one or more job
// segments; this file is one segment: set-up around the state, then epochs of steps, with an
// agreement at every step boundary, evaluation at epoch ends, checkpoints and the report.
//
// One step: wait for the batch, forward + loss, backward (each parameter's gradient is announced
// to the reducer as soon as it is written), wait for the averaged gradients, optimizer step. Every
// rank runs the same number of steps (the task's batches are equal shares), so every collective
// is entered by every rank the same number of times.
//
// Step boundaries: after every step but an epoch's last, and after each epoch's end, every rank
// joins one small all-reduce (bitwise or of a few flags): a stop signal on any rank, and whether
// rank 0's clock says a timed checkpoint is due. So a SIGUSR1 that reaches one rank stops all of
// them after the same step, with a checkpoint, and the job exits with kExitCheckpointed.
//
// Batch-norm running statistics are per rank during training (as in PyTorch DDP without SyncBN).
// Evaluation uses their mean over ranks and checkpoints store both the mean (the model) and each
// rank's own; neither changes the training state, so evaluating or checkpointing at any step
// leaves the run on the course it would have taken without.
#include "scaletrain/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "scaletrain/backend/device_staging.hpp"
#include "scaletrain/backend/nvtx.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/nccl_reducer.hpp"
#include "scaletrain/comm/preflight.hpp"
#include "scaletrain/comm/stall_watchdog.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/out_of_memory.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/core/stop_signals.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/core/trace.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/report/phase_timer.hpp"
#include "scaletrain/report/summary.hpp"
#include "scaletrain/report/train_report.hpp"
#include "scaletrain/train/checkpointing.hpp"
#include "scaletrain/train/device_choice.hpp"
#include "scaletrain/train/device_metrics.hpp"
#include "scaletrain/train/mixed_precision.hpp"
#include "scaletrain/train/op_times.hpp"
#include "scaletrain/train/run_state.hpp"
#include "scaletrain/train/task.hpp"
#include "scaletrain/train/training_step.hpp"
#include "scaletrain/train/transport_choice.hpp"
#include "train/device_batches.hpp"
#include "train/mlperf_log.hpp"
#include "train/step_accounting.hpp"

namespace scaletrain::train {
namespace fs = std::filesystem;
using report::Phase;
using report::ScopedPhase;

namespace {

// Step-boundary flags, or-ed over ranks.
constexpr uint32_t kSigusr1 = 1u << 0;
constexpr uint32_t kSigterm = 1u << 1;
constexpr uint32_t kTimedCheckpoint = 1u << 2;

// Evaluation uses the running statistics' mean over ranks; each rank's own are put back after, so
// that evaluating never changes the training state (and a resumed run that evaluates at other
// steps stays bitwise on course).
class AveragedBuffers {
 public:
  AveragedBuffers(const comm::Communicator& comm, nn::ParameterSet& params) : buffers_(params.flat_buffers()) {
    if (comm.size() == 1 || buffers_.numel() == 0) return;
    own_ = Tensor::empty(buffers_.shape());
    own_.copy_from(buffers_);
    comm.allreduce_mean(buffers_);
  }
  ~AveragedBuffers() {
    if (own_.defined()) buffers_.copy_from(own_);
  }
  AveragedBuffers(const AveragedBuffers&) = delete;
  AveragedBuffers& operator=(const AveragedBuffers&) = delete;

 private:
  Tensor& buffers_;
  Tensor own_;
};

// The trainer's watch on the step's phases: each phase's host timer (and NVTX range, and the
// progress beacon), and on a GPU its GPU time, marked with events on the compute stream
// (device_metrics.hpp).
class TimedPhases final : public StepPhaseWatcher {
 public:
  TimedPhases(report::PhaseTimers& timers, DeviceMetrics& device) : timers_(timers), device_(device) {}
  void begin(Phase phase) override {
    host_.emplace(timers_, phase);
    device_.begin(phase);
  }
  void end(Phase phase) noexcept override {
    device_.end(phase);
    host_.reset();
  }

 private:
  report::PhaseTimers& timers_;
  DeviceMetrics& device_;
  std::optional<ScopedPhase> host_;  // the phase now running
};

// The per-rank samples of one optimizer step (all its micro-batches): --batch-size x
// --accumulate-steps, or for a resumed run the checkpoint's global batch over this run's ranks
// (which --accumulate-steps must then divide into micro-batches).
int64_t resumed_batch_size(const std::optional<ResumePoint>& resume, const TrainConfig& c, int world) {
  const int64_t k = c.accumulate_steps;
  if (!resume) return c.batch_size * k;
  const int64_t global = resume->global_batch();
  if (global % (world * k) != 0 && global % world == 0)
    throw UsageError("--resume: checkpoint " + resume->path + " trains with a global batch of " +
                     std::to_string(global) + ": " + std::to_string(global / world) + " samples per rank on " +
                     std::to_string(world) + " ranks, which --accumulate-steps " + std::to_string(k) +
                     " cannot split into equal micro-batches");
  if (global % world != 0) {
    std::string valid;
    for (int64_t p = 1; p <= global; ++p)
      if (global % p == 0) valid += (valid.empty() ? "" : ", ") + std::to_string(p);
    throw UsageError("--resume: checkpoint " + resume->path + " trains with a global batch of " +
                     std::to_string(global) + " (" + std::to_string(resume->world_size()) + " ranks x " +
                     std::to_string(global / resume->world_size()) + "), which " + std::to_string(world) +
                     " ranks cannot share equally; run it on one of " + valid + " ranks");
  }
  const int64_t per_rank = global / world;
  if (per_rank != c.batch_size * k)
    ST_LOG("resuming with the run's global batch of " << global << ": " << per_rank / k << " per rank"
                                                      << (k > 1 ? " and micro-batch" : "") << " on " << world
                                                      << " ranks (--batch-size " << c.batch_size << " not used)");
  return per_rank;
}

// An epoch's entry in report.json's "epochs" (docs/report.md).
Json epoch_json(const EpochRecord& r) {
  Json j = Json::object();
  j.set("epoch", r.position.epoch + 1);
  j.set("steps", r.position.step_in_epoch);
  j.set("train_loss", r.train_loss);
  const Evaluation* e = r.evaluation;
  j.set("val_accuracy", e ? Json(e->quality) : Json());
  j.set("val_loss", e && std::isfinite(e->loss) ? Json(e->loss) : Json());
  if (e) j.set("val_metrics", e->metrics);
  j.set("elapsed_s", r.elapsed_s);
  j.set("timestamp_unix_ms", unix_time_ms());
  return j;
}

// Appends an epoch's entry to the run's history. An epoch cut short by --max-steps and continued
// later gets one entry, the last.
void keep_epoch_record(Json& epochs, const Json& entry) {
  const std::size_t n = epochs.size();
  if (n > 0 && epochs.at(n - 1).at("epoch").as_int() == entry.at("epoch").as_int()) {
    Json kept = Json::array();
    for (std::size_t i = 0; i + 1 < n; ++i) kept.push_back(epochs.at(i));
    epochs = kept;
  }
  epochs.push_back(entry);
}

// The report's part that the run state holds: how far the run went over all its segments so far,
// its epochs and results, and its clocks (as the segment's last checkpoint left them).
void record_run_state(const RunState& state, report::TrainSummary& s) {
  s.steps = state.position.global_step;
  s.samples_trained = state.position.samples_seen;
  s.units_trained = state.position.units_seen;
  s.epochs = state.epochs;
  s.segments = state.segments;
  s.final_val_accuracy = state.results.last_accuracy;
  s.time_to_target_s = state.results.time_to_target_s;
  s.train_time_s = state.results.train_s;
  s.total_time_s = state.results.clock_s;
}

// The test hook SCALETRAIN_TEST_STEP_DELAY_MS=N: each step ends N ms later (0 to 10000), so that a
// test's signal lands mid-epoch however fast the machine runs the step (cli.train_resume).
int step_delay_ms() {
  const char* hook = std::getenv("SCALETRAIN_TEST_STEP_DELAY_MS");
  if (hook == nullptr || *hook == '\0') return 0;
  char* end = nullptr;
  const long ms = std::strtol(hook, &end, 10);
  ST_CHECK(
      *end == '\0' && ms >= 0 && ms <= 10000,
      "SCALETRAIN_TEST_STEP_DELAY_MS='" << hook << "' is not a number of milliseconds from 0 to 10000 (a test hook)");
  return static_cast<int>(ms);
}

// One job segment of a run.
class Training {
 public:
  Training(const comm::Communicator& comm, const TrainConfig& config, const Json& resolved_config);
  ~Training() { set_last_words(nullptr); }
  TrainResult run();

 private:
  // Set-up.
  void open_context();
  void stage_data();
  void build_run_state();
  void build_communication();
  comm::NcclReducerOptions nccl_options() const;
  void log_start() const;
  void warn_if_threads_share_cores() const;
  void start_mlperf_run();
  MlperfRunFacts mlperf_facts() const;
  void tell_aborted(const std::string& why) noexcept;

  // The loop.
  RunEnd train_until_done();
  bool run_finished() const;
  void start_epoch();
  void train_step();
  void report_skipped_step(int64_t step, double scale_before, double loss) const;
  void end_epoch();
  bool evaluation_due() const;
  Evaluation evaluate_now();
  uint32_t step_boundary();
  void checkpoint(const std::string& reason);

  // The segment's record and the report.
  double clock_now() const { return clock_base_ + loop_clock_.elapsed(); }
  Json segment_json(const std::string& reason);
  TrainResult finish(RunEnd end);
  report::TrainSummary setup_summary() const;
  const DeviceBatches* device_batches() const { return dynamic_cast<const DeviceBatches*>(batches_.get()); }
  std::string input_copy_used() const;
  std::string fuse_used() const;
  std::string describe_fusion() const;
  std::string describe_input_copy() const;
  Json input_copy_json() const;
  void write_trace() const;

  // Fixed for the segment.
  const comm::Communicator& comm_;
  const TrainConfig& cfg_;
  Json resolved_config_;
  StopSignals signals_;  // first: a signal during set-up is not lost
  double start_unix_ms_ = unix_time_ms();
  std::vector<std::string> hosts_;
  std::unique_ptr<Task> task_;
  std::optional<comm::Topology> topology_;
  Json staging_;
  DeviceChoice device_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<DeviceMetrics> device_metrics_;  // GPU phase times, memory and energy
  std::optional<ResumePoint> resume_;
  std::unique_ptr<BatchSource> batches_;
  std::unique_ptr<RunState> state_;
  TransportChoice transports_;  // the all-reduce's transport per level
  std::unique_ptr<comm::GradientReducer> reducer_;
  std::unique_ptr<TrainingStep> step_;
  std::unique_ptr<comm::StallWatchdog> watchdog_;
  Json preflight_;
  std::unique_ptr<MlperfRecorder> mlperf_;  // rank 0's mllog.txt
  int threads_ = 1;
  int step_delay_ms_ = step_delay_ms();  // the test hook SCALETRAIN_TEST_STEP_DELAY_MS
  int64_t total_steps_ = 0;              // this run's: all epochs, or --max-steps
  int64_t global_batch_ = 0;
  int64_t micro_batch_ = 0;  // samples per rank per forward/backward (batch_size / accumulate_steps)

  // Progress of the segment, and those who account for it (training_observer.hpp): the step's
  // times and samples, the progress and epoch lines, the device's GPU times, the MLPerf log.
  report::PhaseTimers timers_;
  std::unique_ptr<TimedPhases> phases_;  // timers_ and the device's, as the step reports its phases
  StepClock step_clock_{timers_};
  ProgressLine progress_line_{cfg_.log_every};
  std::vector<TrainingObserver*> observers_;
  std::unique_ptr<OpTimes> op_times_;  // --op-times
  Batch batch_;
  Stopwatch loop_clock_, minutes_clock_;
  double clock_base_ = 0.0, train_base_ = 0.0;
  int64_t first_step_ = 0, last_checkpoint_step_ = -1;
  int stop_signal_ = 0;
  report::CheckpointTotals checkpoints_;
};

// What the stall watchdog polls (StallOptions::poll_error): the reducer's transport errors (NCCL's
// asynchronous ones), and the test hook SCALETRAIN_INJECT_COMM_ERROR=STEP:RANK, with which rank
// RANK reports one from step STEP on (cli.train_stall: the job then ends at once, naming it).
std::function<std::string()> communication_error_poll(const comm::GradientReducer& reducer, int rank) {
  const char* hook = std::getenv("SCALETRAIN_INJECT_COMM_ERROR");
  long long step = 0, on_rank = -1;
  if (hook != nullptr && *hook != '\0') {
    char* end = nullptr;
    step = std::strtoll(hook, &end, 10);
    if (*end == ':') on_rank = std::strtoll(end + 1, &end, 10);
    ST_CHECK(step >= 1 && on_rank >= 0 && *end == '\0',
             "SCALETRAIN_INJECT_COMM_ERROR='" << hook << "' is not STEP:RANK with STEP >= 1 (a test hook)");
  }
  if (on_rank != rank) return [&reducer] { return reducer.communication_error(); };
  return [&reducer, step] {
    if (progress::now().step >= step) return std::string("injected communication error (SCALETRAIN_INJECT_COMM_ERROR)");
    return reducer.communication_error();
  };
}

Training::Training(const comm::Communicator& comm, const TrainConfig& config, const Json& resolved_config)
    : comm_(comm), cfg_(config), resolved_config_(resolved_config) {
  check_train_config(cfg_);
  hosts_ = comm_.all_hosts();
  resume_ = prepare_run_directory(comm_, cfg_);
  // A new run's MLPerf log starts with its set-up.
  mlperf_ = std::make_unique<MlperfRecorder>(cfg_, comm_.rank(), resume_.has_value());
  task_ = open_task(cfg_, comm_);
  progress_line_.set_unit(task_->work_unit());
  topology_.emplace(comm::Topology::build(comm_, cfg_.ranks_per_node));
  stage_data();
  threads_ = cfg_.threads > 0 ? cfg_.threads : default_threads(comm_);
  warn_if_threads_share_cores();
  open_context();
  build_run_state();
  state_->move_to(ctx_->device());  // set up on the CPU (initialised, restored, broadcast), trained on the device
  build_communication();
  log_start();
  if (cfg_.trace) trace::start();
  if (cfg_.preflight || cfg_.min_busbw > 0)
    preflight_ = comm::run_preflight(comm_, *reducer_, state_->params().parameter_count(), cfg_.min_busbw);
  comm::StallOptions stall = stall_options(cfg_);
  stall.poll_error = communication_error_poll(*reducer_, comm_.rank());
  watchdog_ = std::make_unique<comm::StallWatchdog>(comm_, stall);
}

// --device: every rank agrees on the device; a CUDA context on the rank's GPU, or the CPU.
void Training::open_context() {
  const DeviceRequest request = parse_device_request(cfg_.device);
  // Which ops lack a CUDA kernel matters only where a GPU may be chosen.
  const std::string missing = request == DeviceRequest::cpu ? "" : train_kernels_missing(cfg_, *task_, Device::cuda);
  device_ = choose_device(comm_, request, "train", missing);
  check_gpu_precision(comm_, device_, parse_precision(cfg_.precision), "train");
  ctx_ = std::make_unique<Context>(device_.device, threads_, device_.gpu_index);
  ctx_->set_allow_tf32(cfg_.tf32);
  ctx_->set_precision(parse_precision(cfg_.precision));
  ctx_->set_fuse_bn_add_relu(fuses(fuse_used(), "bn-add-relu"));
  ctx_->set_fuse_conv_bias_relu(fuses(fuse_used(), "conv-bias-relu"));
  ctx_->set_fuse_bn_relu(fuses(fuse_used(), "bn-relu"));
  ctx_->set_conv_search(cfg_.conv_algo == "search" || cfg_.conv_algo == "graph-search");
  ctx_->set_conv_graph(cfg_.conv_algo == "graph" || cfg_.conv_algo == "graph-search");
  ctx_->set_conv_nondeterministic(cfg_.conv_nondeterministic);
  if (cfg_.tf32 && device_.device == Device::cpu) device_.log_lines.push_back("--tf32 has no effect on the CPU");
  if (cfg_.conv_algo != "heuristic" && device_.device == Device::cpu)
    device_.log_lines.push_back("--conv-algo " + cfg_.conv_algo + " has no effect on the CPU");
  if (cfg_.conv_nondeterministic && device_.device == Device::cpu)
    device_.log_lines.push_back("--conv-nondeterministic has no effect on the CPU");
  device_metrics_ = std::make_unique<DeviceMetrics>(*ctx_, device_);
}

// --stage-to: one rank per node copies the shards to node-local storage (the topology's nodes).
void Training::stage_data() {
  if (!cfg_.stage_to.empty()) staging_ = task_->stage(comm_, *topology_);
}

// The batches first (they decide the steps per epoch), then the state: new, from --init-from's
// weights, or restored from the resume point.
void Training::build_run_state() {
  const int world = comm_.size();
  const int64_t batch_size = resumed_batch_size(resume_, cfg_, world);
  batches_ = with_input_copy(task_->training_batches(comm_, batch_size, topology_->local_size()), *ctx_, *task_,
                             cfg_.input_copy);
  const int64_t steps_per_epoch = batches_->steps_per_epoch();
  ST_CHECK(steps_per_epoch > 0, "dataset " << cfg_.data_dir << "/train has " << task_->train_samples()
                                           << " samples: too few for " << world << " ranks x --batch-size "
                                           << batch_size);
  state_ = std::make_unique<RunState>(cfg_, *task_, steps_per_epoch, world, batch_size);
  global_batch_ = batch_size * world;
  micro_batch_ = batch_size / cfg_.accumulate_steps;
  // --max-steps cuts the run short; the learning-rate schedule stays the one for all epochs.
  total_steps_ = steps_per_epoch * cfg_.epochs;
  if (cfg_.max_steps > 0) total_steps_ = std::min(total_steps_, cfg_.max_steps);
  if (resume_) {
    restore_run(comm_, *resume_, *state_);
    resume_->data.reset();  // rank 0's copy of the whole checkpoint
  } else if (!cfg_.init_from.empty()) {
    load_initial_weights(comm_, cfg_, *task_, *state_);
  } else {  // every rank starts from rank 0's weights and statistics
    comm_.broadcast(state_->params().flat_values(), 0);
    if (state_->params().flat_buffers().numel() > 0) comm_.broadcast(state_->params().flat_buffers(), 0);
  }
  clock_base_ = state_->results.clock_s;
  train_base_ = state_->results.train_s;
  first_step_ = state_->position.global_step;
}

// Gradient communication: topology -> transports -> reducer, and the step that feeds it: gradients
// reach the reducer through the step's accumulator, which passes them on in a step's last
// micro-batch. Three reducers (comm/gradient_reducer.hpp, comm/nccl_reducer.hpp):
//   --intra nccl  NCCL on the GPU's gradients, a bucket as soon as backward has written it;
//   --intra mpi   MPI on host memory: on a GPU a pinned host mirror of the gradients, each bucket
//                 copied out when backward has written it (DeviceStaging), with its AllReducer's
//                 thread (auto calibrates here);
//   one rank on a GPU, --intra auto: nothing to reduce and nothing staged.
void Training::build_communication() {
  nn::ParameterSet& params = state_->params();
  transports_ = choose_transports(comm_, *topology_, cfg_, device_);
  if (transports_.intra == comm::Transport::nccl) {
    reducer_ = comm::make_nccl_reducer(*ctx_, *topology_, params.gradient_layout(), nccl_options());
  } else if (ctx_->device() != Device::cpu && comm_.size() == 1) {
    reducer_ = comm::make_single_rank_reducer(params.gradient_layout());
  } else {
    std::shared_ptr<DeviceStaging> staging;
    if (ctx_->device() != Device::cpu) staging = DeviceStaging::create(*ctx_, params.flat_grads());
    reducer_ = comm::make_gradient_reducer(*topology_, params.gradient_layout(), allreduce_options(cfg_),
                                           bucket_options(cfg_), staging);
  }
  step_ = std::make_unique<TrainingStep>(*ctx_, *task_, state_->model(), state_->optimizer(), *reducer_,
                                         cfg_.accumulate_steps, comm_.rank());
  step_->use_loss_scaler(&state_->loss_scaler, &comm_);
  phases_ = std::make_unique<TimedPhases>(timers_, *device_metrics_);
  // The device's first: its GPU times are collected (an event synchronise) before the step is
  // counted, as when the step's end was one function.
  observers_ = {device_metrics_.get(), &step_clock_, &progress_line_, mlperf_.get()};
  if (cfg_.op_times) {
    op_times_ = std::make_unique<OpTimes>(*ctx_);
    observers_.push_back(op_times_.get());
  }
}

comm::NcclReducerOptions Training::nccl_options() const {
  comm::NcclReducerOptions o;
  o.shape = cfg_.allreduce == "flat" ? comm::Algorithm::flat : comm::Algorithm::hierarchical;
  o.automatic = cfg_.allreduce == "auto";
  o.inter_automatic = transports_.inter_automatic;
  o.inter = transports_.inter;
  o.cuda_aware_mpi = transports_.cuda_aware_mpi;
  o.compression = allreduce_options(cfg_).compression;
  o.buckets = bucket_options(cfg_);
  o.shared_gpus = [this](const std::vector<int>& members) { return gpus_shared_within(device_.binding, members); };
  return o;
}

// --threads above the cores a rank is bound to: the threads take turns on them (Open MPI binds a
// lone rank to one core), and the run is as slow as with fewer threads. Rank 0 says it for its
// own binding (a job's ranks are bound alike).
void Training::warn_if_threads_share_cores() const {
  const int cpus = allowed_cpus();
  if (comm_.rank() != 0 || threads_ <= cpus) return;
  ST_WARN(threads_ << " threads per rank (--threads) but this rank may run on only " << cpus
                   << (cpus == 1 ? " core" : " cores")
                   << " (its CPU binding); with mpirun use --bind-to none, or --map-by slot:PE=" << threads_
                   << " to give each rank " << threads_ << " cores");
}

void Training::log_start() const {
  const std::size_t hosts = std::set<std::string>(hosts_.begin(), hosts_.end()).size();
  const int world = comm_.size();
  ST_LOG("scaletrain " << SCALETRAIN_VERSION << ": " << cfg_.model << " (" << state_->params().parameter_count()
                       << " parameters), " << world << (world == 1 ? " rank" : " ranks") << " on " << hosts
                       << (hosts == 1 ? " host, " : " hosts, ") << threads_ << (threads_ == 1 ? " thread" : " threads")
                       << " per rank, all-reduce " << reducer_->name());
  ST_LOG("data " << cfg_.data_dir << ": " << task_->describe_data() << "; global batch " << global_batch_ << " ("
                 << state_->batch_size << " per rank"
                 << (cfg_.accumulate_steps > 1 ? ", " + std::to_string(cfg_.accumulate_steps) + " micro-batches of " +
                                                     std::to_string(micro_batch_)
                                               : std::string())
                 << "), " << state_->steps_per_epoch << " steps per epoch, " << total_steps_ << " steps");
  ST_LOG("topology: " << topology_->describe());
  for (const std::string& line : device_.log_lines) ST_LOG(line);
  ST_LOG("input: " << task_->describe_input() << "; " << describe_input_copy());
  ST_LOG("all-reduce: " << reducer_->describe()
                        << (transports_.nccl_version.empty() ? "" : ", NCCL " + transports_.nccl_version));
  for (const std::string& note : transports_.notes) ST_LOG(note);
  if (ctx_->precision() != Precision::fp32)
    ST_LOG("precision: " << precision_name(ctx_->precision())
                         << ": activations, their gradients and weight copies (parameters of 2 or more dimensions) in "
                         << (storage_format(ctx_->precision()) == HalfFormat::fp16 ? "fp16" : "bf16")
                         << "; fp32 master weights, optimizer state, normalisation statistics and losses ("
                         << describe_amp_storage(*ctx_) << ")");
  if (!state_->precision_note.empty()) ST_LOG(state_->precision_note);
  const std::string fusion = describe_fusion();
  if (!fusion.empty()) ST_LOG("fusion: " << fusion);
  if (state_->loss_scaler.enabled()) ST_LOG("loss scale: " << state_->loss_scaler.describe());
  if (!state_->loss_scaler.restore_note().empty()) ST_LOG(state_->loss_scaler.restore_note());
  if (resume_) {
    const RunPosition& p = state_->position;
    ST_LOG("resumed from " << resume_->path << ": step " << p.global_step << " of " << total_steps_ << " (epoch "
                           << p.epoch + 1 << ", step " << p.step_in_epoch << " of " << state_->steps_per_epoch
                           << "), segment " << state_->segments.size() + 1 << " of the run");
  }
}

TrainResult Training::run() {
  if (run_finished()) {
    ST_LOG("the run in " << cfg_.output_dir << " is already complete (step " << state_->position.global_step << " of "
                         << total_steps_ << "); nothing to do");
    return {Json(), RunEnd::already_complete};
  }
  start_mlperf_run();
  loop_clock_.reset();
  minutes_clock_.reset();
  try {
    return finish(train_until_done());
  } catch (const OutOfDeviceMemory& e) {
    // The allocator knows the bytes; the batch size is what the user can change. Every rank that
    // runs out throws, and main aborts the job, so no rank waits for it in a collective.
    const OutOfDeviceMemory explained(out_of_memory_at_batch_size(e.what(), micro_batch_));
    tell_aborted(error_text(explained));
    throw explained;
  } catch (const std::exception& e) {
    tell_aborted(error_text(e));
    throw;
  }
}

// A new run's clock starts (run_start); a resumed run continues its log from the checkpoint.
// From here, a rank that aborts the job from the watchdog tells the observers (the log records it).
void Training::start_mlperf_run() {
  mlperf_->start(mlperf_facts(), state_->mllog_bytes);
  set_last_words([this](const std::string& why) { tell_aborted(why); });
}

void Training::tell_aborted(const std::string& why) noexcept {
  for (TrainingObserver* o : observers_) o->on_run_aborted(state_->position, why);
}

MlperfRunFacts Training::mlperf_facts() const {
  MlperfRunFacts f;
  f.global_batch = global_batch_;
  f.micro_batch = micro_batch_;
  f.total_steps = total_steps_;
  f.warmup_steps = state_->schedule().warmup_steps();
  f.train_samples = task_->train_samples();
  f.eval_samples = task_->eval_samples();
  f.nodes = topology_->num_nodes();
  f.ranks = comm_.size();
  f.optimizer = cfg_.optimizer;
  f.lars_epsilon = cfg_.lars_epsilon;
  f.benchmark = task_->mlperf_benchmark();
  f.task_keys = task_->mlperf_keys(micro_batch_);
  f.task_key_metadata = task_->mlperf_key_metadata();
  return f;
}

bool Training::run_finished() const {
  return state_->position.global_step >= total_steps_ ||
         (cfg_.target_accuracy > 0 && state_->results.time_to_target_s >= 0);
}

// Epochs of steps until the run is complete or a stop signal is agreed.
RunEnd Training::train_until_done() {
  RunPosition& pos = state_->position;
  for (;;) {
    start_epoch();
    while (pos.step_in_epoch < state_->steps_per_epoch && pos.global_step < total_steps_) {
      train_step();
      const bool epoch_over = pos.step_in_epoch == state_->steps_per_epoch || pos.global_step == total_steps_;
      if (!epoch_over && step_boundary() != 0) return RunEnd::signal;
    }
    end_epoch();
    if (cfg_.target_accuracy > 0 && state_->results.time_to_target_s >= 0) return RunEnd::target_reached;
    if (pos.global_step >= total_steps_)
      return pos.global_step >= state_->steps_per_epoch * cfg_.epochs ? RunEnd::completed : RunEnd::max_steps;
    if (step_boundary() != 0) return RunEnd::signal;
  }
}

void Training::start_epoch() {
  const RunPosition& pos = state_->position;
  batches_->start_epoch(static_cast<int>(state_->position.epoch), state_->position.step_in_epoch);
  for (TrainingObserver* o : observers_) o->on_epoch_start(pos);
}

// One optimizer step: the next batch, the step (training_step.hpp) at the schedule's learning
// rate, the position moved past it; then the observers account for it.
void Training::train_step() {
  RunPosition& pos = state_->position;
  progress::set_step(pos.global_step + 1);
  Stopwatch clock;
  {
    ScopedPhase t(timers_, Phase::data_wait);
    ST_CHECK(batches_->next(batch_), "internal: the training batches ran out at step " << pos.step_in_epoch << " of "
                                                                                       << state_->steps_per_epoch);
  }
  // Token batches differ from step to step; a batch of samples is the global batch.
  const StepWork work = batches_->last_step_work().value_or(StepWork{global_batch_, global_batch_});
  const double lr = state_->learning_rate();
  const double scale = state_->loss_scaler.scale();
  const double loss = step_->run(batch_, micro_batch_, pos.global_step, lr, *phases_);
  if (step_->last_step_skipped()) report_skipped_step(pos.global_step + 1, scale, loss);
  // A loss that overflowed (16-bit activations) made its gradients overflow too: under loss
  // scaling every rank has skipped that step, and the run goes on. Otherwise it diverged.
  ST_CHECK(std::isfinite(loss) || step_->last_step_skipped(),
           "training diverged: loss is " << loss << " at epoch " << pos.epoch + 1 << " step " << pos.step_in_epoch + 1
                                         << " (try a smaller --base-lr)");
  ++pos.step_in_epoch;
  ++pos.global_step;
  pos.samples_seen += work.samples;
  pos.units_seen += work.units;
  // A skipped step's non-finite loss adds nothing to the epoch's mean train loss.
  if (std::isfinite(loss)) state_->epoch_loss_here += loss;
  const StepEnd end{pos, state_->steps_per_epoch, total_steps_, cfg_.epochs, batch_, work.units, loss,
                    lr,  clock.elapsed()};
  for (TrainingObserver* o : observers_) o->on_step_end(end);
  if (step_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms_));
}

// A step whose gradients held an inf or NaN after the all-reduce (every rank skipped it): said at
// each one, and warned about when they come in a row (a loss that overflows at every scale).
void Training::report_skipped_step(int64_t step, double scale_before, double loss) const {
  const LossScaler& s = state_->loss_scaler;
  if (!std::isfinite(loss))
    ST_WARN("step " << step << ": the loss is " << loss << " (the forward overflowed); the step is skipped");
  ST_LOG("step " << step << ": inf or NaN in the gradients after the all-reduce; skipped on every rank, loss scale "
                 << LossScaler::scale_text(scale_before) << " -> " << LossScaler::scale_text(s.scale()) << " ("
                 << s.skipped_steps() << " skipped in the run)");
  const bool warn = s.consecutive_skipped() == kSkippedStepsWarning || s.consecutive_skipped() % 100 == 0;
  if (warn && comm_.rank() == 0)
    ST_WARN(s.consecutive_skipped() << " steps in a row skipped for inf or NaN gradients (loss scale now "
                                    << LossScaler::scale_text(s.scale())
                                    << "): the loss or the model overflows at every scale; try a smaller --base-lr"
                                    << (s.mode() == LossScaler::Mode::fixed ? " or a smaller --loss-scale" : ""));
}

// The end of an epoch (or of the run's steps inside one): its train loss, its evaluation when due,
// its record; then the position moves to the next epoch once this one is complete.
void Training::end_epoch() {
  RunPosition& pos = state_->position;
  for (TrainingObserver* o : observers_) o->on_epoch_end(pos);
  const double train_loss = state_->epoch_loss_sum(comm_) / std::max<int64_t>(1, pos.step_in_epoch);
  std::optional<Evaluation> evaluation;
  if (evaluation_due()) evaluation = evaluate_now();
  const RunResults& results = state_->results;
  const bool reached_now = evaluation && cfg_.target_accuracy > 0 && results.time_to_target_s >= 0;
  const EpochRecord record{pos,
                           pos.global_step >= total_steps_,
                           train_loss,
                           evaluation ? &*evaluation : nullptr,
                           task_->describe_quality(evaluation ? results.last_accuracy : std::nan("")),
                           clock_now(),
                           reached_now ? results.time_to_target_s : -1.0,
                           cfg_.target_accuracy};
  keep_epoch_record(state_->epochs, epoch_json(record));
  for (TrainingObserver* o : observers_) o->on_epoch_record(record);
  if (pos.step_in_epoch == state_->steps_per_epoch) {
    ++pos.epoch;
    pos.step_in_epoch = 0;
    pos.epoch_loss_sum = 0.0;
    state_->epoch_loss_here = 0.0;
  }
}

// Every --eval-every epochs, and after the run's last step.
bool Training::evaluation_due() const {
  const RunPosition& pos = state_->position;
  return (cfg_.eval_every > 0 && (pos.epoch + 1) % cfg_.eval_every == 0) || pos.global_step >= total_steps_;
}

// The model evaluated at this position (with the ranks' mean running statistics), and the run's
// results updated: the last and best quality, and the time to the target when first reached.
Evaluation Training::evaluate_now() {
  ScopedPhase t(timers_, Phase::evaluation);
  const RunPosition& pos = state_->position;
  for (TrainingObserver* o : observers_) o->on_evaluation_start(pos);
  Evaluation r;
  {
    const AveragedBuffers mean(comm_, state_->params());
    Tensor master;
    const HalfWeights half(*ctx_, state_->params(), master);  // evaluated as trained: 16-bit weights under AMP
    r = task_->evaluate(comm_, *ctx_, state_->model(), micro_batch_, topology_->local_size());
  }
  for (TrainingObserver* o : observers_) o->on_evaluation_end(pos, r);
  RunResults& results = state_->results;
  results.last_accuracy = r.quality;
  results.best_accuracy = std::max(results.best_accuracy, r.quality);
  if (cfg_.target_accuracy > 0 && r.quality >= cfg_.target_accuracy && results.time_to_target_s < 0)
    results.time_to_target_s = clock_now();
  return r;
}

// The step-boundary agreement (one small all-reduce), and the checkpoints it calls for: on a stop
// signal (then the loop ends), or when a periodic one is due. Returns the agreed stop flags.
uint32_t Training::step_boundary() {
  progress::enter("step agreement", /*waiting=*/true);
  uint32_t flags = 0;
  if (signals_.received() == SIGUSR1) flags |= kSigusr1;
  if (signals_.received() == SIGTERM) flags |= kSigterm;
  if (comm_.rank() == 0 && cfg_.checkpoint_every_minutes > 0 &&
      minutes_clock_.elapsed() >= cfg_.checkpoint_every_minutes * 60.0)
    flags |= kTimedCheckpoint;
  flags = comm_.allreduce_or(flags);
  const RunPosition& pos = state_->position;
  if (flags & (kSigusr1 | kSigterm)) {
    stop_signal_ = (flags & kSigterm) ? SIGTERM : SIGUSR1;
    checkpoint(StopSignals::name(stop_signal_));
    return flags & (kSigusr1 | kSigterm);
  }
  const bool every_steps = cfg_.checkpoint_every_steps > 0 && pos.global_step % cfg_.checkpoint_every_steps == 0;
  const bool every_epochs =
      cfg_.checkpoint_every > 0 && pos.step_in_epoch == 0 && pos.epoch % cfg_.checkpoint_every == 0;
  if ((every_steps || every_epochs || (flags & kTimedCheckpoint)) && last_checkpoint_step_ != pos.global_step)
    checkpoint("running");
  return 0;
}

// A checkpoint of the whole run state; `reason` is the segment's state in it ("running" for a
// periodic one, the signal's name, or how the run ended).
void Training::checkpoint(const std::string& reason) {
  RunResults& results = state_->results;
  results.clock_s = clock_now();
  results.train_s = train_base_ + comm_.allreduce_max(step_clock_.train_seconds());
  state_->mllog_bytes = mlperf_->bytes_to_resume_from();
  const double started = now_seconds();
  const NvtxRange range("checkpoint");
  const CheckpointWritten w =
      write_checkpoint(comm_, *state_, segment_json(reason), cfg_.output_dir, cfg_.keep_checkpoints);
  if (trace::enabled()) trace::record("checkpoint", "checkpoint", trace::kMainThread, started, now_seconds());
  checkpoints_.add(w.path, w.bytes, w.seconds);
  last_checkpoint_step_ = state_->position.global_step;
  minutes_clock_.reset();
  char line[320];
  std::snprintf(line, sizeof line, "checkpoint %s: %.1f MB in %.3f s (%.0f MB/s)", w.path.c_str(), w.bytes / 1e6,
                w.seconds, w.bytes / 1e6 / std::max(w.seconds, 1e-9));
  ST_LOG(line);
}

// This segment as the run's history records it (docs/report.md, "segments"). Collective.
Json Training::segment_json(const std::string& reason) {
  Json s = Json::object();
  s.set("segment", static_cast<int64_t>(state_->segments.size() + 1));
  s.set("reason", reason);
  s.set("world_size", comm_.size());
  s.set("hosts", static_cast<int64_t>(std::set<std::string>(hosts_.begin(), hosts_.end()).size()));
  s.set("resumed_from", resume_ ? Json(resume_->path) : Json());
  s.set("first_step", first_step_);
  s.set("last_step", state_->position.global_step);
  s.set("start_unix_ms", start_unix_ms_);
  s.set("stop_unix_ms", unix_time_ms());
  const double first_step_done = step_clock_.first_step_done_unix_ms();
  s.set("startup_s", first_step_done >= 0 ? Json((first_step_done - start_unix_ms_) / 1e3) : Json());
  s.set("train_time_s", comm_.allreduce_max(step_clock_.train_seconds()));
  return s;
}

// Each rank's timeline of this segment (a resumed run's segment replaces the files of the last).
void Training::write_trace() const {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.json", comm_.rank());
  const std::string path = (fs::path(cfg_.output_dir) / "trace" / name).string();
  const int64_t events = trace::write(path, comm_.rank(), hosts_.at(comm_.rank()));
  ST_LOG("trace: " << events << " events per rank in " << (fs::path(cfg_.output_dir) / "trace").string()
                   << "/rank-*.json (merge: scaletrain-report trace " << cfg_.output_dir << ")");
}

const char* status_of(RunEnd end) { return end == RunEnd::signal ? "interrupted" : run_end_name(end); }

// The segment's last checkpoint (a complete run tells its observers first, so that the MLPerf
// log's run_stop is in it) and the report.
TrainResult Training::finish(RunEnd end) {
  const std::string reason = end == RunEnd::signal ? StopSignals::name(stop_signal_) : run_end_name(end);
  if (end != RunEnd::signal) {
    const LossScaler& scaler = state_->loss_scaler;
    const RunOutcome outcome{state_->position, state_->results.time_to_target_s >= 0, scaler.skipped_steps(),
                             scaler.enabled() ? scaler.scale() : 0.0};
    for (TrainingObserver* o : observers_) o->on_run_end(outcome);
    set_last_words(nullptr);
    checkpoint(reason);
  }
  report::TrainSummary summary = setup_summary();
  summary.status = status_of(end);
  record_run_state(*state_, summary);
  summary.loss_scale = state_->loss_scaler.to_json();
  summary.precision = precision_name(ctx_->precision());
  summary.activation_dtype = dtype_name(ctx_->activation_dtype());
  summary.fuse = fuse_used();
  summary.segments.push_back(segment_json(reason));
  summary.start_time_unix_ms = summary.segments.at(0).at("start_unix_ms").as_double();  // the run's first
  summary.bytes_read = batches_->bytes_read();
  summary.skipped_samples = batches_->skipped_samples();
  summary.checkpoints = checkpoints_;
  for (TrainingObserver* o : observers_) o->fill(summary);
  if (trace::enabled()) write_trace();
  const Json report = report::build_train_report(comm_, summary);
  const std::string path = (fs::path(cfg_.output_dir) / "report.json").string();
  comm::on_rank0_agreed(comm_, [&] { report::write_json_atomic(path, report); });
  const RunPosition& pos = state_->position;
  if (end == RunEnd::signal)
    ST_LOG("stopped for " << reason << " after step " << pos.global_step << " of " << total_steps_ << "; wrote "
                          << checkpoints_.last << " and " << path << "; exit code " << kExitCheckpointed
                          << ": resume with --resume auto");
  else
    ST_LOG("wrote " << path << " and " << checkpoints_.last);
  return {report, end};
}

// --input-copy as it runs: overlap (DeviceBatches), inline (each batch copied to the GPU by the
// task when its step starts), or none (CPU batches used where the loader put them).
// --fuse auto: the fused batch norm + add + ReLU where it was measured to pay, amp-fp16 on a GPU
// (cuDNN's fused kernel takes fp16; docs/performance.md); none elsewhere, where it was not measured
// (on the CPU it computes what the three ops do, no faster). The fused convolution epilogue and the
// fused batch norm + ReLU are not measured on a GPU yet: only --fuse conv-bias-relu and bn-relu run them.
std::string Training::fuse_used() const {
  if (cfg_.fuse != "auto") return cfg_.fuse;
  const bool measured = ctx_->device() == Device::cuda && ctx_->precision() == Precision::amp_fp16;
  return measured ? "bn-add-relu" : "none";
}

// The start-up line's fusion: what runs and why; empty when nothing is fused and nothing was asked.
std::string Training::describe_fusion() const {
  std::vector<std::string> lines;
  const ops::OpNames model_ops = models::model_ops(cfg_.model, true);
  if (ctx_->fuse_bn_add_relu()) {
    if (model_ops.count("batch_norm_add_relu_forward_training") == 0) {
      if (cfg_.fuse != "auto")
        lines.push_back("--fuse bn-add-relu has no effect: " + cfg_.model + " has no residual blocks");
    } else {
      lines.push_back(std::string("each residual block ends with one op for batch norm, the shortcut's add and the "
                                  "ReLU (") +
                      (cfg_.fuse == "auto" ? "--fuse auto: amp-fp16 on a GPU" : "--fuse bn-add-relu") + ")");
    }
  }
  if (ctx_->fuse_conv_bias_relu())
    lines.push_back(model_ops.count("conv2d_bias_relu_forward") == 0
                        ? "--fuse conv-bias-relu has no effect: " + cfg_.model +
                              " has no convolution with a bias and a ReLU after it"
                        : "each convolution with a bias and its ReLU run as one op (--fuse conv-bias-relu)");
  if (ctx_->fuse_bn_relu())
    lines.push_back(model_ops.count("batch_norm_relu_forward_training") == 0
                        ? "--fuse bn-relu has no effect: " + cfg_.model + " has no batch norm with a ReLU after it"
                        : "each batch norm with a ReLU after it runs as one op (--fuse bn-relu)");
  std::string joined;
  for (const std::string& l : lines) joined += (joined.empty() ? "" : "; ") + l;
  return joined;
}

std::string Training::input_copy_used() const {
  if (device_batches() != nullptr) return "overlap";
  return ctx_->device() == Device::cpu ? "none" : "inline";
}

std::string Training::describe_input_copy() const {
  const std::string used = input_copy_used();
  if (used == "inline") return "each batch copied to the GPU when its step starts (--input-copy inline)";
  if (used == "none") return "batches used in host memory";
  if (ctx_->device() == Device::cpu)
    return "each batch copied into one of 2 host buffers (--input-copy overlap; nothing to overlap on the CPU)";
  return "the next batch copied to the GPU on the copy stream while the step computes (--input-copy " +
         cfg_.input_copy + ", 2 device buffers)";
}

// report.json's input.input_copy: what was asked, what ran, and what the upload did.
Json Training::input_copy_json() const {
  Json j = Json::object();
  j.set("requested", cfg_.input_copy);
  j.set("used", input_copy_used());
  const DeviceBatches* d = device_batches();
  j.set("buffers", d != nullptr ? Json(2) : Json());
  j.set("batches", d != nullptr ? Json(d->counts().batches) : Json());
  j.set("copies", d != nullptr ? Json(d->counts().copies) : Json());
  j.set("serialized", d != nullptr ? Json(d->counts().serialized) : Json());
  j.set("bytes", d != nullptr ? Json(d->counts().bytes) : Json());
  return j;
}

// The report's facts fixed at set-up: the model and its task, the hosts, the data and how it is
// read, the topology, the batch and the optimizer, the all-reduce and the phase timers.
report::TrainSummary Training::setup_summary() const {
  report::TrainSummary s;
  s.model = cfg_.model;
  s.task = task_->name();
  s.quality_metric = task_->quality_metric();
  s.parameters = state_->params().parameter_count();
  s.hosts = hosts_;
  s.threads_per_rank = threads_;
  s.config = resolved_config_;
  s.dataset = task_->dataset_json();
  s.input = task_->input_json();
  s.input.set("input_copy", input_copy_json());
  s.skip_bad_samples = cfg_.skip_bad_samples;
  s.topology = topology_->to_json();
  s.preflight = preflight_;
  s.staging = staging_;
  s.target_accuracy = cfg_.target_accuracy;
  s.global_batch = global_batch_;
  s.work_unit = task_->work_unit();
  s.accumulate_steps = cfg_.accumulate_steps;
  s.steps_per_epoch = state_->steps_per_epoch;
  s.optimizer = state_->optimizer().describe();
  s.reducer = reducer_.get();
  s.transports = transports_.to_json(cfg_);
  s.timers = &timers_;
  return s;
}

}  // namespace

const char* run_end_name(RunEnd end) {
  switch (end) {
    case RunEnd::completed:
      return "completed";
    case RunEnd::target_reached:
      return "target_reached";
    case RunEnd::max_steps:
      return "max_steps";
    case RunEnd::signal:
      return "signal";
    case RunEnd::already_complete:
      return "already_complete";
  }
  return "?";
}

TrainResult run_training(const comm::Communicator& comm, const TrainConfig& config, const Json& resolved_config) {
  Training training(comm, config, resolved_config);
  return training.run();
}

}  // namespace scaletrain::train
