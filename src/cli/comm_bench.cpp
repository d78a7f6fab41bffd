// `scaletrain-comm-bench`: all-reduce time and bandwidth per algorithm and message size, in the
// style of nccl-tests, and (--p2p) the rank x rank point-to-point bandwidth matrix.
//
// Decisions:
// - nccl-tests' definitions: algbw = bytes / time, busbw = algbw * 2(n-1)/n, 1 GB = 1e9 B; time
//   is the maximum over ranks of each rank's mean time per iteration of a timed loop.
// - Every algorithm (flat, hierarchical, and MPI_Allreduce as the baseline "mpi") runs in place on
//   the same buffer, allocated once at the largest size that fits in memory.
// - Correctness: one untimed all-reduce of a pattern whose sum is exact in float32 (element i of
//   rank r holds a(i) + b(r), small integers, a(i) aperiodic so misplaced shares show), compared
//   bitwise; the timed iterations then run on zeros, which stay exact and finite however many
//   iterations run (the sum of a sum grows by a factor n each time).
// - Sizes are rounded down to whole floats; sizes under 4 bytes are skipped.
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/option_ranges.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/cli/commands.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/comm/nccl_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/comm/transport.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/memory.hpp"
#include "scaletrain/tensor/flat_layout.hpp"
#include "scaletrain/tensor/tensor.hpp"
#include "scaletrain/train/device_choice.hpp"
#include "scaletrain/train/gpu_binding.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

constexpr unsigned kHelpWidth = 110;
constexpr const char* kProgram = "scaletrain-comm-bench";
// MPI counts are int: the baseline sends larger buffers in pieces of at most this many floats.
constexpr int64_t kMaxMpiCount = int64_t{1} << 30;
// Memory per rank as a multiple of the largest message: our buffer, the algorithms' scratch
// (a 1/L share, 16-bit copies) and MPI's temporaries: 3.1x measured at 256 MiB (docs/performance.md).
constexpr double kMemoryFactor = 3.5;
constexpr int64_t kMaxBytes = int64_t{1} << 40;

// On the CPU: flat and hierarchical (our MPI layer). With --device cuda, on GPU memory: nccl (one
// NCCL all-reduce over the world), hierarchical (NCCL in the node, MPI across nodes),
// hierarchical-nccl (NCCL at both levels) and staged (copied to host memory, our hierarchical MPI,
// copied back: the --intra mpi path). The baseline mpi is MPI_Allreduce on host memory, always.
enum class Bench { flat, hierarchical, mpi, nccl, hierarchical_nccl, staged };

const char* bench_name(Bench b) {
  switch (b) {
    case Bench::flat:
      return "flat";
    case Bench::hierarchical:
      return "hierarchical";
    case Bench::nccl:
      return "nccl";
    case Bench::hierarchical_nccl:
      return "hierarchical-nccl";
    case Bench::staged:
      return "staged";
    default:
      return "mpi";
  }
}

struct Options {
  std::string min_bytes = "8", max_bytes = "1G", algorithms = "flat,hierarchical", compression = "none", json;
  int64_t step_factor = 2;
  int iters = 20, warmup = 5, ranks_per_node = 0;
  bool p2p = false;
  std::string p2p_bytes = "64M";
  int p2p_iters = 5;
  std::string device = "cpu";
};

// "8", "64K", "64KiB", "1G": binary multiples (as nccl-tests' -b/-e), so 1K = 1024 bytes.
int64_t parse_bytes(const std::string& option, const std::string& text) {
  const auto bad = [&](const std::string& why) { return UsageError("--" + option + " '" + text + "' " + why); };
  if (!text.empty() && text[0] == '-') throw bad("must not be negative");
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) throw bad("is not a size in bytes (e.g. 8, 64K, 16M, 1G)");
  std::string suffix = text.substr(digits);
  for (auto& ch : suffix) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  int shift = 0;
  if (suffix == "" || suffix == "b")
    shift = 0;
  else if (suffix == "k" || suffix == "kib")
    shift = 10;
  else if (suffix == "m" || suffix == "mib")
    shift = 20;
  else if (suffix == "g" || suffix == "gib")
    shift = 30;
  else
    throw bad("has an unknown unit (use K, M or G: binary multiples, 1K = 1024 bytes)");
  if (digits > 13) throw bad("is too large");
  const int64_t value = std::stoll(text.substr(0, digits));
  if (value > (kMaxBytes >> shift)) throw bad("is too large (at most 1 TiB)");
  return value << shift;
}

// 1073741824 -> "1 GiB", 12 -> "12 B", 1536 -> "1.5 KiB".
std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes == std::floor(bytes) ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::vector<Bench> parse_algorithms(const std::string& text, bool cuda) {
  const char* known = cuda ? "nccl, hierarchical, hierarchical-nccl, staged" : "flat, hierarchical";
  std::vector<Bench> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Bench b;
    if (item == "flat" && !cuda)
      b = Bench::flat;
    else if (item == "hierarchical")
      b = Bench::hierarchical;
    else if (item == "mpi")
      b = Bench::mpi;
    else if (cuda && item == "nccl")
      b = Bench::nccl;
    else if (cuda && item == "hierarchical-nccl")
      b = Bench::hierarchical_nccl;
    else if (cuda && item == "staged")
      b = Bench::staged;
    else
      throw UsageError("unknown algorithm '" + item + "' in --algorithms '" + text + "' " +
                       (cuda ? "with --device cuda" : "on the CPU") + " (known: " + known +
                       "; mpi, the MPI_Allreduce baseline, always runs" +
                       (cuda ? ")" : "; nccl, hierarchical-nccl and staged need --device cuda)"));
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  // The baseline runs in every benchmark, last, so that every row has its reference.
  out.erase(std::remove(out.begin(), out.end(), Bench::mpi), out.end());
  out.push_back(Bench::mpi);
  return out;
}

