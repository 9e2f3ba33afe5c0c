// `attnlab report` on hand-made run directories whose paired differences are worked out below by
// hand: every mean, sd, sign count and n; missing, partial and stale runs listed; a pair refused
// across different validation data.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "attnlab/final_record.h"
#include "attnlab/report.h"
#include "attnlab/run_config.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

// Final validation losses (nats) of tier t1, by seed (see the expectations below):
//   arm         s1     s2     s3
//   baseline    4.100  4.200  4.150
//   sink_logit  4.080  4.190  4.140
//   combo       4.076  4.181  4.145
//   combo2      4.071  4.182  4.130
//   norm_gate   4.093  4.199  4.141
//   proj_gate   4.090  4.185  partial (step 50)
//   off_by_one  4.085  4.195  4.149 on other validation data (fingerprint 2, not 1)
//   sink_token  4.098  never started  4.151
//   renorm      4.102  4.205  4.149
// Tier t2: baseline 4.300 (s1), 4.310 (s2); sink_logit 4.290 (s1), s2 stale (another config hash).
class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* t1_arms[] = {"baseline", "sink_logit", "combo", "combo2", "norm_gate", "proj_gate", "off_by_one", "sink_token", "renorm"};
    const double t1[3][9] = {{4.100, 4.080, 4.076, 4.071, 4.093, 4.090, 4.085, 4.098, 4.102},
                             {4.200, 4.190, 4.181, 4.182, 4.199, 4.185, 4.195, 0, 4.205},
                             {4.150, 4.140, 4.145, 4.130, 4.141, 0, 4.149, 4.151, 4.149}};
    for (int s = 0; s < 3; ++s)
      for (int a = 0; a < 9; ++a) {
        const std::string arm = t1_arms[a];
        const uint64_t seed = s + 1;
        add_to_manifest("t1", arm, seed);
        if (arm == "proj_gate" && seed == 3) partial("t1", arm, seed, 50);
        else if (arm == "sink_token" && seed == 2) continue;  // never started
        else finished("t1", arm, seed, t1[s][a], arm == "off_by_one" && seed == 3 ? 2 : 1);
      }
    for (const char* arm : {"baseline", "sink_logit"})
      for (uint64_t seed : {1, 2}) add_to_manifest("t2", arm, seed);
    finished("t2", "baseline", 1, 4.300);
    finished("t2", "baseline", 2, 4.310);
    finished("t2", "sink_logit", 1, 4.290);
    finished("t2", "sink_logit", 2, 4.280, 1, "old-hash");
    write_manifest();
  }

  fs::path dir() const { return tmp_.path(); }
  std::string name(const std::string& tier, const std::string& arm, uint64_t seed) const {
    return tier + "/" + arm + (variant_.empty() ? "" : "/" + variant_) + "/s" + std::to_string(seed);
  }
  void add_to_manifest(const std::string& tier, const std::string& arm, uint64_t seed) {
    manifest_.push_back({{"name", name(tier, arm, seed)}, {"tier", tier}, {"arm", arm}, {"seed", seed},
                         {"variant", variant_}, {"config_hash", "hash"}});
  }
  void write_manifest() { std::ofstream(dir() / "manifest.json") << nlohmann::json({{"runs", manifest_}}).dump(2); }
  fs::path claim(const std::string& tier, const std::string& arm, uint64_t seed) {
    const fs::path run = dir() / name(tier, arm, seed);
    fs::create_directories(run);
    RunConfig cfg;  // what a real run's config.yaml holds: every key
    cfg.tier = tier, cfg.seed = seed, cfg.model.arm = arm;
    cfg.data.train = "train_*.bin", cfg.data.val = "val_*.bin", cfg.train.max_steps = 100;
    if (window_) cfg.model.window = *window_, cfg.model.window_pattern = "LG", cfg.model.window_keep_first = 0;
    std::ofstream(run / "config.yaml") << to_yaml(cfg);
    return run;
  }
  void finished(const std::string& tier, const std::string& arm, uint64_t seed, double loss,
                uint64_t fingerprint = 1, const std::string& hash = "hash") {
    const fs::path run = claim(tier, arm, seed);
    FinalRecord f;  // every key, as the trainer writes it
    f.final_val_loss = f.best_val_loss = loss, f.steps = 100, f.config_hash = hash;
    f.arm = arm, f.seed = seed, f.tier = tier, f.val_tokens = 4096, f.val_fingerprint = fingerprint;
    std::ofstream(run / "final.json") << to_json(f).dump(2);
    // Two evaluations and a step without one (val_loss null).
    std::ofstream(run / "metrics.jsonl") << R"({"step":50,"tokens":6400,"train_loss":5.0,"val_loss":5.5})" "\n"
                                         << R"({"step":51,"tokens":6528,"train_loss":5.0,"val_loss":null})" "\n"
                                         << nlohmann::json({{"step", 100}, {"tokens", 12800}, {"val_loss", loss}}).dump() << "\n";
  }
  // Baseline's null twins at seeds 1 and 2 in `tier`, variant `variant`: 4.103 and 4.196, so +0.003 and
  // -0.004 against t1's baseline (the floor 0.0035 sqrt 2), in the manifest.
  void baseline_twins(const std::string& tier, const std::string& variant) {
    variant_ = variant;
    for (uint64_t seed : {1, 2}) add_to_manifest(tier, "baseline", seed);
    finished(tier, "baseline", 1, 4.103);
    finished(tier, "baseline", 2, 4.196);
    write_manifest();
  }
  void partial(const std::string& tier, const std::string& arm, uint64_t seed, int64_t step) {
    fs::create_directories(claim(tier, arm, seed) / "checkpoints" / ("step_0000" + std::to_string(step)));
  }
  static const GroupReport& group(const SweepReport& r, const std::string& tier) {
    for (const auto& g : r.groups)
      if (g.tier == tier) return g;
    throw std::runtime_error("no group " + tier);
  }
  static const DifferenceResult& diff(const GroupReport& g, const std::string& id) {
    for (const auto& d : g.differences)
      if (d.contrast.id == id) return d;
    throw std::runtime_error("no difference " + id);
  }
  static const ArmResult& arm(const GroupReport& g, const std::string& name) {
    for (const auto& a : g.arms)
      if (a.arm == name) return a;
    throw std::runtime_error("no arm " + name);
  }

  testing::TempDir tmp_;
  nlohmann::json manifest_ = nlohmann::json::array();
  std::string variant_;  ///< the variant of the runs the helpers add ("" for the grid above)
  std::optional<int64_t> window_;  ///< the window of the runs the helpers add (pattern LG), none above
};

