// CUDA batch norm: cuDNN's batch normalisation (CUDNN_BATCHNORM_SPATIAL: one mean and variance per
// channel over every other dimension) on channels-last data.
//
// Descriptors (batch_norm_descriptor_dims, batch_norm.hpp). x (N, H, W, C) is described as it is,
// NHWC with logical dims (N, C, H, W); any other (..., C) as (1, C, M, 1) in NHWC, M the product
// of the leading dims, which is the same memory (M rows of C channels) and the same per-channel
// statistics over M values; not (M, C, 1, 1), whose N cuDNN caps at about 65,535 rows in
// inference and 880,801 in training. gamma, beta,
// the running and the saved statistics use the descriptor cuDNN derives from x's (1, C, 1, 1):
// C contiguous floats, our (C) tensors.
//
// Conventions, checked against ours (include/scaletrain/ops/batch_norm.hpp, the CPU kernels):
// - cudnnBatchNormalizationForwardTraining updates running = factor * batch + (1 - factor) *
//   running (cudnn_ops.h), so exponentialAverageFactor = momentum gives PyTorch's
//   (1 - momentum) * running + momentum * batch.
// - It normalises with the biased batch variance and folds the unbiased one (m / (m - 1) times
//   it) into the running variance, as PyTorch does; this is how cuDNN has always behaved (other
//   frameworks rely on it and convert when they want the biased one), though its header only
//   says "moving average of variance".
// - Its resultSaveInvVariance is, despite the name, 1 / sqrt(biased var + eps): our saved_inv_std.
//   cudnnBatchNormalizationBackward takes the same pair back, so the two stay consistent
//   whichever way it is named.
// - epsilon must be >= CUDNN_BN_MIN_EPSILON (0 in cuDNN 8 and 9; ours is checked > 0).
// Results are overwritten: alpha = 1, beta = 0 for y and dx, and for dgamma and dbeta
// (alphaParamDiff = 1, betaParamDiff = 0); with beta 0 cuDNN does not read the old values.
//
// Aliasing. Our contract lets y alias x in forward, and the CPU kernels let dx alias x or dy in
// backward. cuDNN does not document in-place batch norm, so an input that overlaps the output is
// first copied to scratch (one device copy; the layers give batch norm separate buffers, so this
// is the rare path).
//
// Training kernels. For 4-D x (N, H, W, C) training runs cuDNN's NHWC kernels:
// cudnnBatchNormalizationForwardTrainingEx and BackwardEx with CUDNN_BATCHNORM_OPS_BN in
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode, what PyTorch runs for channels-last training. Plain
// SPATIAL mode on NHWC data took about 10 ms per batch norm of ResNet-50 at batch 256 on an H200
// (docs/gpu.md, 2026-11-28): most of the step. The persistent mode may sum with scaled integer
// atomics that overflow on very large values (cuDNN's documentation; the fused op below says the
// same). A configuration it refuses (per type and shape), x aliasing y (or dx), another rank of x,
// a pointer or a row of channels not 16-byte aligned (aligned16) and the test hook SCALETRAIN_CUDNN_BN_MODE=spatial run
// plain SPATIAL mode. The forward's reserve space, which the backward needs, is kept from a
// persistent forward until the backward with the same x and saved statistics takes it
// (PersistentReserves); a backward that finds none runs SPATIAL mode on the saved statistics.
//
// 16-bit storage (with_half_storage): x, y, dy and dx of one 16-bit type go to cuDNN as they are
// (HALF or BFLOAT16 data; the per-channel descriptor cuDNN derives is FLOAT, so gamma, beta and
// every statistic stay fp32, as in PyTorch's AMP), cuDNN computing in float and rounding each
// output once. Tensors of mixed types, or a 16-bit type this cuDNN's batch norm refuses
// (CUDNN_STATUS_NOT_SUPPORTED, remembered per type), run on fp32 copies, their 16-bit outputs
// rounded back: the bits of the dispatch's widening.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_util.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_gemm.hpp"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/batch_norm.hpp"

