// Errors and the one check-macro family. Every failure becomes scaletrain::Error carrying
// rank, host, file:line, the failing expression and the library's own message; main() catches
// it and calls MPI_Abort so that no rank is left waiting in a collective (an AgreedError, which
// every rank throws together, ends without it).
// The macros for MPI and HDF5 call out-of-line helpers so this header includes neither library.
#pragma once

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace scaletrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An error every rank throws together, with one message (comm::on_rank0_agreed): no rank waits
// in a collective, so the binaries print it once (rank 0) and every rank exits with code 1
// without MPI_Abort, which Open MPI 4.1 can leave hanging while another rank is in MPI_Finalize.
class AgreedError : public Error {
 public:
  explicit AgreedError(const std::string& what);
};
// Whether an AgreedError was thrown in this process: every rank is then unwinding from it, so
// cleanup that is collective (closing files opened with MPI-IO) may still run, where a rank's own
// error, on its way to MPI_Abort, must not wait for the others.
bool agreed_error_thrown();

// A usage error (an unknown option, a bad value, options that exclude each other): every rank
// sees it alike, so the binaries print it once (rank 0), with a hint to run --help, and exit with
// code 2 without MPI_Abort.
class UsageError : public std::exception {
 public:
  explicit UsageError(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

// Identity printed in front of every error; set once MPI is up.
void set_error_identity(int rank, const std::string& host);
std::string error_identity();
// An error's message without this rank's "[rank R on HOST] " prefix, for wrapping it into
// another message that gets its own prefix.
std::string error_text(const std::exception& e);

// Last words before this process ends the job with MPI_Abort from a place that cannot unwind
// (the stall watchdog's thread): the run sets a hook (rank 0 records run_stop aborted in the
// MLPerf log), and the aborting code calls say_last_words first. The hook runs at most once and
// must not throw; clear it (nullptr) before what it refers to is gone.
void set_last_words(std::function<void(const std::string& why)> hook);
void say_last_words(const std::string& why);

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
// "[rank R on HOST] LIBRARY call failed at FILE:LINE: EXPR: MESSAGE".
[[noreturn]] void throw_library_error(const char* library, const char* file, int line, const char* expr,
                                      const std::string& message);
// Defined in st_comm (comm/mpi_error.cpp) and st_io (io/h5_error.cpp), which link MPI and HDF5:
// a library that uses ST_CHECK_MPI links st_comm, one that uses ST_CHECK_H5 st_io.
[[noreturn]] void throw_mpi_error(const char* file, int line, const char* expr, int code);
[[noreturn]] void throw_h5_error(const char* file, int line, const char* expr);
}  // namespace detail

}  // namespace scaletrain

// ST_THROW(a << b): throws scaletrain::Error with a streamed message, then " (at FILE:LINE)".
#define ST_THROW(msg_stream)                                             \
  do {                                                                   \
    std::ostringstream st_os_;                                           \
    st_os_ << msg_stream;                                                \
    ::scaletrain::detail::throw_error(__FILE__, __LINE__, st_os_.str()); \
  } while (0)

// ST_CHECK(cond, a << b): throws when cond is false.
#define ST_CHECK(cond, msg_stream)     \
  do {                                 \
    if (!(cond)) ST_THROW(msg_stream); \
  } while (0)

// ST_CHECK_MPI(MPI_Foo(...)): MPI returns MPI_SUCCESS (0) on success.
#define ST_CHECK_MPI(expr)                                                                     \
  do {                                                                                         \
    int st_rc_ = (expr);                                                                       \
    if (st_rc_ != 0) ::scaletrain::detail::throw_mpi_error(__FILE__, __LINE__, #expr, st_rc_); \
  } while (0)

// ST_CHECK_H5(H5Foo(...)): HDF5 returns a negative value (herr_t or hid_t) on failure.
#define ST_CHECK_H5(expr)                                                            \
  ([&]() {                                                                           \
    auto st_rc_ = (expr);                                                            \
    if (st_rc_ < 0) ::scaletrain::detail::throw_h5_error(__FILE__, __LINE__, #expr); \
    return st_rc_;                                                                   \
  }())