// A windowed group against its full-attention twins (docs/windows.md, "The report and the sweep"):
//   tier tw      baseline s1 / s2   sink_logit s1 / s2
//   full         4.100 / 4.200      4.080 / 4.190      zero option 0.020 / 0.010
//   window 8     4.150 / 4.260      4.100 / 4.220      zero option 0.050 / 0.040
// shift 0.030 / 0.030; window cost baseline 0.050 / 0.060, sink_logit 0.020 / 0.030.
TEST_F(ReportTest, WindowedRunsPairWithTheirFullAttentionTwins) {
  const double full[2][2] = {{4.100, 4.200}, {4.080, 4.190}}, windowed[2][2] = {{4.150, 4.260}, {4.100, 4.220}};
  const char* arms[] = {"baseline", "sink_logit"};
  for (int w = 0; w < 2; ++w) {
    variant_ = w ? "model.window_pattern-LG" : "model.window_pattern-G";
    window_ = w ? std::optional<int64_t>(8) : std::nullopt;
    for (int a = 0; a < 2; ++a)
      for (uint64_t seed : {1, 2}) {
        add_to_manifest("tw", arms[a], seed);
        finished("tw", arms[a], seed, (w ? windowed : full)[a][seed - 1]);
      }
  }
  write_manifest();
  const auto r = build_report(dir(), false);
  ASSERT_EQ(r.windows.size(), 1u);
  const auto& g = r.windows[0];
  EXPECT_EQ(g.tier, "tw");
  EXPECT_EQ(g.variant, "model.window_pattern-LG");
  EXPECT_NEAR(diff(g, "window_zero_option").stats.mean, 0.045, 1e-12);
  EXPECT_NEAR(diff(g, "full_zero_option").stats.mean, 0.015, 1e-12);
  const auto& shift = diff(g, "window_zero_option_shift");
  ASSERT_EQ(shift.pairs.size(), 2u);
  EXPECT_NEAR(shift.pairs[0].value, 0.030, 1e-12);
  EXPECT_NEAR(shift.pairs[1].value, 0.030, 1e-12);
  EXPECT_NEAR(diff(g, "window_cost_baseline").stats.mean, 0.055, 1e-12);
  EXPECT_NEAR(diff(g, "window_cost_sink_logit").stats.mean, 0.025, 1e-12);
  EXPECT_EQ(arm(g, full_attention_arm("baseline")).stats.n, 2);
  EXPECT_NE(report_markdown(r).find("## Zero-option increment under windows: tier tw (model.window_pattern-LG)"),
            std::string::npos);
  EXPECT_EQ(report_json(r)["windows"].size(), 1u);
  // The other groups have no window: their report has no window table.
  EXPECT_EQ(group(r, "t1").variant, "");
}

void expect_stats(const SampleStats& s, int64_t n, double mean, std::optional<double> sd, int64_t same_sign,
                  const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(s.n, n);
  EXPECT_NEAR(s.mean, mean, 1e-12);
  ASSERT_EQ(s.sd.has_value(), sd.has_value());
  if (sd) {
    EXPECT_NEAR(*s.sd, *sd, 1e-12);
  }
  EXPECT_EQ(s.same_sign, same_sign);
}

// A variant beside the tier's plain runs, as a grid list gives them (docs/sweeps.md, "Grid lists"):
// t1's baseline under optim.name-sgd at 4.300 / 4.350 / 4.250 against plain 4.100 / 4.200 / 4.150:
// variant cost 0.200 / 0.150 / 0.100, mean 0.150, sd 0.05; with t1's twins (+0.003, -0.004; floor
// 0.0035 sqrt 2) that is 0.15 / (0.0035 sqrt 2) = 30.3 floors. The variant's own group stays.
TEST_F(ReportTest, AVariantPairsArmForArmWithThePlainRunsOnTheirFloor) {
  variant_ = "optim.name-sgd";
  const double sgd[] = {4.300, 4.350, 4.250};
  for (uint64_t seed : {1, 2, 3}) {
    add_to_manifest("t1", "baseline", seed);
    finished("t1", "baseline", seed, sgd[seed - 1]);
  }
  baseline_twins("t1", "null");
  const auto r = build_report(dir(), false);
  ASSERT_EQ(r.variants.size(), 1u);
  const auto& v = r.variants[0];
  EXPECT_EQ(v.tier, "t1");
  EXPECT_EQ(v.variant, "optim.name-sgd");
  ASSERT_EQ(v.differences.size(), 1u);  // the variant ran baseline only
  const auto& cost = diff(v, "variant_cost_baseline");
  EXPECT_EQ(cost.contrast.definition, "L(baseline, optim.name-sgd) - L(baseline)");
  expect_stats(cost.stats, 3, 0.150, 0.05, 3, "variant cost");
  ASSERT_TRUE(v.noise_floor.has_value());
  ASSERT_TRUE(cost.over_floor.has_value());
  EXPECT_NEAR(*cost.over_floor, 0.15 / (0.0035 * std::sqrt(2.0)), 1e-9);
  EXPECT_EQ(arm(v, plain_variant_arm("baseline")).stats.n, 3);
  EXPECT_EQ(r.windows.size(), 0u);
  // The variant is still a group of its own, without twins of its own.
  bool own = false;
  for (const auto& g : r.groups) own = own || (g.tier == "t1" && g.variant == "optim.name-sgd" && !g.noise_floor);
  EXPECT_TRUE(own);
  const auto md = report_markdown(r);
  EXPECT_NE(md.find("## Variant against the plain runs: tier t1 (optim.name-sgd)"), std::string::npos) << md;
  EXPECT_NE(md.find("| variant cost baseline | L(baseline, optim.name-sgd) - L(baseline) | +0.1500 |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| +30.3 |"), std::string::npos) << md;
  EXPECT_EQ(report_json(r)["variants"].size(), 1u);
}

// The windows table states the floor: the windowed group's twins, else those of its full-attention
// twins' group (here the full group "model.window_pattern-G" has baseline twins +0.003 / -0.004).
TEST_F(ReportTest, TheWindowTableStatesTheFloorOfTheTwinsGroup) {
  const double full[2] = {4.100, 4.200}, windowed[2] = {4.150, 4.260};
  for (int w = 0; w < 2; ++w) {
    variant_ = w ? "model.window_pattern-LG" : "model.window_pattern-G";
    window_ = w ? std::optional<int64_t>(8) : std::nullopt;
    for (uint64_t seed : {1, 2}) {
      add_to_manifest("tw", "baseline", seed);
      finished("tw", "baseline", seed, (w ? windowed : full)[seed - 1]);
    }
  }
  window_ = std::nullopt;
  baseline_twins("tw", "model.window_pattern-G/null");
  const auto r = build_report(dir(), false);
  ASSERT_EQ(r.windows.size(), 1u);
  ASSERT_TRUE(r.windows[0].noise_floor.has_value());
  const auto& cost = diff(r.windows[0], "window_cost_baseline");  // 0.050, 0.060
  ASSERT_TRUE(cost.over_floor.has_value());
  EXPECT_NEAR(*cost.over_floor, 0.055 / (0.0035 * std::sqrt(2.0)), 1e-9);
  EXPECT_TRUE(r.variants.empty()) << "the windowed group is reported as a window, not as a variant";
}