namespace scaletrain::ops::cuda {

// activation_cuda.cu: the ReLU of the fused ops where they run unfused.
void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

namespace {

// x's descriptor and the derived per-channel one.
struct BatchNormDescs {
  TensorDesc x, channel;
};

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::f16 ? CUDNN_DATA_HALF : t == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// x's descriptor (of x's type) and the derived per-channel one; cuDNN's status, so that a 16-bit
// configuration it refuses can fall back.
cudnnStatus_t describe(const Tensor& x, const char* op, BatchNormDescs& d) {
  to_int(x.numel(), op, "x elements");  // cuDNN's batch norm indexes with int
  const BatchNormDescriptorDims dims = batch_norm_descriptor_dims(x.shape());
  const cudnnStatus_t status =
      cudnnSetTensor4dDescriptor(d.x.get(), CUDNN_TENSOR_NHWC, cudnn_type(x.dtype()), to_int(dims.n, op, "N"),
                                 to_int(dims.c, op, "C"), to_int(dims.h, op, "H"), to_int(dims.w, op, "W"));
  if (status != CUDNN_STATUS_SUCCESS) return status;
  return cudnnDeriveBNTensorDescriptor(d.channel.get(), d.x.get(), CUDNN_BATCHNORM_SPATIAL);
}

// A status saying cuDNN does not support the call's configuration: NOT_SUPPORTED or, in cuDNN 9,
// any of its sub-codes (data type, shape, architecture: 3001 to 3014); in cuDNN 8 also
// ARCH_MISMATCH (bf16 below compute capability 8.0).
bool not_supported(cudnnStatus_t status) {
#if CUDNN_MAJOR >= 9
  return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED;
#else
  return status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_ARCH_MISMATCH;
#endif
}

// The configurations cuDNN refused once (path, 16-bit type, x's shape): later calls with them go
// the fallback way at once, and one refused shape leaves the others native.
enum class Path { plain, fused, fused_relu, persistent };
class Refusals {
 public:
  bool has(Path path, const Tensor& x) {
    std::lock_guard<std::mutex> lock(mutex_);
    return keys_.count(key(path, x)) > 0;
  }
  void add(Path path, const Tensor& x) {
    std::lock_guard<std::mutex> lock(mutex_);
    keys_.insert(key(path, x));
  }

