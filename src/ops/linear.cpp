// linear: argument checks and per-device dispatch. The kernels live in src/ops/<device>/.
#include "scaletrain/ops/linear.hpp"

#include "ops/cpu/linear_cpu.hpp"
#include "ops/cuda/linear_cuda.hpp"
#include "ops/op_checks.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {
namespace {

// Checks x (N, IN) and w (OUT, IN) and returns {N, IN, OUT}.
Shape linear_sizes(const Tensor& x, const Tensor& w, const char* op) {
  ST_CHECK(x.defined() && x.ndim() == 2,
           op << ": input must be (N, IN), got " << (x.defined() ? shape_string(x.shape()) : "undefined"));
  ST_CHECK(w.defined() && w.ndim() == 2,
           op << ": weight must be (OUT, IN), got " << (w.defined() ? shape_string(w.shape()) : "undefined"));
  ST_CHECK(x.dim(1) == w.dim(1), op << ": input " << shape_string(x.shape()) << " has " << x.dim(1)
                                    << " features but weight " << shape_string(w.shape()) << " expects " << w.dim(1));
  return {x.dim(0), x.dim(1), w.dim(0)};
}

}  // namespace

void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const char* op = "linear_forward";
  const Shape s = linear_sizes(x, w, op);
  check_tensor(ctx, x, {s[0], s[1]}, op, "x");
  check_tensor(ctx, w, {s[2], s[1]}, op, "w");
  check_tensor(ctx, b, {s[2]}, op, "b");
  check_tensor(ctx, y, {s[0], s[2]}, op, "y");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::linear_forward(ctx, x, w, b, y);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::linear_forward(ctx, x, w, b, y);
#else
      break;
#endif
  }
  no_kernel(op, ctx.device());
}

void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db) {
  const char* op = "linear_backward";
  const Shape s = linear_sizes(x, w, op);
  check_tensor(ctx, x, {s[0], s[1]}, op, "x");
  check_tensor(ctx, w, {s[2], s[1]}, op, "w");
  check_tensor(ctx, dy, {s[0], s[2]}, op, "dy");
  if (dx.defined()) check_tensor(ctx, dx, {s[0], s[1]}, op, "dx");
  check_tensor(ctx, dw, {s[2], s[1]}, op, "dw");
  check_tensor(ctx, db, {s[2]}, op, "db");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::linear_backward(ctx, x, w, dy, dx, dw, db);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::linear_backward(ctx, x, w, dy, dx, dw, db);
#else
      break;
#endif
  }
  no_kernel(op, ctx.device());
}

}  // namespace scaletrain::ops
