// Execution context: one per rank. It owns the backend state that ops run on: for the CPU the
// thread count and the oneDNN engine and stream; for CUDA the GPU, a compute stream and a copy
// stream, the cuDNN and cuBLAS handles and the caching allocator behind its tensors
// (src/backend/cuda/). Ops take a Context& so that the stream is found there, not in signatures.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "scaletrain/core/caching_allocator.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain {

// --precision (docs/mixed-precision.md): fp32, or mixed precision with activations, their
// gradients and weight copies in 16 bits (fp16 or bf16) and fp32 master weights, optimizer
// state, normalisation statistics and losses.
enum class Precision { fp32, amp_fp16, amp_bf16 };
const char* precision_name(Precision precision);  // "fp32", "amp-fp16", "amp-bf16"
// The 16-bit format of a mixed precision; none for fp32.
std::optional<HalfFormat> storage_format(Precision precision);

class Context;
// How a mixed precision stores and computes on ctx, for start-up lines: "activations and their
// gradients stored in fp16 tensors; ops compute in fp32 ..." (empty in fp32).
std::string describe_amp_storage(const Context& ctx);

class Context {
 public:
  // threads <= 0: leave the thread count as the environment set it (OMP_NUM_THREADS).
  // gpu_index: the CUDA device ordinal (after CUDA_VISIBLE_DEVICES) for Device::cuda; a process
  // opens one CUDA Context at a time. Throws naming the GPU, or "not built" without the backend.
  explicit Context(Device device = Device::cpu, int threads = 0, int gpu_index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  int threads() const { return threads_; }
  int gpu_index() const { return gpu_index_; }
  // Waits until every op submitted to this context has finished (a no-op on the CPU, where ops
  // are synchronous; the streams' synchronize on CUDA).
  void synchronize();
  // TF32 (--tf32): whether cuDNN and cuBLAS may run fp32 products on TF32 tensor cores (Ampere
  // and newer; 10 mantissa bits in the products). Off by default: fp32 means fp32. No effect on
  // the CPU.
  void set_allow_tf32(bool allow);
  bool allow_tf32() const { return allow_tf32_; }
  // The precision the ops run in (--precision). Under a mixed precision every op rounds the
  // activations it writes to the 16-bit format (ops/op.hpp); on the CPU they compute in fp32.
  void set_precision(Precision precision);
  Precision precision() const { return precision_; }
  // The dtype layers store activations and their gradients in: f32, or under a mixed precision
  // its 16-bit format (f16, bf16), so that they take half the memory and bytes moved. An op whose
  // kernel computes in fp32 gets its 16-bit tensors widened and its 16-bit outputs narrowed by the
  // dispatch (ops/op.hpp), which gives the bits of fp32 tensors rounded after each op.
  // SCALETRAIN_AMP_STORAGE=f32 (a test hook, read when the precision is set) keeps them in fp32
  // holding 16-bit values, the earlier emulation: cli.mixed_precision checks both give the same bits.
  DType activation_dtype() const { return activation_dtype_; }
  // --fuse bn-add-relu: residual blocks end in one fused op (batch norm, the shortcut's add, ReLU;
  // ops::batch_norm_add_relu_forward_training) instead of three, in training.
  void set_fuse_bn_add_relu(bool fuse) { fuse_bn_add_relu_ = fuse; }
  bool fuse_bn_add_relu() const { return fuse_bn_add_relu_; }
  // --fuse bn-relu: a batch norm and the ReLU after it run as one op
  // (ops::batch_norm_relu_forward_training, cuDNN's fused batch norm on a GPU) in training.
  void set_fuse_bn_relu(bool fuse) { fuse_bn_relu_ = fuse; }
  bool fuse_bn_relu() const { return fuse_bn_relu_; }
  // --fuse conv-bias-relu: a convolution with bias and the ReLU after it run as one op
  // (ops::conv2d_bias_relu_forward, cuDNN's fused epilogue on a GPU) in training.
  void set_fuse_conv_bias_relu(bool fuse) { fuse_conv_bias_relu_ = fuse; }
  bool fuse_conv_bias_relu() const { return fuse_conv_bias_relu_; }
  // --conv-algo search: cuDNN times its convolution algorithms once per shape and the fastest
  // usable one runs (as PyTorch's cudnn.benchmark); otherwise its heuristics' first. No effect on
  // the CPU.
  void set_conv_search(bool search) { conv_search_ = search; }
  bool conv_search() const { return conv_search_; }
  // --conv-algo graph | graph-search: convolutions planned through cuDNN's graph (backend) API,
  // its engines and their heuristics (with search: the engines timed), rather than the legacy
  // API's algorithms; a shape the graph API cannot plan runs the legacy way. No effect on the CPU.
  void set_conv_graph(bool graph) { conv_graph_ = graph; }
  bool conv_graph() const { return conv_graph_; }
  // --conv-nondeterministic: backward convolutions take cuDNN's first (or fastest) algorithm even
  // where it is nondeterministic; otherwise they prefer a deterministic one. No effect on the CPU.
  void set_conv_nondeterministic(bool allow) { conv_nondeterministic_ = allow; }
  bool conv_nondeterministic() const { return conv_nondeterministic_; }
  // The device allocator's figures (peak memory, allocations); on the CPU the process's host
  // tensor memory (host_tensor_memory_stats: in use and its peak, no cache, no allocation counts).
  AllocatorStats device_memory_stats() const;

  // Backend state, defined in src/backend/cpu/dnnl_context.hpp.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Device device_;
  int threads_;
  int gpu_index_;
  bool allow_tf32_ = false;
  Precision precision_ = Precision::fp32;
  DType activation_dtype_ = DType::f32;
  bool fuse_bn_add_relu_ = false;
  bool fuse_conv_bias_relu_ = false;
  bool fuse_bn_relu_ = false;
  bool conv_search_ = false;
  bool conv_graph_ = false;
  bool conv_nondeterministic_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain
