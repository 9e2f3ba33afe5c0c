// Sweep files: grid expansion into stable names and overrides, per-tier seed lists, the run states
// `--dry-run` prints, the manifest, the Slurm script, and the shipped sweeps.
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attnlab/final_record.h"
#include "attnlab/sweep.h"
#include "unit/forked.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir() / "tiers");
    fs::create_directories(dir() / "sweeps");
    write("base.yaml", "seed: 1\nmodel: {arm: baseline}\ndata: {train: 'x_train_*.bin', val: 'x_val_*.bin'}\n"
                       "train: {batch_size: 2, seq_len: 16, max_steps: 10}\n");
    write("tiers/small.yaml", "tier: small\nmodel: {n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n");
    write("tiers/big.yaml", "tier: big\nmodel: {n_layer: 2, n_head: 2, d_model: 64, block_size: 32, vocab_size: 64}\n");
  }
  fs::path dir() const { return tmp_.path(); }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir() / name) << text;
    return dir() / name;
  }
  // A sweep file in sweeps/, whose output root is <tmp>/out.
  SweepSpec sweep(const std::string& body) {
    return load_sweep(write("sweeps/s.yaml", "base: ../base.yaml\nout: " + (dir() / "out").string() + "\n" + body));
  }
  std::string error_of(const std::string& body) {
    try {
      expand_sweep(sweep(body));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  }
  testing::TempDir tmp_;
};

TEST_F(SweepTest, GridExpandsTierFirstWithStableNamesAndOverrides) {
  const auto spec = sweep("set: {optim.lr: 0.002}\ngrid:\n  model.arm: [baseline, combo2]\n  seed: [1, 2]\n  tier: [small, big]\n");
  const auto runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 8u);
  const std::vector<std::string> names = {"small/baseline/s1", "small/baseline/s2", "small/combo2/s1", "small/combo2/s2",
                                          "big/baseline/s1",   "big/baseline/s2",   "big/combo2/s1",   "big/combo2/s2"};
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].name, names[i]);
  const auto& r = runs[6];  // big/combo2/s1
  EXPECT_EQ(r.out_dir, dir() / "out/big/combo2/s1");
  EXPECT_EQ(r.config, dir() / "out/configs/big.yaml");
  EXPECT_EQ(r.includes, (std::vector<std::string>{(dir() / "base.yaml").string(), (dir() / "tiers/big.yaml").string()}));
  const std::vector<std::string> overrides = {"train.threads=1", "optim.lr=0.002", "model.arm=combo2", "seed=1",
                                              "out_dir=" + (dir() / "out/big/combo2/s1").string()};
  EXPECT_EQ(r.overrides, overrides);
  // Resolved as the trainer will: the tier's dims over the base, the grid over both.
  EXPECT_EQ(r.resolved.tier, "big");
  EXPECT_EQ(r.resolved.model.n_layer, 2);
  EXPECT_EQ(r.resolved.model.arm, "combo2");
  EXPECT_DOUBLE_EQ(r.resolved.optim.lr, 0.002);
  EXPECT_EQ(r.resolved.train.threads, 1);
  EXPECT_EQ(r.config_hash, config_hash(r.resolved));
  EXPECT_EQ(train_arguments(r)[0], "train");
  EXPECT_EQ(train_arguments(r)[2], r.config.string());
  // Same seed and tier, different arm: same everything but the arm.
  EXPECT_EQ(differing_keys(runs[4].resolved, runs[6].resolved), (std::vector<std::string>{"model.arm", "out_dir"}));
}

