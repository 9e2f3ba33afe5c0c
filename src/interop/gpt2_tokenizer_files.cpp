#include "interop/gpt2_tokenizer_files.h"

#include <openssl/evp.h>

#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attnlab/checkpoint_error.h"
#include "common/durable_file.h"
#include "common/input_file.h"

namespace attnlab::interop {
namespace {

namespace fs = std::filesystem;
using Ranks = std::unordered_map<std::string, int64_t>;

std::string base64_decode(const std::string& text, const fs::path& file, int64_t line) {
  std::string out(3 * ((text.size() + 3) / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0 || text.size() % 4 != 0) throw CheckpointError(file, "line " + std::to_string(line) + " is not base64");
  size_t padding = 0;  // EVP_DecodeBlock counts '=' padding as zero bytes
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

// Token bytes by rank, checked to be exactly the ranks 0..N-1.
std::vector<std::string> read_ranks(const fs::path& file) {
  if (const auto problem = detail::regular_file_problem(file); !problem.empty()) throw CheckpointError(file, problem);
  std::ifstream in(file);
  if (!in) throw CheckpointError(file, "cannot be read (GPT-2's BPE ranks; scripts/setup.sh caches them)");
  std::map<int64_t, std::string> by_rank;
  std::string token;
  int64_t rank = 0, line = 0;
  for (std::string text; std::getline(in, text);) {
    ++line;
    if (text.empty()) continue;
    const size_t space = text.find(' ');
    try {
      if (space == std::string::npos) throw std::invalid_argument("no rank");
      size_t used = 0;
      rank = std::stoll(text.substr(space + 1), &used);
      if (used != text.size() - space - 1 || rank < 0) throw std::invalid_argument("bad rank");
    } catch (const std::exception&) {
      throw CheckpointError(file, "line " + std::to_string(line) + " is not '<base64> <rank>'");
    }
    if (!by_rank.emplace(rank, base64_decode(text.substr(0, space), file, line)).second)
      throw CheckpointError(file, "rank " + std::to_string(rank) + " appears twice");
  }
  std::vector<std::string> tokens;
  for (const auto& [r, bytes] : by_rank) {
    if (r != static_cast<int64_t>(tokens.size())) throw CheckpointError(file, "rank " + std::to_string(tokens.size()) + " is missing");
    tokens.push_back(bytes);
  }
  if (tokens.empty()) throw CheckpointError(file, "holds no ranks");
  return tokens;
}

// GPT-2's reversible byte -> printable unicode code point map (bytes that print stand for themselves).
std::vector<std::string> byte_alphabet() {
  std::vector<std::string> alphabet(256);
  auto utf8 = [](unsigned cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  unsigned extra = 0;
  for (unsigned b = 0; b < 256; ++b) {
    const bool prints = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    alphabet[b] = utf8(prints ? b : 256 + extra++);
  }
  return alphabet;
}

std::string spell(const std::string& bytes, const std::vector<std::string>& alphabet) {
  std::string out;
  for (unsigned char b : bytes) out += alphabet[b];
  return out;
}

// The two parts byte-pair encoding leaves of `token` when only merges ranked below `rank` may apply:
// the merge that makes `token`.
std::pair<std::string, std::string> merge_of(const std::string& token, int64_t rank, const Ranks& ranks,
                                             const fs::path& file) {
  std::vector<std::string> parts;
  for (char c : token) parts.emplace_back(1, c);
  while (parts.size() > 2) {
    int64_t best = std::numeric_limits<int64_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && it->second < best) best = it->second, at = i;
    }
    if (best >= rank) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  if (parts.size() != 2) throw CheckpointError(file, "token of rank " + std::to_string(rank) + " is not a merge of two lower-ranked tokens");
  return {parts[0], parts[1]};
}

}  // namespace

std::vector<std::string> write_gpt2_tokenizer_files(const fs::path& tiktoken_file, const fs::path& dir, int64_t context) {
  const auto tokens = read_ranks(tiktoken_file);
  const auto alphabet = byte_alphabet();
  Ranks ranks;
  for (size_t r = 0; r < tokens.size(); ++r) ranks.emplace(tokens[r], static_cast<int64_t>(r));

  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  std::string merges = "#version: 0.2\n";
  for (size_t r = 0; r < tokens.size(); ++r) {
    vocab[spell(tokens[r], alphabet)] = r;
    if (tokens[r].size() < 2) continue;
    const auto [left, right] = merge_of(tokens[r], static_cast<int64_t>(r), ranks, tiktoken_file);
    merges += spell(left, alphabet) + " " + spell(right, alphabet) + "\n";
  }
  const std::string eot = "<|endoftext|>";
  vocab[eot] = tokens.size();
  const nlohmann::ordered_json config = {
      {"tokenizer_class", "GPT2Tokenizer"}, {"bos_token", eot}, {"eos_token", eot}, {"unk_token", eot},
      {"add_prefix_space", false},          {"model_max_length", context}};
  detail::write_file_durably(dir / "vocab.json", vocab.dump() + "\n");
  detail::write_file_durably(dir / "merges.txt", merges);
  detail::write_file_durably(dir / "tokenizer_config.json", config.dump(2) + "\n");
  return {"vocab.json", "merges.txt", "tokenizer_config.json"};
}

}  // namespace attnlab::interop
