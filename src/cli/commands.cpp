// `scaletrain`: train | eval | predict | info. Options come from Boost.Program_options; for train,
// an INI file given with --config supplies defaults that the command line overrides.
// Unknown options, bad values and missing arguments are usage errors (exit 2, printed once).
#include "scaletrain/cli/commands.hpp"

#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>
#include <utility>

#include "cli/option_ranges.hpp"
#include "cli/train_options.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/checkpoint/run_directory.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/memory.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/translation.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/ops/registry.hpp"
#include "scaletrain/train/checkpointing.hpp"
#include "scaletrain/train/device_choice.hpp"
#include "scaletrain/train/mixed_precision.hpp"
#include "scaletrain/train/task.hpp"
#include "scaletrain/train/trainer.hpp"
#include "scaletrain/train/translate.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace scaletrain::cli {
namespace {

const char* kUsage =
    "usage: scaletrain <command> [options]\n"
    "\n"
    "commands:\n"
    "  train      data-parallel training under mpirun/srun; writes checkpoints/ and report.json, resumes runs\n"
    "  eval       a checkpoint's quality on a dataset split (top-1; HR@10 for ncf; BLEU), sharded over ranks\n"
    "  predict    a checkpoint's logits for the images or (user, item) pairs in an HDF5 file\n"
    "  translate  a translation model's translations of a text file, one sentence a line\n"
    "  info       the models and their tasks; a model's parameter count and tensors (state_dict names)\n"
    "\n"
    "Run 'scaletrain <command> --help' for a command's options.\n";

// Parses argv (after the command word) against `desc`; --help prints and returns false.
bool parse(const std::string& command, int argc, char** argv, const po::options_description& desc,
           po::variables_map& vm, const po::positional_options_description* positional = nullptr) {
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(desc);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what());
  }
  if (vm.count("help")) {
    if (log_rank() == 0) std::cout << "usage: scaletrain " << command << " [options]\n\n" << desc << "\n";
    return false;
  }
  check_option_ranges(vm, option_ranges());
  return true;
}

void notify(const std::string& command, po::variables_map& vm) {
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what());
  }
}

// A default shown in --help as the user would type it (0.1, not 0.10000000000000001).
std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

constexpr unsigned kHelpWidth = 110;  // columns of --help output
const char* kDeviceHelp =
    "auto | cpu | cuda: where each rank computes. auto: a GPU when every rank sees one, else the CPU; cuda: a GPU "
    "or a clear error. A rank takes the GPU of its local rank on its host modulo the GPUs it sees "
    "(CUDA_VISIBLE_DEVICES is respected); more ranks than GPUs share them, with a warning";

// "resnet20 | resnet50 | alexnet | ...": the registry's models of one task, for help texts.
std::string model_names(const std::string& task) {
  std::string names;
  for (const models::ModelEntry& e : models::model_registry())
    if (e.task == task) names += (names.empty() ? "" : " | ") + e.name;
  return names;
}
std::string image_model_names() { return model_names(models::kTaskImageClassification); }
std::string translation_model_names() { return model_names(models::kTaskTranslation); }

constexpr const char* kImageSizeHelp =
    "H,W: model input size for JPEG datasets (default: the model's, 224,224 for resnet50, alexnet and googlenet, "
    "299,299 for inception_v3, 227,227 for alexnet-caffe, 32,32 for resnet20: scaletrain info)";

// "3,224,224" -> {3, 224, 224}
Shape parse_shape(const std::string& option, const std::string& text, std::size_t dims) {
  Shape s;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      s.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--" + option + " '" + text + "' is not a list of " + std::to_string(dims) +
                       " positive integers");
    }
  }
  if (s.size() != dims)
    throw UsageError("--" + option + " '" + text + "' must have " + std::to_string(dims) + " comma-separated values");
  return s;
}

// "20,40,60.5" -> {20, 40, 60.5}: epochs, each a finite number >= 0.
std::vector<double> parse_epoch_list(const std::string& option, const std::string& text) {
  std::vector<double> epochs;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument(item);
      epochs.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--" + option + " '" + text + "': '" + item + "' is not an epoch (a number >= 0)");
    }
  }
  if (epochs.empty()) throw UsageError("--" + option + " is empty: give the epochs, comma-separated");
  return epochs;
}

// "224,224" -> (224, 224); 0, 0 when the option is absent.
std::pair<int, int> image_size_option(const po::variables_map& vm) {
  if (!vm.count("image-size")) return {0, 0};
  const Shape hw = parse_shape("image-size", vm["image-size"].as<std::string>(), 2);
  if (hw[0] > 8192 || hw[1] > 8192)
    throw UsageError("--image-size '" + vm["image-size"].as<std::string>() + "' is too large (at most 8192,8192)");
  return {static_cast<int>(hw[0]), static_cast<int>(hw[1])};
}

