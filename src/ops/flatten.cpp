// Flatten in NCHW order: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/flatten.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using FlattenChwForwardFn = void(Context& ctx, const Tensor& x, Tensor& y);
namespace cpu {
FlattenChwForwardFn flatten_chw_forward;
}
namespace cuda {
FlattenChwForwardFn flatten_chw_forward;
}
const Op<FlattenChwForwardFn> flatten_chw_forward_op{
    "flatten_chw_forward",
    {cpu::flatten_chw_forward},
    with_half_storage<FlattenChwForwardFn>({ST_CUDA_KERNEL(cuda::flatten_chw_forward)})};
using FlattenChwBackwardFn = void(Context& ctx, const Tensor& dy, Tensor& dx);
namespace cpu {
FlattenChwBackwardFn flatten_chw_backward;
}
namespace cuda {
FlattenChwBackwardFn flatten_chw_backward;
}
const Op<FlattenChwBackwardFn> flatten_chw_backward_op{
    "flatten_chw_backward",
    {cpu::flatten_chw_backward},
    with_half_storage<FlattenChwBackwardFn>({ST_CUDA_KERNEL(cuda::flatten_chw_backward)})};

namespace {

// The (N, H, W, C) side, and the (N, C*H*W) shape of the other.
Shape flat_shape(const Tensor& t, const char* op, const char* name) {
  ST_CHECK(t.ndim() == 4, op << ": " << name << " must be (N, H, W, C), got " << shape_string(t.shape()));
  return {t.dim(0), t.dim(1) * t.dim(2) * t.dim(3)};
}

}  // namespace

void flatten_chw_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "flatten_chw_forward";
  check_tensor(ctx, x, op, "x");
  check_tensor(ctx, y, flat_shape(x, op, "x"), op, "y");
  check_no_overlap(y, x, op, "y", "x");
  return flatten_chw_forward_op(ctx, x, y);
}

void flatten_chw_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "flatten_chw_backward";
  check_tensor(ctx, dx, op, "dx");
  check_tensor(ctx, dy, flat_shape(dx, op, "dx"), op, "dy");
  check_no_overlap(dx, dy, op, "dx", "dy");
  return flatten_chw_backward_op(ctx, dy, dx);
}

}  // namespace scaletrain::ops
