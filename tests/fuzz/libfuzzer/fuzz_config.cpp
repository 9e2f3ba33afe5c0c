// libFuzzer target: the input is a run config file (docs/fuzzing.md). A refusal must be a
// ConfigError; an accepted config must pass readers.h's checks (JSON-writable, read back identically
// from its resolved YAML); anything else aborts, which libFuzzer reports with the input.
#include <cstdlib>
#include <iostream>

#include "fuzz/readers.h"
#include "input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = attnlab::fuzz::scratch_dir() + "/run.yaml";
  attnlab::fuzz::write_bytes(path, data, size);
  try {
    (void)attnlab::fuzz::read_config(path);
  } catch (const attnlab::ConfigError&) {
    // the documented refusal
  } catch (const std::exception& e) {
    std::cerr << "undocumented or broken: " << e.what() << "\n";
    std::abort();
  }
  return 0;
}