// Expands $VAR and ${VAR} in a path (INI files are not seen by a shell; each rank expands its own
// environment, so a per-node $TMPDIR works). An unset variable is a usage error naming it.
std::string expand_env(const std::string& option, const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    std::size_t start = i + 1, end;
    const bool braced = start < text.size() && text[start] == '{';
    if (braced) {
      end = text.find('}', start);
      if (end == std::string::npos) throw UsageError("--" + option + " '" + text + "': unterminated ${");
      ++start;
    } else {
      end = start;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    }
    const std::string name = text.substr(start, end - start);
    if (name.empty()) {
      out += text[i++];
      continue;
    }
    const char* value = std::getenv(name.c_str());
    if (!value || !*value)
      throw UsageError("--" + option + " '" + text + "': environment variable " + name + " is not set");
    out += value;
    i = braced ? end + 1 : end;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// train

po::options_description train_options(train::TrainConfig& c, std::string& config_file) {
  po::options_description general("general", kHelpWidth);
  general.add_options()("help,h", "print this help")(
      "config", po::value(&config_file),
      "INI file with any of these options (key = value, long names without "
      "--); the command line overrides it. Examples in inputs/")(
      "model", po::value(&c.model)->default_value(c.model),
      (image_model_names() + " (image classification) | ncf (recommendation); "
                             "some bring their own defaults: scaletrain info")
          .c_str())("data", po::value(&c.data_dir),
                    "dataset directory with train/ and val/ shards (docs/dataset-format.md)")(
      "output-dir", po::value(&c.output_dir)->default_value(c.output_dir),
      "the run directory: checkpoints/ and report.json (created by rank 0)")(
      "resume", po::value(&c.resume)->default_value(c.resume),
      "auto: continue the run in --output-dir from its newest valid checkpoint (a new run if it has none; what "
      "job scripts pass, so a requeued job needs no change) | never: a new run (refused if --output-dir holds "
      "checkpoints, unless --overwrite) | a checkpoint file or run directory to continue from")(
      "overwrite", po::bool_switch(&c.overwrite),
      "with --resume never: delete the checkpoints and report.json already in --output-dir and start a new run")(
      "init-from", po::value(&c.init_from),
      "start a new run from this checkpoint's weights (a file or a run directory; step 0, zero momentum)")(
      "seed", po::value(&c.seed)->default_value(c.seed), "seed for initialisation, shuffling and augmentation")(
      "threads", po::value(&c.threads)->default_value(c.threads),
      "CPU threads per rank; 0 = the node's cores divided by its ranks, at most the cores the rank is bound to "
      "(mpirun binds a lone rank to one core: --bind-to none frees it)")(
      "device", po::value(&c.device)->default_value(c.device), kDeviceHelp)(
      "tf32", po::bool_switch(&c.tf32),
      "on a GPU, let cuDNN and cuBLAS run fp32 convolutions and matrix products on TF32 tensor cores (A100, "
      "H100; 10 mantissa bits in the products): faster, no longer fp32-exact. Off by default; no effect on a "
      "CPU or a V100")(
      "conv-algo", po::value(&c.conv_algo)->default_value(c.conv_algo),
      "heuristic | search | graph | graph-search: how cuDNN's convolution kernels are chosen per shape on a GPU. "
      "heuristic: the first usable algorithm of cuDNN's heuristics (its legacy API); search: cuDNN times each "
      "algorithm once per shape (in the first step) and the fastest usable one runs, as PyTorch's cudnn.benchmark "
      "(backward: the fastest deterministic one); graph: cuDNN's graph API, the first engine its heuristics offer "
      "(the engines PyTorch's cuDNN path uses, some of which the legacy API cannot reach); graph-search: the graph "
      "API's engines timed once per shape, the fastest runs. A shape the graph API cannot plan runs the legacy "
      "way. report.json's device.conv_algorithms says which ran and how it was chosen. No effect on a CPU")(
      "conv-nondeterministic", po::bool_switch(&c.conv_nondeterministic),
      "on a GPU, let cuDNN's backward convolutions (data and filter gradients) use nondeterministic algorithms "
      "(atomic sums: reruns differ in the last bits) where they rank first or time fastest, as PyTorch does unless "
      "torch.backends.cudnn.deterministic is set. Off by default: backward prefers a deterministic algorithm where "
      "one is usable. No effect on a CPU");
  po::options_description schedule("schedule and optimizer", kHelpWidth);
  schedule.add_options()("epochs", po::value(&c.epochs)->default_value(c.epochs), "epochs to train")(
      "max-steps", po::value(&c.max_steps)->default_value(c.max_steps), "stop after N optimizer steps (0 = no limit)")(
      "batch-size", po::value(&c.batch_size)->default_value(c.batch_size),
      "samples per rank per step (per micro-batch with --accumulate-steps); global batch = ranks x batch size x "
      "accumulate steps")(
      "batch-tokens", po::value(&c.batch_tokens)->default_value(c.batch_tokens),
      "translation models: tokens per rank per step, whole sentence pairs grouped by length so that neither "
      "side's padded batch exceeds it (the MLPerf reference's batch_size: 4096 for the big model; MLPerf's "
      "global_batch_size is ranks x this); --batch-size does not apply")(
      "accumulate-steps", po::value(&c.accumulate_steps)->default_value(c.accumulate_steps),
      "K: each optimizer step sums the gradients of K micro-batches of --batch-size, then all-reduces once "
      "(exact but for batch-norm statistics, which are per micro-batch); for large global batches on few ranks")(
      "base-lr", po::value(&c.base_lr)->default_value(c.base_lr, shortest(c.base_lr)),
      "learning rate for the global batch (no implicit scaling with the number of ranks)")(
      "lr-schedule", po::value(&c.lr_schedule)->default_value(c.lr_schedule),
      "cosine (to 0) | poly (power --lr-poly-power, to --end-lr) | step (x --lr-step-gamma at --lr-step-epochs, "
      "default 30%, 60%, 80% of the epochs, or every --lr-step-every epochs) | constant (--base-lr throughout, after "
      "any warmup: NCF's) | rsqrt (linear warmup from 0 over --warmup-steps to --base-lr, then x sqrt(warmup / "
      "step): the MLPerf Transformer's)")(
      "lr-poly-power", po::value(&c.lr_poly_power)->default_value(c.lr_poly_power, shortest(c.lr_poly_power)),
      "poly schedule: the exponent (2: MLPerf ResNet-50; 0.5: Caffe's bvlc_googlenet quick solver)")(
      "lr-step-epochs", po::value<std::string>(),
      "step schedule: the epochs where the learning rate drops, comma-separated, e.g. 20,40,60,80 (Caffe's "
      "bvlc_alexnet solver at batch 256); may be fractional")(
      "lr-step-every", po::value(&c.lr_step_every)->default_value(c.lr_step_every, shortest(c.lr_step_every)),
      "step schedule: a drop every this many epochs instead of --lr-step-epochs (Inception-v3: 2, with "
      "--lr-step-gamma 0.94); 0: use --lr-step-epochs")(
      "lr-step-gamma", po::value(&c.lr_step_gamma)->default_value(c.lr_step_gamma, shortest(c.lr_step_gamma)),
      "step schedule: the factor of each drop")(
      "warmup-epochs", po::value(&c.warmup_epochs)->default_value(c.warmup_epochs, shortest(c.warmup_epochs)),
      "linear warmup to --base-lr over this many epochs (may be fractional)")(
      "warmup-steps", po::value(&c.warmup_steps)->default_value(c.warmup_steps),
      "the warmup in optimizer steps instead of epochs (> 0; the Transformer reference's rsqrt schedule: 16000)")(
      "end-lr", po::value(&c.end_lr)->default_value(c.end_lr, shortest(c.end_lr)),
      "final learning rate of the poly schedule")(
      "momentum", po::value(&c.momentum)->default_value(c.momentum, shortest(c.momentum)),
      "SGD and LARS momentum (ignored by adam)")(
      "weight-decay", po::value(&c.weight_decay)->default_value(c.weight_decay, shortest(c.weight_decay)),
      "L2 weight decay (PyTorch's rule), sgd and lars; adam has none (it ignores the default, refuses other values "
      "but 0)")("nesterov", po::bool_switch(&c.nesterov), "Nesterov momentum")(
      "label-smoothing", po::value(&c.label_smoothing)->default_value(c.label_smoothing, shortest(c.label_smoothing)),
      "as PyTorch's CrossEntropyLoss(label_smoothing=...)")(
      "aux-loss-weight", po::value(&c.aux_loss_weight)->default_value(c.aux_loss_weight, shortest(c.aux_loss_weight)),
      "weight of the auxiliary heads' losses added to the main loss in training (models with auxiliary heads: "
      "googlenet 0.3 per head, inception_v3 0.4, their defaults); 0 switches the heads off: they neither run nor "
      "train, and their weights stay in the checkpoint as they were. Evaluation uses the main head only")(
      "optimizer", po::value(&c.optimizer)->default_value(c.optimizer),
      "sgd (momentum SGD, PyTorch's rule) | lars (layer-wise trust ratios as in MLPerf's ResNet-50 reference for "
      "global batches above 8k; use with --lr-schedule poly and --warmup-epochs; batch-norm and bias tensors are "
      "not adapted and not decayed) | adam (torch.optim.Adam without weight decay, for NCF; its defaults are the "
      "MLPerf NCF reference's: --adam-beta1 0.9, --adam-beta2 0.999, --adam-epsilon 1e-8) | lazy_adam (TensorFlow's "
      "LazyAdamOptimizer, which the MLPerf Transformer reference uses: Adam, but a lookup-only embedding table (NCF's) "
      "updates only the rows the step looked up; where there is none, as in the Transformer, it is Adam bit for bit; "
      "takes the --adam-* options)")(
      "lars-trust-coefficient",
      po::value(&c.lars_trust_coefficient)->default_value(c.lars_trust_coefficient, shortest(c.lars_trust_coefficient)),
      "LARS trust coefficient eta")("lars-epsilon",
                                    po::value(&c.lars_epsilon)->default_value(c.lars_epsilon, shortest(c.lars_epsilon)),
                                    "LARS epsilon in the trust ratio's denominator")(
      "adam-beta1", po::value(&c.adam_beta1)->default_value(c.adam_beta1, shortest(c.adam_beta1)),
      "Adam beta1, the first moment's decay, in [0, 1) (MLPerf NCF reference: 0.9)")(
      "adam-beta2", po::value(&c.adam_beta2)->default_value(c.adam_beta2, shortest(c.adam_beta2)),
      "Adam beta2, the second moment's decay, in [0, 1) (MLPerf NCF reference: 0.999)")(
      "adam-epsilon", po::value(&c.adam_epsilon)->default_value(c.adam_epsilon, shortest(c.adam_epsilon)),
      "Adam epsilon, > 0, added to the corrected second moment's root (MLPerf NCF reference: 1e-8)")(
      "precision", po::value(&c.precision)->default_value(c.precision),
      "fp32 | amp-fp16 | amp-bf16: mixed precision keeps activations, their gradients and copies of the weight "
      "matrices, kernels and embeddings in 16 bits, and fp32 master weights, optimizer state, normalisation "
      "statistics and losses (docs/mixed-precision.md). Activations are stored in 16-bit tensors and every op "
      "computes in fp32, rounding each 16-bit output once; on the GPU convolutions and matrix products run on "
      "tensor cores (fp32 accumulation). On the CPU this is AMP's numerics, not its speed. amp-bf16 needs a GPU of "
      "compute capability 8.0 or newer")(
      "fuse", po::value(&c.fuse)->default_value(c.fuse),
      "auto | none | a comma list of: bn-add-relu: end each residual block (resnet20, resnet50) with one op for "
      "batch norm, the shortcut's add and the ReLU (cuDNN's fused batch norm on a GPU in amp-fp16; the same values "
      "as the three ops in fp32, one rounding instead of three under a mixed precision); conv-bias-relu: run each "
      "convolution with a bias and its ReLU (alexnet, alexnet-caffe, googlenet-caffe) as one op (cuDNN's fused "
      "epilogue on a GPU; the same values, one rounding instead of two in 16 bits; not measured on a GPU yet); "
      "bn-relu: run each batch norm with the ReLU after it (resnet20, resnet50 but the blocks' last batch norm, "
      "googlenet, inception_v3) as one op (cuDNN's fused batch norm on a GPU in amp-fp16; the same values in every "
      "precision; not measured on a GPU yet). "
      "auto: bn-add-relu in amp-fp16 on a GPU, where it was measured to pay (ResNet-50 1.16x faster at batch 256 "
      "on an H200), none elsewhere")(
      "loss-scale", po::value(&c.loss_scale)->default_value(c.loss_scale),
      "auto (dynamic for amp-fp16, none otherwise) | none | dynamic | a fixed number: the loss's gradient is "
      "multiplied by the scale before backward and the "
      "gradients divided by it after the all-reduce; a step with an inf or NaN gradient on any rank is skipped on "
      "every rank (the data and the learning-rate schedule move on). dynamic: PyTorch GradScaler's rules (from "
      "65536, x2 after 2000 finite steps in a row, x0.5 at a skipped step), checkpointed with the run. For 16-bit "
      "training; in fp32 a power-of-two scale changes no bit until a step overflows");
  po::options_description data("data", kHelpWidth);
  bool no_shuffle = false, no_augment = false;
  (void)no_shuffle;
  (void)no_augment;
  data.add_options()("no-shuffle", po::bool_switch(), "keep file order (no per-epoch shuffling)")(
      "no-augment", po::bool_switch(), "no augmentation: normalisation only")(
      "crop-padding", po::value(&c.crop_padding)->default_value(c.crop_padding),
      "random crop after zero padding by this many pixels (0 = off)")(
      "preprocess", po::value(&c.preprocess)->default_value(c.preprocess), kPreprocessHelp)(
      "prefetch", po::value(&c.data_prefetch)->default_value(c.data_prefetch),
      "batches prepared ahead per rank (across epochs too: the next epoch's first ones are read before it starts)")(
      "input-copy", po::value(&c.input_copy)->default_value(c.input_copy),
      "how each batch reaches a GPU: overlap (the next batch is copied on the copy stream while the current step "
      "computes, into two device buffers) | inline (copied on the compute stream when its step starts) | auto "
      "(overlap on a GPU; on the CPU the batches are already in host memory and nothing is copied)")(
      "io", po::value(&c.io)->default_value(c.io),
      "shard reader: posix (pread) | mmap (raw shards mapped, one copy from the page cache; for staged or cached "
      "data) | mpiio (HDF5 MPI-IO, independent) | mpiio-collective (collective reads, aggregated by MPI-IO)")(
      "shuffle", po::value(&c.shuffle_mode)->default_value(c.shuffle_mode),
      "global (a permutation of all samples per epoch) | shard (shards dealt to ranks, "
      "then shuffled within --shuffle-buffer)")("shuffle-buffer",
                                                po::value(&c.shuffle_buffer)->default_value(c.shuffle_buffer),
                                                "samples in the shuffle buffer of --shuffle shard")(
      "pad-last", po::bool_switch(&c.pad_last),
      "repeat samples to fill the last batch of an epoch (default: drop the incomplete batch)")(
      "data-threads", po::value(&c.data_threads)->default_value(c.data_threads),
      "decode/augment threads per rank (they share the cores with compute; 2-4 for JPEG)")(
      "stage-to", po::value(&c.stage_to),
      "before training, one rank per node copies the shards to this node-local directory (e.g. /raid, or "
      "$TMPDIR/x: $VAR and ${VAR} are expanded on each rank, also from --config) and verifies their checksums; "
      "the node's ranks then read from there")("image-size", po::value<std::string>(), kImageSizeHelp)(
      "skip-bad-samples", po::bool_switch(&c.skip_bad_samples),
      "skip samples that fail to read or decode (counted in report.json) instead of stopping")(
      "verify-data", po::bool_switch(&c.verify_data),
      "before anything reads a shard, compare every shard's bytes with the dataset's manifest.json (XXH3-64; the "
      "ranks share the shards, about a second per 10 GB per rank from page cache, the file system's read rate "
      "otherwise); a damaged shard stops the run naming it")(
      "require-checksums", po::bool_switch(&c.require_checksums),
      "refuse a split without manifest.json and, unless --verify-data is also given, shards whose HDF5 metadata has "
      "no checksums (h5py's default format; refused before libhdf5 reads them) or whose 'task'/'encoding' is a "
      "variable-length string (kept in HDF5's global heap, which has no checksum) (docs/reliability.md)");
  po::options_description progress("evaluation, progress and outputs", kHelpWidth);
  progress.add_options()("eval-every", po::value(&c.eval_every)->default_value(c.eval_every),
                         "evaluate on val every N epochs (and after the last)")(
      "target-accuracy", po::value(&c.target_accuracy)->default_value(c.target_accuracy, shortest(c.target_accuracy)),
      "stop at the first evaluation whose quality reaches this: top-1 or HR@10 as a fraction (0..1), BLEU (0..100) "
      "for translation models (MLPerf: 25); 0 = train all epochs")(
      "beam-size", po::value(&c.beam_size)->default_value(c.beam_size), kBeamSizeHelp)(
      "length-penalty", po::value(&c.length_penalty)->default_value(c.length_penalty, shortest(c.length_penalty)),
      kLengthPenaltyHelp)("log-every", po::value(&c.log_every)->default_value(c.log_every),
                          "progress line every N steps (rank 0)")(
      "trace", po::bool_switch(&c.trace),
      "write each rank's timeline (data wait, forward, backward, each bucket's all-reduce, optimizer, evaluation, "
      "checkpoints) to --output-dir/trace/rank-NNNNN.json for Perfetto or chrome://tracing; scaletrain-report trace "
      "RUN_DIR merges the ranks")(
      "op-times", po::bool_switch(&c.op_times),
      "time every op of the training steps, the first step left out (on a GPU with CUDA events: the GPU's time; on "
      "the CPU with the clock) and print the ops that take the most at the end; report.json's op_times has them "
      "all. Costs a few microseconds of host time per op")(
      "checkpoint-every", po::value(&c.checkpoint_every)->default_value(c.checkpoint_every),
      "also checkpoint every N epochs (0 = off; a checkpoint is always written at the end and on SIGUSR1/SIGTERM)")(
      "checkpoint-every-steps", po::value(&c.checkpoint_every_steps)->default_value(c.checkpoint_every_steps),
      "also checkpoint every N optimizer steps (0 = off)")(
      "checkpoint-every-minutes",
      po::value(&c.checkpoint_every_minutes)
          ->default_value(c.checkpoint_every_minutes, shortest(c.checkpoint_every_minutes)),
      "also checkpoint every M minutes of training, by rank 0's clock (0 = off)")(
      "keep-checkpoints", po::value(&c.keep_checkpoints)->default_value(c.keep_checkpoints),
      "keep the newest K checkpoints in --output-dir/checkpoints")(
      "stall-warn-s", po::value(&c.stall_warn_s)->default_value(c.stall_warn_s, shortest(c.stall_warn_s)),
      "warn, naming the ranks that have not arrived and their hosts, when a step or collective makes no progress "
      "for this many seconds")("stall-abort-s",
                               po::value(&c.stall_abort_s)->default_value(c.stall_abort_s, shortest(c.stall_abort_s)),
                               "abort the job (exit code 3) after this many seconds without progress (0 = never)");
  po::options_description communication("gradient communication", kHelpWidth);
  communication.add_options()(
      "ranks-per-node", po::value<int>(),
      "emulate nodes of N ranks: ranks k*N .. k*N+N-1 form node k (default: SCALETRAIN_RANKS_PER_NODE, else the "
      "ranks that share memory)")("allreduce", po::value(&c.allreduce)->default_value(c.allreduce),
                                  "flat | hierarchical (intra-node reduce-scatter, inter-node all-reduce of 1/L, "
                                  "intra-node all-gather) | auto (per bucket size, the faster in a start-up "
                                  "calibration; flat on unequal nodes)")(
      "grad-compression", po::value(&c.grad_compression)->default_value(c.grad_compression),
      "auto (a mixed precision's 16-bit format: fp16 for amp-fp16, bf16 for amp-bf16; none for fp32) | none | fp16 "
      "| bf16: send 16-bit gradients, half the bytes. Each addition is done in fp32 and its result rounded back to "
      "16 bits, so the partial sums are 16-bit, as NCCL sums half types: a sum over many ranks collects one "
      "rounding per addition, not one in all. none sends and sums fp32 (docs/mixed-precision.md)")(
      "intra", po::value(&c.intra)->default_value(c.intra),
      "the all-reduce's transport inside a node: auto (nccl on GPUs where every rank has a GPU of its own, else mpi "
      "with a warning; mpi on the CPU) | mpi (host memory; on a GPU staged through pinned buffers) | nccl (NCCL on "
      "GPU memory; with --allreduce flat one NCCL all-reduce over the whole job)")(
      "inter", po::value(&c.inter)->default_value(c.inter),
      "the hierarchical all-reduce's transport across nodes: mpi (each rank's 1/L share; from GPU memory staged "
      "through pinned host memory, or handed to a CUDA-aware MPI) | nccl (NCCL among the ranks of equal local rank; "
      "needs --intra nccl) | auto (with --allreduce auto and NCCL: the start-up calibration times both and takes the "
      "faster per bucket size)")(
      "cuda-aware-mpi", po::value(&c.cuda_aware_mpi)->default_value(c.cuda_aware_mpi),
      "auto | on | off: hand GPU pointers to MPI across nodes (--intra nccl --inter mpi) instead of staging them "
      "through host memory; auto where the MPI says it is CUDA-aware (MPIX_Query_cuda_support), on refuses an MPI "
      "that is not")("bucket-mb", po::value(&c.bucket_mb)->default_value(c.bucket_mb, shortest(c.bucket_mb)),
                     "gradient bucket size in MiB; each bucket is all-reduced as soon as backward completes it")(
      "no-overlap", po::bool_switch(), "all-reduce every bucket after backward instead of during it")(
      "preflight", po::bool_switch(&c.preflight),
      "before training, time ~2 s of all-reduce at the model's gradient size and report busbw")(
      "min-busbw", po::value(&c.min_busbw)->default_value(c.min_busbw, shortest(c.min_busbw)),
      "abort when the pre-flight busbw (GB/s) is below this (implies --preflight; 0 = no check)");
  po::options_description mlperf("MLPerf log (mllog.txt in --output-dir; docs/mllog.md)", kHelpWidth);
  mlperf.add_options()("submission-org", po::value(&c.submission_org),
                       "submission_org (default: the Slurm cluster's name, else the host's)")(
      "submission-platform", po::value(&c.submission_platform),
      "submission_platform (default: <nodes>x<Slurm partition or host>)")(
      "submission-division", po::value(&c.submission_division),
      "closed | open (default: closed for resnet50, open for resnet20)")(
      "submission-status", po::value(&c.submission_status)->default_value(c.submission_status),
      "onprem | cloud | preview | research");
  po::options_description all("scaletrain train", kHelpWidth);
  all.add(general).add(schedule).add(data).add(progress).add(communication).add(mlperf);
  return all;
}

Json config_json(const train::TrainConfig& c, const std::string& config_file) {
  Json j = Json::object();
  j.set("config_file", config_file.empty() ? Json() : Json(config_file));
  j.set("model", c.model);
  j.set("data", c.data_dir);
  j.set("output_dir", c.output_dir);
  j.set("init_from", c.init_from.empty() ? Json() : Json(c.init_from));
  j.set("seed", static_cast<int64_t>(c.seed));
  j.set("threads", c.threads);
  j.set("device", c.device);
  j.set("tf32", c.tf32);
  j.set("epochs", c.epochs);
  j.set("max_steps", c.max_steps);
  j.set("batch_size", c.batch_size);
  j.set("batch_tokens", c.batch_tokens);
  j.set("beam_size", c.beam_size);
  j.set("length_penalty", c.length_penalty);
  j.set("accumulate_steps", c.accumulate_steps);
  j.set("base_lr", c.base_lr);
  j.set("lr_schedule", c.lr_schedule);
  j.set("lr_poly_power", c.lr_poly_power);
  j.set("lr_step_epochs", Json::array_of(c.lr_step_epochs));
  j.set("lr_step_every", c.lr_step_every);
  j.set("lr_step_gamma", c.lr_step_gamma);
  j.set("warmup_epochs", c.warmup_epochs);
  j.set("warmup_steps", c.warmup_steps);
  j.set("end_lr", c.end_lr);
  j.set("momentum", c.momentum);
  j.set("weight_decay", c.weight_decay);
  j.set("nesterov", c.nesterov);
  j.set("label_smoothing", c.label_smoothing);
  j.set("aux_loss_weight", c.aux_loss_weight);
  j.set("optimizer", c.optimizer);
  j.set("lars_trust_coefficient", c.lars_trust_coefficient);
  j.set("lars_epsilon", c.lars_epsilon);
  j.set("adam_beta1", c.adam_beta1);
  j.set("adam_beta2", c.adam_beta2);
  j.set("adam_epsilon", c.adam_epsilon);
  j.set("shuffle", c.shuffle);
  j.set("augment", c.augment);
  j.set("crop_padding", c.crop_padding);
  j.set("preprocess", c.preprocess);
  j.set("prefetch", c.data_prefetch);
  j.set("input_copy", c.input_copy);
  j.set("io", c.io);
  j.set("shuffle_mode", c.shuffle_mode);
  j.set("shuffle_buffer", c.shuffle_buffer);
  j.set("pad_last", c.pad_last);
  j.set("data_threads", c.data_threads);
  j.set("stage_to", c.stage_to.empty() ? Json() : Json(c.stage_to));
  j.set("image_size", Json::array_of(train::input_image_size(c)));
  j.set("skip_bad_samples", c.skip_bad_samples);
  j.set("verify_data", c.verify_data);
  j.set("require_checksums", c.require_checksums);
  j.set("eval_every", c.eval_every);
  j.set("target_accuracy", c.target_accuracy);
  j.set("log_every", c.log_every);
  j.set("trace", c.trace);
  j.set("op_times", c.op_times);
  j.set("checkpoint_every", c.checkpoint_every);
  j.set("checkpoint_every_steps", c.checkpoint_every_steps);
  j.set("checkpoint_every_minutes", c.checkpoint_every_minutes);
  j.set("keep_checkpoints", c.keep_checkpoints);
  j.set("resume", c.resume);
  j.set("overwrite", c.overwrite);
  j.set("stall_warn_s", c.stall_warn_s);
  j.set("stall_abort_s", c.stall_abort_s);
  j.set("ranks_per_node", c.ranks_per_node > 0 ? Json(c.ranks_per_node) : Json());
  j.set("allreduce", c.allreduce);
  j.set("grad_compression", train::resolved_grad_compression(c));
  j.set("intra", c.intra);
  j.set("inter", c.inter);
  j.set("cuda_aware_mpi", c.cuda_aware_mpi);
  j.set("precision", c.precision);
  j.set("fuse", c.fuse);
  j.set("conv_algo", c.conv_algo);
  j.set("conv_nondeterministic", c.conv_nondeterministic);
  j.set("loss_scale", train::resolved_loss_scale(c));
  j.set("bucket_mb", c.bucket_mb);
  j.set("overlap", c.overlap);
  j.set("preflight", c.preflight || c.min_busbw > 0);
  j.set("min_busbw", c.min_busbw);
  j.set("submission_org", c.submission_org.empty() ? Json() : Json(c.submission_org));
  j.set("submission_platform", c.submission_platform.empty() ? Json() : Json(c.submission_platform));
  j.set("submission_division", c.submission_division);
  j.set("submission_status", c.submission_status);
  return j;
}

}  // namespace

