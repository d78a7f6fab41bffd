// All-reduce algorithms on every emulated layout N nodes x L ranks (1x1, 1x4, 2x2, 4x2, 2x3, 3x2,
// 3x1: the suite runs at 1, 3, 4, 6 and 8 ranks and takes the layouts of its world size).
// Inputs are small integers times 2^-3, so every partial sum is exact in float32, fp16 and bf16
// and the result must equal the float64 sum exactly; random inputs are checked against float64
// within float32 rounding. Every result is hashed and the hashes gathered: all ranks must hold
// the same bytes. Also: the 16-bit conversions against their definition, the asynchronous
// AllReducer (overlapping requests waited for in any order, errors raised in wait()), auto
// calibration agreeing on every rank, and the errors for unequal nodes and unknown names.
// ST_MPI_RANKS: 1 3 4 6 8
#include <mpi.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/half.hpp"

using scaletrain::Error;
using namespace scaletrain::comm;
using scaletrain::bf16_to_float;
using scaletrain::float_to_bf16;
using scaletrain::float_to_fp16;
using scaletrain::fp16_to_float;

namespace scaletrain::comm {  // printable in test messages
std::ostream& operator<<(std::ostream& os, Algorithm a) { return os << algorithm_name(a); }
std::ostream& operator<<(std::ostream& os, Compression c) { return os << compression_name(c); }
}  // namespace scaletrain::comm

namespace {

struct Layout {
  int nodes, ranks_per_node;
};

// The layouts of the issue whose size is the world size (1 x P when none is).
std::vector<Layout> layouts_for(int world_size) {
  const Layout all[] = {{1, 1}, {1, 4}, {2, 2}, {4, 2}, {2, 3}, {3, 2}, {3, 1}};
  std::vector<Layout> out;
  for (const Layout& l : all)
    if (l.nodes * l.ranks_per_node == world_size) out.push_back(l);
  if (out.empty()) out.push_back({1, world_size});
  return out;
}

// Exactly representable in 16 bits, and so is every partial sum over up to 8 ranks (|sum| <= 8).
double exact_value(int64_t i, int rank) { return static_cast<double>((i * 7 + rank * 5) % 17 - 8) * 0.125; }

uint64_t hash_bytes(const float* data, int64_t count) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  const unsigned char* p = reinterpret_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < count * 4; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// True on every rank when all ranks hold the same bytes.
bool same_on_every_rank(const std::vector<float>& v) {
  uint64_t mine = hash_bytes(v.data(), static_cast<int64_t>(v.size()));
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<uint64_t> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t h : all)
    if (h != all.front()) return false;
  return true;
}

void run(Algorithm a, const Topology& topo, std::vector<float>& v, Compression c) {
  if (a == Algorithm::flat) {
    allreduce_flat(topo, v.data(), static_cast<int64_t>(v.size()), c);
  } else {
    allreduce_hierarchical(topo, v.data(), static_cast<int64_t>(v.size()), c);
  }
}

// Runs one all-reduce of `count` exact values and checks the exact sum and equal bytes.
void check_exact(Algorithm a, const Topology& topo, int64_t count, Compression c) {
  const int p = topo.world().size(), r = topo.world().rank();
  BOOST_TEST_CONTEXT(algorithm_name(a) << ", " << topo.describe() << ", count " << count << ", compression "
                                       << compression_name(c)) {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>(exact_value(i, r));
    run(a, topo, v, c);
    // exact_value(i, q) depends on i only through i % 17.
    double expected[17] = {};
    for (int64_t i = 0; i < 17; ++i)
      for (int q = 0; q < p; ++q) expected[i] += exact_value(i, q);
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < count; ++i)
      if (static_cast<double>(v[i]) != expected[i % 17] && wrong++ == 0) first = i;
    BOOST_TEST(wrong == 0, wrong << " wrong elements, the first at " << first);
    BOOST_TEST(same_on_every_rank(v));
  }
}

