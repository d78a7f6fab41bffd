// Max, average, adaptive average and global average pooling: argument checks and per-device dispatch.
// The kernels live in src/ops/<device>/.
#include "scaletrain/ops/pool.hpp"

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using MaxPool2dForwardFn = void(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y);
namespace cpu {
MaxPool2dForwardFn max_pool2d_forward;
}
namespace cuda {
MaxPool2dForwardFn max_pool2d_forward;
}
const Op<MaxPool2dForwardFn> max_pool2d_forward_op{
    "max_pool2d_forward",
    {cpu::max_pool2d_forward},
    with_half_storage<MaxPool2dForwardFn>({ST_CUDA_KERNEL(cuda::max_pool2d_forward)})};
using MaxPool2dBackwardFn = void(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y,
                                 const Tensor& dy, Tensor& dx);
namespace cpu {
MaxPool2dBackwardFn max_pool2d_backward;
}
namespace cuda {
MaxPool2dBackwardFn max_pool2d_backward;
}
const Op<MaxPool2dBackwardFn> max_pool2d_backward_op{
    "max_pool2d_backward",
    {cpu::max_pool2d_backward},
    with_half_storage<MaxPool2dBackwardFn>({ST_CUDA_KERNEL(cuda::max_pool2d_backward)})};
using AvgPool2dForwardFn = void(Context& ctx, const AvgPool2dParams& p, const Tensor& x, Tensor& y);
namespace cpu {
AvgPool2dForwardFn avg_pool2d_forward;
}
namespace cuda {
AvgPool2dForwardFn avg_pool2d_forward;
}
const Op<AvgPool2dForwardFn> avg_pool2d_forward_op{
    "avg_pool2d_forward",
    {cpu::avg_pool2d_forward},
    with_half_storage<AvgPool2dForwardFn>({ST_CUDA_KERNEL(cuda::avg_pool2d_forward)})};
using AvgPool2dBackwardFn = void(Context& ctx, const AvgPool2dParams& p, const Tensor& dy, Tensor& dx);
namespace cpu {
AvgPool2dBackwardFn avg_pool2d_backward;
}
namespace cuda {
AvgPool2dBackwardFn avg_pool2d_backward;
}
const Op<AvgPool2dBackwardFn> avg_pool2d_backward_op{
    "avg_pool2d_backward",
    {cpu::avg_pool2d_backward},
    with_half_storage<AvgPool2dBackwardFn>({ST_CUDA_KERNEL(cuda::avg_pool2d_backward)})};
using AdaptiveAvgPool2dForwardFn = void(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& x, Tensor& y);
namespace cpu {
AdaptiveAvgPool2dForwardFn adaptive_avg_pool2d_forward;
}
namespace cuda {
AdaptiveAvgPool2dForwardFn adaptive_avg_pool2d_forward;
}
const Op<AdaptiveAvgPool2dForwardFn> adaptive_avg_pool2d_forward_op{
    "adaptive_avg_pool2d_forward",
    {cpu::adaptive_avg_pool2d_forward},
    with_half_storage<AdaptiveAvgPool2dForwardFn>({ST_CUDA_KERNEL(cuda::adaptive_avg_pool2d_forward)})};
using AdaptiveAvgPool2dBackwardFn = void(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& dy, Tensor& dx);
namespace cpu {
AdaptiveAvgPool2dBackwardFn adaptive_avg_pool2d_backward;
}
namespace cuda {
AdaptiveAvgPool2dBackwardFn adaptive_avg_pool2d_backward;
}
const Op<AdaptiveAvgPool2dBackwardFn> adaptive_avg_pool2d_backward_op{
    "adaptive_avg_pool2d_backward",
    {cpu::adaptive_avg_pool2d_backward},
    with_half_storage<AdaptiveAvgPool2dBackwardFn>({ST_CUDA_KERNEL(cuda::adaptive_avg_pool2d_backward)})};