// A communicator of our own for the baseline and the point-to-point matrix.
class BenchComm {
 public:
  BenchComm() {
    ST_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    ST_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    ST_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
    ST_CHECK_MPI(MPI_Comm_size(comm_, &size_));
  }
  ~BenchComm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  BenchComm(const BenchComm&) = delete;
  BenchComm& operator=(const BenchComm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  void barrier() const { ST_CHECK_MPI(MPI_Barrier(comm_)); }
  double max(double v) const {
    ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, comm_));
    return v;
  }
  double min(double v) const { return -max(-v); }
  int64_t sum(int64_t v) const {
    ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, comm_));
    return v;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// Ranks on this host (MPI's view, whatever --ranks-per-node emulates): they share its memory.
int ranks_on_host() {
  MPI_Comm host = MPI_COMM_NULL;
  ST_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int n = 1;
  MPI_Comm_size(host, &n);
  MPI_Comm_free(&host);
  return n;
}

// MemAvailable from /proc/meminfo in bytes; infinity when it cannot be read.
double memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return std::numeric_limits<double>::infinity();
}

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

// The test pattern: element i of rank r holds a(i) + b(r). a(i) in [-3, 4] from the top bits of a
// Fibonacci hash, so it has no short period (a share placed at the wrong offset shows), and
// b(r) in [-1, 1]. Every partial sum is an integer of magnitude <= 5n: exact in float32, and in
// fp16 / bf16 (which hold integers up to 2048 / 256 exactly) for up to 409 / 51 ranks.
inline int pattern_a(int64_t i) {
  return static_cast<int>((static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull) >> 61) - 3;
}
inline int pattern_b(int rank) { return rank % 3 - 1; }

void fill_pattern(float* data, int64_t count, int rank) {
  const int b = pattern_b(rank);
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(pattern_a(i) + b);
}

int64_t count_wrong(const float* data, int64_t count, int ranks) {
  int b_sum = 0;
  for (int r = 0; r < ranks; ++r) b_sum += pattern_b(r);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float expected = static_cast<float>(ranks * pattern_a(i) + b_sum);
    wrong += std::memcmp(&data[i], &expected, sizeof(float)) != 0;  // bitwise: -0.0 or NaN is wrong
  }
  return wrong;
}

struct Row {
  Bench algorithm;
  int64_t bytes = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = 0;
};

// One benchmark's buffers and algorithms; measure() is the same for every device: one untimed
// all-reduce of the test pattern, checked, then warm-up and timed iterations on zeros.
class Runner {
 public:
  Runner(const Options& o, const BenchComm& bc) : o_(o), bc_(bc) {}
  virtual ~Runner() = default;
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Row measure(Bench b, int64_t count) {
    Row row;
    row.algorithm = b;
    row.bytes = count * static_cast<int64_t>(sizeof(float));
    fill(b, count);
    bc_.barrier();
    reduce(b, count);
    row.wrong = bc_.sum(wrong(b, count));
    zero(b, count);
    for (int i = 0; i < o_.warmup; ++i) reduce(b, count);
    bc_.barrier();
    const double t0 = MPI_Wtime();
    for (int i = 0; i < o_.iters; ++i) reduce(b, count);  // each returns with its result in place
    const double mean = (MPI_Wtime() - t0) / o_.iters;
    const double seconds = bc_.max(mean);
    const int n = bc_.size();
    row.time_us = seconds * 1e6;
    row.algbw = seconds > 0 ? row.bytes / seconds / 1e9 : 0.0;
    row.busbw = row.algbw * 2.0 * (n - 1) / n;
    return row;
  }

 protected:
  // The first `count` elements of the benchmark's buffer for `b`: the pattern, the all-reduce, the
  // elements that differ from the pattern's sum, zeros.
  virtual void fill(Bench b, int64_t count) = 0;
  virtual void reduce(Bench b, int64_t count) = 0;
  virtual int64_t wrong(Bench b, int64_t count) = 0;
  virtual void zero(Bench b, int64_t count) = 0;

  // MPI_Allreduce of host memory: the baseline.
  void mpi_allreduce(float* data, int64_t count) const {
    for (int64_t start = 0; start < count; start += kMaxMpiCount) {
      const int n = static_cast<int>(std::min(kMaxMpiCount, count - start));
      ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data + start, n, MPI_FLOAT, MPI_SUM, bc_.get()));
    }
  }

  const Options& o_;
  const BenchComm& bc_;
};

// On the CPU: our MPI layer and the baseline on one host buffer.
class HostRunner final : public Runner {
 public:
  HostRunner(const Options& o, const comm::Topology& topo, const BenchComm& bc, comm::Compression compression,
             int64_t max_count)
      : Runner(o, bc), topo_(topo), compression_(compression), buffer_(static_cast<std::size_t>(max_count)) {}

 private:
  void fill(Bench, int64_t count) override { fill_pattern(buffer_.data(), count, bc_.rank()); }
  int64_t wrong(Bench, int64_t count) override { return count_wrong(buffer_.data(), count, bc_.size()); }
  void zero(Bench, int64_t count) override { std::fill(buffer_.begin(), buffer_.begin() + count, 0.0f); }
  void reduce(Bench b, int64_t count) override {
    if (b == Bench::flat)
      comm::allreduce_flat(topo_, buffer_.data(), count, compression_);
    else if (b == Bench::hierarchical)
      comm::allreduce_hierarchical(topo_, buffer_.data(), count, compression_);
    else
      mpi_allreduce(buffer_.data(), count);
  }