TEST_F(ReportTest, EveryPairedDifferenceOfTierOne) {
  const auto report = build_report(dir(), false);
  const auto& g = group(report, "t1");
  // zero option L(baseline) - L(sink_logit): 0.020, 0.010, 0.010 -> mean 0.04/3;
  // deviations 0.00667, -0.00333, -0.00333 -> sd = sqrt(6.667e-5 / 2) = 0.01 / sqrt(3)
  expect_stats(diff(g, "zero_option").stats, 3, 0.04 / 3, 0.0057735026918962576, 3, "zero_option");
  // filtering (norm) L(sink_logit) - L(combo): 0.004, 0.009, -0.005 -> mean 0.008/3 = 0.0026667;
  // deviations 0.0013333, 0.0063333, -0.0076667 -> sum of squares 1.00667e-4 -> sd = sqrt(5.0333e-5)
  expect_stats(diff(g, "filtering_norm").stats, 3, 0.008 / 3, 0.0070945988845975875, 2, "filtering_norm");
  // filtering (projection) L(sink_logit) - L(combo2): 0.009, 0.008, 0.010 -> mean 0.009, sd 0.001
  expect_stats(diff(g, "filtering_proj").stats, 3, 0.009, 0.001, 3, "filtering_proj");
  // norm_gate gain: 0.007, 0.001, 0.009 -> mean 0.017/3; deviations 0.00133, -0.00467, 0.00333
  // -> sum of squares 3.4667e-5 -> sd = sqrt(1.7333e-5) = 0.0041633
  expect_stats(diff(g, "gain_norm_gate").stats, 3, 0.017 / 3, 0.0041633319989322655, 3, "gain_norm_gate");
  // proj_gate gain: 0.010, 0.015 (s3 partial) -> mean 0.0125, sd = 0.005 / sqrt(2)
  expect_stats(diff(g, "gain_proj_gate").stats, 2, 0.0125, 0.0035355339059327377, 2, "gain_proj_gate");
  // off_by_one gain: 0.015, 0.005 (s3 on other data, refused) -> mean 0.010, sd = 0.010 / sqrt(2)
  expect_stats(diff(g, "gain_off_by_one").stats, 2, 0.010, 0.0070710678118654755, 2, "gain_off_by_one");
  // sink_token gain: 0.002, -0.001 (s2 never ran) -> mean 0.0005, sd = 0.003 / sqrt(2); 1 of 2 positive
  expect_stats(diff(g, "gain_sink_token").stats, 2, 0.0005, 0.0021213203435596424, 1, "gain_sink_token");
  // renorm: -0.002, -0.005, 0.001 -> mean -0.002; deviations 0, -0.003, 0.003 -> sd = sqrt(1.8e-5 / 2) = 0.003
  expect_stats(diff(g, "gain_renorm").stats, 3, -0.002, 0.003, 2, "gain_renorm");
  EXPECT_EQ(diff(g, "gain_renorm").stats.sign, -1);
  // overlap (norm) B - S - N + C: s1 4.100 - 4.080 - 4.093 + 4.076 = 0.003, s2 -0.008, s3 0.014
  // -> mean 0.003; deviations 0, -0.011, 0.011 -> sd = sqrt(2.42e-4 / 2) = 0.011
  expect_stats(diff(g, "overlap_norm").stats, 3, 0.003, 0.011, 2, "overlap_norm");
  // overlap (projection) B - S - P + C2: s1 4.100 - 4.080 - 4.090 + 4.071 = 0.001, s2 0.007 (s3: proj_gate
  // partial) -> mean 0.004, sd = 0.006 / sqrt(2)
  expect_stats(diff(g, "overlap_proj").stats, 2, 0.004, 0.0042426406871192853, 2, "overlap_proj");
}

TEST_F(ReportTest, EachSeedsValueAndWhyASeedWasNotPaired) {
  const auto report = build_report(dir(), false);
  const auto& g = group(report, "t1");
  const auto& zero = diff(g, "zero_option");
  ASSERT_EQ(zero.pairs.size(), 3u);
  EXPECT_EQ(zero.pairs[0].seed, 1u);
  EXPECT_NEAR(zero.pairs[0].value, 0.020, 1e-12);  // 4.100 - 4.080
  const auto& obo = diff(g, "gain_off_by_one");
  ASSERT_EQ(obo.skipped.size(), 1u);
  EXPECT_EQ(obo.skipped[0].seed, 3u);
  EXPECT_NE(obo.skipped[0].reason.find("different validation data"), std::string::npos) << obo.skipped[0].reason;
  EXPECT_NE(obo.skipped[0].reason.find("off_by_one (val_fingerprint 2"), std::string::npos) << obo.skipped[0].reason;
  const auto& token = diff(g, "gain_sink_token");
  ASSERT_EQ(token.skipped.size(), 1u);
  EXPECT_EQ(token.skipped[0].seed, 2u);
  EXPECT_EQ(token.skipped[0].reason, "no finished run of sink_token");
  EXPECT_EQ(diff(g, "gain_proj_gate").skipped.at(0).reason, "no finished run of proj_gate");
}

TEST_F(ReportTest, LossPerArmAndBestArm) {
  const auto report = build_report(dir(), false);
  const auto& g = group(report, "t1");
  ASSERT_EQ(g.arms.size(), 9u);
  EXPECT_EQ(g.arms[0].arm, "baseline");  // SPEC section 1's order
  // baseline 4.100, 4.200, 4.150 -> mean 4.15, deviations -0.05, 0.05, 0 -> sd = sqrt(0.005 / 2) = 0.05
  expect_stats(arm(g, "baseline").stats, 3, 4.15, 0.05, 3, "baseline");
  // combo2 4.071, 4.182, 4.130 -> mean 12.383 / 3 = 4.127667; deviations -0.056667, 0.054333, 0.002333
  // -> sum of squares 0.0061687 -> sd = sqrt(0.00308433) = 0.0555368
  expect_stats(arm(g, "combo2").stats, 3, 12.383 / 3, 0.05553677460326026, 3, "combo2");
  // off_by_one counts its finished s3 run here (a loss needs no partner): 4.085, 4.195, 4.149
  // -> mean 4.143; deviations -0.058, 0.052, 0.006 -> sd = sqrt(0.006104 / 2) = 0.0552449
  expect_stats(arm(g, "off_by_one").stats, 3, 4.143, 0.05524490926773253, 3, "off_by_one");
  // proj_gate 4.090, 4.185 (s3 partial) -> mean 4.1375, sd = 0.095 / sqrt(2)
  expect_stats(arm(g, "proj_gate").stats, 2, 4.1375, 0.06717514421272202, 2, "proj_gate");
  // sink_token 4.098, 4.151 -> mean 4.1245: the lowest mean of t1 (combo2's is 4.1277)
  expect_stats(arm(g, "sink_token").stats, 2, 4.1245, 0.037476659402887016, 2, "sink_token");
  ASSERT_TRUE(g.best_arm.has_value());
  EXPECT_EQ(*g.best_arm, "sink_token");
}

