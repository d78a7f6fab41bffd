// The training loop. One step: wait for the batch, forward + loss, backward (each parameter's
// gradient is announced to the reducer as soon as it is written), wait for the averaged
// gradients, SGD step. Every rank runs the same number of steps (the loader gives equal shares),
// so every collective is entered by every rank the same number of times.
// Batch-norm running statistics are averaged over ranks before each evaluation and checkpoint,
// so that the evaluated and saved model is the same on every rank.
// Gradients go through the bucketed reducer on an AllReducer (flat / hierarchical / auto) over
// the node topology; --preflight measures the all-reduce bandwidth before the first step.
#include "scaletrain/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>
#include <thread>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/staging.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/ops/normalize.hpp"
#include "scaletrain/optim/lr_schedule.hpp"
#include "scaletrain/optim/sgd.hpp"
#include "scaletrain/report/phase_timer.hpp"
#include "scaletrain/report/summary.hpp"

namespace scaletrain::train {
namespace fs = std::filesystem;
using report::Phase;
using report::ScopedPhase;

namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// Every rank agrees on the running statistics: the mean over ranks.
void average_buffers(const comm::Communicator& comm, nn::ParameterSet& params) {
  Tensor& b = params.flat_buffers();
  if (comm.size() == 1 || b.numel() == 0) return;
  comm.allreduce_sum(b);
  const float scale = 1.0f / comm.size();
  float* p = b.data<float>();
  for (int64_t i = 0; i < b.numel(); ++i) p[i] *= scale;
}

// Rank 0 creates the output directory and proves it writable before any training starts;
// every rank learns the outcome, so a bad --output-dir fails at once on all of them.
void prepare_output_dir(const comm::Communicator& comm, const std::string& dir) {
  std::string problem;
  if (comm.rank() == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      problem = "cannot create --output-dir " + dir + ": " + ec.message();
    } else {
      const std::string probe = (fs::path(dir) / ".scaletrain-write-test").string();
      std::ofstream f(probe);
      if (!f) problem = "--output-dir " + dir + " is not writable";
      f.close();
      fs::remove(probe, ec);
    }
  }
  comm.broadcast(problem, 0);
  ST_CHECK(problem.empty(), problem);
}

void save(const comm::Communicator& comm, const std::string& path, const models::Model& model, nn::ParameterSet& params,
          optim::Sgd& sgd, int64_t epoch, int64_t step) {
  if (comm.rank() == 0) {
    checkpoint::CheckpointMeta meta;
    meta.model = model.name();
    meta.epoch = epoch;
    meta.step = step;
    checkpoint::save_checkpoint(path, meta, params, &sgd);
  }
  comm.barrier();
}

// Pre-flight: all-reduce a buffer of the model's gradient size with the training AllReducer,
// after one warm-up, in rounds of growing length until about kPreflightSeconds and at least
// kPreflightMinIters iterations have been timed, and report nccl-tests' bandwidths. A round's
// time is the maximum over ranks, so the number of rounds and the verdict come from numbers
// every rank shares: all ranks decide alike and none is left waiting.
constexpr double kPreflightSeconds = 2.0;
constexpr int64_t kPreflightMinIters = 3;

