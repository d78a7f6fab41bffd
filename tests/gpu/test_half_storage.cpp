// 16-bit storage on a device (issue 26, section 2): the kernels that read and write f16 and bf16
// tensors themselves (with_half_storage: ReLU, add, the convolutions, batch norm) against the
// same ops on fp32 tensors holding the same 16-bit values, rounded by the dispatch (the path the
// AMP op cases check against the CPU), on the same device:
//   - ReLU, add (also with mixed f32 and 16-bit operands), the three convolutions (bias and its
//     gradient included, a 1x1 and a 3x3 shape), linear and batched_matmul: bit for bit (the same cuDNN plan reads the
//     same 16-bit operands; the bias is added in float and rounded once either way);
//   - batch norm forward (training and inference) and backward, 16-bit and mixed: on a GPU within
//     2 units of the format at the output's largest magnitude, the fp32 statistics and parameter
//     gradients within 1e-5 relative (cuDNN's 16-bit kernels may sum in another order); on the
//     CPU bit for bit.
//   - batch norm + add + ReLU fused (--fuse bn-add-relu) against the three ops: in fp32 bit for
//     bit, in 16 bits within 2 units; cuDNN's fused kernel must run in fp16 on a GPU.
// amp-bf16 is skipped below compute capability 8.0 (V100 refuses it). `--device cpu` runs it on
// the CPU, where the dispatch widens every 16-bit tensor: unit.half_storage_harness, so that the
// comparisons themselves are checked without a GPU. Exit codes: 0 passed, 1 failed, 77 skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/batched_matmul.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/linear.hpp"

namespace st = scaletrain;
namespace ops = st::ops;
using st::gpu_test::check;

namespace {

struct Format {
  st::Precision precision;
  st::DType dtype;
  st::HalfFormat half;
  const char* name;
  double unit;  // the format's unit in the last place at 1
};
const Format kFormats[] = {{st::Precision::amp_fp16, st::DType::f16, st::HalfFormat::fp16, "amp-fp16", 1.0 / 1024},
                           {st::Precision::amp_bf16, st::DType::bf16, st::HalfFormat::bf16, "amp-bf16", 1.0 / 128}};

// A pair of device tensors holding the same 16-bit values: `wide` in f32, `half` in the format.
struct Pair {
  st::Tensor wide, half;
};

Pair random_pair(st::Context& ctx, const Format& f, const st::Shape& shape, uint64_t seed, double scale = 2.0) {
  st::Rng rng(seed);
  st::Tensor host = st::Tensor::empty(shape, st::DType::f32);
  for (int64_t i = 0; i < host.numel(); ++i)
    host.data<float>()[i] = static_cast<float>(scale * (2 * rng.uniform() - 1));
  st::round_in_place(f.half, host.data<float>(), host.numel());
  Pair p{host.to(ctx.device()), st::Tensor::empty(shape, f.dtype, ctx.device())};
  ops::cast_to_half(ctx, p.wide, p.half);
  return p;
}

st::Tensor f32_on(st::Context& ctx, const st::Shape& shape) {
  return st::Tensor::empty(shape, st::DType::f32, ctx.device());
}
st::Tensor half_on(st::Context& ctx, const Format& f, const st::Shape& shape) {
  return st::Tensor::empty(shape, f.dtype, ctx.device());
}

// `got` (16-bit or f32) against `want` (f32): bit for bit where units is 0, else within units of
// the format at want's largest magnitude (rel: relative per element instead, for fp32 results).
void compare(st::Context& ctx, const Format& f, const st::Tensor& got, const st::Tensor& want, const std::string& what,
             double units = 0.0, double rel = 0.0) {
  const st::Tensor a = ops::as_f32(ctx, got).to(st::Device::cpu);
  const st::Tensor b = ops::as_f32(ctx, want).to(st::Device::cpu);
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  double largest = 0.0, worst = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) largest = std::max(largest, std::fabs(static_cast<double>(y[i])));
  bool ok = a.numel() == b.numel();
  int64_t worst_at = -1;
  for (int64_t i = 0; ok && i < b.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
    const double allowed = units == 0.0 && rel == 0.0 ? 0.0 : units * f.unit * largest + rel * std::fabs(y[i]);
    const bool same_bits = std::memcmp(&x[i], &y[i], sizeof(float)) == 0;
    if (!(same_bits || d <= allowed)) ok = false;
    if (d > worst) worst = d, worst_at = i;
  }
  char detail[160];
  std::snprintf(detail, sizeof detail, " (largest difference %.3g at %lld, largest value %.3g)", worst,
                static_cast<long long>(worst_at), largest);
  check(ok, std::string(f.name) + ": " + what + (units == 0.0 && rel == 0.0 ? ", bit for bit" : ", within tolerance") +
                detail);
}

