// The posix SampleReader: every rank opens the shards itself (HDF5, read-only) and reads only the
// rows it needs. Raw rows take io::H5Dataset's pread fast path straight into the caller's buffer
// (no staging copy; one pread per run of consecutive rows within a chunk, and no HDF5 lock);
// JPEG rows are variable-length and go through HDF5 (H5Dread into hvl_t, then reclaimed) under
// io::h5_mutex. Labels (4 bytes a sample) are read whole when the shards are opened.
#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "data/open_once.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace {

class PosixReader : public SampleReader {
 public:
  PosixReader(const SplitInfo& split, const LoaderOptions&) : split_(split), jpeg_(split.encoding == "jpeg") {
    ST_CHECK(split.encoding == "raw" || jpeg_,
             split.dir << ": unknown image encoding '" << split.encoding << "' (expected raw or jpeg)");
    shard_begin_ = shard_starts(split);
    row_bytes_ = int64_t(split.height) * split.width * split.channels;
  }

  std::string name() const override { return "posix"; }
  int64_t bytes_read() const override { return bytes_read_.load(); }

  void read(const std::vector<int64_t>& ids, SampleBytes& out) override {
    open_once_([this] { open(); });
    const int64_t n = static_cast<int64_t>(ids.size());
    out.mapped.clear();
    out.ids = ids;
    out.labels.resize(n);
    out.offsets.resize(n + 1);
    // Not cleared: a reused buffer of the same size is not zero-filled again.
    if (!jpeg_)
      out.bytes.resize(n * row_bytes_);
    else
      out.bytes.clear();
    out.offsets[0] = 0;
    // Groups of ids in one shard with increasing rows: one read_row_list (or H5Dread pass) each.
    for (int64_t i = 0; i < n;) {
      const int64_t s = shard_of(ids[i]);
      rows_.assign(1, ids[i] - shard_begin_[s]);
      int64_t j = i + 1;
      while (j < n && ids[j] > ids[j - 1] && ids[j] < shard_begin_[s + 1]) rows_.push_back(ids[j++] - shard_begin_[s]);
      for (int64_t k = i; k < j; ++k) out.labels[k] = labels_[s][rows_[k - i]];
      bytes_read_ += (j - i) * 4;  // counted as read with the sample (read once, up front)
      try {
        if (!jpeg_) {
          data_[s].read_row_list(rows_, DType::u8, out.bytes.data() + i * row_bytes_);
          for (int64_t k = i; k < j; ++k) out.offsets[k + 1] = (k + 1) * row_bytes_;
          bytes_read_ += (j - i) * row_bytes_;
        } else {
          read_jpeg_rows(s, i, out);
        }
      } catch (const std::exception& e) {
        ST_THROW(split_.shards[s].path << ": cannot read sample " << ids[i] << " (row " << rows_[0] << ")"
                                       << (j - i > 1 ? " or one of the " + std::to_string(j - i - 1) + " after it" : "")
                                       << ": " << e.what());
      }
      i = j;
    }
  }

 private:
  int64_t shard_of(int64_t id) const { return data::shard_of(split_, shard_begin_, id); }

  // All shards or none: the members are filled only once every shard has opened.
  void open() {
    const char* name = jpeg_ ? "jpeg" : "images";
    std::vector<io::H5File> files;
    std::vector<io::H5Dataset> data;
    std::vector<io::H5Handle> jpeg_ds;
    std::vector<std::vector<int32_t>> labels_of;
    for (const auto& s : split_.shards) {
      files.emplace_back(s.path, io::H5File::Mode::read);
      data.emplace_back(files.back(), name);
      io::H5Dataset labels(files.back(), "labels");
      ST_CHECK(data.back().rows() == s.samples && labels.rows() == s.samples,
               s.path << ": changed since the split was opened (" << data.back().rows() << " samples, expected "
                      << s.samples << ")");
      ST_CHECK(jpeg_ || data.back().row_elements() == row_bytes_,
               s.path << ": changed since the split was opened (image size)");
      labels_of.emplace_back(s.samples);
      labels.read_rows(0, s.samples, DType::i32, labels_of.back().data());
      if (jpeg_) {
        std::lock_guard<std::recursive_mutex> lock(io::h5_mutex());
        jpeg_ds.emplace_back(ST_CHECK_H5(H5Dopen2(files.back().id(), "jpeg", H5P_DEFAULT)),
                             io::H5Handle::Kind::dataset);
      }
    }
    files_ = std::move(files);
    data_ = std::move(data);
    jpeg_ds_ = std::move(jpeg_ds);
    labels_ = std::move(labels_of);
  }

