// The calibration sweep (calibrate.hpp): the trainer's step timed phase by phase on synthetic
// batches, the bucket ready times recorded through the trainer's own grad-ready hook, and the
// input pipeline's rate through the trainer's loader.
#include "scaletrain/advisor/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/ops/normalize.hpp"
#include "scaletrain/optim/optimizer.hpp"
#include "scaletrain/train/config.hpp"

namespace scaletrain::advisor {
namespace {

// A bucket whose gradients are all ready at the start of backward still waits for some of it:
// the floor of a ready fraction, which must be above 0.
constexpr double kMinReadyFraction = 1e-6;

// The calibration's instrument: the gradient reducer of a one-rank run (the mean over one rank is
// the gradient itself, so finish() has nothing to reduce) that records when backward announces
// each parameter's gradient, seconds after begin_step(). It is wired into backward as the
// trainer wires its reducer (the grad-ready hook of the ParameterSet), so it sees the same calls.
class GradReadyRecorder final : public comm::GradientReducer {
 public:
  explicit GradReadyRecorder(nn::ParameterSet& params) : params_(params), ready_s_(params.num_parameters(), -1.0) {
    params_.set_grad_ready_hook([this](int i) { on_grad_ready(i); });
  }
  ~GradReadyRecorder() override { params_.set_grad_ready_hook(nullptr); }
  GradReadyRecorder(const GradReadyRecorder&) = delete;
  GradReadyRecorder& operator=(const GradReadyRecorder&) = delete;

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

// One synthetic batch: uint8 pixels (B, H, W, C), as the loader hands them over, and labels (B).
struct SyntheticBatch {
  Tensor pixels, labels;
};

SyntheticBatch synthetic_batch(const SweepOptions& o, int64_t batch) {
  SyntheticBatch b;
  b.pixels = Tensor::empty({batch, o.image_height, o.image_width, o.in_channels}, DType::u8);
  b.labels = Tensor::empty({batch}, DType::i32);
  Rng rng = Rng::derive(o.seed, static_cast<uint64_t>(batch));
  uint8_t* pixels = b.pixels.data<uint8_t>();
  for (int64_t i = 0; i < b.pixels.numel(); ++i) pixels[i] = static_cast<uint8_t>(rng.below(256));
  int32_t* labels = b.labels.data<int32_t>();
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(rng.below(o.num_classes));
  return b;
}

struct StepTimes {
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0;
  std::vector<double> ready_s;  // per parameter, from the start of backward
};

// A freshly initialised model with the trainer's default optimizer, stepped as the trainer steps
// it (trainer.cpp train_step, forward_and_backward, forward_and_loss), each phase timed.
class TimedTrainingStep {
 public:
  TimedTrainingStep(Context& ctx, const SweepOptions& o)
      : ctx_(ctx), model_(models::make_model(o.model, o.num_classes, o.in_channels)) {
    model_->initialize(o.seed);
    config_.model = o.model;
    optimizer_ = train::make_optimizer(config_, model_->params());
    recorder_ = std::make_unique<GradReadyRecorder>(model_->params());
    mean_.assign(o.in_channels, 0.5);  // any normalisation costs the same
    std_.assign(o.in_channels, 0.25);
  }

  StepTimes run(const SyntheticBatch& batch) {
    StepTimes t;
    double loss = 0.0;
    t.forward_s = timed([&] { loss = forward_and_loss(batch); });
    t.backward_s = timed([&] {
      recorder_->begin_step();
      model_->backward(ctx_, dlogits_);
    });
    recorder_->finish();
    t.ready_s = recorder_->ready_seconds();
    t.optimizer_s = timed([&] { optimizer_->step(ctx_, config_.base_lr); });
    // As the trainer: a diverged model would be timed on NaNs, which some CPUs run slower.
    ST_CHECK(std::isfinite(loss), "calibration of " << model_->name() << " at batch " << batch.labels.numel()
                                                    << ": the loss is " << loss << " after " << optimizer_->steps()
                                                    << " steps");
    return t;
  }

  nn::ParameterSet& params() { return model_->params(); }

 private:
  // Seconds a phase takes, to the end of its work on the device (synchronize: a no-op on the CPU).
  double timed(const std::function<void()>& phase) {
    Stopwatch clock;
    phase();
    ctx_.synchronize();
    return clock.elapsed();
  }

  double forward_and_loss(const SyntheticBatch& batch) {
    if (!input_.defined() || input_.shape() != batch.pixels.shape()) input_ = Tensor::empty(batch.pixels.shape());
    ops::normalize_images(ctx_, batch.pixels, mean_, std_, input_);
    Tensor logits = model_->forward(ctx_, input_, /*training=*/true);
    if (!dlogits_.defined() || dlogits_.shape() != logits.shape()) dlogits_ = Tensor::empty(logits.shape());
    return ops::softmax_cross_entropy(ctx_, logits, batch.labels, static_cast<float>(config_.label_smoothing),
                                      dlogits_);
  }

