// The optimizers of optim.name (optimizer_factory.h, muon.h): Newton-Schulz against a plain loop and
// the singular values it must reach, two steps of SGD and of Muon against the formulas written out
// here, exact checkpoint round trips of their state, and the refusal of another optimizer's state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <unistd.h>

#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/muon.h"
#include "attnlab/optimizer_factory.h"
#include "unit/trainee.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::tiny_config;

// The quintic iteration as the reference first wrote it (modded-nanogpt):
// X <- a X + b (X X^T) X + c (X X^T)(X X^T) X, on the wide orientation, from X = G / (||G||_F + 1e-7).
at::Tensor plain_newton_schulz(at::Tensor g) {
  const bool tall = g.size(0) > g.size(1);
  if (tall) g = g.t();
  at::Tensor x = g / (std::sqrt((g * g).sum().item<double>()) + 1e-7);
  for (int i = 0; i < 5; ++i) {
    const auto xxt = x.mm(x.t());
    x = 3.4445 * x - 4.7750 * xxt.mm(x) + 2.0315 * xxt.mm(xxt).mm(x);
  }
  return tall ? x.t() : x;
}

TEST(NewtonSchulz, MatchesThePlainLoopAndLandsInTheQuinticsBand) {
  torch::manual_seed(7);
  const std::vector<std::vector<int64_t>> shapes = {{8, 16}, {16, 8}, {12, 12}};
  for (const auto& shape : shapes) {
    const auto g = torch::randn(shape);
    const auto mine = newton_schulz(g);
    const auto plain = plain_newton_schulz(g);
    ASSERT_EQ(mine.sizes(), g.sizes());
    EXPECT_TRUE(torch::allclose(mine, plain, 1e-5, 1e-6)) << shape[0] << "x" << shape[1] << " max diff "
                                                          << (mine - plain).abs().max().item<double>();
    const auto s = torch::linalg_svdvals(mine.to(torch::kDouble));
    EXPECT_GT(s.min().item<double>(), 0.68) << shape[0] << "x" << shape[1];
    EXPECT_LT(s.max().item<double>(), 1.2) << shape[0] << "x" << shape[1];
  }
  // Batched: each trailing matrix on its own.
  const auto stack = torch::randn({3, 6, 10});
  const auto batched = newton_schulz(stack);
  for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(batched[i], plain_newton_schulz(stack[i]), 1e-5, 1e-6));
  EXPECT_THROW(newton_schulz(torch::randn({4})), std::invalid_argument);
}

// A tiny model, its optimizer of optim.name, and fixed gradients to step on.
struct Rig {
  GPT model{tiny_config("sink_logit")};
  BuiltOptimizer built;
  std::map<std::string, at::Tensor> start;  // parameters before the steps

  explicit Rig(const OptimConfig& o) {
    init_parameters(*model, 3);
    built = make_optimizer(*model, o);
    for (const auto& item : model->named_parameters()) start[item.key()] = item.value().detach().clone();
  }
  // Gradient `k` of parameter `name`: seeded by both, independent of the order of the parameters.
  static at::Tensor grad_of(const std::string& name, int k, const at::Tensor& like) {
    torch::manual_seed(std::hash<std::string>{}(name) % 100000 + 1000 * k);
    return torch::randn(like.sizes());
  }
  void step(int k) {
    for (auto& item : model->named_parameters()) item.value().mutable_grad() = grad_of(item.key(), k, item.value());
    built.opt->step();
  }
};

OptimConfig optim(const std::string& name) {
  OptimConfig o;
  o.name = name_table<OptimizerName>().parse(name);
  o.lr = 0.05;
  o.weight_decay = 0.1;
  return o;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what, double rtol = 1e-5) {
  EXPECT_TRUE(torch::allclose(got, want, rtol, 1e-6)) << what << ": max diff " << (got - want).abs().max().item<double>();
}

// torch::optim::SGD's rule, written out: d = g + lambda p (decayed group), buf = mu buf + d (buf = d
// on the first step), p -= lr buf.
TEST(Optimizers, TwoSgdStepsAreMomentumWithCoupledDecay) {
  auto o = optim("sgd");
  o.momentum = 0.8;
  Rig rig(o);
  rig.step(0);
  rig.step(1);
  for (const auto& item : rig.model->named_parameters()) {
    const std::string& name = item.key();
    const double wd = rig.model->decays(name) ? 0.1 : 0.0;
    at::Tensor p = rig.start[name].clone(), buf;
    for (int k = 0; k < 2; ++k) {
      const auto d = Rig::grad_of(name, k, p) + wd * p;
      buf = k == 0 ? d : 0.8 * buf + d;
      p = p - 0.05 * buf;
    }
    expect_close(item.value(), p, name);
  }
}

