// Dataset sources: the idx reader (through zlib's gz* functions, which read compressed and plain
// files alike), the ImageNet directory scanner and the synthetic generator.
#include "scaletrain/data/sources.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"

namespace scaletrain::data {
namespace fs = std::filesystem;
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::string find_idx(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {name + ".gz", name}) {
    const fs::path p = fs::path(dir) / candidate;
    if (fs::exists(p)) return p.string();
  }
  ST_THROW("no " << name << "[.gz] in " << dir << " (expected the idx files of Fashion-MNIST, e.g. from Debian's "
                 << "dataset-fashion-mnist package)");
}

void read_exact(gzFile_s* f, const std::string& path, void* dst, std::size_t bytes) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const unsigned step = static_cast<unsigned>(std::min<std::size_t>(bytes, 1u << 30));
    const int got = gzread(f, p, step);
    ST_CHECK(got > 0, path << ": truncated or unreadable idx file");
    p += got;
    bytes -= got;
  }
}

uint32_t read_be32(gzFile_s* f, const std::string& path) {
  unsigned char b[4];
  read_exact(f, path, b, 4);
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

GzFile open_gz(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  ST_CHECK(f != nullptr, path << ": cannot open");
  gzbuffer(f.get(), 1 << 20);
  return f;
}
}  // namespace

IdxSplit read_idx_split(const std::string& dir, const std::string& prefix) {
  const std::string images_path = find_idx(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx(dir, prefix + "-labels-idx1-ubyte");
  IdxSplit out;
  {
    GzFile f = open_gz(images_path);
    const uint32_t magic = read_be32(f.get(), images_path);
    ST_CHECK(magic == 0x803, images_path << ": magic number " << magic << " is not that of idx3 ubyte images (2051)");
    const int64_t n = read_be32(f.get(), images_path), h = read_be32(f.get(), images_path),
                  w = read_be32(f.get(), images_path);
    ST_CHECK(n > 0 && h > 0 && w > 0 && h <= 65536 && w <= 65536,
             images_path << ": implausible shape " << n << "x" << h << "x" << w);
    out.images = Tensor::empty({n, h, w, 1}, DType::u8);
    read_exact(f.get(), images_path, out.images.raw(), out.images.bytes());
  }
  {
    GzFile f = open_gz(labels_path);
    const uint32_t magic = read_be32(f.get(), labels_path);
    ST_CHECK(magic == 0x801, labels_path << ": magic number " << magic << " is not that of idx1 ubyte labels (2049)");
    const int64_t n = read_be32(f.get(), labels_path);
    ST_CHECK(n == out.images.dim(0),
             labels_path << ": " << n << " labels but " << images_path << " has " << out.images.dim(0) << " images");
    std::vector<uint8_t> raw(n);
    read_exact(f.get(), labels_path, raw.data(), n);
    out.labels = Tensor::empty({n}, DType::i32);
    for (int64_t i = 0; i < n; ++i) out.labels.data<int32_t>()[i] = raw[i];
  }
  return out;
}

namespace {

// A class prototype: one byte per channel of each cell x cell block, the blocks in row-major
// order, drawn from the class's stream 0 eight bytes at a time (low byte first), so that cell 1
// gives the per-pixel prototypes of earlier versions bit for bit.
// `proto` holds the cells' bytes (its size set by the caller); overwritten.
void draw_class_prototype(uint64_t seed, int label, std::vector<uint8_t>& proto) {
  Rng stream = Rng::derive(seed, 0, static_cast<uint64_t>(label));
  for (std::size_t i = 0; i < proto.size(); i += 8) {
    uint64_t a = stream.next_u64();
    for (std::size_t k = i; k < std::min(proto.size(), i + 8); ++k, a >>= 8) proto[k] = static_cast<uint8_t>(a & 0xff);
  }
}

}  // namespace

void synthetic_samples(uint64_t seed, int split_id, int64_t first_index, int64_t count, int h, int w, int c,
                       int classes, uint8_t* images, int32_t* labels, int prototype_cell) {
  ST_CHECK(prototype_cell >= 1, "synthetic data: the prototype cell must be at least 1 pixel, got " << prototype_cell);
  const int64_t bytes = int64_t(h) * w * c;
  const int64_t rows = (h + prototype_cell - 1) / prototype_cell, cols = (w + prototype_cell - 1) / prototype_cell;
  std::vector<uint8_t> proto(rows * cols * c);
  // Byte k of an image (pixel k / c, channel k % c) reads its block's prototype byte.
  const auto cell_byte = [&](int64_t k) {
    const int64_t pixel = k / c, y = pixel / w, x = pixel % w;
    return ((y / prototype_cell) * cols + x / prototype_cell) * c + k % c;
  };
  for (int64_t s = 0; s < count; ++s) {
    const int64_t index = first_index + s;
    Rng noise = Rng::derive(seed, 1 + static_cast<uint64_t>(split_id), static_cast<uint64_t>(index));
    const int label = static_cast<int>(noise.below(classes));
    // Streams 0 are the class prototypes; the noise streams start at 1. Drawn again for each
    // sample (as cheap as its noise) rather than kept: 1000 classes at 299x299 would hold 268 MB.
    draw_class_prototype(seed, label, proto);
    uint8_t* out = images + s * bytes;
    for (int64_t i = 0; i < bytes; i += 8) {
      uint64_t b = noise.next_u64();
      for (int64_t k = i; k < std::min(bytes, i + 8); ++k, b >>= 8) {
        out[k] = static_cast<uint8_t>((proto[prototype_cell == 1 ? k : cell_byte(k)] + (b & 0xff)) / 2);
      }
    }
    labels[s] = label;
  }
}

namespace {

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpeg" || ext == ".jpg";
}

// Image files directly in `dir`, sorted by name.
std::vector<std::string> image_files(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (!e.is_directory() && is_image_file(e.path())) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> sub_directories(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Reads "FILE LABEL" / "FILE,LABEL ..." lines into stem -> label.
std::map<std::string, int32_t> read_val_labels(const std::string& path, const std::vector<std::string>& classes) {
  std::ifstream in(path);
  ST_CHECK(in, path << ": cannot open the validation labels file");
  std::map<std::string, int32_t> index;
  for (std::size_t i = 0; i < classes.size(); ++i) index[classes[i]] = static_cast<int32_t>(i);
  std::map<std::string, int32_t> labels;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    std::string file, label;
    if (!(ss >> file)) continue;  // blank line
    ST_CHECK(static_cast<bool>(ss >> label),
             path << ":" << number << ": expected 'FILE LABEL' (a wnid or class index), got '" << line << "'");
    int32_t value = -1;
    if (index.count(label)) {
      value = index[label];
    } else if (!label.empty() &&
               std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isdigit(c); })) {
      const long v = label.size() < 10 ? std::stol(label) : -1;
      ST_CHECK(v >= 0 && v < static_cast<long>(classes.size()),
               path << ":" << number << ": class index " << label << " is out of range [0, " << classes.size() << ")");
      value = static_cast<int32_t>(v);
    } else if (number == 1) {
      continue;  // a header line such as "ImageId,PredictionString"
    } else {
      ST_THROW(path << ":" << number << ": label '" << label << "' is neither a class of train/ nor a class index");
    }
    labels[fs::path(file).stem().string()] = value;
  }
  return labels;
}

}  // namespace