 private:
  using Key = std::tuple<int, int, Shape>;
  static Key key(Path path, const Tensor& x) {
    return {static_cast<int>(path), static_cast<int>(x.dtype()), x.shape()};
  }
  std::mutex mutex_;
  std::set<Key> keys_;
};
Refusals& refusals() {
  static Refusals r;
  return r;
}

// Whether the call's activation tensors (x first) can go to cuDNN as they are: all of one type,
// fp32 or a 16-bit type not refused before for x's shape.
bool native(std::initializer_list<const Tensor*> tensors) {
  const Tensor& x = **tensors.begin();
  for (const Tensor* t : tensors)
    if (t->dtype() != x.dtype()) return false;
  return x.dtype() == DType::f32 || !refusals().has(Path::plain, x);
}

// cuDNN's status for a native call on x: a refusal of a 16-bit configuration is remembered and
// answered false (the caller then runs on fp32 copies); any other failure throws.
bool accepted(cudnnStatus_t status, const Tensor& x) {
  if (not_supported(status) && x.dtype() != DType::f32) {
    refusals().add(Path::plain, x);
    return false;
  }
  ST_CHECK_CUDNN(status);
  return true;
}

void check_eps(const BatchNormParams& p, const char* op) {
  ST_CHECK(static_cast<double>(p.eps) >= CUDNN_BN_MIN_EPSILON,
           op << ": cuDNN needs eps >= " << CUDNN_BN_MIN_EPSILON << ", got " << p.eps);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.bytes() && pb < pa + a.bytes();
}

// `in` itself, or, when it overlaps `out`, a copy of it at `scratch` (queued on the compute
// stream, so it is taken before the op that follows writes `out`).
const void* unaliased(Context& ctx, const Tensor& in, const Tensor& out, void* scratch) {
  if (!overlaps(in, out)) return in.raw();
  ST_CHECK_CUDA(
      cudaMemcpyAsync(scratch, in.raw(), in.bytes(), cudaMemcpyDeviceToDevice, scaletrain::cuda::compute_stream(ctx)));
  return scratch;
}

// ---- persistent-mode training (see the top of the file) ----

// The test hook SCALETRAIN_CUDNN_BN_MODE=spatial keeps plain SPATIAL mode (side-by-side
// measurements, and a way around a cuDNN that misbehaves in persistent mode).
bool persistent_mode_enabled() {
  static const bool enabled = [] {
    const char* mode = std::getenv("SCALETRAIN_CUDNN_BN_MODE");
    return mode == nullptr || std::string(mode) != "spatial";
  }();
  return enabled;
}

// The reserve space of each persistent forward until its backward takes it. An entry is keyed by
// the address of the call's saved_inv_std and remembers the addresses of x and saved_mean and x's
// type and shape: a backward takes it (removing it) only when its own arguments match all of them,
// as a layer's do (BatchNorm2d keeps x and both saved statistics from its forward to its
// backward). Every forward first removes its key's entry, so a forward that ran another way
// (SPATIAL mode, the fused op, fp32 copies) leaves none behind for its backward to find. Entries
// live only from a persistent forward to its backward; a taken reserve goes back to the caching
// allocator, whose blocks are reused in the compute stream's order.
class PersistentReserves {
 public:
  // A reserve of `bytes` for a persistent forward with these arguments, kept for its backward.
  const Tensor& keep(const Tensor& x, const Tensor& saved_mean, const Tensor& saved_inv_std, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[saved_inv_std.raw()];
    e.reserve = Tensor::empty({static_cast<int64_t>(std::max<std::size_t>(bytes, 1))}, DType::u8, Device::cuda);
    e.x = x.raw();
    e.saved_mean = saved_mean.raw();
    e.dtype = x.dtype();
    e.shape = x.shape();
    return e.reserve;
  }
  void forget(const Tensor& saved_inv_std) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(saved_inv_std.raw());
  }
  // The reserve kept by a persistent forward with these arguments, taken out of the table;
  // undefined when there is none (the forward ran another way).
  Tensor take(const Tensor& x, const Tensor& saved_mean, const Tensor& saved_inv_std) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(saved_inv_std.raw());
    if (it == entries_.end()) return Tensor();
    const Entry& e = it->second;
    if (e.x != x.raw() || e.saved_mean != saved_mean.raw() || e.dtype != x.dtype() || e.shape != x.shape())
      return Tensor();
    Tensor reserve = e.reserve;
    entries_.erase(it);
    return reserve;
  }

 private:
  struct Entry {
    Tensor reserve;
    const void* x = nullptr;
    const void* saved_mean = nullptr;
    DType dtype = DType::f32;
    Shape shape;
  };
  std::mutex mutex_;
  std::map<const void*, Entry> entries_;
};
PersistentReserves& persistent_reserves() {
  static PersistentReserves r;
  return r;
}

constexpr cudnnBatchNormMode_t kPersistent = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
constexpr cudnnBatchNormOps_t kBnOnly = CUDNN_BATCHNORM_OPS_BN;

// The persistent kernels load 16 bytes at a time and do not check where their pointers point: a
// per-channel tensor at an address that is not a multiple of 16 (a parameter's view into the flat
// parameter buffer after one of an odd size: googlenet's 10-class auxiliary heads) stopped the
// first GPU run with cudaErrorMisalignedAddress (2026-11-28). So every pointer, and each row of C
// channels, must be 16-byte aligned; anything else runs SPATIAL mode.
bool aligned16(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw()) % 16 == 0; }

// Whether a training call on these tensors (x first, the outputs last, then the per-channel ones)
// may try persistent mode: 4-D, of one type, no input overlapping an output, every pointer and
// row 16-byte aligned, not refused before for x's type and shape.
// What every persistent kernel (plain and fused) needs: the activations (x first) 4-D of x's type,
// each of them and the per-channel tensors 16-byte aligned, and x's rows of C channels too.
bool persistent_layout(std::initializer_list<const Tensor*> activations,
                       std::initializer_list<const Tensor*> per_channel) {
  const Tensor& x = **activations.begin();
  if (x.ndim() != 4 || (x.dim(-1) * static_cast<int64_t>(dtype_size(x.dtype()))) % 16 != 0) return false;
  for (const Tensor* t : activations)
    if (t->dtype() != x.dtype() || t->ndim() != 4 || !aligned16(*t)) return false;
  for (const Tensor* t : per_channel)
    if (!aligned16(*t)) return false;
  return true;
}

