// Helper of tests/python/test_torch_beam_search.py: loads a Transformer checkpoint
// (models/transformer.hpp, a run of `scaletrain train`), translates the given sentences with beam
// search and greedily (both on the key/value cache) and writes the ids, for comparison with a
// numpy port of the reference's beam_search.py driving torch.nn.Transformer loaded from the same
// checkpoint. One process, on the CPU unless DEVICE (cpu | cuda) says otherwise; it prints each
// sentence's ids too, so that a GPU run (whose machine has no h5py) can be compared with the CPU's.
//
// usage: scaletrain_torch_beam_search_helper MODEL CHECKPOINT IN OUT [DEVICE]
// IN:  IN.h5: attributes beam_size, max_extra (integers), alpha (double); source (N, Ls) i32
//      padded with 0, source_lengths (N) i32. Or IN.txt (tests/gpu, whose machine has no h5py): a
//      first line "beam_size alpha max_extra", then a sentence a line, its ids (EOS last).
// OUT: OUT.h5: beam_ids and greedy_ids (N, L) i32, padded with -1; beam_finished (N) i32;
//      attribute beam_scores (N doubles). Or "-": the printed lines only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/transformer.hpp"

namespace st = scaletrain;
using st::io::H5File;

namespace {

struct Input {
  st::Tensor source, lengths;
  int64_t beam = 4, max_extra = 50;
  double alpha = 0.6;
};

Input read_h5(const std::string& path) {
  const H5File in(path, H5File::Mode::read);
  return {in.read("source", st::DType::i32), in.read("source_lengths", st::DType::i32),
          in.get_int_attribute("beam_size"), in.get_int_attribute("max_extra"), in.get_double_attribute("alpha")};
}

Input read_text(const std::string& path) {
  std::ifstream f(path);
  Input in;
  std::string line;
  ST_CHECK(f && std::getline(f, line), path << ": no first line \"beam_size alpha max_extra\"");
  std::istringstream(line) >> in.beam >> in.alpha >> in.max_extra;
  std::vector<std::vector<int32_t>> sentences;
  while (std::getline(f, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> s;
    for (int32_t id; ids >> id;) s.push_back(id);
    if (!s.empty()) sentences.push_back(s);
  }
  std::size_t ls = 1;
  for (const auto& s : sentences) ls = std::max(ls, s.size());
  const int64_t n = static_cast<int64_t>(sentences.size());
  in.source = st::Tensor::zeros({n, static_cast<int64_t>(ls)}, st::DType::i32);
  in.lengths = st::Tensor::empty({n}, st::DType::i32);
  for (int64_t i = 0; i < n; ++i) {
    std::copy(sentences[i].begin(), sentences[i].end(), in.source.data<int32_t>() + i * static_cast<int64_t>(ls));
    in.lengths.data<int32_t>()[i] = static_cast<int32_t>(sentences[i].size());
  }
  return in;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

st::Tensor padded(const std::vector<std::vector<int32_t>>& rows) {
  std::size_t width = 1;
  for (const auto& r : rows) width = std::max(width, r.size());
  st::Tensor t = st::Tensor::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, st::DType::i32);
  std::fill_n(t.data<int32_t>(), t.numel(), -1);
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::copy(rows[i].begin(), rows[i].end(), t.data<int32_t>() + i * width);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL CHECKPOINT IN.h5|IN.txt OUT.h5|- [cpu|cuda]\n", argv[0]);
    return 2;
  }
  try {
    const std::string model_name = argv[1];
    const st::checkpoint::CheckpointData weights = st::checkpoint::read_checkpoint(argv[2]);
    st::models::Transformer model(st::models::transformer_config(model_name),
                                  weights.tensors.at("model/embedding.weight").dim(0));
    st::checkpoint::restore_model(weights, model_name, model.params(), nullptr);
    const Input in = ends_with(argv[3], ".txt") ? read_text(argv[3]) : read_h5(argv[3]);
    const bool cuda = argc == 6 && std::string(argv[5]) == "cuda";
    st::Context ctx(cuda ? st::Device::cuda : st::Device::cpu, 2);
    model.params().move_to(ctx.device());
    const auto start = std::chrono::steady_clock::now();
    const auto beams = model.translate_beam(ctx, in.source, in.lengths, in.beam, in.alpha, in.max_extra);
    const auto middle = std::chrono::steady_clock::now();
    const auto greedy = model.translate_greedy(ctx, in.source, in.lengths, in.max_extra);
    const auto end = std::chrono::steady_clock::now();
    std::vector<std::vector<int32_t>> beam_ids;
    std::vector<double> scores;
    st::Tensor finished = st::Tensor::empty({static_cast<int64_t>(beams.size())}, st::DType::i32);
    for (std::size_t i = 0; i < beams.size(); ++i) {
      std::printf("sentence %zu: beam", i);
      for (int32_t id : beams[i].ids) std::printf(" %d", id);
      std::printf(" (score %.5f, finished %d); greedy", beams[i].score, beams[i].finished ? 1 : 0);
      for (int32_t id : greedy[i]) std::printf(" %d", id);
      std::printf("\n");
      beam_ids.push_back(beams[i].ids);
      scores.push_back(beams[i].score);
      finished.data<int32_t>()[i] = beams[i].finished ? 1 : 0;
    }
    std::printf("%zu sentences on %s: beam search %.3f s, greedy %.3f s\n", beams.size(), cuda ? "cuda" : "cpu",
                std::chrono::duration<double>(middle - start).count(),
                std::chrono::duration<double>(end - middle).count());
    if (std::string(argv[4]) == "-") return 0;
    H5File out(argv[4], H5File::Mode::create_truncate);
    out.write("beam_ids", padded(beam_ids));
    out.write("beam_finished", finished);
    out.write("greedy_ids", padded(greedy));
    out.set_attribute("beam_scores", scores);
    out.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scaletrain_torch_beam_search_helper: %s\n", e.what());
    return 1;
  }
  return 0;
}
