// tokenizer.json beside the shards (written by tools/prepare_data.py) and the vocab check.

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/shards.h"

namespace attnlab {
namespace {

TokenizerInfo gpt2_assumption(const std::string& dir) {
  TokenizerInfo info;  // defaults are GPT-2's
  info.assumed = true;
  info.eot = kGpt2VocabSize - 1;  // <|endoftext|>, which llm.c puts before every document
  info.note = fmt::format("{}: no tokenizer.json; assuming GPT-2 BPE (vocab {}), as llm.c's and "
                          "modded-nanogpt's FineWeb shards are", dir, kGpt2VocabSize);
  return info;
}

TokenizerInfo parse(const std::string& file, const nlohmann::json& j) {
  auto bad = [&](const std::string& what) { return DataError(fmt::format("{}: {}", file, what)); };
  if (!j.is_object()) throw bad("not a JSON object");
  if (!j.contains("tokenizer") || !j["tokenizer"].is_string()) throw bad("missing string \"tokenizer\"");
  if (!j.contains("vocab_size") || !j["vocab_size"].is_number_integer()) {
    throw bad("missing integer \"vocab_size\"");
  }
  TokenizerInfo info;
  info.file = file;
  info.tokenizer = j["tokenizer"].get<std::string>();
  if (info.tokenizer != "gpt2" && info.tokenizer != "sentencepiece" && info.tokenizer != "bytes" &&
      info.tokenizer != "hf") {
    throw bad(fmt::format("unknown tokenizer \"{}\" (expected gpt2, sentencepiece, bytes or hf)", info.tokenizer));
  }
  info.vocab_size = j["vocab_size"].get<int64_t>();
  if (info.vocab_size <= 0 || info.vocab_size > 65536) {
    throw bad(fmt::format("vocab_size {} does not fit uint16 tokens (1..65536)", info.vocab_size));
  }
  const auto dir = file.substr(0, file.rfind('/'));
  if (j.contains("model") && j["model"].is_string()) info.model = dir + "/" + j["model"].get<std::string>();
  if (j.contains("source") && j["source"].is_string()) info.source = j["source"].get<std::string>();
  if (j.contains("eot") && j["eot"].is_number_integer()) info.eot = j["eot"].get<int64_t>();
  return info;
}

}  // namespace

TokenizerInfo read_tokenizer_info(const std::string& dir) {
  const std::string file = dir + "/tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return gpt2_assumption(dir);
  std::ifstream in(file);
  if (!in) throw DataError(fmt::format("{}: cannot be read", file));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}: not valid JSON ({})", file, e.what()));
  }
  return parse(file, j);
}

void check_vocab(const TokenizerInfo& info, int64_t model_vocab_size) {
  if (info.vocab_size == model_vocab_size) return;
  if (info.assumed) {
    throw DataError(fmt::format("{} Its vocab_size {} differs from the model's vocab_size {}; write a "
                                "tokenizer.json beside the shards or set the model's vocab_size to {}",
                                info.note + ".", info.vocab_size, model_vocab_size, info.vocab_size));
  }
  throw DataError(fmt::format("{}: tokenizer {} has vocab_size {} but the model's vocab_size is {}",
                              info.file, info.tokenizer, info.vocab_size, model_vocab_size));
}

}  // namespace attnlab