bool persistent_candidate(std::initializer_list<const Tensor*> inputs, std::initializer_list<const Tensor*> outputs,
                          std::initializer_list<const Tensor*> per_channel) {
  if (!persistent_mode_enabled()) return false;
  const Tensor& x = **inputs.begin();
  for (const Tensor* o : outputs) {
    if (!persistent_layout({&x, o}, per_channel)) return false;
    for (const Tensor* i : inputs)
      if (!persistent_layout({&x, i}, {}) || overlaps(*i, *o)) return false;
  }
  return !refusals().has(Path::persistent, x);
}

// A persistent-mode status: true when it ran; a refusal is remembered (false: the caller runs
// SPATIAL mode); any other failure throws. A bad parameter counts as a refusal here: the
// persistent kernels have size limits of their own that SPATIAL mode has not (the op cases' 17 M
// elements), and cuDNN does not document them.
bool persistent_refused(cudnnStatus_t status) {
#if CUDNN_MAJOR >= 9
  return not_supported(status) || CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_BAD_PARAM;
#else
  return not_supported(status) || status == CUDNN_STATUS_BAD_PARAM;
#endif
}
bool persistent_ran(cudnnStatus_t status, const Tensor& x) {
  if (persistent_refused(status)) {
    refusals().add(Path::persistent, x);
    return false;
  }
  ST_CHECK_CUDNN(status);
  return true;
}

bool forward_training_persistent(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                 Tensor& saved_mean, Tensor& saved_inv_std, const char* op) {
  BatchNormDescs d;
  cudnnStatus_t status = describe(x, op, d);
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  std::size_t work_bytes = 0, reserve_bytes = 0;
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, kPersistent, kBnOnly, d.x.get(), nullptr,
                                                                      d.x.get(), d.channel.get(), nullptr, &work_bytes);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, kPersistent, kBnOnly, nullptr, d.x.get(),
                                                                  &reserve_bytes);
  if (status == CUDNN_STATUS_SUCCESS) {
    const Tensor& reserve = persistent_reserves().keep(x, saved_mean, saved_inv_std, reserve_bytes);
    void* work = scaletrain::cuda::workspace(ctx, work_bytes);
    const float one = 1.0f, zero = 0.0f;
    status = cudnnBatchNormalizationForwardTrainingEx(
        handle, kPersistent, kBnOnly, &one, &zero, d.x.get(), x.raw(), nullptr, nullptr, d.x.get(), y.raw(),
        d.channel.get(), gamma.raw(), beta.raw(), static_cast<double>(p.momentum), running_mean.raw(),
        running_var.raw(), static_cast<double>(p.eps), saved_mean.raw(), saved_inv_std.raw(), nullptr, work, work_bytes,
        const_cast<void*>(reserve.raw()), reserve_bytes);
  }
  if (persistent_ran(status, x)) return true;
  persistent_reserves().forget(saved_inv_std);
  return false;
}

