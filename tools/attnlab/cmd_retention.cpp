// `attnlab retention --checkpoint <dir> --out <dir> [--layers 1,2] [--top-k 16] [--batches 4]`:
// G and preconditioned G of every writer row (SPEC section 5) as JSON, Markdown and CSV.
#include <iostream>
#include <memory>

#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"
#include "attnlab/writer_retention.h"
#include "commands.h"

namespace attnlab::cli {

void add_retention_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, out;
    OpenOptions open;
    int64_t batches = 4;
    RetentionOptions retention;
  };
  auto args = std::make_shared<Args>();
  args->retention.top_k = 16;
  auto* cmd = app.add_subcommand("retention", "Retention G and AdamW-preconditioned G of the rows writing each residual channel");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint directory, or a run directory (its newest)")->required();
  cmd->add_option("--out", args->out, "Directory for retention.json, retention.md, retention_weights.csv, retention_biases.csv")
      ->required();
  cmd->add_option("--data", args->open.tokens.data, "Validation shard glob (default: the run's data.val)");
  cmd->add_option("--batches", args->batches, "Validation batches the gradient is averaged over")
      ->capture_default_str()->check(positive());
  cmd->add_option("--batch-size", args->open.tokens.batch_size, "Sequences per batch")->capture_default_str()
      ->check(positive());
  cmd->add_option("--seq-len", args->open.tokens.length, "Tokens per sequence (default: the run's train.seq_len)")
      ->check(positive());
  cmd->add_option("--residuals", args->retention.layers,
                  "Residual states L in [1, n_layer] whose writer rows are measured (after block L; default: all)")
      ->delimiter(',');
  add_renamed_option(cmd, "--layers", "--residuals", "the residual states after blocks L, written by block L's rows");
  cmd->add_option("--top-k", args->retention.top_k, "Channels per layer: the top k by mean |x_c| at the sink; 0 = all")
      ->capture_default_str();
  cmd->add_option("--position", args->retention.position, "Position whose |x_c| ranks the channels (0: the sink token)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--device", args->open.device, "auto | cpu | cuda")->capture_default_str();
  cmd->callback([args] {
    args->open.tokens.sequences = args->batches * args->open.tokens.batch_size;
    args->open.with_optimizer = true;
    auto run = open_trained(args->checkpoint, args->open);
    auto options = args->retention;
    options.weight_decay = run.run_config().optim.weight_decay;
    const auto result = writer_retention(*run.model, run.batches, run.optimizer ? &*run.optimizer : nullptr, options);
    const auto files = retention_files(result, options, run.provenance);
    write_outputs(args->out, files);
    std::cout << files.at("retention.md");
  });
}

}  // namespace attnlab::cli
