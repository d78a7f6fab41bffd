// The mmap SampleReader (--io mmap): shards are mapped read-only and read() returns the samples'
// addresses in the mappings, so the I/O thread does no copying at all and the decode
// workers copy each sample out of the page cache straight into its batch slot (fused with the
// crop and flip). Compared with posix's pread into a staging buffer and a second copy into the
// batch, that is one pass over the bytes instead of two, and a memcpy in user space instead of a
// system call per run. Row addresses come from the HDF5 fast path's chunk table
// (io::H5Dataset::row_offset), so this needs uncompressed shards chunked along rows, as the
// converters write them; anything else is refused with a message that names the file. JPEG
// shards (format 2) work the same way: sample i is bytes [o[i], o[i + 1]) of the flat `jpeg`
// dataset, which must lie in one range of the file (contiguous, as scaletrain-data writes it), so
// that every sample is one pointer.
//
// Pages are mapped (and, from a cold page cache, read, with the kernel's read-ahead) by the
// workers' copies as they touch them. Faulting them in ahead on the I/O thread with
// madvise(MADV_POPULATE_READ) was tried: it was slower both from the page cache and from disk
// (one thread doing all the faulting, without read-ahead), so the reader does not.
#include <algorithm>
#include <atomic>

#include "data/open_once.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/io/mapped_file.hpp"

namespace scaletrain::data {
namespace {

class MmapReader : public SampleReader {
 public:
  MmapReader(const SplitInfo& split, const LoaderOptions&) : split_(split), jpeg_(split.encoding == "jpeg") {
    ST_CHECK(split.encoding == "raw" || jpeg_,
             split.dir << ": the mmap reader maps raw or jpeg shards, not '" << split.encoding << "' ones");
    if (jpeg_) require_jpeg_offsets(split);
    shard_begin_ = shard_starts(split);
    row_bytes_ = int64_t(split.height) * split.width * split.channels;
  }

  std::string name() const override { return "mmap"; }
  int64_t bytes_read() const override { return bytes_read_.load(); }

  void read(const std::vector<int64_t>& ids, SampleBytes& out) override {
    open_once_([this] { open(); });
    const std::size_t n = ids.size();
    out.ids = ids;
    out.labels.resize(n);
    out.bytes.clear();
    out.mapped.resize(n);
    out.offsets.resize(n + 1);
    out.offsets[0] = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const int64_t id = ids[k];
      const int64_t s = shard_of(split_, shard_begin_, id);
      const int64_t row = id - shard_begin_[s];
      const Shard& shard = shards_[s];
      if (!jpeg_) {
        out.mapped[k] = shard.map.data() + shard.images.row_offset(row);
        out.offsets[k + 1] = out.offsets[k] + row_bytes_;
      } else {
        const std::vector<int64_t>& o = *split_.shards[s].jpeg_offsets;
        out.mapped[k] = shard.map.data() + shard.images.row_offset(o[row]);
        out.offsets[k + 1] = out.offsets[k] + (o[row + 1] - o[row]);
      }
      out.labels[k] = shard.labels[row];
    }
    // Counted as read when handed over; the copy out of the page cache happens in the decoders.
    bytes_read_ += out.offsets[n] + static_cast<int64_t>(n) * 4;
  }

 private:
  struct Shard {
    io::H5Dataset images;  // `images`, or the flat `jpeg` bytes
    std::vector<int32_t> labels;
    io::MappedFile map;
  };

  void open() {
    std::vector<Shard> shards;
    for (const auto& s : split_.shards) {
      Shard shard;
      {
        io::H5File file(s.path, io::H5File::Mode::read);
        const char* name = jpeg_ ? "jpeg" : "images";
        shard.images = io::H5Dataset(file, name);
        io::H5Dataset labels(file, "labels");
        // A JPEG shard's `jpeg` holds bytes, not samples: its length is the offsets' end.
        const int64_t expected = jpeg_ ? s.jpeg_offsets->back() : s.samples;
        ST_CHECK(shard.images.rows() == expected && labels.rows() == s.samples,
                 s.path << ": changed since the split was opened (" << labels.rows() << " samples and "
                        << shard.images.rows() << " rows of '" << name << "', expected " << s.samples << " and "
                        << expected << ")");
        ST_CHECK(jpeg_ || shard.images.row_elements() == row_bytes_,
                 s.path << ": changed since the split was opened (image size)");
        if (s.samples == 0) {  // nothing to map (the format allows empty shards)
          shards.push_back(std::move(shard));
          continue;
        }
        if (!jpeg_)
          ST_CHECK(shard.images.direct(DType::u8),
                   s.path << ": --io mmap needs uncompressed uint8 'images' chunked along rows (as scaletrain-data "
                             "writes them); read this dataset with --io posix");
        else
          ST_CHECK(shard.images.direct(DType::u8) && shard.images.file_contiguous(),
                   s.path << ": --io mmap needs the 'jpeg' bytes uncompressed in one range of the file (contiguous, "
                             "as scaletrain-data writes them, e.g. with 'scaletrain-data upgrade'); read this "
                             "dataset with --io posix");
        shard.labels.resize(s.samples);
        labels.read_rows(0, s.samples, DType::i32, shard.labels.data());
      }
      shard.map = io::MappedFile(s.path);
      ST_CHECK(shard.map.size() >= shard.images.data_end(),
               s.path << ": truncated: " << shard.map.size() << " bytes, but its '" << shard.images.name()
                      << "' data ends at byte " << shard.images.data_end());
      shards.push_back(std::move(shard));
    }
    shards_ = std::move(shards);
  }

  SplitInfo split_;
  bool jpeg_;
  int64_t row_bytes_ = 0;
  std::vector<int64_t> shard_begin_;  // first sample id of each shard, plus the total
  std::vector<Shard> shards_;
  OpenOnce open_once_;
  std::atomic<int64_t> bytes_read_{0};
};

}  // namespace

std::unique_ptr<SampleReader> make_mmap_reader(const SplitInfo& split, const LoaderOptions& options) {
  return std::make_unique<MmapReader>(split, options);
}

}  // namespace scaletrain::data
