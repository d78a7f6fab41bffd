// 16-bit storage on a device (issue 26, section 2): the kernels that read and write f16 and bf16
// tensors themselves (with_half_storage: ReLU, add, the convolutions, batch norm, pooling) against the
// same ops on fp32 tensors holding the same 16-bit values, rounded by the dispatch (the path the
// AMP op cases check against the CPU), on the same device:
//   - ReLU, add (also with mixed f32 and 16-bit operands), the three convolutions (bias and its
//     gradient included, a 1x1 and a 3x3 shape), linear and batched_matmul: bit for bit (the same cuDNN plan reads the
//     same 16-bit operands; the bias is added in float and rounded once either way);
//   - the input gradient added into a shortcut's (conv2d_backward_data_add: cuDNN's blend, beta 1,
//     on 16-bit tensors) within a unit of the format of the fp32 tensors' gradient-then-add;
//   - ReLU and the adds over 16-byte packs against the element-wise kernels (views one element
//     off a 16-byte boundary), bit for bit, and both timed;
//   - max, average, adaptive average and global average pooling, forward and backward (ceil mode,
//     padding left out of the divisor, an odd channel count; bf16's coarse values make ties for
//     the max pool's first-maximum rule): bit for bit (each computes in float or double and
//     stores once);
//   - dropout (p 0.3 and p 0 into another type), the channel and feature concatenations and
//     their splits (also a part of f32 beside 16-bit ones), flatten in NCHW order and back, and
//     the middle-axes swap: bit for bit (copies, or one float multiply stored once);
//   - layer norm, masked softmax, the softmax, token and sigmoid cross-entropies (the loss
//     values too) and count_correct, the embeddings, LRN, image normalisation and the element-wise
//     product: bit for bit (each computes from the widened values as before and stores once);
//   - batch norm forward (training and inference) and backward, 16-bit and mixed: on a GPU within
//     2 units of the format at the output's largest magnitude, the fp32 statistics and parameter
//     gradients within 1e-5 relative (cuDNN's 16-bit kernels may sum in another order); on the
//     CPU bit for bit.
//   - batch norm + add + ReLU fused (--fuse bn-add-relu) against the three ops: in fp32 bit for
//     bit, in 16 bits within 2 units; cuDNN's fused kernel must run in fp16 on a GPU.
//   - batch norm + ReLU fused (--fuse bn-relu) against the two ops: in 16 bits within 2 units (on
//     the CPU bit for bit); cuDNN's fused kernel (BN_ACTIVATION) must run in fp16 on a GPU.
// amp-bf16 is skipped below compute capability 8.0 (V100 refuses it). `--device cpu` runs it on
// the CPU, where the dispatch widens every 16-bit tensor: unit.half_storage_harness, so that the
// comparisons themselves are checked without a GPU. Exit codes: 0 passed, 1 failed, 77 skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "gpu_side_by_side.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/batched_matmul.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/concat.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/dropout.hpp"
#include "scaletrain/ops/embedding.hpp"
#include "scaletrain/ops/flatten.hpp"
#include "scaletrain/ops/layer_norm.hpp"
#include "scaletrain/ops/linear.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/ops/lrn.hpp"
#include "scaletrain/ops/multiply.hpp"
#include "scaletrain/ops/normalize.hpp"
#include "scaletrain/ops/pool.hpp"
#include "scaletrain/ops/sigmoid_bce.hpp"
#include "scaletrain/ops/softmax.hpp"
#include "scaletrain/ops/swap_axes.hpp"
#include "scaletrain/ops/token_embedding.hpp"

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

// ReLU and the adds in `dtype` (ctx's precision set for it) on 16-byte aligned operands of one
// type, which a GPU runs over 16-byte packs (src/ops/cuda/packed_io.cuh), against the same values
// one element past such a boundary (views at offset 1), which it runs element by element: bit for
// bit, with elements past the last whole pack. Then each op's median time both ways beside a
// device copy of as many bytes as an out-of-place ReLU moves, and the bandwidth each reaches
// (printed, not checked: the comparison is the point).
struct Operands {
  st::Tensor aligned, offset;  // the same values: at a block's start, and one element past it
};

// Values in [-1, 1) from a multiplicative hash of the index, in `dtype` on ctx's device: cheap for
// 64 M elements, and as mixed in sign as random ones.
st::Tensor hashed_values(st::Context& ctx, st::DType dtype, const st::Shape& shape, uint64_t seed) {
  st::Tensor host = st::Tensor::empty(shape, st::DType::f32);
  float* h = host.data<float>();
  for (int64_t i = 0, n = host.numel(); i < n; ++i) {
    const uint32_t bits = (static_cast<uint32_t>(i) + static_cast<uint32_t>(seed) * 40503u) * 2654435761u;
    h[i] = static_cast<float>(bits >> 16) / 32768.0f - 1.0f;
  }
  st::Tensor values = st::Tensor::empty(shape, dtype, ctx.device());
  if (dtype == st::DType::f32)
    values.copy_from(host.to(ctx.device()));
  else
    ops::cast_to_half(ctx, host.to(ctx.device()), values);
  return values;
}

