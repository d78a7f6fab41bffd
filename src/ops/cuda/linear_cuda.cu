// CUDA linear: y = x w^T + b and its gradients with cuBLAS SGEMM/SGEMV on our row-major layouts:
// x (N, IN), w (OUT, IN), b (OUT), y (N, OUT).
//
// cuBLAS is column-major. A row-major (r x c) matrix with leading dimension c is, read by cuBLAS,
// the column-major (c x r) matrix: its transpose, with ld = c. So each product is computed
// transposed, C^T = B^T A^T, on the same memory:
//   forward   y = x w^T    ->  y^T (OUT x N, ld OUT) = w (OUT x IN) . x^T (IN x N)
//             w's memory is w^T (IN x OUT, ld IN): op T gives w; x's memory is x^T (IN x N, ld IN): op N.
//             gemm(T, N, m = OUT, n = N, k = IN, A = w, lda = IN, B = x, ldb = IN, C = y, ldc = OUT)
//   backward  dx = dy w    ->  dx^T (IN x N, ld IN) = w^T (IN x OUT) . dy^T (OUT x N)
//             w's memory is w^T (ld IN): op N; dy's memory is dy^T (OUT x N, ld OUT): op N.
//             gemm(N, N, m = IN, n = N, k = OUT, A = w, lda = IN, B = dy, ldb = OUT, C = dx, ldc = IN)
//             dw = dy^T x  ->  dw^T (IN x OUT, ld IN) = x^T (IN x N) . dy (N x OUT)
//             x's memory is x^T (ld IN): op N; dy's memory is dy^T (ld OUT): op T gives dy.
//             gemm(N, T, m = IN, n = OUT, k = N, A = x, lda = IN, B = dy, ldb = OUT, C = dw, ldc = IN)
//             db = sum over rows of dy = dy^T . 1  ->  gemv(N, m = OUT, n = N, A = dy, lda = OUT, x = ones)
// The bias goes in by writing b into every row of y first and running the forward GEMM with
// beta = 1; every gradient is overwritten (beta = 0: cuBLAS does not read C then).
// In fp32 the handle's math mode is CUBLAS_DEFAULT_MATH (device_state.cpp), no TF32 unless the
// Context allows it (--tf32: CUBLAS_TF32_TENSOR_OP_MATH). Under a mixed precision the three
// products run on 16-bit copies of x, w and dy, on tensor cores with fp32 accumulation
// (half_gemm.hpp); the bias and db stay fp32. Under 16-bit storage x, dy, y and dx may be f16 or
// bf16 tensors: the products read them as they are and write fp32 buffers rounded into them once.
// Scalars are host pointers (the handle's default pointer mode, which nothing changes).
#include <cuda_runtime.h>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_util.hpp"
#include "ops/cuda/half_gemm.hpp"
#include "scaletrain/ops/linear.hpp"

namespace scaletrain::ops::cuda {
namespace {

using scaletrain::cuda::blocks_for;
using scaletrain::cuda::kThreadsPerBlock;

// y[r][j] = b[j] for `rows` rows of `cols` values.
__global__ void broadcast_rows(const float* __restrict__ b, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = b[i % cols];
}

__global__ void fill_ones(float* __restrict__ data, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    data[i] = 1.0f;
}

struct LinearDims {
  int n, in, out;
};

LinearDims linear_dims(const Tensor& x, const Tensor& w, const char* op) {
  LinearDims d{to_int(x.dim(0), op, "N"), to_int(x.dim(1), op, "IN"), to_int(w.dim(0), op, "OUT")};
  to_int(x.numel(), op, "x elements");
  to_int(int64_t{d.n} * d.out, op, "y elements");
  to_int(w.numel(), op, "w elements");
  return d;
}

// cuBLAS wants every leading dimension >= 1, even for an empty matrix.
int ld(int v) { return v > 0 ? v : 1; }

}  // namespace

void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const char* op = "linear_forward";
  const LinearDims d = linear_dims(x, w, op);
  if (d.n == 0 || d.out == 0) return;  // y is empty
  cudaStream_t stream = scaletrain::cuda::compute_stream(ctx);
  const int64_t y_count = int64_t{d.n} * d.out;
  Fp32Result y32(ctx, y);
  broadcast_rows<<<blocks_for(y_count), kThreadsPerBlock, 0, stream>>>(static_cast<const float*>(b.raw()), y32.data(),
                                                                       d.n, d.out);
  ST_CHECK_LAUNCH();
  if (d.in > 0) {  // else x w^T is a sum over nothing: y = b
    HalfOperands operands(ctx, {w.numel(), x.numel()});
    const void* wa = operands.operand(0, w);
    const void* xa = operands.operand(1, x);
    gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, d.out, d.n, d.in, 1.0f, wa, ld(d.in), xa, ld(d.in), 1.0f, y32.data(),
         ld(d.out));
  }
  y32.store();
}

void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db) {
  const char* op = "linear_backward";
  const LinearDims d = linear_dims(x, w, op);
  if (d.n == 0 || d.out == 0) {  // every gradient is a sum over nothing
    if (dx.defined()) dx.zero();
    dw.zero();
    db.zero();
    return;
  }
  cublasHandle_t handle = scaletrain::cuda::cublas_handle(ctx);
  const float one = 1.0f, zero = 0.0f;
  // db's sum reads dy in fp32 (a 16-bit dy widened for it, exactly).
  const Tensor dy32 = fp32_of(ctx, dy);
  const float* dyp = static_cast<const float*>(dy32.raw());
  Fp32Result dx32(ctx, dx);
  // One scratch for the ones of db (below) and the 16-bit copies of a mixed precision.
  HalfOperands operands(ctx, {dy.numel(), w.numel(), x.numel()}, d.n);
  if (d.in > 0) {
    const void* dya = operands.operand(0, dy);
    if (dx.defined())
      gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, d.in, d.n, d.out, 1.0f, operands.operand(1, w), ld(d.in), dya, ld(d.out),
           0.0f, dx32.data(), ld(d.in));
    gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, d.in, d.out, d.n, 1.0f, operands.operand(2, x), ld(d.in), dya, ld(d.out), 0.0f,
         static_cast<float*>(dw.raw()), ld(d.in));
  } else if (dx.defined()) {
    dx.zero();  // a product over nothing (IN = 0: dx is empty anyway)
  }
  dx32.store();
  // db = dy^T . ones(N) in fp32; the ones live in the op's scratch, filled on the same stream.
  float* ones = operands.floats();
  fill_ones<<<blocks_for(d.n), kThreadsPerBlock, 0, scaletrain::cuda::compute_stream(ctx)>>>(ones, d.n);
  ST_CHECK_LAUNCH();
  ST_CHECK_CUBLAS(cublasSgemv(handle, CUBLAS_OP_N, d.out, d.n, &one, dyp, ld(d.out), ones, 1, &zero,
                              static_cast<float*>(db.raw()), 1));
}

}  // namespace scaletrain::ops::cuda