bool message_has(const Error& e, const std::string& text) {
  const bool ok = std::string(e.what()).find(text) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("error message without '" << text << "': " << e.what());
  return ok;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(allreduce)

BOOST_AUTO_TEST_CASE(fp16_conversion) {
  BOOST_TEST(float_to_fp16(1.0f) == 0x3c00);
  BOOST_TEST(float_to_fp16(-2.0f) == 0xc000);
  BOOST_TEST(float_to_fp16(65504.0f) == 0x7bff);    // largest finite
  BOOST_TEST(float_to_fp16(65519.996f) == 0x7bff);  // just below the rounding boundary
  BOOST_TEST(float_to_fp16(65520.0f) == 0x7c00);    // rounds to inf
  BOOST_TEST(float_to_fp16(1e30f) == 0x7c00);
  BOOST_TEST(float_to_fp16(-INFINITY) == 0xfc00);
  BOOST_TEST(std::isnan(fp16_to_float(float_to_fp16(NAN))));
  BOOST_TEST(float_to_fp16(0x1p-14f) == 0x0400);         // smallest normal
  BOOST_TEST(float_to_fp16(0x1p-24f) == 0x0001);         // smallest subnormal
  BOOST_TEST(float_to_fp16(0x1p-25f) == 0x0000);         // tie: to even (zero)
  BOOST_TEST(float_to_fp16(0x1.8p-24f) == 0x0002);       // tie 1.5 units: to even (2)
  BOOST_TEST(float_to_fp16(-0x1p-30f) == 0x8000);        // underflow keeps the sign
  BOOST_TEST(float_to_fp16(1.0f + 0x1p-11f) == 0x3c00);  // tie: to even
  BOOST_TEST(float_to_fp16(1.0f + 0x1.8p-10f) == 0x3c02);
  BOOST_TEST(fp16_to_float(0x0001) == 0x1p-24f);
  BOOST_TEST(fp16_to_float(0x7bff) == 65504.0f);
  BOOST_TEST(std::isinf(fp16_to_float(0x7c00)));
  // Every 16-bit value survives the round trip (NaNs stay NaN).
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f) ? !std::isnan(fp16_to_float(float_to_fp16(f))) : float_to_fp16(f) != h) ++bad;
  }
  BOOST_TEST(bad == 0);
  // Random floats round to the nearest fp16 value, ties to even mantissa.
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> exponent(-27.0f, 16.5f);
  bad = 0;
  for (int k = 0; k < 200000; ++k) {
    const float x = std::exp2(exponent(gen)) * (k % 2 ? 1.0f : -1.0f);
    const uint16_t h = float_to_fp16(x);
    if ((h & 0x7fff) >= 0x7c00) continue;  // overflow, checked above
    const double got = fp16_to_float(h), err = std::fabs(got - x);
    const double down = fp16_to_float(static_cast<uint16_t>(h - ((h & 0x7fff) ? 1 : 0)));
    const double up = fp16_to_float(static_cast<uint16_t>(h + 1));
    const double best = std::min(std::fabs(down - x), std::fabs(up - x));
    if (err > best || (err == best && best != 0.0 && (h & 1))) ++bad;
  }
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_CASE(bf16_conversion) {
  BOOST_TEST(float_to_bf16(1.0f) == 0x3f80);
  BOOST_TEST(float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);  // tie: to even
  BOOST_TEST(float_to_bf16(1.0f + 0x1.8p-7f) == 0x3f82);
  BOOST_TEST(float_to_bf16(-3.0f) == 0xc040);
  BOOST_TEST(float_to_bf16(INFINITY) == 0x7f80);
  BOOST_TEST(float_to_bf16(3.4e38f) == 0x7f80);  // rounds past the largest finite to inf
  BOOST_TEST(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  BOOST_TEST(bf16_to_float(float_to_bf16(0x1p-133f)) == 0x1p-133f);  // subnormals are kept
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f) ? !std::isnan(bf16_to_float(float_to_bf16(f))) : float_to_bf16(f) != h) ++bad;
  }
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_CASE(names) {
  BOOST_TEST(std::string(algorithm_name(Algorithm::flat)) == "flat");
  BOOST_TEST(std::string(algorithm_name(Algorithm::hierarchical)) == "hierarchical");
  BOOST_TEST(parse_compression("none") == Compression::none);
  BOOST_TEST(parse_compression("fp16") == Compression::fp16);
  BOOST_TEST(parse_compression("bf16") == Compression::bf16);
  BOOST_TEST(std::string(compression_name(Compression::bf16)) == "bf16");
  BOOST_CHECK_EXCEPTION(parse_compression("fp8"), Error, [](const Error& e) {
    return message_has(e, "unknown --grad-compression 'fp8' (known: none, fp16, bf16)");
  });
  BOOST_CHECK_NO_THROW(check_algorithm_name("auto"));
  BOOST_CHECK_EXCEPTION(check_algorithm_name("ring"), Error, [](const Error& e) {
    return message_has(e, "unknown --allreduce 'ring' (known: flat, hierarchical, auto)");
  });
}

