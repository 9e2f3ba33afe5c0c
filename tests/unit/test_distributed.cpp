// Data parallelism in one process (docs/distributed.md): torchrun's environment, the split of a
// step over ranks, and a Gloo job of one rank, whose Reducer must leave gradients exactly as plain
// backward passes do (division by a world size of 1) and skip the all-reduce until asked.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/distributed.h"
#include "attnlab/run_config.h"
#include "unit/process_env.h"

namespace attnlab {
namespace {

using dist::DistributedError;

using Vars = std::map<std::string, std::optional<std::string>>;
using testing::ScopedEnv;

const Vars kNoJob = {{"RANK", std::nullopt}, {"WORLD_SIZE", std::nullopt}, {"LOCAL_RANK", std::nullopt},
                     {"MASTER_ADDR", std::nullopt}, {"MASTER_PORT", std::nullopt},
                     {"TORCHELASTIC_USE_AGENT_STORE", std::nullopt}, {"TORCHELASTIC_RESTART_COUNT", std::nullopt}};

Vars job(const Vars& vars) {
  auto all = kNoJob;
  for (const auto& [k, v] : vars) all[k] = v;
  return all;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DistributedError& e) {
    return e.what();
  }
  return "no error";
}

TEST(LaunchEnv, NoVariablesMeansNoJob) {
  ScopedEnv env(kNoJob);
  EXPECT_FALSE(dist::launch_env_from_environment().has_value());
}

TEST(LaunchEnv, ReadsTorchrunsVariables) {
  ScopedEnv env(job({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"},
                     {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                     {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  const auto e = dist::launch_env_from_environment();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "node7");
  EXPECT_EQ(e->master_port, 29500);
  EXPECT_TRUE(e->agent_store);
  EXPECT_EQ(e->restart_count, 2);
}

TEST(LaunchEnv, IncompleteOrBadValuesAreRefusedByName) {
  {
    ScopedEnv env(job({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
    const auto msg = error_of([] { dist::launch_env_from_environment(); });
    EXPECT_NE(msg.find("RANK, WORLD_SIZE set but LOCAL_RANK, MASTER_ADDR, MASTER_PORT not"), std::string::npos) << msg;
  }
  auto full = [](const char* rank, const char* world, const char* port) {
    return job({{"RANK", rank}, {"WORLD_SIZE", world}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", port}});
  };
  {
    ScopedEnv env(full("2", "2", "29500"));
    EXPECT_NE(error_of([] { dist::launch_env_from_environment(); }).find("RANK=2: must be an integer in [0, 1]"),
              std::string::npos);
  }
  {
    ScopedEnv env(full("0", "2", "70000"));
    EXPECT_NE(error_of([] { dist::launch_env_from_environment(); }).find("MASTER_PORT=70000"), std::string::npos);
  }
  {
    ScopedEnv env(full("0", "two", "29500"));
    EXPECT_NE(error_of([] { dist::launch_env_from_environment(); }).find("WORLD_SIZE=two"), std::string::npos);
  }
}

TEST(MicroBatches, AStepsSequencesAreSplitOverRanksAndMicroBatches) {
  RunConfig cfg;
  cfg.train.seq_len = 256;
  cfg.train.batch_size = 8;
  cfg.train.tokens_per_step = 4096;  // 16 sequences
  EXPECT_EQ(dist::micro_batches_per_rank(cfg, 1), 2);
  EXPECT_EQ(dist::micro_batches_per_rank(cfg, 2), 1);
  cfg.train.batch_size = 2;
  EXPECT_EQ(dist::micro_batches_per_rank(cfg, 4), 2);
  cfg.train.batch_size = 8;
  const auto msg = error_of([&] { dist::micro_batches_per_rank(cfg, 4); });
  EXPECT_NE(msg.find("train.tokens_per_step = 4096 is 16 sequences"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 ranks x train.batch_size = 8"), std::string::npos) << msg;
}

TEST(DataParallel, AWorldOfOneIsTheIdentity) {
  dist::DataParallel dp;
  EXPECT_FALSE(dp.joined());
  EXPECT_EQ(dp.world_size(), 1);
  EXPECT_TRUE(dp.is_main());
  EXPECT_EQ(dp.sum({1.5, -2.0}), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(dp.max(7), 7);
}

// A Gloo job of one rank runs every c10d path (store, backend, Reducer) without a second process.
TEST(DataParallel, OneGlooRankReducesExactlyAndOnlyWhenAsked) {
  dist::LaunchEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = testing::free_port();
  c10::Device device(c10::kCPU);
  dist::DataParallel dp(env, device, std::chrono::seconds(30));
  ASSERT_TRUE(dp.joined());
  EXPECT_EQ(dp.sum({1.5, 2.25}), (std::vector<double>{1.5, 2.25}));
  EXPECT_EQ(dp.max(-3), -3);

  torch::manual_seed(0);
  torch::nn::Linear plain(5, 3), synced(5, 3);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < plain->parameters().size(); ++i) synced->parameters()[i].copy_(plain->parameters()[i]);
  }
  dp.verify_identical(*synced, {{"answer", 42}});
  dp.attach(*synced);
  const auto x1 = torch::randn({4, 5}), x2 = torch::randn({4, 5});
  auto expect_same_grads = [&](const std::string& when) {
    for (size_t i = 0; i < plain->parameters().size(); ++i)
      EXPECT_TRUE(torch::equal(synced->parameters()[i].grad(), plain->parameters()[i].grad())) << when;
  };
  for (int step = 0; step < 3; ++step) {  // step 2 runs with the rebuilt buckets
    plain->zero_grad();
    synced->zero_grad();
    const auto before = dp.collectives_issued();
    plain->forward(x1).pow(2).mean().backward();
    dp.backward(synced->forward(x1).pow(2).mean(), /*reduce=*/false);
    EXPECT_EQ(dp.collectives_issued(), before) << "no all-reduce on a micro-batch that is not the last";
    expect_same_grads("after micro-batch 1 of step " + std::to_string(step));
    plain->forward(x2).pow(2).mean().backward();
    dp.backward(synced->forward(x2).pow(2).mean(), /*reduce=*/true);
    EXPECT_GT(dp.collectives_issued(), before);
    expect_same_grads("after micro-batch 2 of step " + std::to_string(step));
  }
  dp.barrier();
}

// Two Gloo ranks in two threads of this process: `body(rank, dp)` on each; what each threw ("" when
// nothing). The ranks wait for each other at most `timeout` in a collective.
std::vector<std::string> two_ranks(std::chrono::milliseconds timeout,
                                   const std::function<void(int rank, dist::DataParallel& dp)>& body) {
  const int port = testing::free_port();
  const auto level = spdlog::get_level();  // a rank other than 0 lowers it for the process
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        dist::LaunchEnv env;
        env.rank = rank, env.world_size = 2, env.local_rank = rank;
        env.master_addr = "127.0.0.1", env.master_port = port;
        c10::Device device(c10::kCPU);
        dist::DataParallel dp(env, device, timeout);
        body(rank, dp);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  spdlog::set_level(level);
  return errors;
}

// Rank 0 writes for 2.5 s under a collective timeout of 1 s: rank 1 waits for it (outside any
// collective, watching rank 0's heartbeat) and returns only once the write is done.
TEST(DataParallel, RunOnMainWaitsForAWriteLongerThanTheTimeout) {
  std::atomic<bool> written{false};
  std::atomic<int> writers{0};
  std::vector<double> sums(2);
  const auto errors = two_ranks(std::chrono::seconds(1), [&](int rank, dist::DataParallel& dp) {
    dp.run_on_main("the slow file", [&] {
      ++writers;
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      written = true;
    });
    if (!written) throw std::runtime_error("returned before rank 0 had written");
    sums[rank] = dp.sum({1.0})[0];  // the ranks go on together
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(writers, 1);
  EXPECT_EQ(sums, (std::vector<double>{2.0, 2.0}));
}

TEST(DataParallel, AWriteThatFailsOnRankZeroStopsTheOthers) {
  const auto errors = two_ranks(std::chrono::seconds(5), [](int, dist::DataParallel& dp) {
    dp.run_on_main("final.json", [] { throw std::runtime_error("disk full"); });
  });
  EXPECT_EQ(errors[0], "disk full");
  EXPECT_NE(errors[1].find("rank 1 of 2: rank 0 failed to write final.json"), std::string::npos) << errors[1];
}

// The facts are compared key by key: the differing rank names each difference (a missing key as
// "none"), every rank the facts that differ and how many ranks differ.
TEST(DataParallel, FactsThatDifferAreNamedByKeyOnEveryRank) {
  torch::nn::Linear model(2, 2);
  const auto errors = two_ranks(std::chrono::seconds(30), [&](int rank, dist::DataParallel& dp) {
    nlohmann::json config = {{"optim", {{"lr", 0.001}, {"beta2", 0.95}}}, {"seed", 1}};
    if (rank == 1) config["optim"]["lr"] = 0.002, config["optim"].erase("beta2"), config["extra"] = true;
    dp.verify_identical(*model, {{"resume step", 7}, {"--stop-after", rank == 0 ? 0 : 3}, {"config", config}});
  });
  EXPECT_NE(errors[1].find("--stop-after: rank 0 has 0, this rank 3; config optim.beta2: rank 0 has 0.95, this rank "
                           "none; config optim.lr: rank 0 has 0.001, this rank 0.002; config extra: rank 0 has none, "
                           "this rank true"),
            std::string::npos)
      << errors[1];
  for (const auto& e : errors) {
    EXPECT_NE(e.find("--stop-after: rank 0 has 0, 1 rank(s) differ; config: 1 rank(s) differ from rank 0"),
              std::string::npos)
        << e;
    EXPECT_EQ(e.find("resume step"), std::string::npos) << e;  // equal everywhere: not named
  }
}

}  // namespace
}  // namespace attnlab
