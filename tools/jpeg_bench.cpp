// scaletrain-jpeg-bench FILE... [--runs N] [--seconds S] [--transform H,W]: single-thread
// full-size decode throughput of scaletrain's JPEG path (data::decode_jpeg, RGB, no resize) in
// Mpixels/s, the median of N runs of at least S seconds per file; tools/bench_jpeg.sh compares
// it with tjbench. --transform also times the whole sample decoder (DCT-scaled decode, crop,
// resize to H x W uint8) for evaluation and training, in images/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/image_ops.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace {
std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, path << ": cannot open");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> files;
    int runs = 5;
    double seconds = 1.0;
    int out_h = 0, out_w = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--runs" && i + 1 < argc) {
        runs = std::atoi(argv[++i]);
      } else if (a == "--seconds" && i + 1 < argc) {
        seconds = std::atof(argv[++i]);
      } else if (a == "--transform" && i + 1 < argc) {
        if (std::sscanf(argv[++i], "%d,%d", &out_h, &out_w) != 2 || out_h < 1 || out_w < 1) {
          std::fprintf(stderr, "scaletrain-jpeg-bench: --transform needs H,W\n");
          return 2;
        }
      } else if (a == "--help" || a == "-h") {
        std::printf("usage: scaletrain-jpeg-bench FILE... [--runs N] [--seconds S] [--transform H,W]\n");
        return 0;
      } else {
        files.push_back(a);
      }
    }
    if (files.empty() || runs < 1 || seconds <= 0) {
      std::fprintf(stderr, "usage: scaletrain-jpeg-bench FILE... [--runs N] [--seconds S]\n");
      return 2;
    }
    using clock = std::chrono::steady_clock;
    scaletrain::data::RgbImage image;
    for (const std::string& path : files) {
      const std::vector<uint8_t> jpeg = read_file(path);
      scaletrain::data::decode_jpeg(jpeg.data(), jpeg.size(), image);  // warm-up, and the size
      const double mpix = static_cast<double>(image.width) * image.height / 1e6;
      std::vector<double> rates;
      for (int r = 0; r < runs; ++r) {
        int64_t n = 0;
        const auto t0 = clock::now();
        double elapsed = 0;
        do {
          scaletrain::data::decode_jpeg(jpeg.data(), jpeg.size(), image);
          ++n;
          elapsed = std::chrono::duration<double>(clock::now() - t0).count();
        } while (elapsed < seconds);
        rates.push_back(n * mpix / elapsed);
      }
      std::sort(rates.begin(), rates.end());
      std::printf("%s %dx%d %.2f Mpixels/s\n", path.c_str(), image.width, image.height, rates[rates.size() / 2]);
      if (out_h > 0) {
        scaletrain::data::SplitInfo split;
        split.encoding = "jpeg";
        split.channels = 3;
        split.mean = {0.485, 0.456, 0.406};
        split.std = {0.229, 0.224, 0.225};
        scaletrain::data::LoaderOptions options;
        options.image_height = out_h;
        options.image_width = out_w;
        options.augment = true;
        const auto decoder = scaletrain::data::make_jpeg_decoder(split, options);
        std::vector<uint8_t> out(static_cast<std::size_t>(out_h) * out_w * 3);
        for (const bool train : {false, true}) {
          std::vector<double> ips;
          scaletrain::Rng rng(1);
          for (int r = 0; r < runs; ++r) {
            int64_t n = 0;
            const auto t0 = clock::now();
            double elapsed = 0;
            do {
              decoder->decode(jpeg.data(), jpeg.size(), train, rng, out.data());
              ++n;
              elapsed = std::chrono::duration<double>(clock::now() - t0).count();
            } while (elapsed < seconds);
            ips.push_back(n / elapsed);
          }
          std::sort(ips.begin(), ips.end());
          std::printf("%s %s transform to %dx%d: %.1f images/s\n", path.c_str(), train ? "train" : "eval", out_h, out_w,
                      ips[ips.size() / 2]);
        }
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaletrain-jpeg-bench: error: %s\n", e.what());
    return 1;
  }
}