  // rows_ (increasing, of shard s) -> appended to out.bytes, offsets from position `first`.
  void read_jpeg_rows(int64_t s, int64_t first, SampleBytes& out) {
    std::lock_guard<std::recursive_mutex> lock(io::h5_mutex());
    const int64_t n = static_cast<int64_t>(rows_.size());
    io::H5Handle memtype(ST_CHECK_H5(H5Tvlen_create(H5T_NATIVE_UINT8)), io::H5Handle::Kind::datatype);
    io::H5Handle fspace(ST_CHECK_H5(H5Dget_space(jpeg_ds_[s].id())), io::H5Handle::Kind::dataspace);
    // One hyperslab per run of consecutive rows, OR-ed: one H5Dread for the whole group.
    ST_CHECK_H5(H5Sselect_none(fspace.id()));
    for (int64_t i = 0; i < n;) {
      int64_t j = i + 1;
      while (j < n && rows_[j] == rows_[j - 1] + 1) ++j;
      const hsize_t start = static_cast<hsize_t>(rows_[i]), count = static_cast<hsize_t>(j - i);
      ST_CHECK_H5(H5Sselect_hyperslab(fspace.id(), H5S_SELECT_OR, &start, nullptr, &count, nullptr));
      i = j;
    }
    const hsize_t mcount = static_cast<hsize_t>(n);
    io::H5Handle mspace(ST_CHECK_H5(H5Screate_simple(1, &mcount, nullptr)), io::H5Handle::Kind::dataspace);
    vlen_.assign(n, hvl_t{0, nullptr});
    ST_CHECK_H5(H5Dread(jpeg_ds_[s].id(), memtype.id(), mspace.id(), fspace.id(), H5P_DEFAULT, vlen_.data()));
    int64_t total = 0;
    for (const hvl_t& v : vlen_) total += static_cast<int64_t>(v.len);
    const std::size_t at = out.bytes.size();
    out.bytes.resize(at + total);
    uint8_t* dst = out.bytes.data() + at;
    for (int64_t k = 0; k < n; ++k) {
      if (vlen_[k].len > 0) std::copy_n(static_cast<const uint8_t*>(vlen_[k].p), vlen_[k].len, dst);
      dst += vlen_[k].len;
      out.offsets[first + k + 1] = out.offsets[first + k] + static_cast<int64_t>(vlen_[k].len);
    }
    H5Dvlen_reclaim(memtype.id(), mspace.id(), H5P_DEFAULT, vlen_.data());
    bytes_read_ += total;
  }

  SplitInfo split_;
  bool jpeg_;
  int64_t row_bytes_ = 0;
  std::vector<int64_t> shard_begin_;  // first sample id of each shard, plus the total
  std::vector<io::H5File> files_;
  std::vector<io::H5Dataset> data_;
  std::vector<io::H5Handle> jpeg_ds_;
  std::vector<std::vector<int32_t>> labels_;
  std::vector<int64_t> rows_;
  std::vector<hvl_t> vlen_;
  OpenOnce open_once_;
  std::atomic<int64_t> bytes_read_{0};
};

}  // namespace

std::unique_ptr<SampleReader> make_posix_reader(const SplitInfo& split, const LoaderOptions& options) {
  return std::make_unique<PosixReader>(split, options);
}

}  // namespace scaletrain::data
