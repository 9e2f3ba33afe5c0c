// `attnlab import-hf SOURCE --out RUN [--step N] [--set key=value ...]` (docs/interop.md)
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/hf_interop.h"
#include "commands.h"

namespace attnlab::cli {

void add_import_hf_command(CLI::App& app) {
  struct Args {
    std::string source, out;
    HfImportOptions options;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "import-hf",
      "Import a Hugging Face GPT-2 / GPT-NeoX (Pythia) / attnlab model, or a directory of its revisions (one "
      "sub-directory per step, e.g. step1000/), as a run directory of weights-only checkpoints");
  cmd->add_option("source", args->source, "Model directory (config.json + model.safetensors) or directory of revisions")
      ->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--out", args->out, "New run directory to write")->required();
  cmd->add_option("--step", args->options.step, "Checkpoint step of a single model directory")
      ->capture_default_str()->check(non_negative());
  cmd->add_option("--set", args->options.overrides,
                  "Set a run-config key: --set data.val='shards/*val*.bin' --set optim.weight_decay=0.01 (repeatable; "
                  "model.* comes from config.json)");
  cmd->callback([args] {
    const auto r = import_hf(args->source, args->out, args->options);
    const auto& m = r.model;
    std::cout << fmt::format("{}: imported {} ({} layers, d_model {}, {} heads, vocab {}, {}{}{}{}) as {} checkpoint(s), "
                             "steps {} .. {}, weights only (no optimizer state)\n",
                             args->out, r.model_type, m.n_layer, m.d_model, m.n_head, m.vocab_size,
                             m.rotary_dims() > 0 ? fmt::format("rotary {} of {} dims", m.rotary_dims(), m.head_dim())
                                                 : std::string("learned positions"),
                             m.parallel_residual ? ", parallel residual" : "", m.untied_head ? ", untied head" : "",
                             m.gelu == GeluKind::erf ? ", erf GELU" : "", r.steps.size(), r.steps.front(), r.steps.back());
  });
}

}  // namespace attnlab::cli
