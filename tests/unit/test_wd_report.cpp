// The weight-decay sweep's report (SPEC section 5): fits that recover known a, b, p from synthetic
// peaks (exact, and noisy with closed-form OLS answers), peak finding, and a hand-made sweep.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attnlab/activation_capture.h"
#include "attnlab/final_record.h"
#include "attnlab/run_config.h"
#include "attnlab/wd_report.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

TEST(WdFits, ExactPeaksRecoverAB_AndP) {
  const std::vector<double> lambda = {0.01, 0.03, 0.1, 0.3};
  std::vector<double> t, peak;
  for (double l : lambda) t.push_back(100.0 - 20.0 * std::log(l)), peak.push_back(5.0 * std::pow(l, -0.5));
  const auto step = fit_peak_step(lambda, t);
  EXPECT_EQ(step.n, 4u);
  EXPECT_NEAR(step.a, 100.0, 1e-9);
  EXPECT_NEAR(step.b, 20.0, 1e-9);
  EXPECT_NEAR(step.r, -1.0, 1e-12);  // t falls as ln(lambda) grows
  const auto size = fit_peak_size(lambda, peak);
  EXPECT_NEAR(size.p, -0.5, 1e-12);
  EXPECT_NEAR(size.log_c, std::log(5.0), 1e-12);
  ASSERT_TRUE(size.p_se.has_value());
  EXPECT_NEAR(*size.p_se, 0.0, 1e-7);
}

TEST(WdFits, NoisyPointsGiveTheClosedFormOlsAnswer) {
  // x = ln(lambda) = 1, 2, 3, 4; y = 2, 4, 5, 4. By hand: Sxx = 5, Sxy = 3.5, Syy = 4.75, slope 0.7,
  // intercept 2, residuals -0.7 0.6 0.9 -0.8 (SSR 2.3), se = sqrt(2.3 / 2 / 5), r = 3.5 / sqrt(23.75).
  const std::vector<double> lambda = {std::exp(1.0), std::exp(2.0), std::exp(3.0), std::exp(4.0)};
  const std::vector<double> y = {2, 4, 5, 4};
  const auto line = fit_line({1, 2, 3, 4}, y);
  EXPECT_NEAR(line.slope, 0.7, 1e-12);
  EXPECT_NEAR(line.intercept, 2.0, 1e-12);
  EXPECT_NEAR(line.r, 3.5 / std::sqrt(23.75), 1e-12);
  EXPECT_NEAR(*line.slope_se, std::sqrt(0.23), 1e-12);
  const auto step = fit_peak_step(lambda, y);
  EXPECT_NEAR(step.a, 2.0, 1e-12);
  EXPECT_NEAR(step.b, -0.7, 1e-12);
  std::vector<double> peak;
  for (double v : y) peak.push_back(std::exp(v));
  const auto size = fit_peak_size(lambda, peak);
  EXPECT_NEAR(size.p, 0.7, 1e-12);
  EXPECT_NEAR(*size.p_se, std::sqrt(0.23), 1e-12);
  EXPECT_FALSE(fit_line({1, 2}, {3, 5}).slope_se.has_value());  // n = 2: no residual degrees of freedom
}

