// TrainConfig: everything `scaletrain train` is told, after the config file and the command
// line are merged. Defaults follow the MLPerf ResNet-50 reference where one exists. config.cpp
// checks it (one place for every option's rule) and turns it into the options of the pieces the
// trainer builds: loader, learning-rate schedule, optimizer, gradient reducer, watchdog.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/ops/registry.hpp"

namespace scaletrain {
class Context;
}
namespace scaletrain::comm {
class Communicator;
}
namespace scaletrain::models {
class Model;
}
namespace scaletrain::data {
struct SplitInfo;
struct LoaderOptions;
}  // namespace scaletrain::data
namespace scaletrain::nn {
class ParameterSet;
}
namespace scaletrain::optim {
struct LrScheduleOptions;
struct SgdOptions;
struct LarsOptions;
struct AdamOptions;
class Optimizer;
}  // namespace scaletrain::optim
namespace scaletrain::comm {
struct AllReduceOptions;
struct BucketOptions;
struct StallOptions;
struct TransportRequest;
}  // namespace scaletrain::comm

namespace scaletrain::train {
class Task;
}  // namespace scaletrain::train
namespace scaletrain::train {

struct TrainConfig {
  std::string model = "resnet50";
  std::string data_dir;
  std::string output_dir = "runs/latest";
  std::string init_from;  // checkpoint whose weights start the run (empty: torchvision init)

  int epochs = 1;
  int64_t max_steps = 0;    // 0: no limit; otherwise stop after this many optimizer steps
  int64_t batch_size = 32;  // per rank and micro-batch; global batch = world size x batch_size x accumulate_steps
  // Micro-batches of batch_size per optimizer step, their gradients summed locally and all-reduced
  // once (gradient_accumulation.hpp): large global batches on few ranks.
  int accumulate_steps = 1;
  // Translation: tokens per rank per step (the reference's batch_size: whole sentence pairs up to
  // this many tokens a side, data/translation_batches.hpp). The trainer's per-rank batch is then
  // this, in tokens (batch_size is set to it).
  int64_t batch_tokens = 4096;

  // SGD with momentum (PyTorch's rule); MLPerf ResNet-50 reference: momentum 0.9.
  double base_lr = 0.1;  // LR for the run's global batch, no implicit scaling
  double momentum = 0.9;
  double weight_decay = 5e-5;  // MLPerf ResNet-50 reference value
  bool nesterov = false;
  std::string lr_schedule = "cosine";  // cosine | poly | step
  double warmup_epochs = 0.0;
  int64_t warmup_steps = 0;    // > 0: the warmup in optimizer steps instead (the Transformer's 16000)
  double end_lr = 1e-4;        // poly decay target (MLPerf ResNet-50: 1e-4)
  double lr_poly_power = 2.0;  // poly: the exponent (MLPerf ResNet-50: 2; bvlc_googlenet's solver: 0.5)
  // step: the epochs where the learning rate drops (empty: 30%, 60%, 80% of the epochs), or a drop
  // every lr_step_every epochs (> 0; Inception-v3's 0.94 every 2 epochs), by lr_step_gamma.
  std::vector<double> lr_step_epochs;
  double lr_step_every = 0.0;
  double lr_step_gamma = 0.1;
  double label_smoothing = 0.0;
  // The weight of the auxiliary heads' losses (GoogLeNet, Inception-v3; the model's default, 0
  // switches the heads off and freezes them); 0 for models without auxiliary heads.
  double aux_loss_weight = 0.0;
  // sgd (PyTorch's momentum SGD) | lars (layer-wise trust ratios, MLPerf's choice for global
  // batches above 8k: optim/lars.hpp) | adam (torch.optim.Adam, for NCF: optim/adam.hpp; it uses
  // neither momentum nor weight decay)
  std::string optimizer = "sgd";
  double lars_trust_coefficient = 0.001;
  double lars_epsilon = 0.0;
  // MLPerf NCF reference (retired_benchmarks/ncf/ncf.py defaults, = optim::AdamOptions{}).
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;

