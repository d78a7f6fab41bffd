// Communicator: the MPI world as the rest of the program sees it (rank, size, host, the few
// collectives the trainer, data and report layers need). The MPI handle stays in src/ so public
// headers never include mpi.h. Errors return to us (MPI_ERRORS_RETURN) and are raised through
// ST_CHECK_MPI; a fatal error on any rank ends the job with abort().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::comm {

class Communicator {
 public:
  // The world communicator (MPI must be initialised: see MpiSession).
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
  // In-place sum of a tensor over all ranks (f32 / i32 / i64).
  void allreduce_sum(Tensor& t) const;
  double allreduce_sum(double v) const;
  int64_t allreduce_sum(int64_t v) const;
  double allreduce_min(double v) const;
  double allreduce_max(double v) const;
  // Logical and over ranks (agreement on success/failure without a hang).
  bool allreduce_and(bool v) const;
  // Broadcast from root, in place.
  void broadcast(Tensor& t, int root = 0) const;
  void broadcast(std::string& s, int root = 0) const;
  // Gathers one double per rank to every rank.
  std::vector<double> allgather(double v) const;

  // Ends the whole job with this exit code (MPI_Abort).
  [[noreturn]] void abort(int code) const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  Communicator() = default;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

// RAII for MPI_Init_thread / MPI_Finalize. Requests MPI_THREAD_MULTIPLE-free
// MPI_THREAD_FUNNELED unless `threads_multiple` (the overlapped all-reduce of issue 3 needs
// MPI_THREAD_MULTIPLE or a dedicated communication thread that alone calls MPI).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv, bool threads_multiple = false);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

}  // namespace scaletrain::comm
