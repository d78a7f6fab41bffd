// Whether cuDNN's runtime fusion of a convolution with the batch norms around it pays (issue 26,
// section 3; ops::conv2d_bn_stats_forward, cuDNN's "ConvBNfprop" graph): ResNet-50's convolution
// shapes at batch 32 (or --batch), 16-bit activations, each two ways on the GPU:
//   apart: what a ResNet-50 step runs today, the batch norm before the convolution with its ReLU
//          (batch_norm_relu_forward_training: cuDNN's persistent kernels, statistics and output)
//          and then the convolution (conv2d_forward);
//   fused: conv2d_bn_stats_forward from the same batch norm's scale and bias: the prologue folded
//          into the convolution's loads, and the next batch norm's sums as it stores y. (The
//          batch norm's finalize, a few thousand channels' arithmetic, is left out of both.)
// The convolutions that read a block's input (its first 1x1, the downsample, the stem) have no
// batch norm before them: there "apart" is the convolution alone, and "fused" adds the sums.
//
// Checked: the fused op's y, sum and sqsum against the CPU's op on the same inputs (its AMP
// tolerance: the fp32 sum's plus 2 units of the format at the output's largest magnitude), and
// y against the apart path's y on the GPU (8 units: two roads to one value). A shape cuDNN's fused
// engines refuse runs the steps apart inside the op and is reported, not failed.
//
// One line per shape and precision: median GPU times (CUDA events, 5 runs after a warm-up that
// builds the plans), what ran (the fused engine, its notes, how long its plan took to build, or
// why it ran apart). Then the sums per precision: fused against apart.
//
//   scaletrain_gpu_conv_bn_fusion [--device cpu] [--precision P]... [--batch N] [--runs N]
//                                 [--budget SECONDS]
//     --device cpu  a CPU Context in the GPU's place (batch 2, images a seventh the size, 1 run):
//                   the comparisons and the table checked on every machine (unit.conv_bn_fusion_harness).
//     --precision   amp-fp16, amp-bf16 (repeatable; default amp-fp16; amp-bf16 skipped below 8.0).
//     --budget      no new shape is started after this many seconds (default 90): runtime-compiled
//                   engines take seconds per plan, and the GPU check's time is fixed.
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
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"
#include "support/op_cases.hpp"

namespace st = scaletrain;
namespace ops = st::ops;

