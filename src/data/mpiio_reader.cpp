// MPI-IO sample readers (--io mpiio, --io mpiio-collective; docs/io-modes.md). Shards are opened
// through HDF5's MPI-IO driver; HDF5 gives the file offset of every chunk (looked up once) and the
// labels, and each read() groups the requested samples per shard and reads each shard's distinct
// rows, as runs cut at chunk borders, straight into the output through HDF5's own MPI-IO handle.
// JPEG samples (format 2) are byte ranges of the flat `jpeg` dataset, located with the offsets
// open_split read: a run of consecutive samples is one range of the file, read the same way.
// (HDF5 1.10 walks a union of row hyperslabs element by element of the last dimension: ~30 MB/s
// for RGB images. It still reads compressed or oddly chunked datasets, independently, one
// hyperslab per run.)
//
// mpiio: every rank opens shards on its own (a private duplicate of MPI_COMM_SELF), lazily, and
// reads one piece at a time: no collective contract, any number of read() calls.
// mpiio-collective: all ranks open every shard together at construction (a private duplicate of
// the world, so that our collectives never meet the gradient all-reduce's or the main thread's)
// and read each needed shard with one MPI_File_read_at_all over an hindexed view, so that MPI-IO
// can aggregate the ranks' requests. Every read() is collective: the ranks first agree (one small
// allreduce) on errors and on which shards anyone needs, then read those shards in order, a rank
// with nothing there reading nothing; errors met while reading are agreed on at the end.
// Evaluation (!drop_last: step counts differ by rank) falls back to the independent mode.
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
  hid_t data = -1;  // `images` (raw) or `jpeg` (flat bytes)
  Shape dims;       // of `data`
  std::vector<int32_t> labels;
  std::shared_ptr<const std::vector<int64_t>> jpeg_offsets;  // JPEG: samples + 1 offsets into `jpeg`
  // Direct path (uncompressed, contiguous or chunked in whole rows of `data`): the file offset of
  // every chunk, read through HDF5's own MPI-IO handle.
  bool direct = false;
  MPI_File fh = MPI_FILE_NULL;
  int64_t chunk_rows = 0;             // rows of `data` per chunk (all rows when contiguous)
  std::vector<int64_t> chunk_offset;  // per chunk, in row order
};

// One requested sample: where it lives and where it goes.
struct Item {
  int64_t shard, row, pos;
};

