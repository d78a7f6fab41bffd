// cuDNN's convolution engines side by side (--conv-algo heuristic | search | graph | graph-search):
// ResNet-50's distinct convolution shapes at batch 32 (the 7x7 stride-2 stem, the 1x1 and 3x3
// convolutions of each stage, the strided 3x3 and 1x1 downsamples) and two shapes ResNet lacks (a
// grouped 3x3, which the graph path leaves to the legacy API, and odd channel counts), in fp32,
// amp-fp16 and amp-bf16, forward, backward data and backward filter, each run through the ops
// (ops::conv2d_*) with each of the four choices and checked against the CPU's op within the
// tolerances of the convolution op cases (tests/support/op_cases.cpp: fp32_sum of the terms per
// output element, twice that between backends; under AMP 2 units of the format at the output's
// largest magnitude more).
//
// One line per shape, precision and direction: the median GPU time of each choice (CUDA events
// around each of 5 runs after a warm-up run, which builds the plan: the searches run there), and
// what ran (the legacy algorithm or the graph API's engine; chosen_by where it says more than the
// choice's name: a fallback and its reason). Then per precision and direction the sums of the
// medians, the four choices side by side.
//
//   scaletrain_gpu_conv_engines [--device cpu] [--precision P]... [--batch N] [--runs N]
//     --device cpu   the same program with a CPU Context in the GPU's place (batch 2, images a
//                    seventh the size, 1 timed run): its comparisons and table checked on every
//                    machine (ctest unit.conv_engines_harness). The choices do nothing on a CPU.
//     --precision P  fp32, amp-fp16, amp-bf16 (repeatable; default all three; amp-bf16 skipped
//                    below compute capability 8.0).
// Exit codes: 0 passed, 1 failed, 2 bad arguments, 77 skipped (no GPU visible).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "gpu_side_by_side.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"
#include "support/op_cases.hpp"

namespace st = scaletrain;
namespace ops = st::ops;

namespace {

struct Shape {
  const char* name;
  int64_t h, c, o, k, stride, padding, groups;  // square images and kernels
};

// ResNet-50 v1.5 (torchvision): the stride of a stage's first block is in its 3x3 and its
// downsample, so a stage brings a strided 3x3 and a strided 1x1; the other blocks repeat shapes.
const Shape kShapes[] = {
    {"stem 7x7 s2", 224, 3, 64, 7, 2, 3, 1},
    {"layer1 1x1 reduce", 56, 64, 64, 1, 1, 0, 1},
    {"layer1 3x3", 56, 64, 64, 3, 1, 1, 1},
    {"layer1 1x1 expand", 56, 64, 256, 1, 1, 0, 1},
    {"layer1 1x1 256->64", 56, 256, 64, 1, 1, 0, 1},
    {"layer2 1x1 reduce", 56, 256, 128, 1, 1, 0, 1},
    {"layer2 3x3 s2", 56, 128, 128, 3, 2, 1, 1},
    {"layer2 1x1 expand", 28, 128, 512, 1, 1, 0, 1},
    {"layer2 downsample 1x1 s2", 56, 256, 512, 1, 2, 0, 1},
    {"layer2 1x1 512->128", 28, 512, 128, 1, 1, 0, 1},
    {"layer2 3x3", 28, 128, 128, 3, 1, 1, 1},
    {"layer3 1x1 reduce", 28, 512, 256, 1, 1, 0, 1},
    {"layer3 3x3 s2", 28, 256, 256, 3, 2, 1, 1},
    {"layer3 1x1 expand", 14, 256, 1024, 1, 1, 0, 1},
    {"layer3 downsample 1x1 s2", 28, 512, 1024, 1, 2, 0, 1},
    {"layer3 1x1 1024->256", 14, 1024, 256, 1, 1, 0, 1},
    {"layer3 3x3", 14, 256, 256, 3, 1, 1, 1},
    {"layer4 1x1 reduce", 14, 1024, 512, 1, 1, 0, 1},
    {"layer4 3x3 s2", 14, 512, 512, 3, 2, 1, 1},
    {"layer4 1x1 expand", 7, 512, 2048, 1, 1, 0, 1},
    {"layer4 downsample 1x1 s2", 14, 1024, 2048, 1, 2, 0, 1},
    {"layer4 1x1 2048->512", 7, 2048, 512, 1, 1, 0, 1},
    {"layer4 3x3", 7, 512, 512, 3, 1, 1, 1},
    {"grouped 3x3 g4", 28, 128, 128, 3, 1, 1, 4},
    {"odd channels 3x3", 14, 33, 17, 3, 1, 1, 1},
};

struct Choice {
  const char* name;
  bool search, graph;
};
const Choice kChoices[] = {
    {"heuristic", false, false}, {"search", true, false}, {"graph", false, true}, {"graph-search", true, true}};
constexpr int kChoiceCount = 4;

const char* const kDirections[] = {"conv2d_forward", "conv2d_backward_data", "conv2d_backward_filter"};

struct Options {
  bool cpu = false;
  int64_t batch = 32;
  int64_t image_divisor = 1;  // the CPU's dry run: images a seventh the size
  int runs = 5;
  std::vector<st::Precision> precisions;
};

// Seeded values in [-1, 1), rounded to the precision's 16-bit format.
st::Tensor random_input(const st::Shape& shape, uint64_t seed, st::Precision precision) {
  return st::gpu_test::seeded_values(shape, seed, -1.0, 1.0, precision);
}

// One shape's operands on the CPU and on the device, the CPU op's three results (y, dx, dw) with
// their largest magnitudes, and a host buffer per result for the device's (reused: hundreds of
// megabytes a shape at batch 32, too many to allocate afresh for every choice).
struct Problem {
  ops::Conv2dParams params;
  st::Tensor x, w, dy;              // CPU
  st::Tensor dev_x, dev_w, dev_dy;  // device
  st::Tensor want[3];               // the CPU op's y, dx, dw
  double largest[3] = {0, 0, 0};
  st::Tensor got[3];             // host copies of the device's results
  int64_t terms[3] = {0, 0, 0};  // the sums' terms per output element: y, dx, dw
};

double largest_magnitude(const st::Tensor& t) {
  double largest = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i)
    largest = std::max(largest, std::fabs(static_cast<double>(t.data<float>()[i])));
  return largest;
}

