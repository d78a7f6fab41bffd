// Element-wise product: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/multiply.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using MultiplyForwardFn = void(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
namespace cpu {
MultiplyForwardFn multiply_forward;
}
namespace cuda {
MultiplyForwardFn multiply_forward;
}
const Op<MultiplyForwardFn> multiply_forward_op{
    "multiply_forward",
    {cpu::multiply_forward},
    with_half_storage<MultiplyForwardFn>({ST_CUDA_KERNEL(cuda::multiply_forward)})};
using MultiplyBackwardFn = void(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                                Tensor& db);
namespace cpu {
MultiplyBackwardFn multiply_backward;
}
namespace cuda {
MultiplyBackwardFn multiply_backward;
}
const Op<MultiplyBackwardFn> multiply_backward_op{
    "multiply_backward",
    {cpu::multiply_backward},
    with_half_storage<MultiplyBackwardFn>({ST_CUDA_KERNEL(cuda::multiply_backward)})};

void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const char* op = "multiply_forward";
  check_tensor(ctx, a, op, "a");
  check_tensor(ctx, b, a.shape(), op, "b");
  check_tensor(ctx, y, a.shape(), op, "y");
  return multiply_forward_op(ctx, a, b, y);
}

void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) {
  const char* op = "multiply_backward";
  check_tensor(ctx, a, op, "a");
  check_tensor(ctx, b, a.shape(), op, "b");
  check_tensor(ctx, dy, a.shape(), op, "dy");
  check_tensor(ctx, da, a.shape(), op, "da");
  check_tensor(ctx, db, a.shape(), op, "db");
  ST_CHECK(da.raw() != db.raw(), op << ": da and db must be different tensors");
  return multiply_backward_op(ctx, a, b, dy, da, db);
}

}  // namespace scaletrain::ops
