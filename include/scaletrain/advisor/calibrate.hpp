// `scaletrain-advisor calibrate`'s instruments: a short sweep on one rank that times the phases of
// the trainer's step (forward and loss, backward, optimizer) at a few per-rank batch sizes, notes
// when backward completes each gradient bucket, and measures the input pipeline's rate, giving
// the Calibration that the scaling model needs (calibration.hpp, docs/scaling-model.md).
//
// Decisions: each batch size gets a freshly built and initialised model and optimizer, so one
// measurement never depends on the one before it; the input is synthetic (the task's random
// batch of the dataset's shapes: pixels and labels, or users, items and labels), since what a
// batch holds changes little of a step's time (NCF's embedding backward sorts the batch's ids:
// random ids are its common case); every phase's time is the median over the timed steps, after untimed warm-up steps
// that pay for oneDNN's primitive creation and first-touch allocation. Bucket ready times are taken at the largest
// batch, where a step is longest and the clock's resolution and the machine's noise matter least.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scaletrain/advisor/calibration.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/train/config.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain {
class Context;
}

namespace scaletrain::advisor {

// What calibrate assumes about a model when no dataset is given: the dataset it trains on in the
// MLPerf/paper setting (its shape, for the model and the synthetic batches), and batch sizes cheap
// enough to measure on a CPU.
struct ModelDefaults {
  std::string dataset;           // "ImageNet (ILSVRC2012 train)", "CIFAR-10 train", "MovieLens-20M ..."
  int64_t train_samples;         // 1,281,167, 50,000 and 99,308,850 (an epoch's, negatives included)
  train::DataShape shape;        // classes, channels, image size (train::default_image_size); users, items
  std::vector<int64_t> batches;  // --batches' default (translation: tokens)
};
// Throws UsageError naming --model for a model calibrate does not know.
ModelDefaults model_defaults(const std::string& model);

// Throws UsageError (naming --batches) where a batch size cannot be timed as given: a translation
// model's batches are tokens, filled with whole synthetic pairs of train::kSyntheticSentenceTokens
// tokens, so each must hold one pair, and no two may round down to the same number of pairs.
void check_model_batches(const std::string& model, const std::vector<int64_t>& batches);

struct SweepOptions {
  std::vector<int64_t> batches;  // per rank; positive and distinct, measured in ascending order
  int steps = 5;                 // timed steps per batch size
  int warmup_steps = 1;          // untimed steps before them
  double bucket_mb = 25.0;       // the gradient bucket capacity (comm::plan_buckets)
  uint64_t seed = 0;             // the model's initialisation and the synthetic batches
};

// What a sweep times: the trainer's step (train/training_step.hpp) for config.model, with the
// trainer's configuration for it (its optimizer and learning rate, the loss's options: the
// model's defaults) and its task, opened on a dataset or on a dataset's shape (the task gives the
// network and the synthetic batches). The task keeps a reference to config.
struct SweepSubject {
  const train::TrainConfig& config;
  train::Task& task;
};

// One batch size measured: the median of each phase, and, per bucket (in plan_buckets' order), the
// median over the timed steps of the share of backward done when the bucket's last gradient was
// ready (raw: not yet clamped or made non-decreasing).
struct BatchMeasurement {
  BatchPoint point;
  std::vector<double> bucket_fractions;
  std::vector<comm::GradientBucket> buckets;  // the measured network's plan (bucket_fractions' order)
  int64_t gradient_bytes = 0;                 // its parameters x 4 (fp32)
};

// Times options.steps steps of forward + loss, backward and optimizer at `batch` on ctx. The
// point's batch is the synthetic batch's work in the task's unit (task.batch_work): `batch`, or
// for translation the real target tokens of its whole pairs.
BatchMeasurement measure_batch(Context& ctx, const SweepSubject& subject, const SweepOptions& options, int64_t batch);

// The whole sweep: every batch size measured (on_point is told each one as it is done, for
// progress), the forward and backward curves fitted, the optimizer's median, the gradient size and
// its bucket layout with the ready fractions of the largest batch. Also sets model, precision
// ("fp32"), bucket_mb, batch_unit (the task's work_unit) and default_batch (config.batch_size:
// the model's --batch-size default; set it to --batch-tokens' for translation);
// device, source, input_samples_per_s (0) and train_samples (0) are the caller's to fill.
Calibration run_sweep(Context& ctx, const SweepSubject& subject, const SweepOptions& options,
                      const std::function<void(const BatchPoint&)>& on_point = nullptr);

// Bucket k's share of backward in one step: the latest ready time of its parameters over the
// backward time. ready_s: seconds from the start of backward, one per parameter (registration
// order). Throws if a parameter of a bucket has no ready time (< 0).
std::vector<double> bucket_ready_fractions(const std::vector<comm::GradientBucket>& buckets,
                                           const std::vector<double>& ready_s, double backward_s);

// A phase's curve from its (batch, median seconds) points: fit_linear's least-squares line, or,
// when that line has a negative fixed part, the least-squares line with fixed_s = 0 (through the
// origin: per_sample_s = sum(b t) / sum(b^2)). A CPU's time per sample grows with the batch as
// the activations outgrow its caches, and a line through such points crosses zero above batch 1;
// a fixed cost below zero is not a time, and the scaling model asks for batches down to 1.
LinearCurve fit_batch_curve(const std::vector<std::pair<double, double>>& points);

// Throws, naming the phase and listing the points, unless the times grow with the batch (points
// in ascending batch order): a larger batch does more work, so a phase that is not slower at it
// was not timed well (a busy machine, or steps too short for the clock).
void check_times_grow(const std::vector<std::pair<double, double>>& points, const std::string& phase);

// The calibration's bucket list: bytes = count x 4 (fp32), and the fractions clamped to (0, 1]
// (a bucket ready at the very start still costs its all-reduce after some backward work: the
// floor is 1e-6) and made non-decreasing in bucket order (a bucket's all-reduce starts after the
// ones before it, whatever order its gradients came in).
std::vector<BucketTiming> bucket_timings(const std::vector<comm::GradientBucket>& buckets,
                                         const std::vector<double>& fractions);

// Samples (for translation: real target tokens, the source's last_step_work) per second that one rank's training
// batches (the task's: the loader for images) reach a consumer that takes each batch at once: the pipeline's own rate,
// over up to `batches` batches after the first `skipped` (the prefetch + 1 that start with the epoch pay for the
// threads' start and the first reads). Throws naming `dataset` when the epoch has no batch left to time.
double measure_input_rate(train::BatchSource& source, int64_t skipped, int batches, const std::string& dataset);

// The median of values (the mean of the middle two for an even count); throws when empty.
double median(std::vector<double> values);

// "cpu (4 threads, Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz)": the model name of /proc/cpuinfo,
// or "unknown CPU" where it has none.
std::string cpu_device_name(int threads);

}  // namespace scaletrain::advisor
