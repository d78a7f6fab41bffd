// Private: the CUDA members of the check-macro family (../shared/design/STYLE.md, rule 4). Each
// evaluates its expression once and, when it fails, throws scaletrain::Error with rank, host,
// file:line, the expression and the library's own message ("CUDA call failed at conv2d.cu:88:
// cudaMemcpyAsync(...): cudaErrorInvalidValue (invalid argument)"). Kernel launches are checked
// with ST_CHECK_LAUNCH() right after the <<<...>>>: a bad configuration or a missing kernel image
// shows there, not at some later call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain::cuda::detail {
inline std::string cuda_message(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}
inline std::string cudnn_message(cudnnStatus_t status) { return cudnnGetErrorString(status); }
inline std::string cublas_message(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")";
}
}  // namespace scaletrain::cuda::detail

#define ST_CHECK_CUDA(expr)                                                                            \
  do {                                                                                                 \
    const cudaError_t st_status_ = (expr);                                                             \
    if (st_status_ != cudaSuccess)                                                                     \
      ::scaletrain::detail::throw_library_error("CUDA", __FILE__, __LINE__, #expr,                     \
                                                ::scaletrain::cuda::detail::cuda_message(st_status_)); \
  } while (0)

#define ST_CHECK_CUDNN(expr)                                                                            \
  do {                                                                                                  \
    const cudnnStatus_t st_status_ = (expr);                                                            \
    if (st_status_ != CUDNN_STATUS_SUCCESS)                                                             \
      ::scaletrain::detail::throw_library_error("cuDNN", __FILE__, __LINE__, #expr,                     \
                                                ::scaletrain::cuda::detail::cudnn_message(st_status_)); \
  } while (0)

#define ST_CHECK_CUBLAS(expr)                                                                            \
  do {                                                                                                   \
    const cublasStatus_t st_status_ = (expr);                                                            \
    if (st_status_ != CUBLAS_STATUS_SUCCESS)                                                             \
      ::scaletrain::detail::throw_library_error("cuBLAS", __FILE__, __LINE__, #expr,                     \
                                                ::scaletrain::cuda::detail::cublas_message(st_status_)); \
  } while (0)

// After a kernel launch: the launch's own error (configuration, no kernel image for this GPU).
#define ST_CHECK_LAUNCH() ST_CHECK_CUDA(cudaGetLastError())