Operands same_values_twice(st::Context& ctx, st::DType dtype, int64_t n, uint64_t seed) {
  const st::Tensor values = hashed_values(ctx, dtype, {n}, seed);
  Operands o;
  o.aligned = st::Tensor::view_of(st::Tensor::empty({n + 1}, dtype, ctx.device()), 0, {n});
  o.offset = st::Tensor::view_of(st::Tensor::empty({n + 1}, dtype, ctx.device()), 1, {n});
  o.aligned.copy_from(values);
  o.offset.copy_from(values);
  return o;
}

void compare_bits(st::Context& ctx, const st::Tensor& got, const st::Tensor& want, const std::string& what) {
  ctx.synchronize();
  const st::Tensor a = got.to(st::Device::cpu), b = want.to(st::Device::cpu);
  const bool same = a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
  check(same, what + ", bit for bit");
}

// Whether t starts on a 16-byte boundary, where the packed kernels may run.
bool on_pack_boundary(const st::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw()) % 16 == 0; }

void check_packed_paths(st::Context& ctx, st::DType dtype, const char* name) {
  // 7 elements past the last whole pack of 8 (16-bit), 3 past the last of 4 (f32).
  const int64_t n = 3 * (int64_t{1} << 20) + 7;
  Operands x = same_values_twice(ctx, dtype, n, 70), dy = same_values_twice(ctx, dtype, n, 71);
  Operands y = same_values_twice(ctx, dtype, n, 72), acc = same_values_twice(ctx, dtype, n, 73);
  check(on_pack_boundary(x.aligned) && on_pack_boundary(dy.aligned) && on_pack_boundary(y.aligned) &&
            !on_pack_boundary(x.offset) && !on_pack_boundary(dy.offset) && !on_pack_boundary(y.offset),
        std::string(name) + ": the aligned operands start on 16-byte boundaries, the offset ones do not");
  ops::relu_forward(ctx, x.aligned, y.aligned);
  ops::relu_forward(ctx, x.offset, y.offset);
  compare_bits(ctx, y.aligned, y.offset, std::string(name) + ": relu_forward: packed and element-wise kernels");
  ops::relu_backward(ctx, y.aligned, dy.aligned, dy.aligned);  // in place, as the layers run it
  ops::relu_backward(ctx, y.offset, dy.offset, dy.offset);
  compare_bits(ctx, dy.aligned, dy.offset,
               std::string(name) + ": relu_backward in place: packed and element-wise kernels");
  ops::add_forward(ctx, x.aligned, dy.aligned, y.aligned);
  ops::add_forward(ctx, x.offset, dy.offset, y.offset);
  compare_bits(ctx, y.aligned, y.offset, std::string(name) + ": add_forward: packed and element-wise kernels");
  ops::add_inplace(ctx, acc.aligned, x.aligned);
  ops::add_inplace(ctx, acc.offset, x.offset);
  compare_bits(ctx, acc.aligned, acc.offset, std::string(name) + ": add_inplace: packed and element-wise kernels");
}

void time_packed_paths(st::Context& ctx, st::DType dtype, const char* name) {
  // 64 M elements on a GPU (128 MiB in 16 bits): far past its caches; a small size on the CPU.
  const int64_t n = ctx.device() == st::Device::cpu ? int64_t{1} << 16 : int64_t{1} << 26;
  const double bytes = static_cast<double>(n) * static_cast<double>(st::dtype_size(dtype));
  Operands x = same_values_twice(ctx, dtype, n, 80), y = same_values_twice(ctx, dtype, n, 81);
  Operands out = same_values_twice(ctx, dtype, n, 82);
  const int runs = 7;
  const double copy = st::gpu_test::median_ms(ctx, runs, [&] { out.aligned.copy_from(x.aligned); });
  std::printf("      %s: device copy of %lld elements: %.3f ms (%.0f GB/s read and written)\n", name,
              static_cast<long long>(n), copy, 2 * bytes / copy * 1e-6);
  // `passes`: the tensors the op reads and writes, each n elements.
  auto line = [&](const char* op, double passes, const std::function<void()>& packed,
                  const std::function<void()>& single) {
    const double packed_ms = st::gpu_test::median_ms(ctx, runs, packed);
    const double single_ms = st::gpu_test::median_ms(ctx, runs, single);
    std::printf("      %s: %s: packed %.3f ms (%.0f GB/s), element-wise %.3f ms (%.0f GB/s): %.2fx\n", name, op,
                packed_ms, passes * bytes / packed_ms * 1e-6, single_ms, passes * bytes / single_ms * 1e-6,
                single_ms / packed_ms);
  };
  line(
      "relu_forward", 2, [&] { ops::relu_forward(ctx, x.aligned, out.aligned); },
      [&] { ops::relu_forward(ctx, x.offset, out.offset); });
  line(
      "relu_backward", 3, [&] { ops::relu_backward(ctx, x.aligned, y.aligned, out.aligned); },
      [&] { ops::relu_backward(ctx, x.offset, y.offset, out.offset); });
  line(
      "add_inplace", 3, [&] { ops::add_inplace(ctx, out.aligned, y.aligned); },
      [&] { ops::add_inplace(ctx, out.offset, y.offset); });
}