  const comm::Topology& topo_;
  comm::Compression compression_;
  std::vector<float> buffer_;
};

// --device cuda: the NCCL reducers (allreduce_now: the sum) and the host-staged path on one GPU buffer,
// the baseline on a host buffer. Each NCCL algorithm's reducer is built once, collectively.
class DeviceRunner final : public Runner {
 public:
  DeviceRunner(const Options& o, const comm::Topology& topo, const BenchComm& bc, comm::Compression compression,
               int64_t max_count, Context& ctx, const comm::SharedGpuCheck& shared, bool cuda_aware)
      : Runner(o, bc),
        topo_(topo),
        compression_(compression),
        device_(Tensor::zeros({max_count}, DType::f32, Device::cuda)),
        host_(Tensor::zeros({max_count})),
        ctx_(ctx),
        shared_(shared),
        cuda_aware_(cuda_aware) {
    layout_.flat = &device_;
    layout_.segments.push_back({"buffer", 0, max_count});
  }

  void build(Bench b) {
    if (b == Bench::staged || b == Bench::mpi) return;
    comm::NcclReducerOptions r;
    r.shape = shape(b);
    r.inter = b == Bench::hierarchical_nccl ? comm::Transport::nccl : comm::Transport::mpi;
    r.cuda_aware_mpi = cuda_aware_;
    r.compression = compression_;
    r.shared_gpus = shared_;
    reducers_[static_cast<int>(b)] = comm::make_nccl_reducer(ctx_, topo_, layout_, r);
  }

 private:
  static comm::Algorithm shape(Bench b) {
    return b == Bench::nccl ? comm::Algorithm::flat : comm::Algorithm::hierarchical;
  }
  float* host() { return host_.data<float>(); }
  Tensor part(Tensor& t, int64_t count) { return Tensor::view_of(t, 0, {count}); }

  void fill(Bench b, int64_t count) override {
    fill_pattern(host(), count, bc_.rank());
    if (b != Bench::mpi) part(device_, count).copy_from(part(host_, count));
  }
  int64_t wrong(Bench b, int64_t count) override {
    if (b != Bench::mpi) part(host_, count).copy_from(part(device_, count));
    return count_wrong(host(), count, bc_.size());
  }
  void zero(Bench b, int64_t count) override {
    std::fill(host(), host() + count, 0.0f);
    if (b != Bench::mpi) part(device_, count).copy_from(part(host_, count));
  }
  void reduce(Bench b, int64_t count) override {
    if (b == Bench::mpi) {
      mpi_allreduce(host(), count);
    } else if (b == Bench::staged) {  // --intra mpi: out to host memory, our hierarchical MPI, back
      part(host_, count).copy_from(part(device_, count));
      comm::allreduce_hierarchical(topo_, host(), count, compression_);
      part(device_, count).copy_from(part(host_, count));
    } else {
      reducers_.at(static_cast<int>(b))->allreduce_now(static_cast<float*>(device_.raw()), count);
    }
  }

  const comm::Topology& topo_;
  comm::Compression compression_;
  Tensor device_, host_;
  FlatLayout layout_;
  Context& ctx_;
  comm::SharedGpuCheck shared_;
  bool cuda_aware_;
  std::map<int, std::unique_ptr<comm::GradientReducer>> reducers_;
};

// Bandwidths up to 99999.99 with two decimals; beyond (one rank: nothing moves) in %g.
std::string fmt_number(double v, int width) {
  char buf[48];
  if (std::fabs(v) < 1e5)
    std::snprintf(buf, sizeof buf, "%*.2f", width, v);
  else
    std::snprintf(buf, sizeof buf, "%*.3g", width, v);
  return buf;
}

void print_preamble(const comm::Topology& topo, int ranks, int host_ranks) {
  std::printf("# %s: %d rank%s, %d per host; topology: %s\n", kProgram, ranks, ranks == 1 ? "" : "s", host_ranks,
              topo.describe().c_str());
}

// ---------------------------------------------------------------------------------------------
// all-reduce sweep

// The sizes that fit, the header, a line per size, the averages; `make_runner` builds the runner
// for the largest size kept. `device_lines`: rank 0's account of the device (--device cuda).
using MakeRunner = std::function<std::unique_ptr<Runner>(int64_t max_count)>;