// Muon (muon.h) on the blocks' matrices, q, k and v of c_attn each on its own; AdamW on the rest.
TEST(Optimizers, TwoMuonStepsOrthogonaliseTheHiddenMatricesAndAdamWTheRest) {
  auto o = optim("muon");
  o.muon_lr = 0.02;
  Rig rig(o);
  rig.step(0);
  rig.step(1);
  const std::map<std::string, int64_t> hidden = {{"h.0.attn.c_attn.weight", 3}, {"h.0.attn.c_proj.weight", 1},
                                                 {"h.0.mlp.c_fc.weight", 1}, {"h.0.mlp.c_proj.weight", 1}};
  for (const auto& item : rig.model->named_parameters()) {
    const std::string& name = item.key();
    at::Tensor p = rig.start[name].clone();
    if (hidden.count(name)) {
      const int64_t blocks = hidden.at(name), rows = p.size(0) / blocks, cols = p.size(1);
      at::Tensor buf = torch::zeros_like(p);
      for (int k = 0; k < 2; ++k) {
        const auto g = Rig::grad_of(name, k, p);
        buf = 0.95 * buf + 0.05 * g;
        const auto u = 0.05 * g + 0.95 * buf;
        std::vector<at::Tensor> parts;
        for (int64_t b = 0; b < blocks; ++b) parts.push_back(plain_newton_schulz(u.narrow(0, b * rows, rows)));
        const double scale = std::sqrt(std::max(1.0, double(rows) / double(cols)));
        p = p * (1 - 0.02 * 0.1) - 0.02 * scale * torch::cat(parts, 0);
      }
      expect_close(item.value(), p, name, 1e-4);
      continue;
    }
    const double wd = rig.model->decays(name) ? 0.1 : 0.0;
    at::Tensor m = torch::zeros_like(p), v = torch::zeros_like(p);
    for (int k = 0; k < 2; ++k) {
      const auto g = Rig::grad_of(name, k, p);
      p = p * (1 - 0.05 * wd);
      m = 0.9 * m + 0.1 * g;
      v = 0.95 * v + 0.05 * g * g;
      const double t = k + 1;
      p = p - 0.05 * (m / (1 - std::pow(0.9, t))) / ((v / (1 - std::pow(0.95, t))).sqrt() + 1e-8);
    }
    expect_close(item.value(), p, name);
  }
}

TEST(Optimizers, TheScheduleMultipliesEveryGroupsPeak) {
  auto o = optim("muon");
  o.warmup_steps = 4;
  Rig rig(o);
  set_learning_rates(*rig.built.opt, rig.built.peak_lr, o, 1, 10);  // warm-up step 2 of 4: half of each peak
  const auto& groups = rig.built.opt->param_groups();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_DOUBLE_EQ(groups[0].options().get_lr(), 0.01);   // muon_lr 0.02
  EXPECT_DOUBLE_EQ(groups[1].options().get_lr(), 0.025);  // optim.lr 0.05
  EXPECT_DOUBLE_EQ(groups[2].options().get_lr(), 0.025);
}

fs::path temp_root(const std::string& name) {
  return fs::temp_directory_path() / ("attnlab_optim_" + std::to_string(::getpid()) + "_" + name);
}

TrainState state_at(int64_t step) {
  TrainState s;
  s.step = step, s.tokens_seen = 32 * step, s.data_position = step;
  s.config = testing::tiny_run_config("sink_logit");
  return s;
}

// Save after one step, restore into a fresh rig, take a second step in both: bit for bit equal.
TEST(Optimizers, SgdAndMuonStateResumesBitIdentically) {
  for (const char* name : {"sgd", "muon"}) {
    const fs::path root = temp_root(name);
    fs::remove_all(root);
    Rig a(optim(name));
    a.step(0);
    save_checkpoint(root, *a.model, *a.built.opt, state_at(1));
    const auto ckpt = load_checkpoint(checkpoint_dir(root, 1));
    EXPECT_EQ(ckpt.optimizer_name, name_table<OptimizerName>().parse(name));
    EXPECT_TRUE(ckpt.optimizer.count("momentum_buffer.h.0.attn.c_proj.weight")) << name;
    Rig b(optim(name));
    restore(ckpt, *b.model, *b.built.opt);
    a.step(1);
    b.step(1);
    for (const auto& item : a.model->named_parameters())
      EXPECT_TRUE(torch::equal(item.value(), b.model->named_parameters()[item.key()])) << name << " " << item.key();
    fs::remove_all(root);
  }
}

// A checkpoint of one optimizer never restores into another; the error names both.
TEST(Optimizers, AnotherOptimizersCheckpointIsRefusedNamingBoth) {
  const fs::path root = temp_root("refusal");
  fs::remove_all(root);
  Rig sgd(optim("sgd"));
  sgd.step(0);
  save_checkpoint(root, *sgd.model, *sgd.built.opt, state_at(1));
  const auto ckpt = load_checkpoint(checkpoint_dir(root, 1));
  for (const char* other : {"adamw", "muon"}) {
    Rig rig(optim(other));
    const auto before = rig.model->named_parameters()["wte.weight"].clone();
    try {
      restore(ckpt, *rig.model, *rig.built.opt);
      ADD_FAILURE() << "an sgd checkpoint restored under " << other;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("optimizer sgd, but this run's optimizer is " + std::string(other)),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(torch::equal(before, rig.model->named_parameters()["wte.weight"])) << "a refusal changes nothing";
  }
  fs::remove_all(root);
}

// An AdamW checkpoint's optimizer file is what it was: no optimizer name in its metadata.
TEST(Optimizers, AdamWCheckpointsCarryNoOptimizerName) {
  const fs::path root = temp_root("adamw");
  fs::remove_all(root);
  Rig rig(optim("adamw"));
  rig.step(0);
  save_checkpoint(root, *rig.model, *rig.built.opt, state_at(1));
  const auto file = read_safetensors(checkpoint_dir(root, 1) / "optimizer.safetensors");
  EXPECT_EQ(file.metadata.count("attnlab.optimizer"), 0u);
  EXPECT_EQ(load_checkpoint(checkpoint_dir(root, 1)).optimizer_name, OptimizerName::adamw);
  fs::remove_all(root);
}

}  // namespace
}  // namespace attnlab
