// The CUDA Context and its memory on a real GPU, against independent expectations: bytes copied
// host -> device -> host come back bitwise; fill and zero write what the host would; after the
// first of several identical "steps" of allocations no cudaMalloc happens (the caching
// allocator's count); a request larger than the GPU is a clear error naming the size and the
// free memory, after which the GPU still works; a second Context or a GPU that is not there is
// refused; and the SGD update op gives the CPU op's bits.
// A plain main (no Boost.Test), like test_device_info. Exit codes: 0 passed, 1 failed, 77 skipped.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/sgd.hpp"

namespace st = scaletrain;
using st::gpu_test::check;
using st::gpu_test::contains;
using st::gpu_test::error_of;

namespace {
st::Tensor random_tensor(int64_t n, uint64_t seed) {
  st::Tensor t = st::Tensor::empty({n});
  st::Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return t;
}

bool bitwise_equal(const st::Tensor& a, const st::Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

void check_copies(st::Context& ctx) {
  const st::Tensor host = random_tensor(100003, 1);  // not a multiple of any block size
  st::Tensor dev = host.to(st::Device::cuda);
  check(dev.device() == st::Device::cuda, "to(cuda) gives a cuda tensor");
  check(bitwise_equal(dev.to(st::Device::cpu), host), "host -> device -> host is bitwise");
  const st::Tensor tail = st::Tensor::view_of(dev, 100000, {3}).to(st::Device::cpu);
  check(std::memcmp(tail.raw(), host.data<float>() + 100000, 12) == 0, "a view's offset is kept on the device");
  st::Tensor copy = dev.clone();
  check(bitwise_equal(copy.to(st::Device::cpu), host), "clone on the device");
  copy.fill(3.5f);
  const st::Tensor filled = copy.to(st::Device::cpu);
  bool all = true;
  for (int64_t i = 0; i < filled.numel(); ++i) all = all && filled.data<float>()[i] == 3.5f;
  check(all, "fill(3.5) on the device");
  copy.zero();
  check(bitwise_equal(copy.to(st::Device::cpu), st::Tensor::zeros({100003})), "zero() on the device");
  check(contains(error_of([&] { dev.data<float>(); }), "copy it to the CPU first"),
        "host access to device memory throws");
  ctx.synchronize();
}

void check_allocations_stop_after_the_first_step(st::Context& ctx) {
  auto step = [] {
    std::vector<st::Tensor> activations;  // released together at the end of the step
    for (int64_t n : {64, 1000, 1000, 1 << 20, 3 << 18, 7})
      activations.push_back(st::Tensor::empty({n}, st::DType::f32, st::Device::cuda));
  };
  step();
  const st::AllocatorStats first = ctx.device_memory_stats();
  for (int i = 0; i < 5; ++i) step();
  const st::AllocatorStats later = ctx.device_memory_stats();
  check(
      later.underlying_allocations == first.underlying_allocations && later.underlying_frees == first.underlying_frees,
      "no cudaMalloc or cudaFree after the first step (" + std::to_string(first.underlying_allocations) + " then " +
          std::to_string(later.underlying_allocations) + ")");
  check(later.peak_in_use_bytes > 0 && later.peak_reserved_bytes >= later.peak_in_use_bytes,
        "peak device memory is recorded (" + std::to_string(later.peak_reserved_bytes) + " bytes)");
}

void check_out_of_memory(st::Context& ctx) {
  const std::string e = error_of([] { st::Tensor::empty({int64_t{1} << 40}, st::DType::f32, st::Device::cuda); });
  std::printf("      message: %s\n", e.c_str());
  check(contains(e, "out of GPU memory on GPU " + std::to_string(ctx.gpu_index()) + ": asked for 4194304.0 MiB") &&
            contains(e, "free of"),
        "4 TiB is a clear out-of-memory error naming the size and the free memory");
  check(bitwise_equal(random_tensor(10, 2).to(st::Device::cuda).to(st::Device::cpu), random_tensor(10, 2)),
        "the GPU still works after an out-of-memory error");
}

void check_refusals(int visible) {
  check(contains(error_of([] { st::Context second(st::Device::cuda, 0, 0); }), "already open"),
        "a second CUDA Context is refused");
  // (The first Context is open in main, so this refusal is the one-at-a-time rule or the index.)
  const std::string e = error_of([&] { st::Context none(st::Device::cuda, 0, visible); });
  check(!e.empty(), "a GPU index past the visible ones is refused: " + e);
}

void check_sgd_matches_the_cpu(st::Context& gpu) {
  st::Context cpu(st::Device::cpu, 1);
  const int64_t n = 300007;
  for (bool nesterov : {false, true}) {
    st::ops::SgdUpdateParams p{0.1f, 0.9f, 5e-5f, nesterov};
    st::Tensor w = random_tensor(n, 3), g = random_tensor(n, 4), v = random_tensor(n, 5);
    st::Tensor wd = w.to(st::Device::cuda), gd = g.to(st::Device::cuda), vd = v.to(st::Device::cuda);
    for (int s = 0; s < 3; ++s) {
      st::ops::sgd_update(cpu, p, w, g, v);
      st::ops::sgd_update(gpu, p, wd, gd, vd);
    }
    check(bitwise_equal(wd.to(st::Device::cpu), w) && bitwise_equal(vd.to(st::Device::cpu), v),
          std::string("sgd_update on the GPU gives the CPU's bits (3 steps") + (nesterov ? ", nesterov)" : ")"));
  }
}
}  // namespace

int main() {
  return st::gpu_test::run_gpu_checks([](st::Context& ctx, const st::GpuInventory& inventory) {
    check_copies(ctx);
    check_allocations_stop_after_the_first_step(ctx);
    check_out_of_memory(ctx);
    check_refusals(static_cast<int>(inventory.gpus.size()));
    check_sgd_matches_the_cpu(ctx);
  });
}
