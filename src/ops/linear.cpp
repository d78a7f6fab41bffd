// linear: argument checks and per-device dispatch. The kernels live in src/ops/<device>/.
#include "scaletrain/ops/linear.hpp"

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using LinearForwardFn = void(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
namespace cpu {
LinearForwardFn linear_forward;
}
namespace cuda {
LinearForwardFn linear_forward;
}
const Op<LinearForwardFn> linear_forward_op{"linear_forward",
                                            {cpu::linear_forward},
                                            with_half_storage<LinearForwardFn>({ST_CUDA_KERNEL(cuda::linear_forward)})};
using LinearBackwardFn = void(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                              Tensor& db);
namespace cpu {
LinearBackwardFn linear_backward;
}
namespace cuda {
LinearBackwardFn linear_backward;
}
const Op<LinearBackwardFn> linear_backward_op{
    "linear_backward",
    {cpu::linear_backward},
    with_half_storage<LinearBackwardFn>({ST_CUDA_KERNEL(cuda::linear_backward)})};
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
  count_macs(s[0] * s[1] * s[2]);
  return linear_forward_op(ctx, x, w, b, y);
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
  return linear_backward_op(ctx, x, w, dy, dx, dw, db);
}

}  // namespace scaletrain::ops