bool backward_persistent(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta, const char* op) {
  const Tensor reserve = persistent_reserves().take(x, saved_mean, saved_inv_std);
  if (!reserve.defined()) return false;  // the forward ran another way
  BatchNormDescs d;
  cudnnStatus_t status = describe(x, op, d);
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  std::size_t work_bytes = 0, reserve_bytes = 0;
  if (status == CUDNN_STATUS_SUCCESS)
    status =
        cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, kPersistent, kBnOnly, d.x.get(), nullptr, d.x.get(),
                                                          nullptr, d.x.get(), d.channel.get(), nullptr, &work_bytes);
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, kPersistent, kBnOnly, nullptr, d.x.get(),
                                                                  &reserve_bytes);
  if (status == CUDNN_STATUS_SUCCESS) {
    void* work = scaletrain::cuda::workspace(ctx, work_bytes);
    const float one = 1.0f, zero = 0.0f;
    // beta (bnBiasData) only matters to an activation; the saved statistics are the forward's.
    status = cudnnBatchNormalizationBackwardEx(
        handle, kPersistent, kBnOnly, &one, &zero, &one, &zero, d.x.get(), x.raw(), nullptr, nullptr, d.x.get(),
        dy.raw(), nullptr, nullptr, d.x.get(), dx.raw(), d.channel.get(), gamma.raw(), nullptr, dgamma.raw(),
        dbeta.raw(), static_cast<double>(p.eps), saved_mean.raw(), saved_inv_std.raw(), nullptr, work, work_bytes,
        const_cast<void*>(reserve.raw()), reserve_bytes);
  }
  return persistent_ran(status, x);
}

}  // namespace

void batch_norm_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                 Tensor& saved_mean, Tensor& saved_inv_std) {
  const char* op = "batch_norm_forward_training";
  check_eps(p, op);
  persistent_reserves().forget(saved_inv_std);  // a reserve of an earlier forward is not this one's
  if (persistent_candidate({&x}, {&y}, {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std}) &&
      forward_training_persistent(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std, op))
    return;
  if (native({&x, &y})) {
    BatchNormDescs d;
    // The dispatcher has checked that x has more than one value per channel.
    cudnnStatus_t status = describe(x, op, d);
    if (status == CUDNN_STATUS_SUCCESS) {
      void* scratch = overlaps(x, y) ? scaletrain::cuda::workspace(ctx, x.bytes()) : nullptr;
      const void* xin = unaliased(ctx, x, y, scratch);
      const float one = 1.0f, zero = 0.0f;
      status = cudnnBatchNormalizationForwardTraining(
          scaletrain::cuda::cudnn_handle(ctx), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), xin, d.x.get(), y.raw(),
          d.channel.get(), gamma.raw(), beta.raw(), static_cast<double>(p.momentum), running_mean.raw(),
          running_var.raw(), static_cast<double>(p.eps), saved_mean.raw(), saved_inv_std.raw());
    }
    if (accepted(status, x)) return;
  }
  const Tensor x32 = fp32_of(ctx, x);
  Fp32Result y32(ctx, y);
  Tensor y32_tensor = y32.tensor();
  cuda::batch_norm_forward_training(ctx, p, x32, gamma, beta, running_mean, running_var, y32_tensor, saved_mean,
                                    saved_inv_std);
  y32.store();
}

void batch_norm_forward_inference(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                  Tensor& y) {
  const char* op = "batch_norm_forward_inference";
  check_eps(p, op);
  if (x.numel() == 0) return;
  if (native({&x, &y})) {
    BatchNormDescs d;
    cudnnStatus_t status = describe(x, op, d);
    if (status == CUDNN_STATUS_SUCCESS) {
      void* scratch = overlaps(x, y) ? scaletrain::cuda::workspace(ctx, x.bytes()) : nullptr;
      const void* xin = unaliased(ctx, x, y, scratch);
      const float one = 1.0f, zero = 0.0f;
      // y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta, as the CPU kernel.
      status = cudnnBatchNormalizationForwardInference(
          scaletrain::cuda::cudnn_handle(ctx), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), xin, d.x.get(), y.raw(),
          d.channel.get(), gamma.raw(), beta.raw(), running_mean.raw(), running_var.raw(), static_cast<double>(p.eps));
    }
    if (accepted(status, x)) return;
  }
  const Tensor x32 = fp32_of(ctx, x);
  Fp32Result y32(ctx, y);
  Tensor y32_tensor = y32.tensor();
  cuda::batch_norm_forward_inference(ctx, p, x32, gamma, beta, running_mean, running_var, y32_tensor);
  y32.store();
}

