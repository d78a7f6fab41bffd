// MPI implementation of Communicator and MpiSession. Every MPI call is checked (ST_CHECK_MPI);
// world() works on its own duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN so that errors
// reach us as return codes instead of killing the job without a message.
#include "scaletrain/comm/communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "comm/mpi_impl.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

namespace scaletrain::comm {

namespace {

// MPI counts are int: large tensors go in pieces of at most this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    default:
      ST_THROW("all-reduce of a " << dtype_name(dtype) << " tensor is not supported (f32, i32, i64 are)");
  }
}

bool mpi_initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

bool mpi_finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

}  // namespace

Communicator Communicator::world() {
  ST_CHECK(mpi_initialized() && !mpi_finalized(),
           "Communicator::world() called while MPI is not running (initialise it with MpiSession or run_guarded)");
  auto impl = std::make_unique<Impl>();
  ST_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm));
  return adopt(std::move(impl));
}

Communicator Communicator::adopt(std::unique_ptr<Impl> impl) {
  ST_CHECK(impl && impl->comm != MPI_COMM_NULL, "Communicator::adopt() needs a valid MPI communicator");
  Communicator c;
  c.impl_ = std::move(impl);
  ST_CHECK_MPI(MPI_Comm_set_errhandler(c.impl_->comm, MPI_ERRORS_RETURN));
  ST_CHECK_MPI(MPI_Comm_rank(c.impl_->comm, &c.rank_));
  ST_CHECK_MPI(MPI_Comm_size(c.impl_->comm, &c.size_));
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  ST_CHECK_MPI(MPI_Get_processor_name(host, &len));
  c.host_.assign(host, static_cast<std::size_t>(len));
  return c;
}

Communicator Communicator::dup() const {
  auto impl = std::make_unique<Impl>();
  ST_CHECK_MPI(MPI_Comm_dup(impl_->comm, &impl->comm));
  return adopt(std::move(impl));
}

Communicator Communicator::split(int color, int key) const {
  ST_CHECK(color >= 0, "Communicator::split: color " << color << " must be >= 0");
  auto impl = std::make_unique<Impl>();
  ST_CHECK_MPI(MPI_Comm_split(impl_->comm, color, key, &impl->comm));
  return adopt(std::move(impl));
}

Communicator Communicator::split_shared() const {
  auto impl = std::make_unique<Impl>();
  ST_CHECK_MPI(MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &impl->comm));
  return adopt(std::move(impl));
}

Communicator::~Communicator() {
  // A communicator that outlives MPI_Finalize is simply dropped; freeing it then is an error.
  if (impl_ && impl_->comm != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&impl_->comm);
}

Communicator::Communicator(Communicator&&) noexcept = default;

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    if (impl_ && impl_->comm != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&impl_->comm);
    impl_ = std::move(other.impl_);
    rank_ = other.rank_;
    size_ = other.size_;
    host_ = std::move(other.host_);
  }
  return *this;
}

std::vector<std::string> Communicator::all_hosts() const {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy_n(host_.begin(), std::min<std::size_t>(host_.size(), MPI_MAX_PROCESSOR_NAME - 1), mine.begin());
  std::vector<char> all(static_cast<std::size_t>(MPI_MAX_PROCESSOR_NAME) * size_);
  ST_CHECK_MPI(MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                             MPI_CHAR, impl_->comm));
  std::vector<std::string> hosts;
  hosts.reserve(size_);
  for (int r = 0; r < size_; ++r) hosts.emplace_back(all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  return hosts;
}

void Communicator::barrier() const { ST_CHECK_MPI(MPI_Barrier(impl_->comm)); }

namespace {
// The tensor collectives take device tensors too, through a host copy each way: they serve the
// rare exchanges outside the step (start-up, checkpoints, evaluation's statistics). Gradients take
// their own path (GradientReducer, with pinned staging on a GPU). Runs `collective` on a host copy
// of a device tensor and copies the result back; false for a CPU tensor (the caller runs it in place).
template <typename Collective>
bool through_host(Tensor& t, Collective collective) {
  if (t.device() == Device::cpu) return false;
  Tensor host = t.to(Device::cpu);
  collective(host);
  t.copy_from(host);
  return true;
}
}  // namespace

