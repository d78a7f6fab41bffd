// The posix SampleReader: every rank opens the shards itself (HDF5, read-only) and reads only the
// rows it needs, through io::H5Dataset's pread fast path straight into the caller's buffer (no
// staging copy, no HDF5 lock): raw rows one pread per run of consecutive rows within a chunk;
// JPEG samples (format 2) as byte ranges of the flat `jpeg` dataset, one range per run of
// consecutive samples, located with the offsets open_split read (no HDF5 call per sample).
// Datasets the fast path cannot serve (compressed, or chunked across rows) are read through HDF5,
// one hyperslab per run, under io::h5_mutex. Labels (4 bytes a sample) are read whole when the
// shards are opened.
#include <algorithm>
#include <atomic>

#include "data/open_once.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace {

class PosixReader : public SampleReader {
 public:
  PosixReader(const SplitInfo& split, const LoaderOptions&) : split_(split), jpeg_(split.encoding == "jpeg") {
    ST_CHECK(split.encoding == "raw" || jpeg_,
             split.dir << ": unknown image encoding '" << split.encoding << "' (expected raw or jpeg)");
    if (jpeg_) require_jpeg_offsets(split);
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
    // Every sample's size is known up front (raw: the image size; JPEG: from the offsets), so
    // each sample is read straight into its place. Not cleared: a reused buffer of the same size
    // is not zero-filled again.
    out.offsets.resize(n + 1);
    out.offsets[0] = 0;
    for (int64_t k = 0; k < n; ++k) out.offsets[k + 1] = out.offsets[k] + sample_bytes(ids[k]);
    out.bytes.resize(out.offsets[n]);
    // Groups of ids in one shard with increasing rows: one pass over the shard each.
    for (int64_t i = 0; i < n;) {
      const int64_t s = shard_of(ids[i]);
      rows_.assign(1, ids[i] - shard_begin_[s]);
      int64_t j = i + 1;
      while (j < n && ids[j] > ids[j - 1] && ids[j] < shard_begin_[s + 1]) rows_.push_back(ids[j++] - shard_begin_[s]);
      for (int64_t k = i; k < j; ++k) out.labels[k] = labels_[s][rows_[k - i]];
      bytes_read_ += (j - i) * 4;  // counted as read with the sample (read once, up front)
      try {
        const progress::BusyScope busy({"reading", &split_.shards[s].path, ids[i], rows_[0], j - i - 1});
        if (!jpeg_)
          data_[s].read_row_list(rows_, DType::u8, out.bytes.data() + out.offsets[i]);
        else
          read_jpeg_runs(s, out.bytes.data() + out.offsets[i]);
        bytes_read_ += out.offsets[j] - out.offsets[i];
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

  int64_t sample_bytes(int64_t id) const {
    if (!jpeg_) return row_bytes_;
    const int64_t s = shard_of(id), row = id - shard_begin_[s];
    const std::vector<int64_t>& o = *split_.shards[s].jpeg_offsets;
    return o[row + 1] - o[row];
  }

  // All shards or none: the members are filled only once every shard has opened.
  void open() {
    const char* name = jpeg_ ? "jpeg" : "images";
    std::vector<io::H5File> files;
    std::vector<io::H5Dataset> data;
    std::vector<std::vector<int32_t>> labels_of;
    for (const auto& s : split_.shards) {
      files.emplace_back(s.path, io::H5File::Mode::read);
      data.emplace_back(files.back(), name);
      io::H5Dataset labels(files.back(), "labels");
      // A JPEG shard's `jpeg` holds bytes, not samples: its length is the offsets' end.
      const int64_t expected = jpeg_ ? s.jpeg_offsets->back() : s.samples;
      ST_CHECK(data.back().rows() == expected && labels.rows() == s.samples,
               s.path << ": changed since the split was opened (" << labels.rows() << " samples and "
                      << data.back().rows() << " rows of '" << name << "', expected " << s.samples << " and "
                      << expected << ")");
      ST_CHECK(jpeg_ || data.back().row_elements() == row_bytes_,
               s.path << ": changed since the split was opened (image size)");
      labels_of.emplace_back(s.samples);
      labels.read_rows(0, s.samples, DType::i32, labels_of.back().data());
    }
    files_ = std::move(files);
    data_ = std::move(data);
    labels_ = std::move(labels_of);
  }

  // rows_ (increasing, of shard s) -> their JPEG bytes packed at dst: one byte range of `jpeg`
  // per run of consecutive rows.
  void read_jpeg_runs(int64_t s, uint8_t* dst) {
    const std::vector<int64_t>& o = *split_.shards[s].jpeg_offsets;
    const int64_t n = static_cast<int64_t>(rows_.size());
    for (int64_t i = 0; i < n;) {
      int64_t j = i + 1;
      while (j < n && rows_[j] == rows_[j - 1] + 1) ++j;
      const int64_t begin = o[rows_[i]], end = o[rows_[j - 1] + 1];
      data_[s].read_rows(begin, end - begin, DType::u8, dst);
      dst += end - begin;
      i = j;
    }
  }

  SplitInfo split_;
  bool jpeg_;
  int64_t row_bytes_ = 0;
  std::vector<int64_t> shard_begin_;  // first sample id of each shard, plus the total
  std::vector<io::H5File> files_;
  std::vector<io::H5Dataset> data_;
  std::vector<std::vector<int32_t>> labels_;
  std::vector<int64_t> rows_;
  OpenOnce open_once_;
  std::atomic<int64_t> bytes_read_{0};
};

}  // namespace

std::unique_ptr<SampleReader> make_posix_reader(const SplitInfo& split, const LoaderOptions& options) {
  return std::make_unique<PosixReader>(split, options);
}

}  // namespace scaletrain::data
