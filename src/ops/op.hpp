// Private: how an op declares its kernels, once, and how every call reaches them. An op file
// (src/ops/<op>.cpp) writes, for each public function:
//
//   using ReluForwardFn = void(Context& ctx, const Tensor& x, Tensor& y);  // the public signature
//   namespace cpu { ReluForwardFn relu_forward; }                         // the kernels, declared
//   namespace cuda { ReluForwardFn relu_forward; }                        // from that signature
//   const Op<ReluForwardFn> relu_forward_op{"relu_forward", {cpu::relu_forward},
//                                           {ST_CUDA_KERNEL(cuda::relu_forward)}};
//
// and its public function checks the arguments and calls relu_forward_op(ctx, x, y). The Op
// registers itself (ops/registry.hpp) and is the one dispatch point: the kernel of the Context's
// device or `no_kernel`, never a silent fallback to the CPU; an NVTX range and, with --trace, a
// trace event per call, with --op-times its time (ops/op_profiler.hpp).
//
// ST_CUDA_KERNEL(fn) names the CUDA kernel where the CUDA backend is built, and elsewhere a kernel
// the source has but this build does not (NotBuilt), so that no op file needs `#if` and a build
// without CUDA references no CUDA symbol. A device without a kernel is `{}`; a kernel that is not
// deterministic is `{fn, false}`. Kernels run in every precision (--precision amp-fp16 and
// amp-bf16 too): they compute in fp32; the dispatch widens the 16-bit tensors of a kernel that
// does not read them itself (with_half_storage) and narrows its 16-bit outputs, and rounds its
// fp32 outputs that are 16-bit values (round_amp_output), on the device. A kernel that cannot run
// so declares the precisions it runs in, `{fn, true, kFp32Only}`, and the dispatch and the
// registry refuse the others.
#pragma once

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/op_checks.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/registry.hpp"

namespace scaletrain::ops {

// A kernel declared in the source whose backend this build leaves out (CUDA without the CUDA
// backend): the registry still lists it as the source's, the dispatch refuses it.
struct NotBuilt {};

// One device's kernel of an op, and whether it gives the same bits run to run (a kernel that
// accumulates with float atomics does not).
template <typename Fn>
struct Kernel {
  Fn* fn = nullptr;
  bool deterministic = true;
  bool declared = false;                      // the source has a kernel for this device, built or not
  PrecisionSet precisions = kEveryPrecision;  // the --precision values it runs in
  // It reads and writes f16 and bf16 tensors itself (16-bit storage, any mix with f32): the
  // dispatch passes them as they are instead of widening them (with_half_storage).
  bool half_storage = false;

  Kernel() = default;
  Kernel(Fn* f, bool is_deterministic = true, PrecisionSet runs_in = kEveryPrecision)
      : fn(f), deterministic(is_deterministic), declared(f != nullptr), precisions(runs_in) {}
  Kernel(NotBuilt, bool is_deterministic = true, PrecisionSet runs_in = kEveryPrecision)
      : deterministic(is_deterministic), declared(true), precisions(runs_in) {}
};

// The kernel k, marked as one that reads and writes 16-bit tensors itself: its op's declaration
// writes {with_half_storage<ReluForwardFn>({ST_CUDA_KERNEL(cuda::relu_forward)})}.
template <typename Fn>
Kernel<Fn> with_half_storage(Kernel<Fn> k) {
  k.half_storage = true;
  return k;
}

}  // namespace scaletrain::ops

#if SCALETRAIN_HAVE_CUDA
#define ST_CUDA_KERNEL(fn) fn
#else
#define ST_CUDA_KERNEL(fn) \
  ::scaletrain::ops::NotBuilt {}
#endif

