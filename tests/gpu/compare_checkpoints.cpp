// scaletrain_compare_checkpoints: how far a run's checkpoint is from a reference run's, for the
// GPU training tests (tests/gpu/test_*.sh), which compare a GPU run against the same run on the
// CPU. Reads both files with the checkpoint reader (seal and CRC verified first), so it needs
// neither h5py nor HDF5's tools on the GPU machine, and compares in float64:
//
//   scaletrain_compare_checkpoints [--base W0] [--what params|buffers|optimizer] --tolerance T TEST REF
//
// TEST, REF (and W0) are checkpoint files or run directories (their checkpoints/latest).
// Without --base the error is the relative L2 distance ||TEST - REF|| / ||REF||; with --base it
// is the relative error of the update, ||(TEST - W0) - (REF - W0)|| / ||REF - W0||, so that a
// single step's update is not hidden behind the weights it is added to. The error is taken over
// the selected tensors as one vector (params: /model tensors that have an /optimizer momentum
// buffer; buffers: the other /model tensors, batch-norm running statistics; optimizer: the
// momentum buffers) and printed per tensor too, largest first, so that a failure names the
// tensors that differ most. Exit 0 within the tolerance, 1 over it (or a non-finite value),
// 2 when the files cannot be compared (other tensors or shapes, another step).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "scaletrain/checkpoint/checkpoint.hpp"

namespace {

using scaletrain::checkpoint::CheckpointData;
using scaletrain::checkpoint::read_checkpoint;

int usage(const char* why) {
  std::fprintf(stderr,
               "scaletrain_compare_checkpoints: %s\nusage: scaletrain_compare_checkpoints [--base W0] "
               "[--what params|buffers|optimizer] [--show N] --tolerance T TEST REF\n",
               why);
  return 2;
}

// A run directory's newest checkpoint (checkpoints/latest), or the path itself.
std::string resolve(const std::string& path) {
  std::ifstream latest(path + "/checkpoints/latest");
  std::string name;
  if (latest && std::getline(latest, name) && !name.empty()) return path + "/checkpoints/" + name;
  return path;
}

std::string shape_text(const scaletrain::Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

struct TensorError {
  std::string name;
  std::string shape;
  int64_t values = 0;
  double diff2 = 0.0;  // sum of (test - ref)^2
  double ref2 = 0.0;   // sum of (ref - base)^2, or ref^2 without a base
  bool finite = true;
  double relative() const { return ref2 > 0.0 ? std::sqrt(diff2 / ref2) : (diff2 > 0.0 ? INFINITY : 0.0); }
};

bool selected(const CheckpointData& data, const std::string& key, const std::string& what) {
  const auto slash = key.find('/');
  const std::string group = key.substr(0, slash), name = key.substr(slash + 1);
  const bool has_momentum = data.tensors.count("optimizer/" + name) > 0;
  if (what == "params") return group == "model" && has_momentum;
  if (what == "buffers") return group == "model" && !has_momentum;
  return group == "optimizer" && data.tensors.count("model/" + name) > 0;  // momentum, not Adam's extra state
}

}  // namespace

int main(int argc, char** argv) {
  std::string base_path, what = "params";
  double tolerance = -1.0;
  int show = 8;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--base" && has_value)
      base_path = argv[++i];
    else if (arg == "--what" && has_value)
      what = argv[++i];
    else if (arg == "--tolerance" && has_value)
      tolerance = std::atof(argv[++i]);
    else if (arg == "--show" && has_value)
      show = std::atoi(argv[++i]);
    else if (arg.rfind("--", 0) == 0)
      return usage(("unknown option " + arg).c_str());
    else
      files.push_back(arg);
  }
  if (files.size() != 2) return usage("expected TEST and REF");
  if (!(tolerance > 0.0)) return usage("--tolerance must be positive");
  if (what != "params" && what != "buffers" && what != "optimizer")
    return usage("--what: params, buffers or optimizer");

