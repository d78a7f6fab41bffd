// The GEMMs of linear and batched_matmul in fp32 or on 16-bit operands (half_gemm.hpp).
#include <library_types.h>

#include <initializer_list>
#include <optional>

#include "ops/cuda/half_gemm.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops::cuda {
namespace {

// Each operand copy starts on a 256-byte boundary: cuBLAS's tensor-core kernels want aligned
// operands (16 bytes at least), and the workspace itself is so aligned.
constexpr std::size_t kAlignment = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

cudaDataType half_type(const Context& ctx) {
  return storage_format(ctx.precision()) == HalfFormat::fp16 ? CUDA_R_16F : CUDA_R_16BF;
}

}  // namespace

bool gemm_in_half(const Context& ctx) { return storage_format(ctx.precision()).has_value(); }

HalfOperands::HalfOperands(Context& ctx, std::initializer_list<int64_t> counts, int64_t float_count)
    : ctx_(ctx), half_(gemm_in_half(ctx)) {
  ST_CHECK(counts.size() <= 4, "internal: HalfOperands holds at most 4 operands, not " << counts.size());
  const std::size_t float_bytes = aligned(static_cast<std::size_t>(float_count) * sizeof(float));
  std::size_t total = float_bytes;
  int slots = 0;
  for (int64_t count : counts) {
    counts_[slots++] = count;
    if (half_) total += aligned(static_cast<std::size_t>(count) * 2);
  }
  if (total == 0) return;
  char* base = static_cast<char*>(scaletrain::cuda::workspace(ctx, total));
  if (float_count > 0) floats_ = reinterpret_cast<float*>(base);
  std::size_t offset = float_bytes;
  for (int i = 0; i < slots && half_; ++i) {
    slots_[i] = base + offset;
    offset += aligned(static_cast<std::size_t>(counts_[i]) * 2);
  }
}

const void* HalfOperands::operand(int slot, const float* src) {
  if (!half_) return src;
  ST_CHECK(slot >= 0 && slot < 4 && slots_[slot] != nullptr, "internal: HalfOperands has no slot " << slot);
  launch_cast_to_half(scaletrain::cuda::compute_stream(ctx_), src, slots_[slot], counts_[slot],
                      *storage_format(ctx_.precision()));
  return slots_[slot];
}

const void* HalfOperands::operand(int slot, const Tensor& t) {
  if (half_) {
    const DType stored = *storage_format(ctx_.precision()) == HalfFormat::fp16 ? DType::f16 : DType::bf16;
    if (t.dtype() == stored) return t.raw();
  }
  ST_CHECK(t.dtype() == DType::f32,
           "internal: a " << dtype_name(t.dtype()) << " operand in " << precision_name(ctx_.precision()));
  return operand(slot, static_cast<const float*>(t.raw()));
}

HalfFormat half_format_of(const Tensor& t) { return t.dtype() == DType::f16 ? HalfFormat::fp16 : HalfFormat::bf16; }

Fp32Result::Fp32Result(Context& ctx, Tensor& out) : ctx_(ctx), out_(out) {
  if (!out.defined()) return;
  if (out.dtype() == DType::f32) {
    data_ = static_cast<float*>(out.raw());
    return;
  }
  buffer_ = Tensor::empty(out.shape(), DType::f32, out.device());
  data_ = static_cast<float*>(buffer_.raw());
}

void Fp32Result::store() {
  if (!buffer_.defined()) return;
  launch_cast_to_half(scaletrain::cuda::compute_stream(ctx_), data_, out_.raw(), out_.numel(), half_format_of(out_));
}

Tensor fp32_of(Context& ctx, const Tensor& t) {
  if (t.dtype() == DType::f32) return t;
  Tensor wide = Tensor::empty(t.shape(), DType::f32, t.device());
  launch_cast_from_half(scaletrain::cuda::compute_stream(ctx), t.raw(), static_cast<float*>(wide.raw()), t.numel(),
                        half_format_of(t));
  return wide;
}

void gemm(Context& ctx, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k, float alpha,
          const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc) {
  cublasHandle_t handle = scaletrain::cuda::cublas_handle(ctx);
  if (!gemm_in_half(ctx)) {
    ST_CHECK_CUBLAS(cublasSgemm(handle, trans_a, trans_b, m, n, k, &alpha, static_cast<const float*>(a), lda,
                                static_cast<const float*>(b), ldb, &beta, c, ldc));
    return;
  }
  const cudaDataType type = half_type(ctx);
  ST_CHECK_CUBLAS(cublasGemmEx(handle, trans_a, trans_b, m, n, k, &alpha, a, type, lda, b, type, ldb, &beta, c,
                               CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_strided_batched(Context& ctx, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n, int k,
                          float alpha, const void* a, int lda, int64_t stride_a, const void* b, int ldb,
                          int64_t stride_b, float beta, float* c, int ldc, int64_t stride_c, int batch) {
  cublasHandle_t handle = scaletrain::cuda::cublas_handle(ctx);
  if (!gemm_in_half(ctx)) {
    ST_CHECK_CUBLAS(cublasSgemmStridedBatched(handle, trans_a, trans_b, m, n, k, &alpha, static_cast<const float*>(a),
                                              lda, stride_a, static_cast<const float*>(b), ldb, stride_b, &beta, c, ldc,
                                              stride_c, batch));
    return;
  }
  const cudaDataType type = half_type(ctx);
  ST_CHECK_CUBLAS(cublasGemmStridedBatchedEx(handle, trans_a, trans_b, m, n, k, &alpha, a, type, lda, stride_a, b, type,
                                             ldb, stride_b, &beta, c, CUDA_R_32F, ldc, stride_c, batch,
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace scaletrain::ops::cuda