TEST(WdFits, BadInputIsRefused) {
  EXPECT_THROW(fit_line({1}, {1}), std::invalid_argument);
  EXPECT_THROW(fit_line({1, 1}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(fit_peak_step({0.0, 0.1}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(fit_peak_size({0.1, 0.3}, {1, 0}), std::invalid_argument);
}

TEST(WdPeaks, PeakInsideTheWindowOnly) {
  std::string note;
  EXPECT_EQ(find_peak({{0, 1, 0}, {10, 5, 1}, {20, 5, 2}, {30, 2, 1}}, &note)->step, 10);  // first of ties
  EXPECT_FALSE(find_peak({{0, 1, 0}, {10, 2, 0}, {20, 3, 0}}, &note));
  EXPECT_NE(note.find("last tracked step"), std::string::npos);
  EXPECT_FALSE(find_peak({{0, 9, 0}, {10, 2, 0}}, &note));
  EXPECT_NE(note.find("first tracked step"), std::string::npos);
  EXPECT_FALSE(find_peak({}, &note));
}

class WdSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnlab_wd_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A run of micro/baseline with weight decay `lambda` whose m(t) is `maxima` at steps 0, 10, 20, ...
  void run(double lambda, const std::vector<double>& maxima) {
    const fs::path run_dir = dir_ / "micro/baseline" / fmt_level(lambda) / "s1";
    fs::create_directories(run_dir);
    RunConfig cfg;
    cfg.tier = "micro";
    cfg.data.train = "t_*.bin", cfg.data.val = "v_*.bin";
    cfg.train.max_steps = 10;
    cfg.optim.weight_decay = lambda;
    std::ofstream(run_dir / "config.yaml") << to_yaml(cfg);
    FinalRecord f;  // every key, as the trainer writes it
    f.final_val_loss = f.best_val_loss = 5.0, f.steps = 10, f.tier = "micro", f.arm = "baseline", f.seed = 1;
    std::ofstream(run_dir / "final.json") << to_json(f).dump();
    std::ofstream metrics(run_dir / "metrics.jsonl");
    for (size_t i = 0; i < maxima.size(); ++i) {
      const int64_t step = int64_t(i) * 10;
      metrics << nlohmann::json({{"step", step}, {"train_loss", 1.0}, {"val_loss", nullptr}}).dump() << "\n";
      // layer 1 holds the largest value; layer 0 a smaller one (records as the trainer writes them)
      ActivationCapture capture;
      for (int64_t l : {0, 1}) {
        LayerActivations a;
        a.layer = l;
        a.peak.max_abs = l == 1 ? maxima[i] : maxima[i] / 2;
        capture.layers.push_back(a);
      }
      metrics << nlohmann::json({{"type", "activations"}, {"step", step}, {"layers", layers_json(capture)}}).dump()
              << "\n";
    }
  }
  static std::string fmt_level(double lambda) {
    std::ostringstream s;
    s << "optim.weight_decay-" << lambda;
    return s.str();
  }
  fs::path dir_;
};

TEST_F(WdSweepTest, PeaksFitsAndRunsWithoutAPeak) {
  // peaks at t = 20 (lambda 0.3) and t = 40 (lambda 0.03): b = 20 / ln(10), p from 4 and 8
  run(0.03, {1, 2, 4, 6, 8, 3});
  run(0.3, {1, 3, 4, 2, 1, 1});
  run(0.0, {1, 2, 3, 4, 5, 6});   // still growing: no peak within the window
  run(0.1, {1, 9, 3, 2, 1, 1});   // peak at 10, but fit it too
  const auto report = build_wd_report(dir_);
  ASSERT_EQ(report.runs.size(), 4u);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].group, "micro/baseline");
  int fitted = 0;
  for (const auto& r : report.runs) {
    if (r.lambda == 0.0) {
      EXPECT_FALSE(r.peak.has_value());
      EXPECT_NE(r.note.find("no peak within the window"), std::string::npos);
    } else {
      ASSERT_TRUE(r.peak.has_value()) << r.name;
      EXPECT_EQ(r.peak->layer, 1);
      fitted += r.fitted;
    }
  }
  EXPECT_EQ(fitted, 3);
  // Independent OLS over (ln 0.03, 40, 8), (ln 0.1, 10, 9), (ln 0.3, 20, 4)
  const std::vector<double> x = {std::log(0.03), std::log(0.1), std::log(0.3)}, t = {40, 10, 20},
                            lp = {std::log(8.0), std::log(9.0), std::log(4.0)};
  auto slope = [&](const std::vector<double>& y) {
    const double mx = (x[0] + x[1] + x[2]) / 3, my = (y[0] + y[1] + y[2]) / 3;
    double sxy = 0, sxx = 0;
    for (int i = 0; i < 3; ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
    return sxy / sxx;
  };
  ASSERT_TRUE(report.groups[0].step_fit.has_value());
  EXPECT_NEAR(report.groups[0].step_fit->b, -slope(t), 1e-9);
  EXPECT_NEAR(report.groups[0].size_fit->p, slope(lp), 1e-9);
  // the JSON the plot script reads says the same
  const auto j = wd_json(report);
  EXPECT_EQ(j["kind"], "weight_decay");
  EXPECT_NEAR(j["groups"][0]["peak_size_fit"]["p"].get<double>(), slope(lp), 1e-9);
  EXPECT_NE(wd_markdown(report).find("no peak within the window"), std::string::npos);
  EXPECT_NE(wd_csv(report).at("wd_fits.csv").find("micro/baseline,3,"), std::string::npos);
}

TEST_F(WdSweepTest, UnfinishedRunsAreNotFitted) {
  run(0.03, {1, 2, 4, 6, 8, 3});
  run(0.3, {1, 3, 4, 2, 1, 1});
  run(0.1, {1, 9, 3, 2, 1, 1});
  fs::remove(dir_ / "micro/baseline/optim.weight_decay-0.1/s1/final.json");
  const auto report = build_wd_report(dir_);
  for (const auto& r : report.runs) {
    EXPECT_EQ(r.fitted, r.lambda != 0.1) << r.name;
    if (r.lambda == 0.1) EXPECT_EQ(r.note, "run not finished: not fitted");
  }
  EXPECT_EQ(report.groups[0].step_fit->n, 2u);
}

TEST_F(WdSweepTest, OneLambdaGivesNoFitAndSaysWhy) {
  run(0.1, {1, 9, 3});
  const auto report = build_wd_report(dir_);
  EXPECT_FALSE(report.groups[0].step_fit.has_value());
  EXPECT_NE(report.groups[0].note.find("fewer than two distinct lambdas"), std::string::npos);
  EXPECT_FALSE(report.runs[0].fitted);
}

}  // namespace
}  // namespace attnlab
