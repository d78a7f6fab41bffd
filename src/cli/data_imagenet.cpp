// `scaletrain-data convert imagenet`: the standard ImageNet tree (train/<wnid>/*.JPEG, val/ by
// class or with a labels file) into sharded files of format version 2, either as the JPEG files'
// own bytes (--encoding jpeg, optionally shrinking images whose longer side exceeds --max-side)
// or decoded and resized to --image-size (--encoding raw). Under mpirun rank r writes shards r,
// r + P, ...; every rank scans the tree itself (sorted, so all agree), and the output does not
// depend on the number of ranks.
#include <mpi.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/data_subcommands.hpp"
#include "cli/option_ranges.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/image_ops.hpp"
#include "scaletrain/data/sources.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace scaletrain::cli {
namespace {

// torchvision's ImageNet normalisation constants (pixel scale 0..1).
const std::vector<double> kImageNetMean = {0.485, 0.456, 0.406};
const std::vector<double> kImageNetStd = {0.229, 0.224, 0.225};
constexpr int kReencodeQuality = 90;
// --shards 0 (the default): about this many samples per shard, so that a rank holds one shard
// (~140 MB of ImageNet JPEGs, ~190 MB raw at 224x224) in memory while writing it.
constexpr int64_t kAutoShardSamples = 1250;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, path << ": cannot open for reading");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ST_CHECK(!in.bad(), path << ": read error");
  ST_CHECK(!bytes.empty(), path << ": empty file");
  return bytes;
}

struct Settings {
  std::string encoding;
  int height = 224, width = 224;  // raw
  int max_side = 0;               // jpeg: 0 keeps every file as it is
};

// The bytes to store for one jpeg-encoded sample: the file itself, checked by a full (1/8-scale,
// cheap) decode, or re-encoded when its longer side exceeds max_side.
std::vector<uint8_t> jpeg_sample(const std::string& path, const Settings& s, data::RgbImage& img) {
  std::vector<uint8_t> bytes = read_file(path);
  const data::JpegHeader h = data::jpeg_header(bytes.data(), bytes.size());
  const int longer = std::max(h.height, h.width);
  if (s.max_side <= 0 || longer <= s.max_side) {
    data::decode_jpeg(bytes.data(), bytes.size(), img, 1, 1);  // catches truncated and corrupt files
    return bytes;
  }
  const double r = static_cast<double>(s.max_side) / longer;
  const int oh = std::max(1, static_cast<int>(std::lround(h.height * r)));
  const int ow = std::max(1, static_cast<int>(std::lround(h.width * r)));
  data::decode_jpeg(bytes.data(), bytes.size(), img, oh, ow);
  std::vector<uint8_t> out(static_cast<std::size_t>(oh) * ow * 3);
  data::resample_crop(img, data::CropBox{0, 0, double(img.height), double(img.width)}, oh, ow, false, out.data());
  return data::encode_jpeg(out.data(), oh, ow, kReencodeQuality);
}

// Raw: resize so that the image covers H x W (aspect kept), then the centre H x W.
void raw_sample(const std::string& path, const Settings& s, data::RgbImage& img, uint8_t* out) {
  const std::vector<uint8_t> bytes = read_file(path);
  const data::JpegHeader h = data::jpeg_header(bytes.data(), bytes.size());
  data::CropBox box = data::center_crop_box(h.height, h.width, s.height, s.width, 1.0);
  const int need_h = static_cast<int>(std::ceil(s.height * static_cast<double>(h.height) / box.h));
  const int need_w = static_cast<int>(std::ceil(s.width * static_cast<double>(h.width) / box.w));
  data::decode_jpeg(bytes.data(), bytes.size(), img, need_h, need_w);
  const double sy = static_cast<double>(img.height) / h.height, sx = static_cast<double>(img.width) / h.width;
  box = {box.y * sy, box.x * sx, box.h * sy, box.w * sx};
  data::resample_crop(img, box, s.height, s.width, false, out);
}

void write_shard(const std::vector<data::ImageFile>& files, int64_t begin, int64_t end, int num_classes,
                 const Settings& s, int64_t chunk, const std::string& path) {
  const int64_t n = end - begin;
  Tensor labels = Tensor::empty({n}, DType::i32);
  data::RgbImage img;
  std::vector<std::vector<uint8_t>> jpegs;
  Tensor images;
  if (s.encoding == "raw") images = Tensor::empty({n, s.height, s.width, 3}, DType::u8);
  const int64_t sample_bytes = int64_t(s.height) * s.width * 3;
  for (int64_t i = 0; i < n; ++i) {
    const data::ImageFile& f = files[begin + i];
    labels.data<int32_t>()[i] = f.label;
    try {
      if (s.encoding == "raw")
        raw_sample(f.path, s, img, images.data<uint8_t>() + i * sample_bytes);
      else
        jpegs.push_back(jpeg_sample(f.path, s, img));
    } catch (const Error& e) {
      std::string msg = e.what();
      // Re-thrown with the file's name in front of the message (after the "[rank r on host] ").
      if (!msg.empty() && msg[0] == '[' && msg.find("] ") != std::string::npos) msg = msg.substr(msg.find("] ") + 2);
      if (msg.rfind(f.path, 0) == 0) throw;  // already names the file
      ST_THROW(f.path << ": " << msg);
    }
  }
  if (s.encoding == "raw")
    data::write_image_shard(path, images, labels, num_classes, kImageNetMean, kImageNetStd, chunk);
  else
    data::write_jpeg_shard(path, jpegs, labels, num_classes, kImageNetMean, kImageNetStd);
}

}  // namespace

