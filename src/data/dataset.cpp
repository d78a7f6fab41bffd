// Dataset format version 2: validation of a split (every rule of docs/dataset-format.md checked
// at open time, each error naming the file) and the shard writers.
#include "scaletrain/data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/staging.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<double>& v) {
  std::ostringstream os;
  os.precision(12);
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

// What one shard holds, after its own checks.
struct ShardHeader {
  std::string task;
  int64_t samples = 0;
  int height = 0, width = 0, channels = 0;
  int num_classes = 0;
  std::vector<double> mean, std;
  std::string encoding;
  std::shared_ptr<const std::vector<int64_t>> jpeg_offsets;  // JPEG shards
};

int64_t required_int(const io::H5File& f, const std::string& name) {
  ST_CHECK(f.has_attribute(name), f.path() << ": missing root attribute '" << name << "' (see docs/dataset-format.md)");
  return f.get_int_attribute(name);
}

std::vector<double> required_channel_array(const io::H5File& f, const std::string& name, int channels) {
  ST_CHECK(f.has_attribute(name), f.path() << ": missing root attribute '" << name << "' (a float array of length C)");
  std::vector<double> v = f.get_double_array_attribute(name);
  ST_CHECK(static_cast<int>(v.size()) == channels, f.path()
                                                       << ": attribute '" << name << "' has " << v.size()
                                                       << " values but the images have " << channels << " channels");
  for (double x : v)
    ST_CHECK(std::isfinite(x), f.path() << ": attribute '" << name << "' = " << join(v) << " is not finite");
  return v;
}

// Checks a dataset's presence, dtype and rank; returns its shape.
Shape required_dataset(const io::H5File& f, const std::string& name, const std::string& dtype, int rank,
                       const char* layout) {
  ST_CHECK(f.is_dataset(name), f.path() << ": missing dataset '" << name << "' (" << dtype << " " << layout << ")");
  const std::string type = f.dataset_type(name);
  ST_CHECK(type == dtype,
           f.path() << ": dataset '" << name << "' has dtype " << type << ", expected " << dtype << " " << layout);
  const Shape shape = f.dataset_shape(name);
  ST_CHECK(static_cast<int>(shape.size()) == rank,
           f.path() << ": dataset '" << name << "' has shape " << shape_string(shape) << ", expected " << layout);
  return shape;
}

// Format 1 stored JPEG bytes as variable-length data, which lives in HDF5's global heap: one
// damaged byte there crashed libhdf5 1.10 (H5HG_read) and a few hundred zeroed ones hung it. Such
// shards are refused before any of that data is touched, with the command that converts them.
void refuse_format1_jpeg(const std::string& path) {
  const fs::path dataset_dir = fs::path(path).parent_path().parent_path();
  ST_THROW(path << ": a JPEG shard of dataset format 1, whose 'jpeg' samples are variable-length data in HDF5's "
                   "global heap, which one damaged byte can make the HDF5 library crash or hang on; this build "
                   "reads format 2 (flat 'jpeg' bytes and 'jpeg_offsets'). Convert the dataset once with: "
                   "scaletrain-data upgrade "
                << dataset_dir.string() << " --output NEW_DIR (see docs/dataset-format.md)");
}

