// BatchUpload: the copies of input batches from host memory (the loader's pinned buffers) into
// device buffers, on a stream of their own, so that the next batch's copy runs while the current
// step computes (issue 26, section 4). The buffers are numbered (two: double buffering); each is
// written by the copies of one batch and read by the compute work of that batch's step, and
// events order the two without the host waiting for either:
//
//   copy stream     waits for `used[b]` (the step that read buffer b last), copies, records
//                   `copied[b]`;
//   compute stream  waits for `copied[b]` before the step that reads buffer b; records `used[b]`
//                   once that step's work is queued;
//   host            waits for `copied[b]` only before it hands the copies' host sources back
//                   to the loader, which reuses them.
//
// No CUDA header here: training code includes it in every build. Two implementations behind
// create():
//   cuda: the Context's copy stream and events (src/backend/cuda/batch_upload.cpp);
//   cpu:  plain copies, done when copy() returns, so that the double-buffered source
//         (train/device_batches.hpp) runs, and is tested, on machines without a GPU.
// Both count what they did, for tests and the report.
#pragma once

#include <cstdint>
#include <memory>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain {

class BatchUpload {
 public:
  // `buffers` numbered buffers on ctx's device (ctx must outlive the upload). The CUDA one needs
  // the CUDA backend ("not built" otherwise).
  static std::unique_ptr<BatchUpload> create(Context& ctx, int buffers);

  virtual ~BatchUpload() = default;
  BatchUpload(const BatchUpload&) = delete;
  BatchUpload& operator=(const BatchUpload&) = delete;

  Device device() const { return device_; }
  int buffers() const { return buffers_; }

  // Main thread, once per batch, in this order:
  // The copies into buffer b may start once the compute work that last read it has run.
  // `fresh_memory`: a tensor of buffer b was (re)allocated just now. The caching allocator may
  // hand out memory that compute work queued earlier still uses (it orders reuse on the compute
  // stream only), so the copies then wait for all the compute work queued so far.
  virtual void begin(int b, bool fresh_memory) = 0;
  // Queues the copy of `src` (host) into `dst` (buffer b's tensor on the device, same dtype and
  // size). Returns at once on a GPU; `src` must stay unchanged until wait_copied(b) returns.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  // After the batch's last copy(): marks them done (copied[b]).
  virtual void end(int b) = 0;
  // The host waits until buffer b's copies have run (their sources may then be reused).
  virtual void wait_copied(int b) = 0;
  // Compute work queued from now on runs after buffer b's copies (a device-side wait).
  virtual void compute_after_copies(int b) = 0;
  // The compute work queued so far is the last to read buffer b (used[b]).
  virtual void compute_done_with(int b) = 0;

  // What it did: batches begun, tensor copies, and copies that had to wait for all the queued
  // compute work (fresh memory).
  struct Counts {
    int64_t batches = 0;
    int64_t copies = 0;
    int64_t serialized = 0;
    int64_t bytes = 0;
  };
  const Counts& counts() const { return counts_; }

 protected:
  BatchUpload(Device device, int buffers) : device_(device), buffers_(buffers) {}
  void check_buffer(const char* what, int b) const;
  Counts counts_;

 private:
  Device device_;
  int buffers_;
};

}  // namespace scaletrain
