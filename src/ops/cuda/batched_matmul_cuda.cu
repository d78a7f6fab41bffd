// CUDA batched matrix products: cuBLAS's strided-batched SGEMM, one call for the whole batch. cuBLAS
// is column-major: a row-major (r, c) matrix is its transpose to cuBLAS, so c = op(a) . op(b) is
// computed as c^T = op(b)^T . op(a)^T with the operands swapped, each transposed exactly where our
// row-major operand is not. The context's cuBLAS handle sets the math mode (TF32 only with --tf32);
// under a mixed precision the product runs on 16-bit copies of a and b with fp32 accumulation
// (half_gemm.hpp).
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/half_gemm.hpp"
#include "scaletrain/ops/batched_matmul.hpp"

namespace scaletrain::ops::cuda {

void batched_matmul(Context& ctx, const BatchedMatmulParams& p, const Tensor& a, const Tensor& b, Tensor& c) {
  const int64_t batch = c.dim(0), m = c.dim(1), n = c.dim(2), k = p.trans_a ? a.dim(1) : a.dim(2);
  // cuBLAS's view: C^T (n x m, leading dimension n) = op_b(B view) (n x k) . op_a(A view) (k x m).
  const cublasOperation_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t ldb = p.trans_b ? k : n, lda = p.trans_a ? m : k;
  HalfOperands operands(ctx, {b.numel(), a.numel()});
  const void* bv = operands.operand(0, b);
  const void* av = operands.operand(1, a);
  Fp32Result c32(ctx, c);  // a 16-bit c (16-bit storage) is rounded from fp32 once
  gemm_strided_batched(ctx, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), p.alpha, bv,
                       static_cast<int>(ldb), k * n, av, static_cast<int>(lda), m * k, 0.0f, c32.data(),
                       static_cast<int>(n), m * n, static_cast<int>(batch));
  c32.store();
}

}  // namespace scaletrain::ops::cuda
