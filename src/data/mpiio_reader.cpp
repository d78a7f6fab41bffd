// MPI-IO sample readers (--io mpiio, --io mpiio-collective; docs/io-modes.md). Shards are opened
// through HDF5's MPI-IO driver; HDF5 gives the file offset of every chunk (looked up once) and the
// labels, and each read() groups the requested samples per shard and reads each shard's distinct
// rows, as runs cut at chunk borders, straight into the output through HDF5's own MPI-IO handle.
// (HDF5 1.10 walks a union of row hyperslabs element by element of the last dimension: ~30 MB/s
// for RGB images. It still reads compressed or oddly chunked `images` and variable-length JPEG
// rows, independently.)
//
// mpiio: every rank opens shards on its own (a private duplicate of MPI_COMM_SELF), lazily, and
// reads one piece at a time: no collective contract, any number of read() calls.
// mpiio-collective: all ranks open every shard together at construction (a private duplicate of
// the world, so that our collectives never meet the gradient all-reduce's or the main thread's)
// and read each needed shard with one MPI_File_read_at_all over an hindexed view, so that MPI-IO
// can aggregate the ranks' requests. Every read() is collective: the ranks first agree (one small
// allreduce) on errors and on which shards anyone needs, then read those shards in order, a rank
// with nothing there reading nothing; errors met while reading are agreed on at the end.
// Evaluation (!drop_last: step counts differ by rank) and variable-length (JPEG) datasets fall
// back to the independent mode.
//
// Every HDF5 call and every read through a shard's MPI-IO handle holds io::h5_mutex() (HDF5 is
// not thread-safe; the handle is HDF5's).
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
  // Direct path (raw, uncompressed, contiguous or chunked in whole rows): the file offset of
  // every chunk, read through HDF5's own MPI-IO handle.
  bool direct = false;
  MPI_File fh = MPI_FILE_NULL;
  int64_t chunk_rows = 0;             // rows per chunk (all rows when contiguous)
  std::vector<int64_t> chunk_offset;  // per chunk, in row order
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
  // Sets s.direct and the chunk offsets when the rows can be read with plain MPI-IO.
  void find_chunks(Shard& s, hid_t file, hid_t data);
  // The direct path: rows' bytes straight from the file, one collective MPI_File_read_at_all
  // over an hindexed file view (collective mode) or one MPI_File_read_at per piece.
  void read_direct(Shard& s, const std::vector<int64_t>& rows, const std::vector<uint8_t*>& dest);
  // Collective mode: every rank passes its own error ("" when fine) and its needs[] per shard; on
  // return needs[s] says whether any rank needs shard s. If any rank failed, every rank throws
  // the lowest failing rank's message.
  void agree(const std::string& error, std::vector<int>& needs);
  // Reads `rows` (increasing, distinct) of shard s: raw rows to dest[i] (row_bytes_ each);
  // variable-length rows into staging_, appending (offset, size) to pieces_. rows may be empty
  // (a collective read that selects nothing).
  void read_rows(Shard& s, const std::vector<int64_t>& rows, const std::vector<uint8_t*>& dest);

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
  bool aggregate_ = false;        // collective MPI-IO reads (false: each rank reads its own pieces)
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
  static std::atomic<bool> said_fallback{false};
  if (collective && !collective_ && !said_fallback.exchange(true))
    log_info(std::string("--io mpiio-collective: ") +
             (vlen_ ? "variable-length (JPEG) samples cannot be read collectively by parallel HDF5 1.10"
                    : "evaluation ranks may run different numbers of steps") +
             "; reading " + split.dir + " with independent MPI-IO (--io mpiio)");

  // A private communicator: collective over the world (collective mode) or this rank alone.
  ST_CHECK_MPI(MPI_Comm_dup(collective_ ? world : MPI_COMM_SELF, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);

  shard_begin_ = shard_starts(split);
  for (const ShardInfo& s : split.shards) {
    Shard sh;
    sh.path = s.path;
    sh.samples = s.samples;
    shards_.push_back(std::move(sh));
  }
  {
    Lock lock(io::h5_mutex());
    dxpl_ = H5Pcreate(H5P_DATASET_XFER);
    ST_CHECK(dxpl_ >= 0, "cannot create an HDF5 transfer property list: " << io::h5_error_text());
    if (H5Pset_dxpl_mpio(dxpl_, collective_ ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT) < 0)
      ST_THROW("cannot set the MPI-IO transfer mode: " << io::h5_error_text());
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
  // Ask for the level MPI runs at: Open MPI lowers what MPI_Query_thread reports to the level
  // passed here, and the gradient all-reducer's thread needs MPI_THREAD_MULTIPLE to stay.
  int level = MPI_THREAD_SINGLE, provided = 0;
  MPI_Query_thread(&level);
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return "";
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
  // (two-phase I/O; romio_cb_read=enable). Open MPI's own OMPIO, its default component, returned
  // wrong data -- zeros for the last rows of a chunk -- for collective reads of scattered rows
  // in our tests, through HDF5 and through our own hindexed file views alike (Open MPI 4.1.4,
  // fcoll vulcan, dynamic and dynamic_gen2; two_phase and individual were right): under OMPIO
  // every rank reads its own pieces inside the collective read() (and HDF5's collective calls
  // use H5FD_MPIO_INDIVIDUAL_IO).
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
  aggregate_ = !any_ompio;
  if (any_ompio) {
    Lock lock(io::h5_mutex());
    ST_CHECK(H5Pset_dxpl_mpio_collective_opt(dxpl_, H5FD_MPIO_INDIVIDUAL_IO) >= 0,
             "cannot set the MPI-IO transfer mode: " << io::h5_error_text());
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log_info(
          "--io mpiio-collective: Open MPI's OMPIO is in use, whose aggregated collective reads returned wrong data "
          "in our tests: every rank reads its own rows (run with OMPI_MCA_io=romio321 for aggregated reads; "
          "docs/io-modes.md)");
  } else {
    // Data sieving would read the holes between our pieces (whole rows, not tiny strided
    // pieces); collective buffering (romio_cb_read) stays ROMIO's choice, tunable by ROMIO_HINTS.
    ST_CHECK_MPI(MPI_Info_create(&info_));
    char key[] = "romio_ds_read", value[] = "disable";
    MPI_Info_set(info_, key, value);
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
  ST_CHECK(fapl.id >= 0, "cannot create an HDF5 property list: " << io::h5_error_text());
  ST_CHECK(H5Pset_fapl_mpio(fapl.id, comm_, info_) >= 0, s.path << ": cannot set up MPI-IO: " << io::h5_error_text());
  hid_t file = H5Fopen(s.path.c_str(), H5F_ACC_RDONLY, fapl.id);
  ST_CHECK(file >= 0,
           s.path << ": cannot open with MPI-IO (missing, unreadable, truncated or not HDF5): " << io::h5_error_text());
  Id f(file, H5Fclose);
  const char* name = vlen_ ? "jpeg" : "images";
  hid_t data = H5Dopen2(file, name, H5P_DEFAULT);
  ST_CHECK(data >= 0, s.path << ": cannot open dataset '" << name << "': " << io::h5_error_text());
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
  if (!vlen_ && s.samples > 0) find_chunks(s, file, data);
  // Labels: 4 bytes per sample, read whole once (collectively in collective mode).
  s.labels.assign(s.samples, 0);
  if (s.samples > 0) {
    Id l(H5Dopen2(file, "labels", H5P_DEFAULT), H5Dclose);
    ST_CHECK(l.id >= 0, s.path << ": cannot open dataset 'labels': " << io::h5_error_text());
    ST_CHECK(H5Dread(l.id, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, dxpl_, s.labels.data()) >= 0,
             s.path << ": cannot read 'labels': " << io::h5_error_text());
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

void MpiioReader::find_chunks(Shard& s, hid_t file, hid_t data) {
  Id dcpl(H5Dget_create_plist(data), H5Pclose);
  if (dcpl.id < 0 || H5Pget_nfilters(dcpl.id) != 0) return;
  Id type(H5Dget_type(data), H5Tclose);
  if (type.id < 0 || H5Tget_size(type.id) != 1) return;
  const H5D_layout_t layout = H5Pget_layout(dcpl.id);
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t at = H5Dget_offset(data);
    if (at == HADDR_UNDEF) return;
    s.chunk_rows = s.samples;
    s.chunk_offset.assign(1, static_cast<int64_t>(at));
  } else if (layout == H5D_CHUNKED) {
    const std::size_t nd = s.dims.size();
    std::vector<hsize_t> chunk(nd);
    if (H5Pget_chunk(dcpl.id, static_cast<int>(nd), chunk.data()) != static_cast<int>(nd)) return;
    for (std::size_t i = 1; i < nd; ++i)
      if (static_cast<int64_t>(chunk[i]) != s.dims[i]) return;  // chunks must hold whole rows
    s.chunk_rows = static_cast<int64_t>(chunk[0]);
    const int64_t nchunks = (s.samples + s.chunk_rows - 1) / s.chunk_rows;
    s.chunk_offset.assign(nchunks, -1);
    Id space(H5Dget_space(data), H5Sclose);
    hsize_t stored = 0;
    if (H5Dget_num_chunks(data, space.id, &stored) < 0) return;
    std::vector<hsize_t> coords(nd);
    for (hsize_t i = 0; i < stored; ++i) {
      unsigned mask = 0;
      haddr_t at = HADDR_UNDEF;
      hsize_t size = 0;
      if (H5Dget_chunk_info(data, space.id, i, coords.data(), &mask, &at, &size) < 0) return;
      const int64_t c = static_cast<int64_t>(coords[0]) / s.chunk_rows;
      if (c >= 0 && c < nchunks && at != HADDR_UNDEF) s.chunk_offset[c] = static_cast<int64_t>(at);
    }
    for (int64_t off : s.chunk_offset)
      if (off < 0) return;  // a chunk never written: let HDF5 supply the fill value
  } else {
    return;
  }
  void* handle = nullptr;
  Id fapl(H5Fget_access_plist(file), H5Pclose);
  if (H5Fget_vfd_handle(file, fapl.id, &handle) < 0 || handle == nullptr) return;
  s.fh = *static_cast<MPI_File*>(handle);
  s.direct = true;
}

void MpiioReader::read_direct(Shard& s, const std::vector<int64_t>& rows, const std::vector<uint8_t*>& dest) {
  // One piece per run of rows within one chunk: (file offset, length, first row).
  struct Piece {
    int64_t offset, length, row;
    uint8_t* dest;
  };
  std::vector<Piece> pieces;
  const int64_t n = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < n;) {
    const int64_t c = rows[i] / s.chunk_rows, chunk_end = (c + 1) * s.chunk_rows;
    int64_t j = i + 1;
    while (j < n && rows[j] == rows[j - 1] + 1 && rows[j] < chunk_end && dest[j] == dest[j - 1] + row_bytes_) ++j;
    pieces.push_back(
        {s.chunk_offset[c] + (rows[i] - c * s.chunk_rows) * row_bytes_, (j - i) * row_bytes_, rows[i], dest[i]});
    i = j;
  }
  // MPI-IO file views need increasing offsets; the memory type follows the same order.
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  const int64_t total = n * row_bytes_;
  auto fail = [&](const char* what, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    ST_THROW(s.path << ": " << what << " of " << n << " rows (from row " << (n ? rows[0] : -1)
                    << " of this file) failed: " << std::string(text, len));
  };
  if (aggregate_) {
    // A collective read reports no short read past the end of the file: check the size first,
    // and on a problem still take part in the collective calls, reading nothing.
    std::string problem;
    MPI_Offset size = 0;
    if (!pieces.empty() && MPI_File_get_size(s.fh, &size) == MPI_SUCCESS) {
      for (const Piece& p : pieces)
        if (p.offset + p.length > size) {
          std::ostringstream os;
          os << s.path << ": the file is truncated (" << size << " bytes): row " << p.row
             << " of this file lies beyond its end";
          problem = os.str();
          break;
        }
    }
    if (problem.empty() && total >= (int64_t(1) << 31))
      problem = s.path + ": " + std::to_string(total) + " bytes in one read is over MPI's limit of 2 GiB";
    if (!problem.empty()) pieces.clear();
    std::vector<int> lengths(pieces.size());
    std::vector<MPI_Aint> displs(pieces.size()), addrs(pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      lengths[i] = static_cast<int>(pieces[i].length);
      displs[i] = static_cast<MPI_Aint>(pieces[i].offset);
      MPI_Get_address(pieces[i].dest, &addrs[i]);
    }
    MPI_Datatype view = MPI_BYTE, memory = MPI_BYTE;
    if (!pieces.empty()) {
      const int np = static_cast<int>(pieces.size());
      ST_CHECK_MPI(MPI_Type_create_hindexed(np, lengths.data(), displs.data(), MPI_BYTE, &view));
      ST_CHECK_MPI(MPI_Type_commit(&view));
      ST_CHECK_MPI(MPI_Type_create_hindexed(np, lengths.data(), addrs.data(), MPI_BYTE, &memory));
      ST_CHECK_MPI(MPI_Type_commit(&memory));
    }
    char native[] = "native";
    int rc = MPI_File_set_view(s.fh, 0, MPI_BYTE, view, native, MPI_INFO_NULL);
    MPI_Status status;
    static uint8_t nothing = 0;
    if (rc == MPI_SUCCESS)
      rc = pieces.empty() ? MPI_File_read_at_all(s.fh, 0, &nothing, 0, MPI_BYTE, &status)
                          : MPI_File_read_at_all(s.fh, 0, MPI_BOTTOM, 1, memory, &status);
    const int rc2 = MPI_File_set_view(s.fh, 0, MPI_BYTE, MPI_BYTE, native, MPI_INFO_NULL);  // HDF5's default
    if (view != MPI_BYTE) MPI_Type_free(&view);
    if (memory != MPI_BYTE) MPI_Type_free(&memory);
    ST_CHECK(problem.empty(), problem);
    if (rc != MPI_SUCCESS) fail("collective MPI-IO read", rc);
    if (rc2 != MPI_SUCCESS) fail("resetting the MPI-IO file view", rc2);
    // (ROMIO's status of a collective read is not a per-rank count: the size was checked above.)
  } else {
    for (const Piece& p : pieces) {
      MPI_Status status;
      const int rc = MPI_File_read_at(s.fh, p.offset, p.dest, static_cast<int>(p.length), MPI_BYTE, &status);
      if (rc != MPI_SUCCESS) fail("MPI-IO read", rc);
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      ST_CHECK(got == p.length, s.path << ": short read (" << got << " of " << p.length << " bytes at row " << p.row
                                       << "): the file is truncated");
    }
  }
}

void MpiioReader::read_rows(Shard& s, const std::vector<int64_t>& rows, const std::vector<uint8_t*>& dest) {
  Lock lock(io::h5_mutex());
  if (s.direct) {
    read_direct(s, rows, dest);
    return;
  }
  const std::size_t nd = s.dims.size();
  const int64_t n = static_cast<int64_t>(rows.size());
  auto fail = [&](int64_t row) { ST_THROW(s.path << ": cannot read row " << row << ": " << io::h5_error_text()); };
  if (!vlen_) {
    // HDF5 1.10 walks an irregular (union) selection element by element of the last dimension,
    // far too slowly for images: read each run of rows as one regular hyperslab instead.
    const int64_t at = static_cast<int64_t>(staging_.size());
    staging_.resize(at + n * row_bytes_);
    std::vector<hsize_t> start(nd, 0), count(s.dims.begin(), s.dims.end());
    for (int64_t i = 0; i < n;) {
      int64_t j = i + 1;
      while (j < n && rows[j] == rows[j - 1] + 1) ++j;
      start[0] = rows[i];
      count[0] = j - i;
      Id fspace(H5Dget_space(s.data), H5Sclose);
      const hsize_t mem_n = (j - i) * row_bytes_;
      Id mspace(H5Screate_simple(1, &mem_n, nullptr), H5Sclose);
      if (fspace.id < 0 || mspace.id < 0 ||
          H5Sselect_hyperslab(fspace.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
          H5Dread(s.data, H5T_NATIVE_UINT8, mspace.id, fspace.id, H5P_DEFAULT, staging_.data() + at + i * row_bytes_) <
              0)
        fail(rows[i]);
      i = j;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(dest[i], staging_.data() + at + i * row_bytes_, row_bytes_);
    staging_.resize(at);
    return;
  }
  if (n == 0) return;
  // Variable-length rows: one read over the union of runs (a 1-D selection, walked per row).
  Id fspace(H5Dget_space(s.data), H5Sclose);
  H5S_seloper_t op = H5S_SELECT_SET;
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    while (j < n && rows[j] == rows[j - 1] + 1) ++j;
    const hsize_t start = rows[i], count = j - i;
    if (H5Sselect_hyperslab(fspace.id, op, &start, nullptr, &count, nullptr) < 0) fail(rows[i]);
    op = H5S_SELECT_OR;
    i = j;
  }
  const hsize_t mem_n = n;
  Id mspace(H5Screate_simple(1, &mem_n, nullptr), H5Sclose);
  Id vtype(H5Tvlen_create(H5T_NATIVE_UINT8), H5Tclose);
  std::vector<hvl_t> buf(n);
  if (H5Dread(s.data, vtype.id, mspace.id, fspace.id, dxpl_, buf.data()) < 0) fail(rows[0]);
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
  // Raw rows go straight to their place in out.bytes (the first request of a repeated id).
  const std::size_t n = ids.size();
  out.ids = ids;
  out.labels.resize(n);
  if (!vlen_) {
    out.bytes.resize(n * row_bytes_);
    out.offsets.resize(n + 1);
    for (std::size_t j = 0; j <= n; ++j) out.offsets[j] = static_cast<int64_t>(j) * row_bytes_;
  }
  staging_.clear();
  pieces_.clear();
  std::vector<int64_t> first_of(items.size());  // items[k] -> the item holding its row's bytes
  std::vector<int64_t> piece_of(items.size());  // vlen: items[k] -> pieces_ index
  std::vector<int64_t> rows;
  std::vector<uint8_t*> dest;
  std::size_t k = 0;
  std::string read_error;
  for (std::size_t s = 0; s < nshards; ++s) {
    if (!needs[s]) continue;
    rows.clear();
    dest.clear();
    for (; k < items.size() && items[k].shard == static_cast<int64_t>(s); ++k) {
      if (rows.empty() || rows.back() != items[k].row) {
        rows.push_back(items[k].row);
        dest.push_back(vlen_ ? nullptr : out.bytes.data() + items[k].pos * row_bytes_);
        first_of[k] = static_cast<int64_t>(k);
      } else {
        first_of[k] = first_of[k - 1];
      }
      piece_of[k] = static_cast<int64_t>(pieces_.size() + rows.size() - 1);
    }
    // After a failure, keep taking part in the collective reads with nothing selected.
    if (!read_error.empty()) rows.clear(), dest.clear();
    try {
      read_rows(shards_[s], rows, dest);
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

  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    out.labels[it.pos] = shards_[it.shard].labels[it.row];
  }
  if (!vlen_) {
    // Repeated ids: copy the bytes read for their first request.
    for (std::size_t i = 0; i < items.size(); ++i)
      if (first_of[i] != static_cast<int64_t>(i))
        std::memcpy(out.bytes.data() + items[i].pos * row_bytes_,
                    out.bytes.data() + items[first_of[i]].pos * row_bytes_, row_bytes_);
    return;
  }
  int64_t sum = 0;
  for (const auto& p : pieces_) sum += p.second;
  bytes_read_ += sum;
  // Variable-length rows: assemble in request order from staging_.
  std::vector<int64_t> where(n, -1);
  for (std::size_t i = 0; i < items.size(); ++i) where[items[i].pos] = static_cast<int64_t>(i);
  out.offsets.resize(n + 1);
  out.offsets[0] = 0;
  for (std::size_t j = 0; j < n; ++j) out.offsets[j + 1] = out.offsets[j] + pieces_[piece_of[where[j]]].second;
  out.bytes.resize(out.offsets[n]);
  for (std::size_t j = 0; j < n; ++j) {
    const auto& p = pieces_[piece_of[where[j]]];
    if (p.second) std::memcpy(out.bytes.data() + out.offsets[j], staging_.data() + p.first, p.second);
  }
}

}  // namespace

std::unique_ptr<SampleReader> make_mpiio_reader(const SplitInfo& split, const LoaderOptions& options,
                                                const comm::Communicator& comm, bool collective) {
  return std::make_unique<MpiioReader>(split, options, comm::mpi_comm(comm), collective);
}

}  // namespace scaletrain::data