Json run_preflight(const comm::Communicator& comm, comm::AllReducer& allreducer, int64_t count, double min_busbw) {
  const int world = comm.size();
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  Tensor buffer = Tensor::zeros({count});  // zeros stay zeros: no overflow however many sums
  float* data = buffer.data<float>();
  allreducer.wait(allreducer.start(data, count));  // warm-up: first-touch, connections
  int64_t iters = 0, round = 1;
  double elapsed = 0.0;
  while (elapsed < kPreflightSeconds || iters < kPreflightMinIters) {
    comm.barrier();
    Stopwatch clock;
    for (int64_t i = 0; i < round; ++i) allreducer.wait(allreducer.start(data, count));
    elapsed += comm.allreduce_max(clock.elapsed());
    iters += round;
    // Next round: double, but no longer than what is left of the budget.
    const double per_iter = elapsed / iters;
    const double left = std::max(kPreflightSeconds - elapsed, 0.0);
    round = std::clamp<int64_t>(static_cast<int64_t>(left / std::max(per_iter, 1e-9)), 1, 2 * round);
  }
  const double time = elapsed / iters;
  const double algbw = bytes / std::max(time, 1e-12) / 1e9;
  const double busbw = algbw * 2.0 * (world - 1) / world;
  const std::string algorithm = comm::algorithm_name(allreducer.algorithm_for(bytes));

  char line[256];
  std::snprintf(line, sizeof line,
                "pre-flight: all-reduce of %.2f MB (%s) on %d ranks, %lld iterations: %.1f us, algbw %.3f GB/s, busbw "
                "%.3f GB/s",
                bytes / 1e6, algorithm.c_str(), world, static_cast<long long>(iters), time * 1e6, algbw, busbw);
  ST_LOG(line);
  Json j = Json::object();
  j.set("bytes", bytes);
  j.set("algorithm", algorithm);
  j.set("iterations", iters);
  j.set("time_us", time * 1e6);
  j.set("algbw_gbps", algbw);
  j.set("busbw_gbps", busbw);
  j.set("min_busbw_gbps", min_busbw > 0 ? Json(min_busbw) : Json());
  if (min_busbw > 0 && world == 1) {
    ST_LOG("pre-flight: --min-busbw not checked on 1 rank (no fabric to measure)");
  } else if (min_busbw > 0 && busbw < min_busbw) {
    char message[320];
    std::snprintf(message, sizeof message,
                  "pre-flight: all-reduce bus bandwidth %.3f GB/s is below --min-busbw %g GB/s (%lld bytes, %s, %d "
                  "ranks, %.1f us per all-reduce); check the fabric or lower --min-busbw",
                  busbw, min_busbw, static_cast<long long>(bytes), algorithm.c_str(), world, time * 1e6);
    ST_THROW(message);
  }
  return j;
}

// "hierarchical, 12 buckets of <= 25 MiB overlapped with backward (hierarchical x10, flat x2)"
std::string describe_buckets(const comm::AllReducer& allreducer, const std::vector<comm::GradientBucket>& buckets,
                             const comm::BucketOptions& options, comm::Compression compression) {
  std::ostringstream os;
  os << allreducer.requested();
  if (compression != comm::Compression::none) os << " (" << comm::compression_name(compression) << " on the wire)";
  os << ", " << buckets.size() << " bucket" << (buckets.size() == 1 ? "" : "s") << " of <= " << options.bucket_mb
     << " MiB " << (options.overlap ? "overlapped with backward" : "after backward (no overlap)");
  int flat = 0, hierarchical = 0;
  for (const auto& b : buckets) {
    if (allreducer.algorithm_for(b.count * static_cast<int64_t>(sizeof(float))) == comm::Algorithm::flat)
      ++flat;
    else
      ++hierarchical;
  }
  os << " (";
  if (hierarchical) os << "hierarchical x" << hierarchical << (flat ? ", " : "");
  if (flat) os << "flat x" << flat;
  os << ")";
  return os.str();
}

}  // namespace

int default_threads(const comm::Communicator& comm) {
  const auto hosts = comm.all_hosts();
  const int on_my_node = static_cast<int>(std::count(hosts.begin(), hosts.end(), comm.host()));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, on_my_node));
}

void check_checkpoint_fits(const std::string& checkpoint, int channels, int num_classes, const std::string& data_dir) {
  ST_CHECK(fs::exists(checkpoint), "checkpoint " << checkpoint << " does not exist");
  io::H5File f(checkpoint, io::H5File::Mode::read);
  if (f.has("model/conv1.weight")) {
    const Shape w = f.dataset_shape("model/conv1.weight");
    ST_CHECK(w.size() == 4 && w[1] == channels,
             "dataset " << data_dir << " has " << channels << "-channel images but the model in checkpoint "
                        << checkpoint << " takes " << (w.size() == 4 ? w[1] : -1) << " channels");
  }
  if (f.has("model/fc.weight")) {
    const Shape w = f.dataset_shape("model/fc.weight");
    ST_CHECK(w.size() == 2 && w[0] == num_classes, "dataset " << data_dir << " has " << num_classes
                                                              << " classes but the model in checkpoint " << checkpoint
                                                              << " has " << (w.size() == 2 ? w[0] : -1) << " outputs");
  }
}

