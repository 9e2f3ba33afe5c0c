// `attnlab retention --checkpoint <dir> --out <dir> [--layers 1,2] [--top-k 16] [--batches 4]`:
// G and preconditioned G of every writer row (SPEC section 5) as JSON, Markdown and CSV.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/writer_retention.h"
#include "commands.h"
#include "probe_input.h"

namespace attnlab::cli {
namespace {

nlohmann::json row_json(const RetentionRow& r) {
  return {{"layer", r.layer}, {"writer", r.writer}, {"param", r.param}, {"channel", r.channel}, {"rank", r.rank},
          {"sink_abs_x", r.sink_abs_x}, {"norm", r.norm}, {"G", number_or_null(r.G)},
          {"G_pre", r.G_pre ? number_or_null(*r.G_pre) : nlohmann::json()}, {"weight_decay", r.weight_decay}};
}

std::string opt(const std::optional<double>& v, const char* spec = "{:.3e}") {
  return v && std::isfinite(*v) ? fmt::format(fmt::runtime(spec), *v) : "null";
}

std::string csv(const std::vector<RetentionRow>& rows) {
  std::string out = "layer,writer,param,channel,rank,sink_abs_x,norm,G,G_pre,weight_decay\n";
  for (const auto& r : rows)
    out += fmt::format("{},{},{},{},{},{:.9g},{:.9g},{},{},{}\n", r.layer, r.writer, r.param, r.channel, r.rank,
                       r.sink_abs_x, r.norm, opt(r.G, "{:.9g}"), opt(r.G_pre, "{:.9g}"), r.weight_decay);
  return out;
}

std::string markdown(const RetentionResult& res, const nlohmann::json& prov) {
  std::string out = fmt::format(
      "# Writer-row retention\n\n{} (step {}, arm {}, seed {}); {} batch(es) of {} x {} tokens of {}; mean loss {:.4f} "
      "nats/token; AdamW step {}.\n\nG = -<w, grad_w>/||w||^2, G_pre = -<w, m_hat/(sqrt(v_hat)+eps)>/||w||^2; a row "
      "grows under AdamW when G_pre > lambda. Writer row of channel c = weight[c, :] of the block's attention "
      "out-projection (attn) or MLP down-projection (mlp); layer L = residual after block L.\n\n",
      prov["checkpoint"].get<std::string>(), prov["step"].get<int64_t>(), prov["arm"].get<std::string>(),
      prov["seed"].dump(), res.batches, prov["batch_size"].get<int64_t>(), prov["seq_len"].get<int64_t>(),
      prov["data"].get<std::string>(), res.mean_loss, res.optimizer_step ? std::to_string(*res.optimizer_step) : "null");
  for (const auto* rows : {&res.weights, &res.biases}) {
    out += rows == &res.weights ? "## Weight rows\n\n" : "\n## Bias entries (not decayed)\n\n";
    out += "| layer | writer | rank | channel | mean abs x_c | norm | G | G_pre | lambda | G_pre > lambda |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& r : *rows)
      out += fmt::format("| {} | {} | {} | {} | {:.3g} | {:.3g} | {} | {} | {} | {} |\n", r.layer, r.writer, r.rank,
                         r.channel, r.sink_abs_x, r.norm, opt(r.G), opt(r.G_pre), r.weight_decay,
                         r.G_pre ? (*r.G_pre > r.weight_decay ? "yes" : "no") : "");
  }
  return out;
}

}  // namespace

void add_retention_command(CLI::App& app) {
  struct Args {
    ProbeArgs probe;
    std::vector<int64_t> layers;
    int64_t top_k = 16, position = 0;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  args->probe.batches = 4;
  auto* cmd = app.add_subcommand("retention", "Retention G and AdamW-preconditioned G of the rows writing each residual channel");
  cmd->add_option("--checkpoint", args->probe.checkpoint, "Checkpoint directory, or a run directory (its newest)")->required();
  cmd->add_option("--out", args->out, "Directory for retention.json, retention.md, retention_weights.csv, retention_biases.csv")
      ->required();
  cmd->add_option("--data", args->probe.data, "Validation shard glob (default: the run's data.val)");
  cmd->add_option("--batches", args->probe.batches, "Validation batches the gradient is averaged over")->capture_default_str();
  cmd->add_option("--batch-size", args->probe.batch_size, "Sequences per batch")->capture_default_str();
  cmd->add_option("--seq-len", args->probe.seq_len, "Tokens per sequence (default: the run's train.seq_len)")
      ->check(positive());
  cmd->add_option("--layers", args->layers, "Residual layers L in [1, n_layer] (default: all)")->delimiter(',');
  cmd->add_option("--top-k", args->top_k, "Channels per layer: the top k by mean |x_c| at the sink; 0 = all")
      ->capture_default_str();
  cmd->add_option("--position", args->position, "Position whose |x_c| ranks the channels (0: the sink token)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--device", args->probe.device, "auto | cpu | cuda")->capture_default_str();
  cmd->callback([args] {
    auto in = open_probe(args->probe);
    RetentionOptions o;
    o.layers = args->layers;
    o.top_k = args->top_k;
    o.position = args->position;
    o.weight_decay = in.ckpt.state.config.contains("optim") ? in.ckpt.state.config["optim"].value("weight_decay", 0.0) : 0.0;
    const auto res = writer_retention(*in.model, in.batches, in.has_optimizer ? &in.ckpt : nullptr, o);
    nlohmann::json weights = nlohmann::json::array(), biases = nlohmann::json::array();
    for (const auto& r : res.weights) weights.push_back(row_json(r));
    for (const auto& r : res.biases) biases.push_back(row_json(r));
    const nlohmann::json doc = {
        {"provenance", in.provenance},
        {"definition", "G = -<w, grad_w>/||w||^2 (grad_w averaged over the batches); G_pre uses "
                       "m_hat/(sqrt(v_hat)+eps) of the checkpoint's AdamW state, null without it; writer row of "
                       "channel c = weight[c, :] of h.<L-1>.attn.c_proj / h.<L-1>.mlp.c_proj"},
        {"top_k", args->top_k},
        {"position", args->position},
        {"mean_loss", res.mean_loss},
        {"optimizer_step", res.optimizer_step ? nlohmann::json(*res.optimizer_step) : nlohmann::json()},
        {"weights", weights},
        {"biases", biases}};
    const std::string md = markdown(res, in.provenance);
    write_output(args->out, "retention.json", doc.dump(2) + "\n");
    write_output(args->out, "retention.md", md);
    write_output(args->out, "retention_weights.csv", csv(res.weights));
    write_output(args->out, "retention_biases.csv", csv(res.biases));
    std::cout << md;
  });
}

}  // namespace attnlab::cli
