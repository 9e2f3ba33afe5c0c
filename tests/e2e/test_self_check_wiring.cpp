// The first-use attention self-check where runs and analyses use attention (docs/kernels.md, "The
// first-use self-check"): the trainer checks before its first step and records the result in
// final.json, open_trained() before an analysis and records it in the provenance. Both run it on CUDA
// only, so here a CPU run's files stay as they were unless a test forces the check on the CPU, and a
// planted fault stops `train` before the run directory is claimed, naming what failed and the way out.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/attention_self_check.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"
#include "attnlab/trainer.h"
#include "e2e/micro_runs.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(std::ifstream(path)); }

std::set<std::string> keys_of(const nlohmann::json& j) {
  std::set<std::string> keys;
  for (const auto& item : j.items()) keys.insert(item.key());
  return keys;
}

// The backend the check was asked for, with o off by 0.5 at one query: a wrong kernel.
SelfCheckRunner planted_fault() {
  return [](const SelfCheckCase& c) {
    const auto backend = c.backend;
    const ArmAttend attend = [backend](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                       const PreparedKeys& keys) {
      auto out = arm_attention(a, p, q, keys, false, backend);
      auto bump = at::zeros_like(out.o);
      bump[0][0][7][2] = 0.5;
      out.o = out.o + bump;
      return out;
    };
    return check_attention_backend(c, attend, backend, "flash (planted fault)");
  };
}

class SelfCheckWiring : public testing::MicroRuns {};

// The keys final.json has always had: a CPU run writes exactly these, no self-check among them.
TEST_F(SelfCheckWiring, ACpuRunChecksNothingAndItsFinalRecordIsUnchanged) {
  ASSERT_EQ(train(config("a")).status, TrainStatus::finished);
  const auto final = read_json(run("a") / "final.json");
  EXPECT_EQ(keys_of(final), (std::set<std::string>{"final_val_loss", "best_val_loss", "steps", "tokens_seen", "params",
                                                    "wall_time_s", "git_revision", "config_hash", "arm", "seed",
                                                    "tier", "device", "world_size", "val_tokens", "val_fingerprint",
                                                    "time_s"}));
  OpenOptions o;
  o.tokens.sequences = 2, o.tokens.length = 64;
  const auto opened = open_trained(run("a"), o);
  EXPECT_FALSE(opened.provenance.attention_self_check);
  EXPECT_FALSE(to_json(opened.provenance).contains("attention_self_check"));
}

// Forced on the CPU, the check of the run's own arm, backend (auto: flash in float32) and head_dim
// lands in final.json, reads back, and changes nothing of the run itself (its own generator).
TEST_F(SelfCheckWiring, ACheckedRunRecordsTheErrorsAndTrainsTheSame) {
  ASSERT_EQ(train(config("plain")).status, TrainStatus::finished);
  TrainOptions options;
  options.self_check_on_cpu = true;
  ASSERT_EQ(train(config("checked"), options).status, TrainStatus::finished);
  const auto plain = testing::metrics_of(run("plain")), checked = testing::metrics_of(run("checked"));
  ASSERT_EQ(plain.size(), 4u);
  ASSERT_EQ(checked.size(), 4u);
  for (size_t i = 0; i < plain.size(); ++i)  // bit for bit: the timings aside
    for (const char* key : {"step", "train_loss", "grad_norm", "val_loss", "lr"})
      EXPECT_EQ(plain[i][key], checked[i][key]) << key << " at line " << i;
  const auto wa = open_model(run("plain")), wb = open_model(run("checked"));
  for (const auto& item : wa.model->named_parameters())
    EXPECT_TRUE(item.value().equal(wb.model->named_parameters()[item.key()])) << item.key();

  const auto check = read_json(run("checked") / "final.json").at("attention_self_check");
  EXPECT_EQ(check["backend"], "flash");
  EXPECT_EQ(check["arm"], "combo2");
  EXPECT_EQ(check["dtype"], "Float");
  EXPECT_EQ(check["device"], "cpu");
  EXPECT_EQ(check["head_dim"], 64);
  EXPECT_EQ(check["passed"], true);
  // combo2: sink logit + projection gate.
  for (const char* tensor : {"o", "lse", "phantom mass", "dq", "dk", "dv", "d b_h", "d w_h", "d c_h"}) {
    const auto& t = check["tensors"].at(tensor);
    EXPECT_GT(t["error"].get<double>(), 0.0) << tensor << ": float32 against float64";
    EXPECT_LE(t["error"].get<double>(), t["bound"].get<double>()) << tensor;
  }
  const auto record = RunDir(run("checked")).final_record();
  ASSERT_TRUE(record && record->attention_self_check);
  EXPECT_EQ(to_json(*record->attention_self_check), check);
}

// A wrong kernel stops the run before anything is written, with an error naming the backend, the
// arm, the dtype, the worst tensor and the setting that avoids it.
TEST_F(SelfCheckWiring, APlantedFaultStopsTrainBeforeTheDirectoryIsClaimed) {
  TrainOptions options;
  options.self_check_on_cpu = true;
  options.self_check = planted_fault();
  std::string what = "no error";
  try {
    train(config("faulty"), options);
  } catch (const AttentionSelfCheckError& e) {
    what = e.what();
    EXPECT_EQ(e.result().worst().tensor, "o");
  }
  for (const char* part : {"attention self-check failed", "backend flash (planted fault)", "arm combo2", "dtype Float",
                           "head_dim 64", "o is off by", "attention.backend: reference"})
    EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
  EXPECT_FALSE(fs::exists(run("faulty"))) << "a refused start leaves nothing behind";
}

// An analysis: open_trained() checks the model's attention (the reference, in float32 without
// autocast) and the provenance carries the result through its JSON; a planted fault stops it.
TEST_F(SelfCheckWiring, AnAnalysisRecordsTheCheckInItsProvenance) {
  ASSERT_EQ(train(config("a")).status, TrainStatus::finished);
  OpenOptions o;
  o.tokens.sequences = 2, o.tokens.length = 64, o.self_check_on_cpu = true;
  const auto opened = open_trained(run("a"), o);
  ASSERT_TRUE(opened.provenance.attention_self_check);
  const auto& check = *opened.provenance.attention_self_check;
  EXPECT_EQ(check.backend, "reference");
  EXPECT_EQ(check.arm, "combo2");
  EXPECT_EQ(check.dtype, "Float");
  EXPECT_TRUE(check.passed());
  const auto j = to_json(opened.provenance);
  EXPECT_EQ(to_json(*provenance_from_json(j).attention_self_check), j.at("attention_self_check"));

  o.self_check = planted_fault();
  EXPECT_THROW(open_trained(run("a"), o), AttentionSelfCheckError);
}

}  // namespace
}  // namespace attnlab