int run_sweep(const Options& o, const comm::Topology& topo, const BenchComm& bc, const std::vector<Bench>& algos,
              comm::Compression compression, const std::vector<int64_t>& requested_sizes, const MakeRunner& make_runner,
              const std::vector<std::string>& device_lines) {
  const int n = bc.size();
  const bool root = bc.rank() == 0;
  const int host_ranks = ranks_on_host();

  // Keep the sizes whose buffers fit in this host's memory (the smallest verdict over hosts).
  const double available = bc.min(memory_available());
  std::vector<int64_t> sizes;
  for (int64_t s : requested_sizes)
    if (host_ranks * kMemoryFactor * static_cast<double>(s) <= available) sizes.push_back(s);
  if (sizes.empty())
    ST_THROW("not even the smallest size, "
             << human_bytes(requested_sizes.front()) << ", fits in memory: " << host_ranks << " ranks on a host x "
             << kMemoryFactor << " x " << human_bytes(requested_sizes.front()) << " > " << human_bytes(available)
             << " available");

  const std::unique_ptr<Runner> runner = make_runner(sizes.back() / 4);
  if (root) {
    print_preamble(topo, n, host_ranks);
    for (const std::string& line : device_lines) std::printf("# %s\n", line.c_str());
    std::printf(
        "# all-reduce, sum of float32, in place; %d warm-up + %d timed iterations per size; time = max over ranks "
        "of\n"
        "# the mean per iteration; algbw = bytes/time, busbw = algbw*2(n-1)/n (nccl-tests), 1 GB = 1e9 B\n"
        "# compression %s for %s; mpi = MPI_Allreduce (float32, host memory), the baseline\n",
        o.warmup, o.iters, comm::compression_name(compression),
        o.device == "cuda" ? "the GPU's algorithms" : "flat and hierarchical");
    if (compression == comm::Compression::bf16 && 5 * n > 256)
      std::printf("# note: with bf16 on more than 51 ranks partial sums exceed 256 and round: #wrong may count that\n");
    if (compression == comm::Compression::fp16 && 5 * n > 2048)
      std::printf(
          "# note: with fp16 on more than 409 ranks partial sums exceed 2048 and round: #wrong may count that\n");
    if (sizes.size() < requested_sizes.size())
      std::printf(
          "# skipping %zu size%s above %s: %d ranks on this host x %.0f x the message size would need ~%s, "
          "%s available (lower --max-bytes or run fewer ranks per host)\n",
          requested_sizes.size() - sizes.size(), requested_sizes.size() - sizes.size() == 1 ? "" : "s",
          human_bytes(sizes.back()).c_str(), host_ranks, kMemoryFactor,
          human_bytes(host_ranks * kMemoryFactor * requested_sizes.back()).c_str(), human_bytes(available).c_str());
    // Header: one group of columns per algorithm.
    // Widths match the rows below: " %12lld %11lld" then per algorithm " %10.2f %8 %8 %7lld".
    std::string names = "#                        ", cols = "#        size       count",
                units = "#         (B)  (elements)";
    for (Bench b : algos) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "   %-34s", b == Bench::mpi ? "mpi (baseline)" : bench_name(b));
      names += buf;
      cols += "       time    algbw    busbw  #wrong";
      units += "       (us)   (GB/s)   (GB/s)        ";
    }
    const auto rstrip = [](std::string& text) { text.erase(text.find_last_not_of(' ') + 1); };
    rstrip(names);
    rstrip(units);
    std::printf("%s\n%s\n%s\n", names.c_str(), cols.c_str(), units.c_str());
    std::fflush(stdout);
  }

  std::vector<Row> rows;
  for (int64_t bytes : sizes) {
    std::string line;
    char buf[96];
    std::snprintf(buf, sizeof buf, " %12lld %11lld", static_cast<long long>(bytes), static_cast<long long>(bytes / 4));
    line += buf;
    for (Bench b : algos) {
      const Row row = runner->measure(b, bytes / 4);
      rows.push_back(row);
      std::snprintf(buf, sizeof buf, " %10.2f", row.time_us);
      line += buf + (" " + fmt_number(row.algbw, 8)) + " " + fmt_number(row.busbw, 8);
      std::snprintf(buf, sizeof buf, " %7lld", static_cast<long long>(row.wrong));
      line += buf;
    }
    if (root) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }

  int64_t wrong = 0;
  for (const Row& r : rows) wrong += r.wrong;
  const double peak = bc.max(peak_rss_bytes());
  if (root) {
    std::string avg = "# average busbw (GB/s):";
    for (Bench b : algos) {
      double s = 0;
      int k = 0;
      for (const Row& r : rows)
        if (r.algorithm == b) s += r.busbw, ++k;
      avg += std::string(" ") + bench_name(b) + " " + fmt_number(k ? s / k : 0.0, 0) + ";";
    }
    avg.pop_back();
    std::printf("%s\n# wrong elements in total: %lld\n# peak memory per rank (max over ranks): %s\n", avg.c_str(),
                static_cast<long long>(wrong), human_bytes(peak).c_str());
    if (!o.json.empty()) {
      Json list = Json::array();
      for (const Row& r : rows) {
        Json j = Json::object();
        j.set("algorithm", bench_name(r.algorithm));
        j.set("bytes", r.bytes);
        j.set("count", r.bytes / 4);
        j.set("time_us", r.time_us);
        j.set("algbw_gbps", r.algbw);
        j.set("busbw_gbps", r.busbw);
        j.set("wrong", r.wrong);
        j.set("ranks", n);
        j.set("nodes", topo.num_nodes());
        j.set("ranks_per_node", topo.local_size());
        j.set("compression", r.algorithm == Bench::mpi ? "none" : comm::compression_name(compression));
        j.set("warmup", o.warmup);
        j.set("iters", o.iters);
        list.push_back(j);
      }
      std::ofstream out(o.json);
      out << list.dump(1) << "\n";
      out.close();
      ST_CHECK(out, "cannot write --json " << o.json);
      std::printf("# wrote %s\n", o.json.c_str());
    }
    if (wrong > 0)
      std::fprintf(stderr, "%s: error: %lld wrong elements: an all-reduce returned wrong sums (see #wrong)\n", kProgram,
                   static_cast<long long>(wrong));
  }
  return wrong > 0 ? 1 : 0;
}

// --device cuda: "" where the GPU algorithm `b` can run on these ranks and GPUs, else why not (the
// same on every rank): NCCL missing, nodes of unequal size, or two members of one of its NCCL
// communicators on one GPU. Collective.
std::string device_bench_unavailable(Bench b, const comm::Topology& topo, const comm::SharedGpuCheck& shared,
                                     const std::string& nccl_missing) {
  if (b == Bench::mpi) return "";
  if (b == Bench::staged) return topo.uniform() ? "" : "nodes of unequal size (" + topo.describe() + ")";
  if (!nccl_missing.empty()) return nccl_missing;
  if (b != Bench::nccl && !topo.uniform()) return "nodes of unequal size (" + topo.describe() + ")";
  const comm::Transport inter = b == Bench::hierarchical_nccl ? comm::Transport::nccl : comm::Transport::mpi;
  return comm::nccl_shared_gpus(topo, b == Bench::nccl ? comm::Algorithm::flat : comm::Algorithm::hierarchical, inter,
                                shared);
}

