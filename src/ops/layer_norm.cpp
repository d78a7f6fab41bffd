// Layer normalisation over the last dimension: argument checks and per-device dispatch. Kernels
// in src/ops/<device>/.
#include "scaletrain/ops/layer_norm.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using LayerNormForwardFn = void(Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& gamma,
                                const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_rstd);
namespace cpu {
LayerNormForwardFn layer_norm_forward;
}
namespace cuda {
LayerNormForwardFn layer_norm_forward;
}
const Op<LayerNormForwardFn> layer_norm_forward_op{
    "layer_norm_forward",
    {cpu::layer_norm_forward},
    with_half_storage<LayerNormForwardFn>({ST_CUDA_KERNEL(cuda::layer_norm_forward)}),
    AmpOutputs::only(0)};  // y; the saved statistics stay fp32
using LayerNormBackwardFn = void(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                 const Tensor& saved_mean, const Tensor& saved_rstd, Tensor& dx, Tensor& dgamma,
                                 Tensor& dbeta);
namespace cpu {
LayerNormBackwardFn layer_norm_backward;
}
namespace cuda {
LayerNormBackwardFn layer_norm_backward;
}
const Op<LayerNormBackwardFn> layer_norm_backward_op{
    "layer_norm_backward",
    {cpu::layer_norm_backward},
    with_half_storage<LayerNormBackwardFn>({ST_CUDA_KERNEL(cuda::layer_norm_backward)}),
    AmpOutputs::only(0)};  // dx; dgamma and dbeta stay fp32

namespace {

// x is (..., D) with D >= 1; returns {M, D}.
Shape rows_and_width(const Tensor& x, const char* op) {
  ST_CHECK(x.ndim() >= 1 && x.dim(-1) >= 1, op << ": x must be (..., D) with D >= 1, got " << shape_string(x.shape()));
  return {x.numel() / x.dim(-1), x.dim(-1)};
}

}  // namespace

void layer_norm_forward(Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_rstd) {
  const char* op = "layer_norm_forward";
  ST_CHECK(std::isfinite(p.eps) && p.eps > 0.0f, op << ": eps must be finite and > 0, got " << p.eps);
  check_tensor(ctx, x, op, "x");
  const Shape md = rows_and_width(x, op);
  check_tensor(ctx, gamma, {md[1]}, op, "gamma");
  check_tensor(ctx, beta, {md[1]}, op, "beta");
  check_tensor(ctx, y, x.shape(), op, "y");
  check_tensor(ctx, saved_mean, {md[0]}, op, "saved_mean");
  check_tensor(ctx, saved_rstd, {md[0]}, op, "saved_rstd");
  check_no_overlap(y, x, op, "y", "x");
  check_no_overlap(y, gamma, op, "y", "gamma");
  check_no_overlap(y, beta, op, "y", "beta");
  return layer_norm_forward_op(ctx, p, x, gamma, beta, y, saved_mean, saved_rstd);
}

void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                         const Tensor& saved_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const char* op = "layer_norm_backward";
  check_tensor(ctx, x, op, "x");
  const Shape md = rows_and_width(x, op);
  check_tensor(ctx, dy, x.shape(), op, "dy");
  check_tensor(ctx, gamma, {md[1]}, op, "gamma");
  check_tensor(ctx, saved_mean, {md[0]}, op, "saved_mean");
  check_tensor(ctx, saved_rstd, {md[0]}, op, "saved_rstd");
  check_tensor(ctx, dx, x.shape(), op, "dx");
  check_tensor(ctx, dgamma, {md[1]}, op, "dgamma");
  check_tensor(ctx, dbeta, {md[1]}, op, "dbeta");
  for (const Tensor* in : {&x, &dy, &gamma}) {
    check_no_overlap(dx, *in, op, "dx", "an input");
    check_no_overlap(dgamma, *in, op, "dgamma", "an input");
    check_no_overlap(dbeta, *in, op, "dbeta", "an input");
  }
  return layer_norm_backward_op(ctx, x, dy, gamma, saved_mean, saved_rstd, dx, dgamma, dbeta);
}

}  // namespace scaletrain::ops
