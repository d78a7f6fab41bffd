// MPI-IO sample readers (--io mpiio, --io mpiio-collective; docs/io-modes.md). Shards are opened
// through HDF5's MPI-IO driver; each read() groups the requested samples per shard and reads each
// shard's rows with one H5Dread over a union of row hyperslabs (chunks hold whole rows, so every
// run of rows is a contiguous piece of one or a few chunks).
//
// mpiio: every rank opens shards on its own (a private duplicate of MPI_COMM_SELF), lazily, and
// reads with independent transfers: no collective contract, any number of read() calls.
// mpiio-collective: all ranks open every shard together at construction (a private duplicate of
// the world, so that our collectives never meet the gradient all-reduce's or the main thread's)
// and read with H5FD_MPIO_COLLECTIVE, so that MPI-IO can aggregate the ranks' requests. Every
// read() is collective: the ranks first agree (one small allreduce) on errors and on which shards
// anyone needs, then read those shards in order, a rank with nothing there selecting none.
// Evaluation (!drop_last, step counts differ by rank) and variable-length (JPEG) datasets, which
// parallel HDF5 1.10 cannot read collectively, fall back to the independent mode.
//
// Every HDF5 call holds io::h5_mutex() (HDF5 is not thread-safe).
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <sstream>

#include "comm/mpi_impl.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

herr_t collect_error(unsigned, const H5E_error2_t* err, void* client) {
  auto* msgs = static_cast<std::vector<std::string>*>(client);
  if (err->desc && *err->desc) msgs->push_back(err->desc);
  return 0;
}

// HDF5's explanation of the last failure (outermost and innermost message); clears the stack.
std::string h5_error_text() {
  std::vector<std::string> msgs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &msgs);
  H5Eclear2(H5E_DEFAULT);
  if (msgs.empty()) return "HDF5 gave no detail";
  if (msgs.size() == 1 || msgs.front() == msgs.back()) return msgs.front();
  return msgs.front() + " (" + msgs.back() + ")";
}

// Closes an HDF5 object when leaving scope (the caller holds the lock).
struct Id {
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~Id() {
    if (id >= 0) close(id);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
};

struct Shard {
  std::string path;
  int64_t samples = 0;
  hid_t file = -1;
  hid_t data = -1;  // `images` (raw) or `jpeg` (vlen)
  Shape dims;       // of `data`
  std::vector<int32_t> labels;
};

// One requested sample: where it lives and where it goes.
struct Item {
  int64_t shard, row, pos;
};

class MpiioReader final : public SampleReader {
 public:
  MpiioReader(const SplitInfo& split, const LoaderOptions& options, MPI_Comm world, bool collective);
  ~MpiioReader() override;
  std::string name() const override { return collective_ ? "mpiio-collective" : "mpiio"; }
  void read(const std::vector<int64_t>& ids, SampleBytes& out) override;
  int64_t bytes_read() const override { return bytes_read_.load(); }

