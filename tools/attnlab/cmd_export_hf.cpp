// `attnlab export-hf --checkpoint RUN --out DIR [--tokenizer auto|none|FILE]` (docs/interop.md)
#include <cstdlib>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "attnlab/hf_interop.h"
#include "attnlab/shards.h"
#include "attnlab/trained_run.h"
#include "commands.h"
#include "plot_paths.h"

namespace attnlab::cli {
namespace {

namespace fs = std::filesystem;

// GPT-2's BPE ranks where scripts/setup.sh caches them.
fs::path cached_gpt2_vocabulary() {
  if (const char* file = std::getenv("ATTNLAB_GPT2_TIKTOKEN"); file && *file) return file;
  const char* cache = std::getenv("ATTNLAB_CACHE");
  const char* home = std::getenv("HOME");
  const fs::path root = cache && *cache ? fs::path(cache) : fs::path(home ? home : "") / ".cache/attnlab";
  return root / "gpt2" / "gpt2.tiktoken";
}

// "auto": GPT-2's files when the run's tokenizer (run_tokenizer, docs/data.md) is GPT-2 BPE.
fs::path tokenizer_file(const std::string& choice, const LoadedModel& loaded, const TokenizerInfo& info) {
  if (choice == "none") return {};
  if (choice != "auto") return choice;
  if (loaded.model_config.vocab_size != kGpt2VocabSize) {
    spdlog::info("no tokenizer files: vocab_size {} is not GPT-2's; give lm-eval a tokenizer (docs/interop.md)",
                 loaded.model_config.vocab_size);
    return {};
  }
  if (info.tokenizer != "gpt2") {
    spdlog::info("no tokenizer files: the run's shards are {} tokens ({})", info.tokenizer,
                 info.file.empty() ? "no tokenizer.json" : info.file);
    return {};
  }
  const fs::path file = cached_gpt2_vocabulary();
  if (!fs::exists(file)) {
    throw std::invalid_argument("the run used GPT-2 BPE but its vocabulary " + file.string() +
                                " is missing (scripts/setup.sh fetches it); pass --tokenizer FILE or --tokenizer none");
  }
  return file;
}

}  // namespace

void add_export_hf_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, out, tokenizer = "auto", modeling_dir;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "export-hf",
      "Export a checkpoint as a Hugging Face directory: plain GPT-2 / GPT-NeoX for the baseline arm, attnlab's "
      "modeling code (trust_remote_code=True) for every other arm");
  cmd->add_option("--checkpoint", args->checkpoint, "Run directory (newest good checkpoint), checkpoint directory or model.safetensors")
      ->required();
  cmd->add_option("--out", args->out, "New directory to write")->required();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "auto: GPT-2's tokenizer files when the run used GPT-2 BPE (cached by scripts/setup.sh); none; or "
                  "a .tiktoken file of GPT-2's ranks")->capture_default_str();
  cmd->add_option("--modeling-dir", args->modeling_dir,
                  "Directory of configuration_attnlab.py and modeling_attnlab.py (default: python/attnlab_hf of the source tree)");
  cmd->callback([args] {
    const auto loaded = open_model(args->checkpoint);
    HfExportOptions options;
    options.modeling_dir = args->modeling_dir.empty() ? source_tool("../python/attnlab_hf").lexically_normal()
                                                      : fs::path(args->modeling_dir);
    const TokenizerInfo info = run_tokenizer(loaded.config, loaded.model_config.vocab_size);
    options.gpt2_tiktoken = tokenizer_file(args->tokenizer, loaded, info);
    if (info.tokenizer != "unknown" && info.vocab_size == loaded.model_config.vocab_size) options.eot = info.eot;
    const auto r = export_hf(loaded, args->out, options);
    std::cout << fmt::format("{}: {} (step {}, arm {}) exported as {}{}: {}\n", args->out, loaded.source.string(),
                             loaded.step, loaded.model_config.arm, to_string(r.kind),
                             r.kind == HfExportKind::attnlab ? " (load with trust_remote_code=True)" : "",
                             fmt::join(r.files, ", "));
  });
}

}  // namespace attnlab::cli
