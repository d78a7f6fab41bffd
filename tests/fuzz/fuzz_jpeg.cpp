// Fuzz target: one damaged JPEG sample through the JPEG sample decoder of a JPEG dataset
// (make_jpeg_decoder: header, DCT-scaled decode, crop box, bilinear resample), with the training
// transform (random resized crop + flip) and the evaluation transform (centre crop), at two
// model input sizes. The decoder's errors describe the bytes; the loader adds the file and the
// sample index (fuzz_shard covers that), so here any scaletrain::Error is a clear error.
#include <memory>
#include <vector>

#include "fuzz/fuzz_target.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace scaletrain::fuzz {
namespace {

struct Decoders {
  std::unique_ptr<data::SampleDecoder> small, large;  // 16x16 and 64x48 model inputs
};

std::unique_ptr<data::SampleDecoder> make_decoder(int height, int width) {
  data::SplitInfo split;
  split.dir = "fuzz";
  split.encoding = "jpeg";
  split.channels = 3;
  split.mean = {0.5, 0.5, 0.5};
  split.std = {0.25, 0.25, 0.25};
  data::LoaderOptions options;
  options.augment = true;
  options.image_height = height;
  options.image_width = width;
  return data::make_jpeg_decoder(split, options);
}

Decoders& decoders() {
  static Decoders d{make_decoder(16, 16), make_decoder(64, 48)};
  return d;
}

}  // namespace

const char* target_name() { return "fuzz_jpeg"; }

void target_init() {
  init_mpi_once();
  decoders();
}

Result run_input(const uint8_t* data, std::size_t size) {
  // The decoder reads exactly `size` bytes: a copy of that size lets ASan see any read past it.
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    for (const data::SampleDecoder* d : {decoders().small.get(), decoders().large.get()}) {
      std::vector<uint8_t> out(static_cast<std::size_t>(d->out_height()) * d->out_width() * d->channels());
      for (const bool train : {true, false}) {
        Rng rng = Rng::derive(size, train ? 1 : 2);
        d->decode(bytes.data(), bytes.size(), train, rng, out.data());
      }
    }
    return {};
  } catch (const Error& e) {
    return {Outcome::clear_error, e.what()};
  } catch (...) {
    return classify_current_exception("(no file: a JPEG sample in memory)");
  }
}

const char* known_limit(const std::string&, const std::string&) { return nullptr; }

}  // namespace scaletrain::fuzz