// null_pairs: each run of the listed arms again, init seed + offset on the same data order, after the
// grid's runs, in the variant "<variant>/null"; and the refusals.
TEST_F(SweepTest, NullPairsAddOneTwinPerRunOfTheirArmsUnderAnotherInitSeed) {
  const auto runs = expand_sweep(sweep("grid:\n  model.arm: [baseline, combo2]\n  seed: [1, 2]\n  optim.lr: [0.002]\n"
                                       "null_pairs: {arms: [baseline], init_seed_offset: 100}\n"));
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[4].name, "micro/baseline/optim.lr-0.002/null/s1");
  EXPECT_EQ(runs[5].name, "micro/baseline/optim.lr-0.002/null/s2");
  EXPECT_EQ(runs[5].variant, "optim.lr-0.002/null");
  EXPECT_EQ(null_twin_of(runs[5].variant), std::optional<std::string>("optim.lr-0.002"));
  EXPECT_EQ(null_twin_of(runs[0].variant), std::nullopt);
  const auto& twin = runs[5].resolved;
  EXPECT_EQ(twin.seed, 2u);
  EXPECT_EQ(twin.effective_init_seed(), 102u);
  EXPECT_EQ(twin.effective_data_seed(), 2u);
  EXPECT_EQ(differing_keys(runs[1].resolved, twin), (std::vector<std::string>{"out_dir", "init_seed"}));
  EXPECT_NE(runs[5].config_hash, runs[1].config_hash);
  // Default offset 1000.
  const auto plain = expand_sweep(sweep("grid:\n  seed: [7]\nnull_pairs: {arms: [baseline]}\n"));
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[1].name, "micro/baseline/null/s7");
  EXPECT_EQ(plain[1].variant, "null");
  EXPECT_EQ(null_twin_of("null"), std::optional<std::string>(""));
  EXPECT_EQ(plain[1].resolved.effective_init_seed(), 1007u);

  EXPECT_EQ(error_of("grid:\n  seed: [1]\nnull_pairs: {arms: [combo]}\n"),
            (dir() / "sweeps/s.yaml").string() + ": null_pairs.arms: combo has no run in the grid");
  EXPECT_EQ(error_of("grid:\n  seed: [1]\nnull_pairs: {arms: [baseline], offset: 3}\n"),
            (dir() / "sweeps/s.yaml").string() + ": null_pairs.offset: unknown key (known: arms, init_seed_offset, grids)");
  EXPECT_EQ(error_of("grid:\n  seed: [1]\nnull_pairs: {arms: [baseline, baseline]}\n"),
            (dir() / "sweeps/s.yaml").string() +
                ": null_pairs.arms: baseline is listed twice (each run of an arm has one null twin)");
  EXPECT_EQ(error_of("grid:\n  seed: [1]\nnull_pairs: {arms: [baseline], init_seed_offset: 0}\n"),
            (dir() / "sweeps/s.yaml").string() +
                ": null_pairs.init_seed_offset: must be positive (0 would run each twin under its original's seed)");
  EXPECT_EQ(error_of("grid:\n  seed: [1]\nnull_pairs: [baseline]\n"),
            (dir() / "sweeps/s.yaml").string() + ": null_pairs: expected a mapping with arms: [...] (and init_seed_offset: N)");
  EXPECT_EQ(error_of("grid:\n  seed: [18446744073709551615]\nnull_pairs: {arms: [baseline]}\n"),
            (dir() / "sweeps/s.yaml").string() +
                ": null_pairs.init_seed_offset: run micro/baseline/s18446744073709551615's init seed 18446744073709551615 + 1000 "
                "is beyond 2^64 - 1");
}