namespace {

// The model's own defaults (models/registry.hpp) for the options that neither the command line nor
// the config file set: they replace the command's defaults in vm, before notify writes the config.
void apply_model_defaults(const po::options_description& desc, po::variables_map& vm) {
  const std::string model = vm["model"].as<std::string>();
  for (const models::ModelEntry& entry : models::model_registry()) {
    if (entry.name != model) continue;
    for (const auto& [option, value] : entry.defaults) {
      ST_CHECK(desc.find_nothrow(option, false) != nullptr,
               "internal: model " << model << " has a default for an unknown option --" << option);
      if (vm.count(option) && !vm[option].defaulted()) continue;
      vm.erase(option);
      const std::vector<std::string> args = {"--" + option + "=" + value};
      po::store(po::command_line_parser(args).options(desc).run(), vm);
    }
  }
}

}  // namespace

bool parse_train_command(int argc, char** argv, train::TrainConfig& c, std::string& config_file) {
  po::options_description desc = train_options(c, config_file);
  po::variables_map vm;
  if (!parse("train", argc, argv, desc, vm)) return false;
  ConfigLines lines;
  if (vm.count("config")) {
    config_file = vm["config"].as<std::string>();
    if (!fs::is_regular_file(config_file)) throw UsageError("--config " + config_file + ": no such file");
    lines = ConfigLines(config_file);
    lines.given_on_command_line(command_line_options(argc, argv));
    try {
      po::store(po::parse_config_file<char>(config_file.c_str(), desc), vm);
    } catch (const po::error_with_option_name& e) {
      std::string name = e.get_option_name();
      name.erase(0, name.find_first_not_of('-'));
      const int line = lines.line_of(name);
      throw UsageError("--config " + config_file + (line > 0 ? " line " + std::to_string(line) : "") + ": " + e.what());
    } catch (const po::error& e) {
      throw UsageError("--config " + config_file + ": " + e.what());
    }
  }
  apply_model_defaults(desc, vm);
  check_option_ranges(vm, option_ranges(), lines);
  notify("train", vm);
  c.shuffle = !vm["no-shuffle"].as<bool>();
  c.augment = !vm["no-augment"].as<bool>();
  c.overlap = !vm["no-overlap"].as<bool>();
  if (vm.count("ranks-per-node")) c.ranks_per_node = vm["ranks-per-node"].as<int>();  // range-checked above
  try {
    if (vm.count("stage-to") && c.stage_to.empty()) throw UsageError("--stage-to needs a directory");
    c.stage_to = expand_env("stage-to", c.stage_to);
    std::tie(c.image_height, c.image_width) = image_size_option(vm);
    if (vm.count("lr-step-epochs"))
      c.lr_step_epochs = parse_epoch_list("lr-step-epochs", vm["lr-step-epochs"].as<std::string>());
    if (c.submission_division.empty()) c.submission_division = c.model == "resnet50" ? "closed" : "open";
    train::check_model_name(c.model);
    if (models::model_entry(c.model).task == models::kTaskTranslation) {
      if (!vm["batch-size"].defaulted())
        throw UsageError("--batch-size counts samples; --model " + c.model +
                         " batches sentence pairs by tokens: use --batch-tokens");
      c.batch_size = c.batch_tokens;
    }
    train::check_train_config(c);
  } catch (const UsageError& e) {
    throw UsageError(e.what() + lines.where_mentioned(e.what()));
  }
  return true;
}