namespace {
// The model's input: the loader's uint8 pixels normalised with the split's mean and std, into
// `buffer` (reallocated only when the batch shape changes).
const Tensor& model_input(Context& ctx, const Tensor& pixels, const data::SplitInfo& split, Tensor& buffer) {
  if (!buffer.defined() || buffer.shape() != pixels.shape()) buffer = Tensor::empty(pixels.shape());
  ops::normalize_images(ctx, pixels, split.mean, split.std, buffer);
  return buffer;
}
}  // namespace

EvalResult evaluate(const comm::Communicator& comm, Context& ctx, models::Model& model, const data::SplitInfo& split,
                    int64_t batch_size, const EvalDataOptions& data_options) {
  data::LoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = false;
  options.augment = false;
  options.drop_last = false;  // every sample exactly once across ranks
  options.io = data_options.io;
  options.data_threads = data_options.data_threads;
  options.prefetch = data_options.prefetch;
  options.image_height = data_options.image_height;
  options.image_width = data_options.image_width;
  options.skip_bad_samples = data_options.skip_bad_samples;
  options.comm = &comm;
  data::Loader loader(split, comm.rank(), comm.size(), options);
  loader.start_epoch(0);
  Tensor images, labels, input, no_grad;
  int64_t correct = 0, samples = 0;
  double loss_sum = 0.0;
  while (loader.next(images, labels)) {
    Tensor logits = model.forward(ctx, model_input(ctx, images, split, input), /*training=*/false);
    loss_sum += ops::softmax_cross_entropy(ctx, logits, labels, 0.0f, no_grad) * labels.numel();
    correct += ops::count_correct(logits, labels);
    samples += labels.numel();
  }
  EvalResult r;
  r.correct = comm.allreduce_sum(correct);
  r.samples = comm.allreduce_sum(samples);
  r.loss = r.samples ? comm.allreduce_sum(loss_sum) / r.samples : 0.0;
  return r;
}

