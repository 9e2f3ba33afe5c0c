// A transformers fast tokenizer (tokenizer.json, tokenizer_config.json) for a run whose tokens are
// SentencePiece's or UTF-8 bytes, written by tools/hf_tokenizer.py with the `tokenizers` library.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "attnlab/hf_interop.h"

namespace attnlab::interop {

/// Runs `spec.script` with `spec.python` to write the fast tokenizer of `spec` into `dir`
/// (model_max_length = `context`; the script refuses a tokenizer of another size than `vocab_size`
/// and a SentencePiece model it cannot reproduce exactly, saying why on stderr). Returns the names
/// of the files written. Throws std::runtime_error naming the Python or the script when one is
/// missing, or the script and its exit code when it fails.
std::vector<std::string> write_fast_tokenizer_files(const HfFastTokenizer& spec, const std::filesystem::path& dir,
                                                    int64_t context, int64_t vocab_size);

}  // namespace attnlab::interop
