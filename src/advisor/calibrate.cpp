// The calibration sweep (calibrate.hpp): the trainer's own step (train/training_step.hpp) timed
// phase by phase on the task's synthetic batches, the bucket ready times recorded through the
// step's grad-ready wiring, and the input pipeline's rate through the task's training batches.
#include "scaletrain/advisor/calibrate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/optim/optimizer.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/training_step.hpp"

namespace scaletrain::advisor {
namespace {

// A bucket whose gradients are all ready at the start of backward still waits for some of it:
// the floor of a ready fraction, which must be above 0.
constexpr double kMinReadyFraction = 1e-6;

// The calibration's instrument: the gradient reducer of a one-rank run (the mean over one rank is
// the gradient itself, so finish() has nothing to reduce) that records when backward announces
// each parameter's gradient, seconds after begin_step(). The training step wires it into backward
// as the trainer's reducer, so it sees the same calls.
class GradReadyRecorder final : public comm::GradientReducer {
 public:
  explicit GradReadyRecorder(nn::ParameterSet& params) : params_(params), ready_s_(params.num_parameters(), -1.0) {}

  std::string name() const override { return "grad-ready recorder (one rank, calibration)"; }
  void begin_step() override {
    std::fill(ready_s_.begin(), ready_s_.end(), -1.0);
    clock_.reset();
  }
  void on_grad_ready(int index) override { ready_s_.at(index) = clock_.elapsed(); }
  // Every gradient must have been announced: a layer that forgets would leave a bucket that never
  // starts in a real run, and a ready time this calibration cannot know.
  void finish() override {
    for (int i = 0; i < params_.num_parameters(); ++i)
      ST_CHECK(ready_s_[i] >= 0, "calibration: backward never announced the gradient of parameter "
                                     << params_.parameter_info(i).name << " (mark_grad_ready)");
  }
  int64_t bytes_per_step() const override { return params_.parameter_count() * static_cast<int64_t>(sizeof(float)); }
  Json layout() const override {
    Json j = Json::object();
    j.set("algorithm", "none (one rank)");
    return j;
  }
  double communication_seconds() const override { return 0.0; }
  std::string describe() const override { return name(); }
  Json options() const override { return Json::object(); }
  std::string algorithm_for(int64_t bytes) const override { return "none (one rank)"; }
  void allreduce_now(float* data, int64_t count) override {}  // the sum over one rank: the data itself

  // Seconds from begin_step() to each parameter's announcement (registration order).
  const std::vector<double>& ready_seconds() const { return ready_s_; }

 private:
  nn::ParameterSet& params_;
  std::vector<double> ready_s_;
  Stopwatch clock_;
};

struct StepTimes {
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0;
  std::vector<double> ready_s;  // per parameter, from the start of backward
};

// The calibration's watch on the step: each phase's seconds to the end of its work on the device
// (synchronize: a no-op on the CPU). end() may not throw (it also runs while a phase's error
// unwinds), so a failed synchronise is kept and rethrown by seconds().
class PhaseStopwatch final : public train::StepPhaseWatcher {
 public:
  explicit PhaseStopwatch(Context& ctx) : ctx_(ctx) {}
  void begin(report::Phase) override { clock_.reset(); }
  void end(report::Phase phase) noexcept override {
    try {
      ctx_.synchronize();
    } catch (...) {
      if (!failure_) failure_ = std::current_exception();
    }
    seconds_[static_cast<int>(phase)] = clock_.elapsed();
  }
  double seconds(report::Phase phase) const {
    if (failure_) std::rethrow_exception(failure_);
    return seconds_[static_cast<int>(phase)];
  }

 private:
  Context& ctx_;
  Stopwatch clock_;
  std::array<double, report::kNumPhases> seconds_{};
  std::exception_ptr failure_;
};

// A freshly initialised network of the subject's task with the trainer's optimizer for it, stepped
// by the trainer's own step (train/training_step.hpp), each phase timed.
class TimedTrainingStep {
 public:
  TimedTrainingStep(Context& ctx, const SweepSubject& subject, uint64_t seed)
      : ctx_(ctx), config_(subject.config), network_(subject.task.make_network(seed)) {
    optimizer_ = train::make_optimizer(config_, network_->params());
    recorder_ = std::make_unique<GradReadyRecorder>(network_->params());
    step_ = std::make_unique<train::TrainingStep>(ctx_, subject.task, *network_, *optimizer_, *recorder_,
                                                  /*accumulate_steps=*/1, /*rank=*/0);
  }