 private:
  // Collective mode: MPI-IO hints for the implementation in use (see the comment inside).
  void choose_hints();
  void open_shard(Shard& s);  // throws scaletrain::Error naming the file
  void close_shard(Shard& s);
  // Collective mode: every rank passes its own error ("" when fine) and its needs[] per shard; on
  // return needs[s] says whether any rank needs shard s. If any rank failed, every rank throws
  // the lowest failing rank's message.
  void agree(const std::string& error, std::vector<int>& needs);
  // Reads `rows` (increasing, distinct) of shard s into staging_, appending (offset, size) to
  // pieces_. rows may be empty (a collective read that selects nothing).
  void read_rows(Shard& s, const std::vector<int64_t>& rows);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool collective_ = false;
  bool vlen_ = false;
  int64_t row_bytes_ = 0;  // raw: H * W * C
  std::vector<Shard> shards_;
  std::vector<int64_t> shard_begin_;  // first split-wide id of each shard, plus the total
  hid_t dxpl_ = -1;
  MPI_Info info_ = MPI_INFO_NULL;  // hints for MPI_File_open
  std::vector<uint8_t> staging_;
  std::vector<std::pair<int64_t, int64_t>> pieces_;  // (offset in staging_, size) per unique row read
  std::atomic<int64_t> bytes_read_{0};
  bool failed_together_ = false;  // an agreed error: every rank unwinds, closing stays collective
};

MpiioReader::MpiioReader(const SplitInfo& split, const LoaderOptions& options, MPI_Comm world, bool collective) {
  ST_CHECK(split.encoding == "raw" || split.encoding == "jpeg",
           split.dir << ": encoding '" << split.encoding << "' cannot be read with --io " << options.io);
  vlen_ = split.encoding == "jpeg";
  row_bytes_ = int64_t(split.height) * split.width * split.channels;
  // Collective reads need the same number of read() calls on every rank: only training plans
  // (drop_last) guarantee that, and HDF5 1.10 reads variable-length data independently only.
  collective_ = collective && options.drop_last && !vlen_;
  if (collective && !collective_)
    log_info(std::string("--io mpiio-collective: ") +
             (vlen_ ? "variable-length (JPEG) samples cannot be read collectively by parallel HDF5 1.10"
                    : "evaluation ranks may run different numbers of steps") +
             "; reading " + split.dir + " with independent MPI-IO (--io mpiio)");

  // A private communicator: collective over the world (collective mode) or this rank alone.
  ST_CHECK_MPI(MPI_Comm_dup(collective_ ? world : MPI_COMM_SELF, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);

  shard_begin_.push_back(0);
  for (const ShardInfo& s : split.shards) {
    Shard sh;
    sh.path = s.path;
    sh.samples = s.samples;
    shards_.push_back(std::move(sh));
    shard_begin_.push_back(shard_begin_.back() + s.samples);
  }
  {
    Lock lock(io::h5_mutex());
    dxpl_ = H5Pcreate(H5P_DATASET_XFER);
    ST_CHECK(dxpl_ >= 0, "cannot create an HDF5 transfer property list: " << h5_error_text());
    if (H5Pset_dxpl_mpio(dxpl_, collective_ ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT) < 0)
      ST_THROW("cannot set the MPI-IO transfer mode: " << h5_error_text());
  }
  if (!collective_) return;  // shards open on first use
  choose_hints();

  // All ranks open every shard in the same order; an error on any rank stops all of them.
  std::vector<int> dummy;
  try {
    for (Shard& s : shards_) {
      std::string error;
      try {
        open_shard(s);
      } catch (const Error& e) {
        error = e.what();
      }
      try {
        agree(error, dummy);
      } catch (...) {
        // Ranks where this shard did open leave it open: closing it would be collective.
        s.file = s.data = -1;
        throw;
      }
    }
  } catch (...) {
    for (Shard& s : shards_) close_shard(s);
    {
      Lock lock(io::h5_mutex());
      H5Pclose(dxpl_);
    }
    if (info_ != MPI_INFO_NULL) MPI_Info_free(&info_);
    MPI_Comm_free(&comm_);
    throw;
  }
}

// Open MPI's MPI-IO component selection (the MCA variable "io": "" for the default, e.g.
// "romio321" or "^ompio"), read through the MPI tool interface; "" when unavailable.
std::string open_mpi_io_selection() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return "";
  std::string value;
  int index = 0, count = 0;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index("io", &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    std::vector<char> buf(std::max(count, 1) + 1, 0);
    if (MPI_T_cvar_read(handle, buf.data()) == MPI_SUCCESS) value = buf.data();
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

void MpiioReader::choose_hints() {
  // ROMIO (MPICH, Cray MPICH, Intel MPI, Open MPI's romio321) aggregates collective reads
  // (two-phase I/O) when told to. Open MPI's own OMPIO, its default component, returned wrong
  // data -- zeros for the last rows of a chunk -- for collective reads of a union of row
  // hyperslabs in our tests (Open MPI 4.1.4, fcoll vulcan, dynamic and dynamic_gen2; its
  // two_phase and individual were right): under OMPIO, HDF5 keeps the collective call but lets
  // each rank read its own pieces (H5FD_MPIO_INDIVIDUAL_IO).
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  bool ompio = false;
  if (std::string(version, len).find("Open MPI") != std::string::npos) {
    const std::string io = open_mpi_io_selection();
    const bool excluded = !io.empty() && io[0] == '^';
    const bool romio = excluded ? io.find("ompio") != std::string::npos : io.find("romio") != std::string::npos;
    ompio = !romio;
  }
  // Every rank must make the same choice (the environment could differ between ranks).
  int any_ompio = ompio ? 1 : 0;
  ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &any_ompio, 1, MPI_INT, MPI_MAX, comm_));
  if (any_ompio) {
    Lock lock(io::h5_mutex());
    ST_CHECK(H5Pset_dxpl_mpio_collective_opt(dxpl_, H5FD_MPIO_INDIVIDUAL_IO) >= 0,
             "cannot set the MPI-IO transfer mode: " << h5_error_text());
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log_info(
          "--io mpiio-collective: Open MPI's OMPIO is in use, whose aggregated collective reads returned wrong data "
          "in our tests: every rank reads its own rows (run with OMPI_MCA_io=romio321 for aggregated reads; "
          "docs/io-modes.md)");
  } else {
    ST_CHECK_MPI(MPI_Info_create(&info_));
    MPI_Info_set(info_, "romio_cb_read", "enable");
  }
}

MpiioReader::~MpiioReader() {
  // Closing a collectively opened file is collective. A rank unwinding from an error of its own
  // (not one all ranks agreed on) is on its way to MPI_Abort: it must not wait for the others.
  if (collective_ && std::uncaught_exceptions() > 0 && !failed_together_) return;
  for (Shard& s : shards_) close_shard(s);
  {
    Lock lock(io::h5_mutex());
    H5Pclose(dxpl_);
  }
  if (info_ != MPI_INFO_NULL) MPI_Info_free(&info_);
  MPI_Comm_free(&comm_);
}

void MpiioReader::open_shard(Shard& s) {
  Lock lock(io::h5_mutex());
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  ST_CHECK(fapl.id >= 0, "cannot create an HDF5 property list: " << h5_error_text());
  ST_CHECK(H5Pset_fapl_mpio(fapl.id, comm_, info_) >= 0, s.path << ": cannot set up MPI-IO: " << h5_error_text());
  hid_t file = H5Fopen(s.path.c_str(), H5F_ACC_RDONLY, fapl.id);
  ST_CHECK(file >= 0,
           s.path << ": cannot open with MPI-IO (missing, unreadable, truncated or not HDF5): " << h5_error_text());
  Id f(file, H5Fclose);
  const char* name = vlen_ ? "jpeg" : "images";
  hid_t data = H5Dopen2(file, name, H5P_DEFAULT);
  ST_CHECK(data >= 0, s.path << ": cannot open dataset '" << name << "': " << h5_error_text());
  Id d(data, H5Dclose);
  {
    Id space(H5Dget_space(data), H5Sclose);
    const int nd = H5Sget_simple_extent_ndims(space.id);
    ST_CHECK(nd >= 1, s.path << ": cannot read the shape of '" << name << "'");
    std::vector<hsize_t> dims(nd);
    H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
    s.dims.assign(dims.begin(), dims.end());
  }
  ST_CHECK(s.dims[0] == s.samples, s.path << ": '" << name << "' has " << s.dims[0] << " samples, expected "
                                          << s.samples << " (changed since the split was opened?)");
  if (!vlen_) {
    int64_t row = 1;
    for (std::size_t i = 1; i < s.dims.size(); ++i) row *= s.dims[i];
    ST_CHECK(row == row_bytes_, s.path << ": images of " << row << " bytes, expected " << row_bytes_
                                       << " (changed since the split was opened?)");
  }
  // Labels: 4 bytes per sample, read whole once (collectively in collective mode).
  s.labels.assign(s.samples, 0);
  if (s.samples > 0) {
    Id l(H5Dopen2(file, "labels", H5P_DEFAULT), H5Dclose);
    ST_CHECK(l.id >= 0, s.path << ": cannot open dataset 'labels': " << h5_error_text());
    ST_CHECK(H5Dread(l.id, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, dxpl_, s.labels.data()) >= 0,
             s.path << ": cannot read 'labels': " << h5_error_text());
  }
  s.file = file;
  s.data = data;
  f.id = d.id = -1;  // now owned by s
}

void MpiioReader::close_shard(Shard& s) {
  Lock lock(io::h5_mutex());
  if (s.data >= 0) H5Dclose(s.data);
  if (s.file >= 0) H5Fclose(s.file);
  s.data = s.file = -1;
}

void MpiioReader::agree(const std::string& error, std::vector<int>& needs) {
  // One MIN-allreduce: [lowest failing rank (size when none), 0 where some rank needs shard s].
  std::vector<int> v(1 + needs.size());
  v[0] = error.empty() ? size_ : rank_;
  for (std::size_t s = 0; s < needs.size(); ++s) v[1 + s] = needs[s] ? 0 : 1;
  ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT, MPI_MIN, comm_));
  for (std::size_t s = 0; s < needs.size(); ++s) needs[s] = v[1 + s] == 0;
  const int failed = v[0];
  if (failed == size_) return;
  std::string msg = error;
  int len = static_cast<int>(msg.size());
  ST_CHECK_MPI(MPI_Bcast(&len, 1, MPI_INT, failed, comm_));
  msg.resize(len);
  ST_CHECK_MPI(MPI_Bcast(msg.data(), len, MPI_CHAR, failed, comm_));
  failed_together_ = true;
  if (failed == rank_) throw Error(msg);
  ST_THROW("rank " << failed << " failed during a collective MPI-IO read: " << msg);
}