void Communicator::allreduce_sum(Tensor& t) const {
  if (through_host(t, [this](Tensor& host) { allreduce_sum(host); })) return;
  MPI_Datatype type = mpi_type(t.dtype());
  char* data = static_cast<char*>(t.raw());
  const int64_t elem = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t start = 0, n = t.numel(); start < n; start += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, n - start));
    ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data + start * elem, count, type, MPI_SUM, impl_->comm));
  }
}

void Communicator::allreduce_sum(float* data, int64_t count) const {
  for (int64_t start = 0; start < count; start += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, count - start));
    ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data + start, n, MPI_FLOAT, MPI_SUM, impl_->comm));
  }
}

void Communicator::allreduce_mean(Tensor& t) const {
  ST_CHECK(t.dtype() == DType::f32, "allreduce_mean of a " << dtype_name(t.dtype()) << " tensor (f32 only)");
  if (size_ == 1 || t.numel() == 0) return;
  if (through_host(t, [this](Tensor& host) { allreduce_mean(host); })) return;
  allreduce_sum(t);
  const float size = static_cast<float>(size_);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] /= size;
}

namespace {

// The MPI datatype of a scalar type.
template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype mpi_type<int64_t>() {
  return MPI_INT64_T;
}
template <>
MPI_Datatype mpi_type<uint32_t>() {
  return MPI_UINT32_T;
}
template <>
MPI_Datatype mpi_type<int>() {
  return MPI_INT;
}

// One value reduced over the ranks: every scalar collective below.
template <typename T>
T allreduce_one(T v, MPI_Op op, MPI_Comm comm) {
  T out{};
  ST_CHECK_MPI(MPI_Allreduce(&v, &out, 1, mpi_type<T>(), op, comm));
  return out;
}

}  // namespace

double Communicator::allreduce_sum(double v) const { return allreduce_one(v, MPI_SUM, impl_->comm); }
int64_t Communicator::allreduce_sum(int64_t v) const { return allreduce_one(v, MPI_SUM, impl_->comm); }
double Communicator::allreduce_min(double v) const { return allreduce_one(v, MPI_MIN, impl_->comm); }
double Communicator::allreduce_max(double v) const { return allreduce_one(v, MPI_MAX, impl_->comm); }
int64_t Communicator::allreduce_max(int64_t v) const { return allreduce_one(v, MPI_MAX, impl_->comm); }
uint32_t Communicator::allreduce_or(uint32_t flags) const { return allreduce_one(flags, MPI_BOR, impl_->comm); }
bool Communicator::allreduce_and(bool v) const { return allreduce_one(v ? 1 : 0, MPI_LAND, impl_->comm) != 0; }

void Communicator::allreduce_or(std::vector<uint64_t>& values) const {
  ST_CHECK_MPI(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_UINT64_T, MPI_BOR, impl_->comm));
}

void Communicator::broadcast(Tensor& t, int root) const {
  if (through_host(t, [this, root](Tensor& host) { broadcast(host, root); })) return;
  ST_CHECK(root >= 0 && root < size_, "broadcast root " << root << " is not a rank of " << size_);
  char* data = static_cast<char*>(t.raw());
  for (int64_t start = 0, n = static_cast<int64_t>(t.bytes()); start < n; start += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, n - start));
    ST_CHECK_MPI(MPI_Bcast(data + start, count, MPI_BYTE, root, impl_->comm));
  }
}

void Communicator::broadcast(std::string& s, int root) const {
  ST_CHECK(root >= 0 && root < size_, "broadcast root " << root << " is not a rank of " << size_);
  int64_t length = static_cast<int64_t>(s.size());
  ST_CHECK_MPI(MPI_Bcast(&length, 1, MPI_INT64_T, root, impl_->comm));
  ST_CHECK(length <= std::numeric_limits<int>::max(), "broadcast of a string of " << length << " bytes");
  s.resize(static_cast<std::size_t>(length));
  if (length > 0) ST_CHECK_MPI(MPI_Bcast(s.data(), static_cast<int>(length), MPI_CHAR, root, impl_->comm));
}

std::vector<double> Communicator::allgather(double v) const {
  std::vector<double> out(static_cast<std::size_t>(size_));
  ST_CHECK_MPI(MPI_Allgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, impl_->comm));
  return out;
}

std::vector<double> Communicator::allgather(const std::vector<double>& values) const {
  const int n = static_cast<int>(values.size());
  std::vector<double> out(values.size() * static_cast<std::size_t>(size_));
  if (n == 0) return out;
  ST_CHECK_MPI(MPI_Allgather(values.data(), n, MPI_DOUBLE, out.data(), n, MPI_DOUBLE, impl_->comm));
  return out;
}