train::TrainConfig train_defaults(const std::string& model) {
  train::TrainConfig c;
  std::string config_file;
  po::options_description desc = train_options(c, config_file);
  po::variables_map vm;
  const std::vector<std::string> args = {"--model=" + model};
  po::store(po::command_line_parser(args).options(desc).run(), vm);
  apply_model_defaults(desc, vm);
  notify("train", vm);
  return c;
}

namespace {

int cmd_train(int argc, char** argv) {
  train::TrainConfig c;
  std::string config_file;
  if (!parse_train_command(argc, argv, c, config_file)) return 0;

  const comm::Communicator comm = comm::Communicator::world();
  const train::TrainResult result = train::run_training(comm, c, config_json(c, config_file));
  return result.end == train::RunEnd::signal ? train::kExitCheckpointed : 0;
}

// ---------------------------------------------------------------------------------------------
// eval

// --device for eval and predict: the collective choice, its start-up lines, and the Context on it.
// `needs`: the ops the command runs (its model's evaluation forward and its own), which --device
// asks of the GPU's kernels.
std::unique_ptr<Context> open_context(const comm::Communicator& comm, const std::string& device,
                                      const std::string& command, const std::string& model, const ops::OpNames& needs,
                                      int threads, Precision precision = Precision::fp32) {
  const train::DeviceRequest request = train::parse_device_request(device);
  const std::string missing = request == train::DeviceRequest::cpu
                                  ? ""
                                  : train::kernels_missing(Device::cuda, {{"--model " + model, needs}}, precision);
  const train::DeviceChoice choice = train::choose_device(comm, request, command, missing);
  train::check_gpu_precision(comm, choice, precision, command);
  for (const std::string& line : choice.log_lines) ST_LOG(line);
  auto ctx = std::make_unique<Context>(choice.device, threads, choice.gpu_index);
  ctx->set_precision(precision);
  return ctx;
}

// A text output's directory must exist before the work starts, so that a typo fails at once.
void check_output_directory(const std::string& option, const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw UsageError(option + " " + path + ": the directory " + parent.string() + " does not exist");
}

// Lines to `output`, each ended by "\n", written whole under a temporary name and then renamed.
void write_lines(const std::string& output, const std::vector<std::string>& lines) {
  const std::string tmp = output + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    for (const std::string& line : lines) out << line << '\n';
    out.flush();
    ST_CHECK(out, "cannot write " << tmp);
  }
  fs::rename(tmp, output);
}

