// Data parallelism on a GPU (docs/distributed.md): a job of one NCCL rank (store, ProcessGroupNCCL,
// the Reducer's all-reduce on the device) trains exactly as a plain process, and on the device too
// a step split into 8 x 1 or 2 x 4 micro-batches trains on the same sequences. fp32, so what is
// compared is rounding, not bf16's coarser steps. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "attnlab/trainer.h"
#include "e2e/micro_runs.h"

namespace attnlab {
namespace {

class NcclTrain : public testing::MicroRuns {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false)";
    MicroRuns::SetUp();
  }
  RunConfig gpu_config(const std::string& out, std::vector<std::string> sets = {}) const {
    sets.insert(sets.end(), {"train.device=cuda", "train.precision=fp32"});
    return config(out, sets);
  }
};

// torchrun's variables for a job of one rank (restored after).
testing::ScopedEnv one_rank_job() {
  return testing::ScopedEnv({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", std::to_string(testing::free_port())}});
}

TEST_F(NcclTrain, OneNcclRankTrainsLikeOneProcess) {
  train(gpu_config("plain"));
  {
    const auto job = one_rank_job();
    train(gpu_config("nccl"));
  }
  expect_same_run(run("plain"), run("nccl"), 4);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(run("nccl") / "final.json"))["world_size"], 1);
}

TEST_F(NcclTrain, MicroBatchSplitDoesNotChangeTheRunOnTheDevice) {
  train(gpu_config("whole", {"train.batch_size=8"}));
  train(gpu_config("quarters", {"train.batch_size=2"}));
  // GEMMs of other shapes round otherwise; weights as in the CPU test (tests/e2e/test_distributed.cpp).
  expect_same_run(run("whole"), run("quarters"), 4, 1e-5, 1e-4);
}

}  // namespace
}  // namespace attnlab
