// `attnlab eval --checkpoint <run dir or checkpoint> [--data <val shards>] [--tokens N]`
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/evaluate.h"
#include "attnlab/trained_run.h"
#include "commands.h"

namespace attnlab::cli {

void add_eval_command(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    OpenOptions open;
  };
  auto args = std::make_shared<Args>();
  args->open.tokens.tokens = 131072;
  args->open.autocast = true;  // bf16 autocast on CUDA, so the first-use self-check is of bfloat16 attention
  auto* cmd = app.add_subcommand("eval", "Validation loss (nats/token) of a checkpoint on any shards");
  cmd->add_option("--checkpoint", args->checkpoint, "Run directory (newest good checkpoint), checkpoint directory or model.safetensors")
      ->required();
  cmd->add_option("--data", args->open.tokens.data, "Glob of llm.c-format shards to evaluate on (default: the run's data.val)");
  cmd->add_option("--tokens", args->open.tokens.tokens, "Tokens to evaluate (first N of the shards)")->capture_default_str()
      ->check(positive());
  cmd->add_option("--batch-size", args->open.tokens.batch_size, "Sequences per batch")->capture_default_str()->check(positive());
  cmd->add_option("--seq-len", args->open.tokens.length, "Sequence length (default: the run's train.seq_len)")
      ->check(positive());
  cmd->add_option("--device", args->open.device, "auto | cpu | cuda (bf16 autocast on CUDA)")->capture_default_str();
  cmd->callback([args] {
    auto run = open_trained(args->checkpoint, args->open);
    const auto& p = run.provenance;
    const double loss = evaluate(*run.model, *run.validation, p.batch_size, run.device, run.autocast);
    std::cout << fmt::format("{}: step {}, arm {}: val loss {:.6f} nats/token over {} tokens of {}\n", p.checkpoint,
                             p.step, p.arm, loss, run.validation->num_targets(), p.data);
  });
}

}  // namespace attnlab::cli
