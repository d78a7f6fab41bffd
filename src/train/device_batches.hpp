// DeviceBatches: a BatchSource that hands out each batch already on the context's device, with
// the next batch's copy running while the current step computes (--input-copy overlap, issue 26
// section 4). It wraps the task's host source (the loader's pinned buffers) and keeps two
// buffers of its own (BatchUpload, backend/batch_upload.hpp):
//
//   next() for step k:  the work queued for step k-1 is the last to read its buffer; the compute
//                       stream waits for batch k's copies (queued during step k-1) and batch k is
//                       handed out; then batch k+1 is taken from the host source and its copies
//                       queued into the other buffer, behind step k-1's use of it. The host only
//                       waits for batch k's copies to have run before taking batch k+1 (the host
//                       source reuses batch k's memory then), and they ran during step k-1.
//
// The tensors the task reads only on the device (Task::device_batch_keys) go to the device
// buffers; the others (a translation batch's token counts, read on the host) are copied into host
// buffers of the same double set, since the host source's views die at its next call.
// The host source is asked for one batch ahead, on every rank alike, so the calls stay in step
// across ranks (collective readers); bytes_read() and skipped_samples() include that batch.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scaletrain/backend/batch_upload.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

class DeviceBatches final : public BatchSource {
 public:
  DeviceBatches(std::unique_ptr<BatchSource> host, Context& ctx, std::vector<std::string> device_keys, int buffers = 2);
  ~DeviceBatches() override;

  int64_t steps_per_epoch() const override { return host_->steps_per_epoch(); }
  void start_epoch(int epoch, int64_t first_step) override;
  bool next(Batch& batch) override;
  int64_t bytes_read() const override { return host_->bytes_read(); }
  int64_t skipped_samples() const override { return host_->skipped_samples(); }
  std::optional<StepWork> last_step_work() const override { return handed_out_work_; }

  // What the upload did (tests, report.json's input_copy).
  const BatchUpload::Counts& counts() const { return upload_->counts(); }

 private:
  void finish_handed_out();
  bool stage_next();
  bool fit_buffer(int b, const Batch& host);
  void drain();

  std::unique_ptr<BatchSource> host_;  // first: the copies in flight read its memory
  std::vector<std::string> device_keys_;
  Device device_;
  std::vector<Batch> buffers_;           // the batch each buffer holds: device and host tensors
  std::unique_ptr<BatchUpload> upload_;  // after the buffers: its destructor waits for the copies
  int next_buffer_ = 0;
  int staged_ = -1;      // the buffer whose copies are queued and not yet handed out
  int handed_out_ = -1;  // the buffer of the batch handed out last, while its step is queued
  int from_host_ = -1;   // the buffer copied from the host source's current views
  bool host_ended_ = false;
  std::optional<StepWork> staged_work_, handed_out_work_;
};

// The task's source wrapped in DeviceBatches where --input-copy asks for it (auto: on a GPU);
// returned as it is otherwise, and for tasks with no device batch keys.
std::unique_ptr<BatchSource> with_input_copy(std::unique_ptr<BatchSource> host, Context& ctx, const Task& task,
                                             const std::string& input_copy);

}  // namespace scaletrain::train