// The stored bytes of one distinct sample of a shard: rows [first, first + count) of the shard's
// `data` (raw: the sample's row; JPEG: its byte range of `jpeg`), to be placed at dest.
struct Extent {
  int64_t first, count, row;  // row: the sample's row in the shard, for messages
  uint8_t* dest;
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
  // The direct path: the extents' bytes straight from the file, one collective
  // MPI_File_read_at_all over an hindexed file view (collective mode) or one MPI_File_read_at per
  // piece (a piece: a range of the file that is also one range of the output).
  void read_direct(Shard& s, const std::vector<Extent>& extents);
  // Collective mode: every rank passes its own error ("" when fine) and its needs[] per shard; on
  // return needs[s] says whether any rank needs shard s. If any rank failed, every rank throws
  // the lowest failing rank's message.
  void agree(const std::string& error, std::vector<int>& needs);
  // Reads `extents` (increasing, disjoint) of shard s to their destinations. extents may be
  // empty (a collective read that selects nothing).
  void read_extents(Shard& s, const std::vector<Extent>& extents);
  // The stored size of sample `row` of shard s.
  int64_t sample_bytes(const Shard& s, int64_t row) const {
    return jpeg_ ? (*s.jpeg_offsets)[row + 1] - (*s.jpeg_offsets)[row] : row_bytes_;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool collective_ = false;
  bool jpeg_ = false;
  int64_t row_bytes_ = 0;   // raw: H * W * C
  int64_t unit_bytes_ = 0;  // bytes per row of a shard's `data`: row_bytes_ (raw) or 1 (JPEG)
  std::vector<Shard> shards_;
  std::vector<int64_t> shard_begin_;  // first split-wide id of each shard, plus the total
  hid_t dxpl_ = -1;
  MPI_Info info_ = MPI_INFO_NULL;  // hints for MPI_File_open
  std::vector<uint8_t> staging_;   // reads through HDF5
  std::atomic<int64_t> bytes_read_{0};
  bool aggregate_ = false;        // collective MPI-IO reads (false: each rank reads its own pieces)
  bool failed_together_ = false;  // an agreed error: every rank unwinds, closing stays collective
};

MpiioReader::MpiioReader(const SplitInfo& split, const LoaderOptions& options, MPI_Comm world, bool collective) {
  ST_CHECK(split.encoding == "raw" || split.encoding == "jpeg",
           split.dir << ": encoding '" << split.encoding << "' cannot be read with --io " << options.io);
  jpeg_ = split.encoding == "jpeg";
  if (jpeg_) require_jpeg_offsets(split);
  row_bytes_ = int64_t(split.height) * split.width * split.channels;
  unit_bytes_ = jpeg_ ? 1 : row_bytes_;
  // Collective reads need the same number of read() calls on every rank: only training plans
  // (drop_last) guarantee that.
  collective_ = collective && options.drop_last;
  static std::atomic<bool> said_fallback{false};
  if (collective && !collective_ && !said_fallback.exchange(true))
    log_info("--io mpiio-collective: evaluation ranks may run different numbers of steps; reading " + split.dir +
             " with independent MPI-IO (--io mpiio)");

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
    sh.jpeg_offsets = s.jpeg_offsets;
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
  // (not one all ranks agreed on, here or by comm::on_rank0_agreed) is on its way to MPI_Abort: it
  // must not wait for the others.
  if (collective_ && std::uncaught_exceptions() > 0 && !failed_together_ && !agreed_error_thrown()) return;
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
  const char* name = jpeg_ ? "jpeg" : "images";
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
  // A JPEG shard's `jpeg` holds bytes, not samples: its length is the offsets' end.
  const int64_t expected = jpeg_ ? s.jpeg_offsets->back() : s.samples;
  ST_CHECK(s.dims[0] == expected && (!jpeg_ || s.dims.size() == 1), s.path << ": '" << name << "' has " << s.dims[0]
                                                                           << " rows, expected " << expected
                                                                           << " (changed since the split was opened?)");
  if (!jpeg_) {
    int64_t row = 1;
    for (std::size_t i = 1; i < s.dims.size(); ++i) row *= s.dims[i];
    ST_CHECK(row == row_bytes_, s.path << ": images of " << row << " bytes, expected " << row_bytes_
                                       << " (changed since the split was opened?)");
  }
  if (s.samples > 0) find_chunks(s, file, data);
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
    s.chunk_rows = s.dims[0];
    s.chunk_offset.assign(1, static_cast<int64_t>(at));
  } else if (layout == H5D_CHUNKED) {
    const std::size_t nd = s.dims.size();
    std::vector<hsize_t> chunk(nd);
    if (H5Pget_chunk(dcpl.id, static_cast<int>(nd), chunk.data()) != static_cast<int>(nd)) return;
    for (std::size_t i = 1; i < nd; ++i)
      if (static_cast<int64_t>(chunk[i]) != s.dims[i]) return;  // chunks must hold whole rows
    s.chunk_rows = static_cast<int64_t>(chunk[0]);
    const int64_t nchunks = (s.dims[0] + s.chunk_rows - 1) / s.chunk_rows;
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

void MpiioReader::read_direct(Shard& s, const std::vector<Extent>& extents) {
  // Pieces: each extent cut at chunk borders; neighbours that are one range of the file and of
  // the output are merged (a run of consecutive samples, sorted, is one piece per chunk or less).
  struct Piece {
    int64_t offset, length, row;
    uint8_t* dest;
  };
  constexpr int64_t kMaxPiece = int64_t(1) << 30;  // MPI counts are int
  std::vector<Piece> pieces;
  int64_t total = 0;
  for (const Extent& e : extents) {
    int64_t first = e.first, count = e.count;
    uint8_t* dest = e.dest;
    while (count > 0) {
      const int64_t c = first / s.chunk_rows, within = first - c * s.chunk_rows;
      const int64_t n = std::min(count, s.chunk_rows - within);
      const int64_t offset = s.chunk_offset[c] + within * unit_bytes_, length = n * unit_bytes_;
      Piece* last = pieces.empty() ? nullptr : &pieces.back();
      if (last && last->offset + last->length == offset && last->dest + last->length == dest &&
          last->length + length <= kMaxPiece)
        last->length += length;
      else
        pieces.push_back({offset, length, e.row, dest});
      first += n;
      count -= n;
      dest += length;
      total += length;
    }
  }
  // MPI-IO file views need increasing offsets; the memory type follows the same order.
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  const int64_t n = static_cast<int64_t>(extents.size());
  auto fail = [&](const char* what, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    ST_THROW(s.path << ": " << what << " of " << n << " samples (from row " << (n ? extents[0].row : -1)
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

void MpiioReader::read_extents(Shard& s, const std::vector<Extent>& extents) {
  Lock lock(io::h5_mutex());
  if (s.direct) {
    read_direct(s, extents);
    return;
  }
  // Through HDF5 (compressed or oddly chunked data): one regular hyperslab per run of adjacent
  // extents, into staging_, then to the destinations. HDF5 1.10 walks an irregular (union)
  // selection element by element of the last dimension, far too slowly for images.
  const std::size_t nd = s.dims.size();
  const std::size_t n = extents.size();
  std::vector<hsize_t> start(nd, 0), count(s.dims.begin(), s.dims.end());
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && extents[j].first == extents[j - 1].first + extents[j - 1].count) ++j;
    start[0] = extents[i].first;
    count[0] = extents[j - 1].first + extents[j - 1].count - extents[i].first;
    const hsize_t mem_n = count[0] * unit_bytes_;
    staging_.resize(mem_n);
    Id fspace(H5Dget_space(s.data), H5Sclose);
    Id mspace(H5Screate_simple(1, &mem_n, nullptr), H5Sclose);
    if (fspace.id < 0 || mspace.id < 0 ||
        H5Sselect_hyperslab(fspace.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Dread(s.data, H5T_NATIVE_UINT8, mspace.id, fspace.id, H5P_DEFAULT, staging_.data()) < 0)
      ST_THROW(s.path << ": cannot read row " << extents[i].row << ": " << io::h5_error_text());
    for (std::size_t k = i; k < j; ++k)
      std::memcpy(extents[k].dest, staging_.data() + (extents[k].first - extents[i].first) * unit_bytes_,
                  extents[k].count * unit_bytes_);
    i = j;
  }
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

  // Every sample's size is known (raw: the image size; JPEG: the offsets), so each distinct
  // sample is read straight into its place in out.bytes (the first request of a repeated id).
  const std::size_t n = ids.size();
  out.ids = ids;
  out.labels.resize(n);
  std::vector<int64_t> size(n, 0);
  for (const Item& it : items) size[it.pos] = sample_bytes(shards_[it.shard], it.row);
  out.offsets.resize(n + 1);
  out.offsets[0] = 0;
  for (std::size_t j = 0; j < n; ++j) out.offsets[j + 1] = out.offsets[j] + size[j];
  out.bytes.resize(out.offsets[n]);

  // Read each needed shard's distinct samples; collective mode reads every shard that any rank
  // needs.
  std::vector<int64_t> first_of(items.size());  // items[k] -> the item holding its sample's bytes
  std::vector<Extent> extents;
  std::size_t k = 0;
  std::string read_error;
  for (std::size_t s = 0; s < nshards; ++s) {
    if (!needs[s]) continue;
    extents.clear();
    int64_t bytes = 0;
    for (; k < items.size() && items[k].shard == static_cast<int64_t>(s); ++k) {
      const Item& it = items[k];
      if (extents.empty() || extents.back().row != it.row) {
        const int64_t first = jpeg_ ? (*shards_[s].jpeg_offsets)[it.row] : it.row;
        const int64_t count = jpeg_ ? size[it.pos] : 1;
        extents.push_back({first, count, it.row, out.bytes.data() + out.offsets[it.pos]});
        bytes += size[it.pos] + 4;  // with its label (read once, up front)
        first_of[k] = static_cast<int64_t>(k);
      } else {
        first_of[k] = first_of[k - 1];
      }
    }
    // After a failure, keep taking part in the collective reads with nothing selected.
    if (!read_error.empty()) extents.clear(), bytes = 0;
    try {
      read_extents(shards_[s], extents);
      bytes_read_ += bytes;
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
    // Repeated ids: copy the bytes read for their first request.
    if (first_of[i] != static_cast<int64_t>(i))
      std::memcpy(out.bytes.data() + out.offsets[it.pos], out.bytes.data() + out.offsets[items[first_of[i]].pos],
                  size[it.pos]);
  }
}

}  // namespace

std::unique_ptr<SampleReader> make_mpiio_reader(const SplitInfo& split, const LoaderOptions& options,
                                                const comm::Communicator& comm, bool collective) {
  return std::make_unique<MpiioReader>(split, options, comm::mpi_comm(comm), collective);
}

}  // namespace scaletrain::data
