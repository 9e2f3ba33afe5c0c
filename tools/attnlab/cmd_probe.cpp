// `attnlab probe --checkpoint <run or file> [--data <val shards>] [--sequences N --length T --seed S]
// [--trigger-tokens 3,7]`
// and `attnlab inject ... --kind K --cutoff C --eps E,... [--blocks all|i,j] [--seed S]`: the
// trained-model measurements of SPEC section 4 (docs/probes.md).
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "attnlab/probe_run.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"
#include "commands.h"

namespace attnlab::cli {
namespace {

struct CommonArgs {
  std::string checkpoint, data, device = "cpu", out;
  int64_t sequences = 32, length = 0, batch_size = 8;
  bool quiet = false;
};

void add_common(CLI::App* cmd, CommonArgs& a) {
  cmd->add_option("--checkpoint", a.checkpoint, "Run directory (newest good checkpoint), checkpoint directory or model.safetensors")
      ->required();
  cmd->add_option("--data", a.data, "Glob of llm.c-format val shards (default: the run's data.val)");
  cmd->add_option("--sequences", a.sequences, "N validation sequences")->capture_default_str()->check(positive());
  cmd->add_option("--length", a.length, "T tokens per sequence (default: the run's train.seq_len)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20).description("at least 2: a first key and a query after it"));
  cmd->add_option("--batch-size", a.batch_size, "Sequences per forward pass")->capture_default_str()->check(positive());
  cmd->add_option("--device", a.device, "auto | cpu | cuda")->capture_default_str();
  cmd->add_option("--out", a.out, "Output directory (default: <run>/probes, else ./probes)");
  cmd->add_flag("--quiet", a.quiet, "No progress lines (they go to stderr, and only when it is a terminal)");
}

ProbeSource source_of(const CommonArgs& a) { return {a.checkpoint, a.data, a.device}; }

// `progress` counts the forward passes while the command runs.
ProbeDataOptions data_of(const CommonArgs& a, Progress& progress) {
  ProbeDataOptions d;
  d.progress = &progress;
  d.sequences = a.sequences;
  d.length = a.length;
  d.batch_size = a.batch_size;
  return d;
}

std::filesystem::path out_dir(const CommonArgs& a) {
  return a.out.empty() ? default_probe_dir(a.checkpoint) : std::filesystem::path(a.out);
}

// "all" -> {} (every block); "0,2" -> {0, 2}. Throws naming the bad entry.
std::vector<int64_t> parse_blocks(const std::string& text) {
  if (text == "all") return {};
  std::vector<int64_t> layers;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    int64_t l = -1;
    try {
      l = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || l < 0)
      throw std::invalid_argument("--blocks: '" + item + "' is not a block index (use 'all' or e.g. 0,2)");
    layers.push_back(l);
  }
  if (layers.empty()) throw std::invalid_argument("--blocks: empty list (use 'all' or e.g. 0,2)");
  return layers;
}

void write_and_print(const std::filesystem::path& dir, const std::map<std::string, std::string>& files,
                     const std::string& markdown_name) {
  write_outputs(dir, files);
  std::cout << files.at(markdown_name);
  std::cout.flush();
  std::cerr << fmt::format("wrote {} files to {}\n", files.size(), dir.string());
}

}  // namespace

void add_probe_command(CLI::App& app) {
  struct Args : CommonArgs {
    int64_t seed = -1;
    std::vector<int64_t> trigger_tokens;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("probe", "First-key mass and its chance, sink rate, phantom mass, read-norm ratio, "
                                          "exposure, gates, value drain, residual peak and outlier statistics per "
                                          "layer and head of a checkpoint (SPEC section 4)");
  add_common(cmd, *args);
  cmd->add_option("--seed", args->seed, "Draw N windows of the val shards with this seed (default: the first N sequences)")
      ->check(non_negative());
  cmd->add_option("--trigger-tokens", args->trigger_tokens,
                  "Token ids of the trigger queries, comma-separated: first-key mass on them against the other "
                  "queries (active and dormant heads; default: none)")
      ->delimiter(',')->check(non_negative());
  cmd->callback([args] {
    log_to_stderr("probe");  // the tables alone on stdout
    Progress progress("probe " + args->checkpoint, "batches", progress_wanted(args->quiet));
    auto data = data_of(*args, progress);
    if (args->seed >= 0) data.seed = uint64_t(args->seed);
    data.trigger_tokens = args->trigger_tokens;
    const auto probe = run_probe(source_of(*args), data);
    write_and_print(out_dir(*args), probe_files(probe), "probe.md");
  });
}

void add_inject_command(CLI::App& app) {
  struct Args : CommonArgs {
    std::string kind = "structured", cutoff = "median", blocks = "all";
    std::vector<double> eps = {0.2, 0.4, 0.8, 1.6};
    uint64_t seed = 0;
    bool per_block = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("inject", "Validation loss with junk added to quiet value reads before any gate, "
                                           "dose by dose (SPEC section 4)");
  add_common(cmd, *args);
  cmd->add_option("--kind", args->kind, "structured | gaussian | gate_direction")->capture_default_str();
  cmd->add_option("--cutoff", args->cutoff, "Quiet reads: below the head's median or p25 read norm")->capture_default_str();
  cmd->add_option("--eps", args->eps, "Doses, comma-separated (junk norm = eps x the head's median read norm)")
      ->delimiter(',')->check(non_negative())->capture_default_str();
  cmd->add_option("--blocks", args->blocks, "Blocks (0-based) whose value reads get junk together: all, or e.g. 0,2")
      ->capture_default_str();
  add_renamed_option(cmd, "--layers", "--blocks", "the 0-based blocks injected together");
  cmd->add_flag("--per-block", args->per_block, "Also inject each of those blocks alone");
  add_renamed_option(cmd, "--per-layer", "--per-block", "each injected block alone", /*is_flag=*/true);
  cmd->add_option("--seed", args->seed, "Seed of the junk draws (the same for every arm)")
      ->check(non_negative())->capture_default_str();
  cmd->callback([args] {
    log_to_stderr("inject");
    InjectOptions o;
    o.kind = name_table<JunkKind>().parse(args->kind, "--kind");
    o.cutoff = name_table<QuietCutoff>().parse(args->cutoff, "--cutoff");
    o.eps = args->eps;
    o.layers = parse_blocks(args->blocks);
    o.per_layer = args->per_block;
    o.seed = args->seed;
    Progress progress("inject " + args->checkpoint, "forward passes", progress_wanted(args->quiet));
    const auto inject = run_inject(source_of(*args), data_of(*args, progress), o);
    write_and_print(out_dir(*args), inject_files(inject), inject_file_stem(o) + ".md");
  });
}

}  // namespace attnlab::cli
