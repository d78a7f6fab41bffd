// (A, B, C, D) -> (A, C, B, D): argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/swap_axes.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

using SwapMiddleAxesFn = void(Context& ctx, const Tensor& x, Tensor& y);
namespace cpu {
SwapMiddleAxesFn swap_middle_axes;
}
namespace cuda {
SwapMiddleAxesFn swap_middle_axes;
}
const Op<SwapMiddleAxesFn> swap_middle_axes_op{
    "swap_middle_axes",
    {cpu::swap_middle_axes},
    with_half_storage<SwapMiddleAxesFn>({ST_CUDA_KERNEL(cuda::swap_middle_axes)})};

void swap_middle_axes(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "swap_middle_axes";
  check_tensor(ctx, x, op, "x");
  ST_CHECK(x.ndim() == 4, op << ": x must be (A, B, C, D), got " << shape_string(x.shape()));
  check_tensor(ctx, y, {x.dim(0), x.dim(2), x.dim(1), x.dim(3)}, op, "y");
  check_no_overlap(y, x, op, "y", "x");
  if (x.numel() == 0) return;
  return swap_middle_axes_op(ctx, x, y);
}

}  // namespace scaletrain::ops
