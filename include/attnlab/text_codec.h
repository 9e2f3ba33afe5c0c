// Text <-> token ids for `attnlab sample`, through tools/text_codec.py run by the project's Python:
// the tokenizer libraries tools/prepare_data.py wrote the shards with (tiktoken for GPT-2 BPE,
// sentencepiece, or UTF-8 bytes), so a prompt is split exactly as the training text was and no BPE
// is re-implemented here (docs/sampling.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attnlab/shards.h"

namespace attnlab {

struct TextCodec {
  std::filesystem::path python;  ///< an interpreter with tiktoken and sentencepiece (the project's venv)
  std::filesystem::path script;  ///< tools/text_codec.py
  TokenizerInfo tokenizer;       ///< the run's (tokenizer.json beside its shards)
};

/// Token ids of `text`, without a document separator. Throws std::runtime_error naming what is
/// missing (the Python, the script) or that the script failed (its own message is on stderr).
std::vector<int64_t> encode_text(const TextCodec& codec, const std::string& text);

/// UTF-8 text of `ids`; each tokenizer.eot id is shown as <|endoftext|>. Throws as encode_text().
std::string decode_ids(const TextCodec& codec, const std::vector<int64_t>& ids);

}  // namespace attnlab
