// sgd_update: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/sgd.hpp"

#include "ops/op.hpp"
#include "scaletrain/config.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using SgdUpdateFn = void(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum);
namespace cpu {
SgdUpdateFn sgd_update;
}
namespace cuda {
SgdUpdateFn sgd_update;
}
const Op<SgdUpdateFn> sgd_update_op{"sgd_update",
                                    {cpu::sgd_update},
                                    {ST_CUDA_KERNEL(cuda::sgd_update)},
                                    AmpOutputs::none()};  // the fp32 master weights and momentum

void sgd_update(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum) {
  check_tensor(ctx, w, "sgd_update", "w");
  check_tensor(ctx, grad, {w.numel()}, "sgd_update", "grad");
  check_tensor(ctx, momentum, {w.numel()}, "sgd_update", "momentum");
  return sgd_update_op(ctx, p, w, grad, momentum);
}

}  // namespace scaletrain::ops