void batch_norm_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta) {
  const char* op = "batch_norm_backward";
  check_eps(p, op);
  if (x.numel() == 0) {  // sums over nothing
    dgamma.zero();
    dbeta.zero();
    return;
  }
  if (persistent_candidate({&x, &dy}, {&dx}, {&gamma, &saved_mean, &saved_inv_std, &dgamma, &dbeta}) &&
      backward_persistent(ctx, p, x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, op))
    return;
  if (native({&x, &dy, &dx})) {
    BatchNormDescs d;
    cudnnStatus_t status = describe(x, op, d);
    if (status == CUDNN_STATUS_SUCCESS) {
      const bool x_aliased = overlaps(x, dx), dy_aliased = overlaps(dy, dx);
      const std::size_t piece = align_scratch(x.bytes());
      char* scratch =
          x_aliased || dy_aliased ? static_cast<char*>(scaletrain::cuda::workspace(ctx, 2 * piece)) : nullptr;
      const void* xin = unaliased(ctx, x, dx, scratch);
      const void* dyin = unaliased(ctx, dy, dx, scratch == nullptr ? nullptr : scratch + piece);
      const float one = 1.0f, zero = 0.0f;
      // The saved statistics are the forward pass's (saved_inv_std = 1 / sqrt(var + eps)); cuDNN
      // uses them instead of recomputing when both are given. eps must match the forward's.
      status = cudnnBatchNormalizationBackward(scaletrain::cuda::cudnn_handle(ctx), CUDNN_BATCHNORM_SPATIAL, &one,
                                               &zero, &one, &zero, d.x.get(), xin, d.x.get(), dyin, d.x.get(), dx.raw(),
                                               d.channel.get(), gamma.raw(), dgamma.raw(), dbeta.raw(),
                                               static_cast<double>(p.eps), saved_mean.raw(), saved_inv_std.raw());
    }
    if (accepted(status, x)) return;
  }
  const Tensor x32 = fp32_of(ctx, x), dy32 = fp32_of(ctx, dy);
  Fp32Result dx32(ctx, dx);
  Tensor dx32_tensor = dx32.tensor();
  cuda::batch_norm_backward(ctx, p, x32, dy32, gamma, saved_mean, saved_inv_std, dx32_tensor, dgamma, dbeta);
  dx32.store();
}

// ---- batch norm + add + ReLU, and batch norm + ReLU (issue 26, section 3) ----
//
// cuDNN's fused kernels (cudnnBatchNormalizationForwardTrainingEx and BackwardEx in
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode, with CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION for the
// add's z, CUDNN_BATCHNORM_OPS_BN_ACTIVATION without it) where x, z, y (and dy, dz, dx) are 4-D,
// of one 16-bit type: the configuration cuDNN documents for them (NHWC fp16, from V100 on). They
// compute in float and store y once, as the CPU kernels do. A configuration cuDNN refuses (bf16 on
// some versions, some shapes) is remembered per op, type and shape and, with every other case,
// runs unfused: batch norm, then one pass for the ReLU (and the add, from an fp32 buffer: the CPU's
// numerics); backward the ReLU's mask, then batch norm's backward. The forward's reserve space
// travels to the backward in `reserve`; an empty reserve means the forward ran unfused.
// The persistent mode may sum with scaled integer atomics that overflow to inf or NaN on very
// large values (cuDNN's documentation): under dynamic loss scaling such a step is skipped and the
// scale halved, as for any overflow. docs/mixed-precision.md says so.
namespace {

// x (and z), y of one 16-bit type in the persistent kernels' layout, in a configuration cuDNN has
// not refused for x's shape on this path.
bool fused_candidate(Path path, std::initializer_list<const Tensor*> tensors,
                     std::initializer_list<const Tensor*> per_channel) {
  const Tensor& x = **tensors.begin();
  return persistent_layout(tensors, per_channel) && x.dtype() != DType::f32 && !refusals().has(path, x);
}

__global__ void add_relu_kernel(const float* bn, const void* z, ElemKind zk, void* y, ElemKind yk, int64_t n) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float v = bn[i] + load_float(z, zk, i);
    store_float(y, yk, i, v < 0.0f ? 0.0f : v);
  }
}

