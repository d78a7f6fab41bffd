// The training configuration's rules and the options of the pieces built from it (config.hpp).
// Every rule names the option as the user types it, so that an error reads as a usage hint.
#include "scaletrain/train/config.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/stall_watchdog.hpp"
#include "scaletrain/comm/transport.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/ops/registry.hpp"
#include "scaletrain/optim/adam.hpp"
#include "scaletrain/optim/lars.hpp"
#include "scaletrain/optim/lr_schedule.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "scaletrain/train/device_choice.hpp"
#include "scaletrain/train/loss_scaler.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

std::vector<std::string> fuse_list(const std::string& fuse) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = fuse.find(',', start);
    parts.push_back(fuse.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

bool fuses(const std::string& fuse, const std::string& fusion) {
  const std::vector<std::string> parts = fuse_list(fuse);
  return std::find(parts.begin(), parts.end(), fusion) != parts.end();
}

namespace {

std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

bool one_of(const std::string& value, std::initializer_list<const char*> known) {
  for (const char* k : known)
    if (value == k) return true;
  return false;
}

// The options that shape one schedule, refused with another (a config file that sets them for
// another schedule says something the run would not do).
void check_schedule_shape(const TrainConfig& c) {
  const bool step = c.lr_schedule == "step", poly = c.lr_schedule == "poly";
  require(std::isfinite(c.lr_poly_power) && c.lr_poly_power > 0,
          "--lr-poly-power must be a finite value > 0, got " + shortest(c.lr_poly_power));
  require(poly || c.lr_poly_power == 2.0, "--lr-poly-power is for --lr-schedule poly, not " + c.lr_schedule);
  require(std::isfinite(c.lr_step_gamma) && c.lr_step_gamma > 0,
          "--lr-step-gamma must be a finite value > 0, got " + shortest(c.lr_step_gamma));
  require(std::isfinite(c.lr_step_every) && c.lr_step_every >= 0,
          "--lr-step-every must be a finite number of epochs >= 0, got " + shortest(c.lr_step_every));
  for (double e : c.lr_step_epochs)
    require(std::isfinite(e) && e >= 0, "--lr-step-epochs: " + shortest(e) + " is not an epoch >= 0");
  require(step || (c.lr_step_epochs.empty() && c.lr_step_every == 0 && c.lr_step_gamma == 0.1),
          "--lr-step-epochs, --lr-step-every and --lr-step-gamma are for --lr-schedule step, not " + c.lr_schedule);
  require(c.lr_step_epochs.empty() || c.lr_step_every == 0,
          "give --lr-step-epochs (the epochs of the drops) or --lr-step-every (a drop every so many epochs), not both");
}

// "0.1", not "0.10000000000000001".
// Adam takes neither momentum nor weight decay (the MLPerf NCF reference passes none); --momentum
// is ignored, a Nesterov switch or a weight decay other than the default (unused) or 0 is refused.
void check_adam(const TrainConfig& c) {
  require(c.adam_beta1 >= 0 && c.adam_beta1 < 1, "--adam-beta1 must be in [0, 1), got " + shortest(c.adam_beta1));
  require(c.adam_beta2 >= 0 && c.adam_beta2 < 1, "--adam-beta2 must be in [0, 1), got " + shortest(c.adam_beta2));
  require(c.adam_epsilon > 0 && std::isfinite(c.adam_epsilon),
          "--adam-epsilon must be > 0, got " + shortest(c.adam_epsilon));
  if (!uses_adam(c)) return;
  require(!c.nesterov, "--nesterov is for --optimizer sgd; Adam has no Nesterov form");
  require(c.weight_decay == 0 || c.weight_decay == TrainConfig{}.weight_decay,
          "--weight-decay " + shortest(c.weight_decay) + ": --optimizer " + c.optimizer +
              " applies no weight decay (torch.optim.Adam as the MLPerf NCF reference uses it, TensorFlow's "
              "LazyAdamOptimizer as the Transformer reference uses it); leave --weight-decay out");
}

void check_schedule(const TrainConfig& c) {
  require(c.batch_size > 0, "--batch-size must be positive, got " + std::to_string(c.batch_size));
  require(c.accumulate_steps >= 1 && c.accumulate_steps <= 65536,
          "--accumulate-steps must be between 1 and 65536, got " + std::to_string(c.accumulate_steps));
  require(c.epochs > 0, "--epochs must be positive, got " + std::to_string(c.epochs));
  require(c.max_steps >= 0, "--max-steps must be >= 0, got " + std::to_string(c.max_steps));
  require(c.base_lr > 0 && std::isfinite(c.base_lr), "--base-lr must be positive, got " + shortest(c.base_lr));
  require(one_of(c.lr_schedule, {"cosine", "poly", "step", "constant", "rsqrt"}),
          "--lr-schedule '" + c.lr_schedule + "' is not one of " + optim::lr_schedule_kinds());
  require(c.warmup_epochs >= 0 && std::isfinite(c.warmup_epochs),
          "--warmup-epochs must be >= 0, got " + shortest(c.warmup_epochs));
  check_schedule_shape(c);
  require(c.label_smoothing >= 0 && c.label_smoothing < 1, "--label-smoothing must be in [0, 1)");
  require(one_of(c.optimizer, {"sgd", "lars", "adam", "lazy_adam"}),
          "unknown --optimizer '" + c.optimizer + "' (known: sgd, lars, adam, lazy_adam)");
  require(!(c.optimizer == "lars" && c.nesterov), "--nesterov is for --optimizer sgd; LARS has no Nesterov form");
  require(c.lars_trust_coefficient > 0 && std::isfinite(c.lars_trust_coefficient),
          "--lars-trust-coefficient must be positive, got " + shortest(c.lars_trust_coefficient));
  require(c.lars_epsilon >= 0 && std::isfinite(c.lars_epsilon),
          "--lars-epsilon must be >= 0, got " + shortest(c.lars_epsilon));
  check_adam(c);
  // The task's quality metric: a fraction (top-1, HR@10), or BLEU on 0-100 for translation.
  const bool bleu = models::model_entry(c.model).task == models::kTaskTranslation;
  require(c.target_accuracy >= 0 && c.target_accuracy <= (bleu ? 100 : 1),
          bleu ? "--target-accuracy is BLEU for --model " + c.model + ": between 0 and 100 (MLPerf: 25), got " +
                     shortest(c.target_accuracy)
               : "--target-accuracy must be between 0 and 1 (e.g. 0.92), got " + shortest(c.target_accuracy));
  require(c.eval_every >= 0, "--eval-every must be >= 0, got " + std::to_string(c.eval_every));
  require(c.log_every >= 0, "--log-every must be >= 0, got " + std::to_string(c.log_every));
}

void check_input(const TrainConfig& c) {
  require(!c.data_dir.empty(), "train: --data DIR is required");
  require(c.crop_padding >= 0, "--crop-padding must be >= 0");
  check_io_mode(c.io);
  check_data_threads(c.data_threads);
  require(one_of(c.shuffle_mode, {"global", "shard"}),
          "unknown --shuffle '" + c.shuffle_mode + "' (known: global, shard; --no-shuffle turns it off)");
  require(c.shuffle_buffer >= 1,
          "--shuffle-buffer must be a positive number of samples, got " + std::to_string(c.shuffle_buffer));
  require(c.data_prefetch >= 1, "--prefetch must be at least 1, got " + std::to_string(c.data_prefetch));
  require(one_of(c.input_copy, {"auto", "overlap", "inline"}),
          "unknown --input-copy '" + c.input_copy + "' (known: auto, overlap, inline)");
  require(one_of(c.conv_algo, {"heuristic", "search", "graph", "graph-search"}),
          "unknown --conv-algo '" + c.conv_algo + "' (known: heuristic, search, graph, graph-search)");
  const std::vector<std::string> fusions = fuse_list(c.fuse);
  const bool known_fusions = std::all_of(fusions.begin(), fusions.end(), [](const std::string& f) {
    return one_of(f, {"bn-add-relu", "bn-relu", "conv-bias-relu"});
  });
  require(
      one_of(c.fuse, {"auto", "none"}) || known_fusions,
      "unknown --fuse '" + c.fuse + "' (known: auto, none, or a comma list of bn-add-relu, bn-relu, conv-bias-relu)");
}

void check_communication(const TrainConfig& c) {
  require(c.ranks_per_node >= 0,
          "--ranks-per-node must be a positive integer, got " + std::to_string(c.ranks_per_node));
  require(one_of(c.allreduce, {"flat", "hierarchical", "auto"}),
          "unknown --allreduce '" + c.allreduce + "' (known: flat, hierarchical, auto)");
  require(one_of(c.grad_compression, {"auto", "none", "fp16", "bf16"}),
          "unknown --grad-compression '" + c.grad_compression + "' (known: auto, none, fp16, bf16)");
  comm::check_transport_request(c.allreduce, transport_request(c));
  parse_precision(c.precision);
  LossScaler::from_option(resolved_loss_scale(c));  // throws naming the value
  require(c.bucket_mb > 0 && std::isfinite(c.bucket_mb),
          "--bucket-mb must be a positive number of MiB, got " + shortest(c.bucket_mb));
  require(c.min_busbw >= 0 && std::isfinite(c.min_busbw),
          "--min-busbw must be >= 0 (GB/s), got " + shortest(c.min_busbw));
}

void check_mlperf_keys(const TrainConfig& c) {
  require(c.submission_division.empty() || one_of(c.submission_division, {"closed", "open"}),
          "unknown --submission-division '" + c.submission_division + "' (known: closed, open)");
  require(one_of(c.submission_status, {"onprem", "cloud", "preview", "research"}),
          "unknown --submission-status '" + c.submission_status + "' (known: onprem, cloud, preview, research)");
}

void check_checkpoints_and_restarts(const TrainConfig& c) {
  require(c.checkpoint_every >= 0,
          "--checkpoint-every must be >= 0 (epochs), got " + std::to_string(c.checkpoint_every));
  require(c.checkpoint_every_steps >= 0,
          "--checkpoint-every-steps must be >= 0, got " + std::to_string(c.checkpoint_every_steps));
  require(c.checkpoint_every_minutes >= 0 && std::isfinite(c.checkpoint_every_minutes),
          "--checkpoint-every-minutes must be >= 0, got " + shortest(c.checkpoint_every_minutes));
  require(c.keep_checkpoints >= 1, "--keep-checkpoints must be at least 1, got " + std::to_string(c.keep_checkpoints));
  require(!c.resume.empty(), "--resume needs auto, never, or a checkpoint file or run directory");
  require(c.resume == "never" || c.init_from.empty(),
          "--resume and --init-from exclude each other: --resume continues a run (weights, optimizer, position), "
          "--init-from starts a new run from a checkpoint's weights");
  require(c.resume == "never" || !c.overwrite,
          "--overwrite starts a new run (it deletes the checkpoints in --output-dir); it cannot be combined with "
          "--resume " +
              c.resume);
  require(c.stall_warn_s > 0 && std::isfinite(c.stall_warn_s),
          "--stall-warn-s must be a positive number of seconds, got " + shortest(c.stall_warn_s));
  require(c.stall_abort_s >= 0 && std::isfinite(c.stall_abort_s),
          "--stall-abort-s must be >= 0 (0 = never abort), got " + shortest(c.stall_abort_s));
  require(c.stall_abort_s == 0 || c.stall_abort_s >= c.stall_warn_s,
          "--stall-abort-s " + shortest(c.stall_abort_s) + " is shorter than --stall-warn-s " +
              shortest(c.stall_warn_s) + " (0 = never abort)");
}

}  // namespace

void check_model_name(const std::string& model) {
  std::string known;
  for (const auto& m : models::model_names()) {
    if (m == model) return;
    known += (known.empty() ? "" : ", ") + m;
  }
  throw UsageError("unknown model '" + model + "' (--model; known: " + known + ")");
}

int default_image_size(const std::string& model) {
  for (const models::ModelEntry& e : models::model_registry())
    if (e.name == model && e.image_size > 0) return e.image_size;
  return 224;
}

void check_io_mode(const std::string& io) {
  require(data::is_io_mode(io), "unknown --io '" + io + "' (known: " + data::io_mode_list() + ")");
}

void check_preprocess(const std::string& preprocess, const std::string& model) {
  require(data::is_preprocess_mode(preprocess),
          "unknown --preprocess '" + preprocess + "' (known: " + data::preprocess_mode_list() + ")");
  const models::ModelEntry& entry = models::model_entry(model);
  require(preprocess == "torchvision" || entry.task == models::kTaskImageClassification,
          "--preprocess " + preprocess + " is for image classification; --model " + model + " (" + entry.task +
              ") takes no images (leave --preprocess out)");
}

void check_decoding_options(const TrainConfig& c) {
  require(c.beam_size >= 1 && c.beam_size <= 64,
          "--beam-size must be between 1 (greedy decoding) and 64 beams, got " + std::to_string(c.beam_size));
  require(std::isfinite(c.length_penalty) && c.length_penalty >= 0,
          "--length-penalty must be a finite alpha >= 0 (the reference's 0.6), got " + shortest(c.length_penalty));
  const models::ModelEntry& entry = models::model_entry(c.model);
  if (entry.task == models::kTaskTranslation) return;
  const TrainConfig defaults;
  require(c.beam_size == defaults.beam_size, "--beam-size " + std::to_string(c.beam_size) +
                                                 " is for translation models' beam search; --model " + c.model + " (" +
                                                 entry.task + ") does not translate (leave --beam-size out)");
  require(c.length_penalty == defaults.length_penalty,
          "--length-penalty " + shortest(c.length_penalty) + " is for translation models' beam search; --model " +
              c.model + " (" + entry.task + ") does not translate (leave --length-penalty out)");
}

std::string default_preprocess(const std::string& model) {
  for (const models::ModelEntry& e : models::model_registry()) {
    if (e.name != model) continue;
    for (const auto& [option, value] : e.defaults)
      if (option == "preprocess") return value;
  }
  return "torchvision";
}

void check_data_threads(int n) {
  require(n >= 1 && n <= 256, "--data-threads must be between 1 and 256, got " + std::to_string(n));
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, CPU_COUNT(&set));
}

