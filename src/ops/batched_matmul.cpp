// Batched matrix products: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/batched_matmul.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signature, and the one dispatch point (ops/op.hpp).
using BatchedMatmulFn = void(Context& ctx, const BatchedMatmulParams& p, const Tensor& a, const Tensor& b, Tensor& c);
namespace cpu {
BatchedMatmulFn batched_matmul;
}
namespace cuda {
BatchedMatmulFn batched_matmul;
}
const Op<BatchedMatmulFn> batched_matmul_op{"batched_matmul",
                                            {cpu::batched_matmul},
                                            with_half_storage<BatchedMatmulFn>({ST_CUDA_KERNEL(cuda::batched_matmul)})};

void batched_matmul(Context& ctx, const BatchedMatmulParams& p, const Tensor& a, const Tensor& b, Tensor& c) {
  const char* op = "batched_matmul";
  ST_CHECK(std::isfinite(p.alpha), op << ": alpha must be finite, got " << p.alpha);
  check_tensor(ctx, a, op, "a");
  check_tensor(ctx, b, op, "b");
  ST_CHECK(a.ndim() == 3 && b.ndim() == 3, op << ": a and b must be (B, rows, columns), got " << shape_string(a.shape())
                                              << " and " << shape_string(b.shape()));
  const int64_t batch = a.dim(0), m = p.trans_a ? a.dim(2) : a.dim(1), k = p.trans_a ? a.dim(1) : a.dim(2);
  const int64_t kb = p.trans_b ? b.dim(2) : b.dim(1), n = p.trans_b ? b.dim(1) : b.dim(2);
  ST_CHECK(b.dim(0) == batch && kb == k, op << ": op(a) " << shape_string({batch, m, k}) << " and op(b) "
                                            << shape_string({b.dim(0), kb, n}) << " do not multiply (trans_a "
                                            << p.trans_a << ", trans_b " << p.trans_b << ")");
  check_tensor(ctx, c, {batch, m, n}, op, "c");
  check_no_overlap(c, a, op, "c", "a");
  check_no_overlap(c, b, op, "c", "b");
  if (c.numel() == 0) return;
  if (k == 0) {  // a sum over nothing; the kernels take K >= 1 (cuBLAS refuses leading dimensions of 0)
    c.zero();
    return;
  }
  return batched_matmul_op(ctx, p, a, b, c);
}

}  // namespace scaletrain::ops