std::vector<std::string> Communicator::allgather(const std::string& s) const {
  ST_CHECK(s.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max() / size_),
           "allgather of a string of " << s.size() << " bytes");
  const int length = static_cast<int>(s.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
  ST_CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, impl_->comm));
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string joined(static_cast<std::size_t>(total), '\0');
  ST_CHECK_MPI(
      MPI_Allgatherv(s.data(), length, MPI_CHAR, joined.data(), lengths.data(), offsets.data(), MPI_CHAR, impl_->comm));
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(joined.substr(offsets[r], lengths[r]));
  return out;
}

void Communicator::gather(const Tensor& mine, Tensor& all, int root) const {
  if (mine.device() != Device::cpu) return gather(mine.to(Device::cpu), all, root);
  ST_CHECK(mine.dtype() == DType::f32, "gather: a float32 tensor is needed");
  ST_CHECK(root >= 0 && root < size_, "gather root " << root << " is not a rank of " << size_);
  ST_CHECK(mine.numel() <= std::numeric_limits<int>::max(), "gather of " << mine.numel() << " elements per rank");
  const int n = static_cast<int>(mine.numel());
  if (rank_ == root) all = Tensor::empty({size_, mine.numel()});
  ST_CHECK_MPI(MPI_Gather(mine.data<float>(), n, MPI_FLOAT, rank_ == root ? all.data<float>() : nullptr, n, MPI_FLOAT,
                          root, impl_->comm));
}

void Communicator::scatter(const Tensor& all, Tensor& mine, int root) const {
  if (through_host(mine, [this, &all, root](Tensor& host) { scatter(all, host, root); })) return;
  ST_CHECK(mine.dtype() == DType::f32, "scatter: a float32 tensor is needed");
  ST_CHECK(root >= 0 && root < size_, "scatter root " << root << " is not a rank of " << size_);
  ST_CHECK(mine.numel() <= std::numeric_limits<int>::max(), "scatter of " << mine.numel() << " elements per rank");
  const int n = static_cast<int>(mine.numel());
  if (rank_ == root)
    ST_CHECK(all.dtype() == DType::f32 && all.numel() == int64_t{n} * size_,
             "scatter: root holds " << all.numel() << " elements for " << size_ << " ranks of " << n);
  ST_CHECK_MPI(MPI_Scatter(rank_ == root ? all.data<float>() : nullptr, n, MPI_FLOAT, mine.data<float>(), n, MPI_FLOAT,
                           root, impl_->comm));
}

namespace {
// A detached timer that ends the process should MPI_Abort hang.
void exit_unless_aborted_within_grace(int code) noexcept {
  try {
    std::thread([code] {
      std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceSeconds));
      std::fprintf(stderr, "scaletrain: MPI_Abort did not end the job within %d s; exiting with %d\n",
                   kAbortGraceSeconds, code);
      std::fflush(stderr);
      std::_Exit(code);
    }).detach();
  } catch (...) {  // no thread to be had: MPI_Abort alone, as before
  }
}
}  // namespace

void abort_job(int code) {
  exit_unless_aborted_within_grace(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps the [[noreturn]] promise if it does
}

// The whole job, whichever communicator asks: MPI_Abort on a smaller one ends every rank in Open
// MPI too, so the world's is the one call with the bounded wait.
void Communicator::abort(int code) const { abort_job(code); }

MpiSession::MpiSession(int* argc, char*** argv, bool threads_multiple) {
  if (mpi_initialized()) return;
  const int required = threads_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
  int provided = 0;
  ST_CHECK_MPI(MPI_Init_thread(argc, argv, required, &provided));
  owns_ = true;
  ST_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0;
  ST_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  ST_CHECK_MPI(MPI_Get_processor_name(host, &len));
  set_error_identity(rank, std::string(host, static_cast<std::size_t>(len)));
  set_log_rank(rank);
  if (provided < required) {
    MPI_Finalize();
    owns_ = false;
    ST_THROW("the MPI library provides thread level "
             << provided << ", but " << (threads_multiple ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_FUNNELED")
             << " is needed");
  }
}

MpiSession::~MpiSession() {
  if (owns_ && !mpi_finalized()) MPI_Finalize();
}

}  // namespace scaletrain::comm
