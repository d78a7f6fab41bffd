// Stand-in for the CUDA BatchUpload in a build without the CUDA backend. No CUDA context can
// exist there, so this is reached only by misuse; it says what to rebuild all the same.
#include "backend/cuda/batch_upload_cuda.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::cuda {

std::unique_ptr<BatchUpload> create_batch_upload(Context&, int) {
  ST_THROW(
      "input batches copied to a cuda device: this scaletrain was built without the CUDA backend; rebuild with "
      "-DSCALETRAIN_CUDA=ON where the CUDA toolkit and cuDNN are installed (docs/gpu.md)");
}

}  // namespace scaletrain::cuda
