// The one-rank reducer (gradient_reducer.hpp, make_single_rank_reducer): nothing to reduce.
#include <algorithm>
#include <sstream>

#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {
namespace {

constexpr const char* kNone = "none (one rank)";

class SingleRankReducer final : public GradientReducer {
 public:
  explicit SingleRankReducer(const FlatLayout& gradients)
      : grads_(gradients), ready_(static_cast<std::size_t>(gradients.num_segments()), 0) {}

  std::string name() const override { return kNone; }
  void begin_step() override { std::fill(ready_.begin(), ready_.end(), 0); }
  void on_grad_ready(int index) override {
    ST_CHECK(index >= 0 && index < grads_.num_segments(),
             "internal error: gradient ready for parameter " << index << " of " << grads_.num_segments());
    ready_[static_cast<std::size_t>(index)] = 1;
  }
  // The gradients are the mean already; a gradient backward never announced is the same bug a
  // bucketed reducer reports (its bucket would never start on a run of several ranks).
  void finish() override {
    for (int i = 0; i < grads_.num_segments(); ++i)
      ST_CHECK(ready_[static_cast<std::size_t>(i)], "internal error: backward never marked the gradient of "
                                                        << grads_.segments[static_cast<std::size_t>(i)].name
                                                        << " ready");
  }
  int64_t bytes_per_step() const override { return 0; }
  Json layout() const override {
    Json j = Json::object();
    j.set("reducer", "none");
    j.set("algorithm", kNone);
    j.set("bytes", int64_t{0});
    j.set("reason", "one rank: its gradients are the mean, nothing is all-reduced or staged");
    return j;
  }
  double communication_seconds() const override { return 0.0; }
  std::string describe() const override {
    return "none: one rank, whose gradients are already the mean (no all-reduce, no copies to the host)";
  }
  Json options() const override {
    Json j = Json::object();
    j.set("algorithm", kNone);
    return j;
  }
  std::string algorithm_for(int64_t) const override { return kNone; }
  void allreduce_now(float*, int64_t) override {}  // the sum over one rank: the data itself

 private:
  const FlatLayout grads_;
  std::vector<char> ready_;
};

}  // namespace

std::unique_ptr<GradientReducer> make_single_rank_reducer(const FlatLayout& gradients) {
  return std::make_unique<SingleRankReducer>(gradients);
}

}  // namespace scaletrain::comm
