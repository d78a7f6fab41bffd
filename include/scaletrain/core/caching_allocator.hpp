// A caching allocator over an expensive underlying one (cudaMalloc/cudaFree): a released block is
// kept and handed out again, so that after the first training steps, whose requests repeat every
// step, no underlying allocation or free happens. Sizes round up to 512 bytes below 1 MiB and to
// 2 MiB above. A small block is reused for a request of its exact rounded size (many shapes, few
// bytes). A large request takes the smallest cached large block that holds it, the rest of which
// stays cached as a block of its own, and a released large block merges with its free neighbours
// of the same underlying allocation: freed activations of one size serve requests of another, so
// that what is held stays near what is in use (ResNet-50's step: docs/performance.md). When the
// underlying allocator has no memory left, every cached block that is a whole underlying
// allocation is given back and the request tried once more.
// Blocks are reused in the order they are released: right for one stream of device work (the
// CUDA backend's compute stream), where a block released by an op is free for every later op.
// Plain C++ with no device library, so the CPU tests exercise it with malloc underneath.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

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
  // Frees the cached blocks that are whole underlying allocations (not those in use, nor the
  // free parts of a large allocation that is partly in use).
  void empty_cache();
  AllocatorStats stats() const;

  static std::size_t rounded_size(std::size_t bytes);

 private:
  // A large block: part (or all) of one underlying allocation, its segment.
  struct Block {
    std::size_t size;
    char* segment;  // the underlying allocation's base
    bool free;
  };
  void* take_small(std::size_t rounded);
  void* take_large(std::size_t rounded);
  void* allocate_underlying(std::size_t rounded);
  void release_large(char* ptr);
  void free_cached_locked();

  Underlying underlying_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;            // small: rounded size -> free block
  std::unordered_map<void*, std::size_t> in_use_;       // every block in use -> its rounded size
  std::map<char*, Block> large_;                        // every large block, free or not, by address
  std::set<std::pair<std::size_t, char*>> large_free_;  // the free large blocks by size, then address
  std::map<char*, std::size_t> segments_;               // large underlying allocations: base -> size
  AllocatorStats stats_;
};

}  // namespace scaletrain