int default_threads(const comm::Communicator& comm) {
  const auto hosts = comm.all_hosts();
  const int on_my_node = static_cast<int>(std::count(hosts.begin(), hosts.end(), comm.host()));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A rank bound to fewer cores (mpirun binds a lone rank to one) gains nothing from more threads.
  return std::max(1, std::min(cores / std::max(1, on_my_node), allowed_cpus()));
}

namespace {

// An auxiliary loss weight for a model without auxiliary heads, and options of image
// classification that a recommendation model has no use for: refused rather than silently ignored (a config file
// written for ResNet passes the other image options, which the recommendation task does not read, unchanged).
void check_task_options(const TrainConfig& c) {
  require(std::isfinite(c.aux_loss_weight) && c.aux_loss_weight >= 0.0,
          "--aux-loss-weight must be a finite value >= 0, got " + shortest(c.aux_loss_weight));
  require(c.aux_loss_weight == 0.0 || models::default_aux_loss_weight(c.model) > 0.0,
          "--aux-loss-weight " + shortest(c.aux_loss_weight) + ": --model " + c.model +
              " has no auxiliary heads (set it to 0)");
  const std::string& task = models::model_entry(c.model).task;
  if (task == models::kTaskTranslation) {
    require(c.shuffle_mode == "global", "--shuffle " + c.shuffle_mode + " is for image shards; --model " + c.model +
                                            " shuffles its sentence pairs globally (in memory)");
    require(c.accumulate_steps == 1, "--accumulate-steps " + std::to_string(c.accumulate_steps) + ": --model " +
                                         c.model +
                                         " batches by tokens; raise --batch-tokens for a larger step instead");
    return;
  }
  if (task != models::kTaskRecommendation) return;
  require(c.label_smoothing == 0.0, "--label-smoothing is for image classification; --model " + c.model +
                                        " trains with sigmoid cross-entropy (set it to 0)");
  require(c.shuffle_mode == "global", "--shuffle " + c.shuffle_mode + " is for image shards; --model " + c.model +
                                          " shuffles its samples globally (in memory)");
}

}  // namespace

