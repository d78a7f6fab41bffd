// Communicator: the MPI world as the rest of the program sees it (rank, size, host, the few
// collectives the trainer, data and report layers need). The MPI handle stays in src/ so public
// headers never include mpi.h. world() works on a duplicate of MPI_COMM_WORLD, so our traffic
// never matches another library's messages, with MPI_ERRORS_RETURN: every failing call is raised
// through ST_CHECK_MPI as scaletrain::Error; a fatal error on any rank ends the job with abort().
// Every method marked "collective" must be entered by every rank, in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::comm {

class Communicator {
 public:
  // The world communicator (MPI must be initialised: see MpiSession). Collective.
  static Communicator world();
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Host name of this rank (MPI_Get_processor_name).
  const std::string& host() const { return host_; }
  // Host names of every rank, in rank order (collective).
  std::vector<std::string> all_hosts() const;

  void barrier() const;
  // In-place sum of a tensor over all ranks (f32 / i32 / i64); any size (sent in pieces of
  // at most 2^30 elements, as MPI counts are int).
  // The Tensor collectives (allreduce_sum/mean, broadcast, gather, scatter) accept device tensors
  // too, staged through a host copy: for exchanges outside the training step.
  void allreduce_sum(Tensor& t) const;
  void allreduce_sum(float* data, int64_t count) const;
  // In-place mean of an f32 tensor over all ranks: the sum divided by the number of ranks (not
  // multiplied by its inverse), so the result is correctly rounded and the same on every rank.
  void allreduce_mean(Tensor& t) const;
  double allreduce_sum(double v) const;
  int64_t allreduce_sum(int64_t v) const;
  double allreduce_min(double v) const;
  double allreduce_max(double v) const;
  int64_t allreduce_max(int64_t v) const;
  // Logical and over ranks (agreement on success/failure without a hang).
  bool allreduce_and(bool v) const;
  // Bitwise or over ranks: one small all-reduce for several yes/no agreements at once.
  uint32_t allreduce_or(uint32_t flags) const;
  // Bitwise OR of every rank's values, element by element, in place (every rank passes the same
  // count): e.g. 64-bit results that each rank computed for its own share of items, zero elsewhere.
  void allreduce_or(std::vector<uint64_t>& values) const;
  // Broadcast from root, in place. The tensor must have the same dtype and element count on
  // every rank; the string is resized on the receivers.
  void broadcast(Tensor& t, int root = 0) const;
  void broadcast(std::string& s, int root = 0) const;
  // Gathers one double per rank to every rank (result[r] is rank r's value).
  std::vector<double> allgather(double v) const;
  // Gathers the same number of doubles from every rank: result[r * values.size() + i] is rank
  // r's values[i]. Every rank must pass the same count.
  std::vector<double> allgather(const std::vector<double>& values) const;
  // Gathers one string per rank, of any length, to every rank (result[r] is rank r's).
  std::vector<std::string> allgather(const std::string& s) const;

  // Rank r's f32 tensor (n elements, the same n on every rank) becomes row r of `all` (size x n,
  // allocated on root; untouched elsewhere), and back: row r of root's `all` into rank r's `mine`
  // (n elements, allocated by the caller).
  void gather(const Tensor& mine, Tensor& all, int root = 0) const;
  void scatter(const Tensor& all, Tensor& mine, int root = 0) const;

  // New communicators (collective over this one; each owns its MPI handle).
  // A duplicate: same ranks, separate message space.
  Communicator dup() const;
  // Ranks passing the same color form one communicator, ordered by key (then by rank here).
  Communicator split(int color, int key) const;
  // The ranks that share memory with this one (MPI_COMM_TYPE_SHARED: one node), ordered by
  // rank here.
  Communicator split_shared() const;

  // Ends the whole job with this exit code (abort_job).
  [[noreturn]] void abort(int code) const;

  struct Impl;  // holds the MPI_Comm; defined in src/comm/mpi_impl.hpp
  Impl& impl() const { return *impl_; }
  // Takes ownership of a communicator handle (src/comm only: Impl is private there).
  static Communicator adopt(std::unique_ptr<Impl> impl);

 private:
  friend class Topology;  // holds communicators that are filled in by Topology::build
  Communicator() = default;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

// RAII for MPI_Init_thread / MPI_Finalize, for tests and tools that do not run inside
// cli::run_guarded. Requests MPI_THREAD_FUNNELED unless `threads_multiple` (the overlapped
// all-reduce of issue 3 needs MPI_THREAD_MULTIPLE or a dedicated communication thread that alone
// calls MPI). If MPI is already initialised it does nothing, and then does not finalise either.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv, bool threads_multiple = false);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

// Ends the whole job with this exit code: MPI_Abort on MPI_COMM_WORLD. Should MPI_Abort not end
// this process within kAbortGraceSeconds (Open MPI 4.1 has hung in it, another rank already in
// MPI_Finalize), the process exits with the code itself, and mpirun ends the job on it.
[[noreturn]] void abort_job(int code);
constexpr int kAbortGraceSeconds = 20;

}  // namespace scaletrain::comm