BOOST_AUTO_TEST_CASE(every_algorithm_every_layout_small_counts) {
  Communicator world = Communicator::world();
  for (const Layout& l : layouts_for(world.size())) {
    Topology topo = Topology::build(world, l.ranks_per_node);
    BOOST_TEST(topo.num_nodes() == l.nodes);
    const int64_t local = l.ranks_per_node;
    for (Algorithm a : {Algorithm::flat, Algorithm::hierarchical})
      for (Compression c : {Compression::none, Compression::fp16, Compression::bf16})
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, local - 1, local + 1, 3 * local - 1, int64_t{10007}})
          check_exact(a, topo, count, c);
  }
}

BOOST_AUTO_TEST_CASE(every_algorithm_every_layout_above_bucket_size) {
  // 7,000,001 floats: 28 MB, above the default 25 MB bucket, odd and not a multiple of L.
  Communicator world = Communicator::world();
  const int64_t count = 7000001;
  for (const Layout& l : layouts_for(world.size())) {
    Topology topo = Topology::build(world, l.ranks_per_node);
    check_exact(Algorithm::flat, topo, count, Compression::none);
    check_exact(Algorithm::hierarchical, topo, count, Compression::none);
    check_exact(Algorithm::hierarchical, topo, count, Compression::bf16);
  }
}