std::string kernels_missing(Device device, const std::vector<std::pair<std::string, ops::OpNames>>& needs,
                            Precision precision) {
  const std::string kernel = std::string(device == Device::cuda ? "CUDA" : device_name(device)) + " kernel";
  std::string none, not_in_precision;  // ops with no kernel at all; ops whose kernel is fp32 only
  for (const auto& [what, names] : needs) {
    const std::vector<std::string> all(names.begin(), names.end());
    const std::vector<std::string> missing = ops::unsupported_ops(all, device);
    if (!missing.empty()) none += (none.empty() ? "" : "; ") + ops::op_list(missing) + " (" + what + ")";
    std::vector<std::string> fp32_only;
    for (const std::string& op : ops::unsupported_ops(all, device, precision))
      if (std::find(missing.begin(), missing.end(), op) == missing.end()) fp32_only.push_back(op);
    if (!fp32_only.empty())
      not_in_precision += (not_in_precision.empty() ? "" : "; ") + ops::op_list(fp32_only) + " (" + what + ")";
  }
  std::string out;
  if (!none.empty()) out = "no " + kernel + " for " + none;
  if (!not_in_precision.empty())
    out += (out.empty() ? "" : "; ") + std::string("no ") + kernel + " in " + precision_name(precision) + " for " +
           not_in_precision;
  return out;
}