// Batch norm's per-channel tensors of C on ctx's device: running mean 0 and variance 1, the
// saved statistics and the parameter gradients to be written.
void channel_tensors(st::Context& ctx, int64_t c, st::Tensor& rm, st::Tensor& rv, st::Tensor& sm, st::Tensor& si,
                     st::Tensor& dg, st::Tensor& db) {
  rm = st::Tensor::zeros({c}, st::DType::f32).to(ctx.device());
  rv = f32_on(ctx, {c});
  rv.fill(1.0f);
  sm = f32_on(ctx, {c});
  si = f32_on(ctx, {c});
  dg = f32_on(ctx, {c});
  db = f32_on(ctx, {c});
}

void check_elementwise(st::Context& ctx, const Format& f) {
  const st::Shape s{4, 5, 6, 7};
  Pair x = random_pair(ctx, f, s, 1), y = random_pair(ctx, f, s, 2), dy = random_pair(ctx, f, s, 3);
  st::Tensor w32 = f32_on(ctx, s), h16 = half_on(ctx, f, s);
  ops::relu_forward(ctx, x.wide, w32);
  ops::relu_forward(ctx, x.half, h16);
  compare(ctx, f, h16, w32, "relu_forward");
  ops::relu_backward(ctx, y.wide, dy.wide, w32);
  ops::relu_backward(ctx, y.half, dy.half, h16);
  compare(ctx, f, h16, w32, "relu_backward");
  ops::add_forward(ctx, x.wide, y.wide, w32);
  ops::add_forward(ctx, x.half, y.half, h16);
  compare(ctx, f, h16, w32, "add_forward");
  ops::add_forward(ctx, x.wide, y.half, h16);  // mixed: an f32 operand beside a 16-bit one
  compare(ctx, f, h16, w32, "add_forward, f32 + 16-bit operands");
  ops::add_inplace(ctx, y.wide, x.wide);
  ops::add_inplace(ctx, y.half, x.half);
  compare(ctx, f, y.half, y.wide, "add_inplace");
}

void check_convolution(st::Context& ctx, const Format& f, int c, int o, int k, uint64_t seed) {
  const std::string shape =
      std::to_string(k) + "x" + std::to_string(k) + " C" + std::to_string(c) + "->O" + std::to_string(o);
  const ops::Conv2dParams p(1, k / 2);
  Pair x = random_pair(ctx, f, {2, 6, 6, c}, seed), w = random_pair(ctx, f, {o, c, k, k}, seed + 1, 0.5);
  Pair b = random_pair(ctx, f, {o}, seed + 2);
  const st::Shape ys = ops::conv2d_output_shape(p, x.wide.shape(), w.wide.shape());
  st::Tensor y32 = f32_on(ctx, ys), y16 = half_on(ctx, f, ys);
  ops::conv2d_forward(ctx, p, x.wide, w.wide, b.wide, y32);
  ops::conv2d_forward(ctx, p, x.half, w.wide, b.wide, y16);
  compare(ctx, f, y16, y32, "conv2d_forward " + shape + " with bias");
  Pair dy = random_pair(ctx, f, ys, seed + 3);
  st::Tensor dx32 = f32_on(ctx, x.wide.shape()), dx16 = half_on(ctx, f, x.wide.shape());
  ops::conv2d_backward_data(ctx, p, dy.wide, w.wide, dx32);
  ops::conv2d_backward_data(ctx, p, dy.half, w.wide, dx16);
  compare(ctx, f, dx16, dx32, "conv2d_backward_data " + shape);
  st::Tensor dw1 = f32_on(ctx, w.wide.shape()), dw2 = f32_on(ctx, w.wide.shape());
  st::Tensor db1 = f32_on(ctx, {o}), db2 = f32_on(ctx, {o});
  ops::conv2d_backward_filter(ctx, p, x.wide, dy.wide, dw1, db1);
  ops::conv2d_backward_filter(ctx, p, x.half, dy.half, dw2, db2);
  compare(ctx, f, dw2, dw1, "conv2d_backward_filter " + shape + " dw");
  compare(ctx, f, db2, db1, "conv2d_backward_filter " + shape + " db");
}