  StepTimes run(const train::Batch& batch) {
    PhaseStopwatch watch(ctx_);
    // Each timed step at its own position, as the trainer's steps (dropout draws new masks).
    const double loss = step_->run(batch, batch.size(), optimizer_->steps(), config_.base_lr, watch);
    // As the trainer: a diverged model would be timed on NaNs, which some CPUs run slower.
    ST_CHECK(std::isfinite(loss), "calibration of " << network_->name() << " at batch " << batch.size()
                                                    << ": the loss is " << loss << " after " << optimizer_->steps()
                                                    << " steps");
    StepTimes t;
    t.forward_s = watch.seconds(report::Phase::forward);
    t.backward_s = watch.seconds(report::Phase::backward);
    t.optimizer_s = watch.seconds(report::Phase::optimizer);
    t.ready_s = recorder_->ready_seconds();
    return t;
  }

  nn::ParameterSet& params() { return network_->params(); }

 private:
  Context& ctx_;
  const train::TrainConfig& config_;
  std::unique_ptr<models::Network> network_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<GradReadyRecorder> recorder_;
  std::unique_ptr<train::TrainingStep> step_;
};

void check_sweep_options(const SweepOptions& o) {
  ST_CHECK(!o.batches.empty(), "calibration: no batch sizes to measure");
  for (std::size_t i = 0; i < o.batches.size(); ++i) {
    ST_CHECK(o.batches[i] > 0, "calibration: batch size " << o.batches[i] << " is not positive");
    for (std::size_t j = 0; j < i; ++j)
      ST_CHECK(o.batches[i] != o.batches[j], "calibration: batch size " << o.batches[i] << " is listed twice");
  }
  ST_CHECK(o.steps >= 1, "calibration: " << o.steps << " timed steps per batch size (at least 1)");
  ST_CHECK(o.warmup_steps >= 0, "calibration: " << o.warmup_steps << " warm-up steps");
  ST_CHECK(o.bucket_mb > 0 && std::isfinite(o.bucket_mb), "calibration: bucket capacity " << o.bucket_mb << " MiB");
}

train::DataShape images(int classes, int size) {
  train::DataShape s;
  s.num_classes = classes;
  s.channels = 3;
  s.height = s.width = size;
  return s;
}

}  // namespace

ModelDefaults model_defaults(const std::string& model) {
  train::check_model_name(model);
  // ILSVRC2012's training set (the MLPerf ResNet-50 benchmark), CIFAR-10's (He et al. 2016,
  // section 4.2) and MovieLens-20M's leave-one-out training positives (20,000,263 ratings less
  // one held out for each of 138,493 users) with 4 negatives each, an epoch of the MLPerf NCF
  // reference. Batches: a CPU does a ResNet-50 sample at 224x224 in about 50x the time of a
  // ResNet-20 sample at 32x32; an NCF sample is a few embedding rows and a small MLP.
  // The ImageNet CNNs (the LRZ study's, ResNet-50's): a few images per rank; Inception-v3's 299x299
  // images cost about 1.4x ResNet-50's, so the same small batches.
  if (model != "resnet20" && models::model_entry(model).task == models::kTaskImageClassification)
    return {"ImageNet (ILSVRC2012 train)", 1281167, images(1000, train::default_image_size(model)), {2, 4, 8}};
  // Translation (the MLPerf Transformer): WMT17 en-de as the reference prepares it, about 4.5 M
  // sentence pairs (docs/dataset-format.md); an epoch in target tokens is an estimate, not a
  // count: 4.5 M pairs x 31 subtokens (end of sentence included; the sentences' mean,
  // docs/performance.md), 139.5 M. The vocabulary is the reference's 33,708 subtokens (`scaletrain
  // info --vocab-size`). Batches are tokens a rank, small for a CPU (a reference step is 4,096):
  // transformer-base took 29.5 s for a step of 1,000 tokens on 2 busy cores.
  if (models::model_entry(model).task == models::kTaskTranslation) {
    train::DataShape wmt;
    wmt.num_items = 33708;
    const std::vector<int64_t> batches =
        model == "transformer-tiny" ? std::vector<int64_t>{256, 512, 1024} : std::vector<int64_t>{128, 256, 512};
    return {"WMT17 en-de train (MLPerf), about 4.5 M pairs x 31 target tokens (an estimate)", 4500000LL * 31, wmt,
            batches};
  }
  if (model == "ncf") {
    train::DataShape ml20m;
    ml20m.num_users = 138493;
    ml20m.num_items = 26744;
    return {"MovieLens-20M (ml-20m) train, 4 negatives per positive", 19861770 * 5, ml20m, {256, 1024, 4096}};
  }
  return {"CIFAR-10 train", 50000, images(10, train::default_image_size(model)), {8, 16, 32}};
}

void check_model_batches(const std::string& model, const std::vector<int64_t>& batches) {
  if (models::model_entry(model).task != models::kTaskTranslation) return;
  const int64_t pair = train::kSyntheticSentenceTokens;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (batches[i] < pair)
      throw UsageError("--batches: " + std::to_string(batches[i]) + " tokens cannot hold one sentence pair (--model " +
                       model + " is timed on pairs of " + std::to_string(pair) + " tokens a side: at least " +
                       std::to_string(pair) + ")");
    for (std::size_t j = 0; j < i; ++j)
      if (batches[i] / pair == batches[j] / pair)
        throw UsageError("--batches: " + std::to_string(batches[j]) + " and " + std::to_string(batches[i]) +
                         " tokens both hold " + std::to_string(batches[i] / pair) + " pairs of " +
                         std::to_string(pair) + " tokens (" + std::to_string(batches[i] / pair * pair) +
                         " tokens): give sizes at least " + std::to_string(pair) + " apart");
  }
}