// The sweep on GPU memory: each rank on its GPU (the device choice's), the algorithms that cannot
// run here left out with the reason (one GPU for several ranks: every NCCL communicator of more
// than one rank), NCCL's version and the MPI's CUDA-awareness in the preamble.
int run_device_sweep(const Options& o, const comm::Topology& topo, const BenchComm& bc, const std::vector<Bench>& algos,
                     comm::Compression compression, const std::vector<int64_t>& sizes,
                     const train::DeviceChoice& device) {
  Context ctx(Device::cuda, 1, device.gpu_index);
  const std::vector<train::BindingRow> rows = device.binding;
  const comm::SharedGpuCheck shared = [&rows](const std::vector<int>& members) {
    return train::gpus_shared_within(rows, members);
  };
  std::string nccl_missing, version;
  try {
    version = comm::nccl_runtime_version();
  } catch (const std::exception& e) {
    nccl_missing = std::string("NCCL is not available: ") + e.what();
  }
  for (const std::string& why : topo.world().allgather(nccl_missing))
    if (!why.empty()) nccl_missing = why;
  const comm::CudaAwareMpi mpi = comm::query_cuda_aware_mpi();
  const bool cuda_aware = topo.world().allreduce_and(mpi.supported) && compression == comm::Compression::none;
  std::vector<std::string> lines = device.log_lines;
  lines.push_back(nccl_missing.empty() ? "NCCL " + version : nccl_missing);
  lines.push_back(std::string("hierarchical: NCCL inside the node, MPI across nodes ") +
                  (cuda_aware ? "on GPU memory (CUDA-aware; " : "staged through pinned host memory (") + mpi.detail +
                  "); staged: to host memory, scaletrain's hierarchical MPI, back (--intra mpi)");
  std::vector<Bench> kept;
  for (Bench b : algos) {
    const std::string why = device_bench_unavailable(b, topo, shared, nccl_missing);
    if (why.empty())
      kept.push_back(b);
    else
      lines.push_back(std::string(bench_name(b)) + ": not run: " + why);
  }
  const MakeRunner make = [&](int64_t max_count) -> std::unique_ptr<Runner> {
    auto runner = std::make_unique<DeviceRunner>(o, topo, bc, compression, max_count, ctx, shared, cuda_aware);
    for (Bench b : kept) runner->build(b);
    return runner;
  };
  return run_sweep(o, topo, bc, kept, compression, sizes, make, lines);
}

// ---------------------------------------------------------------------------------------------
// point-to-point matrix

// How print_p2p judges the links: around their median (host memory), by class (GPUs: NVLink and
// the rest), or not at all (not measured: only the diagonal is).
enum class Links { host, gpu, not_measured };
int print_p2p(const Options& o, int n, int64_t bytes, const std::vector<double>& gbps, Links links);

// A GPU matrix's links fall into classes: NVLink (at least half the fastest link) and the rest
// (PCIe, the CPUs' interconnect, the network). A link of the fast class well under its class's
// median is degraded; a GPU with fewer fast peers than the GPUs with the most has a link that is
// down or running at PCIe speed (on a DGX-1 every V100 has NVLinks to 4 others). Expected rates:
// ../shared/reference/FACTS.md (P100 DGX-1: about 36.8 GB/s over NVLink, 17 GB/s otherwise).
void print_gpu_link_verdict(int n, const std::vector<double>& gbps) {
  double fastest = 0.0;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d) fastest = std::max(fastest, gbps[s * n + d]);
  std::vector<double> fast;
  std::vector<int> fast_peers(static_cast<std::size_t>(n), 0);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d && gbps[s * n + d] >= 0.5 * fastest) {
        fast.push_back(gbps[s * n + d]);
        ++fast_peers[s];
      }
  std::sort(fast.begin(), fast.end());
  const double median = fast[fast.size() / 2];
  const int most = *std::max_element(fast_peers.begin(), fast_peers.end());
  std::printf("# fast links (>= half the fastest, %.2f GB/s): %zu of %d, median %.2f GB/s; the rest slower\n", fastest,
              fast.size(), n * (n - 1), median);
  int flagged = 0;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d && gbps[s * n + d] >= 0.5 * fastest && gbps[s * n + d] < 0.8 * median) {
        std::printf("# degraded link: GPU of rank %d -> rank %d at %.2f GB/s, under 80%% of the fast links' median\n",
                    s, d, gbps[s * n + d]);
        ++flagged;
      }
  for (int s = 0; s < n; ++s)
    if (fast_peers[s] < most) {
      std::printf("# rank %d's GPU has %d fast peers where others have %d: a link down or at PCIe speed?\n", s,
                  fast_peers[s], most);
      ++flagged;
    }
  if (flagged == 0) std::printf("# verdict: no link stands out\n");
}

