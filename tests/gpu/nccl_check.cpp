// scaletrain_gpu_nccl_check: the NCCL communicators (src/comm/nccl/, issue 27 section 1) on a GPU,
// under mpirun (tests/gpu/test_nccl_communicators.sh runs it):
//
//   mpirun -np N scaletrain_gpu_nccl_check --ranks-per-node L --needs node,world,cross [--expect-refusal]
//
// Rank r uses GPU r modulo the GPUs visible (all of them GPU 0 on a machine with one). Builds the communicators named
// by --needs from the Topology of emulated nodes of L ranks, with the duplicate-GPU check of the real caller
// (train::gpus_shared_within over every rank's host and GPU). Then, on each communicator built, all-reduces (ncclSum)
// device buffers of 1, 7, 1023 and 2^20 + 3 elements in fp32, fp16 and bf16 holding rank-dependent small integers,
// exact in every format, and checks every element of the result against the sum written here; and polls async_error(),
// which must be "".
// --expect-refusal: the construction must throw on every rank, naming the ranks that share the
// GPU, before NCCL is asked (NCCL would refuse, and might leave ranks waiting).
//   mpirun -np N scaletrain_gpu_nccl_check --ranks-per-node L --reducer
//   flat|hierarchical|hierarchical:nccl|auto|auto:nccl
// checks the NCCL gradient reducer instead (check_reducer below): exact means, bucket by bucket,
// fp32 and 16-bit on the wire, and the pre-flight's all-reduce of host memory.
// Exit codes: 0 passed, 1 failed, 2 bad arguments, 77 skipped (no GPU, or no NCCL in this build).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/nccl/nccl_communicators.hpp"
#include "gpu_check.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/nccl_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/tensor/flat_layout.hpp"
#include "scaletrain/train/gpu_binding.hpp"

namespace st = scaletrain;

namespace {

struct Options {
  int ranks_per_node = 1;
  st::comm::NcclNeeds needs;
  bool expect_refusal = false;
  std::string reducer;  // "": the communicators; flat | hierarchical | hierarchical:nccl: the reducer
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ranks-per-node" && i + 1 < argc) {
      o.ranks_per_node = std::atoi(argv[++i]);
    } else if (arg == "--needs" && i + 1 < argc) {
      const std::string list = std::string(",") + argv[++i] + ",";
      o.needs.node = list.find(",node,") != std::string::npos;
      o.needs.world = list.find(",world,") != std::string::npos;
      o.needs.cross = list.find(",cross,") != std::string::npos;
    } else if (arg == "--expect-refusal") {
      o.expect_refusal = true;
    } else if (arg == "--reducer" && i + 1 < argc) {
      o.reducer = argv[++i];
    } else {
      return false;
    }
  }
  if (!o.reducer.empty()) return o.ranks_per_node > 0 && !o.expect_refusal;
  return o.ranks_per_node > 0 && (o.needs.node || o.needs.world || o.needs.cross);
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Element e of `rank`'s buffer: a small integer, exact in fp16 and bf16, and so is any sum of a few.
float value(int rank, int64_t e) { return static_cast<float>((e % 13) + 2 * rank + 1); }

// 16-bit patterns by core/half.hpp's conversions (round to nearest even, as CUDA's).
uint16_t to_format(float v, ncclDataType_t type) {
  return type == ncclFloat16 ? st::float_to_fp16(v) : st::float_to_bf16(v);
}
float from_format(uint16_t bits, ncclDataType_t type) {
  return type == ncclFloat16 ? st::fp16_to_float(bits) : st::bf16_to_float(bits);
}

