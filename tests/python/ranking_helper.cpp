// Helper of tests/python/test_ranking_evaluation.py: builds a NeuMF (mf_dim 8, MLP 16-8) for a
// recommendation dataset, initialised with a seed and its embeddings scaled up so that scores
// spread, runs train::evaluate_ranking on DATA/val (under mpirun with any number of ranks), and
// writes what the script recomputes in numpy. No scaletrain command evaluates NCF yet, hence a
// program of its own.
//
// usage: scaletrain_ranking_helper DATA OUT_PREFIX SEED K USERS_PER_BATCH
// OUT_PREFIX.rank<r>.h5 (every rank): scores [its users, 1 + K'] f32 (column 0 the held-out item),
//   first_row (1) i64: its first row of val;
// OUT_PREFIX.metrics.txt (rank 0): "users hits ndcg_sum hit_rate ndcg", the doubles with 17 digits.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/train/ranking_evaluation.hpp"

namespace st = scaletrain;
using st::io::H5File;

namespace {

st::Tensor scalar_i64(int64_t v) {
  st::Tensor t = st::Tensor::empty({1}, st::DType::i64);
  t.data<int64_t>()[0] = v;
  return t;
}

void run(const st::comm::Communicator& comm, const std::string& data, const std::string& prefix, uint64_t seed, int k,
         int64_t users_per_batch) {
  const st::data::RecommendationSplit val = st::data::open_recommendation_split(data, "val");
  st::models::NeuMF model(val.num_users, val.num_items, 8, {16, 8});
  model.initialize(seed);
  st::nn::ParameterSet& ps = model.params();
  for (int i = 0; i < ps.num_parameters(); ++i) {
    if (ps.parameter_info(i).name.find("embed") == std::string::npos) continue;
    float* v = ps.value(i).data<float>();
    for (int64_t j = 0; j < ps.value(i).numel(); ++j) v[j] *= 30.0f;
  }
  st::Context ctx;
  std::vector<float> scores;
  const st::train::RankingResult r = st::train::evaluate_ranking(comm, ctx, model, val, users_per_batch, k, &scores);
  const int64_t per_user = 1 + val.negatives_per_user;
  const int64_t first_row = st::train::ranking_user_slice(val.rows(), users_per_batch, comm.rank(), comm.size()).begin;
  st::Tensor s = st::Tensor::empty({static_cast<int64_t>(scores.size()) / per_user, per_user});
  std::copy(scores.begin(), scores.end(), s.data<float>());
  {
    H5File out(prefix + ".rank" + std::to_string(comm.rank()) + ".h5", H5File::Mode::create_truncate);
    out.write("scores", s);
    out.write("first_row", scalar_i64(first_row));
  }
  if (comm.rank() == 0) {  // as text, so that the doubles arrive exactly
    std::FILE* f = std::fopen((prefix + ".metrics.txt").c_str(), "w");
    ST_CHECK(f, "cannot write " << prefix << ".metrics.txt");
    std::fprintf(f, "%lld %lld %.17g %.17g %.17g\n", static_cast<long long>(r.users), static_cast<long long>(r.hits),
                 r.ndcg_sum, r.hit_rate(), r.ndcg());
    std::fclose(f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s DATA OUT_PREFIX SEED K USERS_PER_BATCH\n", argv[0]);
    return 2;
  }
  st::comm::MpiSession mpi(&argc, &argv);
  const st::comm::Communicator comm = st::comm::Communicator::world();
  try {
    run(comm, argv[1], argv[2], std::stoull(argv[3]), std::stoi(argv[4]), std::stoll(argv[5]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: error: %s\n", argv[0], comm.rank(), e.what());
    comm.abort(1);
  }
  return 0;
}
