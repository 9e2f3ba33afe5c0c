// `attnlab sample --checkpoint RUN --prompt TEXT [--tokens N --temperature T --top-k K --seed S]`:
// what a checkpoint generates, decoded with the run's tokenizer (docs/sampling.md).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/device.h"
#include "attnlab/sampler.h"
#include "attnlab/text_codec.h"
#include "attnlab/trained_run.h"
#include "commands.h"
#include "plot_paths.h"

namespace attnlab::cli {
namespace {

// --tokenizer (a tokenizer.json or its directory), else the run's (run_tokenizer, docs/data.md).
TokenizerInfo sample_tokenizer(const std::string& option, const LoadedModel& loaded) {
  if (!option.empty()) {
    const std::filesystem::path p(option);
    auto dir = p.filename() == "tokenizer.json" ? p.parent_path() : p;
    if (dir.empty()) dir = ".";
    if (!std::filesystem::exists(dir / "tokenizer.json"))
      throw std::runtime_error("--tokenizer " + option + ": no tokenizer.json there");
    return read_tokenizer_info(dir.string());
  }
  try {
    return run_tokenizer(loaded.config, loaded.model_config.vocab_size);
  } catch (const DataError& e) {
    throw std::runtime_error(fmt::format("{} (the run's shards, relative to where it was trained); run from there or "
                                         "pass --tokenizer DIR_OR_TOKENIZER_JSON",
                                         e.what()));
  }
}

}  // namespace

void add_sample_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, prompt, tokenizer, device = "auto", python;
    int64_t tokens = 200, top_k = 0;
    double temperature = 1.0;
    uint64_t seed = 1;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("sample", "Text a checkpoint generates from a prompt (KV-cache decoding)");
  cmd->add_option("--checkpoint", args->checkpoint, "Run directory (newest good checkpoint), checkpoint directory or model.safetensors")
      ->required();
  cmd->add_option("--prompt", args->prompt, "Text to continue (empty: start a new document)");
  cmd->add_option("--tokens", args->tokens, "Tokens to generate")->capture_default_str()->check(non_negative());
  cmd->add_option("--temperature", args->temperature, "Softmax temperature; 0 = greedy")
      ->capture_default_str()->check(non_negative());
  cmd->add_option("--top-k", args->top_k, "Sample among the k most likely tokens; 0 = all")
      ->capture_default_str()->check(non_negative());
  cmd->add_option("--seed", args->seed, "Seed of the draws: the same seed, the same text")
      ->check(non_negative())->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json (or its directory) to use instead of the run's (docs/data.md)");
  cmd->add_option("--device", args->device, "auto | cpu | cuda")->capture_default_str();
  cmd->add_option("--python", args->python, "Python with tiktoken/sentencepiece (default: the project's venv)");
  cmd->callback([args] {
    // The text alone on stdout (`attnlab sample ... > out.txt`); what is said about it on stderr.
    log_to_stderr("sample");
    auto loaded = open_model(args->checkpoint);
    TextCodec codec{args->python.empty() ? venv_python() : std::filesystem::path(args->python),
                    source_tool("text_codec.py"), sample_tokenizer(args->tokenizer, loaded)};
    if (codec.tokenizer.tokenizer == "unknown")  // ids alone cannot become text: which tokenizer made them is not known
      throw std::runtime_error("the run's tokenizer is unknown (no tokenizer.json beside its shards" +
                               (codec.tokenizer.dir.empty() ? std::string() : " in " + codec.tokenizer.dir) +
                               ", and its vocab_size is not GPT-2's; docs/data.md): its token ids have no known "
                               "text; pass --tokenizer DIR_OR_TOKENIZER_JSON");
    if (codec.tokenizer.tokenizer == "synthetic")
      throw std::runtime_error(codec.tokenizer.file + " describes a synthetic task (tools/synthetic_bb.py): its token "
                               "ids have no text to sample; probe or eval the run instead");
    check_vocab(codec.tokenizer, loaded.model_config.vocab_size);

    // A document starts after the separator in every shard prepare_data.py writes, so the prompt does too.
    std::vector<int64_t> context;
    if (codec.tokenizer.eot >= 0) context.push_back(codec.tokenizer.eot);
    const auto prompt = args->prompt.empty() ? std::vector<int64_t>{} : encode_text(codec, args->prompt);
    context.insert(context.end(), prompt.begin(), prompt.end());
    if (context.empty())
      throw std::runtime_error("an empty prompt needs the tokenizer's document separator (tokenizer.json \"eot\"); give --prompt");

    const auto device = resolve_device(args->device);
    loaded.model->to(device);
    SamplingOptions options{args->tokens, args->temperature, args->top_k, args->seed};
    spdlog::info("sample: {} (step {}, arm {}), {} prompt tokens, {} new, temperature {}, top-k {}, seed {}",
                 loaded.source.string(), loaded.step, loaded.model_config.arm, prompt.size(), args->tokens,
                 args->temperature, args->top_k, args->seed);
    // Each token's text as soon as it is generated (a long --tokens prints from the start).
    DecodeStream text(codec);
    for (const auto id : prompt) text.add(id);
    generate_each(*loaded.model, context, options, [&](int64_t id) { text.add(id); });
    text.finish();
    std::cout << "\n";
  });
}

}  // namespace attnlab::cli