Precision parse_precision(const std::string& value) {
  if (value == "fp32") return Precision::fp32;
  if (value == "amp-fp16") return Precision::amp_fp16;
  if (value == "amp-bf16") return Precision::amp_bf16;
  throw UsageError("unknown --precision '" + value + "' (known: fp32, amp-fp16, amp-bf16)");
}

std::string resolved_loss_scale(const TrainConfig& c) {
  if (c.loss_scale != "auto") return c.loss_scale;
  return c.precision == "amp-fp16" ? "dynamic" : "none";
}

std::string resolved_grad_compression(const TrainConfig& c) {
  if (c.grad_compression != "auto") return c.grad_compression;
  if (c.precision == "amp-fp16") return "fp16";
  return c.precision == "amp-bf16" ? "bf16" : "none";
}

std::string train_kernels_missing(const TrainConfig& c, const Task& task, Device device) {
  nn::ParameterSet one;  // the optimizer's ops do not depend on the parameters: one of one value
  one.add_parameter("w", {1});
  one.finalize();
  std::vector<std::pair<std::string, ops::OpNames>> needs = {
      {"--model " + c.model + ", " + task.name(), task.ops(/*training=*/true)},
      {"--optimizer " + c.optimizer, make_optimizer(c, one)->ops()}};
  if (c.accumulate_steps > 1)
    needs.push_back({"--accumulate-steps " + std::to_string(c.accumulate_steps), {"accumulate_gradient"}});
  return kernels_missing(device, needs, parse_precision(c.precision));
}