namespace {

struct Shape {
  const char* name;
  int64_t h, c, o, k, stride, padding;
  bool prologue;  // a batch norm and ReLU before it (the block's 3x3 and its expanding 1x1)
};

// ResNet-50 v1.5's convolution shapes (tests/gpu/test_conv_engines.cpp's, less the grouped and
// odd ones), the ones after a batch norm and ReLU first: they are what the fusion is for.
const Shape kShapes[] = {
    {"layer1 3x3", 56, 64, 64, 3, 1, 1, true},
    {"layer1 1x1 expand", 56, 64, 256, 1, 1, 0, true},
    {"layer2 3x3 s2", 56, 128, 128, 3, 2, 1, true},
    {"layer2 1x1 expand", 28, 128, 512, 1, 1, 0, true},
    {"layer2 3x3", 28, 128, 128, 3, 1, 1, true},
    {"layer3 3x3 s2", 28, 256, 256, 3, 2, 1, true},
    {"layer3 1x1 expand", 14, 256, 1024, 1, 1, 0, true},
    {"layer3 3x3", 14, 256, 256, 3, 1, 1, true},
    {"layer4 3x3 s2", 14, 512, 512, 3, 2, 1, true},
    {"layer4 1x1 expand", 7, 512, 2048, 1, 1, 0, true},
    {"layer4 3x3", 7, 512, 512, 3, 1, 1, true},
    {"layer1 1x1 reduce", 56, 64, 64, 1, 1, 0, false},
    {"layer1 1x1 256->64", 56, 256, 64, 1, 1, 0, false},
    {"layer2 1x1 512->128", 28, 512, 128, 1, 1, 0, false},
    {"layer3 1x1 1024->256", 14, 1024, 256, 1, 1, 0, false},
    {"layer4 1x1 2048->512", 7, 2048, 512, 1, 1, 0, false},
    {"layer2 downsample 1x1 s2", 56, 256, 512, 1, 2, 0, false},
    {"stem 7x7 s2", 224, 3, 64, 7, 2, 3, false},
};

struct Options {
  bool cpu = false;
  int64_t batch = 32;
  int64_t image_divisor = 1;
  int runs = 5;
  double budget_s = 90.0;
  std::vector<st::Precision> precisions;
};

st::Tensor random_f32(const st::Shape& shape, uint64_t seed, double lo, double hi, st::Precision precision) {
  return st::gpu_test::seeded_values(shape, seed, lo, hi, precision);
}

// An activation as the model holds it: in the context's activation dtype (16-bit under AMP).
st::Tensor activation_on(st::Context& ctx, const st::Tensor& host) {
  st::Tensor f32 = host.to(ctx.device());
  if (ctx.activation_dtype() == st::DType::f32) return f32;
  st::Tensor t = st::Tensor::empty(host.shape(), ctx.activation_dtype(), ctx.device());
  ops::cast_to_half(ctx, f32, t);
  return t;
}

st::Tensor activation_like(st::Context& ctx, const st::Shape& shape) {
  return st::Tensor::empty(shape, ctx.activation_dtype(), ctx.device());
}

// A device tensor's values on the host, as f32.
st::Tensor host_f32(st::Context& ctx, const st::Tensor& t) {
  if (t.dtype() == st::DType::f32) return t.to(st::Device::cpu);
  st::Tensor wide = st::Tensor::empty(t.shape(), st::DType::f32, t.device());
  ops::cast_from_half(ctx, t, wide);
  return wide.to(st::Device::cpu);
}

// One shape's operands on a context: the batch norm's input x (the previous convolution's
// output), its parameters and running statistics, the filter; and the outputs.
struct Operands {
  st::Tensor x, gamma, beta, running_mean, running_var, w;
  st::Tensor a, saved_mean, saved_inv_std, reserve, scale, bias;  // the batch norm's
  st::Tensor y_apart, y, sum, sqsum;
};

struct Host {
  st::Tensor x, gamma, beta, w;
};

Operands operands_on(st::Context& ctx, const Host& h, const st::Shape& ys) {
  Operands o;
  const int64_t c = h.x.dim(3);
  o.x = activation_on(ctx, h.x);
  o.gamma = h.gamma.to(ctx.device()), o.beta = h.beta.to(ctx.device()), o.w = h.w.to(ctx.device());
  o.running_mean = st::Tensor::zeros({c}, st::DType::f32, ctx.device());
  o.running_var = st::Tensor::empty({c}, st::DType::f32, ctx.device());
  o.running_var.fill(1.0f);
  o.a = activation_like(ctx, h.x.shape());
  o.saved_mean = st::Tensor::empty({c}, st::DType::f32, ctx.device());
  o.saved_inv_std = st::Tensor::empty({c}, st::DType::f32, ctx.device());
  o.y_apart = activation_like(ctx, ys), o.y = activation_like(ctx, ys);
  o.sum = st::Tensor::empty({h.w.dim(0)}, st::DType::f32, ctx.device());
  o.sqsum = st::Tensor::empty({h.w.dim(0)}, st::DType::f32, ctx.device());
  return o;
}

// The batch norm's scale and bias from its saved statistics, on the host (the finalize):
// scale = gamma * inv_std, bias = beta - mean * scale.
void fold_batch_norm(st::Context& ctx, Operands& o) {
  const st::Tensor mean = o.saved_mean.to(st::Device::cpu), inv_std = o.saved_inv_std.to(st::Device::cpu);
  const st::Tensor gamma = o.gamma.to(st::Device::cpu), beta = o.beta.to(st::Device::cpu);
  st::Tensor scale = st::Tensor::empty(gamma.shape(), st::DType::f32), bias = scale.clone();
  for (int64_t j = 0; j < gamma.numel(); ++j) {
    scale.data<float>()[j] = gamma.data<float>()[j] * inv_std.data<float>()[j];
    bias.data<float>()[j] = beta.data<float>()[j] - mean.data<float>()[j] * scale.data<float>()[j];
  }
  o.scale = scale.to(ctx.device()), o.bias = bias.to(ctx.device());
}

void run_apart(st::Context& ctx, const ops::Conv2dParams& p, const Shape& s, Operands& o) {
  if (s.prologue) {
    ops::batch_norm_relu_forward_training(ctx, ops::BatchNormParams{}, o.x, o.gamma, o.beta, o.running_mean,
                                          o.running_var, o.a, o.saved_mean, o.saved_inv_std, o.reserve);
    ops::conv2d_forward(ctx, p, o.a, o.w, st::Tensor(), o.y_apart);
  } else {
    ops::conv2d_forward(ctx, p, o.x, o.w, st::Tensor(), o.y_apart);
  }
}

void run_fused(st::Context& ctx, const ops::Conv2dParams& p, Operands& o) {
  ops::conv2d_bn_stats_forward(ctx, p, o.x, o.scale, o.bias, o.w, o.y, o.sum, o.sqsum);
}

// got against want: within `units` of the format at want's largest magnitude plus fp32's
// tolerance for a sum of `terms`. Empty when it passes, else the worst element.
std::string compare(const st::Tensor& got, const st::Tensor& want, int64_t terms, double units, double unit) {
  double largest = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::fabs(double(want.data<float>()[i])));
  const double abs = 2 * (5e-7 + 2e-7 * static_cast<double>(terms)) + units * unit * largest, rel = 2e-5;
  double worst = 0.0;
  int64_t at = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    const double ratio = std::fabs(g - w) / (abs + rel * std::fabs(w));
    if (std::isnan(ratio)) return "element " + std::to_string(i) + " is NaN";
    if (ratio > worst) worst = ratio, at = i;
  }
  if (worst <= 1.0) return "";
  char text[200];
  std::snprintf(text, sizeof text, "element %lld: %.9g against %.9g (tolerance abs %.3g rel %.3g)",
                static_cast<long long>(at), double(got.data<float>()[at]), double(want.data<float>()[at]), abs, rel);
  return text;
}