  int eval_every = 1;  // epochs between evaluations (MLPerf ResNet-50: 4)
  // Translation models' evaluation: beam search (models/beam_search.hpp) with this many beams (the
  // MLPerf reference's 4; 1: greedy decoding) and its length penalty's alpha (the reference's 0.6).
  int beam_size = 4;
  double length_penalty = 0.6;
  double target_accuracy = 0.0;  // 0: none; stop at the first evaluation reaching it
  uint64_t seed = 0;
  bool shuffle = true;
  bool augment = true;
  int crop_padding = 0;
  // --preprocess: torchvision | caffe (data/loader.hpp, is_preprocess_mode): the input's channel
  // order and normalisation, and JPEG datasets' crops. Image classification only.
  std::string preprocess = "torchvision";

  int threads = 0;              // CPU threads per rank; 0: cores on the node / ranks on the node
  std::string device = "auto";  // --device: auto | cpu | cuda (train/device_choice.hpp)
  bool tf32 = false;            // --tf32: TF32 tensor cores for fp32 on Ampere and newer GPUs
  // --conv-algo: heuristic (cuDNN's heuristics' first usable algorithm per convolution shape) |
  // search (cuDNN times them once per shape, as PyTorch's cudnn.benchmark) | graph, graph-search
  // (the same through cuDNN's graph API and its engines). heuristic until a GPU has measured
  // which pays.
  std::string conv_algo = "heuristic";
  // --conv-nondeterministic: cuDNN's backward convolutions may take a nondeterministic algorithm
  // (atomics: reruns differ in the last bits) where it ranks first, as PyTorch's default does;
  // without it they prefer a deterministic one.
  bool conv_nondeterministic = false;
  int data_prefetch = 2;
  // --input-copy (train/device_batches.hpp): how a batch reaches a GPU. auto: overlap on a GPU,
  // inline on the CPU | overlap: the next batch's copy runs on the copy stream while the current
  // step computes (two device buffers) | inline: each batch copied on the compute stream when its
  // step starts. On the CPU, overlap copies into two host buffers (it changes nothing else).
  std::string input_copy = "auto";
  // --fuse: auto | none | a comma list of bn-add-relu (each residual block's last batch norm, the
  // shortcut's add and the ReLU as one op: ops::batch_norm_add_relu_forward_training; cuDNN's fused
  // kernel on a GPU in fp16) and conv-bias-relu (a convolution with bias and its ReLU as one op:
  // ops::conv2d_bias_relu_forward; cuDNN's fused epilogue on a GPU). auto: bn-add-relu in amp-fp16
  // on a GPU, where it was measured to pay (ResNet-50's images/s 1.16x at batch 256, 1.02x at 64 on
  // an H200, docs/performance.md), none elsewhere; conv-bias-relu is not measured yet, so only
  // asked (Training::fuse_used).
  std::string fuse = "auto";
  // Input pipeline (issue 4).
  std::string io = "posix";             // posix | mmap | mpiio | mpiio-collective
  std::string shuffle_mode = "global";  // global | shard
  int64_t shuffle_buffer = 10000;       // samples, for --shuffle shard
  bool pad_last = false;                // repeat samples to fill the last batch instead of dropping them
  // Decode/augment workers per rank. 1 by default: CPU ranks share their cores with compute, and
  // one worker keeps ahead of a CPU ResNet step (docs/performance.md); raise it for JPEG.
  int data_threads = 1;
  std::string stage_to;                   // copy the shards to this node-local directory first (empty: read in place)
  int image_height = 0, image_width = 0;  // JPEG input size; 0: the model's default (224 or 32)
  bool skip_bad_samples = false;
  bool verify_data = false;  // compare every shard's checksum with the manifest before the first step
  // Refuse what cannot be checked before libhdf5 parses it: a split without a manifest, and shards
  // with unchecksummed HDF5 metadata unless verify_data (data/manifest.hpp, require_checksums).
  bool require_checksums = false;
  int log_every = 50;
  bool trace = false;  // write each rank's timeline to <output-dir>/trace/rank-NNNNN.json
  // --op-times: time every op of the training steps (CUDA events on a GPU, the host clock on the
  // CPU; ops/op_profiler.hpp) for report.json's op_times and a table at the run's end.
  bool op_times = false;

