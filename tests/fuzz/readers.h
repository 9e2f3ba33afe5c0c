// The readers under fuzzing, as the fuzz harness calls them (docs/fuzzing.md): each reads one input
// and returns a JSON summary of what it read, throws the reader's documented error (ConfigError,
// DataError) when it refuses, or Broken when an accepted input breaks a promise of the readers.
// Shared by the driver (fuzz_readers.cpp, linked with the core library) and the libFuzzer targets
// (libfuzzer/, built without LibTorch), so both judge inputs alike.
#pragma once

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/run_config.h"
#include "attnlab/shards.h"

namespace attnlab::fuzz {

using nlohmann::json;

// Thrown by a target when an accepted input breaks a promise the readers make (a failure).
struct Broken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A run config file: the resolved keys when accepted. Whatever is accepted must be writable by every
// writer and read back identically from the resolved YAML a run stores.
inline json read_config(const std::string& input) {
  const auto cfg = load_run_config(input);
  json summary = to_json(cfg);
  try {
    (void)summary.dump();  // strict UTF-8: the JSON writers of state.json and final.json
  } catch (const json::type_error& e) {
    throw Broken(std::string("accepted a config that JSON cannot write: ") + e.what());
  }
  const std::string resolved = input + ".resolved.yaml";
  std::ofstream(resolved) << to_yaml(cfg);
  RunConfig again;
  try {
    again = load_run_config(resolved);
  } catch (const ConfigError& e) {
    throw Broken(std::string("the resolved YAML of an accepted config is refused: ") + e.what());
  }
  std::remove(resolved.c_str());
  if (!differing_keys(cfg, again).empty() || config_hash(cfg) != config_hash(again))
    throw Broken("the resolved YAML reads back differently: " + json(differing_keys(cfg, again)).dump());
  summary["_total_steps"] = cfg.total_steps();
  summary["_warnings"] = config_warnings(cfg);
  summary["_memory_floor_bytes"] = memory_floor(cfg).total();
  return summary;
}

// A directory holding *.bin shards, maybe tokenizer.json, and vocab.txt (the model's vocab_size):
// the tokens read back, hashed, when accepted.
inline json read_shards(const std::string& input) {
  int64_t vocab = 0;
  std::ifstream(input + "/vocab.txt") >> vocab;
  const auto set = ShardSet::open(input + "/*.bin", vocab);
  std::vector<int64_t> tokens(static_cast<size_t>(set.num_tokens()));
  set.read(0, set.num_tokens(), tokens.data());
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the ids as little-endian uint16
  for (int64_t t : tokens) {
    h = (h ^ static_cast<uint64_t>(t & 0xff)) * 0x100000001b3ULL;
    h = (h ^ static_cast<uint64_t>(t >> 8)) * 0x100000001b3ULL;
  }
  return {{"num_tokens", set.num_tokens()},
          {"shards", set.shards().size()},
          {"fnv1a", h},
          {"tokenizer", set.tokenizer().tokenizer},
          {"vocab_size", set.tokenizer().vocab_size},
          {"notes", set.notes().size()}};
}

}  // namespace attnlab::fuzz