void check_train_config(const TrainConfig& c) {
  parse_device_request(c.device);
  check_model_name(c.model);
  check_preprocess(c.preprocess, c.model);
  check_task_options(c);
  check_decoding_options(c);
  check_schedule(c);
  check_input(c);
  check_communication(c);
  check_checkpoints_and_restarts(c);
  check_mlperf_keys(c);
}

namespace {
// Training reads the next epoch's first batches ahead of its start (loader.hpp).
// SCALETRAIN_LOADER_READ_AHEAD=0 turns that off: a benchmark's hook to measure what it saves
// (tools/bench_epoch_start.sh), not an option.
bool read_ahead_across_epochs() {
  const char* hook = std::getenv("SCALETRAIN_LOADER_READ_AHEAD");
  return hook == nullptr || std::string(hook) != "0";
}
}  // namespace

data::LoaderOptions train_loader_options(const TrainConfig& c, int64_t batch_size, const comm::Communicator& comm,
                                         int ranks_on_node) {
  data::LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = c.shuffle;
  o.seed = c.seed;
  o.augment = c.augment;
  o.crop_padding = c.crop_padding;
  o.drop_last = true;  // equal full batches on every rank
  o.pad_last = c.pad_last;
  o.prefetch = c.data_prefetch;
  o.read_ahead = read_ahead_across_epochs();
  o.last_epoch = static_cast<int>(c.epochs) - 1;  // a --max-steps run may end sooner: it reads ahead once at most
  o.shuffle_mode = c.shuffle_mode;
  o.shuffle_buffer = c.shuffle_buffer;
  o.data_threads = c.data_threads;
  o.io = c.io;
  const std::vector<int64_t> hw = input_image_size(c);
  o.image_height = static_cast<int>(hw[0]);
  o.image_width = static_cast<int>(hw[1]);
  o.preprocess = c.preprocess;
  o.skip_bad_samples = c.skip_bad_samples;
  o.comm = &comm;
  o.ranks_on_node = ranks_on_node;
  return o;
}

