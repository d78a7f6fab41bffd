// ReLU and element-wise add: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/activation.hpp"

#include "ops/cpu/activation_cpu.hpp"
#include "ops/cuda/activation_cuda.hpp"
#include "ops/op_checks.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

namespace {

// `t` is a valid tensor with the same shape as `like`.
void check_same_shape(const Context& ctx, const Tensor& t, const Tensor& like, const char* op, const char* name,
                      const char* like_name) {
  check_tensor(ctx, t, op, name);
  ST_CHECK(t.shape() == like.shape(), op << ": " << name << " has shape " << shape_string(t.shape()) << " but "
                                         << like_name << " has " << shape_string(like.shape()));
}

}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_tensor(ctx, x, "relu_forward", "x");
  check_same_shape(ctx, y, x, "relu_forward", "y", "x");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::relu_forward(ctx, x, y);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::relu_forward(ctx, x, y);
#else
      break;
#endif
  }
  no_kernel("relu_forward", ctx.device());
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_tensor(ctx, y, "relu_backward", "y");
  check_same_shape(ctx, dy, y, "relu_backward", "dy", "y");
  check_same_shape(ctx, dx, y, "relu_backward", "dx", "y");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::relu_backward(ctx, y, dy, dx);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::relu_backward(ctx, y, dy, dx);
#else
      break;
#endif
  }
  no_kernel("relu_backward", ctx.device());
}

void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  check_tensor(ctx, a, "add_forward", "a");
  check_same_shape(ctx, b, a, "add_forward", "b", "a");
  check_same_shape(ctx, y, a, "add_forward", "y", "a");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::add_forward(ctx, a, b, y);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::add_forward(ctx, a, b, y);
#else
      break;
#endif
  }
  no_kernel("add_forward", ctx.device());
}

void add_inplace(Context& ctx, Tensor& y, const Tensor& x) {
  check_tensor(ctx, y, "add_inplace", "y");
  check_same_shape(ctx, x, y, "add_inplace", "x", "y");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::add_inplace(ctx, y, x);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::add_inplace(ctx, y, x);
#else
      break;
#endif
  }
  no_kernel("add_inplace", ctx.device());
}

}  // namespace scaletrain::ops
