// adam_update and lazy_adam_update: argument checks and the dispatch points. Kernels in
// src/ops/<device>/.
#include "scaletrain/ops/adam.hpp"

#include "ops/op.hpp"

namespace scaletrain::ops {

using AdamUpdateFn = void(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v);
using LazyAdamUpdateFn = void(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m,
                              Tensor& v, int64_t row_width);
namespace cpu {
AdamUpdateFn adam_update;
LazyAdamUpdateFn lazy_adam_update;
}  // namespace cpu
namespace cuda {
AdamUpdateFn adam_update;
LazyAdamUpdateFn lazy_adam_update;
}  // namespace cuda
// Optimizer updates work on the fp32 master weights and state: nothing is rounded.
const Op<AdamUpdateFn> adam_update_op{
    "adam_update", {cpu::adam_update}, {ST_CUDA_KERNEL(cuda::adam_update)}, AmpOutputs::none()};
const Op<LazyAdamUpdateFn> lazy_adam_update_op{
    "lazy_adam_update", {cpu::lazy_adam_update}, {ST_CUDA_KERNEL(cuda::lazy_adam_update)}, AmpOutputs::none()};

void adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v) {
  check_tensor(ctx, w, "adam_update", "w");
  check_tensor(ctx, grad, {w.numel()}, "adam_update", "grad");
  check_tensor(ctx, m, {w.numel()}, "adam_update", "m");
  check_tensor(ctx, v, {w.numel()}, "adam_update", "v");
  adam_update_op(ctx, p, w, grad, m, v);
}

void lazy_adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v,
                      int64_t row_width) {
  check_tensor(ctx, w, "lazy_adam_update", "w");
  check_tensor(ctx, grad, {w.numel()}, "lazy_adam_update", "grad");
  check_tensor(ctx, m, {w.numel()}, "lazy_adam_update", "m");
  check_tensor(ctx, v, {w.numel()}, "lazy_adam_update", "v");
  ST_CHECK(row_width > 0 && w.numel() % row_width == 0,
           "lazy_adam_update: " << w.numel() << " elements are not rows of " << row_width);
  lazy_adam_update_op(ctx, p, w, grad, m, v, row_width);
}

}  // namespace scaletrain::ops