Problem make_problem(st::Context& cpu, st::Context& dev, const Shape& s, const Options& o, uint64_t seed) {
  const int64_t h = std::max<int64_t>(1, s.h / o.image_divisor);
  Problem p;
  p.params = ops::Conv2dParams(static_cast<int>(s.stride), static_cast<int>(s.padding), static_cast<int>(s.groups));
  p.x = random_input({o.batch, h, h, s.c}, seed, cpu.precision());
  p.w = random_input({s.o, s.c / s.groups, s.k, s.k}, seed + 1, cpu.precision());
  const st::Shape ys = ops::conv2d_output_shape(p.params, p.x.shape(), p.w.shape());
  p.dy = random_input(ys, seed + 2, cpu.precision());
  const st::Shape shapes[3] = {ys, p.x.shape(), p.w.shape()};
  for (int d = 0; d < 3; ++d) {
    p.want[d] = st::Tensor::empty(shapes[d], st::DType::f32);
    p.got[d] = st::Tensor::empty(shapes[d], st::DType::f32);
  }
  st::Tensor no_bias;
  ops::conv2d_forward(cpu, p.params, p.x, p.w, no_bias, p.want[0]);
  ops::conv2d_backward_data(cpu, p.params, p.dy, p.w, p.want[1]);
  ops::conv2d_backward_filter(cpu, p.params, p.x, p.dy, p.want[2], no_bias);
  for (int d = 0; d < 3; ++d) p.largest[d] = largest_magnitude(p.want[d]);
  p.dev_x = p.x.to(dev.device()), p.dev_w = p.w.to(dev.device()), p.dev_dy = p.dy.to(dev.device());
  p.terms[0] = s.c / s.groups * s.k * s.k;
  p.terms[1] = s.o / s.groups * s.k * s.k;
  p.terms[2] = o.batch * ys[1] * ys[2];
  return p;
}

// Direction `d` once on the device into `result`.
void run_direction(st::Context& dev, const Problem& p, int d, st::Tensor& result) {
  st::Tensor no_bias;
  if (d == 0) ops::conv2d_forward(dev, p.params, p.dev_x, p.dev_w, no_bias, result);
  if (d == 1) ops::conv2d_backward_data(dev, p.params, p.dev_dy, p.dev_w, result);
  if (d == 2) ops::conv2d_backward_filter(dev, p.params, p.dev_x, p.dev_dy, result, no_bias);
}

