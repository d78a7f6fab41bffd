// BatchUpload::create, which picks the implementation by the context's device, and the CPU one:
// plain copies, done when copy() returns, so every wait is already satisfied. It exists so that
// the double-buffered batch source (train/device_batches.cpp) runs, and is tested, with the same
// calls on machines without a GPU.
#include "scaletrain/backend/batch_upload.hpp"

#include "backend/cuda/batch_upload_cuda.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain {

void BatchUpload::check_buffer(const char* what, int b) const {
  ST_CHECK(b >= 0 && b < buffers_, "BatchUpload::" << what << ": buffer " << b << " of " << buffers_);
}

namespace {

class HostBatchUpload final : public BatchUpload {
 public:
  explicit HostBatchUpload(int buffers) : BatchUpload(Device::cpu, buffers) {}

  void begin(int b, bool fresh_memory) override {
    check_buffer("begin", b);
    ++counts_.batches;
    if (fresh_memory) ++counts_.serialized;
  }
  void copy(const Tensor& src, Tensor& dst) override {
    dst.copy_from(src);
    ++counts_.copies;
    counts_.bytes += static_cast<int64_t>(src.bytes());
  }
  void end(int b) override { check_buffer("end", b); }
  void wait_copied(int b) override { check_buffer("wait_copied", b); }
  void compute_after_copies(int b) override { check_buffer("compute_after_copies", b); }
  void compute_done_with(int b) override { check_buffer("compute_done_with", b); }
};

}  // namespace

std::unique_ptr<BatchUpload> BatchUpload::create(Context& ctx, int buffers) {
  ST_CHECK(buffers >= 1, "BatchUpload: " << buffers << " buffers");
  if (ctx.device() == Device::cpu) return std::make_unique<HostBatchUpload>(buffers);
  return cuda::create_batch_upload(ctx, buffers);
}

}  // namespace scaletrain