TEST_F(ReportTest, OneSeedHasNoSdAndStaleRunsAreNotPaired) {
  const auto report = build_report(dir(), false);
  const auto& g = group(report, "t2");
  // s1: 4.300 - 4.290 = 0.010; s2's sink_logit is from another config (stale) -> not paired.
  expect_stats(diff(g, "zero_option").stats, 1, 0.010, std::nullopt, 1, "t2 zero_option");
  EXPECT_EQ(diff(g, "zero_option").skipped.at(0).reason, "no finished run of sink_logit");
  // baseline 4.300, 4.310 -> mean 4.305, sd 0.01 / sqrt(2); sink_logit: only s1 (4.290), the best mean
  expect_stats(arm(g, "baseline").stats, 2, 4.305, 0.0070710678118654755, 2, "t2 baseline");
  EXPECT_EQ(*g.best_arm, "sink_logit");
  // No combo run in t2: the difference exists and says it has no pairs (the renderings list it once
  // as not in this sweep; see NotInThisSweepIsOneLine).
  EXPECT_EQ(diff(g, "filtering_norm").stats.n, 0);
  EXPECT_EQ(diff(g, "filtering_norm").skipped.size(), 2u);
}

TEST_F(ReportTest, NotInThisSweepIsOneLineAndUnfinishedArmsKeepTheirRow) {
  // t2 gets a combo run that never finished: filtering (norm) keeps its row, saying why it has no
  // pairs; the differences needing arms t2 never ran are one line, not a row each.
  add_to_manifest("t2", "combo", 1);
  partial("t2", "combo", 1, 50);
  std::ofstream(dir() / "manifest.json") << nlohmann::json({{"runs", manifest_}}).dump(2);
  const auto report = build_report(dir(), false);
  const auto md = report_markdown(report);
  const auto t2 = md.substr(md.find("## tier t2"));
  EXPECT_NE(t2.find("| filtering increment (norm) | L(sink_logit) - L(combo) | no pairs: no finished run of combo"),
            std::string::npos) << t2;
  EXPECT_NE(t2.find("Not in this sweep: filtering increment (projection), standalone gain norm_gate, standalone gain "
                    "proj_gate, standalone gain off_by_one, standalone gain sink_token, routing control renorm, 2x2 "
                    "overlap (norm gate), 2x2 overlap (projection gate), output-gate gain, output-gate gain (elementwise), "
                    "output-gate granularity, output gate over exact abstention, output gate vs filter, 2x2 overlap "
                    "(sink x output gate) (no run of combo2, norm_gate, proj_gate, off_by_one, sink_token, renorm, "
                    "out_gate, out_gate_elem, sink_out_gate)."),
            std::string::npos) << t2;
  EXPECT_EQ(t2.find("| standalone gain norm_gate |"), std::string::npos) << t2;
  // t1 ran the nine arms of paper 000: only the output gate's differences are not in its sweep.
  const auto t1 = md.substr(md.find("## tier t1"), md.find("## tier t2") - md.find("## tier t1"));
  EXPECT_NE(t1.find("Not in this sweep: output-gate gain, output-gate gain (elementwise), output-gate granularity, "
                    "output gate over exact abstention, output gate vs filter, 2x2 overlap (sink x output gate) (no run "
                    "of out_gate, out_gate_elem, sink_out_gate)."),
            std::string::npos) << t1;
  // JSON and CSV: measured differences only, the others listed once per group.
  const auto j = report_json(report);
  const auto& g2 = j["groups"][1];
  EXPECT_EQ(g2["tier"], "t2");
  ASSERT_EQ(g2["differences"].size(), 2u);  // zero_option, filtering_norm
  EXPECT_EQ(g2["differences"][1]["id"], "filtering_norm");
  ASSERT_EQ(g2["not_in_sweep"].size(), 14u);  // 8 of paper 000's, 6 of the output gate's
  EXPECT_EQ(g2["not_in_sweep"][0]["id"], "filtering_proj");
  EXPECT_EQ(g2["not_in_sweep"][0]["missing_arms"], nlohmann::json::array({"combo2"}));
  const auto diffs = report_csv(report).at("differences.csv");
  EXPECT_NE(diffs.find("t2,,filtering_norm,"), std::string::npos);
  EXPECT_EQ(diffs.find("t2,,gain_norm_gate,"), std::string::npos) << diffs;
  EXPECT_EQ(report_csv(report).at("pairs.csv").find("t2,,gain_norm_gate,"), std::string::npos);
}