void MpiioReader::read_rows(Shard& s, const std::vector<int64_t>& rows) {
  Lock lock(io::h5_mutex());
  Id fspace(H5Dget_space(s.data), H5Sclose);
  ST_CHECK(fspace.id >= 0, s.path << ": cannot get the dataspace: " << h5_error_text());
  const std::size_t nd = s.dims.size();
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) {
    H5Sselect_none(fspace.id);
  } else {
    // One hyperslab per run of consecutive rows (whole rows: every run is contiguous within the
    // chunks it touches, as chunks hold whole rows).
    std::vector<hsize_t> start(nd, 0), count(nd, 1), block(s.dims.begin(), s.dims.end());
    H5S_seloper_t op = H5S_SELECT_SET;
    for (int64_t i = 0; i < n;) {
      int64_t j = i + 1;
      while (j < n && rows[j] == rows[j - 1] + 1) ++j;
      start[0] = rows[i];
      block[0] = j - i;
      ST_CHECK(H5Sselect_hyperslab(fspace.id, op, start.data(), nullptr, count.data(), block.data()) >= 0,
               s.path << ": cannot select rows: " << h5_error_text());
      op = H5S_SELECT_OR;
      i = j;
    }
  }
  const hsize_t mem_n = vlen_ ? hsize_t(std::max<int64_t>(n, 1)) : hsize_t(std::max<int64_t>(n * row_bytes_, 1));
  Id mspace(H5Screate_simple(1, &mem_n, nullptr), H5Sclose);
  if (n == 0) H5Sselect_none(mspace.id);

  auto fail = [&]() {
    std::ostringstream os;
    os << s.path << ": cannot read sample" << (n == 1 ? " " : "s ") << "(rows of this file";
    for (int64_t i = 0; i < std::min<int64_t>(n, 8); ++i) os << (i ? ", " : " ") << rows[i];
    os << (n > 8 ? ", ..." : "") << "): " << h5_error_text();
    ST_THROW(os.str());
  };
  if (!vlen_) {
    const int64_t at = static_cast<int64_t>(staging_.size());
    staging_.resize(at + n * row_bytes_);
    uint8_t* dst = n ? staging_.data() + at : nullptr;
    uint8_t dummy = 0;
    if (H5Dread(s.data, H5T_NATIVE_UINT8, mspace.id, fspace.id, dxpl_, dst ? dst : &dummy) < 0) fail();
    for (int64_t i = 0; i < n; ++i) pieces_.emplace_back(at + i * row_bytes_, row_bytes_);
    return;
  }
  if (n == 0) return;  // vlen reads are never collective
  Id vtype(H5Tvlen_create(H5T_NATIVE_UINT8), H5Tclose);
  std::vector<hvl_t> buf(n);
  if (H5Dread(s.data, vtype.id, mspace.id, fspace.id, dxpl_, buf.data()) < 0) fail();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = static_cast<int64_t>(staging_.size());
    staging_.resize(at + buf[i].len);
    if (buf[i].len) std::memcpy(staging_.data() + at, buf[i].p, buf[i].len);
    pieces_.emplace_back(at, static_cast<int64_t>(buf[i].len));
  }
  H5Dvlen_reclaim(vtype.id, mspace.id, H5P_DEFAULT, buf.data());
}