int convert_imagenet_main(int argc, char** argv) {
  std::string source, output, image_size = "224,224", val_labels;
  Settings s;
  int64_t shards = 0, chunk = data::kDefaultChunkSamples;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")(
      "source", po::value(&source)->required(),
      "ImageNet directory: train/<wnid>/*.JPEG and val/<wnid>/*.JPEG (or val/*.JPEG with --val-labels)")(
      "output", po::value(&output)->required(), "dataset directory to write: OUTPUT/train/*.h5, OUTPUT/val/*.h5")(
      "encoding", po::value(&s.encoding)->required(),
      "jpeg: store each file's bytes (dataset 'jpeg', decoded while training); raw: decode and resize to "
      "--image-size (dataset 'images')")(
      "val-labels", po::value(&val_labels),
      "labels of val/*.JPEG: lines 'FILE LABEL' or 'FILE,LABEL ...' (LABEL a wnid or class index; "
      "Kaggle's LOC_val_solution.csv works as is)")(
      "shards", po::value(&shards)->default_value(shards),
      "shards per split (val gets min(shards, its images)); 0: one per 1250 images of the split (ImageNet: "
      "1025 train, 40 val). Ranks under mpirun write them in parallel; a rank holds one shard in memory")(
      "image-size", po::value(&image_size)->default_value(image_size),
      "raw: H,W of the stored images (resized to cover H x W, then centre-cropped)")(
      "max-side", po::value(&s.max_side)->default_value(0),
      "jpeg: re-encode (quality 90) images whose longer side exceeds this, shrunk to it; 0 keeps every file as is")(
      "chunk-samples", po::value(&chunk)->default_value(chunk),
      "raw: samples per HDF5 chunk of 'images' (JPEG bytes are stored contiguous)")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("convert imagenet: ") + e.what());
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (vm.count("help")) {
    if (rank == 0)
      std::cout << "usage: scaletrain-data convert imagenet --source DIR --output DIR --encoding raw|jpeg [options]\n\n"
                << desc << "\nmean/std are ImageNet's constants (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225).\n";
    return 0;
  }
  check_option_ranges(vm, option_ranges());
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("convert imagenet: ") + e.what());
  }
  if (s.encoding != "raw" && s.encoding != "jpeg")
    throw UsageError("convert imagenet: --encoding must be raw or jpeg, got '" + s.encoding + "'");
  if (shards < 0) throw UsageError("convert imagenet: --shards must be >= 0, got " + std::to_string(shards));
  if (chunk < 1) throw UsageError("convert imagenet: --chunk-samples must be at least 1");
  if (s.max_side < 0) throw UsageError("convert imagenet: --max-side must be >= 0");
  {
    char comma = 0, extra = 0;
    std::istringstream ss(image_size);
    if (!(ss >> s.height >> comma >> s.width) || comma != ',' || (ss >> extra) || s.height < 1 || s.width < 1 ||
        s.height > 65536 || s.width > 65536)
      throw UsageError("convert imagenet: --image-size '" + image_size + "' must be H,W with positive integers");
  }
  if (vm["max-side"].defaulted() == false && s.encoding != "jpeg")
    throw UsageError("convert imagenet: --max-side applies to --encoding jpeg only");
  if (vm["image-size"].defaulted() == false && s.encoding != "raw")
    throw UsageError(
        "convert imagenet: --image-size applies to --encoding raw only (JPEG datasets are resized "
        "while training: scaletrain train --image-size)");

  Stopwatch clock;
  const data::ImageNetTree tree = data::scan_imagenet(source, val_labels);
  const int classes = static_cast<int>(tree.classes.size());
  prepare_output(rank, output, {"train", "val"}, overwrite);

  struct Task {
    const std::vector<data::ImageFile>* files;
    const char* split;
    int64_t index, count;
  };
  std::vector<Task> tasks;
  const auto shard_count = [shards](std::size_t samples) {
    const int64_t n = static_cast<int64_t>(samples);
    return shards > 0 ? std::min(shards, n) : (n + kAutoShardSamples - 1) / kAutoShardSamples;
  };
  const int64_t train_shards = shard_count(tree.train.size()), val_shards = shard_count(tree.val.size());
  for (int64_t i = 0; i < train_shards; ++i) tasks.push_back({&tree.train, "train", i, train_shards});
  for (int64_t i = 0; i < val_shards; ++i) tasks.push_back({&tree.val, "val", i, val_shards});
  for (std::size_t t = rank; t < tasks.size(); t += size) {
    const Task& task = tasks[t];
    const auto [begin, end] = data::shard_range(static_cast<int64_t>(task.files->size()), task.index, task.count);
    const std::string path = (fs::path(output) / task.split / data::shard_file_name(task.index, task.count)).string();
    write_shard(*task.files, begin, end, classes, s, chunk, path);
  }

  write_manifests(output, {"train", "val"});
  // Rank 0 reads back what was written; the others wait for its verdict (no rank in MPI_Finalize
  // while another stops on an error).
  comm::on_rank0_agreed(comm::Communicator::world(), [&] {
    for (const char* split : {"train", "val"}) {
      const data::SplitInfo info = data::open_split(output, split);
      std::cout << "split " << split << ": " << info.samples << " samples in " << info.shards.size() << " shard"
                << (info.shards.size() == 1 ? "" : "s") << ", encoding " << info.encoding << ", ";
      if (info.encoding == "raw") std::cout << "images " << info.height << "x" << info.width << "x3 (HxWxC, uint8), ";
      std::cout << info.num_classes << " classes\n";
    }
    std::cout << "wrote " << output << " in " << std::fixed << std::setprecision(1) << clock.elapsed() << " s with "
              << size << " rank" << (size == 1 ? "" : "s") << "\n";
  });
  return 0;
}

}  // namespace scaletrain::cli
