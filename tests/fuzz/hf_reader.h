// The import-hf reader under fuzzing (docs/fuzzing.md, target `import_hf`): a Hugging Face directory
// imported as `attnlab import-hf DIR --out RUN` does, then RUN's model opened as every command opens
// it. Apart from readers.h because it needs LibTorch, which the libFuzzer build (libfuzzer/) has not.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/hf_interop.h"
#include "attnlab/trained_run.h"
#include "fuzz/readers.h"

namespace attnlab::fuzz {

// Accepted: the model's dimensions and flags, and the sum of its parameters in float64 (each
// parameter holds a Hugging Face tensor's values in another layout, or zeros, so the sum is the
// placed tensors' sum, which the target computes from the files). Refused: CheckpointError. An
// import that writes a run whose model does not open is Broken.
inline json read_import_hf(const std::string& input) {
  const std::filesystem::path run = input + ".run";
  std::filesystem::remove_all(run);
  const auto imported = import_hf(input, run);
  LoadedModel loaded;
  try {
    loaded = open_model(run);
  } catch (const std::exception& e) {
    throw Broken(std::string("the imported run does not open: ") + e.what());
  }
  double sum = 0;
  for (const auto& p : loaded.model->parameters()) sum += p.to(torch::kDouble).sum().item<double>();
  const auto& m = loaded.model_config;
  std::filesystem::remove_all(run);
  return {{"model_type", imported.model_type}, {"n_layer", m.n_layer},         {"d_model", m.d_model},
          {"n_head", m.n_head},                 {"vocab_size", m.vocab_size},   {"block_size", m.block_size},
          {"untied_head", m.untied_head},       {"rotary_dims", m.rotary_dims()}, {"sum", sum}};
}

}  // namespace attnlab::fuzz