// grid: as a list of mappings (docs/sweeps.md, "Grid lists"): each one a product, their runs in list
// order; a run of the second grid carries its keys in its variant, so the first grid's runs stay
// plain; null_pairs.grids twins only the listed grids' runs.
TEST_F(SweepTest, AGridListAddsEachProductInOrderAndTwinsOnlyTheGridsNamed) {
  const auto runs = expand_sweep(sweep("grid:\n  - {model.arm: [baseline, combo2], seed: [1, 2]}\n"
                                       "  - {model.arm: [baseline], optim.name: [sgd], optim.lr: [0.3], seed: [1, 2]}\n"
                                       "null_pairs: {arms: [baseline], grids: [0]}\n"));
  const std::vector<std::string> names = {"micro/baseline/s1",
                                          "micro/baseline/s2",
                                          "micro/combo2/s1",
                                          "micro/combo2/s2",
                                          "micro/baseline/optim.name-sgd/optim.lr-0.3/s1",
                                          "micro/baseline/optim.name-sgd/optim.lr-0.3/s2",
                                          "micro/baseline/null/s1",
                                          "micro/baseline/null/s2"};
  ASSERT_EQ(runs.size(), names.size());
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].name, names[i]);
  EXPECT_EQ(runs[0].variant, "");
  EXPECT_EQ(runs[4].variant, "optim.name-sgd/optim.lr-0.3");
  EXPECT_EQ(runs[4].resolved.optim.optimizer(), OptimizerName::sgd);
  EXPECT_DOUBLE_EQ(runs[4].resolved.optim.lr, 0.3);
  // Same seed, other optimizer: the same init and data seeds, so the pair is a paired contrast.
  EXPECT_EQ(differing_keys(runs[0].resolved, runs[4].resolved),
            (std::vector<std::string>{"optim.lr", "out_dir", "optim.name"}));
  // Without null_pairs.grids, every grid's baseline runs are twinned.
  EXPECT_EQ(expand_sweep(sweep("grid:\n  - {seed: [1]}\n  - {optim.lr: [0.3], seed: [1]}\nnull_pairs: {arms: [baseline]}\n"))
                .size(),
            4u);
  const auto file = (dir() / "sweeps/s.yaml").string();
  EXPECT_EQ(error_of("grid: []\n"), file + ": grid: an empty list runs nothing; give one mapping or more");
  EXPECT_EQ(error_of("grid:\n  - {seed: [1]}\n  - [1, 2]\n"),
            file + ": grid[1]: expected a mapping of key: [values] (or a list of such mappings)");
  EXPECT_EQ(error_of("grid:\n  - {seed: [1]}\n  - {tier: [huge]}\n"),
            file + ": grid[1].tier: " + (dir() / "tiers/huge.yaml").string() + " not found");
  EXPECT_EQ(error_of("grid:\n  - {seed: [1]}\nnull_pairs: {arms: [baseline], grids: [1]}\n"),
            file + ": null_pairs.grids: 1 is not a grid of this sweep (it has 1, from 0)");
  EXPECT_EQ(error_of("grid:\n  - {seed: [1]}\n  - {model.arm: [combo2]}\nnull_pairs: {arms: [combo2], grids: [0]}\n"),
            file + ": null_pairs.arms: combo2 has no run in the grids null_pairs.grids names");
  EXPECT_EQ(error_of("grid:\n  - {seed: [1]}\n  - {seed: [1]}\n"),
            file + ": two grid points give the run micro/baseline/s1 (a value listed twice?)");
}

TEST_F(SweepTest, PerTierSeedListsAndExtraKeysInTheName) {
  const auto runs = expand_sweep(sweep("threads_per_run: 3\ngrid:\n  tier: [small, big]\n  optim.weight_decay: [0.0, 0.1]\n"
                                       "  seed: {small: [1, 2, 3], big: [7]}\n"));
  ASSERT_EQ(runs.size(), 8u);  // 2 x 3 + 2 x 1
  EXPECT_EQ(runs[0].name, "small/baseline/optim.weight_decay-0.0/s1");
  EXPECT_EQ(runs[0].variant, "optim.weight_decay-0.0");
  EXPECT_EQ(runs[7].name, "big/baseline/optim.weight_decay-0.1/s7");
  EXPECT_EQ(runs[7].resolved.seed, 7u);
  EXPECT_EQ(runs[7].resolved.train.threads, 3);
  EXPECT_DOUBLE_EQ(runs[7].resolved.optim.weight_decay, 0.1);
}

TEST_F(SweepTest, WithoutATierAxisTheBaseIsTheConfig) {
  const auto runs = expand_sweep(sweep("grid: {model.arm: [sink_logit]}\n"));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].config, dir() / "base.yaml");
  EXPECT_EQ(runs[0].name, "micro/sink_logit/s1");  // the base names no tier: RunConfig's default
}

