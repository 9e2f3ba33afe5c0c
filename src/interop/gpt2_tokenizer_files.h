// GPT-2's tokenizer files for transformers (vocab.json, merges.txt, tokenizer_config.json) rebuilt from
// a .tiktoken file of BPE ranks, the form scripts/setup.sh caches GPT-2's vocabulary in.
#pragma once

#include <filesystem>
#include <vector>

namespace attnlab::interop {

/// Writes vocab.json, merges.txt and tokenizer_config.json into `dir` (model_max_length = `context`)
/// from `tiktoken_file` (lines "<base64 token bytes> <rank>", ranks 0..N-1); <|endoftext|> gets id N.
/// vocab.json maps each token's bytes, spelled with GPT-2's byte-to-unicode alphabet, to its rank;
/// merges.txt lists, in rank order, the pair of tokens each multi-byte token is merged from (the two
/// parts byte-pair encoding with only the lower ranks leaves). Returns the names written.
/// Throws CheckpointError naming the file for a malformed line, a gap in the ranks or a token no pair
/// of lower-ranked tokens forms.
std::vector<std::string> write_gpt2_tokenizer_files(const std::filesystem::path& tiktoken_file,
                                                    const std::filesystem::path& dir, int64_t context);

}  // namespace attnlab::interop