TEST_F(ReportTest, PairedTIntervalPValueAndSeedsNeededInEveryRendering) {
  // zero option over t1's seeds: 0.020, 0.010, 0.010. scipy.stats.ttest_1samp: 95% interval
  // [-0.0010088424324982068, 0.027675509099164875], p 0.05719095841793663; 4 seeds would exclude 0,
  // and 4 give 80% power (a scan of n with scipy.stats.nct). Holm over t1's ten t p-values (scipy,
  // then a plain loop): p = 0.0572 is the second smallest, after filtering_proj's 0.00409 -> 9 x
  // 0.0572 = 0.5147186257613671. Sign flip: all three positive and no other signs reach the sum, so
  // 2 of 8 assignments: 0.25, the floor at n = 3; Wilcoxon: R+ = 6, the largest: 2 / 8 = 0.25.
  // t2: one seed, so none of them.
  const auto report = build_report(dir(), false);
  const auto md = report_markdown(report);
  EXPECT_NE(md.find("| quantity | definition | mean | sd | 95% CI | p (t) | p Holm | p sign-flip | p Wilcoxon | same sign "
                    "| n | seeds for CI to exclude 0 | seeds for 80% power |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| zero-option increment | L(baseline) - L(sink_logit) | +0.0133 | 0.0058 | [-0.0010, +0.0277] "
                    "| 0.057 | 0.515 | 0.250 (floor) | 0.250 (floor) | 3/3 | 3 | 4 | 4 |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| zero-option increment | L(baseline) - L(sink_logit) | +0.0100 | n/a | n/a | n/a | n/a | n/a | n/a "
                    "| 1/1 | 1 | n/a | n/a |"),
            std::string::npos) << md;
  const auto j = report_json(report);
  const auto& zero = j["groups"][0]["differences"][0];
  const auto& t = zero["paired_t"];
  EXPECT_NEAR(t["ci"][0].get<double>(), -0.0010088424324982068, 1e-12);
  EXPECT_NEAR(t["ci"][1].get<double>(), 0.027675509099164875, 1e-12);
  EXPECT_NEAR(t["p_value"].get<double>(), 0.05719095841793663, 1e-10);
  EXPECT_NEAR(t["p_value_holm"].get<double>(), 0.5147186257613671, 1e-9);
  EXPECT_EQ(t["seeds_needed"], 4);
  EXPECT_EQ(t["seeds_for_power"], 4);
  EXPECT_EQ(t["power"], 0.8);
  EXPECT_EQ(t["df"], 2);
  EXPECT_EQ(zero["sign_flip"]["p_value"], 0.25);
  EXPECT_EQ(zero["sign_flip"]["p_floor"], 0.25);
  EXPECT_EQ(zero["sign_flip"]["assignments"], 8);
  EXPECT_EQ(zero["wilcoxon"]["p_value"], 0.25);
  EXPECT_EQ(zero["wilcoxon"]["r_plus"], 6.0);
  EXPECT_EQ(zero["wilcoxon"]["method"], "exact");
  EXPECT_EQ(j["groups"][0]["holm_family"].size(), 10u);  // every difference of t1 has a t p-value
  EXPECT_TRUE(j["groups"][1]["holm_family"].empty());    // t2's only difference has one seed
  const auto& one = j["groups"][1]["differences"][0];
  for (const char* key : {"ci", "p_value", "p_value_holm", "seeds_needed", "seeds_for_power"})
    EXPECT_TRUE(one["paired_t"][key].is_null()) << key;
  EXPECT_TRUE(one["sign_flip"]["p_value"].is_null());
  EXPECT_TRUE(one["wilcoxon"]["p_value"].is_null());
  EXPECT_EQ(one["sign_flip"]["p_floor"], 1.0);  // why: one seed, the exact tests cannot go below 1
  EXPECT_TRUE(one["stats"]["sd"].is_null());
  const auto csv = report_csv(report).at("differences.csv");
  EXPECT_NE(csv.find("n,mean,sd,same_sign,ci95_low,ci95_high,p_value,seeds_needed,p_value_holm,seeds_for_power,"
                     "p_sign_flip,p_wilcoxon,exact_p_floor"),
            std::string::npos) << csv;
  // t2's one seed: the sd and every test cell are empty, not 0 and not "nan"; the floor is 1.
  const std::string t2_row = "t2,,zero_option,zero-option increment,L(baseline) - L(sink_logit),1,";
  const auto at = csv.find(t2_row);
  ASSERT_NE(at, std::string::npos) << csv;
  const auto line = csv.substr(at, csv.find('\n', at) - at);
  EXPECT_EQ(line.substr(line.size() - 13), ",,1,,,,,,,,,1") << line;
  EXPECT_EQ(line.find("nan"), std::string::npos) << line;
  const std::string t1_zero = "t1,,zero_option,zero-option increment,L(baseline) - L(sink_logit),3,";
  const auto t1_at = csv.find(t1_zero);
  ASSERT_NE(t1_at, std::string::npos) << csv;
  const auto t1_line = csv.substr(t1_at, csv.find('\n', t1_at) - t1_at);
  EXPECT_EQ(t1_line.substr(t1_line.size() - 17), ",4,0.25,0.25,0.25") << t1_line;  // power, sign flip, Wilcoxon, floor
}

