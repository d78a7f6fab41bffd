// Calibration files (calibration.hpp): the least-squares batch curves, the checks, and the JSON
// form (docs/scaling-model.md, "Calibration files").
#include "scaletrain/advisor/calibration.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain::advisor {
namespace fs = std::filesystem;

namespace {
constexpr const char* kFormat = "scaletrain-calibration";
constexpr int64_t kVersion = 1;

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, "cannot open " << what << " " << path << " (no such file or no permission?)");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

Json curve_json(const LinearCurve& c) {
  Json j = Json::object();
  j.set("fixed_s", c.fixed_s);
  j.set("per_sample_s", c.per_sample_s);
  return j;
}

LinearCurve curve_from_json(const Json& j) { return {j.at("fixed_s").as_double(), j.at("per_sample_s").as_double()}; }

bool positive_finite(double v) { return std::isfinite(v) && v > 0.0; }

}  // namespace

LinearCurve fit_linear(const std::vector<std::pair<double, double>>& points) {
  ST_CHECK(!points.empty(), "a batch curve needs at least one measured batch size");
  if (points.size() == 1) return {0.0, points[0].second / points[0].first};
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(points.size());
  const double det = n * sxx - sx * sx;
  ST_CHECK(det > 1e-12 * n * sxx, "a batch curve needs at least two different batch sizes");
  const double slope = (n * sxy - sx * sy) / det;
  return {(sy - slope * sx) / n, slope};
}

void check_calibration(const Calibration& c, const std::string& where) {
  auto fail = [&](const std::string& what) { ST_THROW("calibration " << where << ": " << what); };
  if (c.model.empty()) fail("no model named");
  if (c.points.empty()) fail("no measured batch sizes (points)");
  for (const BatchPoint& p : c.points)
    if (p.batch <= 0 || !positive_finite(p.forward_s) || !positive_finite(p.backward_s) || p.optimizer_s < 0)
      fail("point at batch " + std::to_string(p.batch) + ": batch and times must be positive");
  // The fitted curves must give a positive time at every batch the advisor may ask for (>= 1).
  if (c.forward.at(1.0) <= 0 || c.backward.at(1.0) <= 0 || c.forward.per_sample_s < 0 || c.backward.per_sample_s < 0)
    fail("the fitted forward/backward curves must be non-decreasing and positive from batch 1");
  if (c.gradient_bytes <= 0) fail("gradient_bytes must be positive");
  if (c.buckets.empty()) fail("no gradient buckets");
  int64_t sum = 0;
  double last = 0.0;
  for (std::size_t i = 0; i < c.buckets.size(); ++i) {
    const BucketTiming& b = c.buckets[i];
    if (b.bytes <= 0) fail("bucket " + std::to_string(i) + " has no bytes");
    if (!(b.ready_fraction > 0.0 && b.ready_fraction <= 1.0) || b.ready_fraction < last)
      fail("bucket " + std::to_string(i) + ": ready_fraction must be in (0, 1] and not below the bucket before it");
    last = b.ready_fraction;
    sum += b.bytes;
  }
  if (sum != c.gradient_bytes)
    fail("the buckets hold " + std::to_string(sum) + " bytes, gradient_bytes says " + std::to_string(c.gradient_bytes));
  if (c.batch_unit != "samples" && c.batch_unit != "tokens")
    fail("batch_unit \"" + c.batch_unit + "\" is not \"samples\" or \"tokens\"");
  if (c.input_samples_per_s < 0) fail("input_samples_per_s must not be negative (0: not measured)");
  if (c.default_batch <= 0) fail("default_batch must be positive");
  if (c.train_samples <= 0) fail("train_samples must be positive");
}

Json to_json(const Calibration& c) {
  Json points = Json::array();
  for (const BatchPoint& p : c.points) {
    Json j = Json::object();
    j.set("batch", p.batch);
    j.set("forward_s", p.forward_s);
    j.set("backward_s", p.backward_s);
    j.set("optimizer_s", p.optimizer_s);
    points.push_back(j);
  }
  Json buckets = Json::array();
  for (const BucketTiming& b : c.buckets) {
    Json j = Json::object();
    j.set("bytes", b.bytes);
    j.set("ready_fraction", b.ready_fraction);
    buckets.push_back(j);
  }
  Json j = Json::object();
  j.set("format", kFormat);
  j.set("version", kVersion);
  j.set("model", c.model);
  j.set("device", c.device);
  j.set("precision", c.precision);
  j.set("source", c.source);
  j.set("points", points);
  j.set("forward", curve_json(c.forward));
  j.set("backward", curve_json(c.backward));
  j.set("optimizer_s", c.optimizer_s);
  j.set("gradient_bytes", c.gradient_bytes);
  j.set("bucket_mb", c.bucket_mb);
  j.set("buckets", buckets);
  j.set("batch_unit", c.batch_unit);
  j.set("input_samples_per_s", c.input_samples_per_s);
  j.set("default_batch", c.default_batch);
  j.set("train_samples", c.train_samples);
  return j;
}

Calibration calibration_from_json(const Json& j, const std::string& where) {
  Calibration c;
  try {
    ST_CHECK(j.contains("format") && j.at("format").as_string() == kFormat,
             "not a calibration file (\"format\" is not \"" << kFormat << "\")");
    ST_CHECK(j.at("version").as_int() == kVersion,
             "calibration format version " << j.at("version").as_int() << ", this build reads " << kVersion);
    c.model = j.at("model").as_string();
    c.device = j.at("device").as_string();
    c.precision = j.at("precision").as_string();
    c.source = j.at("source").as_string();
    const Json& points = j.at("points");
    for (std::size_t i = 0; i < points.size(); ++i) {
      const Json& p = points.at(i);
      c.points.push_back({p.at("batch").as_int(), p.at("forward_s").as_double(), p.at("backward_s").as_double(),
                          p.at("optimizer_s").as_double()});
    }
    c.forward = curve_from_json(j.at("forward"));
    c.backward = curve_from_json(j.at("backward"));
    c.optimizer_s = j.at("optimizer_s").as_double();
    c.gradient_bytes = j.at("gradient_bytes").as_int();
    c.bucket_mb = j.at("bucket_mb").as_double();
    const Json& buckets = j.at("buckets");
    for (std::size_t i = 0; i < buckets.size(); ++i)
      c.buckets.push_back({buckets.at(i).at("bytes").as_int(), buckets.at(i).at("ready_fraction").as_double()});
    // Files written before translation had no unit: their batches are samples.
    if (j.contains("batch_unit")) c.batch_unit = j.at("batch_unit").as_string();
    c.input_samples_per_s = j.at("input_samples_per_s").as_double();
    c.default_batch = j.at("default_batch").as_int();
    c.train_samples = j.at("train_samples").as_int();
  } catch (const Error& e) {
    ST_THROW("calibration " << where << ": " << error_text(e));
  }
  check_calibration(c, where);
  return c;
}

Calibration read_calibration(const std::string& path) {
  const std::string text = read_text(path, "calibration file");
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Error& e) {
    ST_THROW("calibration " << path << " is not JSON: " << error_text(e));
  }
  return calibration_from_json(j, path);
}

void write_calibration(const Calibration& c, const std::string& path) {
  check_calibration(c, path);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    ST_CHECK(out, "cannot write calibration " << path << " (no such directory or no permission?)");
    out << to_json(c).dump(2) << "\n";
    out.flush();
    ST_CHECK(out.good(), "cannot write calibration " << tmp << " (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  ST_CHECK(!ec, "cannot rename " << tmp << " to " << path << ": " << ec.message());
}

}  // namespace scaletrain::advisor
