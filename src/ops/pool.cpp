// Max pooling and global average pooling: argument checks and per-device dispatch.
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
    "max_pool2d_forward", {cpu::max_pool2d_forward}, {ST_CUDA_KERNEL(cuda::max_pool2d_forward)}};
using MaxPool2dBackwardFn = void(Context& ctx, const MaxPool2dParams& p, const Tensor& x, const Tensor& y,
                                 const Tensor& dy, Tensor& dx);
namespace cpu {
MaxPool2dBackwardFn max_pool2d_backward;
}
namespace cuda {
MaxPool2dBackwardFn max_pool2d_backward;
}
const Op<MaxPool2dBackwardFn> max_pool2d_backward_op{
    "max_pool2d_backward", {cpu::max_pool2d_backward}, {ST_CUDA_KERNEL(cuda::max_pool2d_backward)}};
using GlobalAvgPoolForwardFn = void(Context& ctx, const Tensor& x, Tensor& y);
namespace cpu {
GlobalAvgPoolForwardFn global_avg_pool_forward;
}
namespace cuda {
GlobalAvgPoolForwardFn global_avg_pool_forward;
}
const Op<GlobalAvgPoolForwardFn> global_avg_pool_forward_op{
    "global_avg_pool_forward", {cpu::global_avg_pool_forward}, {ST_CUDA_KERNEL(cuda::global_avg_pool_forward)}};
using GlobalAvgPoolBackwardFn = void(Context& ctx, const Tensor& dy, Tensor& dx);
namespace cpu {
GlobalAvgPoolBackwardFn global_avg_pool_backward;
}
namespace cuda {
GlobalAvgPoolBackwardFn global_avg_pool_backward;
}
const Op<GlobalAvgPoolBackwardFn> global_avg_pool_backward_op{
    "global_avg_pool_backward", {cpu::global_avg_pool_backward}, {ST_CUDA_KERNEL(cuda::global_avg_pool_backward)}};

namespace {

void check_nhwc(const Tensor& t, const char* op, const char* name) {
  ST_CHECK(t.ndim() == 4, op << ": " << name << " must be (N, H, W, C), got " << shape_string(t.shape()));
}

}  // namespace

Shape max_pool2d_output_shape(const MaxPool2dParams& p, const Shape& x) {
  ST_CHECK(x.size() == 4, "max_pool2d: input must be (N, H, W, C), got " << shape_string(x));
  ST_CHECK(p.kernel >= 1, "max_pool2d: kernel must be >= 1, got " << p.kernel);
  ST_CHECK(p.stride >= 1, "max_pool2d: stride must be >= 1, got " << p.stride);
  // As PyTorch: more padding would allow windows that see only padding.
  ST_CHECK(p.padding >= 0 && 2 * p.padding <= p.kernel,
           "max_pool2d: padding must be between 0 and half the kernel (" << p.kernel << "), got " << p.padding);
  const int64_t oh = x[1] + 2 * p.padding - p.kernel;
  const int64_t ow = x[2] + 2 * p.padding - p.kernel;
  ST_CHECK(oh >= 0 && ow >= 0, "max_pool2d: kernel " << p.kernel << "x" << p.kernel
                                                     << " is larger than the padded input " << x[1] + 2 * p.padding
                                                     << "x" << x[2] + 2 * p.padding);
  return {x[0], oh / p.stride + 1, ow / p.stride + 1, x[3]};
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