  Context& ctx_;
  train::TrainConfig config_;  // the trainer's defaults: SGD, learning rate, label smoothing
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<GradReadyRecorder> recorder_;
  std::vector<double> mean_, std_;
  Tensor input_, dlogits_;
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
  ST_CHECK(o.image_height > 0 && o.image_width > 0,
           "calibration: image size " << o.image_height << "x" << o.image_width);
}

}  // namespace

ModelDefaults model_defaults(const std::string& model) {
  train::check_model_name(model);
  // ILSVRC2012's training set (the MLPerf ResNet-50 benchmark) and CIFAR-10's (He et al. 2016,
  // section 4.2). Batches: a CPU does a ResNet-50 sample at 224x224 in about 50x the time of a
  // ResNet-20 sample at 32x32.
  if (model == "resnet50")
    return {"ImageNet (ILSVRC2012 train)", 1281167, 1000, 3, train::default_image_size(model), {2, 4, 8}};
  return {"CIFAR-10 train", 50000, 10, 3, train::default_image_size(model), {8, 16, 32}};
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

BatchMeasurement measure_batch(Context& ctx, const SweepOptions& o, int64_t batch) {
  TimedTrainingStep step(ctx, o);
  const SyntheticBatch input = synthetic_batch(o, batch);
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
  m.point = {batch, median(forward), median(backward), median(optimizer)};
  for (const auto& per_step : fractions) m.bucket_fractions.push_back(median(per_step));
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

// measure_batch, its errors naming the model, batch and image size (an op's own message does not
// say which step of the sweep it was in: a batch of 1 at a small image size leaves batch norm one
// value per channel, for instance).
BatchMeasurement measure_batch_in_context(Context& ctx, const SweepOptions& o, int64_t batch) {
  try {
    return measure_batch(ctx, o, batch);
  } catch (const Error& e) {
    ST_THROW("calibration of " << o.model << " at batch " << batch << ", " << o.image_height << "x" << o.image_width
                               << "x" << o.in_channels << ": " << error_text(e));
  }
}

}  // namespace

Calibration run_sweep(Context& ctx, const SweepOptions& o, const std::function<void(const BatchPoint&)>& on_point) {
  check_sweep_options(o);
  std::vector<int64_t> batches = o.batches;
  std::sort(batches.begin(), batches.end());
  Calibration c;
  c.model = o.model;
  c.precision = "fp32";
  c.bucket_mb = o.bucket_mb;
  c.default_batch = train::TrainConfig().batch_size;
  BatchMeasurement largest;  // batches ascend: the last one measured
  for (int64_t b : batches) {
    largest = measure_batch_in_context(ctx, o, b);
    c.points.push_back(largest.point);
    if (on_point) on_point(largest.point);
  }
  c.forward = fitted_curve(c.points, &BatchPoint::forward_s, "forward");
  c.backward = fitted_curve(c.points, &BatchPoint::backward_s, "backward");
  std::vector<double> optimizer;
  for (const BatchPoint& p : c.points) optimizer.push_back(p.optimizer_s);
  c.optimizer_s = median(optimizer);
  // The layout of the model as measured (parameters are fixed by model, classes and channels).
  const auto model = models::make_model(o.model, o.num_classes, o.in_channels);
  c.gradient_bytes = model->params().parameter_count() * static_cast<int64_t>(sizeof(float));
  c.buckets = bucket_timings(comm::plan_buckets(model->params().gradient_layout(), o.bucket_mb), largest.bucket_fractions);
  return c;
}

double measure_input_rate(const data::SplitInfo& split, const data::LoaderOptions& options, int batches) {
  ST_CHECK(batches >= 1, "calibration: " << batches << " input batches to time (at least 1)");
  data::Loader loader(split, 0, 1, options);
  // The first prefetch + 1 batches start together with the epoch: they measure the threads' start
  // and the first reads, not the pipeline's rate. Timing starts when the last of them arrives.
  const int64_t skipped = options.prefetch + 1;
  const int64_t available = loader.steps_per_epoch();
  ST_CHECK(available > skipped, "dataset " << split.dir << " has " << split.samples << " samples: " << available
                                           << " batches of " << options.batch_size
                                           << ", too few to time its input pipeline (it needs more than " << skipped
                                           << ": use a smaller batch or more samples)");
  const int64_t timed = std::min<int64_t>(batches, available - skipped);
  loader.start_epoch(0);
  Tensor images, labels;
  for (int64_t i = 0; i < skipped; ++i) loader.next(images, labels);
  Stopwatch clock;
  int64_t samples = 0;
  for (int64_t i = 0; i < timed; ++i) {
    ST_CHECK(loader.next(images, labels),
             "internal: the loader ended after " << skipped + i << " of " << available << " batches");
    samples += labels.numel();
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
