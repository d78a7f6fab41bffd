// Private: the GEMMs of linear and batched_matmul, in fp32 or on tensor cores. In fp32 they are
// cuBLAS's SGEMMs. Under a mixed precision (--precision amp-fp16 | amp-bf16) their operands are
// 16-bit values already (the ops before them rounded them, docs/mixed-precision.md), so each
// operand is copied into the precision's 16-bit format (exactly) in the op's scratch and the
// product runs in cuBLAS's GemmEx with fp32 accumulation (CUBLAS_COMPUTE_32F) on tensor cores,
// into an fp32 result that the dispatch then rounds as it rounds every 16-bit output. That is the
// numerics of PyTorch autocast's half GEMMs: products of 16-bit values, exact in fp32, summed in
// fp32, rounded once. Under 16-bit storage an operand stored in the 16-bit type is used as it
// is, and a 16-bit result is computed in an fp32 buffer and rounded into it (Fp32Result): the same
// bits as the dispatch's widening and narrowing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_context.hpp"

namespace scaletrain::ops::cuda {

// Whether ctx's products run on 16-bit operands (a mixed precision).
bool gemm_in_half(const Context& ctx);

// Scratch for an op's 16-bit operand copies, carved from one workspace() call.
class HalfOperands {
 public:
  // Room for copies of operands of these element counts (none under fp32), plus `float_count`
  // floats of the op's own (returned by floats()).
  HalfOperands(Context& ctx, std::initializer_list<int64_t> counts, int64_t float_count = 0);
  // The operand for the product: `src` itself under fp32, else its 16-bit copy in slot `slot`
  // (cast on the compute stream).
  const void* operand(int slot, const float* src);
  // The same from a tensor, which under a mixed precision may already be stored in its 16-bit
  // type (16-bit storage): then the tensor itself, no copy.
  const void* operand(int slot, const Tensor& t);
  float* floats() const { return floats_; }

 private:
  Context& ctx_;
  bool half_ = false;
  float* floats_ = nullptr;
  char* slots_[4] = {};
  int64_t counts_[4] = {};
};

// The fp32 buffer a product writes for `out` (16-bit storage: out may be f16 or bf16): out's own
// data where it is f32, else a fresh fp32 tensor that store() rounds into out once, as the
// dispatch rounds an fp32 output. An undefined out has none.
class Fp32Result {
 public:
  Fp32Result(Context& ctx, Tensor& out);
  float* data() const { return data_; }
  // The fp32 tensor itself (out where out is f32), for a kernel that takes a tensor.
  Tensor tensor() const { return buffer_.defined() ? buffer_ : out_; }
  void store();

 private:
  Context& ctx_;
  Tensor& out_;
  Tensor buffer_;
  float* data_ = nullptr;
};

// t as fp32 on its device: t itself, or a widened copy of a 16-bit t (exact), on the compute
// stream. (The dispatch's ops::as_f32 does the same through the cast op; CUDA kernels call this.)
Tensor fp32_of(Context& ctx, const Tensor& t);
// The 16-bit format of an f16 or bf16 tensor.
HalfFormat half_format_of(const Tensor& t);

// C (fp32, column-major as cuBLAS sees it) = alpha op(A) op(B) + beta C, with A and B from
// HalfOperands::operand: SGEMM, or GemmEx on 16-bit operands with fp32 accumulation.
void gemm(Context& ctx, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k, float alpha,
          const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc);
// The same for `batch` products at the given element strides.
void gemm_strided_batched(Context& ctx, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k,
                          float alpha, const void* a, int lda, int64_t stride_a, const void* b, int ldb,
                          int64_t stride_b, float beta, float* c, int ldc, int64_t stride_c, int batch);

// y[0, n) = x[0, n) in `format` (round to nearest even): cast_to_half's kernel, on `stream`.
void launch_cast_to_half(cudaStream_t stream, const float* x, void* y, int64_t n, HalfFormat format);
// y[0, n) = x[0, n) read from `format` (exact): cast_from_half's kernel, on `stream`.
void launch_cast_from_half(cudaStream_t stream, const void* x, float* y, int64_t n, HalfFormat format);

}  // namespace scaletrain::ops::cuda
