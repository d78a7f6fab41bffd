// The subword tokenizer of MLPerf's Transformer (mlcommons/training, retired_benchmarks/
// transformer/tensorflow/transformer/utils/tokenizer.py), rewritten so that the same vocabulary
// turns the same text into the same ids:
//   - text splits into maximal runs of alphanumeric characters (Unicode L* or N*) and of the
//     others; a run that is exactly one space is dropped unless it is the first or the last;
//   - each run is escaped ("\" to "\\", "_" to "\u", characters outside the vocabulary's
//     alphabet and the newline to "\<decimal>;") and ends in "_", so decoding is lossless;
//   - an escaped run is cut into subtokens by greedy longest match;
//   - ids 0 and 1 are reserved: padding (<pad>) and end of sentence (<EOS>).
// The vocabulary is built as the reference builds it (build_vocabulary): token counts from a
// sample of each file, then 4 rounds of counting substrings of the greedy segmentation, keeping
// those seen at least min_count times, longest first, each taking its count from its prefixes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "scaletrain/text/unicode.hpp"

namespace scaletrain::text {

constexpr int32_t kPadId = 0;
constexpr int32_t kEosId = 1;
// The tokenizer's identity in a dataset's attributes (docs/dataset-format.md, Translation).
constexpr const char* kSubwordTokenizerName = "mlperf-subword";

// Maximal runs of one class, single-space runs dropped but at either end (the reference's
// _split_string_to_tokens). "test? testing 123." gives test, "? ", testing, 123, ".".
std::vector<CodePoints> split_into_runs(const CodePoints& text);

class SubwordTokenizer {
 public:
  // `subtokens` in id order; <pad> and <EOS> are put first (and removed from elsewhere) as the
  // reference's loader does.
  explicit SubwordTokenizer(std::vector<CodePoints> subtokens);

  // A vocabulary file: UTF-8, one subtoken a line between single quotes (the reference's format).
  // Tensor2Tensor's files, such as the reference repository's
  // vocab.translate_ende_wmt32k.32768.subwords, write the reserved ids as '<pad>_' and '<EOS>_':
  // those two first lines are read as ids 0 and 1 too, so ids equal line numbers in both
  // formats. Throws naming the file and line for a line not in quotes or not UTF-8.
  static SubwordTokenizer from_file(const std::string& path);
  // The same from the file's bytes (a dataset shard stores them); `where` names the source.
  static SubwordTokenizer from_text(const std::string& bytes, const std::string& where);
  // The reference's format ('<pad>' and '<EOS>' first); from_text(to_text()) gives the same ids.
  std::string to_text() const;
  void to_file(const std::string& path) const;

  // Ids of the text (UTF-8), with kEosId appended when add_eos. Throws naming `where` for text
  // that is not UTF-8.
  std::vector<int32_t> encode(const std::string& utf8, bool add_eos, const std::string& where = "text") const;
  std::vector<int32_t> encode(const CodePoints& text, bool add_eos) const;
  // The text of the ids (UTF-8); ids past the vocabulary are skipped, as the reference does.
  // Decoding stops at nothing: callers cut at kEosId first.
  std::string decode(const std::vector<int32_t>& ids) const;

  int64_t size() const { return static_cast<int64_t>(subtokens_.size()); }
  const std::vector<CodePoints>& subtokens() const { return subtokens_; }

 private:
  std::vector<CodePoints> subtokens_;
  std::unordered_map<CodePoints, int32_t> ids_;
  std::unordered_set<char32_t> alphabet_;
  std::size_t max_subtoken_length_ = 1;
};

// The reference's escaping of one run, with the vocabulary's alphabet.
CodePoints escape_run(const CodePoints& run, const std::unordered_set<char32_t>& alphabet);
CodePoints unescape_run(const CodePoints& escaped);

// Token (run) counts, as the reference's _count_tokens over one file, given as its lines (UTF-8,
// without their newline) and its size in bytes: lines spread evenly over it (every
// (file bytes / (2 * sample_chars))-th line, then the next) until about sample_chars characters
// are read; each line stripped and split into runs. sample_chars <= 0 reads all. `where` names
// the file in errors.
using RunCounts = std::unordered_map<CodePoints, int64_t>;
void count_runs_in_lines(const std::vector<std::string>& lines, double file_bytes, double sample_chars,
                         RunCounts& counts, const std::string& where);

struct VocabularyOptions {
  int64_t min_count = 6;    // the reference's _TRAIN_DATA_MIN_COUNT
  int rounds = 4;           // its num_iterations
  int64_t target_size = 0;  // > 0: search min_count in [1, 1000] for this size instead (its --search)
  int64_t threshold = 327;  // accept a size within this of target_size (1% of 32768, as the reference)
};
struct BuiltVocabulary {
  std::vector<CodePoints> subtokens;
  int64_t min_count = 0;  // the one used (searched when target_size > 0)
};
BuiltVocabulary build_vocabulary(const RunCounts& counts, const VocabularyOptions& options);

}  // namespace scaletrain::text
