// Private: the CUDA BatchUpload's factory, seen from code that includes no CUDA header
// (src/backend/batch_upload.cpp). Defined in batch_upload.cpp where the CUDA backend is built,
// and by batch_upload_absent.cpp, which refuses, where it is not.
#pragma once

#include <memory>

#include "scaletrain/backend/batch_upload.hpp"

namespace scaletrain::cuda {

// ctx is a CUDA Context (checked by the caller's dispatch on its device).
std::unique_ptr<BatchUpload> create_batch_upload(Context& ctx, int buffers);

}  // namespace scaletrain::cuda