// The task's network with the checkpoint's weights, on the context's device (eval, predict,
// translate).
std::unique_ptr<models::Network> restored_network(const train::Task& task, const checkpoint::CheckpointData& weights,
                                                  const train::TrainConfig& c, const Context& ctx) {
  std::unique_ptr<models::Network> network = task.make_network(c.seed);
  checkpoint::restore_model(weights, c.model, network->params(), nullptr);
  network->params().move_to(ctx.device());
  return network;
}

// The checkpoint's network evaluated by its task on one split of the dataset (the task's metric:
// top-1 over every image once, HR@10 and NDCG@10 over every user once), sharded over the ranks,
// every rank reading the checkpoint.
void evaluate_checkpoint(const train::TrainConfig& c, const std::string& checkpoint, const std::string& split,
                         int64_t batch_size, int threads, const std::string& device, const std::string& translations) {
  const comm::Communicator comm = comm::Communicator::world();
  const std::unique_ptr<train::Task> task = train::open_task_for_evaluation(c, split, comm);
  const Precision precision = train::parse_precision(c.precision);
  const std::unique_ptr<Context> context =
      open_context(comm, device, "eval", c.model, task->ops(/*training=*/false),
                   threads > 0 ? threads : train::default_threads(comm), precision);
  Context& ctx = *context;
  const checkpoint::CheckpointData weights = checkpoint::read_newest_checkpoint(checkpoint);
  task->check_fits(weights);
  const std::unique_ptr<models::Network> network = restored_network(*task, weights, c, ctx);
  ST_LOG("checkpoint " << weights.path << " (step " << weights.meta.step << ")");
  if (precision != Precision::fp32)
    ST_LOG("precision: " << c.precision << ": activations and weight copies (parameters of 2 or more dimensions) in "
                         << (storage_format(precision) == HalfFormat::fp16 ? "fp16" : "bf16")
                         << ", as a run trained in it evaluates (" << describe_amp_storage(ctx) << ")");
  Tensor master;  // the fp32 weights while the 16-bit copies are in place
  const train::HalfWeights half(ctx, network->params(), master);
  const train::Evaluation e = task->evaluate(comm, ctx, *network, batch_size, /*ranks_on_node=*/1);
  ST_LOG(task->describe_evaluation(e, c.data_dir + "/" + split));
  if (!translations.empty())  // the others wait for rank 0's verdict: an unwritable file stops them all
    comm::on_rank0_agreed(comm, [&] {
      write_lines(translations, e.translations);
      ST_LOG("wrote " << e.translations.size() << " translations to " << translations);
    });
}

