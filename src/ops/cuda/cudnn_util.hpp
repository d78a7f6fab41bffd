// Private: what the cuDNN kernels in src/ops/cuda/ share: owning wrappers for cuDNN's
// descriptors (destroyed on every path, the throwing ones included), the int conversion cuDNN's
// and cuBLAS's legacy interfaces need, and the carving of one scratch block into pieces.
// Includes the CUDA headers, so only .cu files include it.
//
// The legacy cuDNN calls used here (filter and convolution descriptors, cudnnConvolution*,
// cudnnBatchNormalization*) are deprecated in cuDNN 9 in favour of the graph API, but present
// and supported in every cuDNN 8 and 9 release, on every GPU we build for (V100 included). Their
// CUDNN_DEPRECATED marks expand to nothing unless CUDNN_WARN_DEPRECATED is defined, which this
// project does not do, so they compile without warnings and need no #pragma.
#pragma once

#include <cudnn.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops::cuda {

// A size handed to an int parameter of cuDNN or cuBLAS; throws instead of truncating.
inline int to_int(int64_t v, const char* op, const char* what) {
  ST_CHECK(v >= 0 && v <= INT_MAX, op << ": " << what << " = " << v << " exceeds the range of the CUDA libraries' int");
  return static_cast<int>(v);
}

// Offsets into one scratch block (scaletrain::cuda::workspace) for several buffers used by one op:
// each piece starts on a 256-byte boundary, which cudaMalloc gives the block itself and which
// every cuDNN and cuBLAS kernel is content with.
inline std::size_t align_scratch(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

class TensorDesc {
 public:
  TensorDesc() { ST_CHECK_CUDNN(cudnnCreateTensorDescriptor(&desc_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // Logical dims (n, c, h, w) as cuDNN always takes them; `format` says how they lie in memory.
  void set(cudnnTensorFormat_t format, int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    ST_CHECK_CUDNN(cudnnSetTensor4dDescriptor(desc_, format, type, n, c, h, w));
  }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { ST_CHECK_CUDNN(cudnnCreateFilterDescriptor(&desc_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  // Logical dims (k = out channels, c, h, w); `format` says how they lie in memory. Note the
  // argument order of cudnnSetFilter4dDescriptor (type before format) differs from the tensor's.
  void set(cudnnTensorFormat_t format, int k, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    ST_CHECK_CUDNN(cudnnSetFilter4dDescriptor(desc_, type, format, k, c, h, w));
  }
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { ST_CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&desc_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

// A ReLU activation descriptor (cuDNN's fused batch norm + add + ReLU). NaN propagates, as
// relu_forward's x < 0 ? 0 : x keeps it.
class ReluDesc {
 public:
  ReluDesc() {
    ST_CHECK_CUDNN(cudnnCreateActivationDescriptor(&desc_));
    const cudnnStatus_t status = cudnnSetActivationDescriptor(desc_, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0);
    if (status != CUDNN_STATUS_SUCCESS) cudnnDestroyActivationDescriptor(desc_);
    ST_CHECK_CUDNN(status);
  }
  ~ReluDesc() { cudnnDestroyActivationDescriptor(desc_); }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

}  // namespace scaletrain::ops::cuda