  // Checkpoints and restarts (docs/checkpoint-format.md). A checkpoint is always written at the
  // end of the run and on SIGUSR1/SIGTERM; these add periodic ones (0: off).
  int checkpoint_every = 0;               // epochs
  int64_t checkpoint_every_steps = 0;     // optimizer steps
  double checkpoint_every_minutes = 0.0;  // wall-clock minutes of training (rank 0's clock)
  int keep_checkpoints = 2;               // the newest K stay in <output-dir>/checkpoints
  std::string resume = "never";           // auto | never | a checkpoint file or run directory
  bool overwrite = false;                 // start a new run in an output directory with checkpoints
  // The stall watchdog (comm/stall_watchdog.hpp).
  double stall_warn_s = 60.0;
  double stall_abort_s = 600.0;  // 0: never abort

  // Gradient communication (issue 3). Default hierarchical: the algorithm built for multi-GPU
  // nodes (on one node it is a reduce-scatter + all-gather), repeatable bit for bit, and free of
  // auto's start-up calibration (seconds, and noise-driven picks on a loaded machine). Nodes with
  // unequal rank counts need --allreduce flat or auto (which falls back to flat).
  int ranks_per_node = 0;  // > 0: emulate nodes of this many ranks; 0: SCALETRAIN_RANKS_PER_NODE or shared memory
  std::string allreduce = "hierarchical";  // flat | hierarchical | auto
  std::string grad_compression = "auto";   // auto | none | fp16 | bf16 (resolved_grad_compression)
  // The transport of each level (comm/transport.hpp, train/transport_choice.hpp): --intra auto
  // is nccl on GPUs where no two ranks of a communicator share a GPU, else mpi (host-staged).
  std::string intra = "auto";           // auto | mpi | nccl
  std::string inter = "mpi";            // mpi | nccl | auto (--allreduce auto chooses)
  std::string cuda_aware_mpi = "auto";  // auto | on | off
  // --precision: fp32 | amp-fp16 | amp-bf16 (docs/mixed-precision.md).
  std::string precision = "fp32";
  // --loss-scale: auto | none | dynamic | a fixed positive number (train/loss_scaler.hpp); auto:
  // dynamic for amp-fp16, none otherwise (resolved_loss_scale).
  std::string loss_scale = "auto";
  double bucket_mb = 25.0;  // MiB per gradient bucket (PyTorch DDP's default)
  bool overlap = true;      // start buckets during backward
  bool preflight = false;   // measure all-reduce busbw before training
  double min_busbw = 0.0;   // GB/s; > 0 implies preflight and aborts below it