// --p2p --device cuda: the GPU x GPU matrix (NCCL send/receive, comm::nccl_p2p_gbps) and each
// GPU's own copy rate on the diagonal. Where ranks share a GPU (NCCL cannot form the world's
// communicator) only the diagonal is measured, and it says why.
int run_device_p2p(const Options& o, const comm::Topology& topo, const BenchComm& bc, int64_t bytes,
                   const train::DeviceChoice& device) {
  const int n = bc.size(), me = bc.rank();
  const int host_ranks = ranks_on_host();
  Context ctx(Device::cuda, 1, device.gpu_index);
  const std::vector<train::BindingRow> rows = device.binding;
  const comm::SharedGpuCheck shared = [&rows](const std::vector<int>& members) {
    return train::gpus_shared_within(rows, members);
  };
  std::vector<double> gbps(static_cast<std::size_t>(n) * n, 0.0);
  std::string why_not;
  try {
    gbps = comm::nccl_p2p_gbps(ctx, topo, bytes, o.p2p_iters, shared);
  } catch (const std::exception& e) {  // thrown on every rank alike (a shared GPU, no NCCL)
    why_not = e.what();
  }
  // The diagonal: a copy within the rank's own GPU, one rank at a time.
  Tensor from = Tensor::zeros({bytes / 4 > 0 ? bytes / 4 : 1}, DType::f32, Device::cuda);
  Tensor to = Tensor::zeros(from.shape(), DType::f32, Device::cuda);
  std::vector<double> diagonal(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < n; ++r) {
    bc.barrier();
    if (r != me) continue;
    to.copy_from(from);  // warm-up
    ctx.synchronize();
    const double t0 = MPI_Wtime();
    for (int k = 0; k < o.p2p_iters; ++k) to.copy_from(from);
    ctx.synchronize();
    const double t = MPI_Wtime() - t0;
    diagonal[static_cast<std::size_t>(r)] = t > 0 ? double(from.bytes()) * o.p2p_iters / t / 1e9 : 0.0;
  }
  ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, diagonal.data(), n, MPI_DOUBLE, MPI_SUM, bc.get()));
  for (int r = 0; r < n; ++r) gbps[static_cast<std::size_t>(r) * n + r] = diagonal[static_cast<std::size_t>(r)];
  if (me != 0) return 0;
  print_preamble(topo, n, host_ranks);
  for (const std::string& line : device.log_lines) std::printf("# %s\n", line.c_str());
  std::printf(
      "# GPU x GPU bandwidth in GB/s (1 GB = 1e9 B): %s messages by NCCL send/receive, %d timed per pair after 1\n"
      "# warm-up, timed on the receiver; pairs one at a time; row = sender, column = receiver;\n"
      "# diagonal = a copy within the rank's GPU\n",
      human_bytes(bytes).c_str(), o.p2p_iters);
  if (!why_not.empty()) {
    std::printf("# GPU x GPU links not measured: %s; the diagonal only\n", why_not.c_str());
    return print_p2p(o, n, bytes, gbps, Links::not_measured);
  }
  return print_p2p(o, n, bytes, gbps, Links::gpu);
}

int run_p2p(const Options& o, const comm::Topology& topo, const BenchComm& bc, int64_t bytes) {
  const int n = bc.size(), me = bc.rank();
  const int host_ranks = ranks_on_host();  // collective: before rank 0 goes its own way
  MPI_Comm c = bc.get();
  std::vector<char> send(static_cast<std::size_t>(bytes), 1), recv(static_cast<std::size_t>(bytes), 0);
  const int count = static_cast<int>(bytes);
  std::vector<double> gbps(static_cast<std::size_t>(n) * n, 0.0);  // row = sender; filled by the sender
  constexpr int kTagGo = 1, kTagData = 2, kTagAck = 3;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      bc.barrier();  // one pair at a time: everyone else waits here
      if (s == d && me == s) {
        std::memcpy(recv.data(), send.data(), send.size());  // warm-up
        const double t0 = MPI_Wtime();
        for (int k = 0; k < o.p2p_iters; ++k) {
          send[0] = static_cast<char>(k);
          std::memcpy(recv.data(), send.data(), send.size());
        }
        const double t = MPI_Wtime() - t0;
        gbps[s * n + d] = recv[0] == send[0] && t > 0 ? double(bytes) * o.p2p_iters / t / 1e9 : 0.0;
      } else if (s != d && me == s) {
        ST_CHECK_MPI(MPI_Recv(nullptr, 0, MPI_BYTE, d, kTagGo, c, MPI_STATUS_IGNORE));
        ST_CHECK_MPI(MPI_Send(send.data(), count, MPI_BYTE, d, kTagData, c));  // warm-up
        ST_CHECK_MPI(MPI_Recv(nullptr, 0, MPI_BYTE, d, kTagAck, c, MPI_STATUS_IGNORE));
        const double t0 = MPI_Wtime();
        for (int k = 0; k < o.p2p_iters; ++k) ST_CHECK_MPI(MPI_Send(send.data(), count, MPI_BYTE, d, kTagData, c));
        ST_CHECK_MPI(MPI_Recv(nullptr, 0, MPI_BYTE, d, kTagAck, c, MPI_STATUS_IGNORE));
        const double t = MPI_Wtime() - t0;
        gbps[s * n + d] = t > 0 ? double(bytes) * o.p2p_iters / t / 1e9 : 0.0;
      } else if (s != d && me == d) {
        ST_CHECK_MPI(MPI_Send(nullptr, 0, MPI_BYTE, s, kTagGo, c));
        for (int k = 0; k <= o.p2p_iters; ++k) {
          ST_CHECK_MPI(MPI_Recv(recv.data(), count, MPI_BYTE, s, kTagData, c, MPI_STATUS_IGNORE));
          if (k == 0) ST_CHECK_MPI(MPI_Send(nullptr, 0, MPI_BYTE, s, kTagAck, c));
        }
        ST_CHECK_MPI(MPI_Send(nullptr, 0, MPI_BYTE, s, kTagAck, c));
      }
    }
  }
  ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, gbps.data(), n * n, MPI_DOUBLE, MPI_SUM, c));
  if (me != 0) return 0;
  print_preamble(topo, n, host_ranks);
  std::printf(
      "# point-to-point bandwidth in GB/s (1 GB = 1e9 B): %s messages, %d timed per pair after 1 warm-up;\n"
      "# pairs measured one at a time while the other ranks wait; row = sender, column = receiver;\n"
      "# diagonal = memcpy within the rank\n",
      human_bytes(bytes).c_str(), o.p2p_iters);
  return print_p2p(o, n, bytes, gbps, Links::host);
}

