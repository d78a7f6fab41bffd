// conv2d: argument checks and per-device dispatch. The kernels live in src/ops/<device>/.
#include "scaletrain/ops/conv2d.hpp"

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using Conv2dForwardFn = void(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                             Tensor& y);
namespace cpu {
Conv2dForwardFn conv2d_forward;
}
namespace cuda {
Conv2dForwardFn conv2d_forward;
}
const Op<Conv2dForwardFn> conv2d_forward_op{"conv2d_forward",
                                            {cpu::conv2d_forward},
                                            with_half_storage<Conv2dForwardFn>({ST_CUDA_KERNEL(cuda::conv2d_forward)})};
namespace cpu {
Conv2dForwardFn conv2d_bias_relu_forward;
}
namespace cuda {
Conv2dForwardFn conv2d_bias_relu_forward;
}
const Op<Conv2dForwardFn> conv2d_bias_relu_forward_op{
    "conv2d_bias_relu_forward",
    {cpu::conv2d_bias_relu_forward},
    with_half_storage<Conv2dForwardFn>({ST_CUDA_KERNEL(cuda::conv2d_bias_relu_forward)})};
using Conv2dBnStatsForwardFn = void(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale,
                                    const Tensor& bias, const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum);
namespace cpu {
Conv2dBnStatsForwardFn conv2d_bn_stats_forward;
}
namespace cuda {
Conv2dBnStatsForwardFn conv2d_bn_stats_forward;
}
// cuDNN's fused engines reduce the statistics across thread blocks in an order they do not
// document as fixed.
const Op<Conv2dBnStatsForwardFn> conv2d_bn_stats_forward_op{
    "conv2d_bn_stats_forward",
    {cpu::conv2d_bn_stats_forward},
    with_half_storage<Conv2dBnStatsForwardFn>({ST_CUDA_KERNEL(cuda::conv2d_bn_stats_forward), false}),
    AmpOutputs::only(0)};  // y; the sums stay fp32
using Conv2dBackwardDataFn = void(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
namespace cpu {
Conv2dBackwardDataFn conv2d_backward_data;
}
namespace cuda {
Conv2dBackwardDataFn conv2d_backward_data;
}
// cuDNN's backward passes prefer a deterministic algorithm but take another (atomics) where none
// fits the workspace: not deterministic as a promise.
const Op<Conv2dBackwardDataFn> conv2d_backward_data_op{
    "conv2d_backward_data",
    {cpu::conv2d_backward_data},
    with_half_storage<Conv2dBackwardDataFn>({ST_CUDA_KERNEL(cuda::conv2d_backward_data), false})};
namespace cpu {
Conv2dBackwardDataFn conv2d_backward_data_add;
}
namespace cuda {
Conv2dBackwardDataFn conv2d_backward_data_add;
}
const Op<Conv2dBackwardDataFn> conv2d_backward_data_add_op{
    "conv2d_backward_data_add",
    {cpu::conv2d_backward_data_add},
    with_half_storage<Conv2dBackwardDataFn>({ST_CUDA_KERNEL(cuda::conv2d_backward_data_add), false})};
using Conv2dBackwardFilterFn = void(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                                    Tensor& db);
namespace cpu {
Conv2dBackwardFilterFn conv2d_backward_filter;
}
namespace cuda {
Conv2dBackwardFilterFn conv2d_backward_filter;
}
const Op<Conv2dBackwardFilterFn> conv2d_backward_filter_op{
    "conv2d_backward_filter",
    {cpu::conv2d_backward_filter},
    with_half_storage<Conv2dBackwardFilterFn>({ST_CUDA_KERNEL(cuda::conv2d_backward_filter), false})};

Shape conv2d_output_shape(const Conv2dParams& p, const Shape& x, const Shape& w) {
  ST_CHECK(x.size() == 4, "conv2d: input must be (N, H, W, C), got " << shape_string(x));
  ST_CHECK(w.size() == 4, "conv2d: weight must be (O, C / groups, KH, KW), got " << shape_string(w));
  ST_CHECK(p.stride_h >= 1 && p.stride_w >= 1,
           "conv2d: stride must be >= 1, got " << p.stride_h << "x" << p.stride_w << " (height x width)");
  ST_CHECK(p.pad_top >= 0 && p.pad_bottom >= 0 && p.pad_left >= 0 && p.pad_right >= 0,
           "conv2d: padding must be >= 0, got top " << p.pad_top << ", bottom " << p.pad_bottom << ", left "
                                                    << p.pad_left << ", right " << p.pad_right);
  ST_CHECK(p.groups >= 1, "conv2d: groups must be >= 1, got " << p.groups);
  ST_CHECK(x[3] % p.groups == 0,
           "conv2d: the input's " << x[3] << " channels are not divisible by groups " << p.groups);
  ST_CHECK(w[0] % p.groups == 0, "conv2d: weight " << shape_string(w) << " has " << w[0]
                                                   << " output channels, not divisible by groups " << p.groups);
  ST_CHECK(x[3] / p.groups == w[1], "conv2d: input " << shape_string(x) << " has " << x[3] << " channels but weight "
                                                     << shape_string(w) << " expects " << w[1] * p.groups << " (groups "
                                                     << p.groups << ")");
  ST_CHECK(w[0] > 0 && w[2] > 0 && w[3] > 0, "conv2d: empty weight " << shape_string(w));
  const int64_t padded_h = x[1] + p.pad_top + p.pad_bottom, padded_w = x[2] + p.pad_left + p.pad_right;
  ST_CHECK(padded_h >= w[2] && padded_w >= w[3], "conv2d: kernel " << w[2] << "x" << w[3]
                                                                   << " is larger than the padded input " << padded_h
                                                                   << "x" << padded_w);
  return {x[0], (padded_h - w[2]) / p.stride_h + 1, (padded_w - w[3]) / p.stride_w + 1, w[0]};
}

namespace {
// An optional bias or bias gradient: (O) where defined.
void check_bias(const Context& ctx, const Tensor& b, int64_t channels, const char* op, const char* name) {
  if (b.defined()) check_tensor(ctx, b, {channels}, op, name);
}
}  // namespace

namespace {
// The forward ops' checks, and their multiply-adds: per output element, one per weight of its
// group (w is (O, C / groups, KH, KW)).
void check_forward(const Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                   const Tensor& y, const char* op) {
  check_tensor(ctx, x, op, "x");
  check_tensor(ctx, w, op, "w");
  check_tensor(ctx, y, op, "y");
  check_shape(y, conv2d_output_shape(p, x.shape(), w.shape()), op, "y");
  check_bias(ctx, b, w.dim(0), op, "b");
  count_macs(y.numel() * w.dim(1) * w.dim(2) * w.dim(3));
}
}  // namespace

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  check_forward(ctx, p, x, w, b, y, "conv2d_forward");
  return conv2d_forward_op(ctx, p, x, w, b, y);
}