// The GEMMs: linear (forward with bias, backward with dx, dw and db) and batched_matmul, whose
// 16-bit operands go to cuBLAS as they are and whose 16-bit results are rounded from fp32 once.
void check_products(st::Context& ctx, const Format& f) {
  Pair x = random_pair(ctx, f, {6, 24}, 70), w = random_pair(ctx, f, {16, 24}, 71, 0.5),
       b = random_pair(ctx, f, {16}, 72);
  Pair dy = random_pair(ctx, f, {6, 16}, 73);
  st::Tensor y32 = f32_on(ctx, {6, 16}), y16 = half_on(ctx, f, {6, 16});
  ops::linear_forward(ctx, x.wide, w.wide, b.wide, y32);
  ops::linear_forward(ctx, x.half, w.wide, b.wide, y16);
  compare(ctx, f, y16, y32, "linear_forward");
  st::Tensor dx32 = f32_on(ctx, {6, 24}), dx16 = half_on(ctx, f, {6, 24});
  st::Tensor dw1 = f32_on(ctx, {16, 24}), dw2 = f32_on(ctx, {16, 24}), db1 = f32_on(ctx, {16}), db2 = f32_on(ctx, {16});
  ops::linear_backward(ctx, x.wide, w.wide, dy.wide, dx32, dw1, db1);
  ops::linear_backward(ctx, x.half, w.wide, dy.half, dx16, dw2, db2);
  compare(ctx, f, dx16, dx32, "linear_backward dx");
  compare(ctx, f, dw2, dw1, "linear_backward dw");
  compare(ctx, f, db2, db1, "linear_backward db");
  Pair a = random_pair(ctx, f, {3, 5, 8}, 74), bm = random_pair(ctx, f, {3, 8, 7}, 75);
  st::Tensor c32 = f32_on(ctx, {3, 5, 7}), c16 = half_on(ctx, f, {3, 5, 7});
  ops::batched_matmul(ctx, {false, false, 0.5f}, a.wide, bm.wide, c32);
  ops::batched_matmul(ctx, {false, false, 0.5f}, a.half, bm.half, c16);
  compare(ctx, f, c16, c32, "batched_matmul");
}

// Batch norm with 16-bit activations (or x in 16 bits and y in f32: the mixed path) against fp32.
void check_batch_norm(st::Context& ctx, const Format& f, bool mixed) {
  const double units = ctx.device() == st::Device::cpu ? 0.0 : 2.0;
  const double rel = ctx.device() == st::Device::cpu ? 0.0 : 1e-5;
  const std::string how = mixed ? " (16-bit x, f32 y and dx)" : "";
  const int64_t c = 8;
  const ops::BatchNormParams p;
  Pair x = random_pair(ctx, f, {4, 5, 5, c}, 40, 3.0), dy = random_pair(ctx, f, {4, 5, 5, c}, 41);
  Pair gamma = random_pair(ctx, f, {c}, 42), beta = random_pair(ctx, f, {c}, 43);
  st::Tensor rm[2], rv[2], sm[2], si[2], dg[2], db[2];
  for (int k = 0; k < 2; ++k) channel_tensors(ctx, c, rm[k], rv[k], sm[k], si[k], dg[k], db[k]);
  st::Tensor y32 = f32_on(ctx, x.wide.shape());
  st::Tensor y16 = mixed ? f32_on(ctx, x.wide.shape()) : half_on(ctx, f, x.wide.shape());
  ops::batch_norm_forward_training(ctx, p, x.wide, gamma.wide, beta.wide, rm[0], rv[0], y32, sm[0], si[0]);
  ops::batch_norm_forward_training(ctx, p, x.half, gamma.wide, beta.wide, rm[1], rv[1], y16, sm[1], si[1]);
  compare(ctx, f, y16, y32, "batch_norm_forward_training y" + how, units);
  compare(ctx, f, rm[1], rm[0], "batch_norm_forward_training running mean" + how, 0.0, rel);
  compare(ctx, f, rv[1], rv[0], "batch_norm_forward_training running var" + how, 0.0, rel);
  compare(ctx, f, si[1], si[0], "batch_norm_forward_training saved inverse std" + how, 0.0, rel);
  ops::batch_norm_forward_inference(ctx, p, x.wide, gamma.wide, beta.wide, rm[0], rv[0], y32);
  ops::batch_norm_forward_inference(ctx, p, x.half, gamma.wide, beta.wide, rm[0], rv[0], y16);
  compare(ctx, f, y16, y32, "batch_norm_forward_inference" + how, units);
  st::Tensor dx32 = f32_on(ctx, x.wide.shape());
  st::Tensor dx16 = mixed ? f32_on(ctx, x.wide.shape()) : half_on(ctx, f, x.wide.shape());
  ops::batch_norm_backward(ctx, p, x.wide, dy.wide, gamma.wide, sm[0], si[0], dx32, dg[0], db[0]);
  ops::batch_norm_backward(ctx, p, x.half, dy.half, gamma.wide, sm[0], si[0], dx16, dg[1], db[1]);
  compare(ctx, f, dx16, dx32, "batch_norm_backward dx" + how, units);
  compare(ctx, f, dg[1], dg[0], "batch_norm_backward dgamma" + how, 0.0, rel);
  compare(ctx, f, db[1], db[0], "batch_norm_backward dbeta" + how, 0.0, rel);
}