TEST_F(SweepTest, BadSweepsAreRefusedNamingTheKey) {
  EXPECT_NE(error_of("grid: {tier: [huge]}\n").find("huge.yaml not found"), std::string::npos);
  EXPECT_NE(error_of("grid: {seed: {small: [1]}}\n").find("per-tier values need a grid.tier list"), std::string::npos);
  EXPECT_NE(error_of("grid: {tier: [small, big], seed: {small: [1]}}\n").find("no values for tier big"), std::string::npos);
  EXPECT_NE(error_of("grid: {seed: [1, 1]}\n").find("two grid points give the run micro/baseline/s1"), std::string::npos);
  // Two grid values that resolve to one run (both patterns hide nothing: no window, docs/windows.md).
  EXPECT_NE(error_of("set: {model.window: 8}\ngrid: {model.window_pattern: [G, GG]}\n")
                .find("resolve to the same config"),
            std::string::npos);
  EXPECT_NE(error_of("grid: {model.arm: [nonsense]}\n").find("model.arm=nonsense"), std::string::npos);
  EXPECT_NE(error_of("grid: {seed: [1]}\nworkers: 3\n").find("workers: unknown key"), std::string::npos);
  EXPECT_NE(error_of("grid: {seed: []}\n").find("grid.seed: expected a non-empty list"), std::string::npos);
}

TEST_F(SweepTest, DryRunStatesFromTheRunDirectories) {
  const auto spec = sweep("grid: {tier: [small], seed: [1, 2, 3, 4]}\n");
  const auto runs = expand_sweep(spec);
  // s1 finished with this config, s2 stopped after checkpoint 4, s3 finished under another config.
  auto claim = [&](int i) {
    fs::create_directories(runs[i].out_dir);
    std::ofstream(runs[i].out_dir / "config.yaml") << to_yaml(runs[i].resolved);
  };
  claim(0), claim(1), claim(2);
  auto finished = [&](int i, double loss, const std::string& hash) {  // every key, as the trainer writes it
    FinalRecord f;
    f.final_val_loss = f.best_val_loss = loss, f.steps = 10, f.config_hash = hash;
    std::ofstream(runs[i].out_dir / "final.json") << to_json(f).dump(2);
  };
  finished(0, 3.5, runs[0].config_hash);
  fs::create_directories(runs[1].out_dir / "checkpoints/step_000002");
  fs::create_directories(runs[1].out_dir / "checkpoints/step_000004");
  finished(2, 3.6, "0123");
  const auto states = inspect_runs(runs);
  EXPECT_EQ(states[0].status, RunStatus::finished);
  EXPECT_EQ(describe(states[0]), "finished (step 10, val 3.5000)");
  EXPECT_EQ(states[1].status, RunStatus::partial);
  EXPECT_EQ(describe(states[1]), "partial at step 4");
  EXPECT_EQ(states[2].status, RunStatus::stale);
  EXPECT_EQ(states[3].status, RunStatus::not_started);
  EXPECT_EQ(describe(states[3]), "not started");

  const auto manifest = manifest_json(spec, runs, states, "/opt/attnlab");
  EXPECT_EQ(manifest["runs"].size(), 4u);
  EXPECT_EQ(manifest["runs"][1]["status"], "partial");
  EXPECT_EQ(manifest["runs"][1]["step"], 4);
  EXPECT_EQ(manifest["runs"][0]["final_val_loss"], 3.5);
  EXPECT_EQ(manifest["runs"][3]["command"][0], "/opt/attnlab");
  EXPECT_EQ(manifest["runs"][3]["command"][1], "train");
  EXPECT_EQ(manifest["runs"][3]["grid"]["seed"], "4");
  EXPECT_EQ(manifest["runs"][3]["config_hash"], runs[3].config_hash);
}

