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

/// decode_ids() as the ids come: one text_codec.py process (`stream`) reads them and writes their
/// text to our stdout, flushed as soon as it is whole (an id that ends inside a UTF-8 character or a
/// piece whose spacing its successor decides waits for the next one), so a long generation prints
/// from its first token. The text written is decode_ids() of all the ids (tests/unit/test_text_codec.py).
class DecodeStream {
 public:
  /// Starts the process. Throws as encode_text() does.
  explicit DecodeStream(const TextCodec& codec);
  DecodeStream(const DecodeStream&) = delete;
  DecodeStream& operator=(const DecodeStream&) = delete;
  ~DecodeStream();  ///< ends the process, when finish() was not called, without throwing
  /// Hands `id` on. Throws std::runtime_error when the process has stopped reading (it failed, its
  /// message on stderr, or our stdout was closed).
  void add(int64_t id);
  /// Ends the input, so the rest is written, and waits. Throws std::runtime_error when it failed.
  void finish();

 private:
  int input_ = -1;
  int pid_ = -1;
  std::string script_;
};

}  // namespace attnlab