// --fuse bn-add-relu's op against the three ops it replaces, both on 16-bit tensors: y within 2
// units (one rounding against three, and cuDNN's fused kernel sums in its own order), the
// statistics and parameter gradients within 1e-4 relative, dz (the ReLU's mask of dy, from the
// fused y) bit for bit, dx within 2 units. On a GPU in fp16 cuDNN's fused kernel must have run
// (it keeps a reserve space for the backward); in bf16 it may refuse, and the op runs unfused.
void check_fused_bn_add_relu(st::Context& ctx, const Format& f) {
  const bool gpu = ctx.device() != st::Device::cpu;
  const int64_t c = 32;
  const st::Shape s{4, 6, 6, c};
  const ops::BatchNormParams p;
  Pair x = random_pair(ctx, f, s, 50, 3.0), z = random_pair(ctx, f, s, 51), dy = random_pair(ctx, f, s, 52);
  Pair gamma = random_pair(ctx, f, {c}, 53), beta = random_pair(ctx, f, {c}, 54);
  st::Tensor rm[2], rv[2], sm[2], si[2], dg[2], db[2];
  for (int k = 0; k < 2; ++k) channel_tensors(ctx, c, rm[k], rv[k], sm[k], si[k], dg[k], db[k]);
  // The three ops.
  st::Tensor y3 = half_on(ctx, f, s), dz3 = half_on(ctx, f, s), dx3 = half_on(ctx, f, s);
  ops::batch_norm_forward_training(ctx, p, x.half, gamma.wide, beta.wide, rm[0], rv[0], y3, sm[0], si[0]);
  ops::add_forward(ctx, y3, z.half, y3);
  ops::relu_forward(ctx, y3, y3);
  // The fused op.
  st::Tensor y1 = half_on(ctx, f, s), dz1 = half_on(ctx, f, s), dx1 = half_on(ctx, f, s), reserve;
  ops::batch_norm_add_relu_forward_training(ctx, p, x.half, z.half, gamma.wide, beta.wide, rm[1], rv[1], y1, sm[1],
                                            si[1], reserve);
  const bool ran_fused = reserve.defined() && reserve.numel() > 0;
  std::printf("      %s: batch_norm_add_relu %s\n", f.name,
              ran_fused ? "ran cuDNN's fused kernel (reserve space kept)" : "ran unfused");
  if (gpu && f.dtype == st::DType::f16) check(ran_fused, std::string(f.name) + ": cuDNN's fused kernel ran in fp16");
  compare(ctx, f, y1, ops::as_f32(ctx, y3), "batch_norm_add_relu forward y against the three ops", 2.0);
  compare(ctx, f, rm[1], rm[0], "batch_norm_add_relu running mean", 0.0, 1e-4);
  compare(ctx, f, rv[1], rv[0], "batch_norm_add_relu running var", 0.0, 1e-4);
  compare(ctx, f, si[1], si[0], "batch_norm_add_relu saved inverse std", 0.0, 1e-4);
  ops::batch_norm_add_relu_backward(ctx, p, x.half, y1, dy.half, gamma.wide, beta.wide, sm[1], si[1], reserve, dx1, dz1,
                                    dg[1], db[1]);
  ops::relu_backward(ctx, y1, dy.half, dz3);
  ops::batch_norm_backward(ctx, p, x.half, dz3, gamma.wide, sm[1], si[1], dx3, dg[0], db[0]);
  compare(ctx, f, dz1, ops::as_f32(ctx, dz3), "batch_norm_add_relu backward dz (the ReLU's mask)");
  compare(ctx, f, dx1, ops::as_f32(ctx, dx3), "batch_norm_add_relu backward dx", 2.0);
  compare(ctx, f, dg[1], dg[0], "batch_norm_add_relu dgamma", 0.0, 1e-4);
  compare(ctx, f, db[1], db[0], "batch_norm_add_relu dbeta", 0.0, 1e-4);
}

