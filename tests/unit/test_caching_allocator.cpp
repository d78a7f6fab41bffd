// The caching allocator that backs device tensors, exercised with malloc underneath: after the
// first of several identical "steps" of requests, no underlying allocation or free happens; a
// full underlying memory empties the cache and retries; sizes round as documented; large blocks
// split and merge within their underlying allocation only.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <set>
#include <vector>

#include "scaletrain/core/caching_allocator.hpp"
#include "scaletrain/core/error.hpp"

namespace st = scaletrain;

namespace {
// malloc with a capacity: refuses (nullptr) a request that would take the total past `capacity`.
struct BoundedMalloc {
  std::size_t capacity = ~std::size_t{0};
  std::size_t used = 0;
  std::vector<std::pair<void*, std::size_t>> live;

  st::CachingAllocator::Underlying underlying() {
    return {[this](std::size_t bytes) -> void* {
              if (used + bytes > capacity) return nullptr;
              void* p = std::malloc(bytes);
              used += bytes;
              live.emplace_back(p, bytes);
              return p;
            },
            [this](void* p) {
              for (auto it = live.begin(); it != live.end(); ++it)
                if (it->first == p) {
                  used -= it->second;
                  live.erase(it);
                  break;
                }
              std::free(p);
            }};
  }
};

// One "training step": activations of several sizes allocated, then released in another order.
void one_step(st::CachingAllocator& a) {
  const std::size_t sizes[] = {100, 4096, 4096, 3u << 20, 700000, 1};
  std::vector<void*> blocks;
  for (std::size_t s : sizes) {
    void* p = a.allocate(s);
    BOOST_REQUIRE(p != nullptr);
    static_cast<char*>(p)[s - 1] = 1;  // the block is writable to its last byte
    blocks.push_back(p);
  }
  for (std::size_t i = blocks.size(); i-- > 0;) a.release(blocks[(i * 5) % blocks.size()]);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(caching_allocator)

BOOST_AUTO_TEST_CASE(rounds_small_sizes_to_512_bytes_and_large_to_2_mib) {
  BOOST_TEST(st::CachingAllocator::rounded_size(0) == 512u);
  BOOST_TEST(st::CachingAllocator::rounded_size(1) == 512u);
  BOOST_TEST(st::CachingAllocator::rounded_size(512) == 512u);
  BOOST_TEST(st::CachingAllocator::rounded_size(513) == 1024u);
  BOOST_TEST(st::CachingAllocator::rounded_size((1u << 20) - 1) == (1u << 20));
  BOOST_TEST(st::CachingAllocator::rounded_size(1u << 20) == (2u << 20));
  BOOST_TEST(st::CachingAllocator::rounded_size((2u << 20) + 1) == (4u << 20));
}

BOOST_AUTO_TEST_CASE(repeated_steps_allocate_nothing_after_the_first) {
  BoundedMalloc m;
  st::CachingAllocator a(m.underlying());
  one_step(a);
  const st::AllocatorStats first = a.stats();
  // The four distinct rounded sizes (512 twice: 100 and 1; 4096 twice, live together) = 6 blocks.
  BOOST_TEST(first.underlying_allocations == 6);
  BOOST_TEST(first.in_use_bytes == 0u);
  for (int step = 0; step < 5; ++step) one_step(a);
  const st::AllocatorStats later = a.stats();
  BOOST_TEST(later.underlying_allocations == first.underlying_allocations);
  BOOST_TEST(later.underlying_frees == 0);
  const std::size_t step_bytes = 512 + 4096 + 4096 + (4u << 20) + (700416) + 512;
  BOOST_TEST(later.peak_in_use_bytes == step_bytes);
  BOOST_TEST(later.reserved_bytes == step_bytes);
  BOOST_TEST(m.used == step_bytes);
}

BOOST_AUTO_TEST_CASE(a_full_device_empties_the_cache_and_retries) {
  BoundedMalloc m;
  m.capacity = 8u << 20;
  st::CachingAllocator a(m.underlying());
  void* p = a.allocate(6u << 20);
  BOOST_REQUIRE(p != nullptr);
  a.release(p);                    // cached: 6 MiB reserved, nothing in use
  void* q = a.allocate(7u << 20);  // 8 MiB: no cached block holds it, nor fits beside: the cache is emptied
  BOOST_REQUIRE(q != nullptr);
  const st::AllocatorStats s = a.stats();
  BOOST_TEST(s.underlying_frees == 1);
  BOOST_TEST(s.reserved_bytes == (8u << 20));
  BOOST_TEST(s.peak_reserved_bytes == (8u << 20));
  BOOST_TEST(a.allocate(2u << 20) == nullptr);  // really full: nullptr, the caller reports it
  a.release(q);
  a.empty_cache();
  BOOST_TEST(m.used == 0u);
}

// A large request takes the smallest free large block that holds it and leaves the rest cached;
// released parts merge again, so the whole block serves a request of its full size with no new
// underlying allocation. What is held stays what the largest moment needed.
BOOST_AUTO_TEST_CASE(large_blocks_are_split_and_merged_again) {
  BoundedMalloc m;
  st::CachingAllocator a(m.underlying());
  char* whole = static_cast<char*>(a.allocate(8u << 20));
  a.release(whole);
  char* b = static_cast<char*>(a.allocate(2u << 20));
  char* c = static_cast<char*>(a.allocate(3u << 20));  // 4 MiB rounded
  char* d = static_cast<char*>(a.allocate(1u << 20));  // 2 MiB rounded: the last part
  BOOST_TEST((b == whole && c == whole + (2u << 20) && d == whole + (6u << 20)));
  BOOST_TEST(a.stats().underlying_allocations == 1);
  BOOST_TEST(a.stats().in_use_bytes == (8u << 20));
  d[(2u << 20) - 1] = 1;  // inside the underlying block to its last byte
  // Released out of order: b and d alone, then c between them joins all three.
  a.release(b);
  a.release(d);
  char* again = static_cast<char*>(a.allocate(4u << 20));          // neither free part holds 4 MiB
  BOOST_TEST(static_cast<void*>(again) != static_cast<void*>(b));  // void*: Boost compares char* as strings
  BOOST_TEST(a.stats().underlying_allocations == 2);
  a.release(again);
  a.release(c);
  BOOST_TEST(a.allocate(8u << 20) == static_cast<void*>(whole));  // merged: the whole block again
  BOOST_TEST(a.stats().underlying_allocations == 2);
  BOOST_TEST(a.stats().reserved_bytes == (12u << 20));
  BOOST_TEST(a.stats().peak_in_use_bytes == (8u << 20));  // b, c and d; later c, d and `again`
}

// Two underlying allocations that happen to lie side by side are never merged: each is given back
// by its own base. An arena hands out adjacent blocks to make them so.
BOOST_AUTO_TEST_CASE(neighbouring_underlying_allocations_stay_apart) {
  static char arena[16u << 20];
  std::size_t next = 0;
  std::vector<void*> released;
  st::CachingAllocator::Underlying underlying{[&](std::size_t bytes) -> void* {
                                                if (next + bytes > sizeof arena) return nullptr;
                                                void* p = arena + next;
                                                next += bytes;
                                                return p;
                                              },
                                              [&](void* p) { released.push_back(p); }};
  {
    st::CachingAllocator a(underlying);
    void* x = a.allocate(2u << 20);
    void* y = a.allocate(2u << 20);
    BOOST_REQUIRE(y == static_cast<void*>(static_cast<char*>(x) + (2u << 20)));
    a.release(x);
    a.release(y);
    void* z = a.allocate(4u << 20);  // x and y are adjacent but of two allocations: a third one
    BOOST_TEST(z == static_cast<void*>(arena + (4u << 20)));
    a.release(z);
    a.empty_cache();
    BOOST_TEST(released.size() == 3u);
    BOOST_TEST((std::set<void*>(released.begin(), released.end()) == std::set<void*>{x, y, z}));
  }
  BOOST_TEST(released.size() == 3u);  // nothing twice at destruction
}

// The destructor gives back a large allocation once, by its base, while parts of it are in use.
BOOST_AUTO_TEST_CASE(the_destructor_releases_a_split_allocation_once) {
  BoundedMalloc m;
  {
    st::CachingAllocator a(m.underlying());
    a.release(a.allocate(8u << 20));
    BOOST_REQUIRE(a.allocate(2u << 20) != nullptr);
    BOOST_REQUIRE(a.allocate(2u << 20) != nullptr);  // two parts in use, 4 MiB of it free
    a.empty_cache();                                 // partly in use: kept
    BOOST_TEST(m.used == (8u << 20));
  }
  BOOST_TEST(m.used == 0u);
  BOOST_TEST(m.live.empty());
}

BOOST_AUTO_TEST_CASE(releasing_a_foreign_pointer_throws_and_the_destructor_frees_everything) {
  BoundedMalloc m;
  {
    st::CachingAllocator a(m.underlying());
    int local = 0;
    BOOST_CHECK_THROW(a.release(&local), st::Error);
    a.release(nullptr);
    std::set<void*> distinct;
    for (int i = 0; i < 4; ++i) distinct.insert(a.allocate(1000));
    BOOST_TEST(distinct.size() == 4u);  // blocks in use are never handed out twice
    a.release(*distinct.begin());
  }
  BOOST_TEST(m.used == 0u);
  BOOST_TEST(m.live.empty());
}

BOOST_AUTO_TEST_SUITE_END()