// What the fused op ran for the newest record since `before`: the engine, or why it ran apart.
std::string what_fused_ran(std::size_t before) {
  const std::vector<ops::ConvAlgorithmRecord> records = ops::conv_algorithm_records();
  for (std::size_t i = records.size(); i > before; --i) {
    const ops::ConvAlgorithmRecord& r = records[i - 1];
    if (r.direction != "conv2d_bn_stats_forward") continue;
    if (r.engine < 0) return r.chosen_by;
    return "engine " + std::to_string(r.engine) + " [" + r.engine_notes + "] " + r.chosen_by;
  }
  return "cpu";
}

struct Totals {
  double apart_ms = 0, fused_ms = 0;
  int shapes = 0, fused_engines = 0;
};

void run_shape(st::Context& cpu, st::Context& dev, const Shape& s, const Options& o, uint64_t seed, Totals& total) {
  const st::Precision precision = dev.precision();
  const int64_t h = std::max<int64_t>(s.k, s.h / o.image_divisor);
  const ops::Conv2dParams p(static_cast<int>(s.stride), static_cast<int>(s.padding));
  Host host;
  host.x = random_f32({o.batch, h, h, s.c}, seed, -1.0, 1.0, precision);
  host.gamma = random_f32({s.c}, seed + 1, 0.5, 1.5, st::Precision::fp32);
  host.beta = random_f32({s.c}, seed + 2, -0.5, 0.5, st::Precision::fp32);
  host.w = random_f32({s.o, s.c, s.k, s.k}, seed + 3, -1.0, 1.0, precision);
  const st::Shape ys = ops::conv2d_output_shape(p, host.x.shape(), host.w.shape());

  Operands d = operands_on(dev, host, ys);
  run_apart(dev, p, s, d);  // warm-up: the plans, and the batch norm's statistics for the fold
  if (s.prologue) fold_batch_norm(dev, d);
  const std::size_t before = ops::conv_algorithm_records().size();
  run_fused(dev, p, d);  // warm-up: the fused plan is built here
  dev.synchronize();
  const std::string ran = what_fused_ran(before);

  // The CPU's op on the same inputs, scale and bias.
  Operands c = operands_on(cpu, host, ys);
  c.scale = d.scale.defined() ? d.scale.to(st::Device::cpu) : st::Tensor();
  c.bias = d.bias.defined() ? d.bias.to(st::Device::cpu) : st::Tensor();
  run_fused(cpu, p, c);
  const double unit = st::test::amp_unit_of(precision);
  const int64_t terms = s.c * s.k * s.k, rows = ys[0] * ys[1] * ys[2];
  std::string problems;
  const st::Tensor y = host_f32(dev, d.y), sum = d.sum.to(st::Device::cpu), sqsum = d.sqsum.to(st::Device::cpu);
  for (const auto& [name, got, want, n] :
       {std::tuple<const char*, st::Tensor, st::Tensor, int64_t>{"y", y, host_f32(cpu, c.y), terms},
        {"sum", sum, c.sum, terms * rows},
        {"sqsum", sqsum, c.sqsum, terms * rows},
        {"y against the apart path", y, host_f32(dev, d.y_apart), terms}}) {
    const double units = std::string(name).find("apart") != std::string::npos ? 8.0 : st::test::kAmpBackendUnits;
    const std::string differs = compare(got, want, n, units, unit);
    if (!differs.empty()) problems += std::string("\n    ") + name + " differs: " + differs;
  }

  const double apart_ms = st::gpu_test::median_ms(dev, o.runs, [&] { run_apart(dev, p, s, d); });
  const double fused_ms = st::gpu_test::median_ms(dev, o.runs, [&] { run_fused(dev, p, d); });
  total.apart_ms += apart_ms, total.fused_ms += fused_ms, ++total.shapes;
  if (ran.rfind("engine", 0) == 0) ++total.fused_engines;
  std::printf("%s %s N%lld %lldx%lld C%lld->O%lld %s | %s %.3f ms | fused %.3f ms (%.2fx) | %s%s\n",
              problems.empty() ? "ok  " : "FAIL", s.name, static_cast<long long>(o.batch), static_cast<long long>(h),
              static_cast<long long>(h), static_cast<long long>(s.c), static_cast<long long>(s.o),
              st::precision_name(precision), s.prologue ? "bn-relu + conv" : "conv", apart_ms, fused_ms,
              fused_ms > 0 ? apart_ms / fused_ms : 0.0, ran.c_str(), problems.c_str());
  std::fflush(stdout);
  if (!problems.empty()) ++st::gpu_test::failures();
}