ImageNetTree scan_imagenet(const std::string& root, const std::string& val_labels_file) {
  const fs::path train = fs::path(root) / "train", val = fs::path(root) / "val";
  std::error_code ec;
  ST_CHECK(fs::is_directory(root, ec), root << ": no such ImageNet directory");
  ST_CHECK(fs::is_directory(train, ec), train.string() << ": no such directory (expected train/<wnid>/*.JPEG)");
  ImageNetTree tree;
  tree.classes = sub_directories(train);
  ST_CHECK(!tree.classes.empty(), train.string() << ": no class directories (expected train/<wnid>/*.JPEG)");
  std::map<std::string, int32_t> index;
  for (std::size_t c = 0; c < tree.classes.size(); ++c) {
    index[tree.classes[c]] = static_cast<int32_t>(c);
    const std::vector<std::string> files = image_files(train / tree.classes[c]);
    ST_CHECK(!files.empty(), (train / tree.classes[c]).string() << ": no *.JPEG images in this class directory");
    for (const auto& f : files) tree.train.push_back({f, static_cast<int32_t>(c)});
  }

  ST_CHECK(fs::is_directory(val, ec), val.string() << ": no such directory (expected val/<wnid>/*.JPEG, or "
                                                      "val/*.JPEG with --val-labels FILE)");
  const std::vector<std::string> flat = image_files(val);
  if (!flat.empty()) {
    ST_CHECK(!val_labels_file.empty(), val.string()
                                           << " holds images directly (" << fs::path(flat[0]).filename().string()
                                           << ", ...): pass their labels with --val-labels FILE");
    const std::map<std::string, int32_t> labels = read_val_labels(val_labels_file, tree.classes);
    for (const auto& f : flat) {
      const auto it = labels.find(fs::path(f).stem().string());
      ST_CHECK(it != labels.end(), f << ": no label in " << val_labels_file);
      tree.val.push_back({f, it->second});
    }
  } else {
    for (const auto& wnid : sub_directories(val)) {
      const auto it = index.find(wnid);
      ST_CHECK(it != index.end(), (val / wnid).string() << ": class '" << wnid << "' is not among the "
                                                        << tree.classes.size() << " classes of " << train.string());
      for (const auto& f : image_files(val / wnid)) tree.val.push_back({f, it->second});
    }
  }
  ST_CHECK(!tree.val.empty(), val.string() << ": no *.JPEG images");
  return tree;
}

}  // namespace scaletrain::data
