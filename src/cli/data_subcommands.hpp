// Private: scaletrain-data subcommands that live in files of their own. argv[0] is the
// subcommand word (e.g. "imagenet" for `scaletrain-data convert imagenet ...`).
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scaletrain/data/manifest.hpp"

namespace scaletrain {
class Json;
namespace data {
struct RecommendationSplit;
struct TranslationSplit;
}  // namespace data
}  // namespace scaletrain

namespace scaletrain::cli {

// Parses a subcommand's argv (argv[0] is the command word) with the option ranges of
// option_ranges.hpp; usage errors throw UsageError naming `command`. --help prints the usage
// (rank 0) and returns false.
bool parse_data_command(const std::string& command, int argc, char** argv,
                        const boost::program_options::options_description& desc,
                        boost::program_options::variables_map& vm, const char* synopsis,
                        const boost::program_options::positional_options_description* positional = nullptr);

// Writes DIR/<split>/manifest.json for each split (collective: shards hashed over the ranks).
void write_manifests(const std::string& output, const std::vector<std::string>& splits);

// `scaletrain-data verify DIR` and `scaletrain-data manifest DIR` (data_verify.cpp).
int verify_main(int argc, char** argv);
int manifest_main(int argc, char** argv);

// Creates OUTPUT/<split>/ for each split; existing shards are an error unless `overwrite`, in
// which case they are removed. Rank 0 does it; every rank learns the verdict (collective).
void prepare_output(int rank, const std::string& output, const std::vector<std::string>& splits, bool overwrite);

// `scaletrain-data convert imagenet --source DIR --output DIR --encoding raw|jpeg ...`
int convert_imagenet_main(int argc, char** argv);

// `scaletrain-data upgrade SRC --output DST [--overwrite]` (src/cli/data_upgrade.cpp): rewrites a
// dataset in the current format version.
int upgrade_main(int argc, char** argv);

// `scaletrain-data bleu --hypotheses F --references F [--cased] [--json]` (src/cli/data_bleu.cpp).
int bleu_main(int argc, char** argv);

// The recommendation task (src/cli/data_recommendation.cpp): `convert movielens ...`,
// `synthetic --task recommendation ...`, and inspect's text and JSON for such a split.
int convert_movielens_main(int argc, char** argv);
int synthetic_recommendation_main(int argc, char** argv);
void print_recommendation_split(const data::RecommendationSplit& split, bool shards);
// inspect's lines for a split's unchecked shards (data/manifest.hpp); nothing when there are none.
void print_unchecked_shards(const std::vector<std::string>& unchecked);
// What the in-memory tasks' subcommands share (src/cli/data_recommendation.cpp): the manifest's
// line of inspect's text; the JSON list of a split's shards [{"path", "rows"}]; a usage error
// naming the command and option for a value outside [min, max] (`why` completes the message).
void print_manifest_line(const std::optional<data::Manifest>& manifest);
Json shards_json(const std::vector<std::string>& paths, const std::vector<int64_t>& rows);
void require_range(const std::string& command, const char* option, int64_t value, int64_t min, int64_t max,
                   const std::string& why = "");
// This process's rank and the world's size (MPI_COMM_WORLD).
struct Ranks {
  int rank = 0, size = 1;
  Ranks();
};
Json recommendation_split_json(const data::RecommendationSplit& split);

// The translation task (src/cli/data_translation.cpp): `translation ...` (text to shards),
// `synthetic --task translation ...`, and inspect's text and JSON for such a split.
int translation_main(int argc, char** argv);
int synthetic_translation_main(int argc, char** argv);
void print_translation_split(const data::TranslationSplit& split, bool shards);
Json translation_split_json(const data::TranslationSplit& split);

}  // namespace scaletrain::cli