EvalDataOptions eval_data_options(const TrainConfig& c, int ranks_on_node) {
  EvalDataOptions o;
  o.io = c.io;
  o.data_threads = c.data_threads;
  o.prefetch = c.data_prefetch;
  const std::vector<int64_t> hw = input_image_size(c);
  o.image_height = static_cast<int>(hw[0]);
  o.image_width = static_cast<int>(hw[1]);
  o.preprocess = c.preprocess;
  o.skip_bad_samples = c.skip_bad_samples;
  o.ranks_on_node = ranks_on_node;
  return o;
}

// --max-steps cuts a run short; the schedule stays the one for all epochs.
optim::LrScheduleOptions schedule_options(const TrainConfig& c, int64_t steps_per_epoch) {
  optim::LrScheduleOptions o;
  o.kind = c.lr_schedule;
  o.base_lr = c.base_lr;
  o.warmup_epochs = c.warmup_epochs;
  if (c.warmup_steps > 0) o.warmup_steps = c.warmup_steps;
  o.steps_per_epoch = steps_per_epoch;
  o.total_steps = steps_per_epoch * c.epochs;
  o.end_lr = c.end_lr;
  o.poly_power = c.lr_poly_power;
  o.step_epochs = c.lr_step_epochs;
  o.step_every = c.lr_step_every;
  o.step_gamma = c.lr_step_gamma;
  return o;
}

optim::SgdOptions sgd_options(const TrainConfig& c) {
  optim::SgdOptions o;
  o.momentum = c.momentum;
  o.weight_decay = c.weight_decay;
  o.nesterov = c.nesterov;
  return o;
}

optim::LarsOptions lars_options(const TrainConfig& c) {
  optim::LarsOptions o;
  o.momentum = c.momentum;
  o.weight_decay = c.weight_decay;
  o.trust_coefficient = c.lars_trust_coefficient;
  o.epsilon = c.lars_epsilon;
  return o;
}

optim::AdamOptions adam_options(const TrainConfig& c) {
  optim::AdamOptions o;
  o.beta1 = c.adam_beta1;
  o.beta2 = c.adam_beta2;
  o.epsilon = c.adam_epsilon;
  return o;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, nn::ParameterSet& params) {
  if (c.optimizer == "lars") return std::make_unique<optim::Lars>(params, lars_options(c));
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(params, adam_options(c));
  if (c.optimizer == "lazy_adam") return std::make_unique<optim::LazyAdam>(params, adam_options(c));
  return std::make_unique<optim::Sgd>(params, sgd_options(c));
}

comm::AllReduceOptions allreduce_options(const TrainConfig& c) {
  comm::AllReduceOptions o;
  o.algorithm = c.allreduce;
  o.compression = comm::parse_compression(resolved_grad_compression(c));
  return o;
}

comm::TransportRequest transport_request(const TrainConfig& c) {
  comm::TransportRequest r;
  r.intra = c.intra;
  r.inter = c.inter;
  r.cuda_aware_mpi = c.cuda_aware_mpi;
  return r;
}

comm::BucketOptions bucket_options(const TrainConfig& c) {
  comm::BucketOptions o;
  o.bucket_mb = c.bucket_mb;
  o.overlap = c.overlap;
  return o;
}

comm::StallOptions stall_options(const TrainConfig& c) {
  comm::StallOptions o;
  o.warn_s = c.stall_warn_s;
  o.abort_s = c.stall_abort_s;
  return o;
}

}  // namespace scaletrain::train
