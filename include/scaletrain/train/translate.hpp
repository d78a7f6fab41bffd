// scaletrain translate's work: sentences of text, one a line, to their translations by a trained
// Transformer, decoded as evaluation decodes (the reference's beam search with config's
// --beam-size and --length-penalty, or greedy decoding with --beam-size 1).
#pragma once

#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/text/subword_tokenizer.hpp"
#include "scaletrain/train/config.hpp"

namespace scaletrain::train {

// Each line (UTF-8; stripped of surrounding white space as scaletrain-data strips its text)
// encoded with the tokenizer, the lines in contiguous ranges over the ranks, translated and
// gathered: every rank returns all the translations, in order, one line each. An empty line
// translates to an empty line. Text that is not UTF-8 is an error naming `where` and the line.
// Collective.
std::vector<std::string> translate_lines(const TrainConfig& config, const comm::Communicator& comm, Context& ctx,
                                         models::Network& network, const text::SubwordTokenizer& tokenizer,
                                         const std::vector<std::string>& lines, const std::string& where);

}  // namespace scaletrain::train