ShardHeader read_shard(const std::string& path) {
  io::H5File f(path, io::H5File::Mode::read);
  ShardHeader h;
  ST_CHECK(f.has_attribute("scaletrain_format"),
           path << ": missing root attribute 'scaletrain_format' (not a scaletrain dataset shard? see "
                   "docs/dataset-format.md)");
  const int64_t version = f.get_int_attribute("scaletrain_format");
  ST_CHECK(version >= kOldestRawFormatVersion && version <= kFormatVersion,
           path << ": dataset format version " << version << " is not supported (this build reads versions "
                << kOldestRawFormatVersion << " to " << kFormatVersion << ")");
  ST_CHECK(f.has_attribute("task"), path << ": missing root attribute 'task' (a string)");
  h.task = f.get_string_attribute("task");
  ST_CHECK(h.task == kTaskImageClassification,
           path << ": task '" << h.task << "' is not supported (supported: " << kTaskImageClassification << ")");

  const int64_t classes = required_int(f, "num_classes");
  ST_CHECK(classes > 0 && classes < (int64_t(1) << 31), path << ": num_classes = " << classes << " is not positive");
  h.num_classes = static_cast<int>(classes);

  // The encoding: `jpeg` (JPEG files' bytes) or `images` (raw pixels). The optional attribute
  // `encoding` must agree with the dataset present.
  const bool jpeg = f.is_dataset("jpeg");
  if (jpeg && (version < 2 || f.dataset_type("jpeg") == "vlen_uint8")) refuse_format1_jpeg(path);
  h.encoding = jpeg ? "jpeg" : "raw";
  if (f.has_attribute("encoding")) {
    const std::string e = f.get_string_attribute("encoding");
    ST_CHECK(e == "raw" || e == "jpeg", path << ": attribute 'encoding' = '" << e << "' is not supported (raw, jpeg)");
    ST_CHECK(e == h.encoding, path << ": attribute 'encoding' says '" << e << "' but the shard has dataset '"
                                   << (jpeg ? "jpeg" : "images") << "'");
  }
  const Shape labels = required_dataset(f, "labels", "int32", 1, "[N]");
  if (jpeg) {
    h.samples = labels[0];
    h.jpeg_offsets = std::make_shared<const std::vector<int64_t>>(read_jpeg_offsets(f, h.samples));
    const int64_t channels = f.has_attribute("channels") ? f.get_int_attribute("channels") : 3;
    ST_CHECK(channels == 3, path << ": attribute 'channels' = " << channels << " (JPEG datasets decode to RGB, 3)");
    h.channels = 3;
  } else {
    const Shape images = required_dataset(f, "images", "uint8", 4, "[N, H, W, C]");
    ST_CHECK(images[1] > 0 && images[2] > 0 && images[3] > 0,
             path << ": dataset 'images' has shape " << shape_string(images) << " with an empty image dimension");
    // Image sides and channels are ints downstream; larger than any image (or a damaged shape).
    ST_CHECK(images[1] <= kMaxImageSide && images[2] <= kMaxImageSide && images[3] <= kMaxChannels,
             path << ": dataset 'images' has shape " << shape_string(images) << ": images of at most " << kMaxImageSide
                  << "x" << kMaxImageSide << "x" << kMaxChannels << " (HxWxC) are read");
    ST_CHECK(images[0] == labels[0], path << ": 'images' has " << images[0] << " samples but 'labels' has " << labels[0]
                                          << " (the first dimension is the sample index)");
    h.samples = images[0];
    h.height = static_cast<int>(images[1]);
    h.width = static_cast<int>(images[2]);
    h.channels = static_cast<int>(images[3]);
  }

  h.mean = required_channel_array(f, "mean", h.channels);
  h.std = required_channel_array(f, "std", h.channels);
  for (double s : h.std) ST_CHECK(s > 0.0, path << ": attribute 'std' = " << join(h.std) << " has a value <= 0");

  if (h.samples > 0) {
    const Tensor l = f.read("labels", DType::i32);
    const int32_t* p = l.data<int32_t>();
    for (int64_t i = 0; i < h.samples; ++i)
      ST_CHECK(p[i] >= 0 && p[i] < h.num_classes,
               path << ": label " << p[i] << " of sample " << i << " is out of range [0, " << h.num_classes << ")");
  }
  return h;
}

}  // namespace

