// `attnlab eval --checkpoint <run dir or checkpoint> --data <val shards> [--tokens N]`
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"
#include "attnlab/device.h"
#include "attnlab/evaluate.h"
#include "attnlab/shards.h"
#include "commands.h"

namespace attnlab::cli {

void add_eval_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, data, device = "auto";
    int64_t tokens = 131072, batch_size = 8, seq_len = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("eval", "Validation loss (nats/token) of a checkpoint on any shards");
  cmd->add_option("--checkpoint", args->checkpoint, "Run directory (newest good checkpoint), checkpoint directory or model.safetensors")
      ->required();
  cmd->add_option("--data", args->data, "Glob of llm.c-format shards to evaluate on")->required();
  cmd->add_option("--tokens", args->tokens, "Tokens to evaluate (first N of the shards)")->capture_default_str()
      ->check(positive());
  cmd->add_option("--batch-size", args->batch_size, "Sequences per batch")->capture_default_str()->check(positive());
  cmd->add_option("--seq-len", args->seq_len, "Sequence length (default: the run's train.seq_len, else block_size)")
      ->check(positive());
  cmd->add_option("--device", args->device, "auto | cpu | cuda")->capture_default_str();
  cmd->callback([args] {
    std::vector<std::string> warnings;
    auto loaded = load_model(args->checkpoint, &warnings);
    for (const auto& w : warnings) spdlog::warn("{}", w);
    int64_t seq_len = args->seq_len;
    if (seq_len <= 0) seq_len = loaded.config.contains("train") ? loaded.config["train"].value("seq_len", int64_t{0}) : 0;
    if (seq_len <= 0) seq_len = loaded.model_config.block_size;
    auto shards = std::make_shared<const ShardSet>(ShardSet::open(args->data, loaded.model_config.vocab_size));
    ValidationSet val(shards, seq_len, args->tokens);
    const auto device = resolve_device(args->device);
    loaded.model->to(device);
    const double loss = evaluate(*loaded.model, val, args->batch_size, device, device.is_cuda());
    std::cout << fmt::format("{}: step {}, arm {}: val loss {:.6f} nats/token over {} tokens of {}\n",
                             loaded.source.string(), loaded.step, loaded.model_config.arm, loss, val.num_targets(),
                             args->data);
  });
}

}  // namespace attnlab::cli