// The fused forward: batch norm, z added where given, ReLU, in cuDNN's kernel; true where it ran,
// false where cuDNN refused the configuration (NOT_SUPPORTED or BAD_PARAM, remembered per path,
// type and shape; the caller runs the ops apart).
bool fused_forward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor* z, const Tensor& gamma,
                   const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y, Tensor& saved_mean,
                   Tensor& saved_inv_std, Tensor& reserve, const char* op) {
  const Path path = z != nullptr ? Path::fused : Path::fused_relu;
  const std::initializer_list<const Tensor*> per_channel{&gamma,       &beta,       &running_mean,
                                                         &running_var, &saved_mean, &saved_inv_std};
  if (!(z != nullptr ? fused_candidate(path, {&x, z, &y}, per_channel) : fused_candidate(path, {&x, &y}, per_channel)))
    return false;
  BatchNormDescs d;
  cudnnStatus_t status = describe(x, op, d);
  const ReluDesc act;
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const cudnnBatchNormOps_t ops =
      z != nullptr ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  const cudnnTensorDescriptor_t z_desc = z != nullptr ? d.x.get() : nullptr;
  std::size_t work_bytes = 0, reserve_bytes = 0;
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, mode, ops, d.x.get(), z_desc, d.x.get(),
                                                                      d.channel.get(), act.get(), &work_bytes);
  if (status == CUDNN_STATUS_SUCCESS)
    status =
        cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, mode, ops, act.get(), d.x.get(), &reserve_bytes);
  if (status == CUDNN_STATUS_SUCCESS) {
    if (!reserve.defined() || reserve.device() != Device::cuda || reserve.bytes() < reserve_bytes)
      reserve = Tensor::empty({static_cast<int64_t>(std::max<std::size_t>(reserve_bytes, 1))}, DType::u8, Device::cuda);
    void* work = scaletrain::cuda::workspace(ctx, work_bytes);
    const float one = 1.0f, zero = 0.0f;
    status = cudnnBatchNormalizationForwardTrainingEx(
        handle, mode, ops, &one, &zero, d.x.get(), x.raw(), z_desc, z != nullptr ? z->raw() : nullptr, d.x.get(),
        y.raw(), d.channel.get(), gamma.raw(), beta.raw(), static_cast<double>(p.momentum), running_mean.raw(),
        running_var.raw(), static_cast<double>(p.eps), saved_mean.raw(), saved_inv_std.raw(), act.get(), work,
        work_bytes, reserve.raw(), reserve.bytes());
  }
  // As for the plain persistent kernels, a bad parameter counts as a refusal: the fused kernels'
  // limits (types, channel counts) are cuDNN's own, and the ops apart give the same values.
  if (persistent_refused(status)) {
    refusals().add(path, x);
    return false;
  }
  ST_CHECK_CUDNN(status);
  return true;
}

// The fused backward of a forward that ran fused (its reserve given): dz = the ReLU's gradient
// where z is given, dx, dgamma and dbeta, in cuDNN's kernel. Any failure throws: the forward's
// configuration was accepted.
void fused_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                    const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean, const Tensor& saved_inv_std,
                    const Tensor& reserve, Tensor& dx, Tensor* dz, Tensor& dgamma, Tensor& dbeta, const char* op) {
  BatchNormDescs d;
  ST_CHECK_CUDNN(describe(x, op, d));
  const ReluDesc act;
  const cudnnHandle_t handle = scaletrain::cuda::cudnn_handle(ctx);
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const cudnnBatchNormOps_t ops =
      dz != nullptr ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  const cudnnTensorDescriptor_t dz_desc = dz != nullptr ? d.x.get() : nullptr;
  std::size_t work_bytes = 0;
  ST_CHECK_CUDNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
      handle, mode, ops, d.x.get(), d.x.get(), d.x.get(), dz_desc, d.x.get(), d.channel.get(), act.get(), &work_bytes));
  void* work = scaletrain::cuda::workspace(ctx, work_bytes);
  const float one = 1.0f, zero = 0.0f;
  ST_CHECK_CUDNN(cudnnBatchNormalizationBackwardEx(
      handle, mode, ops, &one, &zero, &one, &zero, d.x.get(), x.raw(), d.x.get(), y.raw(), d.x.get(), dy.raw(), dz_desc,
      dz != nullptr ? dz->raw() : nullptr, d.x.get(), dx.raw(), d.channel.get(), gamma.raw(), beta.raw(), dgamma.raw(),
      dbeta.raw(), static_cast<double>(p.eps), saved_mean.raw(), saved_inv_std.raw(), act.get(), work, work_bytes,
      const_cast<void*>(reserve.raw()), reserve.bytes()));
}

