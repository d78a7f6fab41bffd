// Private to src/ops/cuda: element-wise kernels over 16-byte packs (8 f16 or bf16 elements, 4
// f32), for the memory-bound passes over activations (ReLU, the residual adds). Why: a grid-stride
// loop over single 2-byte elements keeps one small load per thread in flight, far too few bytes to
// cover the memory's latency, so such a pass reaches a fraction of the GPU's bandwidth; a 16-byte
// load per thread moves 8 times as many bytes per instruction, as PyTorch's vectorised
// element-wise kernels do. Each element is still widened to float, computed by the same
// expression and stored once in its format (half_io.cuh's conversions), so a packed kernel gives
// the bits of the element-wise one (gpu.half_storage compares the two paths bit for bit).
//
// A launch is packed where every operand has one element type and starts on a 16-byte boundary
// (the caching allocator's blocks do; a view at an odd offset may not); else the caller runs its
// element-wise kernel. The last n % kPack elements are done one by one by the first threads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"

namespace scaletrain::ops::cuda {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// kPack elements of T in one 16-byte load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const void* base, int64_t pack) {
  const uint4 raw = static_cast<const uint4*>(base)[pack];
  Pack<T> p;
  memcpy(&p, &raw, sizeof raw);
  return p;
}

template <typename T>
__device__ __forceinline__ void store_pack(void* base, int64_t pack, const Pack<T>& p) {
  uint4 raw;
  memcpy(&raw, &p, sizeof raw);
  static_cast<uint4*>(base)[pack] = raw;
}

// out[i] = f(a[i]) over n elements of T; out may be a.
template <typename T, typename F>
__global__ void packed_map1(const void* a, void* out, int64_t n, F f) {
  constexpr int k = Pack<T>::kSize;
  const int64_t packs = n / k;
  for (int64_t p = grid_first(); p < packs; p += grid_stride()) {
    const Pack<T> x = load_pack<T>(a, p);
    Pack<T> y;
#pragma unroll
    for (int j = 0; j < k; ++j) y.v[j] = narrow<T>(f(widen(x.v[j])));
    store_pack(out, p, y);
  }
  const int64_t i = packs * k + grid_first();
  if (i < n) static_cast<T*>(out)[i] = narrow<T>(f(widen(static_cast<const T*>(a)[i])));
}

// out[i] = f(a[i], b[i]) over n elements of T; out may be a or b.
template <typename T, typename F>
__global__ void packed_map2(const void* a, const void* b, void* out, int64_t n, F f) {
  constexpr int k = Pack<T>::kSize;
  const int64_t packs = n / k;
  for (int64_t p = grid_first(); p < packs; p += grid_stride()) {
    const Pack<T> x = load_pack<T>(a, p), y = load_pack<T>(b, p);
    Pack<T> z;
#pragma unroll
    for (int j = 0; j < k; ++j) z.v[j] = narrow<T>(f(widen(x.v[j]), widen(y.v[j])));
    store_pack(out, p, z);
  }
  const int64_t i = packs * k + grid_first();
  if (i < n)
    static_cast<T*>(out)[i] = narrow<T>(f(widen(static_cast<const T*>(a)[i]), widen(static_cast<const T*>(b)[i])));
}

// Whether every pointer starts on a 16-byte boundary.
inline bool packs_aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Whole packs in n elements of `kind` (a packed launch's threads: blocks_for gives at least one
// block, for a tail alone).
inline int64_t packs_of(int64_t n, ElemKind kind) { return n / (kind == ElemKind::f32 ? 4 : 8); }

// Runs launch(T{}) with T the storage type of `kind`.
template <typename Launch>
void with_storage_type(ElemKind kind, Launch&& launch) {
  switch (kind) {
    case ElemKind::f16:
      launch(__half{});
      return;
    case ElemKind::bf16:
      launch(__nv_bfloat16{});
      return;
    default:
      launch(float{});
  }
}

}  // namespace scaletrain::ops::cuda
