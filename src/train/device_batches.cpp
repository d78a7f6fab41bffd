#include "train/device_batches.hpp"

#include <algorithm>
#include <utility>

#include "scaletrain/core/error.hpp"

namespace scaletrain::train {

DeviceBatches::DeviceBatches(std::unique_ptr<BatchSource> host, Context& ctx, std::vector<std::string> device_keys,
                             int buffers)
    : host_(std::move(host)),
      device_keys_(std::move(device_keys)),
      device_(ctx.device()),
      buffers_(static_cast<std::size_t>(buffers)),
      upload_(BatchUpload::create(ctx, buffers)) {
  ST_CHECK(buffers >= 2, "internal: DeviceBatches needs two buffers or more to overlap, got " << buffers);
}

// The copies in flight read the host source's memory and write the buffers: the upload's
// destructor (first, as the last member) waits for them.
DeviceBatches::~DeviceBatches() = default;

void DeviceBatches::start_epoch(int epoch, int64_t first_step) {
  drain();
  host_->start_epoch(epoch, first_step);
}

// Step k: step k-1's work is queued (the caller asks for a batch once the previous step has
// returned), so it is the last to read its buffer. Batch k was staged during step k-1 (or is
// staged now, at an epoch's first step); the compute stream waits for its copies on the device.
// Then batch k+1's copies are queued, to run while step k computes.
bool DeviceBatches::next(Batch& batch) {
  finish_handed_out();
  if (staged_ < 0 && !host_ended_) stage_next();
  if (staged_ < 0) return false;
  handed_out_ = staged_;
  handed_out_work_ = staged_work_;
  staged_ = -1;
  upload_->compute_after_copies(handed_out_);
  batch = buffers_[static_cast<std::size_t>(handed_out_)];
  stage_next();
  return true;
}

void DeviceBatches::finish_handed_out() {
  if (handed_out_ < 0) return;
  upload_->compute_done_with(handed_out_);
  handed_out_ = -1;
}

// The host source's next batch into the next buffer, its copies queued behind the last step that
// read that buffer. False at the end of the host source's epoch.
bool DeviceBatches::stage_next() {
  // The host source's next call reuses the memory the last copies read.
  if (from_host_ >= 0) upload_->wait_copied(from_host_);
  from_host_ = -1;
  Batch host;
  if (!host_->next(host)) {
    host_ended_ = true;
    return false;
  }
  const int b = next_buffer_;
  next_buffer_ = (next_buffer_ + 1) % static_cast<int>(buffers_.size());
  const bool fresh = fit_buffer(b, host);
  Batch& dst = buffers_[static_cast<std::size_t>(b)];
  upload_->begin(b, fresh);
  for (const std::string& name : host.names()) {
    if (dst.at(name).device() == Device::cpu && device_ != Device::cpu)
      dst.slot(name).copy_from(host.at(name));  // read on the host: its step has long been queued
    else
      upload_->copy(host.at(name), dst.slot(name));
  }
  upload_->end(b);
  from_host_ = b;
  staged_ = b;
  staged_work_ = host_->last_step_work();
  return true;
}

// Buffer b's tensors shaped as the host batch's: the device keys on the device, the others on the
// host. True when a device tensor was (re)allocated (a new shape: the first batches, or token
// batches whose length changes).
bool DeviceBatches::fit_buffer(int b, const Batch& host) {
  Batch& dst = buffers_[static_cast<std::size_t>(b)];
  const std::vector<std::string> had = dst.names();
  Batch fitted;
  bool fresh = false;
  for (const std::string& name : host.names()) {
    const Tensor& src = host.at(name);
    const bool on_device = std::find(device_keys_.begin(), device_keys_.end(), name) != device_keys_.end();
    const Device where = on_device ? device_ : Device::cpu;
    Tensor& t = fitted.slot(name);
    if (std::find(had.begin(), had.end(), name) != had.end()) t = dst.at(name);
    if (!t.defined() || t.shape() != src.shape() || t.dtype() != src.dtype() || t.device() != where) {
      t = Tensor::empty(src.shape(), src.dtype(), where);
      fresh = fresh || on_device;
    }
  }
  dst = fitted;
  return fresh;
}

// Before the host source starts over: the step handed out last is done with its buffer, and the
// copies from the host source's memory have run. A staged batch of the old epoch is dropped.
void DeviceBatches::drain() {
  finish_handed_out();
  if (from_host_ >= 0) upload_->wait_copied(from_host_);
  from_host_ = -1;
  staged_ = -1;
  host_ended_ = false;
  handed_out_work_.reset();
}

std::unique_ptr<BatchSource> with_input_copy(std::unique_ptr<BatchSource> host, Context& ctx, const Task& task,
                                             const std::string& input_copy) {
  const bool overlap = input_copy == "overlap" || (input_copy == "auto" && ctx.device() != Device::cpu);
  std::vector<std::string> keys = task.device_batch_keys();
  if (!overlap || keys.empty()) return host;
  return std::make_unique<DeviceBatches>(std::move(host), ctx, std::move(keys));
}

}  // namespace scaletrain::train
