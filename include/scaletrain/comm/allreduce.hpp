// All-reduce algorithms (sum, float32, in place) and the asynchronous AllReducer that runs them
// on a communication thread.
//   flat:          one MPI_Allreduce over the world.
//   hierarchical:  intra-node reduce-scatter -> all-reduce of each rank's 1/L share among the
//                  ranks with the same local rank on every node (all L at once) -> intra-node
//                  all-gather. Any count (remainders when count is not a multiple of L), any L.
//                  MPI at every level today; NCCL inside the node with the CUDA backend.
//   auto:          per message size, whichever a short calibration at start-up measured faster.
// Compression fp16 / bf16 sends 16-bit values and accumulates in float32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/comm/topology.hpp"

namespace scaletrain::comm {

enum class Algorithm { flat, hierarchical };
enum class Compression { none, fp16, bf16 };

// Parsing with clear errors ("unknown --allreduce 'x' (known: flat, hierarchical, auto)").
const char* algorithm_name(Algorithm a);
const char* compression_name(Compression c);
Compression parse_compression(const std::string& text);
// Throws unless text is flat, hierarchical or auto (for option parsing before MPI work).
void check_algorithm_name(const std::string& text);

// Blocking building blocks. Every rank of the topology's world calls them with the same count.
// Results are bitwise identical on every rank.
void allreduce_flat(const Topology& topo, float* data, int64_t count, Compression compression = Compression::none);
void allreduce_hierarchical(const Topology& topo, float* data, int64_t count,
                            Compression compression = Compression::none);

struct AllReduceOptions {
  std::string algorithm = "hierarchical";  // flat | hierarchical | auto
  Compression compression = Compression::none;
  bool log_calibration = true;  // auto: rank 0 logs what it measured and chose
};

// Asynchronous all-reduce: start() hands a buffer to the communication thread and returns at
// once; wait() returns when that buffer holds the sum over ranks. Requests complete in the order
// started. Every rank must start the same sequence of (count) requests. While requests are in
// flight the caller must not touch their buffers nor call MPI itself.
class AllReducer {
 public:
  // Collective: builds the thread and, for "auto", calibrates. hierarchical on non-uniform
  // nodes is an error; auto falls back to flat there and says so.
  AllReducer(const Topology& topo, const AllReduceOptions& options);
  ~AllReducer();
  AllReducer(const AllReducer&) = delete;
  AllReducer& operator=(const AllReducer&) = delete;

  using Request = int64_t;
  Request start(float* data, int64_t count);
  void wait(Request request);
  void wait_all();

  // The algorithm used for a message of this many bytes.
  Algorithm algorithm_for(int64_t bytes) const;
  const std::string& requested() const;  // flat | hierarchical | auto
  const Topology& topology() const;
  // For the report: the calibration table (auto) and the algorithm per size class.
  Json to_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain::comm
