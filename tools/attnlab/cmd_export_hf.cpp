// `attnlab export-hf --checkpoint RUN --out DIR [--tokenizer auto|none|FILE] [--python PY]` (docs/interop.md)
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

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

constexpr int64_t kBytesVocabSize = 257;  // tools/prepare_data.py's bytes: UTF-8 bytes 0..255, separator 256

// GPT-2's BPE ranks where scripts/setup.sh caches them.
fs::path cached_gpt2_vocabulary() {
  if (const char* file = std::getenv("ATTNLAB_GPT2_TIKTOKEN"); file && *file) return file;
  const char* cache = std::getenv("ATTNLAB_CACHE");
  const char* home = std::getenv("HOME");
  const fs::path root = cache && *cache ? fs::path(cache) : fs::path(home ? home : "") / ".cache/attnlab";
  return root / "gpt2" / "gpt2.tiktoken";
}

// GPT-2's files for --tokenizer auto, when the run's tokenizer is GPT-2 BPE; empty (logged) when it is not.
fs::path gpt2_files(const LoadedModel& loaded) {
  if (loaded.model_config.vocab_size != kGpt2VocabSize) {
    spdlog::info("no tokenizer files: the run used GPT-2 BPE but vocab_size {} is not GPT-2's", loaded.model_config.vocab_size);
    return {};
  }
  const fs::path file = cached_gpt2_vocabulary();
  if (!fs::exists(file)) {
    throw std::invalid_argument("the run used GPT-2 BPE but its vocabulary " + file.string() +
                                " is missing (scripts/setup.sh fetches it); pass --tokenizer FILE or --tokenizer none");
  }
  return file;
}

// A fast tokenizer for the run's SentencePiece or bytes tokens (tools/hf_tokenizer.py); none (logged)
// for a tokenizer.json that names no SentencePiece model or a bytes vocabulary not prepare_data.py's.
std::optional<HfFastTokenizer> fast_tokenizer(const TokenizerInfo& info, const std::string& python) {
  HfFastTokenizer spec{info.tokenizer, info.model, info.eot, python.empty() ? venv_python() : fs::path(python),
                       source_tool("hf_tokenizer.py")};
  if (info.tokenizer == "bytes" && info.vocab_size != kBytesVocabSize) {
    spdlog::info("no tokenizer files: {} says bytes with vocab_size {}, not tools/prepare_data.py's {} (bytes + separator)",
                 info.file, info.vocab_size, kBytesVocabSize);
    return std::nullopt;
  }
  if (info.tokenizer == "sentencepiece" && info.model.empty()) {
    spdlog::info("no tokenizer files: {} names no SentencePiece model", info.file);
    return std::nullopt;
  }
  if (info.tokenizer == "sentencepiece" && !fs::exists(info.model)) {
    throw std::invalid_argument("the run's SentencePiece model " + info.model + " (named by " + info.file +
                                ") is missing; run export-hf from where the run was trained, or pass --tokenizer none");
  }
  return spec;
}

// --tokenizer: "auto" follows the run's tokenizer (run_tokenizer, docs/data.md, "The run's tokenizer").
void choose_tokenizer(const std::string& choice, const std::string& python, const LoadedModel& loaded,
                      const TokenizerInfo& info, HfExportOptions& options) {
  if (choice == "none") return;
  if (choice != "auto") {
    options.gpt2_tiktoken = choice;
    return;
  }
  if (info.tokenizer == "gpt2") {
    options.gpt2_tiktoken = gpt2_files(loaded);
  } else if (info.tokenizer == "sentencepiece" || info.tokenizer == "bytes") {
    check_vocab(info, loaded.model_config.vocab_size);
    options.fast_tokenizer = fast_tokenizer(info, python);
  } else if (info.tokenizer == "synthetic") {
    spdlog::info("no tokenizer files: {} describes a synthetic task, whose ids have no text", info.file);
  } else if (info.tokenizer == "hf") {
    spdlog::info("no tokenizer files: the run's shards are a transformers tokenizer's tokens ({}); copy that "
                 "tokenizer's files into the export, or give lm-eval tokenizer=ITS_DIRECTORY (docs/interop.md)",
                 info.file);
  } else {
    spdlog::info("no tokenizer files: the run's tokenizer is unknown (no tokenizer.json beside its shards, and "
                 "vocab_size {} is not GPT-2's); give lm-eval a tokenizer (docs/interop.md)",
                 loaded.model_config.vocab_size);
  }
}

}  // namespace

void add_export_hf_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, out, tokenizer = "auto", modeling_dir, python;
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
                  "auto: the run's tokenizer (GPT-2's files for GPT-2 BPE, cached by scripts/setup.sh; a fast "
                  "tokenizer.json for SentencePiece or bytes); none; or a .tiktoken file of GPT-2's ranks")
      ->capture_default_str();
  cmd->add_option("--python", args->python,
                  "Python with tokenizers, transformers, sentencepiece and protobuf, for a SentencePiece or bytes "
                  "tokenizer (default: the project's venv)");
  cmd->add_option("--modeling-dir", args->modeling_dir,
                  "Directory of configuration_attnlab.py and modeling_attnlab.py (default: python/attnlab_hf of the source tree)");
  cmd->callback([args] {
    const auto loaded = open_model(args->checkpoint);
    HfExportOptions options;
    options.modeling_dir = args->modeling_dir.empty() ? source_tool("../python/attnlab_hf").lexically_normal()
                                                      : fs::path(args->modeling_dir);
    const TokenizerInfo info = run_tokenizer(loaded.config, loaded.model_config.vocab_size);
    choose_tokenizer(args->tokenizer, args->python, loaded, info, options);
    if (info.tokenizer != "unknown" && info.vocab_size == loaded.model_config.vocab_size) options.eot = info.eot;
    const auto r = export_hf(loaded, args->out, options);
    std::cout << fmt::format("{}: {} (step {}, arm {}) exported as {}{}: {}\n", args->out, loaded.source.string(),
                             loaded.step, loaded.model_config.arm, to_string(r.kind),
                             r.kind == HfExportKind::attnlab ? " (load with trust_remote_code=True)" : "",
                             fmt::join(r.files, ", "));
  });
}

}  // namespace attnlab::cli
