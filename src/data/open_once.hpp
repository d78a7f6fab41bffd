// Private: lazy opening for the shard readers. They open their shards on their first read (on the
// loader's I/O thread); a failure is remembered and rethrown by every later read without trying
// again, so the loader's --skip-bad-samples retries (one read per sample) do not re-open every
// shard once per sample before giving up.
#pragma once

#include <exception>

namespace scaletrain::data {

class OpenOnce {
 public:
  // Runs open() the first time; afterwards returns, or rethrows the first call's failure.
  template <typename Open>
  void operator()(Open&& open) {
    if (failure_) std::rethrow_exception(failure_);
    if (done_) return;
    try {
      open();
    } catch (...) {
      failure_ = std::current_exception();
      throw;
    }
    done_ = true;
  }

 private:
  bool done_ = false;
  std::exception_ptr failure_;
};

}  // namespace scaletrain::data
