// The translation task of the dataset format (docs/dataset-format.md, "Translation"): sentence
// pairs as token ids of the MLPerf Transformer's subword tokenizer (text/subword_tokenizer.hpp).
// A split (train/, val/) is HDF5 shards like the other tasks' (format version, fixed-length
// `task`, manifest.json), each holding
//   - `source_tokens`, `target_tokens` int32: every sentence's ids one after another, each
//     sentence ending in the end-of-sentence id 1 (id 0 is padding and never stored);
//   - `source_offsets`, `target_offsets` int64 [N + 1]: sentence i is tokens [o[i], o[i + 1]);
//   - `vocabulary` uint8: the vocabulary file's bytes (one 'subtoken' a line, the reference's
//     format), so that every shard says what its ids mean;
//   - attributes tokenizer, vocab_size, source_language, target_language, max_length (tokens,
//     end-of-sentence included) and length_method (discard or truncate, MLPerf's words; none
//     where nothing was cut, as in evaluation splits).
// A split is small next to images (WMT17 en-de: 4.5M pairs, about 1 GB of ids), so a reader holds
// it in memory: open_translation_split reads and checks every shard up front, each error naming
// the file and the sentence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scaletrain/data/manifest.hpp"

namespace scaletrain::data {

constexpr const char* kTaskTranslation = "translation";
// The reference's max_length: pairs with a side longer than this (end of sentence included) are
// discarded from training.
constexpr int64_t kReferenceMaxLength = 256;

// What every shard of a dataset shares: its vocabulary and how its sentences were cut.
struct TranslationVocabulary {
  std::string tokenizer;  // text::kSubwordTokenizerName
  std::string text;       // the vocabulary file's bytes
  int64_t size = 0;       // subtokens, ids [0, size)
  std::string source_language, target_language;
  int64_t max_length = kReferenceMaxLength;
  std::string length_method = "discard";  // or "truncate"; "none": nothing cut (max_length = the longest)
};

// Sentence pairs as flat ids with offsets (the shards' layout, in memory).
struct SentencePairs {
  std::vector<int32_t> source_tokens, target_tokens;
  std::vector<int64_t> source_offsets{0}, target_offsets{0};
  int64_t size() const { return static_cast<int64_t>(source_offsets.size()) - 1; }
  int64_t source_length(int64_t i) const { return source_offsets[i + 1] - source_offsets[i]; }
  int64_t target_length(int64_t i) const { return target_offsets[i + 1] - target_offsets[i]; }
  const int32_t* source(int64_t i) const { return source_tokens.data() + source_offsets[i]; }
  const int32_t* target(int64_t i) const { return target_tokens.data() + target_offsets[i]; }
  void add(const std::vector<int32_t>& source, const std::vector<int32_t>& target);
};

struct TranslationSplit {
  std::string dir;                            // e.g. DATA/train
  std::vector<std::string> shards;            // paths, in name order
  std::vector<int64_t> shard_rows;            // sentence pairs of each shard
  std::optional<Manifest> manifest;           // when the split has one (sizes checked on open)
  std::vector<std::string> unchecked_shards;  // unchecksummed metadata, not in the manifest (manifest.hpp)
  TranslationVocabulary vocabulary;
  SentencePairs pairs;
};

// Opens and checks every shard of DATA/<split>. Throws scaletrain::Error naming the file for: a
// missing directory or no *.h5 shards, a shard of another task or version, a missing attribute
// or dataset, a wrong dtype, offsets that do not start at 0, go backwards or do not end at the
// token count, source and target of different sentence counts, an id outside the vocabulary or
// a padding id inside a sentence (with the sentence's index in the file), an empty sentence (no
// token before the end of sentence), one without its end-of-sentence id or longer than
// max_length, a vocabulary the tokenizer cannot read or whose size is not vocab_size, shards
// whose vocabularies or attributes differ, and an empty split.
TranslationSplit open_translation_split(const std::string& dataset_dir, const std::string& split);

// Two splits of one dataset (train and val) use the same vocabulary and languages; throws naming
// both directories.
void check_same_vocabulary(const TranslationSplit& a, const TranslationSplit& b);

// Writes pairs [begin, end) to `path.tmp`, then renames it (a reader never sees a half-written
// shard). Checks what open_translation_split checks first.
void write_translation_shard(const std::string& path, const TranslationVocabulary& vocabulary,
                             const SentencePairs& pairs, int64_t begin, int64_t end);

// Writes OUTPUT/<split> in min(shards, pairs) shards of consecutive pairs; shard i is written by
// this process when i % ranks == rank. OUTPUT/<split> must exist.
void write_translation_split(const std::string& output, const std::string& split,
                             const TranslationVocabulary& vocabulary, const SentencePairs& pairs, int64_t shards,
                             int rank, int ranks);

}  // namespace scaletrain::data