namespace scaletrain::ops {

class OpProfiler;

// An op call's NVTX range, (with --trace) trace event and (with --op-times) time, from
// construction to destruction.
class OpScope {
 public:
  explicit OpScope(const char* name) noexcept;
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* name_;
  double start_s_ = -1.0;           // when traced
  OpProfiler* profiler_ = nullptr;  // when timed
};

// Which of an op's outputs (its non-const Tensor& arguments, counted from 0 in signature order)
// are activations or their gradients, stored in 16 bits under a mixed precision: the op rounds
// them after its kernel (docs/mixed-precision.md has the table). The others stay fp32: running
// and saved statistics, the gradients of normalisation parameters, optimizer state, gradient sums.
struct AmpOutputs {
  unsigned mask = ~0u;
  static constexpr AmpOutputs all() { return {}; }
  static constexpr AmpOutputs none() { return {0u}; }
  static constexpr AmpOutputs only(unsigned index) { return {1u << index}; }
};

// Rounds an fp32 output the op wrote to ctx's 16-bit format, on either device (a 16-bit output
// tensor is narrowed instead; other dtypes are left alone).
void round_amp_output(Context& ctx, Tensor& t);

// 16-bit storage (Context::activation_dtype) for kernels that compute in fp32: the dispatch hands
// such a kernel each f16 or bf16 tensor widened into an fp32 copy (exact), and narrows each
// 16-bit output back from its copy (one rounding, ties to even): the bits of the same kernel on
// fp32 tensors that held the 16-bit values, rounded after it. A kernel marked with_half_storage
// reads and writes 16-bit tensors itself. The widening is ops::as_f32, the narrowing
// ops::cast_to_half (ops/cast.hpp).
bool is_half_dtype(DType dtype);

// One argument of a kernel call, as the kernel sees it under 16-bit storage: a Tensor (or a
// vector of them) that is 16-bit becomes its fp32 copy, narrowed back after the call where the
// kernel may write it; any other argument passes through untouched.
template <typename A>
struct HalfAdapted {
  A&& arg;
  HalfAdapted(Context&, A&& a) : arg(std::forward<A>(a)) {}
  A&& get() { return std::forward<A>(arg); }
  void finish(Context&) {}
  static bool half(const std::remove_reference_t<A>&) { return false; }
};

template <typename T>
struct HalfAdaptedTensor {
  T& original;
  Tensor wide;
  HalfAdaptedTensor(Context& ctx, T& t) : original(t), wide(as_f32(ctx, t)) {}
  T& get_original() { return original; }
};

template <>
struct HalfAdapted<const Tensor&> : HalfAdaptedTensor<const Tensor> {
  HalfAdapted(Context& ctx, const Tensor& t) : HalfAdaptedTensor(ctx, t) {}
  const Tensor& get() { return wide; }
  void finish(Context&) {}
  static bool half(const Tensor& t) { return is_half_dtype(t.dtype()); }
};

template <>
struct HalfAdapted<Tensor&> : HalfAdaptedTensor<Tensor> {
  HalfAdapted(Context& ctx, Tensor& t) : HalfAdaptedTensor(ctx, t) {}
  Tensor& get() { return wide; }
  void finish(Context& ctx) {
    if (is_half_dtype(original.dtype())) cast_to_half(ctx, wide, original);
  }
  static bool half(const Tensor& t) { return is_half_dtype(t.dtype()); }
};

template <>
struct HalfAdapted<Tensor> : HalfAdapted<const Tensor&> {
  HalfAdapted(Context& ctx, Tensor&& t) : HalfAdapted<const Tensor&>(ctx, t) {}
};

template <typename V>
struct HalfAdaptedVector {
  V& original;
  std::vector<Tensor> wide;
  HalfAdaptedVector(Context& ctx, V& v) : original(v) {
    wide.reserve(v.size());
    for (const Tensor& t : v) wide.push_back(as_f32(ctx, t));
  }
  static bool half(const std::vector<Tensor>& v) {
    for (const Tensor& t : v)
      if (is_half_dtype(t.dtype())) return true;
    return false;
  }
};

// A const vector of tensor handles may still be written through (concat_channels_backward's
// dxs): its 16-bit tensors are narrowed back too, which for an input the kernel only read
// rewrites the same bits.
template <>
struct HalfAdapted<const std::vector<Tensor>&> : HalfAdaptedVector<const std::vector<Tensor>> {
  HalfAdapted(Context& ctx, const std::vector<Tensor>& v) : HalfAdaptedVector(ctx, v) {}
  const std::vector<Tensor>& get() { return wide; }
  void finish(Context& ctx) {
    for (std::size_t i = 0; i < original.size(); ++i)
      if (is_half_dtype(original[i].dtype())) {
        Tensor target = original[i];
        cast_to_half(ctx, wide[i], target);
      }
  }
};

template <>
struct HalfAdapted<std::vector<Tensor>&> : HalfAdaptedVector<std::vector<Tensor>> {
  HalfAdapted(Context& ctx, std::vector<Tensor>& v) : HalfAdaptedVector(ctx, v) {}
  std::vector<Tensor>& get() { return wide; }
  void finish(Context& ctx) {
    for (std::size_t i = 0; i < original.size(); ++i)
      if (is_half_dtype(original[i].dtype())) cast_to_half(ctx, wide[i], original[i]);
  }
};
// The dispatcher's answer for a kernel that does not run in the context's precision (it runs in
// `runs_in`).
[[noreturn]] void no_kernel_in_precision(const char* op, Device device, Precision precision, PrecisionSet runs_in);

template <typename Fn>
class Op {
 public:
  Op(const char* name, Kernel<Fn> cpu, Kernel<Fn> cuda, AmpOutputs amp = AmpOutputs::all(), const char* dtypes = "f32")
      : name_(name), amp_(amp) {
    kernels_[device_index(Device::cpu)] = cpu;
    kernels_[device_index(Device::cuda)] = cuda;
    OpInfo info;
    info.name = name;
    info.dtypes = dtypes;
    for (int d = 0; d < kNumDevices; ++d) {
      info.kernel[d] = kernels_[d].fn != nullptr;
      info.declared[d] = kernels_[d].declared;
      info.deterministic[d] = info.declared[d] && kernels_[d].deterministic;
      info.precisions[d] = info.declared[d] ? kernels_[d].precisions : 0u;
      info.half_storage[d] = info.declared[d] && kernels_[d].half_storage;
    }
    register_op(info);
  }