using GlobalAvgPoolForwardFn = void(Context& ctx, const Tensor& x, Tensor& y);
namespace cpu {
GlobalAvgPoolForwardFn global_avg_pool_forward;
}
namespace cuda {
GlobalAvgPoolForwardFn global_avg_pool_forward;
}
const Op<GlobalAvgPoolForwardFn> global_avg_pool_forward_op{
    "global_avg_pool_forward",
    {cpu::global_avg_pool_forward},
    with_half_storage<GlobalAvgPoolForwardFn>({ST_CUDA_KERNEL(cuda::global_avg_pool_forward)})};
using GlobalAvgPoolBackwardFn = void(Context& ctx, const Tensor& dy, Tensor& dx);
namespace cpu {
GlobalAvgPoolBackwardFn global_avg_pool_backward;
}
namespace cuda {
GlobalAvgPoolBackwardFn global_avg_pool_backward;
}
const Op<GlobalAvgPoolBackwardFn> global_avg_pool_backward_op{
    "global_avg_pool_backward",
    {cpu::global_avg_pool_backward},
    with_half_storage<GlobalAvgPoolBackwardFn>({ST_CUDA_KERNEL(cuda::global_avg_pool_backward)})};

namespace {

void check_nhwc(const Tensor& t, const char* op, const char* name) {
  ST_CHECK(t.ndim() == 4, op << ": " << name << " must be (N, H, W, C), got " << shape_string(t.shape()));
}

// PyTorch's pooling_output_shape for one axis: the span is >= 0 (checked), so / is floor.
int64_t pooled_size(int64_t in, int kernel, int stride, int padding, bool ceil_mode) {
  const int64_t span = in + 2 * padding - kernel;
  int64_t out = (ceil_mode ? span + stride - 1 : span) / stride + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;
  return out;
}

// The output shape of a square pooling window over x (N, H, W, C), with PyTorch's checks.
Shape pooled_shape(const char* op, int kernel, int stride, int padding, bool ceil_mode, const Shape& x) {
  ST_CHECK(x.size() == 4, op << ": input must be (N, H, W, C), got " << shape_string(x));
  ST_CHECK(kernel >= 1, op << ": kernel must be >= 1, got " << kernel);
  ST_CHECK(stride >= 1, op << ": stride must be >= 1, got " << stride);
  // As PyTorch: more padding would allow windows that see only padding.
  ST_CHECK(padding >= 0 && 2 * padding <= kernel,
           op << ": padding must be between 0 and half the kernel (" << kernel << "), got " << padding);
  ST_CHECK(x[1] + 2 * padding >= kernel && x[2] + 2 * padding >= kernel,
           op << ": kernel " << kernel << "x" << kernel << " is larger than the padded input " << x[1] + 2 * padding
              << "x" << x[2] + 2 * padding);
  return {x[0], pooled_size(x[1], kernel, stride, padding, ceil_mode),
          pooled_size(x[2], kernel, stride, padding, ceil_mode), x[3]};
}

}  // namespace

Shape max_pool2d_output_shape(const MaxPool2dParams& p, const Shape& x) {
  return pooled_shape("max_pool2d", p.kernel, p.stride, p.padding, p.ceil_mode, x);
}

Shape avg_pool2d_output_shape(const AvgPool2dParams& p, const Shape& x) {
  return pooled_shape("avg_pool2d", p.kernel, p.stride, p.padding, p.ceil_mode, x);
}

Shape adaptive_avg_pool2d_output_shape(const AdaptiveAvgPool2dParams& p, const Shape& x) {
  ST_CHECK(x.size() == 4, "adaptive_avg_pool2d: input must be (N, H, W, C), got " << shape_string(x));
  ST_CHECK(p.out_h >= 1 && p.out_w >= 1,
           "adaptive_avg_pool2d: output size must be >= 1, got " << p.out_h << "x" << p.out_w);
  ST_CHECK(x[1] >= 1 && x[2] >= 1, "adaptive_avg_pool2d: input has no pixels: " << shape_string(x));
  return {x[0], p.out_h, p.out_w, x[3]};
}

