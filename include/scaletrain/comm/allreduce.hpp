// All-reduce algorithms (sum, float32, in place) and the asynchronous AllReducer that runs them
// on a communication thread.
//   flat:          one MPI_Allreduce over the world.
//   hierarchical:  intra-node reduce-scatter -> all-reduce of each rank's 1/L share among the
//                  ranks with the same local rank on every node (all L at once) -> intra-node
//                  all-gather. Any count (remainders when count is not a multiple of L), any L.
//                  The intra-node phases are rings over the message in 1 MiB chunks; MPI at
//                  every level today; NCCL inside the node with the CUDA backend.
//   auto:          per message size, whichever a short calibration at start-up measured faster.
// Compression fp16 / bf16 sends 16-bit values (round to nearest even); each addition is done in
// float32 and rounded back to 16 bits, and the result is widened to float32 again.
// Every result is bitwise identical on every rank. A count of 0, or a world of one rank, is a
// no-op (no communication, no 16-bit rounding).
#pragma once
#pragma once

#include <cstdint>
#include <functional>
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
// Results are bitwise identical on every rank. allreduce_hierarchical on a topology that is not
// uniform() throws on every rank before communicating.
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
// flight the caller must not touch their buffers nor call MPI itself: the thread is then the
// only caller of MPI, so MPI must be initialised with MPI_THREAD_SERIALIZED or higher (the
// binaries ask for MPI_THREAD_MULTIPLE); the constructor throws otherwise.
// An error on the thread is raised by wait() for that request and for every later one (their
// all-reduces are not run); requests before it complete normally.
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
  // As start(), and the communication thread runs `before` right before this request's
  // all-reduce (after every earlier request's): where the data becomes ready asynchronously (a
  // bucket copied from the GPU), the wait for it happens there, not on the caller. An exception
  // from `before` fails the request as an all-reduce error would. Not run for a request after a
  // failed one.
  Request start(float* data, int64_t count, std::function<void()> before);
  void wait(Request request);
  void wait_all();
  // While requests are in flight the communication thread backs off between polls, so that it
  // does not take a core from the caller's compute (backward). A caller that has nothing left to
  // do but wait says so (true) and the thread polls at full speed until told false again.
  void set_caller_idle(bool idle);

  // The algorithm used for a message of this many bytes (float32 bytes, count * 4, with or
  // without compression). auto: the calibrated size class nearest on a log scale (4 KiB ..
  // 64 MiB by 4x); the choice is rank 0's, broadcast, so it is the same on every rank.
  Algorithm algorithm_for(int64_t bytes) const;
  const std::string& requested() const;  // flat | hierarchical | auto
  Compression compression() const;
  const Topology& topology() const;
  // For the report: {"requested", "compression", "algorithm" (when fixed), "note" (why auto did
  // not calibrate), "calibration": [{"bytes", "flat_us", "hierarchical_us", "algorithm"}]}.
  // Calibration times are the maximum over ranks, best of a few repetitions.
  Json to_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain::comm