void MpiioReader::read(const std::vector<int64_t>& ids, SampleBytes& out) {
  out.clear();
  const int64_t total = shard_begin_.back();
  const std::size_t nshards = shards_.size();
  std::string error;

  // Locate every id; sort by (shard, row) so that each shard's rows are increasing.
  std::vector<Item> items;
  items.reserve(ids.size());
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const int64_t id = ids[j];
    if (id < 0 || id >= total) {
      if (error.empty()) {
        std::ostringstream os;
        os << "sample index " << id << " is out of range: the split has " << total << " samples";
        error = os.str();
      }
      continue;
    }
    const int64_t s = std::upper_bound(shard_begin_.begin(), shard_begin_.end(), id) - shard_begin_.begin() - 1;
    items.push_back({s, id - shard_begin_[s], static_cast<int64_t>(j)});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.shard != b.shard ? a.shard < b.shard : a.row < b.row; });

  std::vector<int> needs(nshards, 0);
  for (const Item& it : items) needs[it.shard] = 1;
  if (!collective_) {
    ST_CHECK(error.empty(), error);
    for (std::size_t s = 0; s < nshards; ++s) {
      if (!needs[s] || shards_[s].file >= 0) continue;
      try {
        open_shard(shards_[s]);
      } catch (const Error& e) {
        close_shard(shards_[s]);
        const int64_t first = std::find_if(items.begin(), items.end(), [&](const Item& it) {
                                return it.shard == static_cast<int64_t>(s);
                              })->row;
        ST_THROW(e.what() << " (needed for sample " << shard_begin_[s] + first << ", row " << first << " of "
                          << shards_[s].path << ")");
      }
    }
  } else {
    agree(error, needs);  // throws on every rank if any rank failed
  }

  // Read each needed shard's distinct rows; collective mode reads every shard that any rank needs.
  staging_.clear();
  pieces_.clear();
  std::vector<int64_t> piece_of(items.size());  // items[k] -> pieces_ index
  std::vector<int64_t> rows;
  std::size_t k = 0;
  std::string read_error;
  for (std::size_t s = 0; s < nshards; ++s) {
    if (!needs[s]) continue;
    rows.clear();
    for (; k < items.size() && items[k].shard == static_cast<int64_t>(s); ++k) {
      if (rows.empty() || rows.back() != items[k].row) rows.push_back(items[k].row);
      piece_of[k] = static_cast<int64_t>(pieces_.size() + rows.size() - 1);
    }
    // After a failure, keep taking part in the collective reads with nothing selected.
    if (!read_error.empty()) rows.clear();
    try {
      read_rows(shards_[s], rows);
      bytes_read_ += static_cast<int64_t>(rows.size()) * (vlen_ ? 4 : row_bytes_ + 4);
    } catch (const Error& e) {
      if (!collective_) throw;
      read_error = e.what();
    }
  }
  if (collective_) {
    std::vector<int> none;
    agree(read_error, none);
  }
  if (vlen_) {
    int64_t sum = 0;
    for (const auto& p : pieces_) sum += p.second;
    bytes_read_ += sum;
  }

  // Assemble in request order (repeats copy the same row again).
  const std::size_t n = ids.size();
  std::vector<int64_t> where(n, -1);
  for (std::size_t i = 0; i < items.size(); ++i) where[items[i].pos] = static_cast<int64_t>(i);
  out.ids = ids;
  out.labels.resize(n);
  out.offsets.resize(n + 1);
  out.offsets[0] = 0;
  for (std::size_t j = 0; j < n; ++j) out.offsets[j + 1] = out.offsets[j] + pieces_[piece_of[where[j]]].second;
  out.bytes.resize(out.offsets[n]);
  for (std::size_t j = 0; j < n; ++j) {
    const Item& it = items[where[j]];
    const auto& p = pieces_[piece_of[where[j]]];
    if (p.second) std::memcpy(out.bytes.data() + out.offsets[j], staging_.data() + p.first, p.second);
    out.labels[j] = shards_[it.shard].labels[it.row];
  }
}

}  // namespace

std::unique_ptr<SampleReader> make_mpiio_reader(const SplitInfo& split, const LoaderOptions& options,
                                                const comm::Communicator& comm, bool collective) {
  return std::make_unique<MpiioReader>(split, options, comm::mpi_comm(comm), collective);
}

}  // namespace scaletrain::data
