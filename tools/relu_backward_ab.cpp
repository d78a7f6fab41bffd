// The two forms of the CPU relu_backward loop side by side in one process (docs/performance.md,
// "Where a step's time goes, op by op"): the old one loaded dy only where y > 0, which GCC left as
// a scalar branch per element; the current one (src/ops/cpu/activation_cpu.cpp) loads dy always
// and selects, which vectorises. Same bits; signs of y random, as in a synthetic-data step.
//
//   g++ -O2 -fopenmp tools/relu_backward_ab.cpp -o build/relu_backward_ab && build/relu_backward_ab
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

__attribute__((noinline)) void load_where_positive(const float* y, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__attribute__((noinline)) void load_always(const float* y, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

// Microseconds per call, over `calls` calls.
template <typename Fn>
double time_calls(Fn fn, const std::vector<float>& y, const std::vector<float>& dy, std::vector<float>& dx, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < calls; ++c) fn(y.data(), dy.data(), dx.data(), static_cast<int64_t>(y.size()));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls * 1e6;
}

}  // namespace

int main() {
  const int64_t n = 16 * 16 * 16 * 16;  // resnet20's first stage: batch 16, 16 channels, 16x16
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<float> y(n), dy(n), old_dx(n), new_dx(n);
  for (float& v : y) v = std::max(0.0f, normal(rng));  // a ReLU's output: zero where x < 0
  for (float& v : dy) v = normal(rng);
  for (int round = 0; round < 5; ++round) {
    const double old_us = time_calls(load_where_positive, y, dy, old_dx, 200);
    const double new_us = time_calls(load_always, y, dy, new_dx, 200);
    std::printf("round %d: load where y > 0 %.1f us, load always %.1f us per call (%.1fx), same bits: %s\n", round + 1,
                old_us, new_us, old_us / new_us, old_dx == new_dx ? "yes" : "NO");
  }
  return 0;
}