bool ran_fused(const Tensor& reserve) { return reserve.defined() && reserve.numel() > 0; }

}  // namespace

void batch_norm_add_relu_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& z,
                                          const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                          Tensor& running_var, Tensor& y, Tensor& saved_mean, Tensor& saved_inv_std,
                                          Tensor& reserve) {
  const char* op = "batch_norm_add_relu_forward_training";
  check_eps(p, op);
  persistent_reserves().forget(saved_inv_std);  // its own reserve travels in `reserve`
  if (fused_forward(ctx, p, x, &z, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std, reserve, op))
    return;
  reserve = Tensor();  // the backward runs unfused
  Tensor bn = Tensor::empty(x.shape(), DType::f32, Device::cuda);
  cuda::batch_norm_forward_training(ctx, p, x, gamma, beta, running_mean, running_var, bn, saved_mean, saved_inv_std);
  const int64_t n = y.numel();
  add_relu_kernel<<<scaletrain::cuda::blocks_for(n), scaletrain::cuda::kThreadsPerBlock, 0,
                    scaletrain::cuda::compute_stream(ctx)>>>(static_cast<const float*>(bn.raw()), z.raw(),
                                                             elem_kind(z, op), y.raw(), elem_kind(y, op), n);
  ST_CHECK_LAUNCH();
}

void batch_norm_add_relu_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                                  const Tensor& saved_inv_std, const Tensor& reserve, Tensor& dx, Tensor& dz,
                                  Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batch_norm_add_relu_backward";
  check_eps(p, op);
  // A reserve space means the forward ran cuDNN's fused kernel on these tensors: so does backward.
  if (ran_fused(reserve) && fused_candidate(Path::fused, {&x, &y, &dy, &dz, &dx},
                                            {&gamma, &beta, &saved_mean, &saved_inv_std, &dgamma, &dbeta})) {
    fused_backward(ctx, p, x, y, dy, gamma, beta, saved_mean, saved_inv_std, reserve, dx, &dz, dgamma, dbeta, op);
    return;
  }
  relu_backward(ctx, y, dy, dz);
  cuda::batch_norm_backward(ctx, p, x, dz, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
}

void batch_norm_relu_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                      Tensor& saved_mean, Tensor& saved_inv_std, Tensor& reserve) {
  const char* op = "batch_norm_relu_forward_training";
  check_eps(p, op);
  persistent_reserves().forget(saved_inv_std);  // its own reserve travels in `reserve`
  if (fused_forward(ctx, p, x, nullptr, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std, reserve,
                    op))
    return;
  reserve = Tensor();  // the backward runs unfused
  cuda::batch_norm_forward_training(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std);
  relu_forward(ctx, y, y);  // each element read before it is written: in place is safe
}

void batch_norm_relu_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                              const Tensor& dy, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                              const Tensor& saved_inv_std, const Tensor& reserve, Tensor& dx, Tensor& dgamma,
                              Tensor& dbeta) {
  const char* op = "batch_norm_relu_backward";
  check_eps(p, op);
  if (ran_fused(reserve) && fused_candidate(Path::fused_relu, {&x, &y, &dy, &dx},
                                            {&gamma, &beta, &saved_mean, &saved_inv_std, &dgamma, &dbeta})) {
    fused_backward(ctx, p, x, y, dy, gamma, beta, saved_mean, saved_inv_std, reserve, dx, nullptr, dgamma, dbeta, op);
    return;
  }
  // The ReLU's gradient in a buffer of its own: batch norm's backward would copy an aliased dy.
  Tensor dz = Tensor::empty(dy.shape(), dy.dtype(), Device::cuda);
  relu_backward(ctx, y, dy, dz);
  cuda::batch_norm_backward(ctx, p, x, dz, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
}

}  // namespace scaletrain::ops::cuda