std::vector<int64_t> read_jpeg_offsets(const io::H5File& f, int64_t samples) {
  const std::string& path = f.path();
  const Shape bytes = required_dataset(f, "jpeg", "uint8", 1, "[total bytes] (format 2)");
  const Shape count = required_dataset(f, "jpeg_offsets", "int64", 1, "[N + 1]");
  ST_CHECK(count[0] == samples + 1, path << ": 'jpeg_offsets' has " << count[0] << " values but 'labels' has "
                                         << samples << " samples (expected N + 1 = " << samples + 1 << ")");
  const Tensor t = f.read("jpeg_offsets", DType::i64);
  const int64_t* o = t.data<int64_t>();
  ST_CHECK(o[0] == 0, path << ": 'jpeg_offsets'[0] is " << o[0] << ", expected 0");
  for (int64_t i = 0; i < samples; ++i)
    ST_CHECK(o[i + 1] > o[i], path << ": 'jpeg_offsets' is not increasing at sample " << i << " (" << o[i] << ", then "
                                   << o[i + 1] << "): every sample needs at least one byte");
  ST_CHECK(o[samples] == bytes[0],
           path << ": 'jpeg_offsets' ends at " << o[samples] << " but 'jpeg' has " << bytes[0] << " bytes");
  return std::vector<int64_t>(o, o + samples + 1);
}

void require_jpeg_offsets(const SplitInfo& split) {
  for (const ShardInfo& s : split.shards)
    ST_CHECK(s.jpeg_offsets && static_cast<int64_t>(s.jpeg_offsets->size()) == s.samples + 1,
             s.path << ": the JPEG sample offsets were not loaded (a split is opened with open_split)");
}

std::vector<std::string> list_splits(const std::string& dataset_dir) {
  std::error_code ec;
  ST_CHECK(fs::exists(dataset_dir, ec), "data directory " << dataset_dir << " does not exist");
  ST_CHECK(fs::is_directory(dataset_dir, ec), "data directory " << dataset_dir << " is not a directory");
  std::vector<std::string> splits;
  for (const auto& e : fs::directory_iterator(dataset_dir))
    if (e.is_directory()) splits.push_back(e.path().filename().string());
  std::sort(splits.begin(), splits.end());
  ST_CHECK(!splits.empty(), "data directory " << dataset_dir
                                              << " is empty: expected one sub-directory per split (train/, val/) "
                                                 "holding *.h5 shards (see docs/dataset-format.md)");
  return splits;
}

SplitInfo open_split(const std::string& dataset_dir, const std::string& split) {
  std::error_code ec;
  ST_CHECK(fs::exists(dataset_dir, ec), "data directory " << dataset_dir << " does not exist");
  ST_CHECK(fs::is_directory(dataset_dir, ec), "data directory " << dataset_dir << " is not a directory");
  ST_CHECK(!fs::is_empty(dataset_dir, ec), "data directory " << dataset_dir << " is empty: expected " << split
                                                             << "/ and the other splits, each holding *.h5 shards "
                                                                "(see docs/dataset-format.md)");
  SplitInfo info;
  info.dir = (fs::path(dataset_dir) / split).string();
  ST_CHECK(fs::is_directory(info.dir, ec),
           info.dir << ": no such split directory (a dataset has one sub-directory per split holding *.h5 shards)");
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(info.dir))
    if (e.path().extension() == ".h5" && !e.is_directory()) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  ST_CHECK(!paths.empty(), info.dir << ": no *.h5 shard files");
  // Sizes first: a shard cut short or still being copied never reaches HDF5.
  info.manifest = read_manifest(info.dir);
  if (info.manifest) check_manifest_sizes(*info.manifest, paths);
  info.unchecked_shards = unchecked_shards(paths, info.manifest);

  ShardHeader first;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    ShardHeader h = read_shard(paths[i]);
    if (i == 0) {
      first = h;
    } else {
      const std::string& p0 = paths[0];
      ST_CHECK(h.encoding == first.encoding, paths[i] << ": encoding '" << h.encoding << "' but " << p0 << " is '"
                                                      << first.encoding << "' (all shards of a split share it)");
      ST_CHECK(h.height == first.height && h.width == first.width && h.channels == first.channels,
               paths[i] << ": images are " << h.height << "x" << h.width << "x" << h.channels << " (HxWxC) but " << p0
                        << " has " << first.height << "x" << first.width << "x" << first.channels
                        << " (all shards of a split share H, W, C)");
      ST_CHECK(h.num_classes == first.num_classes,
               paths[i] << ": num_classes = " << h.num_classes << " but " << p0 << " has " << first.num_classes);
      ST_CHECK(h.mean == first.mean && h.std == first.std, paths[i] << ": mean/std " << join(h.mean) << "/"
                                                                    << join(h.std) << " differ from " << p0 << "'s "
                                                                    << join(first.mean) << "/" << join(first.std));
    }
    info.shards.push_back({paths[i], h.samples, h.jpeg_offsets});
    info.samples += h.samples;
  }
  ST_CHECK(info.samples > 0, info.dir << ": the shards hold no samples");
  info.task = first.task;
  info.height = first.height;
  info.width = first.width;
  info.channels = first.channels;
  info.num_classes = first.num_classes;
  info.mean = first.mean;
  info.std = first.std;
  info.encoding = first.encoding;
  return info;
}