// The matrix, the links an operator should look at, and --json.
int print_p2p(const Options& o, int n, int64_t bytes, const std::vector<double>& gbps, Links links) {
  std::printf("#  send\\recv");
  for (int d = 0; d < n; ++d) std::printf(" %9d", d);
  std::printf("\n");
  for (int s = 0; s < n; ++s) {
    std::printf(" %11d", s);
    for (int d = 0; d < n; ++d) std::printf(" %s", fmt_number(gbps[s * n + d], 9).c_str());
    std::printf("\n");
  }
  // The summary an operator reads first: the slowest link against the typical one.
  std::vector<double> off;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d) off.push_back(gbps[s * n + d]);
  if (off.empty()) {
    std::printf("# one rank: no links to measure\n");
  } else if (links == Links::gpu) {
    print_gpu_link_verdict(n, gbps);
  } else if (links == Links::host) {
    std::vector<double> sorted = off;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::printf("# links: min %.2f, median %.2f, max %.2f GB/s\n", sorted.front(), median, sorted.back());
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d)
        if (s != d && gbps[s * n + d] < 0.5 * median)
          std::printf("# slow link: %d -> %d at %.2f GB/s, under half the median\n", s, d, gbps[s * n + d]);
  }
  if (!o.json.empty()) {
    Json j = Json::object();
    j.set("mode", "p2p");
    j.set("ranks", n);
    j.set("bytes", bytes);
    j.set("iters", o.p2p_iters);
    Json matrix = Json::array();
    for (int s = 0; s < n; ++s) {
      Json row = Json::array();
      for (int d = 0; d < n; ++d) row.push_back(gbps[s * n + d]);
      matrix.push_back(row);
    }
    j.set("gbps", matrix);
    j.set("device", links == Links::host ? "cpu" : "cuda");
    j.set("links_measured", links != Links::not_measured);
    std::ofstream out(o.json);
    out << j.dump(1) << "\n";
    out.close();
    ST_CHECK(out, "cannot write --json " << o.json);
    std::printf("# wrote %s\n", o.json.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------

int comm_bench_main(int argc, char** argv) {
  Options o;
  po::options_description desc("options", kHelpWidth);
  desc.add_options()("help,h", "print this help")(
      "min-bytes", po::value(&o.min_bytes)->default_value(o.min_bytes)->value_name("SIZE"),
      "smallest message; K, M, G are binary (1K = 1024). Sizes are rounded down to whole floats "
      "(4 bytes); sizes under 4 bytes are skipped")(
      "max-bytes", po::value(&o.max_bytes)->default_value(o.max_bytes)->value_name("SIZE"),
      "largest message (sizes that do not fit in memory are skipped "
      "with a message; see docs/performance.md)")(
      "step-factor", po::value(&o.step_factor)->default_value(o.step_factor)->value_name("F"),
      "each size is this many times the previous one (an integer >= 2)")(
      "device", po::value(&o.device)->default_value(o.device)->value_name("D"),
      "cpu | cuda | auto: where the buffers are. cuda: each rank's own GPU (as train --device cuda chooses it), and "
      "the GPU's algorithms below; auto: cuda where every rank sees a GPU, else cpu")(
      "algorithms", po::value(&o.algorithms)->default_value(o.algorithms)->value_name("LIST"),
      "comma-separated: flat (one MPI_Allreduce of the world, through scaletrain's layer), hierarchical "
      "(intra-node reduce-scatter, cross-node all-reduce, intra-node all-gather). With --device cuda (default "
      "there: nccl,hierarchical,staged): nccl (one NCCL all-reduce over the world), hierarchical (NCCL inside "
      "the node, MPI across nodes), hierarchical-nccl (NCCL at both levels), staged (to host memory, hierarchical "
      "MPI, back: train's --intra mpi); those that cannot run on these GPUs (NCCL refuses two ranks of one "
      "communicator on a GPU) are left out, saying why. MPI_Allreduce of host memory runs as the baseline 'mpi' "
      "in every benchmark")("iters", po::value(&o.iters)->default_value(o.iters)->value_name("N"),
                            "timed iterations per size and algorithm")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup)->value_name("N"), "untimed iterations before them")(
      "ranks-per-node", po::value(&o.ranks_per_node)->default_value(o.ranks_per_node)->value_name("N"),
      "emulate nodes of N ranks (ranks k*N .. k*N+N-1 form node k); without it (shown as 0): the "
      "environment variable SCALETRAIN_RANKS_PER_NODE, or else the ranks that share memory")(
      "grad-compression", po::value(&o.compression)->default_value(o.compression)->value_name("C"),
      "none | fp16 | bf16: flat and hierarchical send 16-bit values and add in float32 (the mpi "
      "baseline stays float32; bandwidths count float32 bytes)")(
      "json", po::value(&o.json)->value_name("FILE"),
      "also write the results to this file: a JSON list with one object per (algorithm, size): algorithm, bytes, "
      "count, time_us, algbw_gbps, busbw_gbps, wrong, ranks, nodes, ranks_per_node, compression, warmup, iters")(
      "p2p", po::bool_switch(&o.p2p),
      "instead of the all-reduce sweep, print the rank x rank point-to-point bandwidth matrix (GB/s; row = "
      "sender, column = receiver; diagonal = memcpy); with --json, an object with the matrix under 'gbps'. With "
      "--device cuda the GPU x GPU matrix by NCCL send/receive (a GPU per rank; else the diagonal only, saying "
      "why) and a verdict per link: NVLink-class links under 80% of their median, and GPUs with fewer fast peers "
      "than the others (a link down)")("p2p-bytes",
                                       po::value(&o.p2p_bytes)->default_value(o.p2p_bytes)->value_name("SIZE"),
                                       "message size of --p2p (at most 1G)")(
      "p2p-iters", po::value(&o.p2p_iters)->default_value(o.p2p_iters)->value_name("N"),
      "timed messages per pair of --p2p");

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0)
        std::cout << "usage: mpirun -np N " << kProgram << " [options]\n\n"
                  << "All-reduce time, algbw and busbw per algorithm and message size (nccl-tests' definitions),\n"
                  << "with a count of wrong elements; or (--p2p) the point-to-point bandwidth matrix.\n"
                  << "time: the maximum over ranks of the mean time per timed iteration; algbw = bytes / time;\n"
                  << "busbw = algbw * 2(n-1)/n for n ranks; 1 GB = 1e9 bytes. #wrong: elements that differ from the\n"
                  << "exact sum of a test pattern, summed over ranks (any makes the exit status 1).\n"
                  << "Details and measured figures: docs/performance.md.\n"
                  << "Example: mpirun -np 4 " << kProgram << " --ranks-per-node 2 --max-bytes 64M --json out.json\n\n"
                  << desc << "\n";
      return 0;
    }
    check_option_ranges(vm, option_ranges());
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }

  const int64_t min_bytes = parse_bytes("min-bytes", o.min_bytes);
  const int64_t max_bytes = parse_bytes("max-bytes", o.max_bytes);
  if (min_bytes < 1) throw UsageError("--min-bytes must be at least 1, got " + o.min_bytes);
  if (min_bytes > max_bytes)
    throw UsageError("--min-bytes " + o.min_bytes + " is larger than --max-bytes " + o.max_bytes);
  // --step-factor, --iters, --warmup, --p2p-iters and --ranks-per-node: checked by their ranges.
  if (o.compression != "none" && o.compression != "fp16" && o.compression != "bf16")
    throw UsageError("unknown --grad-compression '" + o.compression + "' (known: none, fp16, bf16)");
  const train::DeviceRequest request = train::parse_device_request(o.device);  // before any MPI work
  const int64_t p2p_bytes = parse_bytes("p2p-bytes", o.p2p_bytes);
  if (p2p_bytes < 1 || p2p_bytes > (int64_t{1} << 30))
    throw UsageError("--p2p-bytes must be from 1 byte to 1G, got " + o.p2p_bytes);

  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes;; s *= o.step_factor) {
    const int64_t whole = s / 4 * 4;
    if (whole > 0 && (sizes.empty() || sizes.back() != whole)) sizes.push_back(whole);
    if (s > max_bytes / o.step_factor) break;
  }
  if (sizes.empty() && !o.p2p)
    throw UsageError("no size from --min-bytes " + o.min_bytes + " to --max-bytes " + o.max_bytes +
                     " holds a whole float (4 bytes)");

  const BenchComm bc;
  // Fail before a long run, on every rank alike, when the JSON file cannot be written.
  if (!o.json.empty()) {
    int ok = 1;
    if (bc.rank() == 0) ok = std::ofstream(o.json) ? 1 : 0;
    ST_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, bc.get()));
    if (!ok) throw UsageError("cannot write --json " + o.json);
  }

  const comm::Communicator world = comm::Communicator::world();
  const comm::Topology topo = comm::Topology::build(world, o.ranks_per_node);
  // Every rank alike: a GPU each (--device cuda refuses where some rank has none), or the CPU.
  const train::DeviceChoice device = train::choose_device(world, request, kProgram, "");
  const bool cuda = device.device == Device::cuda;
  if (cuda && vm["algorithms"].defaulted()) o.algorithms = "nccl,hierarchical,staged";
  const std::vector<Bench> algos = parse_algorithms(o.algorithms, cuda);
  // The benchmark buffer and the algorithms' scratch (about as large again), before allocating.
  check_memory_request(2 * max_bytes, topo.local_size(), "--max-bytes " + o.max_bytes + " (the buffer and scratch)",
                       "lower --max-bytes");
  const bool wants_hierarchical = std::find(algos.begin(), algos.end(), Bench::hierarchical) != algos.end();
  if (wants_hierarchical && !topo.uniform() && !o.p2p)
    throw UsageError("hierarchical all-reduce needs the same number of ranks on every node, but the topology is " +
                     topo.describe() + "; choose a --ranks-per-node that divides the " + std::to_string(bc.size()) +
                     " ranks, or --algorithms flat");

  const comm::Compression compression = comm::parse_compression(o.compression);
  if (o.p2p) return cuda ? run_device_p2p(o, topo, bc, p2p_bytes, device) : run_p2p(o, topo, bc, p2p_bytes);
  if (device.device == Device::cpu) {
    const MakeRunner host = [&](int64_t max_count) -> std::unique_ptr<Runner> {
      return std::make_unique<HostRunner>(o, topo, bc, compression, max_count);
    };
    // --device auto says why it took the CPU; --device cpu has nothing to say.
    return run_sweep(o, topo, bc, algos, compression, sizes, host,
                     o.device == "cpu" ? std::vector<std::string>{} : device.log_lines);
  }
  return run_device_sweep(o, topo, bc, algos, compression, sizes, device);
}

}  // namespace

int scaletrain_comm_bench_main(int argc, char** argv) { return run_guarded(kProgram, argc, argv, comm_bench_main); }

}  // namespace scaletrain::cli