TEST_F(SweepTest, SlurmScriptHasOneArrayTaskPerRunWithTheSameCommand) {
  const auto spec = sweep("grid: {tier: [small], model.arm: [baseline, sink_logit]}\nslurm: {time: '02:00:00', gres: 'gpu:1'}\n");
  const auto runs = expand_sweep(spec);
  const auto scripts = emit_slurm(spec, runs, "/opt/attnlab");
  ASSERT_EQ(scripts.size(), 1u);
  const auto& script = scripts.front();
  std::ifstream in(script);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* line : {"#SBATCH --array=0-1\n", "#SBATCH --requeue\n", "#SBATCH --time=02:00:00\n",
                           "#SBATCH --gres=gpu:1\n", "#SBATCH --cpus-per-task=1\n", "ATTNLAB='/opt/attnlab'\n",
                           "  1) RUN='small/sink_logit/s1'; ARGS=('train' '--config'", "'--set' 'model.arm=sink_logit'",
                           "scontrol requeue"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n---\n" << text;
  EXPECT_TRUE(fs::exists(dir() / "out/configs/small.yaml"));
  EXPECT_EQ(std::system(("bash -n " + script.string()).c_str()), 0) << "the script must parse";
}

// A run of 8 GPUs on 2 nodes: one srun task per GPU, torchrun's variables taken from Slurm's.
TEST_F(SweepTest, SlurmMultiGpuRunsAreSrunJobsOfOneTaskPerGpu) {
  const auto spec = sweep("grid: {seed: [1, 2]}\n");
  const auto scripts = emit_slurm(spec, expand_sweep(spec), "/opt/attnlab", SlurmLayout{4, 2});
  ASSERT_EQ(scripts.size(), 1u);
  std::ifstream in(scripts.front());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* line : {"#SBATCH --array=0-1\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=4\n",
                           "#SBATCH --gpus-per-node=4\n", "export MASTER_ADDR=$(scontrol show hostnames",
                           "srun --kill-on-bad-exit=1 bash -c",
                           "'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID exec \"$0\" \"$@\"'"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n---\n" << text;
  EXPECT_EQ(std::system(("bash -n " + scripts.front().string()).c_str()), 0) << "the script must parse";
  EXPECT_THROW(emit_slurm(spec, expand_sweep(spec), "/opt/attnlab", SlurmLayout{0, 2}), SweepError);
}

// Slurm's default MaxArraySize (1001) refuses --array=0-1079: a 1,080-run grid becomes two arrays
// whose task k runs run 1000 i + k.
TEST_F(SweepTest, GridsLargerThanMaxArraySizeAreSplitIntoSeveralArrays) {
  const auto spec = sweep("grid: {seed: [1]}\n");
  const auto one = expand_sweep(spec);
  std::vector<SweepRun> runs(1080, one.front());
  for (size_t i = 0; i < runs.size(); ++i) runs[i].name = "r" + std::to_string(i);
  const auto scripts = emit_slurm(spec, runs, "/opt/attnlab");
  ASSERT_EQ(scripts.size(), 2u);
  EXPECT_EQ(scripts[0].filename(), "s.part0.sbatch");
  EXPECT_EQ(scripts[1].filename(), "s.part1.sbatch");
  std::vector<std::string> texts;
  for (const auto& script : scripts) {
    std::ifstream in(script);
    texts.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(texts.back().find("--array=0-1079"), std::string::npos);
  }
  EXPECT_NE(texts[0].find("#SBATCH --array=0-999\n"), std::string::npos);
  EXPECT_NE(texts[0].find("  999) RUN='r999';"), std::string::npos);
  EXPECT_NE(texts[1].find("#SBATCH --array=0-79\n"), std::string::npos);
  EXPECT_NE(texts[1].find("  0) RUN='r1000';"), std::string::npos);
  EXPECT_NE(texts[1].find("  79) RUN='r1079';"), std::string::npos);
  EXPECT_NE(texts[1].find("Task k runs run 1000 + k"), std::string::npos);
}

// With 2 GPUs per run, worker k gets the k-th disjoint pair and starts `train ... --nproc 2`.
TEST_F(SweepTest, RunsOfSeveralGpusGetDisjointDevicesAndOneRankEach) {
  const auto spec = sweep("grid: {seed: [1, 2]}\n");
  const fs::path calls = dir() / "calls.txt";
  const fs::path fake = write("fake_attnlab.sh", "#!/bin/sh\necho \"$CUDA_VISIBLE_DEVICES|$*\" >> " + calls.string() + "\n");
  fs::permissions(fake, fs::perms::owner_exec, fs::perm_options::add);
  SweepOptions options;
  options.executable = fake;
  options.gpus = 4;
  options.gpus_per_run = 2;
  options.log = [](const std::string&) {};
  EXPECT_EQ(default_workers(expand_sweep(spec), 4, 2), 2);
  options.workers = 2;
  run_sweep(spec, expand_sweep(spec), options);  // the fake trains nothing: both runs count as failed
  std::ifstream in(calls);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines[0].rfind("0,1|train ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("2,3|train ", 0), 0u) << lines[1];
  for (const auto& line : lines) EXPECT_NE(line.find("--nproc 2"), std::string::npos) << line;
  options.workers = 3;  // 3 x 2 GPUs of 4
  EXPECT_THROW(run_sweep(spec, expand_sweep(spec), options), SweepError);
}

TEST_F(SweepTest, ASecondSweepOnTheSameOutputIsRefused) {
  const auto spec = sweep("grid: {seed: [1]}\n");
  fs::create_directories(dir() / "out");
  const int fd = ::open((dir() / "out/sweep.lock").c_str(), O_RDWR | O_CREAT, 0644);
  struct flock whole {};
  whole.l_type = F_WRLCK, whole.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fd, F_OFD_SETLK, &whole), 0);  // as a running sweep holds it (an open-file-description lock)
  SweepOptions options;
  options.executable = "/bin/true";
  try {
    run_sweep(spec, expand_sweep(spec), options);
    ADD_FAILURE() << "no error";
  } catch (const SweepError& e) {
    EXPECT_NE(std::string(e.what()).find("another attnlab sweep is running"), std::string::npos) << e.what();
  }
  ::close(fd);
  EXPECT_FALSE(fs::exists(dir() / "out/logs")) << "nothing started";
}

// A write cut short (here by a file size limit: EFBIG, as a full disk's ENOSPC) is an error naming
// the file, never a truncated tier config or Slurm script left behind as if whole.
TEST_F(SweepTest, TierConfigsAndSlurmScriptsAreWrittenCheckedAndWhole) {
  const auto spec = sweep("grid: {tier: [small], seed: [1]}\n");
  const auto runs = expand_sweep(spec);
  const std::string configs = testing::in_child([&] {
    testing::limit_file_size(10);
    write_run_configs(spec, runs);
    return std::string("no error");
  });
  EXPECT_NE(configs.find((spec.out / "configs/small.yaml").string()), std::string::npos) << configs;
  EXPECT_NE(configs.find("File too large"), std::string::npos) << configs;
  EXPECT_FALSE(fs::exists(spec.out / "configs/small.yaml")) << "a truncated config was left behind";

  const std::string slurm = testing::in_child([&] {
    testing::limit_file_size(1024);  // the tier config fits, the script does not
    emit_slurm(spec, runs, "/opt/attnlab");
    return std::string("no error");
  });
  EXPECT_NE(slurm.find((spec.out / "slurm/s.sbatch").string()), std::string::npos) << slurm;
  EXPECT_NE(slurm.find("File too large"), std::string::npos) << slurm;
  EXPECT_FALSE(fs::exists(spec.out / "slurm/s.sbatch"));
  write_run_configs(spec, runs);  // without the limit: whole
  std::ifstream in(spec.out / "configs/small.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("tiers/small.yaml"), std::string::npos) << text;
}

TEST(ShippedSweeps, PaperGridIsNineArmsFourTiersAndThePapersSeeds) {
  const fs::path root = attnlab::test::source_dir();
  const auto runs = expand_sweep(load_sweep(root / "configs/sweeps/paper.yaml"));
  ASSERT_EQ(runs.size(), 9u * (3 + 3 + 3 + 1));
  std::map<std::string, int> per_tier;
  for (const auto& r : runs) ++per_tier[r.resolved.tier];
  EXPECT_EQ(per_tier, (std::map<std::string, int>{{"10m", 27}, {"50m", 27}, {"124m", 27}, {"350m", 9}}));
  EXPECT_EQ(runs.back().name, "350m/combo2/s1");
  EXPECT_EQ(runs.back().resolved.model.d_model, 1024);
  EXPECT_EQ(runs.back().resolved.data.val_tokens, 10485760);  // FineWeb-Edu's fixed validation set
}

TEST(ShippedSweeps, DemoIsBaselineAndOutGateWithTwinsOnTheBigramBackcopyTask) {
  const fs::path root = attnlab::test::source_dir();
  const auto runs = expand_sweep(load_sweep(root / "configs/sweeps/demo.yaml"));
  ASSERT_EQ(runs.size(), 9u);  // 2 arms x 3 seeds, and a null twin of each baseline run
  EXPECT_EQ(runs.front().name, "bb/baseline/s1");
  EXPECT_EQ(runs[5].name, "bb/out_gate/s3");
  EXPECT_EQ(runs.back().name, "bb/baseline/null/s3");
  for (const auto& r : runs) {
    EXPECT_EQ(r.resolved.train.threads, 1);
    EXPECT_EQ(r.resolved.total_steps(), 400);  // the bb tier's 500 cut to fit 6 minutes on 2 cores
    EXPECT_EQ(r.resolved.data.sampling, WindowSampling::document);  // BOS at position 0
    EXPECT_EQ(r.resolved.model.vocab_size, 65);
  }
}

TEST(ShippedSweeps, PhenomenaIsSixArmsThreeSeedsAndBaselineTwins) {
  const fs::path root = attnlab::test::source_dir();
  const auto runs = expand_sweep(load_sweep(root / "configs/sweeps/phenomena.yaml"));
  ASSERT_EQ(runs.size(), 6u * 3 + 3 + 3);  // AdamW's six arms, SGD's baseline, AdamW baseline's twins
  EXPECT_EQ(runs.back().name, "bb/baseline/null/s3");
  EXPECT_EQ(runs.front().resolved.total_steps(), 500);
  EXPECT_EQ(runs.front().resolved.eval.trigger_tokens, (std::vector<int64_t>{0, 1, 2}));
  const auto& sgd = runs[18];
  EXPECT_EQ(sgd.name, "bb/baseline/optim.name-sgd/optim.lr-0.3/optim.weight_decay-0.002/s1");
  EXPECT_EQ(sgd.resolved.optim.optimizer(), OptimizerName::sgd);
  // lr x coupled decay is AdamW's per-step decay: 6e-3 x 0.1.
  EXPECT_NEAR(sgd.resolved.optim.lr * sgd.resolved.optim.weight_decay, runs[0].resolved.optim.lr * runs[0].resolved.optim.weight_decay,
              1e-12);
  EXPECT_EQ(differing_keys(runs[0].resolved, sgd.resolved),
            (std::vector<std::string>{"optim.lr", "optim.weight_decay", "out_dir", "optim.name"}));
}

TEST(ShippedSweeps, NullPairsTwinEveryDemoRunOfBaselineAndSinkLogit) {
  const fs::path root = attnlab::test::source_dir();
  const auto runs = expand_sweep(load_sweep(root / "configs/sweeps/null_pairs.yaml"));
  ASSERT_EQ(runs.size(), 20u);
  EXPECT_EQ(runs[10].name, "micro/baseline/null/s1");
  EXPECT_EQ(runs[10].resolved.effective_init_seed(), 1001u);
  EXPECT_EQ(runs[10].resolved.effective_data_seed(), 1u);
  EXPECT_EQ(runs.back().name, "micro/sink_logit/null/s5");
  // The originals are configs/demo.yaml's micro runs on the Python documentation.
  EXPECT_EQ(runs[0].resolved.tier, "micro");
  EXPECT_EQ(runs[0].resolved.data.train, "data/pydoc/pydoc_train_*.bin");
}

}  // namespace
}  // namespace attnlab
