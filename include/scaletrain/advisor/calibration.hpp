// A model's calibration: what the scaling model needs to know about one rank training it, measured
// by `scaletrain-advisor calibrate` on this machine (CPU or GPU) or written from published figures.
// The same JSON format either way (docs/scaling-model.md), so a V100 calibration taken anywhere
// predicts a DGX-1.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/core/json.hpp"

namespace scaletrain::advisor {

// t(b) = fixed_s + per_sample_s * b: the time of a phase at a per-rank batch of b samples. The
// fixed part (kernel launches, per-layer overheads, weights read once per step) is why a GPU
// gets less efficient at small batches, which strong scaling gives it.
struct LinearCurve {
  double fixed_s = 0.0;
  double per_sample_s = 0.0;
  double at(double batch) const { return fixed_s + per_sample_s * batch; }
};

// Least-squares fit of a LinearCurve to (batch, seconds) points; one point gives a curve through
// the origin. Throws on no points, or on points that do not determine a line (one batch size
// repeated) when more than one is given.
LinearCurve fit_linear(const std::vector<std::pair<double, double>>& points);

// One measured per-rank batch size: the median time of each phase over the timed steps.
struct BatchPoint {
  int64_t batch = 0;
  double forward_s = 0.0;   // input op, forward and loss
  double backward_s = 0.0;  // backward, to the last gradient
  double optimizer_s = 0.0;
};

// One gradient bucket, in backward order (the first bucket holds the first gradients backward
// produces): its size, and the share of backward done when its last gradient is ready.
struct BucketTiming {
  int64_t bytes = 0;
  double ready_fraction = 1.0;  // in (0, 1]; the last bucket is ready when backward ends
};

struct Calibration {
  std::string model;      // "resnet50", "resnet20", "ncf"
  std::string device;     // "cpu (2 threads, HOST)", "V100-SXM2-16GB"
  std::string precision;  // "fp32", "mixed"
  std::string source;     // how it was obtained: the command and date, or the published figures
  std::vector<BatchPoint> points;
  LinearCurve forward, backward;  // fitted to points
  double optimizer_s = 0.0;       // per step, independent of the batch
  int64_t gradient_bytes = 0;     // all-reduced per step
  double bucket_mb = 25.0;        // the bucket capacity the layout below was planned with
  std::vector<BucketTiming> buckets;
  // What a batch, and with it every figure per sample below, counts: "samples" (images, (user, item)
  // pairs; also a file without the key) or "tokens" (translation: real target tokens).
  std::string batch_unit = "samples";
  double input_samples_per_s = 0.0;  // one rank's input pipeline, batch units/s; 0: not measured (no data wait)
  int64_t default_batch = 0;         // the per-rank batch the model trains with by default (batch units)
  int64_t train_samples = 0;         // batch units in one epoch (time per epoch), e.g. 1,281,167
};

// The fitted curves and checks (buckets sum to gradient_bytes, fractions in (0, 1] and
// non-decreasing, positive times). `where` names the file in errors.
void check_calibration(const Calibration& c, const std::string& where);

Json to_json(const Calibration& c);
Calibration calibration_from_json(const Json& j, const std::string& where);
Calibration read_calibration(const std::string& path);
void write_calibration(const Calibration& c, const std::string& path);

}  // namespace scaletrain::advisor
