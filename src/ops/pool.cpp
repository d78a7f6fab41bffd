// Max pooling and global average pooling: argument checks and per-device dispatch.
// The kernels live in src/ops/<device>/.
#include "scaletrain/ops/pool.hpp"

#include "ops/cpu/pool_cpu.hpp"
#include "ops/cuda/pool_cuda.hpp"
#include "ops/op_checks.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

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
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::max_pool2d_forward(ctx, p, x, y);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::max_pool2d_forward(ctx, p, x, y);
#else
      break;
#endif
  }
  no_kernel(op, ctx.device());
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
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::max_pool2d_backward(ctx, p, x, y, dy, dx);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::max_pool2d_backward(ctx, p, x, y, dy, dx);
#else
      break;
#endif
  }
  no_kernel(op, ctx.device());
}

void global_avg_pool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "global_avg_pool_forward";
  check_tensor(ctx, x, op, "x");
  check_nhwc(x, op, "x");
  ST_CHECK(x.dim(1) > 0 && x.dim(2) > 0, op << ": x has no pixels: " << shape_string(x.shape()));
  check_tensor(ctx, y, op, "y");
  check_shape(y, {x.dim(0), x.dim(3)}, op, "y");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::global_avg_pool_forward(ctx, x, y);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::global_avg_pool_forward(ctx, x, y);
#else
      break;
#endif
  }
  no_kernel(op, ctx.device());
}

void global_avg_pool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "global_avg_pool_backward";
  check_tensor(ctx, dx, op, "dx");
  check_nhwc(dx, op, "dx");
  ST_CHECK(dx.dim(1) > 0 && dx.dim(2) > 0, op << ": dx has no pixels: " << shape_string(dx.shape()));
  check_tensor(ctx, dy, op, "dy");
  check_shape(dy, {dx.dim(0), dx.dim(3)}, op, "dy");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::global_avg_pool_backward(ctx, dy, dx);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::global_avg_pool_backward(ctx, dy, dx);
#else
      break;
#endif
  }
  no_kernel(op, ctx.device());
}

}  // namespace scaletrain::ops
