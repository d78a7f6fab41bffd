// Caching allocator: exact-size bins (see the header for why that suffices for training steps).
#include "scaletrain/core/caching_allocator.hpp"

#include <algorithm>
#include <utility>

#include "scaletrain/core/error.hpp"

namespace scaletrain {
namespace {
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeThreshold = std::size_t{1} << 20;
constexpr std::size_t kLargeRound = std::size_t{2} << 20;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
}  // namespace

std::size_t CachingAllocator::rounded_size(std::size_t bytes) {
  if (bytes == 0) return kSmallRound;
  return bytes < kLargeThreshold ? round_up(bytes, kSmallRound) : round_up(bytes, kLargeRound);
}

CachingAllocator::CachingAllocator(Underlying underlying) : underlying_(std::move(underlying)) {
  ST_CHECK(underlying_.allocate && underlying_.release, "CachingAllocator needs an underlying allocate and release");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  free_cached_locked();
  for (auto& [ptr, size] : in_use_) underlying_.release(ptr);
  in_use_.clear();
}

void* CachingAllocator::take_cached(std::size_t rounded) {
  auto it = cached_.find(rounded);
  if (it == cached_.end()) return nullptr;
  void* ptr = it->second;
  cached_.erase(it);
  return ptr;
}

void CachingAllocator::free_cached_locked() {
  for (auto& [size, ptr] : cached_) {
    underlying_.release(ptr);
    stats_.reserved_bytes -= size;
    ++stats_.underlying_frees;
  }
  cached_.clear();
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = take_cached(rounded);
  if (ptr == nullptr) {
    ptr = underlying_.allocate(rounded);
    if (ptr == nullptr && !cached_.empty()) {  // blocks of other sizes may be what fills the device
      free_cached_locked();
      ptr = underlying_.allocate(rounded);
    }
    if (ptr == nullptr) return nullptr;
    ++stats_.underlying_allocations;
    stats_.reserved_bytes += rounded;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  in_use_.emplace(ptr, rounded);
  stats_.in_use_bytes += rounded;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return ptr;
}

void CachingAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  ST_CHECK(it != in_use_.end(), "CachingAllocator::release of " << ptr << ", which it did not hand out");
  const std::size_t rounded = it->second;
  in_use_.erase(it);
  stats_.in_use_bytes -= rounded;
  cached_.emplace(rounded, ptr);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  free_cached_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace scaletrain