TEST_F(ReportTest, TwoSeedsHaveNoExactTestAndHolmCoversTheTable) {
  // proj_gate's gain has two seeds (0.010, 0.015): its exact tests could only give 0.5 or 1, so n/a;
  // the t p 0.1257 (scipy) is Holm-adjusted to 1 with the table's nine others. filtering_proj
  // (0.009, 0.008, 0.010) has the smallest p, 0.00409, so its Holm p is 10 x 0.00409 = 0.0409.
  const auto report = build_report(dir(), false);
  const auto md = report_markdown(report);
  EXPECT_NE(md.find("| standalone gain proj_gate | L(baseline) - L(proj_gate) | +0.0125 | 0.0035 | "), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.126 | 1.000 | n/a | n/a | 2/2 | 2 | 3 | 3 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.004 | 0.041 | 0.250 (floor) | 0.250 (floor) | 3/3 | 3 | 2 | 3 |"), std::string::npos) << md;
  const auto& g = group(report, "t1");
  EXPECT_NEAR(*diff(g, "filtering_proj").p_holm, 0.040899966895204365, 1e-10);
  EXPECT_EQ(*diff(g, "gain_proj_gate").p_holm, 1.0);
  EXPECT_FALSE(diff(g, "gain_proj_gate").tests.sign_flip.has_value());
  EXPECT_EQ(*diff(g, "gain_proj_gate").tests.exact_p_floor, 0.5);
  // renorm (-0.002, -0.005, 0.001): |sum| 0.006 is reached by 4 of 8 sign assignments (+-(2, 5, 1),
  // +-(2, 5, -1) in 1e-3) -> 0.5; R+ = 1 (the rank of 0.001): P(R+ <= 1) = 2 / 8 -> p 0.5.
  EXPECT_NE(md.find("| routing control renorm | L(baseline) - L(renorm) | -0.0020 | 0.0030 | [-0.0095, +0.0055] | 0.368 "
                    "| 1.000 | 0.500 | 0.500 | 2/3 | 3 | 12 | 20 |"),
            std::string::npos) << md;
}

TEST_F(ReportTest, MarkdownListsUnfinishedRunsAndTheNumbers) {
  const auto md = report_markdown(build_report(dir(), true));
  for (const char* expected : {
           "- t1/proj_gate/s3: partial at step 50",
           "- t1/sink_token/s2: not started",
           "- t2/sink_logit/s2: stale: final.json is from config old-hash, the sweep expects hash",
           "| zero-option increment | L(baseline) - L(sink_logit) | +0.0133 | 0.0058 | [-0.0010, +0.0277] | 0.057 | 0.515 "
           "| 0.250 (floor) | 0.250 (floor) | 3/3 | 3 | 4 | 4 |",
           "Not in this sweep: filtering increment (norm), filtering increment (projection), standalone gain",
           "standalone gain off_by_one: seed 3 not paired (different validation data",
           "Best arm: **sink_token** (4.1245 ± 0.0375 (n=2))",
           "31 runs (from manifest.json): 28 finished, 1 partial, 1 stale, 1 not started.",
       })
    EXPECT_NE(md.find(expected), std::string::npos) << expected << "\n---\n" << md;
  // --compare-paper: the paper's 10m column with its zero-option increment.
  EXPECT_NE(md.find("|  | paper | +0.0185 | +0.0068 | +0.0052 | +0.0013 |"), std::string::npos) << md;
}

TEST_F(ReportTest, JsonAndCsvCarryTheSameNumbers) {
  const auto report = build_report(dir(), false);
  const auto j = report_json(report);
  const auto& t1 = j["groups"][0];
  EXPECT_EQ(t1["tier"], "t1");
  const auto& zero = t1["differences"][0];
  EXPECT_EQ(zero["id"], "zero_option");
  EXPECT_NEAR(zero["stats"]["mean"].get<double>(), 0.04 / 3, 1e-12);
  EXPECT_EQ(zero["stats"]["n"], 3);
  EXPECT_EQ(zero["terms"]["sink_logit"], -1);
  EXPECT_TRUE(t1["differences"][4]["skipped"][0]["reason"].is_string());
  // Curves: the two evaluated steps of metrics.jsonl, not the step without an evaluation.
  const auto& run0 = j["runs"][0];
  EXPECT_EQ(run0["name"], "t1/baseline/s1");
  ASSERT_EQ(run0["val_curve"].size(), 2u);
  EXPECT_EQ(run0["val_curve"][1][0], 100);
  EXPECT_NEAR(run0["val_curve"][1][2].get<double>(), 4.100, 1e-12);
  // Training losses: the two step records that carry one, as [step, tokens, loss].
  EXPECT_EQ(run0["train_curve"], nlohmann::json::parse("[[50, 6400, 5.0], [51, 6528, 5.0]]"));

  const auto csv = report_csv(report);
  const std::string renorm_row = "t1,,gain_renorm,routing control renorm,L(baseline) - L(renorm),3,";
  const auto& diffs = csv.at("differences.csv");
  const auto at = diffs.find(renorm_row);
  ASSERT_NE(at, std::string::npos) << diffs;
  EXPECT_NEAR(std::stod(diffs.substr(at + renorm_row.size())), -0.002, 1e-12);  // then sd 0.003, same sign 2
  EXPECT_NE(csv.at("pairs.csv").find("t1,,gain_off_by_one,3,,\"different validation data"), std::string::npos)
      << csv.at("pairs.csv");
  EXPECT_NE(csv.at("runs.csv").find("t1/sink_token/s2,t1,,sink_token,2,not_started"), std::string::npos);

  const auto written = write_report_files(report, dir() / "out");
  EXPECT_EQ(written.size(), 7u);
  EXPECT_TRUE(fs::exists(dir() / "out/report.json"));
}

// Null twins of t1's baseline (variant "null", as a sweep's null_pairs names them): 4.103 at s1,
// 4.196 at s2, s3 stopped at step 50. Null differences twin - original: +0.003 and -0.004, mean
// -0.0005, sd sqrt(2 * 0.0035^2) = 0.0035 sqrt 2 (the floor). The zero-option increment of t1
// (0.020, 0.010, 0.010; mean 0.04 / 3) is then 0.04 / 3 / (0.0035 sqrt 2) = 2.694 floors from 0.
TEST_F(ReportTest, NullTwinsGiveTheirGroupANoiseFloorAndFormNoGroupOfTheirOwn) {
  variant_ = "null";
  for (uint64_t seed : {1, 2, 3}) add_to_manifest("t1", "baseline", seed);
  finished("t1", "baseline", 1, 4.103);
  finished("t1", "baseline", 2, 4.196);
  partial("t1", "baseline", 3, 50);
  write_manifest();
  const auto report = build_report(dir(), false);
  for (const auto& g : report.groups) EXPECT_NE(g.variant, "null") << "null twins form no group";
  const auto& t1 = group(report, "t1");
  ASSERT_TRUE(t1.noise_floor.has_value());
  const auto& floor = *t1.noise_floor;
  ASSERT_EQ(floor.pairs.size(), 2u);
  EXPECT_EQ(floor.pairs[0].arm, "baseline");
  EXPECT_EQ(floor.pairs[0].seed, 1u);
  EXPECT_NEAR(floor.pairs[0].value, 0.003, 1e-12);
  EXPECT_NEAR(floor.pairs[1].value, -0.004, 1e-12);
  expect_stats(floor.stats, 2, -0.0005, 0.0035 * std::sqrt(2.0), 1, "null differences");
  ASSERT_EQ(floor.skipped.size(), 1u);
  EXPECT_EQ(floor.skipped[0], "baseline s3: the null twin has not finished");
  const auto& zero = diff(t1, "zero_option");
  ASSERT_TRUE(zero.over_floor.has_value());
  EXPECT_NEAR(*zero.over_floor, 0.04 / 3 / (0.0035 * std::sqrt(2.0)), 1e-9);
  EXPECT_FALSE(group(report, "t2").noise_floor.has_value()) << "t2 has no null twins";

  const auto md = report_markdown(report);
  EXPECT_NE(md.find("| mean / floor |"), std::string::npos);
  EXPECT_NE(md.find("| +2.7 |"), std::string::npos) << md;
  EXPECT_NE(md.find("2 null differences (twin - original, nats): mean -0.0005, sd 0.0049 (the floor); arms baseline."),
            std::string::npos) << md;
  const auto j = report_json(report);
  EXPECT_NEAR(j["groups"][0]["noise_floor"]["floor"].get<double>(), 0.0035 * std::sqrt(2.0), 1e-12);
  EXPECT_EQ(j["groups"][0]["noise_floor"]["pairs"].size(), 2u);
  EXPECT_FALSE(j["groups"][1].contains("noise_floor"));
  const auto csv = report_csv(report);
  EXPECT_NE(csv.at("noise_floor.csv").find("t1,,baseline,2,-0.00400000000000"), std::string::npos) << csv.at("noise_floor.csv");
  EXPECT_NE(csv.at("differences.csv").find(",over_floor"), std::string::npos);
}

TEST_F(ReportTest, WithoutNullTwinsTheRenderingsHaveNoFloorColumns) {
  const auto report = build_report(dir(), false);
  for (const auto& g : report.groups) EXPECT_FALSE(g.noise_floor.has_value());
  EXPECT_EQ(report_markdown(report).find("mean / floor"), std::string::npos);
  EXPECT_EQ(report_markdown(report).find("Noise floor"), std::string::npos);
  EXPECT_EQ(report_csv(report).count("noise_floor.csv"), 0u);
  EXPECT_EQ(report_csv(report).at("differences.csv").find("over_floor"), std::string::npos);
}

// Task accuracies (docs/downstream.md) in final.json, by hand (tier t1, task copa):
//   acc          s1    s2    s3        acc_norm   s1    s2    s3
//   baseline     0.50  0.60  0.55                 0.40  0.45  0.50
//   sink_logit   0.60  0.65  0.58                 0.42  0.49  0.51
//   combo2       0.70  0.50  -    (s1 scored other items: fingerprint 5, not 9; s3 has no tasks)
//   combo        no tasks
// The zero option over the error rate, E(baseline) - E(sink_logit) = acc(sink_logit) - acc(baseline):
// acc 0.10, 0.05, 0.03 -> mean 0.06, sd 0.0360555; acc_norm 0.02, 0.04, 0.01 -> mean 0.07/3, sd 0.0152753.
TEST_F(ReportTest, TaskAccuraciesArePairedOverTheErrorRateWithTheSameStatistics) {
  const auto before = build_report(dir(), false);  // no run has tasks: the report of before
  EXPECT_TRUE(group(before, "t1").tasks.empty());
  EXPECT_EQ(report_csv(before).size(), 5u);
  EXPECT_EQ(report_markdown(before).find("Task "), std::string::npos);
  EXPECT_FALSE(report_json(before)["groups"][0].contains("tasks"));
  auto add_tasks = [&](const std::string& arm, uint64_t seed, double acc, double acc_norm, uint64_t fingerprint) {
    const auto path = dir() / name("t1", arm, seed) / "final.json";
    auto j = nlohmann::json::parse(std::ifstream(path));
    const TaskAccuracies tasks = {{"copa", {acc, acc_norm, 100, fingerprint}}};
    j["tasks"] = to_json(tasks);
    std::ofstream(path) << j.dump(2);
  };
  const double base[3][2] = {{0.50, 0.40}, {0.60, 0.45}, {0.55, 0.50}}, sink[3][2] = {{0.60, 0.42}, {0.65, 0.49}, {0.58, 0.51}};
  for (uint64_t s = 1; s <= 3; ++s) {
    add_tasks("baseline", s, base[s - 1][0], base[s - 1][1], 9);
    add_tasks("sink_logit", s, sink[s - 1][0], sink[s - 1][1], 9);
  }
  add_tasks("combo2", 1, 0.70, 0.70, 5);
  add_tasks("combo2", 2, 0.50, 0.50, 9);
  const auto report = build_report(dir(), false);
  const auto& g = group(report, "t1");
  ASSERT_EQ(g.tasks.size(), 2u);
  EXPECT_EQ(g.tasks[0].task, "copa");
  EXPECT_EQ(g.tasks[0].metric, "acc");
  EXPECT_EQ(g.tasks[1].metric, "acc_norm");
  auto task_diff = [](const TaskReport& t, const std::string& id) -> const DifferenceResult& {
    for (const auto& d : t.differences)
      if (d.contrast.id == id) return d;
    throw std::runtime_error("no difference " + id);
  };
  expect_stats(task_diff(g.tasks[0], "zero_option").stats, 3, 0.06, 0.03605551275463991, 3, "copa acc zero_option");
  expect_stats(task_diff(g.tasks[1], "zero_option").stats, 3, 0.07 / 3, 0.015275252316519456, 3, "copa acc_norm zero_option");
  EXPECT_TRUE(task_diff(g.tasks[0], "zero_option").tests.sign_flip);  // the loss table's statistics
  // filtering (projection) E(sink_logit) - E(combo2): s2 only, 0.50 -> 0.65 acc: -0.15.
  const auto& proj = task_diff(g.tasks[0], "filtering_proj");
  ASSERT_EQ(proj.pairs.size(), 1u);
  EXPECT_EQ(proj.pairs[0].seed, 2u);
  EXPECT_NEAR(proj.pairs[0].value, -0.15, 1e-12);
  ASSERT_EQ(proj.skipped.size(), 2u);
  EXPECT_NE(proj.skipped[0].reason.find("different task items: sink_logit (task copa fingerprint 0000000000000009, 100 items) vs "
                                        "combo2 (task copa fingerprint 0000000000000005, 100 items)"),
            std::string::npos)
      << proj.skipped[0].reason;
  EXPECT_EQ(proj.skipped[1].reason, "no task copa acc in final.json of combo2");
  EXPECT_EQ(task_diff(g.tasks[0], "filtering_norm").stats.n, 0);  // combo scored nothing
  // The arms' mean accuracy.
  EXPECT_NEAR(g.tasks[0].arms[0].stats.mean, (0.50 + 0.60 + 0.55) / 3, 1e-12);
  EXPECT_EQ(g.tasks[0].arms[0].arm, "baseline");
  // The loss table is what it was; tier t2 has no tasks.
  expect_stats(diff(g, "zero_option").stats, 3, 0.04 / 3, 0.0057735026918962576, 3, "zero_option");
  EXPECT_TRUE(group(report, "t2").tasks.empty());
  // Renderings: Markdown's task tables, JSON's "tasks" (t1 only), the three task CSVs.
  const auto md = report_markdown(report);
  EXPECT_NE(md.find("### Task copa: paired differences of the error rate E = 1 - acc_norm"), std::string::npos);
  EXPECT_NE(md.find("| zero-option increment | E(baseline) - E(sink_logit) | +0.0600 |"), std::string::npos) << md;
  const auto j = report_json(report);
  ASSERT_TRUE(j["groups"][0].contains("tasks"));
  EXPECT_EQ(j["groups"][0]["tasks"][0]["differences"][0]["id"], "zero_option");
  EXPECT_NEAR(j["groups"][0]["tasks"][0]["differences"][0]["stats"]["mean"].get<double>(), 0.06, 1e-12);
  EXPECT_FALSE(j["groups"][1].contains("tasks"));
  const auto csv = report_csv(report);
  ASSERT_EQ(csv.size(), 8u);
  EXPECT_NE(csv.at("task_differences.csv").find("t1,,copa,acc,zero_option,zero-option increment,3,0.0"), std::string::npos)
      << csv.at("task_differences.csv");
  EXPECT_NE(csv.at("task_pairs.csv").find("t1,,copa,acc,filtering_proj,2,-0.1"), std::string::npos) << csv.at("task_pairs.csv");
  EXPECT_NE(csv.at("task_accuracy.csv").find("t1,,copa,acc_norm,sink_logit,3,"), std::string::npos);
}

// eval.trigger_tokens (docs/data.md): val_loss_trigger and val_loss_other are paired like the
// final loss, on the same validation data; a run without them is skipped saying so, a domain
// without targets (null) is not measured; sweeps without them report what they did.
TEST_F(ReportTest, TriggerAndOtherLossesArePairedLikeTheFinalLoss) {
  const auto before = build_report(dir(), false);
  EXPECT_TRUE(group(before, "t1").domains.empty());
  EXPECT_EQ(report_markdown(before).find("val_loss_trigger"), std::string::npos);
  EXPECT_FALSE(report_json(before)["groups"][0].contains("domains"));
  auto add_split = [&](const std::string& arm, uint64_t seed, nlohmann::json trigger, double other) {
    const auto path = dir() / name("t1", arm, seed) / "final.json";
    auto j = nlohmann::json::parse(std::ifstream(path));
    j["val_loss_trigger"] = trigger, j["val_loss_other"] = other;
    std::ofstream(path) << j.dump(2);
  };
  // trigger: baseline 0.50 0.40 0.45, sink_logit 0.30 0.35 0.20 -> zero option 0.20 0.05 0.25
  // other:   baseline 2.50 2.60 2.55, sink_logit 2.48 2.59 2.56 -> zero option 0.02 0.01 -0.01
  const double bt[] = {0.50, 0.40, 0.45}, st[] = {0.30, 0.35, 0.20}, bo[] = {2.50, 2.60, 2.55}, so[] = {2.48, 2.59, 2.56};
  for (uint64_t s = 1; s <= 3; ++s) {
    add_split("baseline", s, bt[s - 1], bo[s - 1]);
    add_split("sink_logit", s, st[s - 1], so[s - 1]);
  }
  add_split("combo2", 1, nullptr, 2.4);  // no trigger target: not measured
  const auto report = build_report(dir(), false);
  const auto& g = group(report, "t1");
  ASSERT_EQ(g.domains.size(), 2u);
  EXPECT_EQ(g.domains[0].domain, "val_loss_trigger");
  EXPECT_EQ(g.domains[1].domain, "val_loss_other");
  auto domain_diff = [](const DomainReport& d, const std::string& id) -> const DifferenceResult& {
    for (const auto& x : d.differences)
      if (x.contrast.id == id) return x;
    throw std::runtime_error("no difference " + id);
  };
  expect_stats(domain_diff(g.domains[0], "zero_option").stats, 3, 0.5 / 3, 0.10408329997330664, 3, "trigger zero_option");
  expect_stats(domain_diff(g.domains[1], "zero_option").stats, 3, 0.02 / 3, 0.015275252316519419, 2, "other zero_option");
  const auto& proj = domain_diff(g.domains[0], "filtering_proj");  // L(sink_logit) - L(combo2)
  EXPECT_EQ(proj.stats.n, 0);
  ASSERT_FALSE(proj.skipped.empty());
  EXPECT_EQ(proj.skipped[0].reason, "no val_loss_trigger in final.json of combo2");
  EXPECT_NEAR(domain_diff(g.domains[1], "filtering_proj").pairs.at(0).value, 2.48 - 2.4, 1e-12);
  EXPECT_NEAR(g.domains[0].arms[0].stats.mean, 0.45, 1e-12);
  expect_stats(diff(g, "zero_option").stats, 3, 0.04 / 3, 0.0057735026918962576, 3, "zero_option");  // as before
  EXPECT_TRUE(group(report, "t2").domains.empty());
  const auto md = report_markdown(report);
  EXPECT_NE(md.find("### val_loss_trigger: paired differences"), std::string::npos) << md;
  EXPECT_NE(md.find("| zero-option increment | L(baseline) - L(sink_logit) | +0.1667 |"), std::string::npos) << md;
  const auto j = report_json(report);
  ASSERT_TRUE(j["groups"][0].contains("domains"));
  EXPECT_EQ(j["groups"][0]["domains"][1]["domain"], "val_loss_other");
  EXPECT_EQ(j["groups"][0]["domains"][0]["differences"][0]["id"], "zero_option");
  EXPECT_FALSE(g.domains[0].noise_floor.has_value()) << "no twins: no floor";
  EXPECT_EQ(md.find("mean / floor"), std::string::npos);

  // Twins give each domain a floor of its own, from the twins' losses in that domain: trigger
  // 0.52 / 0.37 against 0.50 / 0.40 (+0.02, -0.03: sd 0.05 / sqrt 2), other 2.51 / 2.60 (+0.01, 0).
  baseline_twins("t1", "null");
  const double tt[] = {0.52, 0.37}, to[] = {2.51, 2.60};
  for (uint64_t s = 1; s <= 2; ++s) add_split("baseline", s, tt[s - 1], to[s - 1]);
  const auto twinned = build_report(dir(), false);
  const auto& d = group(twinned, "t1").domains;
  ASSERT_TRUE(d[0].noise_floor.has_value());
  ASSERT_EQ(d[0].noise_floor->pairs.size(), 2u);
  EXPECT_NEAR(d[0].noise_floor->pairs[1].value, -0.03, 1e-12);
  EXPECT_NEAR(*d[0].noise_floor->stats.sd, 0.05 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(*domain_diff(d[0], "zero_option").over_floor, 0.5 / 3 / (0.05 / std::sqrt(2.0)), 1e-9);
  EXPECT_NEAR(*d[1].noise_floor->stats.sd, 0.01 / std::sqrt(2.0), 1e-12);
  const auto twinned_md = report_markdown(twinned);
  const auto trigger_at = twinned_md.find("### val_loss_trigger: paired differences");
  ASSERT_NE(trigger_at, std::string::npos);
  EXPECT_NE(twinned_md.find("| mean / floor |", trigger_at), std::string::npos);
  EXPECT_NE(report_json(twinned)["groups"][0]["domains"][0].at("noise_floor").at("floor"), nullptr);
}

TEST_F(ReportTest, WithoutAManifestRunDirectoriesAreFoundAndUnstartedOnesCannotBe) {
  fs::remove(dir() / "manifest.json");
  const auto report = build_report(dir(), false);
  EXPECT_FALSE(report.from_manifest);
  EXPECT_EQ(report.runs.size(), 30u);  // the never-started run left no trace
  const auto& g = group(report, "t1");
  expect_stats(diff(g, "zero_option").stats, 3, 0.04 / 3, 0.0057735026918962576, 3, "zero_option");
  // No expected hash without a manifest: t2/sink_logit/s2 counts as finished and pairs.
  // s1 0.010, s2 4.310 - 4.280 = 0.030 -> mean 0.020, sd = 0.020 / sqrt(2)
  expect_stats(diff(group(report, "t2"), "zero_option").stats, 2, 0.020, 0.014142135623730951, 2, "t2 zero_option");
}

TEST_F(ReportTest, LongRunsTrainingLossIsAveragedInBinsOfConsecutiveSteps) {
  // 1030 steps > kTrainCurvePoints (512): bins of ceil(1030 / 512) = 3 steps, the last one of 1030 - 3 * 343
  // = 1 step; each point at its bin's last step. Loss = step, so a bin's mean is its middle step.
  const fs::path run = dir() / name("t1", "baseline", 1);
  std::ofstream metrics(run / "metrics.jsonl", std::ios::trunc);
  for (int64_t step = 1; step <= 1030; ++step)
    metrics << nlohmann::json({{"step", step}, {"tokens", step * 10}, {"train_loss", double(step)}}).dump() << "\n";
  metrics.close();
  const auto report = build_report(dir(), false);
  const auto& curve = report.runs[0].train_curve;
  ASSERT_EQ(report.runs[0].name, "t1/baseline/s1");
  ASSERT_EQ(curve.size(), 344u);
  EXPECT_EQ(curve[0].step, 3);
  EXPECT_EQ(curve[0].tokens, 30);
  EXPECT_DOUBLE_EQ(curve[0].train_loss, 2.0);  // (1 + 2 + 3) / 3
  EXPECT_EQ(curve[342].step, 1029);
  EXPECT_DOUBLE_EQ(curve[342].train_loss, 1028.0);
  EXPECT_EQ(curve[343].step, 1030);
  EXPECT_DOUBLE_EQ(curve[343].train_loss, 1030.0);  // a bin of one step
}

TEST(ReportErrors, AMissingDirectoryIsAClearError) {
  EXPECT_THROW(build_report("/nonexistent/attnlab/sweep", false), std::runtime_error);
}

}  // namespace
}  // namespace attnlab