// A device result of direction `d` filled with NaN, so that an element the op leaves unwritten
// fails (the caching allocator may hand out the memory of the last choice's result).
st::Tensor nan_result(st::Context& dev, const Problem& p, int d) {
  st::Tensor result = st::Tensor::empty(p.want[d].shape(), st::DType::f32, dev.device());
  result.fill(std::nanf(""));
  return result;
}

// The median time of `runs` runs of direction `d` in ms.
double median_ms(st::Context& dev, const Problem& p, int d, int runs, st::Tensor& result) {
  return st::gpu_test::median_ms(dev, runs, [&] { run_direction(dev, p, d, result); });
}

// The device's result of direction `d` against the CPU op's: the op cases' backend tolerance for a
// sum of `terms` (twice fp32_sum: {5e-7 + 2e-7 * terms, 1e-5}), under AMP widened by
// kAmpBackendUnits units of the format at the CPU result's largest magnitude, as compare_backends
// widens it. One pass over float arrays (the op cases' double copies would take most of the run at
// these sizes); NaN never passes. Empty when it passes, else the worst element.
std::string compare_with_cpu(Problem& p, int d, const st::Tensor& result, st::Precision precision) {
  p.got[d].copy_from(result);
  const double abs = 2 * (5e-7 + 2e-7 * static_cast<double>(p.terms[d])) +
                     st::test::kAmpBackendUnits * st::test::amp_unit_of(precision) * p.largest[d];
  const double rel = 2e-5;
  const float* got = p.got[d].data<float>();
  const float* want = p.want[d].data<float>();
  double worst = 0.0;
  int64_t worst_at = -1;
  for (int64_t i = 0; i < p.want[d].numel(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double ratio = diff / (abs + rel * std::fabs(static_cast<double>(want[i])));
    if (std::isnan(ratio)) {  // NaN: unwritten, or computed from garbage
      worst = INFINITY, worst_at = i;
      break;
    }
    if (ratio > worst) worst = ratio, worst_at = i;
  }
  if (worst <= 1.0) return "";
  char text[200];
  std::snprintf(text, sizeof text, "element %lld: %.9g against the CPU's %.9g (tolerance abs %.3g rel %.3g)",
                static_cast<long long>(worst_at), static_cast<double>(got[worst_at]),
                static_cast<double>(want[worst_at]), abs, rel);
  return text;
}

// What the newest plan of direction `d` since `before` runs: "algo 1 f16" or "engine 12 f16",
// and its chosen_by; "cpu" on a CPU (no plans).
struct Ran {
  std::string what = "cpu", chosen_by;
};
Ran what_ran(std::size_t before, int d) {
  const std::vector<ops::ConvAlgorithmRecord> records = ops::conv_algorithm_records();
  Ran ran;
  for (std::size_t i = before; i < records.size(); ++i)
    if (records[i].direction == kDirections[d]) {
      const ops::ConvAlgorithmRecord& r = records[i];
      ran.what =
          (r.engine >= 0 ? "engine " + std::to_string(r.engine) : "algo " + std::to_string(r.algo)) + " " + r.data;
      ran.chosen_by = r.chosen_by;
    }
  return ran;
}

struct Totals {
  double ms[kChoiceCount] = {0, 0, 0, 0};
  int graph_ran = 0, graph_plans = 0;
};

void run_shape(st::Context& cpu, st::Context& dev, const Shape& s, const Options& o, uint64_t seed,
               std::map<std::string, Totals>& totals) {
  const st::Precision precision = cpu.precision();
  Problem p = make_problem(cpu, dev, s, o, seed);
  for (int d = 0; d < 3; ++d) {
    std::string line, notes;
    Totals& total = totals[std::string(st::precision_name(precision)) + " " + kDirections[d]];
    bool ok = true;
    for (int c = 0; c < kChoiceCount; ++c) {
      const Choice& choice = kChoices[c];
      dev.set_conv_search(choice.search);
      dev.set_conv_graph(choice.graph);
      const std::size_t before = ops::conv_algorithm_records().size();
      st::Tensor result = nan_result(dev, p, d);
      run_direction(dev, p, d, result);  // the warm-up: the plan, any search
      dev.synchronize();
      const Ran ran = what_ran(before, d);
      const std::string differs = compare_with_cpu(p, d, result, precision);
      if (!differs.empty()) {
        ok = false;
        notes += std::string("\n    ") + choice.name + " differs from the CPU: " + differs;
      }
      const double ms = median_ms(dev, p, d, o.runs, result);
      total.ms[c] += ms;
      if (choice.graph && dev.device() == st::Device::cuda) {
        ++total.graph_plans;
        if (ran.chosen_by.rfind("graph", 0) == 0) ++total.graph_ran;
      }
      char cell[96];
      std::snprintf(cell, sizeof cell, " | %s %.3f ms (%s)", choice.name, ms, ran.what.c_str());
      line += cell;
      if (!ran.chosen_by.empty() && ran.chosen_by != choice.name)
        notes += std::string("\n    ") + choice.name + ": chosen_by " + ran.chosen_by;
    }
    char head[160];
    std::snprintf(head, sizeof head, "%s %s N%lld %lldx%lld C%lld->O%lld | %s | %s", ok ? "ok  " : "FAIL", s.name,
                  static_cast<long long>(o.batch), static_cast<long long>(p.x.dim(1)),
                  static_cast<long long>(p.x.dim(2)), static_cast<long long>(s.c), static_cast<long long>(s.o),
                  st::precision_name(precision), kDirections[d]);
    std::printf("%s%s%s\n", head, line.c_str(), notes.c_str());
    if (!ok) ++st::gpu_test::failures();  // the line above says FAIL and why
  }
  dev.set_conv_search(false);
  dev.set_conv_graph(false);
}

void print_totals(const std::map<std::string, Totals>& totals) {
  std::printf("\nsums of the medians per precision and direction (ms):\n");
  for (const auto& [key, t] : totals) {
    std::printf("  %-36s", key.c_str());
    for (int c = 0; c < kChoiceCount; ++c) std::printf(" | %s %9.3f", kChoices[c].name, t.ms[c]);
    if (t.graph_plans > 0) std::printf(" | graph API ran %d of %d plans", t.graph_ran, t.graph_plans);
    std::printf("\n");
  }
}

void run_all(st::Context& dev, const Options& o, int compute_major) {
  st::Context cpu(st::Device::cpu);
  std::map<std::string, Totals> totals;
  const auto start = std::chrono::steady_clock::now();
  uint64_t seed = 1000;
  for (st::Precision precision : o.precisions) {
    if (precision == st::Precision::amp_bf16 && compute_major > 0 && compute_major < 8) {
      std::printf("skip amp-bf16: below compute capability 8.0\n");
      continue;
    }
    cpu.set_precision(precision);
    dev.set_precision(precision);
    for (const Shape& s : kShapes) run_shape(cpu, dev, s, o, seed += 10, totals);
  }
  dev.set_precision(st::Precision::fp32);
  print_totals(totals);
  std::printf("%.1f s in all\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--device" && has_value && std::string(argv[i + 1]) == "cpu") {
      o.cpu = true;
      ++i;
    } else if (arg == "--precision" && has_value) {
      const std::string name = argv[++i];
      bool known = false;
      for (st::Precision p : {st::Precision::fp32, st::Precision::amp_fp16, st::Precision::amp_bf16})
        if (name == st::precision_name(p)) o.precisions.push_back(p), known = true;
      if (!known) return false;
    } else if (arg == "--batch" && has_value) {
      o.batch = std::atoll(argv[++i]);
      if (o.batch < 1) return false;
    } else if (arg == "--runs" && has_value) {
      o.runs = std::atoi(argv[++i]);
      if (o.runs < 1) return false;
    } else {
      return false;
    }
  }
  if (o.precisions.empty()) o.precisions = {st::Precision::fp32, st::Precision::amp_fp16, st::Precision::amp_bf16};
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s [--device cpu] [--precision fp32|amp-fp16|amp-bf16]... [--batch N] [--runs N]\n",
                 argv[0]);
    return 2;
  }
  // The dry run: every comparison and the table with a CPU Context in the GPU's place, small.
  if (o.cpu) o.batch = std::min<int64_t>(o.batch, 2), o.image_divisor = 7, o.runs = 1;
  return st::gpu_test::run_dry_or_on_gpu(o.cpu, "conv engines", "against the CPU, batch " + std::to_string(o.batch),
                                         [&](st::Context& dev, int compute_major) { run_all(dev, o, compute_major); });
}
