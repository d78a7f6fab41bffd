// cuBLAS loaded when it is first called, not when the program starts. libcublas pulls in
// libcublasLt (over 500 MB), whose loading alone took about 0.4 s of every process's start, a
// CPU run's too (scaletrain-data, a CPU-only training rank): the test suite starts thousands of
// processes. So executables do not link libcublas; this file defines the few cuBLAS functions the
// CUDA kernels call, under cuBLAS's own exported names and with its header's signatures, and each
// forwards to the function of that name in libcublas.so.<major> (the major version of the headers
// built against), opened with dlopen on the first call: from the library search path (a module's
// LD_LIBRARY_PATH), else from the toolkit's library folder this build found.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "scaletrain/core/error.hpp"

namespace {

void* open_cublas() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = dlerror();
  const std::string in_toolkit = std::string(ST_CUBLAS_LIBRARY_DIR) + "/" + soname;
  if (void* handle = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  ST_THROW("cannot load cuBLAS for the CUDA backend: " << first_error << "; nor " << in_toolkit << ": " << dlerror()
                                                       << " (load the CUDA module this program was built with)");
}

// The function `name` of libcublas, as a pointer of type Fn.
template <typename Fn>
Fn cublas_function(const char* name) {
  static void* const library = open_cublas();
  void* symbol = dlsym(library, name);
  ST_CHECK(symbol != nullptr, "cuBLAS " << CUBLAS_VER_MAJOR << " has no function " << name << ": " << dlerror());
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

// Each: the library's function, looked up once (a function-local static: thread-safe).
#define ST_FORWARD(name) static const auto real = cublas_function<decltype(&name)>(#name)

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  ST_FORWARD(cublasCreate_v2);
  return real(handle);
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  ST_FORWARD(cublasDestroy_v2);
  return real(handle);
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  ST_FORWARD(cublasSetStream_v2);
  return real(handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  ST_FORWARD(cublasSetMathMode);
  return real(handle, mode);
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  ST_FORWARD(cublasGetStatusName);
  return real(status);
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  ST_FORWARD(cublasGetStatusString);
  return real(status);
}

cublasStatus_t CUBLASWINAPI cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                                           const float* alpha, const float* a, int lda, const float* x, int incx,
                                           const float* beta, float* y, int incy) {
  ST_FORWARD(cublasSgemv_v2);
  return real(handle, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float* alpha, const float* a, int lda,
                                           const float* b, int ldb, const float* beta, float* c, int ldc) {
  ST_FORWARD(cublasSgemm_v2);
  return real(handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t CUBLASWINAPI cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                      cublasOperation_t transb, int m, int n, int k, const float* alpha,
                                                      const float* a, int lda, long long int stride_a, const float* b,
                                                      int ldb, long long int stride_b, const float* beta, float* c,
                                                      int ldc, long long int stride_c, int batch_count) {
  ST_FORWARD(cublasSgemmStridedBatched);
  return real(handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
              batch_count);
}

// cublas_api.h also declares C++ overloads of the two Ex functions (a cudaDataType compute type,
// for old code): their pointer types are spelled out instead of taken with decltype.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long int,
                                                  const void*, cudaDataType, int, long long int, const void*, void*,
                                                  cudaDataType, int, long long int, int, cublasComputeType_t,
                                                  cublasGemmAlgo_t);

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* a, cudaDataType a_type,
                                         int lda, const void* b, cudaDataType b_type, int ldb, const void* beta,
                                         void* c, cudaDataType c_type, int ldc, cublasComputeType_t compute_type,
                                         cublasGemmAlgo_t algo) {
  static const auto real = cublas_function<GemmExFn>("cublasGemmEx");
  return real(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc,
              compute_type, algo);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha,
    const void* a, cudaDataType a_type, int lda, long long int stride_a, const void* b, cudaDataType b_type, int ldb,
    long long int stride_b, const void* beta, void* c, cudaDataType c_type, int ldc, long long int stride_c,
    int batch_count, cublasComputeType_t compute_type, cublasGemmAlgo_t algo) {
  static const auto real = cublas_function<GemmStridedBatchedExFn>("cublasGemmStridedBatchedEx");
  return real(handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c,
              c_type, ldc, stride_c, batch_count, compute_type, algo);
}

}  // extern "C"
