// Token shards in llm.c's format (SPEC section 6), memory-mapped and validated once at open.
//
// File layout (little-endian):
//   int32 header[256]: [0] = 20240520 (magic), [1] = 1 (version), [2] = number of tokens n, rest 0
//   uint16 tokens[n]
// llm.c's dev/data/fineweb.py and modded-nanogpt's data/cached_fineweb*.py files have exactly this
// layout and load unchanged. The file size must be exactly 1024 + 2 n bytes, and every token must be
// < vocab_size: a bad shard is a DataError naming the file, never a crash or a silent wrap.
//
// Beside the shards, tools/prepare_data.py writes tokenizer.json (docs/data.md):
//   {"tokenizer": "gpt2" | "sentencepiece" | "bytes" | "hf" | "synthetic", "vocab_size": N, "model": "<file>" | null,
//    "source": "...", "eot": <document separator id>, ...}
// Shards without it (llm.c's, modded-nanogpt's, a byte-level corpus made elsewhere) are accepted as
// they are: every token is still checked to be below the model's vocab_size, and a note for the log
// says that the tokenizer is unknown.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnlab {

/// Any problem with token data: a missing, truncated or corrupt shard, a glob matching nothing,
/// a tokenizer that does not fit the model. The message names the file (or pattern) and the fault.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr int32_t kShardMagic = 20240520;      ///< header[0] of llm.c's GPT-2 (uint16) shards
constexpr int32_t kShardVersion = 1;           ///< header[1]
constexpr int64_t kShardHeaderBytes = 256 * 4; ///< 256 int32
constexpr int64_t kGpt2VocabSize = 50257;      ///< GPT-2 BPE's vocabulary (llm.c's FineWeb shards)

/// One shard file, memory-mapped read-only for its lifetime. Move-only.
class Shard {
 public:
  /// Maps `path` and validates header, size and every token (< vocab_size, which must be > 0).
  /// Throws DataError: missing/unreadable file, shorter than the header, wrong magic, wrong version,
  /// negative count, truncated or trailing bytes, "token T at index I >= vocab_size V".
  static Shard open(const std::string& path, int64_t vocab_size);

  Shard(Shard&& other) noexcept;
  Shard& operator=(Shard&& other) noexcept;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  ~Shard();

  const std::string& path() const { return path_; }
  int64_t size() const { return num_tokens_; }  ///< tokens
  const uint16_t* tokens() const { return tokens_; }

 private:
  Shard() = default;
  void unmap() noexcept;

  std::string path_;
  void* map_ = nullptr;
  int64_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
};

/// What tokenized the shards of one directory: its tokenizer.json, or nothing known.
struct TokenizerInfo {
  std::string tokenizer = "unknown";   ///< "gpt2" | "sentencepiece" | "bytes" | "hf" (a transformers tokenizer) |
                                       ///< "synthetic" (a generated task's ids, without text); "unknown": no tokenizer.json
  int64_t vocab_size = 0;              ///< real vocabulary size (the model pads it, not this); 0 when unknown
  std::string model;                   ///< path of the SentencePiece model, "" if none
  std::string source;                  ///< where the text came from (free text)
  int64_t eot = -1;                    ///< document separator id, -1 when unknown
  std::string file;                    ///< the tokenizer.json read, "" when there is none
  std::string dir;                     ///< the directory of the shards
  bool assumed = false;                ///< true: no tokenizer.json; token ids are taken as they are
};

/// Reads `dir`/tokenizer.json; absent: the unknown tokenizer (assumed = true). Throws DataError
/// naming the file when it is unreadable, not JSON, lacks tokenizer / vocab_size, or a field has the
/// wrong type or range (vocab_size in 1..65536, eot in [0, vocab_size), model a string or null).
TokenizerInfo read_tokenizer_info(const std::string& dir);

/// Throws DataError unless info.vocab_size == model_vocab_size, naming both values and the file.
/// Nothing to check for an unknown tokenizer: Shard::open checks every token against the model.
void check_vocab(const TokenizerInfo& info, int64_t model_vocab_size);

/// What differs between two tokenizers in what gives token ids their meaning (kind, vocab_size,
/// eot, the SentencePiece model's bytes; not the free-text source or the file's place), "" when
/// nothing does or either is unknown. Throws DataError naming a SentencePiece model that cannot be
/// read for the comparison.
std::string tokenizer_difference(const TokenizerInfo& a, const TokenizerInfo& b);

/// The tokenizer of the shards `pattern` matches (the tokenizer.json of each matched directory; they
/// must agree), without opening the shards, so a trainer can take the model's vocab_size from the
/// data. Throws DataError naming the pattern when it matches nothing, or both files when they differ.
TokenizerInfo tokenizer_for_pattern(const std::string& pattern);

/// Every shard a glob(3) pattern matches, sorted by path, read as one concatenated token stream.
/// Thread-safe to read from once opened (the mappings are read-only). Move-only.
class ShardSet {
 public:
  /// Expands `pattern`, reads the tokenizer.json of each matched directory (those present must
  /// agree: tokenizer_difference), checks its vocab_size against `model_vocab_size` (check_vocab),
  /// then opens every shard with tokens validated against model_vocab_size. Throws DataError: no
  /// match (naming the pattern), tokenizer mismatch (naming both files), or any Shard::open failure.
  static ShardSet open(const std::string& pattern, int64_t model_vocab_size);

  const std::string& pattern() const { return pattern_; }
  const std::vector<Shard>& shards() const { return shards_; }
  /// The tokenizer of the set: the first tokenizer.json found, else unknown (assumed).
  const TokenizerInfo& tokenizer() const { return tokenizer_; }
  /// The tokenizer of each matched directory, in path order.
  const std::vector<TokenizerInfo>& dir_tokenizers() const { return dir_tokenizers_; }
  /// Lines for the log: what was assumed for each directory without tokenizer.json.
  const std::vector<std::string>& notes() const { return notes_; }
  int64_t num_tokens() const { return total_; }

  /// Copies tokens [start, start + count) of the concatenated stream (may span shards) into `out`,
  /// widened to int64. Throws std::out_of_range when the range leaves [0, num_tokens()).
  void read(int64_t start, int64_t count, int64_t* out) const;

 private:
  ShardSet() = default;

  std::string pattern_;
  std::vector<Shard> shards_;
  std::vector<int64_t> starts_;  ///< global offset of each shard's first token
  TokenizerInfo tokenizer_;
  std::vector<TokenizerInfo> dir_tokenizers_;
  std::vector<std::string> notes_;
  int64_t total_ = 0;
};

/// The train and validation shards of a run, opened and cross-checked.
struct TrainValData {
  std::shared_ptr<const ShardSet> train;
  std::shared_ptr<const ShardSet> val;
  std::vector<std::string> notes;  ///< lines for the trainer's log (directories without tokenizer.json)
  /// The tokenizer both describe: the first tokenizer.json found (train's directories first), else
  /// unknown (assumed); document_separator() reads its `eot`.
  TokenizerInfo tokenizer;
};

/// Opens both sets with ShardSet::open and checks that they share one tokenizer (every
/// tokenizer.json present agrees, wherever it lies), that no file is in both, and that no train
/// file's name contains "val" (SPEC section 6: those are validation). Throws DataError naming the
/// offending file or pattern (both tokenizer.json files when they differ).
TrainValData open_train_val(const std::string& train_pattern, const std::string& val_pattern,
                            int64_t model_vocab_size);

}  // namespace attnlab