void conv2d_bias_relu_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                              Tensor& y) {
  ST_CHECK(b.defined(), "conv2d_bias_relu_forward: needs a bias (a convolution without one runs conv2d_forward)");
  check_forward(ctx, p, x, w, b, y, "conv2d_bias_relu_forward");
  return conv2d_bias_relu_forward_op(ctx, p, x, w, b, y);
}

void conv2d_bn_stats_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale,
                             const Tensor& bias, const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum) {
  const char* op = "conv2d_bn_stats_forward";
  check_forward(ctx, p, x, w, Tensor(), y, op);
  ST_CHECK(p.groups == 1, op << ": one group only, got groups " << p.groups);
  ST_CHECK(scale.defined() == bias.defined(), op << ": the prologue needs both scale and bias, or neither");
  if (scale.defined()) {
    check_tensor(ctx, scale, {x.dim(3)}, op, "scale");
    check_tensor(ctx, bias, {x.dim(3)}, op, "bias");
    ST_CHECK(scale.dtype() == DType::f32 && bias.dtype() == DType::f32, op << ": scale and bias must be float32");
  }
  check_tensor(ctx, sum, {w.dim(0)}, op, "sum");
  check_tensor(ctx, sqsum, {w.dim(0)}, op, "sqsum");
  ST_CHECK(sum.dtype() == DType::f32 && sqsum.dtype() == DType::f32, op << ": sum and sqsum must be float32");
  check_no_overlap(y, x, op, "y", "x");
  return conv2d_bn_stats_forward_op(ctx, p, x, scale, bias, w, y, sum, sqsum);
}

namespace {
void check_backward_data(const Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, const Tensor& dx,
                         const char* op) {
  check_tensor(ctx, dy, op, "dy");
  check_tensor(ctx, w, op, "w");
  check_tensor(ctx, dx, op, "dx");
  check_shape(dy, conv2d_output_shape(p, dx.shape(), w.shape()), op, "dy");
}
}  // namespace

void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  check_backward_data(ctx, p, dy, w, dx, "conv2d_backward_data");
  return conv2d_backward_data_op(ctx, p, dy, w, dx);
}

void conv2d_backward_data_add(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  const char* op = "conv2d_backward_data_add";
  check_backward_data(ctx, p, dy, w, dx, op);
  check_no_overlap(dx, dy, op, "dx", "dy");  // dx is read as it is written
  return conv2d_backward_data_add_op(ctx, p, dy, w, dx);
}

void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                            Tensor& db) {
  check_tensor(ctx, x, "conv2d_backward_filter", "x");
  check_tensor(ctx, dy, "conv2d_backward_filter", "dy");
  check_tensor(ctx, dw, "conv2d_backward_filter", "dw");
  check_shape(dy, conv2d_output_shape(p, x.shape(), dw.shape()), "conv2d_backward_filter", "dy");
  check_bias(ctx, db, dw.dim(0), "conv2d_backward_filter", "db");
  return conv2d_backward_filter_op(ctx, p, x, dy, dw, db);
}

}  // namespace scaletrain::ops
