#include "probe_input.h"

#include <cmath>
#include <fstream>
#include <memory>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "attnlab/device.h"
#include "attnlab/shards.h"
#include "attnlab/version.h"

namespace attnlab::cli {
namespace fs = std::filesystem;

namespace {

fs::path checkpoint_directory(const fs::path& path) {
  if (path.filename() == "state.json") return path.parent_path();
  if (fs::exists(path / "state.json")) return path;
  const auto all = list_checkpoints(path);
  if (all.empty()) throw CheckpointError(path, "is neither a checkpoint directory nor a run directory with checkpoints");
  return all.back().dir;
}

}  // namespace

ProbeInput open_probe(const ProbeArgs& args) {
  if (args.batches < 1 || args.batch_size < 1) throw std::invalid_argument("--batches and --batch-size must be positive");
  ProbeInput in;
  const fs::path dir = checkpoint_directory(args.checkpoint);
  in.has_optimizer = fs::exists(dir / "optimizer.safetensors");
  if (!in.has_optimizer) spdlog::warn("{}: no optimizer.safetensors; preconditioned quantities are null", dir.string());
  in.ckpt = load_checkpoint(dir, in.has_optimizer);
  in.model = GPT(in.ckpt.model_config);
  restore_model(in.ckpt, *in.model);
  const auto device = resolve_device(args.device);
  in.model->to(device);
  in.model->eval();

  const auto& config = in.ckpt.state.config;
  std::string data = args.data;
  if (data.empty() && config.contains("data")) data = config["data"].value("val", "");
  if (data.empty()) throw std::invalid_argument("--data: the checkpoint's config names no validation shards; pass --data");
  int64_t seq_len = args.seq_len;
  if (seq_len <= 0 && config.contains("train")) seq_len = config["train"].value("seq_len", int64_t{0});
  if (seq_len <= 0) seq_len = in.ckpt.model_config.block_size;

  auto shards = std::make_shared<const ShardSet>(ShardSet::open(data, in.ckpt.model_config.vocab_size));
  const int64_t sequences = args.batches * args.batch_size;
  ValidationSet val(shards, seq_len, sequences * seq_len + 1);
  if (val.num_sequences() < sequences)
    throw std::invalid_argument(data + ": " + std::to_string(val.num_sequences()) + " validation sequences of " +
                                std::to_string(seq_len) + " tokens, fewer than --batches x --batch-size = " +
                                std::to_string(sequences));
  for (int64_t b = 0; b < args.batches; ++b) in.batches.push_back(val.batch(b, args.batch_size));

  in.provenance = {{"checkpoint", fs::absolute(dir).string()},
                   {"step", in.ckpt.state.step},
                   {"arm", in.ckpt.model_config.arm},
                   {"seed", config.value("seed", uint64_t{0})},
                   {"tier", config.value("tier", std::string())},
                   {"data", data},
                   {"val_fingerprint", val.fingerprint()},
                   {"batches", args.batches},
                   {"batch_size", args.batch_size},
                   {"seq_len", seq_len},
                   {"device", device_name(device)},
                   {"optimizer_state", in.has_optimizer},
                   {"attnlab_revision", git_revision()},
                   {"layer_convention",
                    "residual stream after block l, before the final LayerNorm; l = 0 is the embedding output"}};
  if (in.ckpt.state.extra.contains("parent")) in.provenance["parent"] = in.ckpt.state.extra["parent"];
  return in;
}

void write_output(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir);
  std::ofstream out(dir / name);
  out << text;
  out.close();
  if (!out) throw std::runtime_error((dir / name).string() + ": cannot write");
  spdlog::info("wrote {}", (dir / name).string());
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace attnlab::cli
