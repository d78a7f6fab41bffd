// sgd_update: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/sgd.hpp"

#include "ops/cpu/sgd_cpu.hpp"
#include "ops/cuda/sgd_cuda.hpp"
#include "ops/op_checks.hpp"
#include "scaletrain/config.hpp"

namespace scaletrain::ops {

void sgd_update(Context& ctx, const SgdUpdateParams& p, Tensor& w, const Tensor& grad, Tensor& momentum) {
  check_tensor(ctx, w, "sgd_update", "w");
  check_tensor(ctx, grad, {w.numel()}, "sgd_update", "grad");
  check_tensor(ctx, momentum, {w.numel()}, "sgd_update", "momentum");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::sgd_update(ctx, p, w, grad, momentum);
    case Device::cuda:
#if SCALETRAIN_HAVE_CUDA
      return cuda::sgd_update(ctx, p, w, grad, momentum);
#else
      break;
#endif
  }
  no_kernel("sgd_update", ctx.device());
}

}  // namespace scaletrain::ops