  // The MLPerf log's submission keys (mllog.txt, docs/mllog.md).
  std::string submission_org;                  // empty: the Slurm cluster's name, else the host's
  std::string submission_platform;             // empty: "<nodes>x<partition or host> (...)"
  std::string submission_division;             // closed | open; empty: closed for resnet50, open for resnet20
  std::string submission_status = "research";  // onprem | cloud | preview | research
};

// How evaluation reads its split (`scaletrain eval` options, and the training run's own).
struct EvalDataOptions {
  std::string io = "posix";
  int data_threads = 1;
  int prefetch = 2;
  int image_height = 0, image_width = 0;   // JPEG datasets: the model's input size
  std::string preprocess = "torchvision";  // --preprocess: JPEG datasets' evaluation crop
  bool skip_bad_samples = false;
  int ranks_on_node = 1;  // for the memory check of the batch buffers
};

// --precision's value; throws UsageError naming it otherwise.
Precision parse_precision(const std::string& value);
// --fuse's comma list ("bn-add-relu,conv-bias-relu" -> its two names), and whether it names one.
std::vector<std::string> fuse_list(const std::string& fuse);
bool fuses(const std::string& fuse, const std::string& fusion);
// --loss-scale with auto resolved: dynamic for amp-fp16 (its gradients underflow fp16 without),
// none for fp32 and amp-bf16 (bf16 has fp32's range); the value itself otherwise.
std::string resolved_loss_scale(const TrainConfig& c);
// --grad-compression with auto resolved: a mixed precision's gradients travel in its 16-bit
// format (amp-fp16: fp16, amp-bf16: bf16), fp32's in fp32 (none); the value itself otherwise.
std::string resolved_grad_compression(const TrainConfig& c);

// The model's default input size for JPEG datasets (--image-size): the registry's (224 for
// resnet50, 32 for resnet20; 224 for a model without one).
int default_image_size(const std::string& model);
// The input size of JPEG datasets as configured: --image-size, or the model's default.
inline std::vector<int64_t> input_image_size(const TrainConfig& c) {
  return {c.image_height > 0 ? c.image_height : default_image_size(c.model),
          c.image_width > 0 ? c.image_width : default_image_size(c.model)};
}

// The option rules `train` shares with `eval`, `predict` and `info` (UsageError naming the option).
void check_model_name(const std::string& model);
void check_io_mode(const std::string& io);
void check_data_threads(int data_threads);
// --preprocess for --model: a known mode, and torchvision (the default) for a model that takes no
// images.
void check_preprocess(const std::string& preprocess, const std::string& model);
// --beam-size and --length-penalty (train and eval): in range, and left at their defaults for a
// model that does not translate.
void check_decoding_options(const TrainConfig& config);
// The model's own default --preprocess (its registry entry's "preprocess" default; torchvision
// without one): for the commands that do not apply the registry's defaults (eval).
std::string default_preprocess(const std::string& model);

// Threads per rank when --threads is 0: the node's cores shared evenly by its ranks, and no more
// than the cores this rank may run on (allowed_cpus). Collective.
int default_threads(const comm::Communicator& comm);
// The cores this process may run on (its CPU affinity, which mpirun's binding sets).
int allowed_cpus();

// Throws UsageError naming the option for any value the run cannot use (a non-positive batch
// size, an unknown schedule, --resume with --init-from, ...). Checks nothing on disk.
void check_train_config(const TrainConfig& config);

// Why a run cannot compute on `device`, from the op registry (ops/registry.hpp): "" when every op
// it runs has a kernel there, else "no CUDA kernel for embedding_forward, ... (--model ncf,
// recommendation); lars_sums_of_squares and lars_update (--optimizer lars)": the ops without
// one, grouped by what brings them. In a mixed precision, the ops whose kernel there runs only in
// fp32 are named with it: "no CUDA kernel in amp-fp16 for conv2d_forward, ... (--model resnet20,
// ...)". For --device (device_choice.hpp).
std::string kernels_missing(Device device, const std::vector<std::pair<std::string, ops::OpNames>>& needs,
                            Precision precision = Precision::fp32);
// A training run's: its task's ops (model, input, loss, evaluation), its optimizer's, and
// accumulate_gradient with --accumulate-steps above 1.
std::string train_kernels_missing(const TrainConfig& config, const Task& task, Device device);

// The pieces' options. batch_size: per rank (a resumed run may rescale it, trainer.cpp).
// ranks_on_node: for the check that every rank's batch buffers fit in the node's memory.
data::LoaderOptions train_loader_options(const TrainConfig& config, int64_t batch_size, const comm::Communicator& comm,
                                         int ranks_on_node);
EvalDataOptions eval_data_options(const TrainConfig& config, int ranks_on_node);
optim::LrScheduleOptions schedule_options(const TrainConfig& config, int64_t steps_per_epoch);
optim::SgdOptions sgd_options(const TrainConfig& config);
optim::LarsOptions lars_options(const TrainConfig& config);
optim::AdamOptions adam_options(const TrainConfig& config);
// --optimizer adam or lazy_adam: the ones that take the --adam-* options and Adam's MLPerf keys.
inline bool uses_adam(const TrainConfig& config) {
  return config.optimizer == "adam" || config.optimizer == "lazy_adam";
}
// The optimizer --optimizer names, over params.
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, nn::ParameterSet& params);
comm::AllReduceOptions allreduce_options(const TrainConfig& config);
comm::BucketOptions bucket_options(const TrainConfig& config);
comm::TransportRequest transport_request(const TrainConfig& config);
comm::StallOptions stall_options(const TrainConfig& config);

}  // namespace scaletrain::train