// An environment variable set to `value` (unset where nullptr) for the object's life, then put
// back as it was, exceptions included.
class HookSetting {
 public:
  HookSetting(const char* name, const char* value) : name_(name) {
    if (const char* before = std::getenv(name)) before_ = before, had_ = true;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~HookSetting() {
    if (had_)
      setenv(name_, before_.c_str(), 1);
    else
      unsetenv(name_);
  }
  HookSetting(const HookSetting&) = delete;
  HookSetting& operator=(const HookSetting&) = delete;

 private:
  const char* name_;
  std::string before_;
  bool had_ = false;
};

// Two more of ResNet-50's passes at its shapes, at batch 64 on a GPU (a quarter of the
// benchmark's 256; batch 1 at a seventh of the size on the CPU), each timed against the way it ran
// before, in the format f (printed, not checked):
//   - the stem's max pool, 3x3 stride 2 over (64, 112, 112, 64), with its 32-bit, 4-channel
//     kernels against the per-value 64-bit ones before them (SCALETRAIN_MAX_POOL_KERNEL=per-value),
//     whose results must be the same bits (checked);
//   - a block's input gradient, layer1's first 1x1 convolution (256 -> 64 channels at 56x56):
//     conv2d_backward_data_add against conv2d_backward_data then add_inplace.
void time_resnet_passes(st::Context& ctx, const Format& f) {
  const bool gpu = ctx.device() != st::Device::cpu;
  const int64_t n = gpu ? 64 : 1, stem = gpu ? 112 : 16, block = stem / 2;
  const int runs = 7;
  const ops::MaxPool2dParams mp;  // 3x3, stride 2, padding 1
  const st::Tensor x = hashed_values(ctx, f.dtype, {n, stem, stem, 64}, 90);
  const st::Shape ps = ops::max_pool2d_output_shape(mp, x.shape());
  const st::Tensor dy = hashed_values(ctx, f.dtype, ps, 91);
  st::Tensor y[2] = {half_on(ctx, f, ps), half_on(ctx, f, ps)};
  st::Tensor dx[2] = {half_on(ctx, f, x.shape()), half_on(ctx, f, x.shape())};
  double forward_ms[2], backward_ms[2];
  for (int way = 0; way < 2; ++way) {  // 0: the kernels now, 1: the per-value ones before
    const HookSetting hook("SCALETRAIN_MAX_POOL_KERNEL", way == 1 ? "per-value" : nullptr);
    forward_ms[way] = st::gpu_test::median_ms(ctx, runs, [&] { ops::max_pool2d_forward(ctx, mp, x, y[way]); });
    backward_ms[way] =
        st::gpu_test::median_ms(ctx, runs, [&] { ops::max_pool2d_backward(ctx, mp, x, y[way], dy, dx[way]); });
  }
  compare_bits(ctx, y[0], y[1],
               std::string(f.name) + ": max_pool2d_forward at ResNet-50's stem against the per-value kernels");
  compare_bits(ctx, dx[0], dx[1],
               std::string(f.name) + ": max_pool2d_backward at ResNet-50's stem against the per-value kernels");
  std::printf(
      "      %s: max_pool2d 3x3/2 over (%lld, %lld, %lld, 64): forward %.3f ms, backward %.3f ms; the per-value "
      "kernels before: %.3f ms, %.3f ms (%.2fx, %.2fx)\n",
      f.name, static_cast<long long>(n), static_cast<long long>(stem), static_cast<long long>(stem), forward_ms[0],
      backward_ms[0], forward_ms[1], backward_ms[1], forward_ms[1] / forward_ms[0], backward_ms[1] / backward_ms[0]);

  const ops::Conv2dParams p(1, 0);
  const st::Tensor g = hashed_values(ctx, f.dtype, {n, block, block, 64}, 92);
  const st::Tensor w = hashed_values(ctx, st::DType::f32, {64, 256, 1, 1}, 93);
  st::Tensor sum = hashed_values(ctx, f.dtype, {n, block, block, 256}, 94);
  st::Tensor gradient = half_on(ctx, f, sum.shape());
  const double apart = st::gpu_test::median_ms(ctx, runs, [&] {
    ops::conv2d_backward_data(ctx, p, g, w, gradient);
    ops::add_inplace(ctx, sum, gradient);
  });
  const double added = st::gpu_test::median_ms(ctx, runs, [&] { ops::conv2d_backward_data_add(ctx, p, g, w, sum); });
  std::printf(
      "      %s: a block's input gradient, 1x1 256 -> 64 at %lldx%lld, batch %lld: added as stored %.3f ms, "
      "the convolution then add_inplace %.3f ms (%.2fx)\n",
      f.name, static_cast<long long>(block), static_cast<long long>(block), static_cast<long long>(n), added, apart,
      apart / added);
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
  // The input gradient added into a shortcut's gradient: on 16-bit tensors cuDNN blends it in
  // (beta 1) and rounds the sum once; on fp32 tensors under the same plan the gradient is computed
  // apart and rounded, then the sum rounded again. Within a unit of the format.
  Pair sum = random_pair(ctx, f, x.wide.shape(), seed + 4);
  ops::conv2d_backward_data_add(ctx, p, dy.wide, w.wide, sum.wide);
  ops::conv2d_backward_data_add(ctx, p, dy.half, w.wide, sum.half);
  compare(ctx, f, sum.half, sum.wide, "conv2d_backward_data_add " + shape + ", one rounding against two", 1.0);
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

// The pooling ops on 16-bit tensors against fp32 tensors holding the same values: bit for bit.
void check_pooling(st::Context& ctx, const Format& f) {
  Pair x = random_pair(ctx, f, {2, 7, 7, 5}, 80);
  ops::MaxPool2dParams mp;  // 3x3, stride 2, padding 1
  mp.ceil_mode = true;
  const st::Shape ms = ops::max_pool2d_output_shape(mp, x.wide.shape());
  st::Tensor y32 = f32_on(ctx, ms), y16 = half_on(ctx, f, ms);
  ops::max_pool2d_forward(ctx, mp, x.wide, y32);
  ops::max_pool2d_forward(ctx, mp, x.half, y16);
  compare(ctx, f, y16, y32, "max_pool2d_forward");
  Pair dy = random_pair(ctx, f, ms, 81);
  st::Tensor dx32 = f32_on(ctx, x.wide.shape()), dx16 = half_on(ctx, f, x.wide.shape());
  // The backward reads the forward's y in each storage: the 16-bit run's own.
  ops::max_pool2d_backward(ctx, mp, x.wide, y32, dy.wide, dx32);
  ops::max_pool2d_backward(ctx, mp, x.half, y16, dy.half, dx16);
  compare(ctx, f, dx16, dx32, "max_pool2d_backward");

  ops::AvgPool2dParams ap;  // 3x3, padding 1
  ap.stride = 2;
  ap.ceil_mode = true;
  ap.count_include_pad = false;
  const st::Shape as = ops::avg_pool2d_output_shape(ap, x.wide.shape());
  y32 = f32_on(ctx, as), y16 = half_on(ctx, f, as);
  ops::avg_pool2d_forward(ctx, ap, x.wide, y32);
  ops::avg_pool2d_forward(ctx, ap, x.half, y16);
  compare(ctx, f, y16, y32, "avg_pool2d_forward");
  dy = random_pair(ctx, f, as, 82);
  ops::avg_pool2d_backward(ctx, ap, dy.wide, dx32);
  ops::avg_pool2d_backward(ctx, ap, dy.half, dx16);
  compare(ctx, f, dx16, dx32, "avg_pool2d_backward");

  ops::AdaptiveAvgPool2dParams dp;
  dp.out_h = 3;
  dp.out_w = 2;
  const st::Shape ds = ops::adaptive_avg_pool2d_output_shape(dp, x.wide.shape());
  y32 = f32_on(ctx, ds), y16 = half_on(ctx, f, ds);
  ops::adaptive_avg_pool2d_forward(ctx, dp, x.wide, y32);
  ops::adaptive_avg_pool2d_forward(ctx, dp, x.half, y16);
  compare(ctx, f, y16, y32, "adaptive_avg_pool2d_forward");
  dy = random_pair(ctx, f, ds, 83);
  ops::adaptive_avg_pool2d_backward(ctx, dp, dy.wide, dx32);
  ops::adaptive_avg_pool2d_backward(ctx, dp, dy.half, dx16);
  compare(ctx, f, dx16, dx32, "adaptive_avg_pool2d_backward");

  y32 = f32_on(ctx, {2, 5}), y16 = half_on(ctx, f, {2, 5});
  ops::global_avg_pool_forward(ctx, x.wide, y32);
  ops::global_avg_pool_forward(ctx, x.half, y16);
  compare(ctx, f, y16, y32, "global_avg_pool_forward");
  dy = random_pair(ctx, f, {2, 5}, 84);
  ops::global_avg_pool_backward(ctx, dy.wide, dx32);
  ops::global_avg_pool_backward(ctx, dy.half, dx16);
  compare(ctx, f, dx16, dx32, "global_avg_pool_backward");
}

// The data-movement ops and dropout on 16-bit tensors against fp32 tensors holding the same
// values: bit for bit.
void check_movement(st::Context& ctx, const Format& f) {
  Pair x = random_pair(ctx, f, {3, 4, 5, 6}, 90);
  ops::DropoutParams dp;
  dp.p = 0.3;
  dp.key[0] = 7;
  dp.position = 11;
  st::Tensor y32 = f32_on(ctx, x.wide.shape()), y16 = half_on(ctx, f, x.wide.shape());
  ops::dropout_forward(ctx, dp, x.wide, y32);
  ops::dropout_forward(ctx, dp, x.half, y16);
  compare(ctx, f, y16, y32, "dropout_forward");
  ops::dropout_backward(ctx, dp, x.wide, y32);
  ops::dropout_backward(ctx, dp, x.half, y16);
  compare(ctx, f, y16, y32, "dropout_backward");
  dp.p = 0.0;  // the identity, here from 16 bits into f32 and from f32 into 16 bits
  st::Tensor w = f32_on(ctx, x.wide.shape());
  ops::dropout_forward(ctx, dp, x.half, w);
  compare(ctx, f, w, x.wide, "dropout_forward p=0, 16-bit into f32");
  ops::dropout_forward(ctx, dp, x.wide, y16);
  compare(ctx, f, y16, x.wide, "dropout_forward p=0, f32 into 16-bit");

  st::Tensor flat32 = f32_on(ctx, {3, 120}), flat16 = half_on(ctx, f, {3, 120});
  ops::flatten_chw_forward(ctx, x.wide, flat32);
  ops::flatten_chw_forward(ctx, x.half, flat16);
  compare(ctx, f, flat16, flat32, "flatten_chw_forward");
  st::Tensor back32 = f32_on(ctx, x.wide.shape()), back16 = half_on(ctx, f, x.wide.shape());
  ops::flatten_chw_backward(ctx, flat32, back32);
  ops::flatten_chw_backward(ctx, flat16, back16);
  compare(ctx, f, back16, back32, "flatten_chw_backward");
  compare(ctx, f, back16, x.wide, "flatten_chw_backward of forward: the input");

  st::Tensor sw32 = f32_on(ctx, {3, 5, 4, 6}), sw16 = half_on(ctx, f, {3, 5, 4, 6});
  ops::swap_middle_axes(ctx, x.wide, sw32);
  ops::swap_middle_axes(ctx, x.half, sw16);
  compare(ctx, f, sw16, sw32, "swap_middle_axes");

  // Channels: 16-bit parts of 6 and 3 channels beside an f32 part of 2 (mixed types).
  Pair a = random_pair(ctx, f, {3, 4, 5, 3}, 91), c = random_pair(ctx, f, {3, 4, 5, 2}, 92);
  st::Tensor cat32 = f32_on(ctx, {3, 4, 5, 11}), cat16 = half_on(ctx, f, {3, 4, 5, 11});
  ops::concat_channels_forward(ctx, {x.wide, a.wide, c.wide}, cat32);
  ops::concat_channels_forward(ctx, {x.half, a.half, c.wide}, cat16);
  compare(ctx, f, cat16, cat32, "concat_channels_forward (two 16-bit parts, one f32)");
  std::vector<st::Tensor> d32{f32_on(ctx, x.wide.shape()), f32_on(ctx, a.wide.shape()), f32_on(ctx, c.wide.shape())};
  std::vector<st::Tensor> d16{half_on(ctx, f, x.wide.shape()), half_on(ctx, f, a.wide.shape()),
                              f32_on(ctx, c.wide.shape())};
  ops::concat_channels_backward(ctx, cat32, d32);
  ops::concat_channels_backward(ctx, cat16, d16);
  for (int k = 0; k < 3; ++k) compare(ctx, f, d16[k], d32[k], "concat_channels_backward part " + std::to_string(k));

  Pair fa = random_pair(ctx, f, {7, 5}, 93), fb = random_pair(ctx, f, {7, 3}, 94);
  st::Tensor fy32 = f32_on(ctx, {7, 8}), fy16 = half_on(ctx, f, {7, 8});
  ops::concat_features_forward(ctx, fa.wide, fb.wide, fy32);
  ops::concat_features_forward(ctx, fa.half, fb.half, fy16);
  compare(ctx, f, fy16, fy32, "concat_features_forward");
  st::Tensor da32 = f32_on(ctx, {7, 5}), db32 = f32_on(ctx, {7, 3}), da16 = half_on(ctx, f, {7, 5}),
             db16 = half_on(ctx, f, {7, 3});
  ops::concat_features_backward(ctx, fy32, da32, db32);
  ops::concat_features_backward(ctx, fy16, da16, db16);
  compare(ctx, f, da16, da32, "concat_features_backward da");
  compare(ctx, f, db16, db32, "concat_features_backward db");
}

// An int32 (or uint8) tensor of `values` on ctx's device.
st::Tensor ints_on(st::Context& ctx, const std::vector<int32_t>& values) {
  st::Tensor t = st::Tensor::empty({static_cast<int64_t>(values.size())}, st::DType::i32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t.to(ctx.device());
}

void check_same_value(const Format& f, double got, double want, const std::string& what) {
  char detail[96];
  std::snprintf(detail, sizeof detail, " (%.17g against %.17g)", got, want);
  check(std::memcmp(&got, &want, sizeof got) == 0, std::string(f.name) + ": " + what + ", bit for bit" + detail);
}

// Row-wise normalisations, the losses and the embeddings on 16-bit tensors against fp32 tensors
// holding the same values: bit for bit, the returned losses and counts included.
void check_rows_and_losses(st::Context& ctx, const Format& f) {
  // Layer norm over rows of 16 (fp32 gamma and beta, statistics and parameter gradients).
  Pair x = random_pair(ctx, f, {3, 5, 16}, 100), dy = random_pair(ctx, f, {3, 5, 16}, 101);
  Pair gamma = random_pair(ctx, f, {16}, 102), beta = random_pair(ctx, f, {16}, 103);
  st::Tensor y32 = f32_on(ctx, {3, 5, 16}), y16 = half_on(ctx, f, {3, 5, 16});
  st::Tensor sm[2] = {f32_on(ctx, {15}), f32_on(ctx, {15})}, sr[2] = {f32_on(ctx, {15}), f32_on(ctx, {15})};
  const ops::LayerNormParams lp;
  ops::layer_norm_forward(ctx, lp, x.wide, gamma.wide, beta.wide, y32, sm[0], sr[0]);
  ops::layer_norm_forward(ctx, lp, x.half, gamma.wide, beta.wide, y16, sm[1], sr[1]);
  compare(ctx, f, y16, y32, "layer_norm_forward y");
  compare(ctx, f, sr[1], sr[0], "layer_norm_forward saved rstd");
  st::Tensor dx32 = f32_on(ctx, {3, 5, 16}), dx16 = half_on(ctx, f, {3, 5, 16});
  st::Tensor dg[2] = {f32_on(ctx, {16}), f32_on(ctx, {16})}, db[2] = {f32_on(ctx, {16}), f32_on(ctx, {16})};
  ops::layer_norm_backward(ctx, x.wide, dy.wide, gamma.wide, sm[0], sr[0], dx32, dg[0], db[0]);
  ops::layer_norm_backward(ctx, x.half, dy.half, gamma.wide, sm[0], sr[0], dx16, dg[1], db[1]);
  compare(ctx, f, dx16, dx32, "layer_norm_backward dx");
  compare(ctx, f, dg[1], dg[0], "layer_norm_backward dgamma");
  compare(ctx, f, db[1], db[0], "layer_norm_backward dbeta");

  // Masked softmax over keys of 5, key lengths 3 and 5, causal.
  Pair s = random_pair(ctx, f, {2, 2, 3, 5}, 104, 4.0), ds = random_pair(ctx, f, {2, 2, 3, 5}, 105);
  const st::Tensor lengths = ints_on(ctx, {3, 5});
  ops::SoftmaxMask mask;
  mask.causal = true;
  st::Tensor p32 = f32_on(ctx, s.wide.shape()), p16 = half_on(ctx, f, s.wide.shape());
  ops::masked_softmax_forward(ctx, mask, s.wide, lengths, p32);
  ops::masked_softmax_forward(ctx, mask, s.half, lengths, p16);
  compare(ctx, f, p16, p32, "masked_softmax_forward");
  st::Tensor g32 = f32_on(ctx, s.wide.shape()), g16 = half_on(ctx, f, s.wide.shape());
  // The backward reads each run's own probabilities.
  ops::masked_softmax_backward(ctx, p32, ds.wide, g32);
  ops::masked_softmax_backward(ctx, p16, ds.half, g16);
  compare(ctx, f, g16, g32, "masked_softmax_backward");

  // The classifier's losses on 16-bit logits, dlogits in fp32 (as the models keep them) and in 16 bits.
  Pair logits = random_pair(ctx, f, {6, 10}, 106, 3.0);
  const st::Tensor labels = ints_on(ctx, {0, 3, 9, 3, 5, 0});
  st::Tensor dl32 = f32_on(ctx, {6, 10}), dl16 = f32_on(ctx, {6, 10}), dlh = half_on(ctx, f, {6, 10});
  const double l32 = ops::softmax_cross_entropy(ctx, logits.wide, labels, 0.1f, dl32);
  const double l16 = ops::softmax_cross_entropy(ctx, logits.half, labels, 0.1f, dl16);
  check_same_value(f, l16, l32, "softmax_cross_entropy's loss");
  compare(ctx, f, dl16, dl32, "softmax_cross_entropy dlogits (f32)");
  ops::softmax_cross_entropy(ctx, logits.half, labels, 0.1f, dlh);
  compare(ctx, f, dlh, dl32, "softmax_cross_entropy dlogits (16-bit)");
  const ops::TokenLoss t32 = ops::token_cross_entropy(ctx, logits.wide, labels, 0.1f, 0, 4.0, dl32);
  const ops::TokenLoss t16 = ops::token_cross_entropy(ctx, logits.half, labels, 0.1f, 0, 4.0, dl16);
  check_same_value(f, t16.sum, t32.sum, "token_cross_entropy's sum (label 0 ignored)");
  check(t16.tokens == t32.tokens, std::string(f.name) + ": token_cross_entropy's token count");
  compare(ctx, f, dl16, dl32, "token_cross_entropy dlogits");
  check(ops::count_correct(ctx, logits.half, labels) == ops::count_correct(ctx, logits.wide, labels),
        std::string(f.name) + ": count_correct");
  Pair bce = random_pair(ctx, f, {16}, 107, 3.0);
  st::Tensor targets = st::Tensor::empty({16}, st::DType::f32);
  for (int i = 0; i < 16; ++i) targets.data<float>()[i] = static_cast<float>(i % 3 == 0);
  targets = targets.to(ctx.device());
  st::Tensor db32 = f32_on(ctx, {16}), db16 = f32_on(ctx, {16});
  check_same_value(f, ops::sigmoid_bce_with_logits(ctx, bce.half, targets, db16),
                   ops::sigmoid_bce_with_logits(ctx, bce.wide, targets, db32), "sigmoid_bce_with_logits' loss");
  compare(ctx, f, db16, db32, "sigmoid_bce_with_logits dlogits");

  // Embeddings: an fp32 table looked up into 16-bit rows, and 16-bit gradients summed into an fp32 table.
  Pair table = random_pair(ctx, f, {10, 6}, 108);
  const st::Tensor ids = ints_on(ctx, {4, 0, 9, 4, 2, 4, 7, 0});
  st::Tensor e32 = f32_on(ctx, {8, 6}), e16 = half_on(ctx, f, {8, 6});
  ops::embedding_forward(ctx, table.wide, ids, e32);
  ops::embedding_forward(ctx, table.wide, ids, e16);
  compare(ctx, f, e16, e32, "embedding_forward");
  Pair de = random_pair(ctx, f, {8, 6}, 109);
  st::Tensor dt32 = f32_on(ctx, {10, 6}), dt16 = f32_on(ctx, {10, 6});
  ops::embedding_backward(ctx, ids, de.wide, dt32);
  ops::embedding_backward(ctx, ids, de.half, dt16);
  compare(ctx, f, dt16, dt32, "embedding_backward (16-bit rows summed into fp32)");
  Pair rows = random_pair(ctx, f, {2, 4, 6}, 110), pe = random_pair(ctx, f, {5, 6}, 111);
  st::Tensor tok = st::Tensor::empty({2, 4}, st::DType::i32);
  for (int i = 0; i < 8; ++i) tok.data<int32_t>()[i] = i % 4 == 3 ? 0 : i + 1;  // 0: padding
  tok = tok.to(ctx.device());
  st::Tensor te32 = f32_on(ctx, {2, 4, 6}), te16 = half_on(ctx, f, {2, 4, 6});
  ops::token_embedding_forward(ctx, rows.wide, tok, 2.5f, pe.wide, te32);
  ops::token_embedding_forward(ctx, rows.half, tok, 2.5f, pe.wide, te16);
  compare(ctx, f, te16, te32, "token_embedding_forward");
  ops::token_embedding_backward(ctx, tok, 2.5f, rows.wide, te32);
  ops::token_embedding_backward(ctx, tok, 2.5f, rows.half, te16);
  compare(ctx, f, te16, te32, "token_embedding_backward");

  // LRN across 7 channels, and the element-wise product.
  Pair l = random_pair(ctx, f, {2, 3, 3, 7}, 112), dl = random_pair(ctx, f, {2, 3, 3, 7}, 113);
  const ops::LrnParams rp;
  st::Tensor r32 = f32_on(ctx, l.wide.shape()), r16 = half_on(ctx, f, l.wide.shape());
  ops::lrn_forward(ctx, rp, l.wide, r32);
  ops::lrn_forward(ctx, rp, l.half, r16);
  compare(ctx, f, r16, r32, "lrn_forward");
  ops::lrn_backward(ctx, rp, l.wide, dl.wide, r32);
  ops::lrn_backward(ctx, rp, l.half, dl.half, r16);
  compare(ctx, f, r16, r32, "lrn_backward");
  ops::multiply_forward(ctx, l.wide, dl.wide, r32);
  ops::multiply_forward(ctx, l.half, dl.half, r16);
  compare(ctx, f, r16, r32, "multiply_forward");
  // The product as the gradient: da and db into their own tensors.
  st::Tensor da32 = f32_on(ctx, l.wide.shape()), da16 = half_on(ctx, f, l.wide.shape());
  st::Tensor mb32 = f32_on(ctx, l.wide.shape()), mb16 = half_on(ctx, f, l.wide.shape());
  ops::multiply_backward(ctx, l.wide, dl.wide, r32, da32, mb32);
  ops::multiply_backward(ctx, l.half, dl.half, r16, da16, mb16);
  compare(ctx, f, da16, da32, "multiply_backward da");
  compare(ctx, f, mb16, mb32, "multiply_backward db");

  // Image normalisation of uint8 pixels into 16-bit storage.
  st::Tensor pixels = st::Tensor::empty({2, 3, 3, 3}, st::DType::u8);
  for (int64_t i = 0; i < pixels.numel(); ++i) pixels.data<uint8_t>()[i] = static_cast<uint8_t>(i * 37 % 256);
  pixels = pixels.to(ctx.device());
  st::Tensor n32 = f32_on(ctx, {2, 3, 3, 3}), n16 = half_on(ctx, f, {2, 3, 3, 3});
  ops::normalize_images(ctx, pixels, {0.5, 0.4, 0.3}, {0.2, 0.25, 0.3}, n32, ops::ChannelOrder::reversed);
  ops::normalize_images(ctx, pixels, {0.5, 0.4, 0.3}, {0.2, 0.25, 0.3}, n16, ops::ChannelOrder::reversed);
  compare(ctx, f, n16, n32, "normalize_images");
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
  // The 16-bit run's backward takes its own forward's statistics (and, on a GPU in persistent
  // mode, that forward's reserve space), as a layer does.
  ops::batch_norm_backward(ctx, p, x.half, dy.half, gamma.wide, sm[1], si[1], dx16, dg[1], db[1]);
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

// --fuse bn-relu's op against batch norm and the ReLU, both on 16-bit tensors: y within 2 units
// (cuDNN's fused kernel sums in its own order; on the CPU the same bits), the statistics and
// parameter gradients within 1e-4 relative, dx within 2 units of batch norm's backward of the
// ReLU's mask of dy (from the fused y). On a GPU in fp16 cuDNN's fused kernel
// (CUDNN_BATCHNORM_OPS_BN_ACTIVATION) must have run; in bf16 it may refuse, and the op runs unfused.
void check_fused_bn_relu(st::Context& ctx, const Format& f) {
  const bool gpu = ctx.device() != st::Device::cpu;
  const int64_t c = 64;
  const st::Shape s{4, 7, 7, c};
  const ops::BatchNormParams p;
  Pair x = random_pair(ctx, f, s, 70, 3.0), dy = random_pair(ctx, f, s, 72);
  Pair gamma = random_pair(ctx, f, {c}, 73), beta = random_pair(ctx, f, {c}, 74);
  st::Tensor rm[2], rv[2], sm[2], si[2], dg[2], db[2];
  for (int k = 0; k < 2; ++k) channel_tensors(ctx, c, rm[k], rv[k], sm[k], si[k], dg[k], db[k]);
  st::Tensor y2 = half_on(ctx, f, s), dz2 = half_on(ctx, f, s), dx2 = half_on(ctx, f, s);
  ops::batch_norm_forward_training(ctx, p, x.half, gamma.wide, beta.wide, rm[0], rv[0], y2, sm[0], si[0]);
  ops::relu_forward(ctx, y2, y2);
  st::Tensor y1 = half_on(ctx, f, s), dx1 = half_on(ctx, f, s), reserve;
  ops::batch_norm_relu_forward_training(ctx, p, x.half, gamma.wide, beta.wide, rm[1], rv[1], y1, sm[1], si[1], reserve);
  const bool ran_fused = reserve.defined() && reserve.numel() > 0;
  std::printf("      %s: batch_norm_relu %s\n", f.name,
              ran_fused ? "ran cuDNN's fused kernel (reserve space kept)" : "ran unfused");
  if (gpu && f.dtype == st::DType::f16) check(ran_fused, std::string(f.name) + ": cuDNN's fused BN + ReLU ran in fp16");
  compare(ctx, f, y1, ops::as_f32(ctx, y2), "batch_norm_relu forward y against the two ops", 2.0);
  compare(ctx, f, rm[1], rm[0], "batch_norm_relu running mean", 0.0, 1e-4);
  compare(ctx, f, rv[1], rv[0], "batch_norm_relu running var", 0.0, 1e-4);
  compare(ctx, f, si[1], si[0], "batch_norm_relu saved inverse std", 0.0, 1e-4);
  ops::batch_norm_relu_backward(ctx, p, x.half, y1, dy.half, gamma.wide, beta.wide, sm[1], si[1], reserve, dx1, dg[1],
                                db[1]);
  ops::relu_backward(ctx, y1, dy.half, dz2);
  ops::batch_norm_backward(ctx, p, x.half, dz2, gamma.wide, sm[1], si[1], dx2, dg[0], db[0]);
  compare(ctx, f, dx1, ops::as_f32(ctx, dx2), "batch_norm_relu backward dx", 2.0);
  compare(ctx, f, dg[1], dg[0], "batch_norm_relu dgamma", 0.0, 1e-4);
  compare(ctx, f, db[1], db[0], "batch_norm_relu dbeta", 0.0, 1e-4);
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
  check_packed_paths(ctx, f.dtype, f.name);
  time_packed_paths(ctx, f.dtype, f.name);
  time_resnet_passes(ctx, f);
  check_convolution(ctx, f, 3, 4, 3, 10);   // an odd channel count, a 3x3 filter (transposed)
  check_convolution(ctx, f, 8, 16, 1, 20);  // tensor-core friendly, 1x1
  check_convolution(ctx, f, 16, 8, 3, 30);
  check_products(ctx, f);
  check_pooling(ctx, f);
  check_movement(ctx, f);
  check_rows_and_losses(ctx, f);
  check_batch_norm(ctx, f, false);
  check_batch_norm(ctx, f, true);
  check_fused_bn_add_relu(ctx, f);
  check_fused_bn_relu(ctx, f);
  ctx.set_precision(st::Precision::fp32);
}

void run_all(st::Context& ctx, int compute_major) {
  check_fused_bn_add_relu_fp32(ctx);
  check_packed_paths(ctx, st::DType::f32, "fp32");
  time_packed_paths(ctx, st::DType::f32, "fp32");
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