int cmd_eval(int argc, char** argv) {
  std::string checkpoint, split = "val", device = "auto";
  int64_t batch_size = 128;
  int threads = 0;
  train::TrainConfig c;  // the task's options: the dataset and how it is read
  po::options_description desc("scaletrain eval", kHelpWidth);
  std::string translations;
  desc.add_options()("help,h", "print this help")(
      "model", po::value(&c.model)->required(),
      (image_model_names() + " (top-1) | ncf (HR@10 and NDCG@10) | " + translation_model_names() + " (BLEU)").c_str())(
      "checkpoint", po::value(&checkpoint)->required(),
      "a checkpoint file, or a run directory (train --output-dir): its newest valid checkpoint")(
      "data", po::value(&c.data_dir)->required(), "dataset directory")("split", po::value(&split)->default_value(split),
                                                                       "split to evaluate (ncf: val only)")(
      "batch-size", po::value(&batch_size)->default_value(batch_size), "samples per rank per batch")(
      "threads", po::value(&threads)->default_value(threads), "CPU threads per rank (0 = cores / ranks on the node)")(
      "device", po::value(&device)->default_value(device), kDeviceHelp)(
      "precision", po::value(&c.precision)->default_value(c.precision),
      "fp32 | amp-fp16 | amp-bf16: evaluate with activations and weight matrices in 16 bits, as a run trained with "
      "train --precision evaluates itself (docs/mixed-precision.md): activations stored in 16 bits, computed in "
      "fp32, each op's 16-bit outputs rounded once")("io", po::value(&c.io)->default_value(c.io),
                                                     "image shards: reader, posix | mmap | mpiio | mpiio-collective")(
      "data-threads", po::value(&c.data_threads)->default_value(c.data_threads),
      "image shards: decode threads per rank")("image-size", po::value<std::string>(), kImageSizeHelp)(
      "preprocess", po::value<std::string>(), kPreprocessHelp)(
      "beam-size", po::value(&c.beam_size)->default_value(c.beam_size), kBeamSizeHelp)(
      "length-penalty", po::value(&c.length_penalty)->default_value(c.length_penalty, shortest(c.length_penalty)),
      kLengthPenaltyHelp)("translations", po::value(&translations),
                          "translation models: also write the split's translations to this text file, one sentence "
                          "a line in the split's order (UTF-8, detokenized as BLEU scores them)")(
      "verify-data", po::bool_switch(&c.verify_data),
      "first compare the split's shards with its manifest.json (checksums, shared by the ranks)")(
      "require-checksums", po::bool_switch(&c.require_checksums),
      "refuse a split without manifest.json and, unless --verify-data, shards whose HDF5 metadata has no checksums "
      "or whose 'task'/'encoding' is a variable-length string (docs/reliability.md)");
  po::variables_map vm;
  if (!parse("eval", argc, argv, desc, vm)) return 0;
  notify("eval", vm);
  train::check_model_name(c.model);
  if (batch_size <= 0) throw UsageError("--batch-size must be positive");
  train::parse_device_request(device);
  train::parse_precision(c.precision);
  train::check_io_mode(c.io);
  train::check_data_threads(c.data_threads);
  std::tie(c.image_height, c.image_width) = image_size_option(vm);
  c.preprocess = vm.count("preprocess") ? vm["preprocess"].as<std::string>() : train::default_preprocess(c.model);
  train::check_preprocess(c.preprocess, c.model);
  train::check_decoding_options(c);
  if (!translations.empty()) {
    if (models::model_entry(c.model).task != models::kTaskTranslation)
      throw UsageError("--translations is for translation models (" + translation_model_names() + "), not --model " +
                       c.model);
    check_output_directory("--translations", translations);
  }
  evaluate_checkpoint(c, checkpoint, split, batch_size, threads, device, translations);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// predict

// The prediction to `output`, written whole under a temporary name and then renamed, so that a
// failed run leaves no half-written file there.
void write_prediction(const std::string& output, const train::Prediction& p, const std::string& model,
                      const std::string& checkpoint) {
  const std::string tmp = output + ".tmp";
  {
    io::H5File out(tmp, io::H5File::Mode::create_truncate);
    out.write("logits", p.logits);
    for (const auto& [name, text] : p.attributes) out.set_attribute(name, text, "logits");
    out.set_attribute("model", model);
    out.set_attribute("checkpoint", checkpoint);
  }
  fs::rename(tmp, output);
}

int cmd_predict(int argc, char** argv) {
  std::string checkpoint, input, output, device = "auto";
  int64_t batch_size = 64;
  int threads = 0;
  train::TrainConfig c;  // the model; its task reads the network's shape from the checkpoint
  po::options_description desc("scaletrain predict", kHelpWidth);
  desc.add_options()("help,h", "print this help")("model", po::value(&c.model)->required(),
                                                  (image_model_names() + " | ncf").c_str())(
      "checkpoint", po::value(&checkpoint)->required(),
      "a checkpoint file, or a run directory (train --output-dir): its newest valid checkpoint")(
      "input", po::value(&input)->required(),
      "HDF5 file: resnet50, resnet20: dataset 'inputs' float32 [N, C, H, W], normalised; ncf: datasets 'users' and "
      "'items' int32 [N], ids below the checkpoint's users and items")(
      "output", po::value(&output)->required(),
      "HDF5 file to write with dataset 'logits' float32: [N, K] for resnet50, resnet20; [N] for ncf (NeuMF's output "
      "before the sigmoid)")("batch-size", po::value(&batch_size)->default_value(batch_size),
                             "samples per forward pass")("threads", po::value(&threads)->default_value(threads),
                                                         "CPU threads (0 = all cores)")(
      "device", po::value(&device)->default_value(device), kDeviceHelp);
  po::variables_map vm;
  if (!parse("predict", argc, argv, desc, vm)) return 0;
  notify("predict", vm);
  train::check_model_name(c.model);
  if (batch_size <= 0) throw UsageError("--batch-size must be positive");

  train::parse_device_request(device);
  const comm::Communicator comm = comm::Communicator::world();
  // Every rank opens the task and takes part in the device choice, so that a refusal reaches them
  // all alike; then rank 0 does it all (a small inference job).
  ST_CHECK(fs::exists(checkpoint), "--checkpoint " << checkpoint << " does not exist");
  const checkpoint::CheckpointData weights = checkpoint::read_newest_checkpoint(checkpoint);
  const std::unique_ptr<train::Task> task = train::open_task_of_checkpoint(c, weights);
  const std::unique_ptr<Context> context =
      open_context(comm, device, "predict", c.model, task->ops(/*training=*/false), threads);
  // The others wait for rank 0's verdict: a bad --input stops them all with its message.
  comm::on_rank0_agreed(comm, [&] {
    ST_CHECK(fs::exists(input), "--input " << input << " does not exist");
    const std::unique_ptr<models::Network> network = restored_network(*task, weights, c, *context);
    const train::Prediction p = task->predict(*context, *network, input, weights.path, batch_size);
    write_prediction(output, p, c.model, checkpoint);
    ST_LOG("wrote logits " << shape_string(p.logits.shape()) << " to " << output);
  });
  return 0;
}

// ---------------------------------------------------------------------------------------------
// translate

// A text file's lines ("\n" or "\r\n" ends; a last line without one counts).
std::vector<std::string> read_lines(const std::string& option, const std::string& path) {
  ST_CHECK(fs::is_regular_file(path), option << " " << path << " does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, option << " " << path << ": cannot be read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

// The subword vocabulary to encode and decode with: --vocabulary FILE (the reference's or
// Tensor2Tensor's format, as scaletrain-data translation --vocabulary reads it), or the one that
// --data's val split holds (every split of a dataset shares it).
text::SubwordTokenizer translation_vocabulary(const std::string& data_dir, const std::string& vocabulary_file) {
  if (!vocabulary_file.empty()) {
    ST_CHECK(fs::is_regular_file(vocabulary_file), "--vocabulary " << vocabulary_file << " does not exist");
    return text::SubwordTokenizer::from_file(vocabulary_file);
  }
  const data::TranslationSplit val = data::open_translation_split(data_dir, "val");
  return text::SubwordTokenizer::from_text(val.vocabulary.text, val.dir);
}

int cmd_translate(int argc, char** argv) {
  std::string checkpoint, input, output, vocabulary, device = "auto";
  int threads = 0;
  train::TrainConfig c;  // the model and the decoding options
  po::options_description desc("scaletrain translate", kHelpWidth);
  desc.add_options()("help,h", "print this help")("model", po::value(&c.model)->required(),
                                                  translation_model_names().c_str())(
      "checkpoint", po::value(&checkpoint)->required(),
      "a checkpoint file, or a run directory (train --output-dir): its newest valid checkpoint")(
      "input", po::value(&input)->required(),
      "text file to translate, UTF-8, one sentence a line (the source language of the training data)")(
      "output", po::value(&output)->required(),
      "text file to write: the translations, one a line in the input's order (an empty line stays empty)")(
      "data", po::value(&c.data_dir),
      "the dataset the model was trained on: its vocabulary (give --data or --vocabulary)")(
      "vocabulary", po::value(&vocabulary),
      "a subword vocabulary file instead of --data: the reference's format ('<pad>', '<EOS>' first) or "
      "Tensor2Tensor's, as scaletrain-data translation --vocabulary takes it")(
      "beam-size", po::value(&c.beam_size)->default_value(c.beam_size), kBeamSizeHelp)(
      "length-penalty", po::value(&c.length_penalty)->default_value(c.length_penalty, shortest(c.length_penalty)),
      kLengthPenaltyHelp)("threads", po::value(&threads)->default_value(threads),
                          "CPU threads per rank (0 = cores / ranks on the node)")(
      "device", po::value(&device)->default_value(device), kDeviceHelp);
  po::variables_map vm;
  if (!parse("translate", argc, argv, desc, vm)) return 0;
  notify("translate", vm);
  train::check_model_name(c.model);
  if (models::model_entry(c.model).task != models::kTaskTranslation)
    throw UsageError("--model " + c.model + " does not translate: scaletrain translate takes " +
                     translation_model_names());
  if (c.data_dir.empty() == vocabulary.empty())
    throw UsageError("give the vocabulary as --data DATASET (the training data's) or --vocabulary FILE, one of them");
  train::parse_device_request(device);
  train::check_decoding_options(c);
  check_output_directory("--output", output);

  const comm::Communicator comm = comm::Communicator::world();
  const std::vector<std::string> lines = read_lines("--input", input);  // before a checkpoint of GBs
  ST_CHECK(fs::exists(checkpoint), "--checkpoint " << checkpoint << " does not exist");
  const checkpoint::CheckpointData weights = checkpoint::read_newest_checkpoint(checkpoint);
  const std::unique_ptr<train::Task> task = train::open_task_of_checkpoint(c, weights);
  const text::SubwordTokenizer tokenizer = translation_vocabulary(c.data_dir, vocabulary);
  const int64_t rows = weights.tensors.at("model/embedding.weight").dim(0);
  ST_CHECK(tokenizer.size() == rows,
           "the vocabulary of " << (vocabulary.empty() ? "--data " + c.data_dir : "--vocabulary " + vocabulary)
                                << " has " << tokenizer.size() << " subtokens, the embedding of " << weights.path << " "
                                << rows << " rows: not the vocabulary the model was trained with");
  const std::unique_ptr<Context> context =
      open_context(comm, device, "translate", c.model, task->ops(/*training=*/false),
                   threads > 0 ? threads : train::default_threads(comm));
  const std::unique_ptr<models::Network> network = restored_network(*task, weights, c, *context);
  ST_LOG("checkpoint " << weights.path << " (step " << weights.meta.step << "), " << lines.size() << " lines of "
                       << input << " over " << comm.size() << " rank(s)");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> translations =
      train::translate_lines(c, comm, *context, *network, tokenizer, lines, input);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  comm::on_rank0_agreed(comm, [&] { write_lines(output, translations); });
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f s, %.2f sentences/s", seconds, lines.size() / std::max(seconds, 1e-9));
  ST_LOG("wrote " << translations.size() << " translations to " << output << " (" << rate << ", "
                  << (c.beam_size == 1 ? std::string("greedy decoding") : "beam search " + std::to_string(c.beam_size))
                  << ")");
  return 0;
}

// ---------------------------------------------------------------------------------------------
// info

// The devices whose kernels cover every op of `names`: in the source (`built` false) or in this
// binary (`built` true; a build without CUDA has no CUDA kernel).
Json devices_with_all(const ops::OpNames& names, bool built) {
  Json devices = Json::array();
  for (Device d : {Device::cpu, Device::cuda}) {
    bool all = true;
    for (const std::string& op : names) {
      const ops::OpInfo info = ops::op_info(op);
      all = all && (built ? info.kernel[ops::device_index(d)] : info.declared[ops::device_index(d)]);
    }
    if (all) devices.push_back(device_name(d));
  }
  return devices;
}

// Without --model: every model of the registry with its task, the defaults it brings, the ops a
// training run of it dispatches (the model's; its task adds input, loss and evaluation ops, the
// optimizer its update) and the devices that have kernels for them all.
// An image classifier's sizes at its input size, 3 channels and 1,000 classes (ImageNet's):
// parameters (and without the auxiliary heads), forward multiply-adds per image and the bytes an
// fp32 gradient all-reduce moves per step (every parameter, a frozen head's too).
Json image_classifier_sizes(const models::ModelEntry& e) {
  const std::unique_ptr<models::Model> model = models::make_model(e.name, 1000, 3);
  const int64_t params = model->params().parameter_count();
  Json j = Json::object();
  j.set("input_shape", Json::array_of(std::vector<int64_t>{3, e.image_size, e.image_size}));
  j.set("parameters", params);
  j.set("parameters_without_aux_heads", params - models::aux_head_parameters(*model));
  j.set("forward_macs_per_sample", models::forward_macs_per_sample(*model, {3, e.image_size, e.image_size}));
  j.set("allreduce_mb_per_step", 4.0 * static_cast<double>(params) / 1e6);
  return j;
}

void print_sizes(const Json& s) {
  char line[256];
  const double params = s.at("parameters").as_double(), without = s.at("parameters_without_aux_heads").as_double();
  std::snprintf(line, sizeof line, "            %.2f M parameters", params / 1e6);
  std::cout << line;
  if (without != params) {
    std::snprintf(line, sizeof line, " (%.2f M without the auxiliary heads)", without / 1e6);
    std::cout << line;
  }
  const Json& shape = s.at("input_shape");
  std::snprintf(line, sizeof line,
                ", %.3f G multiply-adds per %lldx%lld image (forward), %.1f MB all-reduced per step\n",
                s.at("forward_macs_per_sample").as_double() / 1e9, static_cast<long long>(shape.at(1).as_int()),
                static_cast<long long>(shape.at(2).as_int()), s.at("allreduce_mb_per_step").as_double());
  std::cout << line;
}

void print_model_list(bool json) {
  Json list = Json::array();
  std::vector<Json> sizes;
  for (const models::ModelEntry& e : models::model_registry()) {
    sizes.push_back(e.task == models::kTaskImageClassification ? image_classifier_sizes(e) : Json());
    Json defaults = Json::object();
    for (const auto& [option, value] : e.defaults) defaults.set("--" + option, value);
    const ops::OpNames model_ops = models::model_ops(e.name, /*training=*/true);
    Json m = Json::object();
    m.set("model", e.name);
    m.set("task", e.task);
    m.set("description", e.description);
    m.set("defaults", defaults);
    m.set("ops", Json::array_of(std::vector<std::string>(model_ops.begin(), model_ops.end())));
    m.set("devices", devices_with_all(model_ops, /*built=*/false));
    m.set("devices_in_this_build", devices_with_all(model_ops, /*built=*/true));
    if (!sizes.back().is_null())
      for (const auto& [key, value] : sizes.back().items()) m.set(key, value);
    list.push_back(m);
  }
  if (json) {
    std::cout << list.dump(2) << "\n";
    return;
  }
  std::cout << "models (--model), each with its task; 'scaletrain info --model NAME' lists its tensors; sizes for "
               "3-channel images and 1000 classes\n";
  std::size_t index = 0;
  for (const models::ModelEntry& e : models::model_registry()) {
    std::cout << "  " << e.name << std::string(e.name.size() < 10 ? 10 - e.name.size() : 1, ' ') << e.task << ": "
              << e.description << "\n";
    if (!sizes[index].is_null()) print_sizes(sizes[index]);
    ++index;
    const Json devices = devices_with_all(models::model_ops(e.name, /*training=*/true), /*built=*/false);
    std::cout << "            ops on:";
    for (std::size_t i = 0; i < devices.size(); ++i) std::cout << " " << devices.at(i).as_string();
    std::cout << " ('scaletrain info --ops' lists every op's devices)\n";
    if (e.defaults.empty()) continue;
    std::cout << "            defaults:";
    for (const auto& [option, value] : e.defaults) std::cout << " --" << option << " " << value;
    std::cout << "\n";
  }
}

// The network of --model as its task builds it for a dataset of `shape`: its JSON, or a header
// and one line per state_dict tensor.
void describe_network(const std::string& model, const train::DataShape& shape, bool json) {
  train::TrainConfig c;
  c.model = model;
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(c, shape);
  const std::unique_ptr<models::Network> network = task->make_network(c.seed);
  const Json d = task->describe_network(*network);
  if (json) {
    std::cout << d.dump(2) << "\n";
    return;
  }
  std::cout << model << ": " << d.at("parameters").as_int() << " parameters, " << task->describe_shape() << "\n";
  const Json& tensors = d.at("tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::vector<int64_t> dims;
    for (std::size_t k = 0; k < tensors.at(i).at("shape").size(); ++k)
      dims.push_back(tensors.at(i).at("shape").at(k).as_int());
    std::cout << "  " << tensors.at(i).at("name").as_string() << " " << shape_string(dims) << "\n";
  }
}

int cmd_info(int argc, char** argv) {
  std::string model, input_shape;
  int num_classes = 1000;
  int64_t num_users = 138493, num_items = 26744;  // MovieLens-20M
  int64_t vocab_size = 33708;                     // the MLPerf Transformer reference's vocabulary
  bool json = false, list_ops = false, names = false;
  po::options_description desc("scaletrain info", kHelpWidth);
  desc.add_options()("help,h", "print this help")(
      "model", po::value(&model),
      (image_model_names() + " | ncf | transformer, transformer-base, transformer-tiny; without it, the list of "
                             "models, their tasks and sizes")
          .c_str())("num-classes", po::value(&num_classes)->default_value(num_classes), "classes (outputs of fc)")(
      "input-shape", po::value(&input_shape),
      "C,H,W (default 3 channels at the model's input size: 3,224,224 for "
      "resnet50, 3,299,299 for inception_v3, 3,227,227 for alexnet-caffe, 3,32,32 for resnet20)")(
      "num-users", po::value(&num_users)->default_value(num_users), "ncf: users (embedding rows; ml-20m's)")(
      "num-items", po::value(&num_items)->default_value(num_items), "ncf: items (embedding rows; ml-20m's)")(
      "vocab-size", po::value(&vocab_size)->default_value(vocab_size),
      "transformer models: subtokens of the shared embedding (the MLPerf reference's vocabulary: 33708)")(
      "json", po::bool_switch(&json), "print a JSON object instead of a table")(
      "names", po::bool_switch(&names),
      "only the models' names, one per line (at once: the list builds every model to measure it)")(
      "ops", po::bool_switch(&list_ops),
      "the op registry: every op, its dtypes and the devices with a kernel for it, and whether that kernel is "
      "deterministic (docs/ops.md is this table)");
  po::variables_map vm;
  if (!parse("info", argc, argv, desc, vm)) return 0;
  notify("info", vm);
  if (list_ops) {
    if (log_rank() == 0) std::cout << (json ? ops::registry_json().dump(2) + "\n" : ops::registry_markdown());
    return 0;
  }
  if (names) {
    if (log_rank() == 0)
      for (const std::string& name : models::model_names()) std::cout << name << "\n";
    return 0;
  }
  if (model.empty()) {
    if (log_rank() == 0) print_model_list(json);
    return 0;
  }
  train::check_model_name(model);
  if (num_classes <= 0) throw UsageError("--num-classes must be positive");
  if (num_users <= 0 || num_items <= 0) throw UsageError("--num-users and --num-items must be positive");
  // The dataset shape the model is built for; each task reads its own part.
  const int size = train::default_image_size(model);
  const Shape chw = input_shape.empty() ? Shape{3, size, size} : parse_shape("input-shape", input_shape, 3);
  if (chw[0] > 4096 || chw[1] > 8192 || chw[2] > 8192)
    throw UsageError("--input-shape '" + input_shape + "' is too large (at most 4096,8192,8192)");
  train::DataShape shape;
  shape.num_classes = num_classes;
  shape.channels = static_cast<int>(chw[0]);
  shape.height = static_cast<int>(chw[1]);
  shape.width = static_cast<int>(chw[2]);
  shape.num_users = num_users;
  shape.num_items = num_items;
  // A translation dataset's one number is its vocabulary (train::DataShape).
  if (models::model_entry(model).task == models::kTaskTranslation) shape.num_items = vocab_size;
  if (log_rank() == 0) describe_network(model, shape, json);
  return 0;
}

int dispatch(int argc, char** argv) {
  if (argc < 2) throw UsageError(std::string("no command given\n") + kUsage);
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    if (log_rank() == 0) std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    if (log_rank() == 0) std::cout << "scaletrain " << SCALETRAIN_VERSION << "\n";
    return 0;
  }
  // Sub-command parsers see argv from the command word on (argv[0] is skipped by the parser).
  if (command == "train") return cmd_train(argc - 1, argv + 1);
  if (command == "eval") return cmd_eval(argc - 1, argv + 1);
  if (command == "predict") return cmd_predict(argc - 1, argv + 1);
  if (command == "translate") return cmd_translate(argc - 1, argv + 1);
  if (command == "info") return cmd_info(argc - 1, argv + 1);
  throw UsageError("unknown command '" + command + "' (commands: train, eval, predict, translate, info)");
}

}  // namespace

int scaletrain_main(int argc, char** argv) {
  keep_freed_host_memory();  // before the first tensor: the training step's blocks stay in the heap
  return run_guarded("scaletrain", argc, argv, dispatch);
}

}  // namespace scaletrain::cli
