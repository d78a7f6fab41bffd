// Private to src/comm: the buckets of the flat gradients (plan_buckets) and, during a step, which
// parameters backward has marked ready, shared by the bucketed MPI reducer and the NCCL reducer:
// both start a bucket when all its parameters are ready, name the parameters backward forgot, and
// list the buckets in their report's bucket_layout alike.
#pragma once

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/tensor/flat_layout.hpp"

namespace scaletrain::comm {

class BucketReadiness {
 public:
  // `grads` must outlive this (the reducer's own copy of the layout).
  BucketReadiness(const FlatLayout& grads, double bucket_mb) : grads_(grads), buckets_(plan_buckets(grads, bucket_mb)) {
    bucket_of_.assign(static_cast<std::size_t>(grads_.num_segments()), 0);
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (int i = buckets_[b].first_param; i <= buckets_[b].last_param; ++i) bucket_of_[i] = static_cast<int>(b);
    ready_.assign(bucket_of_.size(), 0);
    ready_count_.assign(buckets_.size(), 0);
  }

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int count() const { return static_cast<int>(buckets_.size()); }
  const std::string& name_of(int param) const { return grads_.segments[static_cast<std::size_t>(param)].name; }

  // A new step: nothing ready.
  void reset() {
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(ready_count_.begin(), ready_count_.end(), 0);
  }

  // Parameter `index`'s gradient is written (once per step); returns its bucket.
  int mark(int index) {
    ST_CHECK(index >= 0 && index < grads_.num_segments(),
             "internal error: gradient ready for parameter " << index << " of " << grads_.num_segments());
    ST_CHECK(!ready_[index],
             "internal error: gradient of parameter " << name_of(index) << " marked ready twice in one step");
    ready_[index] = 1;
    const int b = bucket_of_[index];
    ++ready_count_[b];
    return b;
  }

  bool complete(int b) const { return ready_count_[b] == buckets_[b].last_param - buckets_[b].first_param + 1; }

  // finish() with buckets never started: names the parameters backward never marked.
  [[noreturn]] void throw_missing() const {
    std::ostringstream missing;
    int n = 0;
    for (int i = 0; i < grads_.num_segments(); ++i) {
      if (ready_[i]) continue;
      if (n < 3) missing << (n ? ", " : "") << name_of(i);
      ++n;
    }
    ST_THROW("internal error: backward never marked the gradient of " << n << " parameter(s) ready (" << missing.str()
                                                                      << (n > 3 ? ", ..." : "")
                                                                      << "), so their all-reduce could not run");
  }

  // bucket_layout's list: per bucket its number, bytes, offset, parameter count and names (in the
  // order backward completes them: the last registered first); `add` sets what carries it.
  Json list(const std::function<void(Json& bucket, int64_t bytes)>& add) const {
    Json list = Json::array();
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      const GradientBucket& b = buckets_[k];
      const int64_t bytes = b.count * static_cast<int64_t>(sizeof(float));
      Json j = Json::object();
      j.set("bucket", static_cast<int64_t>(k));
      j.set("bytes", bytes);
      j.set("offset_bytes", b.offset * static_cast<int64_t>(sizeof(float)));
      j.set("parameters", b.last_param - b.first_param + 1);
      j.set("first_parameter", name_of(b.last_param));
      j.set("last_parameter", name_of(b.first_param));
      add(j, bytes);
      list.push_back(j);
    }
    return list;
  }

 private:
  const FlatLayout& grads_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;    // parameter -> bucket
  std::vector<char> ready_;       // per parameter, this step
  std::vector<int> ready_count_;  // per bucket, this step
};

}  // namespace scaletrain::comm