  // The kernel of ctx's device with these arguments (the public function has checked them);
  // under a mixed precision, then its 16-bit outputs rounded.
  template <typename... Args>
  decltype(auto) operator()(Context& ctx, Args&&... args) const {
    const int d = device_index(ctx.device());
    if (d < 0 || d >= kNumDevices || kernels_[d].fn == nullptr) no_kernel(name_, ctx.device());
    if ((kernels_[d].precisions & precision_bit(ctx.precision())) == 0u)
      no_kernel_in_precision(name_, ctx.device(), ctx.precision(), kernels_[d].precisions);
    const OpScope scope(name_);
    using Result = decltype(kernels_[d].fn(ctx, std::forward<Args>(args)...));
    if (!kernels_[d].half_storage && (HalfAdapted<Args>::half(args) || ...))
      return call_widened(kernels_[d].fn, ctx, std::forward<Args>(args)...);
    if constexpr (std::is_void_v<Result>) {
      kernels_[d].fn(ctx, std::forward<Args>(args)...);
      round_outputs(ctx, args...);
    } else {
      Result result = kernels_[d].fn(ctx, std::forward<Args>(args)...);
      round_outputs(ctx, args...);
      return result;
    }
  }

 private:
  // The kernel on fp32 copies of the 16-bit tensors, its 16-bit outputs narrowed after it, then
  // its fp32 outputs rounded as any op's.
  template <typename... Args>
  decltype(auto) call_widened(Fn* fn, Context& ctx, Args&&... args) const {
    std::tuple<HalfAdapted<Args>...> adapted{HalfAdapted<Args>(ctx, std::forward<Args>(args))...};
    auto finish = [&] {
      std::apply([&](auto&... a) { (a.finish(ctx), ...); }, adapted);
      round_outputs(ctx, args...);
    };
    using Result = decltype(fn(ctx, std::forward<Args>(args)...));
    if constexpr (std::is_void_v<Result>) {
      std::apply([&](auto&... a) { fn(ctx, a.get()...); }, adapted);
      finish();
    } else {
      Result result = std::apply([&](auto&... a) -> Result { return fn(ctx, a.get()...); }, adapted);
      finish();
      return result;
    }
  }

  template <typename... Args>
  void round_outputs(Context& ctx, Args&... args) const {
    if (ctx.precision() == Precision::fp32 || amp_.mask == 0u) return;
    unsigned index = 0;
    (round_if_output(ctx, args, index), ...);
  }
  template <typename A>
  void round_if_output(Context& ctx, A& arg, unsigned& index) const {
    if constexpr (std::is_same_v<A, Tensor>) {  // a non-const Tensor&: an output
      if ((amp_.mask >> index) & 1u) round_amp_output(ctx, arg);
      ++index;
    }
  }

  const char* name_;
  AmpOutputs amp_;
  Kernel<Fn> kernels_[kNumDevices];
};

}  // namespace scaletrain::ops
