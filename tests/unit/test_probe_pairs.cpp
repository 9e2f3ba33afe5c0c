// The report's paired probe differences from hand-made probe results: each arm's difference from
// baseline at the same seed, its 95% t interval (Student's t quantile written out), Holm over one
// measure's rows and the floor from null twins, all worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attnlab/probe_report.h"
#include "attnlab/sweep.h"

namespace attnlab {
namespace {

constexpr double kT975df2 = 4.302652729911275;  // t_{0.975, 2} (scipy.stats.t.ppf(0.975, 2))

ProbeReportRun probed(const std::string& arm, uint64_t seed, double first_key_mass, double sink_ratio,
                      const std::string& variant = "") {
  ProbeResult p;
  p.summary.model["first_key_mass"] = first_key_mass;
  p.sink_state = SinkStateRatio{sink_ratio, 2};
  return {"bb/" + arm + "/s" + std::to_string(seed), "bb", variant, arm, seed, p, {}, std::nullopt};
}

const ProbePair& find(const ProbePairGroup& g, const std::string& measure, const std::string& arm) {
  for (const auto& p : g.pairs)
    if (p.measure == measure && p.arm == arm) return p;
  throw std::runtime_error("no pair " + measure + " " + arm);
}

TEST(ProbePairs, ArmMinusBaselineAtEachSeedWithTheFloorOfTheTwins) {
  ProbeReport report;
  const double base[] = {0.6, 0.5, 0.7}, obo[] = {0.1, 0.2, 0.15}, gate[] = {0.55, 0.52, 0.61};
  const double twin[] = {0.62, 0.45, 0.7};
  for (uint64_t s = 1; s <= 3; ++s) {
    report.runs.push_back(probed("baseline", s, base[s - 1], 10.0 * s));
    report.runs.push_back(probed("off_by_one", s, obo[s - 1], 5.0 * s));
    report.runs.push_back(probed("out_gate", s, gate[s - 1], 10.0 * s));
    report.runs.push_back(probed("baseline", s, twin[s - 1], 10.0 * s + 1, null_variant("")));
  }
  report.runs.push_back(probed("sink_logit", 1, 0.3, 1.0));  // one seed only: n = 1, no interval
  const auto groups = pair_probe_results(report);
  ASSERT_EQ(groups.size(), 1u);  // the twins join their group
  const auto& g = groups[0];
  EXPECT_EQ(g.tier, "bb");
  EXPECT_EQ(g.variant, "");

  // off_by_one: differences -0.5, -0.3, -0.55; mean -0.45; deviations -0.05, 0.15, -0.1.
  const auto& o = find(g, "first_key_mass", "off_by_one");
  EXPECT_EQ(o.stats.n, 3);
  EXPECT_NEAR(o.stats.mean, -0.45, 1e-12);
  const double sd = std::sqrt((0.0025 + 0.0225 + 0.01) / 2);
  EXPECT_NEAR(*o.stats.sd, sd, 1e-12);
  EXPECT_NEAR(o.tests.t->ci_low, -0.45 - kT975df2 * sd / std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(o.tests.t->ci_high, -0.45 + kT975df2 * sd / std::sqrt(3.0), 1e-9);
  EXPECT_EQ(o.stats.same_sign, 3);

  // Holm over the measure's three rows (off_by_one, sink_logit without a p, out_gate).
  const auto& q = find(g, "first_key_mass", "out_gate");
  const auto& one = find(g, "first_key_mass", "sink_logit");
  EXPECT_EQ(one.stats.n, 1);
  EXPECT_FALSE(one.tests.t.has_value());
  const double p1 = *o.tests.t->p_value, p2 = *q.tests.t->p_value;
  const double lo = std::min(p1, p2), hi = std::max(p1, p2);
  const double holm_lo = std::min(1.0, 2 * lo), holm_hi = std::min(1.0, std::max(holm_lo, hi));
  EXPECT_NEAR(*(p1 < p2 ? o : q).p_holm, holm_lo, 1e-12);
  EXPECT_NEAR(*(p1 < p2 ? q : o).p_holm, holm_hi, 1e-12);
  EXPECT_FALSE(one.p_holm.has_value());

  // The floor: null differences 0.02, -0.05, 0.0 (mean -0.01; deviations 0.03, -0.04, 0.01).
  ASSERT_TRUE(g.floors.at("first_key_mass").has_value());
  EXPECT_NEAR(*g.floors.at("first_key_mass"), std::sqrt((0.0009 + 0.0016 + 0.0001) / 2), 1e-12);
  // sink_state: the twins differ by +1 at every seed, so their sd is 0.
  EXPECT_NEAR(*g.floors.at(kSinkStateMeasure), 0.0, 1e-12);
  EXPECT_NEAR(find(g, kSinkStateMeasure, "off_by_one").stats.mean, -10.0, 1e-12);  // -5, -10, -15

  const auto md = probe_pairs_markdown(groups);
  EXPECT_NE(md.find("| first_key_mass | off_by_one | -45.00% |"), std::string::npos) << md;
  EXPECT_NE(md.find("mean / floor"), std::string::npos);
}

// A variant beside the tier's plain runs (a grid list's): baseline under optim.name-sgd against
// plain baseline, seed for seed, on the plain twins' floor. first-key mass: sgd 0.2 / 0.3 / 0.25
// against 0.6 / 0.5 / 0.7: -0.4, -0.2, -0.45, mean -0.35.
TEST(ProbePairs, AVariantIsPairedWithThePlainRunsOfItsArmsOnTheirFloor) {
  ProbeReport report;
  const double base[] = {0.6, 0.5, 0.7}, sgd[] = {0.2, 0.3, 0.25}, twin[] = {0.62, 0.45, 0.7};
  for (uint64_t s = 1; s <= 3; ++s) {
    report.runs.push_back(probed("baseline", s, base[s - 1], 10.0));
    report.runs.push_back(probed("baseline", s, twin[s - 1], 10.0, null_variant("")));
    report.runs.push_back(probed("baseline", s, sgd[s - 1], 2.0, "optim.name-sgd"));
  }
  const auto groups = pair_probe_results(report);
  ASSERT_EQ(groups.size(), 1u);  // no arm but baseline, so no group pairs against baseline
  const auto& g = groups[0];
  EXPECT_TRUE(g.against_plain);
  EXPECT_EQ(g.variant, "optim.name-sgd");
  const auto& m = find(g, "first_key_mass", "baseline");
  EXPECT_EQ(m.stats.n, 3);
  EXPECT_NEAR(m.stats.mean, -0.35, 1e-12);
  EXPECT_NEAR(find(g, kSinkStateMeasure, "baseline").stats.mean, -8.0, 1e-12);
  EXPECT_NEAR(*g.floors.at("first_key_mass"), std::sqrt((0.0009 + 0.0016 + 0.0001) / 2), 1e-12);
  const auto md = probe_pairs_markdown(groups);
  EXPECT_NE(md.find("### Paired probe differences, bb (optim.name-sgd) against the plain runs"), std::string::npos) << md;
  EXPECT_NE(md.find("m(arm, optim.name-sgd) - m(arm) at each seed"), std::string::npos) << md;
  EXPECT_NE(md.find("| first_key_mass | baseline | -35.00% |"), std::string::npos) << md;
}

TEST(ProbePairs, NoBaselineOrNoProbeMeansNoRows) {
  ProbeReport report;
  report.runs.push_back(probed("off_by_one", 1, 0.1, 1.0));
  auto unprobed = probed("baseline", 1, 0.5, 1.0);
  unprobed.probe.reset();  // a run whose probe failed
  report.runs.push_back(unprobed);
  EXPECT_TRUE(pair_probe_results(report).empty());
  EXPECT_EQ(probe_pairs_markdown({}), "");
}

}  // namespace
}  // namespace attnlab