void max_pool2d_forward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, Tensor& y) {
  const char* op = "max_pool2d_forward";
  check_tensor(ctx, x, op, "x");
  check_tensor(ctx, y, op, "y");
  check_shape(y, max_pool2d_output_shape(p, x.shape()), op, "y");
  return max_pool2d_forward_op(ctx, p, x, y);
}

void max_pool2d_backward(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx) {
  const char* op = "max_pool2d_backward";
  check_tensor(ctx, x, op, "x");
  check_tensor(ctx, y, op, "y");
  check_tensor(ctx, dy, op, "dy");
  check_tensor(ctx, dx, op, "dx");
  const Shape out = max_pool2d_output_shape(p, x.shape());
  check_shape(y, out, op, "y");
  check_shape(dy, out, op, "dy");
  check_shape(dx, x.shape(), op, "dx");
  return max_pool2d_backward_op(ctx, p, x, y, dy, dx);
}

void avg_pool2d_forward(Context& ctx, const AvgPool2dParams& p, const Tensor& x, Tensor& y) {
  const char* op = "avg_pool2d_forward";
  check_tensor(ctx, x, op, "x");
  check_tensor(ctx, y, op, "y");
  check_shape(y, avg_pool2d_output_shape(p, x.shape()), op, "y");
  return avg_pool2d_forward_op(ctx, p, x, y);
}

void avg_pool2d_backward(Context& ctx, const AvgPool2dParams& p, const Tensor& dy, Tensor& dx) {
  const char* op = "avg_pool2d_backward";
  check_tensor(ctx, dy, op, "dy");
  check_tensor(ctx, dx, op, "dx");
  check_nhwc(dx, op, "dx");
  check_shape(dy, avg_pool2d_output_shape(p, dx.shape()), op, "dy");
  return avg_pool2d_backward_op(ctx, p, dy, dx);
}

void adaptive_avg_pool2d_forward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& x, Tensor& y) {
  const char* op = "adaptive_avg_pool2d_forward";
  check_tensor(ctx, x, op, "x");
  check_tensor(ctx, y, op, "y");
  check_shape(y, adaptive_avg_pool2d_output_shape(p, x.shape()), op, "y");
  return adaptive_avg_pool2d_forward_op(ctx, p, x, y);
}

void adaptive_avg_pool2d_backward(Context& ctx, const AdaptiveAvgPool2dParams& p, const Tensor& dy, Tensor& dx) {
  const char* op = "adaptive_avg_pool2d_backward";
  check_tensor(ctx, dy, op, "dy");
  check_tensor(ctx, dx, op, "dx");
  check_nhwc(dx, op, "dx");
  check_shape(dy, adaptive_avg_pool2d_output_shape(p, dx.shape()), op, "dy");
  return adaptive_avg_pool2d_backward_op(ctx, p, dy, dx);
}

void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "global_avg_pool_forward";
  check_tensor(ctx, x, op, "x");
  check_nhwc(x, op, "x");
  ST_CHECK(x.dim(1) > 0 && x.dim(2) > 0, op << ": x has no pixels: " << shape_string(x.shape()));
  check_tensor(ctx, y, op, "y");
  check_shape(y, {x.dim(0), x.dim(3)}, op, "y");
  return global_avg_pool_forward_op(ctx, x, y);
}

void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "global_avg_pool_backward";
  check_tensor(ctx, dx, op, "dx");
  check_nhwc(dx, op, "dx");
  ST_CHECK(dx.dim(1) > 0 && dx.dim(2) > 0, op << ": dx has no pixels: " << shape_string(dx.shape()));
  check_tensor(ctx, dy, op, "dy");
  check_shape(dy, {dx.dim(0), dx.dim(3)}, op, "dy");
  return global_avg_pool_backward_op(ctx, dy, dx);
}

}  // namespace scaletrain::ops