BOOST_AUTO_TEST_CASE(random_values_within_float32_rounding) {
  Communicator world = Communicator::world();
  const int p = world.size(), r = world.rank();
  const int64_t count = 100003;
  auto value = [](int64_t i, int rank) {  // a hash of (i, rank) in [-1, 1), scaled by 2^-4 .. 2^4
    uint64_t z = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
    z ^= z >> 29;
    const float unit = static_cast<float>(z >> 40) * 0x1p-24f;  // [0, 1)
    return (2.0f * unit - 1.0f) * std::exp2(static_cast<float>(i % 9 - 4));
  };
  for (const Layout& l : layouts_for(p)) {
    Topology topo = Topology::build(world, l.ranks_per_node);
    for (Algorithm a : {Algorithm::flat, Algorithm::hierarchical}) {
      BOOST_TEST_CONTEXT(algorithm_name(a) << ", " << topo.describe()) {
        std::vector<float> v(static_cast<std::size_t>(count));
        for (int64_t i = 0; i < count; ++i) v[i] = value(i, r);
        run(a, topo, v, Compression::none);
        int64_t wrong = 0;
        for (int64_t i = 0; i < count; ++i) {
          double exact = 0.0, magnitude = 0.0;
          for (int q = 0; q < p; ++q) {
            exact += value(i, q);
            magnitude += std::fabs(value(i, q));
          }
          // p - 1 float additions, each off by at most half an ulp of a partial sum.
          if (std::fabs(v[i] - exact) > std::max(1, p - 1) * 0x1p-24 * magnitude) ++wrong;
        }
        BOOST_TEST(wrong == 0);
        BOOST_TEST(same_on_every_rank(v));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(async_requests_overlap_and_wait_in_any_order) {
  Communicator world = Communicator::world();
  const int p = world.size(), r = world.rank();
  const std::vector<int64_t> counts{10007, 0, 1, 250001, 7, 4096};
  const std::vector<int> wait_order{3, 0, 5, 1, 4, 2};
  for (const Layout& l : layouts_for(p)) {
    Topology topo = Topology::build(world, l.ranks_per_node);
    for (const char* algorithm : {"flat", "hierarchical", "auto"}) {
      for (Compression c : {Compression::none, Compression::fp16}) {
        if (std::string(algorithm) == "auto" && c != Compression::none) continue;  // calibration takes a while
        BOOST_TEST_CONTEXT(algorithm << ", " << topo.describe() << ", " << compression_name(c)) {
          AllReducer reducer(topo, {algorithm, c, false});
          BOOST_TEST(reducer.requested() == algorithm);
          std::vector<std::vector<float>> buffers;
          std::vector<AllReducer::Request> requests;
          for (std::size_t k = 0; k < counts.size(); ++k) {
            buffers.emplace_back(static_cast<std::size_t>(counts[k]));
            for (int64_t i = 0; i < counts[k]; ++i) buffers[k][i] = static_cast<float>(exact_value(i + k, r));
          }
          for (auto& b : buffers) requests.push_back(reducer.start(b.data(), static_cast<int64_t>(b.size())));
          for (int k : wait_order) {
            reducer.wait(requests[k]);
            int64_t wrong = 0;
            for (int64_t i = 0; i < counts[k]; ++i) {
              double expected = 0.0;
              for (int q = 0; q < p; ++q) expected += exact_value(i + k, q);
              wrong += buffers[k][i] != expected;
            }
            BOOST_TEST(wrong == 0, "request " << k << ": " << wrong << " wrong");
          }
          reducer.wait_all();
          // A second round on the same thread after everything was waited for.
          std::vector<float> again(1000, 0.5f);
          reducer.wait(reducer.start(again.data(), 1000));
          BOOST_TEST(again[999] == 0.5f * p);
          for (const auto& b : buffers) BOOST_TEST(same_on_every_rank(b));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(auto_calibrates_identically_everywhere) {
  Communicator world = Communicator::world();
  const int p = world.size();
  Topology topo = Topology::build(world, layouts_for(p).back().ranks_per_node);
  const double t0 = MPI_Wtime();
  AllReducer reducer(topo, {"auto", Compression::none, true});
  const double seconds = world.allreduce_max(MPI_Wtime() - t0);
  BOOST_TEST_MESSAGE("auto calibration on " << topo.describe() << ": " << seconds << " s");
  BOOST_TEST(seconds < 20.0);  // a short calibration even on 8 oversubscribed ranks
  // The choice for every size, from 1 byte to 1 GiB, is the same on every rank.
  std::vector<double> choices;
  for (int64_t bytes = 1; bytes <= (int64_t{1} << 30); bytes *= 2)
    choices.push_back(reducer.algorithm_for(bytes) == Algorithm::hierarchical ? 1.0 : 0.0);
  std::vector<double> all = world.allgather(choices);
  int differ = 0;
  for (std::size_t i = 0; i < all.size(); ++i) differ += all[i] != choices[i % choices.size()];
  BOOST_TEST(differ == 0);
  const std::string json = reducer.to_json().dump();
  if (p > 1) {
    BOOST_TEST(json.find("\"calibration\": [{\"bytes\": 4096") != std::string::npos, json);
    BOOST_TEST(json.find("\"bytes\": 67108864") != std::string::npos, json);
  } else {
    BOOST_TEST(json.find("\"algorithm\": \"flat\"") != std::string::npos, json);
  }
  // The nearest size class decides: 5000 bytes is 4 KiB's class, 100 MiB is 64 MiB's.
  if (p > 1) {
    BOOST_TEST(reducer.algorithm_for(5000) == reducer.algorithm_for(4096));
    BOOST_TEST(reducer.algorithm_for(100 << 20) == reducer.algorithm_for(64 << 20));
  }
}

BOOST_AUTO_TEST_CASE(fixed_algorithms_are_what_was_asked) {
  Communicator world = Communicator::world();
  Topology topo = Topology::build(world, 1);
  AllReducer flat(topo, {"flat", Compression::none, false});
  AllReducer hierarchical(topo, {"hierarchical", Compression::none, false});
  for (int64_t bytes : {int64_t{4}, int64_t{1} << 20, int64_t{1} << 30}) {
    BOOST_TEST(flat.algorithm_for(bytes) == Algorithm::flat);
    BOOST_TEST(hierarchical.algorithm_for(bytes) == Algorithm::hierarchical);
  }
  BOOST_TEST(hierarchical.to_json().dump().find("\"algorithm\": \"hierarchical\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unequal_nodes_refused_by_hierarchical_auto_falls_back) {
  Communicator world = Communicator::world();
  const int p = world.size(), r = world.rank();
  if (p < 3) return;                              // every grouping of 1 or 2 ranks is uniform
  Topology topo = Topology::build(world, p - 1);  // nodes of p - 1 and 1 ranks
  BOOST_TEST(!topo.uniform());
  const std::string sizes = std::to_string(p - 1) + ", 1";
  std::vector<float> v(100, static_cast<float>(r));
  BOOST_CHECK_EXCEPTION(allreduce_hierarchical(topo, v.data(), 100), Error, [&](const Error& e) {
    return message_has(e, "hierarchical all-reduce needs the same number of ranks on every node") &&
           message_has(e, "2 nodes of " + sizes + " ranks");
  });
  BOOST_CHECK_EXCEPTION(AllReducer(topo, {"hierarchical", Compression::none, false}), Error,
                        [&](const Error& e) { return message_has(e, "2 nodes of " + sizes + " ranks"); });
  AllReducer fallback(topo, {"auto", Compression::none, true});
  BOOST_TEST(fallback.algorithm_for(64 << 20) == Algorithm::flat);
  const std::string json = fallback.to_json().dump();
  BOOST_TEST(json.find("unequal") != std::string::npos, json);
  fallback.wait(fallback.start(v.data(), 100));
  BOOST_TEST(v[99] == static_cast<float>(p * (p - 1) / 2));  // no rank was left behind
}

BOOST_AUTO_TEST_CASE(unknown_algorithm_and_thread_errors) {
  Communicator world = Communicator::world();
  Topology topo = Topology::build(world, 1);
  BOOST_CHECK_EXCEPTION(AllReducer(topo, {"x"}), Error, [](const Error& e) {
    return message_has(e, "unknown --allreduce 'x' (known: flat, hierarchical, auto)");
  });
  // An error on the communication thread comes back from wait() (and fails what follows);
  // the requests before it complete normally.
  AllReducer reducer(topo, {"flat", Compression::none, false});
  std::vector<float> good(10, 1.0f), later(10, 1.0f);
  const auto first = reducer.start(good.data(), 10);
  const auto bad = reducer.start(nullptr, 5);
  const auto after = reducer.start(later.data(), 10);
  BOOST_CHECK_NO_THROW(reducer.wait(first));
  BOOST_TEST(good[0] == static_cast<float>(world.size()));
  BOOST_CHECK_EXCEPTION(reducer.wait(bad), Error, [](const Error& e) { return message_has(e, "null buffer"); });
  BOOST_CHECK_THROW(reducer.wait(after), Error);
  BOOST_CHECK_EXCEPTION(reducer.wait(99), Error, [](const Error& e) { return message_has(e, "never started"); });
  BOOST_CHECK_EXCEPTION(reducer.start(good.data(), -1), Error,
                        [](const Error& e) { return message_has(e, "negative count"); });
  BOOST_TEST(world_size() == world.size());
}

BOOST_AUTO_TEST_SUITE_END()