  try {
    const CheckpointData test = read_checkpoint(resolve(files[0]));
    const CheckpointData ref = read_checkpoint(resolve(files[1]));
    CheckpointData base;
    if (!base_path.empty()) base = read_checkpoint(resolve(base_path));
    std::printf("test %s (step %lld)\nref  %s (step %lld)\n", test.path.c_str(), static_cast<long long>(test.meta.step),
                ref.path.c_str(), static_cast<long long>(ref.meta.step));
    if (!base_path.empty())
      std::printf("base %s (step %lld)\n", base.path.c_str(), static_cast<long long>(base.meta.step));
    if (test.meta.step != ref.meta.step) {
      std::printf("FAIL: the checkpoints are of different steps (%lld, %lld)\n", static_cast<long long>(test.meta.step),
                  static_cast<long long>(ref.meta.step));
      return 2;
    }

    std::vector<TensorError> errors;
    TensorError total;
    total.name = "all " + what;
    for (const auto& [key, r] : ref.tensors) {
      if (!selected(ref, key, what)) continue;
      const auto t = test.tensors.find(key);
      if (t == test.tensors.end() || t->second.shape() != r.shape()) {
        std::printf("FAIL: %s %s in ref is %s in test\n", key.c_str(), shape_text(r.shape()).c_str(),
                    t == test.tensors.end() ? "missing" : shape_text(t->second.shape()).c_str());
        return 2;
      }
      const float* b = nullptr;
      if (!base_path.empty()) {
        const auto w0 = base.tensors.find(key);
        if (w0 == base.tensors.end() || w0->second.shape() != r.shape()) {
          std::printf("FAIL: %s is missing from the base or has another shape there\n", key.c_str());
          return 2;
        }
        b = w0->second.data<const float>();
      }
      TensorError e;
      e.name = key;
      e.shape = shape_text(r.shape());
      e.values = r.numel();
      const float* x = t->second.data<const float>();
      const float* y = r.data<const float>();
      for (int64_t i = 0; i < e.values; ++i) {
        if (!std::isfinite(x[i]) || !std::isfinite(y[i])) e.finite = false;
        const double d = static_cast<double>(x[i]) - y[i];
        const double u = static_cast<double>(y[i]) - (b ? b[i] : 0.0);
        e.diff2 += d * d;
        e.ref2 += u * u;
      }
      total.values += e.values;
      total.diff2 += e.diff2;
      total.ref2 += e.ref2;
      total.finite = total.finite && e.finite;
      errors.push_back(e);
    }
    for (const auto& [key, t] : test.tensors)
      if (selected(test, key, what) && !ref.tensors.count(key)) {
        std::printf("FAIL: %s is in test only\n", key.c_str());
        return 2;
      }
    if (errors.empty()) {
      std::printf("FAIL: no %s tensors in %s\n", what.c_str(), ref.path.c_str());
      return 2;
    }
    std::sort(errors.begin(), errors.end(),
              [](const TensorError& a, const TensorError& b) { return a.relative() > b.relative(); });
    const char* quantity = base_path.empty() ? "relative L2 error" : "relative L2 error of the update";
    std::printf("%s: %zu tensors, %lld values; %s %.3e (tolerance %.1e); largest per tensor:\n", what.c_str(),
                errors.size(), static_cast<long long>(total.values), quantity, total.relative(), tolerance);
    for (int i = 0; i < show && i < static_cast<int>(errors.size()); ++i)
      std::printf("  %-48s %-18s %.3e%s\n", errors[i].name.c_str(), errors[i].shape.c_str(), errors[i].relative(),
                  errors[i].finite ? "" : "  (non-finite values)");
    const TensorError& worst = errors.front();
    if (!total.finite) {
      for (const auto& e : errors)
        if (!e.finite) {
          std::printf("FAIL: %s: non-finite values in %s\n", what.c_str(), e.name.c_str());
          break;
        }
      return 1;
    }
    if (!(total.relative() <= tolerance)) {
      std::printf("FAIL: %s: %s %.3e > tolerance %.1e; largest in tensor %s: %.3e\n", what.c_str(), quantity,
                  total.relative(), tolerance, worst.name.c_str(), worst.relative());
      return 1;
    }
    std::printf("ok: %s: %s %.3e <= %.1e\n", what.c_str(), quantity, total.relative(), tolerance);
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 2;
  }
}
