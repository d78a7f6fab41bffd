// Execution context: one per rank. It owns the backend state that ops run on: for the CPU the
// thread count and the oneDNN engine and stream; for CUDA (later) the device, streams and library
// handles. Ops take a Context& so that a GPU stream can live here without changing op signatures.
#pragma once

#include <memory>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain {

class Context {
 public:
  // threads <= 0: leave the thread count as the environment set it (OMP_NUM_THREADS).
  explicit Context(Device device = Device::cpu, int threads = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  int threads() const { return threads_; }
  // Waits until every op submitted to this context has finished (a no-op on the CPU today,
  // where ops are synchronous; the stream sync on CUDA).
  void synchronize();

  // Backend state, defined in src/backend/<backend>/.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Device device_;
  int threads_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain
