// float32 <-> fp16 / bf16: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/cast.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

using CastFn = void(Context& ctx, const Tensor& x, Tensor& y);
using RoundFn = void(Context& ctx, Tensor& x, HalfFormat format);
namespace cpu {
CastFn cast_to_half;
CastFn cast_from_half;
RoundFn round_to_half;
}  // namespace cpu
namespace cuda {
CastFn cast_to_half;
CastFn cast_from_half;
RoundFn round_to_half;
}  // namespace cuda
// No rounding at the dispatch: cast_to_half's output is 16-bit already, cast_from_half's exact.
// Both read or write 16-bit tensors themselves: they are the dispatch's widening and narrowing.
const Op<CastFn> cast_to_half_op{"cast_to_half", with_half_storage<CastFn>({cpu::cast_to_half}),
                                 with_half_storage<CastFn>({ST_CUDA_KERNEL(cuda::cast_to_half)}), AmpOutputs::none(),
                                 "f32 to f16, bf16"};
const Op<CastFn> cast_from_half_op{"cast_from_half", with_half_storage<CastFn>({cpu::cast_from_half}),
                                   with_half_storage<CastFn>({ST_CUDA_KERNEL(cuda::cast_from_half)}),
                                   AmpOutputs::none(), "f16, bf16 to f32"};
// Its output is the rounding itself: the dispatch must not round it again (nor could: it is the
// rounding the dispatch calls).
const Op<RoundFn> round_to_half_op{"round_to_half",
                                   {cpu::round_to_half},
                                   {ST_CUDA_KERNEL(cuda::round_to_half)},
                                   AmpOutputs::none(),
                                   "f32 (values of f16, bf16)"};

namespace {

// x and y defined, on the context's device, of one shape, not overlapping; `half` the one of
// them that must be 16-bit, the other f32.
void check_cast(const Context& ctx, const Tensor& x, const Tensor& y, const char* op, bool x_is_half) {
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{x, "x"}, {y, "y"}}) {
    ST_CHECK(t.defined(), op << ": " << name << " is undefined");
    ST_CHECK(t.device() == ctx.device(), op << ": " << name << " is on " << device_name(t.device())
                                            << " but the context runs on " << device_name(ctx.device()));
  }
  const Tensor& half = x_is_half ? x : y;
  const Tensor& full = x_is_half ? y : x;
  const char* half_name = x_is_half ? "x" : "y";
  const char* full_name = x_is_half ? "y" : "x";
  ST_CHECK(is_half_dtype(half.dtype()),
           op << ": " << half_name << " must be f16 or bf16, got " << dtype_name(half.dtype()));
  ST_CHECK(full.dtype() == DType::f32, op << ": " << full_name << " must be float32, got " << dtype_name(full.dtype()));
  check_shape(y, x.shape(), op, "y");
  check_no_overlap(y, x, op, "y", "x");
}

}  // namespace

void cast_to_half(Context& ctx, const Tensor& x, Tensor& y) {
  check_cast(ctx, x, y, "cast_to_half", /*x_is_half=*/false);
  if (x.numel() == 0) return;
  cast_to_half_op(ctx, x, y);
}

void cast_from_half(Context& ctx, const Tensor& x, Tensor& y) {
  check_cast(ctx, x, y, "cast_from_half", /*x_is_half=*/true);
  if (x.numel() == 0) return;
  cast_from_half_op(ctx, x, y);
}

void round_to_half(Context& ctx, Tensor& x, HalfFormat format) {
  ST_CHECK(x.defined(), "round_to_half: x is undefined");
  ST_CHECK(x.device() == ctx.device(), "round_to_half: x is on " << device_name(x.device())
                                                                 << " but the context runs on "
                                                                 << device_name(ctx.device()));
  ST_CHECK(x.dtype() == DType::f32, "round_to_half: x must be float32, got " << dtype_name(x.dtype()));
  if (x.numel() == 0) return;
  round_to_half_op(ctx, x, format);
}

Tensor as_f32(Context& ctx, const Tensor& t) {
  if (!is_half_dtype(t.dtype())) return t;
  Tensor wide = Tensor::empty(t.shape(), DType::f32, t.device());
  cast_from_half(ctx, t, wide);
  return wide;
}

}  // namespace scaletrain::ops