std::string shard_file_name(int64_t index, int64_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05lld-of-%05lld.h5", static_cast<long long>(index),
                static_cast<long long>(count));
  return buf;
}

std::pair<int64_t, int64_t> shard_range(int64_t total, int64_t index, int64_t count) {
  ST_CHECK(count > 0 && index >= 0 && index < count, "shard " << index << " of " << count << " does not exist");
  return {total * index / count, total * (index + 1) / count};
}

namespace {

void check_shard_metadata(const std::string& path, const Tensor& labels, int64_t samples, int channels, int num_classes,
                          const std::vector<double>& mean, const std::vector<double>& std, int64_t chunk_samples) {
  ST_CHECK(labels.dtype() == DType::i32 && labels.ndim() == 1 && labels.dim(0) == samples,
           path << ": labels must be int32 [" << samples << "], got " << dtype_name(labels.dtype())
                << shape_string(labels.shape()));
  ST_CHECK(static_cast<int>(mean.size()) == channels && static_cast<int>(std.size()) == channels,
           path << ": mean and std need one value per channel (" << channels << ")");
  ST_CHECK(num_classes > 0, path << ": num_classes must be positive");
  ST_CHECK(chunk_samples > 0, path << ": chunk samples must be positive, got " << chunk_samples);
  const int32_t* l = labels.data<int32_t>();
  for (int64_t i = 0; i < labels.numel(); ++i)
    ST_CHECK(l[i] >= 0 && l[i] < num_classes,
             path << ": label " << l[i] << " of sample " << i << " is out of range [0, " << num_classes << ")");
}

void write_root_attributes(io::H5File& f, int num_classes, const std::vector<double>& mean,
                           const std::vector<double>& std) {
  f.set_attribute("scaletrain_format", int64_t(kFormatVersion));
  f.set_fixed_string_attribute("task", kTaskImageClassification);
  f.set_attribute("num_classes", int64_t(num_classes));
  f.set_attribute("mean", mean);
  f.set_attribute("std", std);
}

// Moves the finished `path.tmp` into place and stamps its checksum.
void finish_shard(const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  fs::rename(tmp, path, ec);
  ST_CHECK(!ec, path << ": cannot rename " << tmp << " into place: " << ec.message());
  stamp_shard_checksum(path);
}

}  // namespace

void write_image_shard(const std::string& path, const Tensor& images, const Tensor& labels, int num_classes,
                       const std::vector<double>& mean, const std::vector<double>& std, int64_t chunk_samples) {
  ST_CHECK(images.dtype() == DType::u8 && images.ndim() == 4, path << ": images must be uint8 [N, H, W, C], got "
                                                                   << dtype_name(images.dtype())
                                                                   << shape_string(images.shape()));
  check_shard_metadata(path, labels, images.dim(0), static_cast<int>(images.dim(3)), num_classes, mean, std,
                       chunk_samples);
  {
    io::H5File f(path + ".tmp", io::H5File::Mode::create_truncate);
    write_root_attributes(f, num_classes, mean, std);
    f.write("images", images, chunk_samples);
    f.write("labels", labels);
    f.close();
  }
  finish_shard(path);
}