Json run_training(const comm::Communicator& comm, const TrainConfig& cfg, const Json& resolved_config) {
  const double start_unix_ms = unix_time_ms();
  const int rank = comm.rank(), world = comm.size();
  prepare_output_dir(comm, cfg.output_dir);

  ST_CHECK(!cfg.data_dir.empty(), "no dataset given: pass --data DIR");
  ST_CHECK(cfg.batch_size > 0, "--batch-size must be positive, got " << cfg.batch_size);
  ST_CHECK(cfg.epochs > 0, "--epochs must be positive, got " << cfg.epochs);
  data::SplitInfo train_split = data::open_split(cfg.data_dir, "train");
  data::SplitInfo val_split = data::open_split(cfg.data_dir, "val");
  ST_CHECK(val_split.height == train_split.height && val_split.width == train_split.width &&
               val_split.channels == train_split.channels && val_split.num_classes == train_split.num_classes,
           "dataset " << cfg.data_dir << ": val images/classes (" << val_split.height << "x" << val_split.width << "x"
                      << val_split.channels << ", " << val_split.num_classes << " classes) differ from train ("
                      << train_split.height << "x" << train_split.width << "x" << train_split.channels << ", "
                      << train_split.num_classes << " classes)");

  // The node topology first: staging copies once per node, and the all-reducer uses it below.
  const comm::Topology topology = comm::Topology::build(comm, cfg.ranks_per_node);
  Json staging;  // null unless --stage-to
  if (!cfg.stage_to.empty()) {
    const data::StagingResult train_staged = data::stage_split(train_split, cfg.stage_to, topology);
    const data::StagingResult val_staged = data::stage_split(val_split, cfg.stage_to, topology);
    train_split = train_staged.split;
    val_split = val_staged.split;
    staging = Json::object();
    staging.set("dir", cfg.stage_to);
    for (const auto* r : {&train_staged, &val_staged}) {
      Json s = r->to_json();
      s.set("seconds", report::stats_over_ranks(comm, r->seconds));
      s.set("bytes", report::stats_over_ranks(comm, static_cast<double>(r->bytes)));
      s.set("per_rank_bytes", Json::array_of(comm.allgather(static_cast<double>(r->bytes))));
      staging.set(r == &train_staged ? "train" : "val", s);
    }
    staging.set("seconds", report::stats_over_ranks(comm, train_staged.seconds + val_staged.seconds));
    staging.set("bytes", report::stats_over_ranks(comm, static_cast<double>(train_staged.bytes + val_staged.bytes)));
  }

  const int threads = cfg.threads > 0 ? cfg.threads : default_threads(comm);
  Context ctx(Device::cpu, threads);

  auto model = models::make_model(cfg.model, train_split.num_classes, train_split.channels);
  nn::ParameterSet& params = model->params();
  model->initialize(cfg.seed);
  if (!cfg.init_from.empty()) {
    check_checkpoint_fits(cfg.init_from, train_split.channels, train_split.num_classes, cfg.data_dir);
    checkpoint::load_checkpoint(cfg.init_from, cfg.model, params, nullptr);
  }
  // Every rank starts from rank 0's weights and statistics.
  comm.broadcast(params.flat_values(), 0);
  if (params.flat_buffers().numel() > 0) comm.broadcast(params.flat_buffers(), 0);

  data::LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.shuffle = cfg.shuffle;
  lo.seed = cfg.seed;
  lo.augment = cfg.augment;
  lo.crop_padding = cfg.crop_padding;
  lo.drop_last = true;
  lo.pad_last = cfg.pad_last;
  lo.prefetch = cfg.data_prefetch;
  lo.shuffle_mode = cfg.shuffle_mode;
  lo.shuffle_buffer = cfg.shuffle_buffer;
  lo.data_threads = cfg.data_threads;
  lo.io = cfg.io;
  lo.image_height = cfg.image_height > 0 ? cfg.image_height : default_image_size(cfg.model);
  lo.image_width = cfg.image_width > 0 ? cfg.image_width : default_image_size(cfg.model);
  lo.skip_bad_samples = cfg.skip_bad_samples;
  lo.comm = &comm;
  data::Loader loader(train_split, rank, world, lo);
  EvalDataOptions eval_data;
  eval_data.io = cfg.io;
  eval_data.data_threads = cfg.data_threads;
  eval_data.prefetch = cfg.data_prefetch;
  eval_data.image_height = lo.image_height;
  eval_data.image_width = lo.image_width;
  eval_data.skip_bad_samples = cfg.skip_bad_samples;
  const int64_t steps_per_epoch = loader.steps_per_epoch();
  ST_CHECK(steps_per_epoch > 0, "dataset " << cfg.data_dir << "/train has " << train_split.samples
                                           << " samples: too few for " << world << " ranks x --batch-size "
                                           << cfg.batch_size);
  // --max-steps cuts the run short; the learning-rate schedule stays the one for all epochs.
  const int64_t schedule_steps = steps_per_epoch * cfg.epochs;
  const int64_t total_steps = cfg.max_steps > 0 ? std::min(schedule_steps, cfg.max_steps) : schedule_steps;
  const int64_t global_batch = cfg.batch_size * world;

  optim::LrScheduleOptions so;
  so.kind = cfg.lr_schedule;
  so.base_lr = cfg.base_lr;
  so.warmup_epochs = cfg.warmup_epochs;
  so.steps_per_epoch = steps_per_epoch;
  so.total_steps = schedule_steps;
  so.end_lr = cfg.end_lr;
  optim::LrSchedule schedule(so);
  optim::SgdOptions sgd_options;
  sgd_options.momentum = cfg.momentum;
  sgd_options.weight_decay = cfg.weight_decay;
  sgd_options.nesterov = cfg.nesterov;
  optim::Sgd sgd(params, sgd_options);
  // Gradient communication: topology -> AllReducer (its thread; auto calibrates here) -> buckets.
  comm::AllReduceOptions ao;
  ao.algorithm = cfg.allreduce;
  ao.compression = comm::parse_compression(cfg.grad_compression);
  comm::AllReducer allreducer(topology, ao);
  comm::BucketOptions bo;
  bo.bucket_mb = cfg.bucket_mb;
  bo.overlap = cfg.overlap;
  auto reducer = comm::make_bucketed_reducer(allreducer, params, bo);
  params.set_grad_ready_hook([&reducer](int i) { reducer->on_grad_ready(i); });

  const auto hosts = comm.all_hosts();
  const std::size_t distinct_hosts = std::set<std::string>(hosts.begin(), hosts.end()).size();
  ST_LOG("scaletrain " << SCALETRAIN_VERSION << ": " << cfg.model << " (" << params.parameter_count()
                       << " parameters), " << world << (world == 1 ? " rank" : " ranks") << " on " << distinct_hosts
                       << (distinct_hosts == 1 ? " host, " : " hosts, ") << threads
                       << (threads == 1 ? " thread" : " threads") << " per rank, all-reduce " << reducer->name());
  ST_LOG(
      "data " << cfg.data_dir << ": " << train_split.samples << " train / " << val_split.samples << " val samples of "
              << (train_split.encoding == "jpeg"
                      ? std::string("JPEG images")
                      : std::to_string(train_split.height) + "x" + std::to_string(train_split.width) + "x" +
                            std::to_string(train_split.channels))
              << ", " << train_split.num_classes << " classes; global batch " << global_batch << " (" << cfg.batch_size
              << " per rank), " << steps_per_epoch << " steps per epoch, " << total_steps << " steps");
  ST_LOG("topology: " << topology.describe());
  ST_LOG("input: " << train_split.encoding << " shards read with " << cfg.io << ", " << cfg.data_threads
                   << " data thread" << (cfg.data_threads == 1 ? "" : "s") << ", prefetch " << cfg.data_prefetch
                   << ", shuffle " << (cfg.shuffle ? cfg.shuffle_mode : std::string("off"))
                   << (cfg.pad_last ? ", pad last batch" : "")
                   << (cfg.stage_to.empty() ? "" : ", staged to " + cfg.stage_to));
  ST_LOG("all-reduce: " << describe_buckets(allreducer, comm::plan_buckets(params, bo.bucket_mb), bo, ao.compression)
                        << ", " << std::fixed << std::setprecision(2) << reducer->bytes_per_step() / 1e6
                        << " MB per step");
  Json preflight;  // null unless asked for
  if (cfg.preflight || cfg.min_busbw > 0)
    preflight = run_preflight(comm, allreducer, params.parameter_count(), cfg.min_busbw);

  report::PhaseTimers timers;
  Json epochs_json = Json::array();
  Json time_to_target;  // null until reached
  double last_accuracy = -1.0;
  bool stop = false;
  int64_t step = 0;
  int64_t samples_trained = 0;  // this rank
  double train_seconds = 0.0;   // excluding evaluation and checkpoints
  const std::string checkpoint_path = (fs::path(cfg.output_dir) / "checkpoint.h5").string();
  Tensor images, labels, input, dlogits;
  Stopwatch run_clock;
  int epochs_run = 0;

  for (int epoch = 0; epoch < cfg.epochs && !stop; ++epoch) {
    Stopwatch epoch_clock;
    loader.start_epoch(epoch);
    double loss_sum = 0.0;
    int64_t epoch_steps = 0;
    Stopwatch log_clock;
    int64_t log_steps = 0;
    double log_loss = 0.0;
    for (int64_t s = 0; s < steps_per_epoch && step < total_steps; ++s) {
      bool got = false;
      {
        ScopedPhase t(timers, Phase::data_wait);
        got = loader.next(images, labels);
      }
      ST_CHECK(got, "internal: the loader ran out of batches at step " << s << " of " << steps_per_epoch);
      double loss = 0.0;
      {
        ScopedPhase t(timers, Phase::forward);
        Tensor logits = model->forward(ctx, model_input(ctx, images, train_split, input), /*training=*/true);
        if (!dlogits.defined() || dlogits.shape() != logits.shape()) dlogits = Tensor::empty(logits.shape());
        loss = ops::softmax_cross_entropy(ctx, logits, labels, static_cast<float>(cfg.label_smoothing), dlogits);
      }
      {
        ScopedPhase t(timers, Phase::backward);
        reducer->begin_step();
        model->backward(ctx, dlogits);
      }
      {
        ScopedPhase t(timers, Phase::allreduce);
        reducer->finish();
      }
      const double lr = schedule.at(step);
      {
        ScopedPhase t(timers, Phase::optimizer);
        sgd.step(lr);
      }
      ST_CHECK(std::isfinite(loss), "training diverged: loss is " << loss << " at epoch " << epoch + 1 << " step "
                                                                  << s + 1 << " (try a smaller --base-lr)");
      ++step;
      ++epoch_steps;
      samples_trained += labels.numel();
      loss_sum += loss;
      log_loss += loss;
      ++log_steps;
      if (cfg.log_every > 0 && (step % cfg.log_every == 0)) {
        const double dt = log_clock.elapsed();
        const double rate = log_steps * global_batch / std::max(dt, 1e-9);
        const double eta = (total_steps - step) * dt / log_steps;
        char line[256];
        std::snprintf(line, sizeof line, "epoch %d/%d  step %lld/%lld  loss %.4f  lr %.5f  %.1f samples/s  eta %s",
                      epoch + 1, cfg.epochs, static_cast<long long>(s + 1), static_cast<long long>(steps_per_epoch),
                      log_loss / log_steps, lr, rate, format_duration(eta).c_str());
        ST_LOG(line);
        log_clock.reset();
        log_steps = 0;
        log_loss = 0.0;
      }
    }
    train_seconds += epoch_clock.elapsed();
    ++epochs_run;
    const bool last = (epoch + 1 == cfg.epochs) || step >= total_steps;

    Json e = Json::object();
    e.set("epoch", epoch + 1);
    e.set("steps", epoch_steps);
    const double train_loss = comm.allreduce_sum(loss_sum) / std::max<int64_t>(1, comm.allreduce_sum(epoch_steps));
    e.set("train_loss", train_loss);
    e.set("val_accuracy", Json());
    e.set("val_loss", Json());
    if ((cfg.eval_every > 0 && (epoch + 1) % cfg.eval_every == 0) || last) {
      ScopedPhase t(timers, Phase::evaluation);
      average_buffers(comm, params);
      const EvalResult r = evaluate(comm, ctx, *model, val_split, cfg.batch_size, eval_data);
      last_accuracy = r.accuracy();
      e.set("val_accuracy", r.accuracy());
      e.set("val_loss", r.loss);
      if (cfg.target_accuracy > 0 && r.accuracy() >= cfg.target_accuracy) {
        time_to_target = Json(run_clock.elapsed());
        stop = true;
      }
    }
    e.set("elapsed_s", run_clock.elapsed());
    e.set("timestamp_unix_ms", unix_time_ms());
    {
      char acc[32] = "-";
      if (e["val_accuracy"].type() != Json::Type::null) std::snprintf(acc, sizeof acc, "%.2f%%", 100 * last_accuracy);
      char line[256];
      std::snprintf(line, sizeof line, "epoch %d done  train loss %.4f  val top-1 %s  elapsed %s", epoch + 1,
                    train_loss, acc, format_duration(run_clock.elapsed()).c_str());
      ST_LOG(line);
    }
    epochs_json.push_back(e);
    if (stop) ST_LOG("reached target accuracy " << cfg.target_accuracy << " after " << run_clock.elapsed() << " s");
    if (cfg.checkpoint_every > 0 && (epoch + 1) % cfg.checkpoint_every == 0 && !last && !stop) {
      average_buffers(comm, params);
      save(comm, checkpoint_path, *model, params, sgd, epoch + 1, step);
    }
    if (step >= total_steps) break;
  }
  const double total_seconds = run_clock.elapsed();
  average_buffers(comm, params);
  save(comm, checkpoint_path, *model, params, sgd, epochs_run, step);

  // Report: everything a scaling study compares, gathered over ranks.
  Json report = Json::object();
  report.set("scaletrain_version", SCALETRAIN_VERSION);
  report.set("command", "train");
  report.set("model", cfg.model);
  report.set("parameters", params.parameter_count());
  report.set("world_size", world);
  report.set("hosts", Json::array_of(hosts));
  report.set("threads_per_rank", threads);
  report.set("config", resolved_config);
  Json dataset = Json::object();
  dataset.set("dir", cfg.data_dir);
  dataset.set("train_samples", train_split.samples);
  dataset.set("val_samples", val_split.samples);
  dataset.set("image_shape",
              Json::array_of(std::vector<int64_t>{train_split.height, train_split.width, train_split.channels}));
  dataset.set("num_classes", train_split.num_classes);
  report.set("dataset", dataset);
  report.set("global_batch_size", global_batch);
  report.set("steps_per_epoch", steps_per_epoch);
  report.set("steps", step);
  report.set("allreduce", allreducer.requested());
  report.set("allreduce_bytes_per_step", reducer->bytes_per_step());
  Json allreduce_options = Json::object();
  allreduce_options.set("algorithm", allreducer.requested());
  allreduce_options.set("compression", comm::compression_name(ao.compression));
  allreduce_options.set("bucket_mb", bo.bucket_mb);
  allreduce_options.set("overlap", bo.overlap);
  allreduce_options.set("calibration", allreducer.to_json());
  report.set("allreduce_options", allreduce_options);
  report.set("topology", topology.to_json());
  report.set("bucket_layout", reducer->layout());
  {
    // Total: the communication thread's busy time; exposed: the wait after backward (the
    // allreduce phase). Both per rank, over the run and per step.
    const int64_t steps_timed = std::max<int64_t>(1, timers.count(Phase::allreduce));
    const double busy = reducer->communication_seconds(), exposed = timers.total(Phase::allreduce);
    Json t = Json::object();
    t.set("steps", timers.count(Phase::allreduce));
    t.set("total_s", report::stats_over_ranks(comm, busy));
    t.set("per_step_s", report::stats_over_ranks(comm, busy / steps_timed));
    t.set("exposed_total_s", report::stats_over_ranks(comm, exposed));
    t.set("exposed_per_step_s", report::stats_over_ranks(comm, exposed / steps_timed));
    report.set("allreduce_time", t);
  }
  report.set("preflight", preflight);
  report.set("start_time_unix_ms", start_unix_ms);
  report.set("epochs", epochs_json);
  report.set("final_val_accuracy", last_accuracy >= 0 ? Json(last_accuracy) : Json());
  report.set("target_accuracy", cfg.target_accuracy > 0 ? Json(cfg.target_accuracy) : Json());
  report.set("time_to_target_s", time_to_target);
  report.set("train_time_s", comm.allreduce_max(train_seconds));
  report.set("total_time_s", comm.allreduce_max(total_seconds));
  Json throughput = Json::object();
  const double my_rate = samples_trained / std::max(train_seconds, 1e-9);
  const double slowest_train = comm.allreduce_max(train_seconds);
  throughput.set("samples_per_s", comm.allreduce_sum(samples_trained) / std::max(slowest_train, 1e-9));
  throughput.set("per_rank_samples_per_s", Json::array_of(comm.allgather(my_rate)));
  throughput.set("per_rank_summary", report::stats_over_ranks(comm, my_rate));
  report.set("throughput", throughput);
  report.set("phases", report::phase_summary(comm, timers));
  {
    // Input pipeline, per rank: how long steps waited for their batch, and what was read.
    const int64_t steps_timed = std::max<int64_t>(1, timers.count(Phase::data_wait));
    const double wait = timers.total(Phase::data_wait);
    Json d = Json::object();
    d.set("io", cfg.io);
    d.set("encoding", train_split.encoding);
    d.set("data_threads", cfg.data_threads);
    d.set("prefetch", cfg.data_prefetch);
    d.set("steps", timers.count(Phase::data_wait));
    d.set("wait_total_s", report::stats_over_ranks(comm, wait));
    d.set("wait_per_step_s", report::stats_over_ranks(comm, wait / steps_timed));
    d.set("wait_fraction", report::stats_over_ranks(comm, wait / std::max(train_seconds, 1e-9)));
    d.set("bytes_read", report::stats_over_ranks(comm, static_cast<double>(loader.bytes_read())));
    d.set("per_rank_bytes_read", Json::array_of(comm.allgather(static_cast<double>(loader.bytes_read()))));
    d.set("read_mb_per_s", report::stats_over_ranks(comm, loader.bytes_read() / 1e6 / std::max(train_seconds, 1e-9)));
    // Samples dropped by --skip-bad-samples (null without it): the total over ranks and per rank.
    if (cfg.skip_bad_samples) {
      const int64_t skipped = loader.skipped_samples();
      const int64_t total = comm.allreduce_sum(skipped);
      d.set("skipped_samples", total);
      d.set("per_rank_skipped_samples", Json::array_of(comm.allgather(static_cast<double>(skipped))));
      if (total > 0) ST_LOG("skipped " << total << " bad sample" << (total == 1 ? "" : "s") << " (--skip-bad-samples)");
    } else {
      d.set("skipped_samples", Json());
      d.set("per_rank_skipped_samples", Json());
    }
    report.set("data", d);
  }
  report.set("staging", staging);
  report.set("checkpoint", checkpoint_path);
  if (rank == 0) report::write_json_atomic((fs::path(cfg.output_dir) / "report.json").string(), report);
  comm.barrier();
  ST_LOG("wrote " << (fs::path(cfg.output_dir) / "report.json").string() << " and " << checkpoint_path);
  return report;
}

}  // namespace scaletrain::train
