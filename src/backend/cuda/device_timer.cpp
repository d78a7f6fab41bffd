// The device event timer (device_timer.hpp) with CUDA events on the Context's compute stream:
// a pair of events per interval, recorded where the marks are and read with cudaEventElapsedTime
// once the stream has passed them. Events are made on first need and kept, so a step records
// events without creating any.
#include "scaletrain/backend/device_timer.hpp"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "backend/cuda/cuda_context.hpp"

namespace scaletrain {

struct DeviceEventTimer::Impl {
  struct Slot {
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events;  // (start, end) of each interval
    std::size_t used = 0;                                     // intervals marked since collect()
    bool open = false;                                        // begin() without its end() yet
  };
  cudaStream_t stream = nullptr;
  std::vector<Slot> slots;
  cudaError_t error = cudaSuccess;  // the first failed mark, thrown by collect()
  const char* failed_call = "";

  ~Impl() {
    for (Slot& s : slots)
      for (auto& e : s.events) {
        cudaEventDestroy(e.first);
        cudaEventDestroy(e.second);
      }
  }
  void note(cudaError_t status, const char* call) {
    if (status != cudaSuccess && error == cudaSuccess) {
      error = status;
      failed_call = call;
    }
  }
};

DeviceEventTimer::DeviceEventTimer(Context& ctx, int slots) : slots_(slots) {
  if (ctx.device() != Device::cuda) return;
  impl_ = std::make_unique<Impl>();
  impl_->stream = cuda::compute_stream(ctx);
  impl_->slots.resize(static_cast<std::size_t>(slots));
}

DeviceEventTimer::~DeviceEventTimer() = default;

bool DeviceEventTimer::enabled() const { return impl_ != nullptr; }

void DeviceEventTimer::begin(int slot) noexcept {
  if (!impl_ || slot < 0 || slot >= slots_) return;
  Impl::Slot& s = impl_->slots[static_cast<std::size_t>(slot)];
  if (s.used == s.events.size()) {
    cudaEvent_t start = nullptr, end = nullptr;
    const cudaError_t a = cudaEventCreate(&start), b = cudaEventCreate(&end);
    if (a != cudaSuccess || b != cudaSuccess) {
      impl_->note(a != cudaSuccess ? a : b, "cudaEventCreate");
      if (a == cudaSuccess) cudaEventDestroy(start);
      if (b == cudaSuccess) cudaEventDestroy(end);
      return;
    }
    try {
      s.events.emplace_back(start, end);
    } catch (...) {  // out of host memory: this interval goes unmeasured (begin never throws)
      cudaEventDestroy(start);
      cudaEventDestroy(end);
      return;
    }
  }
  impl_->note(cudaEventRecord(s.events[s.used].first, impl_->stream), "cudaEventRecord");
  s.open = true;
}

void DeviceEventTimer::end(int slot) noexcept {
  if (!impl_ || slot < 0 || slot >= slots_) return;
  Impl::Slot& s = impl_->slots[static_cast<std::size_t>(slot)];
  if (!s.open) return;
  impl_->note(cudaEventRecord(s.events[s.used].second, impl_->stream), "cudaEventRecord");
  s.open = false;
  ++s.used;
}

std::vector<double> DeviceEventTimer::collect() {
  std::vector<double> seconds(static_cast<std::size_t>(slots_), 0.0);
  if (!impl_) return seconds;
  if (impl_->error != cudaSuccess) {
    const cudaError_t status = impl_->error;
    impl_->error = cudaSuccess;
    ST_THROW("GPU phase timer: " << impl_->failed_call << " failed: " << cuda::detail::cuda_message(status));
  }
  for (std::size_t i = 0; i < impl_->slots.size(); ++i) {
    Impl::Slot& s = impl_->slots[i];
    for (std::size_t k = 0; k < s.used; ++k) {
      float ms = 0.0f;
      ST_CHECK_CUDA(cudaEventSynchronize(s.events[k].second));
      ST_CHECK_CUDA(cudaEventElapsedTime(&ms, s.events[k].first, s.events[k].second));
      seconds[i] += ms / 1e3;
    }
    s.used = 0;
  }
  return seconds;
}

}  // namespace scaletrain
