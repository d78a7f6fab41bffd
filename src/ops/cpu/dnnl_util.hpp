// Private helpers for CPU kernels built on oneDNN: wrapping a scaletrain::Tensor as a dnnl::memory
// without copying, and a small per-thread cache of primitives keyed by shapes and parameters.
// Why a cache of our own: oneDNN caches compiled primitives, but building the primitive
// descriptor (implementation search) still costs tens of microseconds per call, which adds up
// over the hundreds of op calls of a training step. Entries are per thread because primitives
// and their descriptors are not meant to be shared across threads while executing.
#pragma once

#include <cstdint>
#include <dnnl.hpp>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/dnnl_context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::cpu {

using dnnl_tag = dnnl::memory::format_tag;
using dnnl_dims = dnnl::memory::dims;

// f32 memory descriptor with logical dims (oneDNN order: N, C, H, W for activations;
// O, I, KH, KW for weights) and the physical layout `tag`.
inline dnnl::memory::desc dnnl_desc(const dnnl_dims& dims, dnnl_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

// A dnnl::memory that points at the tensor's storage (no copy). `dims` are the logical dims in
// oneDNN order, `tag` the tensor's physical layout, e.g. an (N, H, W, C) tensor is
// dims {N, C, H, W} with dnnl_tag::nhwc.
inline dnnl::memory dnnl_memory(const Tensor& t, const dnnl_dims& dims, dnnl_tag tag, const dnnl::engine& engine) {
  ST_CHECK(t.dtype() == DType::f32, "oneDNN wrapper: expected a float32 tensor, got " << dtype_name(t.dtype()));
  dnnl::memory::desc md = dnnl_desc(dims, tag);
  ST_CHECK(md.get_size() == t.bytes(), "oneDNN wrapper: tensor " << shape_string(t.shape()) << " does not match "
                                                                 << md.get_size() / 4 << " elements");
  return dnnl::memory(md, engine, t.raw());
}

// Memory in the layout `want` for a user buffer `user`: `user` itself when the layouts agree,
// otherwise a new buffer (filled by reorder_into when `copy` is true).
inline dnnl::memory dnnl_maybe_reorder(dnnl::memory user, const dnnl::memory::desc& want, dnnl::stream& stream,
                                       bool copy) {
  if (user.get_desc() == want) return user;
  dnnl::memory m(want, user.get_engine());
  if (copy) dnnl::reorder(user, m).execute(stream, user, m);
  return m;
}

// Key of a cached primitive: every integer that shapes it, starting with engine_key(engine).
// Each Entry type has its own cache, so keys of different ops never collide.
using PrimitiveKey = std::vector<int64_t>;

inline int64_t engine_key(const dnnl::engine& engine) { return reinterpret_cast<int64_t>(engine.get()); }

struct PrimitiveKeyHash {
  std::size_t operator()(const PrimitiveKey& k) const {
    std::size_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<std::size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// Per-thread cache of `Entry` objects (a struct holding primitives and descriptors), built on
// first use by `make`. Bounded: when full it is simply cleared (shapes in training are few).
template <typename Entry>
Entry& cached_primitive(const PrimitiveKey& key, const std::function<Entry()>& make) {
  constexpr std::size_t kMaxEntries = 512;
  thread_local std::unordered_map<PrimitiveKey, std::unique_ptr<Entry>, PrimitiveKeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  if (cache.size() >= kMaxEntries) cache.clear();
  std::unique_ptr<Entry> entry;
  try {
    entry = std::make_unique<Entry>(make());
  } catch (const dnnl::error& e) {
    std::string sizes;
    for (std::size_t i = 1; i < key.size(); ++i) sizes += (i > 1 ? ", " : "") + std::to_string(key[i]);
    ST_THROW("oneDNN could not build a primitive for sizes (" << sizes << "): " << e.what());
  }
  Entry& ref = *entry;
  cache.emplace(key, std::move(entry));
  return ref;
}

}  // namespace scaletrain::cpu