void write_jpeg_shard(const std::string& path, const std::vector<std::vector<uint8_t>>& jpegs, const Tensor& labels,
                      int num_classes, const std::vector<double>& mean, const std::vector<double>& std) {
  const int64_t n = static_cast<int64_t>(jpegs.size());
  check_shard_metadata(path, labels, n, 3, num_classes, mean, std, kDefaultChunkSamples);
  Tensor offsets = Tensor::empty({n + 1}, DType::i64);
  int64_t* o = offsets.data<int64_t>();
  o[0] = 0;
  for (int64_t i = 0; i < n; ++i) {
    ST_CHECK(!jpegs[i].empty(), path << ": sample " << i << " has no JPEG bytes");
    o[i + 1] = o[i] + static_cast<int64_t>(jpegs[i].size());
  }
  Tensor bytes = Tensor::empty({o[n]}, DType::u8);
  for (int64_t i = 0; i < n; ++i) std::copy(jpegs[i].begin(), jpegs[i].end(), bytes.data<uint8_t>() + o[i]);
  {
    io::H5File f(path + ".tmp", io::H5File::Mode::create_truncate);
    write_root_attributes(f, num_classes, mean, std);
    f.set_fixed_string_attribute("encoding", "jpeg");
    f.set_attribute("channels", int64_t(3));
    f.write("jpeg", bytes);  // contiguous: one range per run of samples, one offset to look up
    f.write("jpeg_offsets", offsets);
    f.write("labels", labels);
    f.close();
  }
  finish_shard(path);
}

void PixelStats::add(const uint8_t* images, int64_t n, int64_t pixels_per_sample) {
  const int channels = static_cast<int>(sum.size());
  ST_CHECK(channels > 0, "PixelStats needs the number of channels");
  for (int64_t s = 0; s < n; ++s) {
    const uint8_t* p = images + s * pixels_per_sample * channels;
    for (int c = 0; c < channels; ++c) {
      int64_t a = 0, b = 0;
      for (int64_t i = 0; i < pixels_per_sample; ++i) {
        const int64_t v = p[i * channels + c];
        a += v;
        b += v * v;
      }
      sum[c] += a;
      sum_sq[c] += b;
    }
  }
  pixels_per_channel += n * pixels_per_sample;
}

std::vector<double> PixelStats::mean() const {
  std::vector<double> m(sum.size(), 0.0);
  if (pixels_per_channel == 0) return m;
  for (std::size_t c = 0; c < sum.size(); ++c)
    m[c] = static_cast<double>(static_cast<long double>(sum[c]) / pixels_per_channel / 255.0L);
  return m;
}

std::vector<double> PixelStats::std() const {
  std::vector<double> s(sum.size(), 0.0);
  if (pixels_per_channel == 0) return s;
  for (std::size_t c = 0; c < sum.size(); ++c) {
    // n^2 var = n sum_sq - sum^2, exact in 128-bit integers.
    const __int128 n = pixels_per_channel;
    const __int128 num = n * sum_sq[c] - static_cast<__int128>(sum[c]) * sum[c];
    const long double var = static_cast<long double>(num) / (static_cast<long double>(n) * n);
    s[c] = static_cast<double>(std::sqrt(var) / 255.0L);
  }
  return s;
}

std::vector<int64_t> shard_starts(const SplitInfo& split) {
  std::vector<int64_t> starts{0};
  for (const auto& s : split.shards) starts.push_back(starts.back() + s.samples);
  ST_CHECK(starts.back() == split.samples, split.dir << ": sample count is inconsistent across shards ("
                                                     << starts.back() << " in the shards, " << split.samples
                                                     << " in the split)");
  return starts;
}

int64_t shard_of(const SplitInfo& split, const std::vector<int64_t>& starts, int64_t id) {
  ST_CHECK(id >= 0 && id < starts.back(),
           split.dir << ": sample " << id << " is out of range (the split has " << starts.back() << ")");
  return std::upper_bound(starts.begin(), starts.end(), id) - starts.begin() - 1;
}

}  // namespace scaletrain::data