double median(std::vector<double> values) {
  ST_CHECK(!values.empty(), "internal: the median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<double> bucket_ready_fractions(const std::vector<comm::GradientBucket>& buckets,
                                           const std::vector<double>& ready_s, double backward_s) {
  ST_CHECK(backward_s > 0, "calibration: backward took " << backward_s << " s");
  std::vector<double> fractions;
  for (const comm::GradientBucket& b : buckets) {
    double last = -1.0;
    for (int i = b.first_param; i <= b.last_param; ++i) {
      ST_CHECK(i >= 0 && i < static_cast<int>(ready_s.size()) && ready_s[i] >= 0,
               "calibration: no ready time for parameter " << i << " of a gradient bucket");
      last = std::max(last, ready_s[i]);
    }
    fractions.push_back(last / backward_s);
  }
  return fractions;
}

LinearCurve fit_batch_curve(const std::vector<std::pair<double, double>>& points) {
  const LinearCurve line = fit_linear(points);
  if (line.fixed_s >= 0) return line;
  double bt = 0.0, bb = 0.0;
  for (const auto& [b, t] : points) {
    bt += b * t;
    bb += b * b;
  }
  return {0.0, bt / bb};
}

void check_times_grow(const std::vector<std::pair<double, double>>& points, const std::string& phase) {
  bool grow = true;
  for (std::size_t i = 1; i < points.size(); ++i) grow = grow && points[i].second > points[i - 1].second;
  if (grow) return;
  std::ostringstream times;
  for (std::size_t i = 0; i < points.size(); ++i)
    times << (i == 0 ? "" : ", ") << points[i].second << " s at " << points[i].first;
  ST_THROW("calibration: the " << phase << " times do not grow with the batch (" << times.str()
                               << "): the machine was busy, or the steps are too short to time; try more --steps or "
                                  "batch sizes further apart");
}

std::vector<BucketTiming> bucket_timings(const std::vector<comm::GradientBucket>& buckets,
                                         const std::vector<double>& fractions) {
  ST_CHECK(buckets.size() == fractions.size(),
           "internal: " << buckets.size() << " buckets and " << fractions.size() << " ready fractions");
  std::vector<BucketTiming> out;
  double floor = kMinReadyFraction;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const double f = std::min(1.0, std::max(floor, fractions[k]));
    out.push_back({buckets[k].count * static_cast<int64_t>(sizeof(float)), f});
    floor = f;
  }
  return out;
}

BatchMeasurement measure_batch(Context& ctx, const SweepSubject& subject, const SweepOptions& o, int64_t batch) {
  TimedTrainingStep step(ctx, subject, o.seed);
  const train::Batch input = subject.task.synthetic_batch(batch, o.seed);
  const std::vector<comm::GradientBucket> buckets = comm::plan_buckets(step.params().gradient_layout(), o.bucket_mb);
  for (int i = 0; i < o.warmup_steps; ++i) step.run(input);
  std::vector<double> forward, backward, optimizer;
  std::vector<std::vector<double>> fractions(buckets.size());
  for (int i = 0; i < o.steps; ++i) {
    const StepTimes t = step.run(input);
    forward.push_back(t.forward_s);
    backward.push_back(t.backward_s);
    optimizer.push_back(t.optimizer_s);
    const std::vector<double> f = bucket_ready_fractions(buckets, t.ready_s, t.backward_s);
    for (std::size_t k = 0; k < f.size(); ++k) fractions[k].push_back(f[k]);
  }
  BatchMeasurement m;
  m.point = {subject.task.batch_work(input), median(forward), median(backward), median(optimizer)};
  for (const auto& per_step : fractions) m.bucket_fractions.push_back(median(per_step));
  m.buckets = buckets;
  m.gradient_bytes = step.params().parameter_count() * static_cast<int64_t>(sizeof(float));
  return m;
}