// One all-reduce of `count` elements of `type` on `comm` (members: world ranks), checked; "" or why not.
std::string check_allreduce(ncclComm_t comm, const std::vector<int>& members, int my_rank, int64_t count,
                            ncclDataType_t type) {
  const std::size_t width = type == ncclFloat32 ? 4 : 2;
  std::vector<unsigned char> host(static_cast<std::size_t>(count) * width);
  for (int64_t e = 0; e < count; ++e) {
    const float v = value(my_rank, e);
    if (type == ncclFloat32) {
      std::memcpy(&host[static_cast<std::size_t>(e) * 4], &v, 4);
    } else {
      const uint16_t bits = to_format(v, type);
      std::memcpy(&host[static_cast<std::size_t>(e) * 2], &bits, 2);
    }
  }
  void* device = nullptr;
  check_cuda(cudaMalloc(&device, host.size()), "cudaMalloc");
  check_cuda(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  const ncclResult_t r = ncclAllReduce(device, device, static_cast<size_t>(count), type, ncclSum, comm, nullptr);
  if (r != ncclSuccess) {
    cudaFree(device);
    return std::string("ncclAllReduce: ") + ncclGetErrorString(r);
  }
  check_cuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  check_cuda(cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  cudaFree(device);
  int64_t wrong = 0, first_wrong = -1;
  for (int64_t e = 0; e < count; ++e) {
    float want = 0.0f;
    for (int m : members) want += value(m, e);
    float got;
    if (type == ncclFloat32) {
      std::memcpy(&got, &host[static_cast<std::size_t>(e) * 4], 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, &host[static_cast<std::size_t>(e) * 2], 2);
      got = from_format(bits, type);
    }
    if (got != want) {
      if (first_wrong < 0) first_wrong = e;
      ++wrong;
    }
  }
  if (wrong == 0) return "";
  std::ostringstream os;
  os << wrong << " of " << count << " elements wrong, the first at " << first_wrong;
  return os.str();
}

const char* type_name(ncclDataType_t t) { return t == ncclFloat32 ? "fp32" : t == ncclFloat16 ? "fp16" : "bf16"; }

// The NCCL gradient reducer (comm/nccl_reducer.hpp) on segments of 1, 7, 1023, 2^20 + 3 and 5
// elements in buckets of 1 MiB (so that a bucket holds several segments and the large one its own),
// marked ready in backward order, for two steps, in fp32 and with fp16 and bf16 on the wire:
// every element must be the mean over ranks of value(r, e), exactly (small integers: every format
// holds them and their sums). Then the pre-flight's all-reduce of a host buffer. Failures counted.
int check_reducer(st::Context& ctx, const st::comm::Topology& topo, const std::string& spec,
                  const st::comm::SharedGpuCheck& shared) {
  const int rank = topo.world().rank(), size = topo.world().size();
  st::FlatLayout layout;
  int64_t total = 0;
  int k = 0;
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1023}, (int64_t{1} << 20) + 3, int64_t{5}}) {
    layout.segments.push_back({"p" + std::to_string(k++), total, count});
    total += count;
  }
  st::Tensor grads = st::Tensor::zeros({total}, st::DType::f32, st::Device::cuda);
  layout.flat = &grads;
  st::Tensor mine = st::Tensor::empty({total});
  float* h = mine.data<float>();
  for (int64_t e = 0; e < total; ++e) h[e] = value(rank, e);
  int failures = 0;
  for (st::comm::Compression c :
       {st::comm::Compression::none, st::comm::Compression::fp16, st::comm::Compression::bf16}) {
    st::comm::NcclReducerOptions o;
    o.shape = spec == "flat" ? st::comm::Algorithm::flat : st::comm::Algorithm::hierarchical;
    o.inter = spec == "hierarchical:nccl" ? st::comm::Transport::nccl : st::comm::Transport::mpi;
    o.automatic = spec == "auto" || spec == "auto:nccl";
    o.inter_automatic = spec == "auto:nccl";
    o.compression = c;
    o.buckets.bucket_mb = 1.0;
    o.shared_gpus = shared;
    auto reducer = st::comm::make_nccl_reducer(ctx, topo, layout, o);
    for (int step = 0; step < 2; ++step) {
      grads.copy_from(mine);
      reducer->begin_step();
      for (int i = layout.num_segments() - 1; i >= 0; --i) reducer->on_grad_ready(i);
      reducer->finish();
      const st::Tensor got = grads.to(st::Device::cpu);
      const float* g = got.data<float>();
      int64_t wrong = 0, first = -1;
      for (int64_t e = 0; e < total; ++e) {
        float sum = 0.0f;
        for (int r = 0; r < size; ++r) sum += value(r, e);
        if (g[e] != sum / static_cast<float>(size)) {
          if (first < 0) first = e;
          ++wrong;
        }
      }
      if (rank == 0 || wrong > 0)
        std::printf("%s rank %d: reducer %s, %s on the wire, step %d, %lld elements in %s: %s%s\n",
                    wrong == 0 ? "ok  " : "FAIL", rank, spec.c_str(), st::comm::compression_name(c), step + 1,
                    static_cast<long long>(total), reducer->layout().at("buckets").dump().c_str(),
                    wrong == 0 ? "the exact mean" : std::to_string(wrong).c_str(),
                    wrong == 0 ? "" : (" wrong, the first at " + std::to_string(first)).c_str());
      if (wrong > 0) ++failures;
    }
    std::vector<float> host(7);
    for (int64_t e = 0; e < 7; ++e) host[static_cast<std::size_t>(e)] = value(rank, e);
    reducer->allreduce_now(host.data(), 7);
    bool exact = true;  // the sum: the pre-flight's all-reduce does not average
    for (int64_t e = 0; e < 7; ++e) {
      float sum = 0.0f;
      for (int r = 0; r < size; ++r) sum += value(r, e);
      exact = exact && host[static_cast<std::size_t>(e)] == sum;
    }
    if (rank == 0 || !exact)
      std::printf("%s rank %d: reducer %s, %s, the pre-flight's all-reduce of host memory: %s\n",
                  exact ? "ok  " : "FAIL", rank, spec.c_str(), st::comm::compression_name(c),
                  exact ? "the exact sum" : "wrong");
    if (!exact) ++failures;
    if (rank == 0 && c == st::comm::Compression::none) std::printf("     %s\n", reducer->describe().c_str());
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  st::comm::MpiSession mpi(&argc, &argv);
  const st::comm::Communicator world = st::comm::Communicator::world();
  Options o;
  if (!parse(argc, argv, o)) {
    if (world.rank() == 0)
      std::fprintf(stderr,
                   "usage: %s [--ranks-per-node L] (--needs node,world,cross [--expect-refusal] | --reducer "
                   "flat|hierarchical|hierarchical:nccl|auto|auto:nccl)\n",
                   argv[0]);
    return 2;
  }
  const st::GpuInventory inventory = st::list_visible_gpus();
  const bool skip = !world.allreduce_and(!st::gpu_test::nothing_to_test(inventory));
  if (skip) return st::gpu_test::kSkipped;
  if (!world.allreduce_and(inventory.availability == st::GpuAvailability::visible))
    return st::gpu_test::fail_broken_gpu(inventory);
  int failures = 0;
  try {
    const int gpu_index = world.rank() % static_cast<int>(inventory.gpus.size());
    st::Context ctx(st::Device::cuda, 0, gpu_index);  // that GPU current on this rank
    const st::comm::Topology topo = st::comm::Topology::build(world, o.ranks_per_node);
    // Every rank's host and GPU, as the device choice's binding table gives them to the real caller.
    const st::GpuInfo& gpu = inventory.gpus.at(static_cast<std::size_t>(gpu_index));
    const std::vector<std::string> hosts = world.allgather(world.host());
    const std::vector<std::string> buses = world.allgather(gpu.pci_bus_id);
    const std::vector<std::string> uuids = world.allgather(gpu.uuid);
    std::vector<st::train::BindingRow> rows;
    for (int r = 0; r < world.size(); ++r) {
      st::train::BindingRow row;
      row.rank = r;
      row.host = hosts[static_cast<std::size_t>(r)];
      row.bus_id = buses[static_cast<std::size_t>(r)];
      row.uuid = uuids[static_cast<std::size_t>(r)];
      rows.push_back(row);
    }
    const auto shared = [&rows](const std::vector<int>& members) {
      return st::train::gpus_shared_within(rows, members);
    };
    if (world.rank() == 0)
      std::printf("NCCL %s at run time (built against %s), %s, %d rank(s) on %s\n",
                  st::comm::nccl_runtime_version().c_str(), SCALETRAIN_NCCL_VERSION, topo.describe().c_str(),
                  world.size(), gpu.name.c_str());

    if (!o.reducer.empty()) {
      failures += check_reducer(ctx, topo, o.reducer, shared);
    } else if (o.expect_refusal) {
      try {
        st::comm::NcclCommunicators comms(topo, o.needs, shared);
        std::printf("FAIL rank %d: the communicators were built although ranks share the GPU\n", world.rank());
        ++failures;
      } catch (const std::exception& e) {
        const std::string text = e.what();
        const bool named = text.find(" share GPU ") != std::string::npos;
        std::printf("%s rank %d: refused: %s\n", named ? "ok  " : "FAIL", world.rank(), text.c_str());
        if (!named) ++failures;
      }
    } else {
      st::comm::NcclCommunicators comms(topo, o.needs, shared);
      struct Built {
        const char* name;
        void* comm;
        std::vector<int> members;
      };
      std::vector<Built> built;
      if (o.needs.node) built.push_back({"node", comms.node(), st::comm::NcclCommunicators::node_members(topo)});
      if (o.needs.world) {
        std::vector<int> all;
        for (int r = 0; r < world.size(); ++r) all.push_back(r);
        built.push_back({"world", comms.world(), all});
      }
      if (o.needs.cross) built.push_back({"cross", comms.cross(), st::comm::NcclCommunicators::cross_members(topo)});
      for (const Built& b : built) {
        for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclBfloat16})
          for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1023}, (int64_t{1} << 20) + 3}) {
            const std::string why =
                check_allreduce(static_cast<ncclComm_t>(b.comm), b.members, world.rank(), count, type);
            if (world.rank() == 0 || !why.empty())
              std::printf("%s rank %d: %s communicator of %zu rank(s), %s all-reduce of %lld: %s\n",
                          why.empty() ? "ok  " : "FAIL", world.rank(), b.name, b.members.size(), type_name(type),
                          static_cast<long long>(count), why.empty() ? "exact" : why.c_str());
            if (!why.empty()) ++failures;
          }
      }
      const std::string async = comms.async_error();
      if (!async.empty()) {
        std::printf("FAIL rank %d: async_error: %s\n", world.rank(), async.c_str());
        ++failures;
      }
    }
  } catch (const std::exception& e) {
    std::printf("FAIL rank %d: %s\n", world.rank(), e.what());
    ++failures;
  }
  const int64_t total = world.allreduce_sum(static_cast<int64_t>(failures));
  if (world.rank() == 0)
    std::printf("%s: %lld failure(s) over %d rank(s)\n", total == 0 ? "PASSED" : "FAILED",
                static_cast<long long>(total), world.size());
  return total == 0 ? 0 : 1;
}
