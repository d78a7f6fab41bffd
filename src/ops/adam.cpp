// adam_update: argument checks and the dispatch point. Kernels in src/ops/<device>/.
#include "scaletrain/ops/adam.hpp"

#include "ops/op.hpp"

namespace scaletrain::ops {

using AdamUpdateFn = void(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v);
namespace cpu {
AdamUpdateFn adam_update;
}
namespace cuda {
AdamUpdateFn adam_update;
}
const Op<AdamUpdateFn> adam_update_op{"adam_update", {cpu::adam_update}, {ST_CUDA_KERNEL(cuda::adam_update)}};

void adam_update(Context& ctx, const AdamUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& m, Tensor& v) {
  check_tensor(ctx, w, "adam_update", "w");
  check_tensor(ctx, grad, {w.numel()}, "adam_update", "grad");
  check_tensor(ctx, m, {w.numel()}, "adam_update", "m");
  check_tensor(ctx, v, {w.numel()}, "adam_update", "v");
  adam_update_op(ctx, p, w, grad, m, v);
}

}  // namespace scaletrain::ops