namespace {

// One phase's curve fitted to the points' medians (ascending batches), once they are known to grow.
LinearCurve fitted_curve(const std::vector<BatchPoint>& points, double BatchPoint::*seconds, const char* phase) {
  std::vector<std::pair<double, double>> xy;
  for (const BatchPoint& p : points) xy.emplace_back(static_cast<double>(p.batch), p.*seconds);
  check_times_grow(xy, phase);
  return fit_batch_curve(xy);
}

// measure_batch, its errors naming the model, batch and input shape (an op's own message does not
// say which step of the sweep it was in: a batch of 1 at a small image size leaves batch norm one
// value per channel, for instance).
BatchMeasurement measure_batch_in_context(Context& ctx, const SweepSubject& subject, const SweepOptions& o,
                                          int64_t batch) {
  try {
    return measure_batch(ctx, subject, o, batch);
  } catch (const Error& e) {
    ST_THROW("calibration of " << subject.config.model << " at batch " << batch << ", " << subject.task.describe_shape()
                               << ": " << error_text(e));
  }
}

}  // namespace

Calibration run_sweep(Context& ctx, const SweepSubject& subject, const SweepOptions& o,
                      const std::function<void(const BatchPoint&)>& on_point) {
  check_sweep_options(o);
  std::vector<int64_t> batches = o.batches;
  std::sort(batches.begin(), batches.end());
  Calibration c;
  c.model = subject.config.model;
  c.precision = "fp32";
  c.bucket_mb = o.bucket_mb;
  c.batch_unit = subject.task.work_unit();
  c.default_batch = subject.config.batch_size;
  BatchMeasurement largest;  // batches ascend: the last one measured
  for (int64_t b : batches) {
    largest = measure_batch_in_context(ctx, subject, o, b);
    c.points.push_back(largest.point);
    if (on_point) on_point(largest.point);
  }
  c.forward = fitted_curve(c.points, &BatchPoint::forward_s, "forward");
  c.backward = fitted_curve(c.points, &BatchPoint::backward_s, "backward");
  std::vector<double> optimizer;
  for (const BatchPoint& p : c.points) optimizer.push_back(p.optimizer_s);
  c.optimizer_s = median(optimizer);
  // The layout of the network as measured (the same at every batch: its parameters are fixed by
  // the model and the dataset's shape).
  c.gradient_bytes = largest.gradient_bytes;
  c.buckets = bucket_timings(largest.buckets, largest.bucket_fractions);
  return c;
}

double measure_input_rate(train::BatchSource& source, int64_t skipped, int batches, const std::string& dataset) {
  ST_CHECK(batches >= 1, "calibration: " << batches << " input batches to time (at least 1)");
  const int64_t available = source.steps_per_epoch();
  ST_CHECK(available > skipped, "dataset " << dataset << ": " << available
                                           << " batches per epoch, too few to time its input pipeline (it needs "
                                              "more than "
                                           << skipped << ": use a smaller batch or more samples)");
  const int64_t timed = std::min<int64_t>(batches, available - skipped);
  source.start_epoch(0, 0);
  // Timing starts when the last of the batches that start with the epoch arrives.
  train::Batch batch;
  for (int64_t i = 0; i < skipped; ++i) source.next(batch);
  Stopwatch clock;
  int64_t samples = 0;
  for (int64_t i = 0; i < timed; ++i) {
    ST_CHECK(source.next(batch), "internal: the training batches ended after " << skipped + i << " of " << available);
    const std::optional<train::StepWork> work = source.last_step_work();
    samples += work ? work->units : batch.size();
  }
  return static_cast<double>(samples) / std::max(clock.elapsed(), 1e-9);
}

std::string cpu_device_name(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, cpu = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t start = line.find_first_not_of(" \t", line.find(':') + 1);
    if (line.find(':') != std::string::npos && start != std::string::npos) cpu = line.substr(start);
    break;
  }
  return "cpu (" + std::to_string(threads) + (threads == 1 ? " thread, " : " threads, ") + cpu + ")";
}

}  // namespace scaletrain::advisor