void run_all(st::Context& dev, const Options& o, int compute_major) {
  st::Context cpu(st::Device::cpu);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::map<std::string, Totals> totals;
  uint64_t seed = 2000;
  int skipped = 0;
  for (st::Precision precision : o.precisions) {
    if (precision == st::Precision::amp_bf16 && compute_major > 0 && compute_major < 8) {
      std::printf("skip amp-bf16: below compute capability 8.0\n");
      continue;
    }
    cpu.set_precision(precision);
    dev.set_precision(precision);
    for (const Shape& s : kShapes) {
      if (elapsed() > o.budget_s) {
        ++skipped;
        continue;
      }
      run_shape(cpu, dev, s, o, seed += 10, totals[st::precision_name(precision)]);
    }
  }
  dev.set_precision(st::Precision::fp32);
  if (skipped > 0) std::printf("not run: %d shape(s), the budget of %.0f s was spent\n", skipped, o.budget_s);
  std::printf("\nsums of the medians (ms):\n");
  for (const auto& [precision, t] : totals)
    std::printf("  %-9s apart %9.3f | fused %9.3f | %.2fx | a fused engine ran %d of %d shapes\n", precision.c_str(),
                t.apart_ms, t.fused_ms, t.fused_ms > 0 ? t.apart_ms / t.fused_ms : 0.0, t.fused_engines, t.shapes);
  std::printf("%.1f s in all\n", elapsed());
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
      if (name == "amp-fp16") {
        o.precisions.push_back(st::Precision::amp_fp16);
      } else if (name == "amp-bf16") {
        o.precisions.push_back(st::Precision::amp_bf16);
      } else {
        return false;
      }
    } else if (arg == "--batch" && has_value) {
      o.batch = std::atoll(argv[++i]);
      if (o.batch < 1) return false;
    } else if (arg == "--runs" && has_value) {
      o.runs = std::atoi(argv[++i]);
      if (o.runs < 1) return false;
    } else if (arg == "--budget" && has_value) {
      o.budget_s = std::atof(argv[++i]);
      if (!(o.budget_s > 0)) return false;
    } else {
      return false;
    }
  }
  if (o.precisions.empty()) o.precisions = {st::Precision::amp_fp16};
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s [--device cpu] [--precision amp-fp16|amp-bf16]... [--batch N] [--runs N] [--budget S]\n",
                 argv[0]);
    return 2;
  }
  if (o.cpu) o.batch = std::min<int64_t>(o.batch, 2), o.image_divisor = 7, o.runs = 1;
  return st::gpu_test::run_dry_or_on_gpu(o.cpu, "conv + batch norm fusion",
                                         "against the CPU, batch " + std::to_string(o.batch),
                                         [&](st::Context& dev, int compute_major) { run_all(dev, o, compute_major); });
}
