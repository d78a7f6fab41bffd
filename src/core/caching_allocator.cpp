// Caching allocator: small blocks in exact-size bins, large ones best fit, split and merged (see
// the header for why).
#include "scaletrain/core/caching_allocator.hpp"

#include <algorithm>
#include <iterator>
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
  for (auto& [size, ptr] : cached_) underlying_.release(ptr);
  cached_.clear();
  // Small blocks in use are whole underlying allocations; large ones may be parts of a segment,
  // which is released once, by its base.
  for (auto& [ptr, size] : in_use_)
    if (size < kLargeThreshold) underlying_.release(ptr);
  in_use_.clear();
  for (auto& [base, size] : segments_) underlying_.release(base);
  segments_.clear();
  large_.clear();
  large_free_.clear();
}

void* CachingAllocator::take_small(std::size_t rounded) {
  auto it = cached_.find(rounded);
  if (it == cached_.end()) return nullptr;
  void* ptr = it->second;
  cached_.erase(it);
  return ptr;
}

// The smallest free large block that holds `rounded` (the lowest address among equals), its front
// handed out and the rest left free where there is a rest.
void* CachingAllocator::take_large(std::size_t rounded) {
  auto it = large_free_.lower_bound({rounded, nullptr});
  if (it == large_free_.end()) return nullptr;
  const auto [size, ptr] = *it;
  large_free_.erase(it);
  Block& block = large_.at(ptr);
  if (size > rounded) {
    char* rest = ptr + rounded;
    large_.emplace(rest, Block{size - rounded, block.segment, true});
    large_free_.emplace(size - rounded, rest);
    block.size = rounded;
  }
  block.free = false;
  return ptr;
}

// A new underlying allocation of `rounded` bytes; where none is left, every cached block that can
// be given back is, and the request tried once more. nullptr when even that fails.
void* CachingAllocator::allocate_underlying(std::size_t rounded) {
  void* ptr = underlying_.allocate(rounded);
  if (ptr == nullptr && (!cached_.empty() || !large_free_.empty())) {  // other sizes may fill the device
    free_cached_locked();
    ptr = underlying_.allocate(rounded);
  }
  if (ptr == nullptr) return nullptr;
  ++stats_.underlying_allocations;
  stats_.reserved_bytes += rounded;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return ptr;
}

// Gives back every small cached block, and every segment that is one free block again.
void CachingAllocator::free_cached_locked() {
  for (auto& [size, ptr] : cached_) {
    underlying_.release(ptr);
    stats_.reserved_bytes -= size;
    ++stats_.underlying_frees;
  }
  cached_.clear();
  for (auto it = segments_.begin(); it != segments_.end();) {
    const auto block = large_.find(it->first);
    if (!block->second.free || block->second.size != it->second) {
      ++it;
      continue;
    }
    large_free_.erase({block->second.size, block->first});
    large_.erase(block);
    underlying_.release(it->first);
    stats_.reserved_bytes -= it->second;
    ++stats_.underlying_frees;
    it = segments_.erase(it);
  }
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = rounded < kLargeThreshold ? take_small(rounded) : take_large(rounded);
  if (ptr == nullptr) {
    ptr = allocate_underlying(rounded);
    if (ptr == nullptr) return nullptr;
    if (rounded >= kLargeThreshold) {
      char* base = static_cast<char*>(ptr);
      segments_.emplace(base, rounded);
      large_.emplace(base, Block{rounded, base, false});
    }
  }
  in_use_.emplace(ptr, rounded);
  stats_.in_use_bytes += rounded;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return ptr;
}

// A released large block merges with the free blocks next to it in its own segment (never across
// segments: two underlying allocations may lie side by side, but are released apart).
void CachingAllocator::release_large(char* ptr) {
  auto it = large_.find(ptr);
  it->second.free = true;
  const auto next = std::next(it);
  if (next != large_.end() && next->second.free && next->second.segment == it->second.segment &&
      it->first + it->second.size == next->first) {
    large_free_.erase({next->second.size, next->first});
    it->second.size += next->second.size;
    large_.erase(next);
  }
  if (it != large_.begin()) {
    const auto prev = std::prev(it);
    if (prev->second.free && prev->second.segment == it->second.segment &&
        prev->first + prev->second.size == it->first) {
      large_free_.erase({prev->second.size, prev->first});
      prev->second.size += it->second.size;
      large_.erase(it);
      it = prev;
    }
  }
  large_free_.emplace(it->second.size, it->first);
}

void CachingAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  ST_CHECK(it != in_use_.end(), "CachingAllocator::release of " << ptr << ", which it did not hand out");
  const std::size_t rounded = it->second;
  in_use_.erase(it);
  stats_.in_use_bytes -= rounded;
  if (rounded < kLargeThreshold)
    cached_.emplace(rounded, ptr);
  else
    release_large(static_cast<char*>(ptr));
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
