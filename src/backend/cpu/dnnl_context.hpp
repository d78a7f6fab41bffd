// Private: the oneDNN engine and stream of a CPU Context, for CPU kernels.
#pragma once

#include <dnnl.hpp>

#include "scaletrain/backend/context.hpp"

namespace scaletrain {

struct Context::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

inline dnnl::engine& dnnl_engine(Context& ctx) { return ctx.impl().engine; }
inline dnnl::stream& dnnl_stream(Context& ctx) { return ctx.impl().stream; }

}  // namespace scaletrain
