// The fuzz harness's driver (docs/fuzzing.md): hands each input to one of attnlab's readers and
// prints one JSON line per input on stdout:
//   {"start": "<input>"}                                         before reading it (a crash or a
//                                                                hang is then pinned to its input)
//   {"input": "<input>", "verdict": "accepted", "summary": {...}} the reader accepted it
//   {"input": "<input>", "verdict": "refused", "error": "..."}   the reader's documented error
//   {"input": "<input>", "verdict": "broken", "error": "..."}    anything else: always a failure
// Usage: fuzz_readers <target> <input>...
// A target is a reader in readers.h and a line in kTargets; tests/fuzz/targets/<name>.py generates
// its inputs and judges the verdicts.
#include <functional>
#include <iostream>
#include <map>
#include <string>

#include "fuzz/hf_reader.h"
#include "fuzz/readers.h"

namespace {

using attnlab::CheckpointError;
using attnlab::ConfigError;
using attnlab::DataError;
using attnlab::fuzz::Broken;
using attnlab::fuzz::json;
using attnlab::fuzz::read_config;
using attnlab::fuzz::read_import_hf;
using attnlab::fuzz::read_shards;

struct Target {
  std::function<json(const std::string&)> read;
  std::function<bool(const std::exception&)> documented;  // the reader's own error type
};

const std::map<std::string, Target> kTargets = {
    {"config", {read_config, [](const std::exception& e) { return dynamic_cast<const ConfigError*>(&e) != nullptr; }}},
    {"shards", {read_shards, [](const std::exception& e) { return dynamic_cast<const DataError*>(&e) != nullptr; }}},
    {"import_hf",
     {read_import_hf, [](const std::exception& e) { return dynamic_cast<const CheckpointError*>(&e) != nullptr; }}},
};

void emit(const json& line) {
  std::cout << line.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;  // flushed: a crash keeps it
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || kTargets.count(argv[1]) == 0) {
    std::cerr << "usage: fuzz_readers <target> <input>...; targets:";
    for (const auto& [name, _] : kTargets) std::cerr << ' ' << name;
    std::cerr << "\n";
    return 2;
  }
  const Target& target = kTargets.at(argv[1]);
  for (int i = 2; i < argc; ++i) {
    const std::string input = argv[i];
    emit({{"start", input}});
    try {
      emit({{"input", input}, {"verdict", "accepted"}, {"summary", target.read(input)}});
    } catch (const Broken& e) {
      emit({{"input", input}, {"verdict", "broken"}, {"error", e.what()}});
    } catch (const std::exception& e) {
      const bool documented = target.documented(e);
      emit({{"input", input},
            {"verdict", documented ? "refused" : "broken"},
            {"error", documented ? std::string(e.what()) : std::string("undocumented exception: ") + e.what()}});
    } catch (...) {
      emit({{"input", input}, {"verdict", "broken"}, {"error", "an exception not derived from std::exception"}});
    }
  }
  return 0;
}
