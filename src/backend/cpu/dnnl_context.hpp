// Private: a Context's backend state. The oneDNN engine and stream serve the CPU kernels; on a GPU
// the CUDA state (device, streams, handles, allocator; backend/cuda/device_state.hpp) is there too.
#pragma once

#include <dnnl.hpp>

#include "backend/cuda/device_state.hpp"
#include "scaletrain/backend/context.hpp"

namespace scaletrain {

struct Context::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  cuda::DeviceStatePtr cuda;  // set on Device::cuda only
};

inline dnnl::engine& dnnl_engine(Context& ctx) { return ctx.impl().engine; }
inline dnnl::stream& dnnl_stream(Context& ctx) { return ctx.impl().stream; }

}  // namespace scaletrain
