// A caching allocator over an expensive underlying one (cudaMalloc/cudaFree): a released block is
// kept and handed out again for a request of the same rounded size, so that after the first
// training step, whose requests repeat every step, no underlying allocation or free happens.
// Sizes round up to 512 bytes below 1 MiB and to 2 MiB above, so a few shapes share a bin without
// wasting more than 2 MiB a block. When the underlying allocator has no memory left, every cached
// block is freed and the request tried once more.
// Blocks are reused in the order they are released: right for one stream of device work (the
// CUDA backend's compute stream), where a block released by an op is free for every later op.
// Plain C++ with no device library, so the CPU tests exercise it with malloc underneath.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace scaletrain {

struct AllocatorStats {
  std::size_t in_use_bytes = 0;         // handed out and not released (rounded sizes)
  std::size_t peak_in_use_bytes = 0;    // the most in_use_bytes ever was
  std::size_t reserved_bytes = 0;       // taken from the underlying allocator: in use plus cached
  std::size_t peak_reserved_bytes = 0;  // the most reserved_bytes ever was: the device memory the run needed
  int64_t underlying_allocations = 0;   // calls to the underlying allocate that succeeded
  int64_t underlying_frees = 0;         // calls to the underlying release
};

class CachingAllocator {
 public:
  // allocate(bytes) returns nullptr when the underlying memory is exhausted; release(ptr) frees.
  struct Underlying {
    std::function<void*(std::size_t)> allocate;
    std::function<void(void*)> release;
  };
  explicit CachingAllocator(Underlying underlying);
  // Frees the cached blocks and every block still in use (their tensors can no longer use them).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (0 allowed); nullptr when even an emptied cache leaves no room.
  void* allocate(std::size_t bytes);
  // Returns a block from allocate() to the cache; nullptr is ignored, any other pointer throws.
  void release(void* ptr);
  // Frees the cached blocks (not those in use).
  void empty_cache();
  AllocatorStats stats() const;

  static std::size_t rounded_size(std::size_t bytes);

 private:
  void* take_cached(std::size_t rounded);
  void free_cached_locked();

  Underlying underlying_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;       // rounded size -> free block
  std::unordered_map<void*, std::size_t> in_use_;  // block -> rounded size
  AllocatorStats stats_;
};

}  // namespace scaletrain
