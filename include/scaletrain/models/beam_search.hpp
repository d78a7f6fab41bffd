// Beam search as the MLPerf Transformer reference runs it (mlcommons/training,
// retired_benchmarks/transformer/tensorflow/transformer/model/beam_search.py, from Tensor2Tensor),
// on the host; the model behind it (BeamSearchDecoder) runs on its device.
//
// Per sentence, with k = beam_size and step i = 0, 1, ...:
//   - k alive sequences (the start id 0 first), log probabilities [0, -inf, ..., -inf] at first;
//   - each step extends every alive sequence by every token (log-softmax of the logits, summed),
//     keeps the 2k best candidates over k x V (ties: the lower beam * V + id first, as tf.nn.top_k);
//   - the new alive sequences are the k best of those, a candidate ending in the end of sentence
//     (EOS, id 1) pushed down by kInf (not infinity: the reference's INF = 1e7);
//   - the finished sequences are the k best of the old finished ones and the candidates, scored
//     log probability / ((5 + (i + 1)) / 6)^alpha, a candidate not ending in EOS pushed down by
//     kInf, with a flag saying which are real (the initial k are fillers scored -kInf);
//   - the search goes on while i < max_decode_length and not (the lowest finished score, fillers
//     counting 0 and -kInf where none is finished, beats the best alive log probability over the
//     largest penalty ((5 + max_decode_length) / 6)^alpha);
//   - the result is the best finished sequence if any is finished, else the best alive one.
// The reference decodes a padded batch for as long as any sentence goes on. Once a sentence's
// condition has failed, its result cannot change (every later candidate scores below its lowest
// finished score then, so below its best), though the condition may hold again as more hypotheses
// finish and the fillers' 0s leave its lowest score. So each sentence here stops on its own
// condition and leaves the batch: the result is the reference's for that sentence decoded alone,
// with its own maximal length (in the reference's batch, the batch's padded source length +
// extra_decode_length for all).
// Scores are float64 here (the reference's are float32).
#pragma once

#include <cstdint>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::models {

struct BeamSearchOptions {
  int64_t beam_size = 4;  // the reference's
  double alpha = 0.6;     // the length penalty's exponent
  int32_t eos_id = 1;
};

// The reference's stand-in for infinity in scores (beam_search.py's INF).
constexpr double kBeamSearchInf = 1e7;

// The length penalty ((5 + length) / 6)^alpha (the reference's _length_normalization).
double length_normalization(double alpha, int64_t length);

// What beam search asks of a model. Rows are the live sentences' hypotheses, sentence by
// sentence (beam_size rows each, in the order the sentences were given, finished ones left out).
class BeamSearchDecoder {
 public:
  virtual ~BeamSearchDecoder() = default;
  // The logits of the next token of each row, whose last token is last_ids[row] (id 0, the start,
  // at the first call): a host float32 tensor (rows, V).
  virtual Tensor next_logits(const std::vector<int32_t>& last_ids) = 0;
  // Row r of the next call continues old row origins[r] (the hypothesis it grew from; rows of a
  // finished sentence are left out).
  virtual void keep_rows(const std::vector<int64_t>& origins) = 0;
};

struct BeamSearchResult {
  std::vector<int32_t> ids;  // without the start id, cut before the first EOS (translate.py's trim)
  double score = 0.0;        // finished: log probability / length penalty; else the alive log probability
  bool finished = false;     // false: no hypothesis ended within the maximal length
};

// One search for each sentence; max_decode_lengths[s]: sentence s's most tokens (EOS included),
// the reference's max_decode_length. The decoder starts with beam_size rows per sentence.
std::vector<BeamSearchResult> beam_search(BeamSearchDecoder& decoder, const std::vector<int64_t>& max_decode_lengths,
                                          const BeamSearchOptions& options);

}  // namespace scaletrain::models