// In fp32 the fused op is the three ops' arithmetic (no fused kernel): bit for bit.
void check_fused_bn_add_relu_fp32(st::Context& ctx) {
  const Format& f = kFormats[0];  // only for names and compare's unit, unused at 0 units
  const int64_t c = 16;
  const st::Shape s{2, 5, 5, c};
  const ops::BatchNormParams p;
  st::Rng rng(60);
  auto random = [&](const st::Shape& shape) {
    st::Tensor t = st::Tensor::empty(shape, st::DType::f32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(2 * rng.uniform() - 1);
    return t.to(ctx.device());
  };
  const st::Tensor x = random(s), z = random(s), gamma = random({c}), beta = random({c});
  st::Tensor rm[2], rv[2], sm[2], si[2], dg[2], db[2];
  for (int k = 0; k < 2; ++k) channel_tensors(ctx, c, rm[k], rv[k], sm[k], si[k], dg[k], db[k]);
  st::Tensor y3 = f32_on(ctx, s), y1 = f32_on(ctx, s), reserve;
  ops::batch_norm_forward_training(ctx, p, x, gamma, beta, rm[0], rv[0], y3, sm[0], si[0]);
  ops::add_forward(ctx, y3, z, y3);
  ops::relu_forward(ctx, y3, y3);
  ops::batch_norm_add_relu_forward_training(ctx, p, x, z, gamma, beta, rm[1], rv[1], y1, sm[1], si[1], reserve);
  compare(ctx, f, y1, y3, "fp32 batch_norm_add_relu forward y against the three ops");
  compare(ctx, f, rm[1], rm[0], "fp32 batch_norm_add_relu running mean");
}

void check_format(st::Context& ctx, const Format& f) {
  ctx.set_precision(f.precision);
  check_elementwise(ctx, f);
  check_convolution(ctx, f, 3, 4, 3, 10);   // an odd channel count, a 3x3 filter (transposed)
  check_convolution(ctx, f, 8, 16, 1, 20);  // tensor-core friendly, 1x1
  check_convolution(ctx, f, 16, 8, 3, 30);
  check_products(ctx, f);
  check_batch_norm(ctx, f, false);
  check_batch_norm(ctx, f, true);
  check_fused_bn_add_relu(ctx, f);
  ctx.set_precision(st::Precision::fp32);
}

void run_all(st::Context& ctx, int compute_major) {
  check_fused_bn_add_relu_fp32(ctx);
  for (const Format& f : kFormats) {
    if (f.dtype == st::DType::bf16 && compute_major > 0 && compute_major < 8) {
      std::printf("skip: amp-bf16 below compute capability 8.0\n");
      continue;
    }
    check_format(ctx, f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--device" && std::string(argv[2]) == "cpu") {
    try {
      st::Context ctx;
      run_all(ctx, 0);
    } catch (const std::exception& e) {
      std::printf("FAIL: %s\n", e.what());
      return 1;
    }
    std::printf("%s\n", st::gpu_test::failures() == 0 ? "PASS" : "FAIL");
    return st::gpu_test::failures() == 0 ? 0 : 1;
  }
  return st::gpu_test::run_gpu_checks(
      [](st::Context& ctx, const st::GpuInventory& inventory) { run_all(ctx, inventory.gpus.at(0).compute_major); });
}
