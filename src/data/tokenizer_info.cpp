// tokenizer.json beside the shards (written by tools/prepare_data.py), the vocab check and the
// comparison of two directories' tokenizers.
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/file_error.h"
#include "attnlab/shards.h"
#include "common/input_file.h"
#include "common/json_read.h"

namespace attnlab {
namespace {

constexpr int64_t kMaxUint16Vocab = 65536;  // tokens are uint16
constexpr int64_t kMaxModelBytes = int64_t{256} << 20;  // SentencePiece models run to a few MB

TokenizerInfo unknown_tokenizer(const std::string& dir) {
  TokenizerInfo info;  // defaults: unknown
  info.dir = dir;
  info.assumed = true;
  return info;
}

TokenizerInfo parse(const std::string& file, const std::string& dir, const nlohmann::json& j) {
  auto bad = [&](const std::string& what) { return DataError(fmt::format("{}: {}", file, what)); };
  if (!j.is_object()) throw bad("not a JSON object");
  if (!j.contains("tokenizer") || !j["tokenizer"].is_string()) throw bad("missing string \"tokenizer\"");
  if (!j.contains("vocab_size") || !j["vocab_size"].is_number_integer()) {
    throw bad("missing integer \"vocab_size\"");
  }
  TokenizerInfo info;
  info.file = file;
  info.dir = dir;
  info.tokenizer = j["tokenizer"].get<std::string>();
  if (info.tokenizer != "gpt2" && info.tokenizer != "sentencepiece" && info.tokenizer != "bytes" &&
      info.tokenizer != "hf" && info.tokenizer != "synthetic") {
    throw bad(fmt::format("unknown tokenizer \"{}\" (expected gpt2, sentencepiece, bytes, hf or synthetic)",
                          info.tokenizer));
  }
  info.vocab_size = j["vocab_size"].get<int64_t>();  // an unsigned value above 2^63 wraps negative: refused
  if (info.vocab_size <= 0 || info.vocab_size > kMaxUint16Vocab) {
    throw bad(fmt::format("vocab_size {} does not fit uint16 tokens (1..65536)", j["vocab_size"].dump()));
  }
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string() || j["model"].get<std::string>().empty())
      throw bad("\"model\": expected a file name or null");
    const auto model = j["model"].get<std::string>();
    info.model = model.front() == '/' ? model : dir + "/" + model;
  }
  if (j.contains("source")) {
    if (!j["source"].is_string()) throw bad("\"source\": expected a string");
    info.source = j["source"].get<std::string>();
  }
  if (j.contains("eot")) {
    if (!j["eot"].is_number_integer()) throw bad("\"eot\": expected an integer token id");
    info.eot = j["eot"].get<int64_t>();
    if (info.eot < 0 || info.eot >= info.vocab_size) {
      throw bad(fmt::format("eot {} outside the vocabulary [0, {})", j["eot"].dump(), info.vocab_size));
    }
  }
  return info;
}

// The bytes of a SentencePiece model named by a tokenizer.json, for comparing two of them.
std::string model_bytes(const TokenizerInfo& info) {
  try {
    return detail::read_regular_file(info.model, kMaxModelBytes);
  } catch (const FileError& e) {
    throw DataError(fmt::format("{} (the SentencePiece model that {} names)", e.what(), info.file));
  }
}

}  // namespace

TokenizerInfo read_tokenizer_info(const std::string& dir) {
  const std::string file = dir + "/tokenizer.json";
  nlohmann::json j;
  try {
    if (!detail::regular_file_exists(file)) return unknown_tokenizer(dir);
    j = detail::read_json_file(file);  // a parse error, deep nesting, a number beyond a double (1e400)
  } catch (const FileError& e) {
    throw DataError(e.what());
  }
  return parse(file, dir, j);
}

void check_vocab(const TokenizerInfo& info, int64_t model_vocab_size) {
  if (info.assumed || info.vocab_size == model_vocab_size) return;
  throw DataError(fmt::format("{}: tokenizer {} has vocab_size {} but the model's vocab_size is {}",
                              info.file, info.tokenizer, info.vocab_size, model_vocab_size));
}

std::string tokenizer_difference(const TokenizerInfo& a, const TokenizerInfo& b) {
  if (a.assumed || b.assumed) return "";
  std::vector<std::string> diffs;
  if (a.tokenizer != b.tokenizer) diffs.push_back(fmt::format("tokenizer {} vs {}", a.tokenizer, b.tokenizer));
  if (a.vocab_size != b.vocab_size) diffs.push_back(fmt::format("vocab_size {} vs {}", a.vocab_size, b.vocab_size));
  if (a.eot >= 0 && b.eot >= 0 && a.eot != b.eot) diffs.push_back(fmt::format("eot {} vs {}", a.eot, b.eot));
  if (a.model.empty() != b.model.empty()) {
    diffs.push_back(fmt::format("a SentencePiece model in {} only", a.model.empty() ? b.file : a.file));
  } else if (!a.model.empty() && a.model != b.model && model_bytes(a) != model_bytes(b)) {
    diffs.push_back(fmt::format("SentencePiece models {} and {} differ", a.model, b.model));
  }
  std::string out;
  for (const auto& d : diffs) out += (out.empty() ? "" : "; ") + d;
  return out;
}

}  // namespace attnlab
