#include "scaletrain/backend/context.hpp"

#include <omp.h>

#include "backend/cpu/dnnl_context.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain {

Context::Context(Device device, int threads) : device_(device), threads_(threads) {
  ST_CHECK(device == Device::cpu,
           "device " << device_name(device) << " is not built into this binary (configure with SCALETRAIN_CUDA=ON)");
  if (threads > 0) omp_set_num_threads(threads);
  threads_ = omp_get_max_threads();
  impl_ = std::make_unique<Impl>();
}

Context::~Context() = default;

void Context::synchronize() { impl_->stream.wait(); }

}  // namespace scaletrain
