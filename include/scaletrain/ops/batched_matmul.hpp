// Batched matrix products for attention: c[i] = alpha * op(a[i]) . op(b[i]) for each i of a batch,
// op(X) = X or X^T (of the last two dimensions), row-major. Attention's forward and backward are
// all of this form (Q K^T / sqrt(d), P V; and dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q).
// Kernels: oneDNN's matmul on the CPU (the transposes as strides, alpha as its output scale) and
// cuBLAS's strided-batched SGEMM on CUDA (TF32 only where the context allows it, as linear).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct BatchedMatmulParams {
  bool trans_a = false;  // a is (B, K, M) and op(a) its transpose
  bool trans_b = false;  // b is (B, N, K) and op(b) its transpose
  float alpha = 1.0f;
};

// a: (B, M, K), or (B, K, M) with trans_a; b: (B, K, N), or (B, N, K) with trans_b; c: (B, M, N),
// overwritten, overlapping neither a nor b. K may be 0 (c = 0).
void batched_matmul(Context& ctx, const BatchedMatmulParams& p, const Tensor& a, const Tensor& b, Tensor& c);

}  // namespace scaletrain::ops
