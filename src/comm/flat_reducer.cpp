// The flat gradient reducer: after backward, one in-place MPI all-reduce (sum) of the whole flat
// gradient buffer, then a division by the world size. It is the simple baseline the bucketed,
// overlapped reducer (bucketed_reducer.cpp) is measured and tested against.
#include <cstdint>

#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"

namespace scaletrain::comm {
namespace {

class FlatReducer final : public GradientReducer {
 public:
  // comm and params must outlive the reducer.
  FlatReducer(const Communicator& comm, nn::ParameterSet& params) : comm_(comm), params_(params) {
    ST_CHECK(params.finalized(), "the flat gradient reducer needs a finalized ParameterSet");
  }

  std::string name() const override { return "flat"; }

  void finish() override {
    Tensor& grads = params_.flat_grads();
    const double start = now_seconds();
    comm_.allreduce_sum(grads);
    comm_seconds_ += now_seconds() - start;
    if (comm_.size() == 1) return;
    // Divide rather than multiply by 1/P: the mean is then correctly rounded, as in PyTorch DDP.
    const float size = static_cast<float>(comm_.size());
    float* g = grads.data<float>();
    const int64_t n = grads.numel();
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 16))
    for (int64_t i = 0; i < n; ++i) g[i] /= size;
  }

  int64_t bytes_per_step() const override { return static_cast<int64_t>(params_.flat_grads().bytes()); }

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

  std::string describe() const override { return "flat (one MPI all-reduce of all gradients after backward)"; }

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
  nn::ParameterSet& params_;
  double comm_seconds_ = 0.0;
};

}  // namespace

std::unique_ptr<GradientReducer> make_flat_reducer(const Communicator& comm, nn::ParameterSet& params) {
  return std::make_unique<FlatReducer>(comm, params);
}

}  // namespace scaletrain::comm
