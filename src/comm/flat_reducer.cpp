// The flat gradient reducer: after backward, one in-place MPI all-reduce (sum) of the whole flat
// gradient buffer, then a division by the world size. It is the simple baseline the bucketed,
// overlapped reducer (bucketed_reducer.cpp) is measured and tested against.
// Staged (the gradients on a GPU): the whole buffer is copied to the staging's host mirror once
// backward's work has run, all-reduced and divided there, and copied back, with the compute
// stream ordered after the copy back.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "comm/gradient_staging.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"

namespace scaletrain::comm {
namespace {

class FlatReducer final : public GradientReducer {
 public:
  // comm and the gradients' buffer must outlive the reducer.
  FlatReducer(const Communicator& comm, const FlatLayout& gradients, std::shared_ptr<DeviceStaging> staging)
      : comm_(comm), grads_(*gradients.flat), staging_(std::move(staging)) {
    check_staging(gradients, staging_.get(), "flat");
  }

  std::string name() const override { return "flat"; }

  void finish() override {
    const int64_t n = grads_.numel();
    if (staging_) {
      staging_->copy_to_host_after_compute(0, n);
      staging_->wait_host(0, n);
    }
    float* g = staging_ ? staging_->host() : grads_.data<float>();
    const double start = now_seconds();
    comm_.allreduce_sum(g, n);
    comm_seconds_ += now_seconds() - start;
    if (comm_.size() > 1) {
      // Divide rather than multiply by 1/P: the mean is then correctly rounded, as in PyTorch DDP.
      const float size = static_cast<float>(comm_.size());
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 16))
      for (int64_t i = 0; i < n; ++i) g[i] /= size;
    }
    if (staging_) {
      staging_->copy_to_device(0, n);
      staging_->device_ready_for_compute();
    }
  }

  int64_t bytes_per_step() const override { return static_cast<int64_t>(grads_.bytes()); }

  Json layout() const override {
    Json j = Json::object();
    j.set("reducer", "flat");
    j.set("algorithm", "mpi");
    j.set("overlap", false);
    j.set("buckets", 1);
    j.set("bytes", bytes_per_step());
    return j;
  }

  // Time inside the blocking MPI all-reduce (the division excluded).
  double communication_seconds() const override { return comm_seconds_; }

  std::string describe() const override {
    return std::string("flat (one MPI all-reduce of all gradients after backward") +
           (staging_ ? ", through pinned host buffers)" : ")");
  }

  Json options() const override {
    Json j = Json::object();
    j.set("algorithm", "mpi");
    j.set("compression", "none");
    j.set("overlap", false);
    return j;
  }

  std::string algorithm_for(int64_t) const override { return "mpi"; }

  void allreduce_now(float* data, int64_t count) override { comm_.allreduce_sum(data, count); }

 private:
  const Communicator& comm_;
  Tensor& grads_;
  const std::shared_ptr<DeviceStaging> staging_;  // null: all-reduce flat_grads in place
  double comm_seconds_ = 0.0;
};

}  // namespace

std::unique_ptr<GradientReducer> make_flat_reducer(const Communicator& comm, const FlatLayout& gradients,
                                                   std::shared_ptr<DeviceStaging> staging) {
  return std::make_unique<FlatReducer>(comm, gradients, std::move(staging));
}

}  // namespace scaletrain::comm
