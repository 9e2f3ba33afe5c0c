// Checkpoints (issue 3): the safetensors codec, atomic saves, retention, corrupt-checkpoint
// fallback, and a bit-identical AdamW resume.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/param_groups.h"
#include "attnlab/safetensors.h"
#include "attnlab/version.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

// ---- helpers ------------------------------------------------------------------------------------

// POSIX calls here are a choice of style, not a workaround: std::filesystem binds to the system
// libstdc++ since the link order puts it first (tests/unit/test_link_order.cpp).

/// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/attnlab_ckpt_XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); };
    ::nftw(path_.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void make_dirs(const fs::path& dir) {
  if (dir.has_parent_path() && dir.parent_path() != dir) make_dirs(dir.parent_path());
  ::mkdir(dir.c_str(), 0755);
}

std::vector<std::string> entries_of(const fs::path& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

bool is_file(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// `n` as 8 little-endian bytes, spelled out rather than copied from memory.
std::string le64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

/// A safetensors file with the given header text and data bytes.
fs::path safetensors_file(const fs::path& dir, const std::string& header, const std::string& data) {
  const fs::path file = dir / "t.safetensors";
  write_bytes(file, le64(header.size()) + header + data);
  return file;
}

/// read_safetensors(file) must throw a CheckpointError naming the file and containing `problem`.
void expect_rejected(const fs::path& file, const std::string& problem) {
  try {
    read_safetensors(file);
    ADD_FAILURE() << "no error for: " << problem;
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  }
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes().equals(b.sizes()) &&
         torch::equal(a.contiguous().reshape({-1}).view(at::kByte), b.contiguous().reshape({-1}).view(at::kByte));
}

ModelConfig tiny_config(const std::string& arm = "baseline") {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 1;
  cfg.d_model = 32;
  cfg.n_head = 2;
  cfg.vocab_size = 64;
  cfg.block_size = 16;
  return cfg;
}

/// A tiny model with its AdamW on the decay / no_decay groups, as the trainer builds them.
struct Trainee {
  GPT model;
  std::unique_ptr<torch::optim::AdamW> opt;

  Trainee(const ModelConfig& cfg, uint64_t seed) : model(cfg) {
    init_parameters(*model, seed);
    const ParamGroups groups = parameter_groups(*model);
    auto options = [](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> param_groups;
    param_groups.emplace_back(groups.decay, options(0.1));
    param_groups.emplace_back(groups.no_decay, options(0.0));
    opt = std::make_unique<torch::optim::AdamW>(param_groups, torch::optim::AdamWOptions(1e-2));
  }

  /// One step on a batch drawn from the global CPU generator, so resuming must restore it too.
  void step() {
    const auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
    const auto targets = torch::randint(0, 64, {2, 16}, torch::kLong);
    opt->zero_grad();
    lm_loss(model->forward(idx), targets).backward();
    opt->step();
  }
};

TrainState state_at(int64_t step, double val_loss = std::nan("")) {
  TrainState s;
  s.step = step;
  s.tokens_seen = step * 32;
  s.data_position = step;
  s.val_loss = val_loss;
  s.config = {{"model", {{"arm", "baseline"}}}, {"seed", 1}};
  return s;
}

std::vector<int64_t> steps_of(const fs::path& run) {
  std::vector<int64_t> steps;
  for (const auto& c : list_checkpoints(run)) steps.push_back(c.step);
  return steps;
}

void flip_byte(const fs::path& file, size_t at) {
  std::string bytes = read_bytes(file);
  bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
  write_bytes(file, bytes);
}

// ---- safetensors ----------------------------------------------------------------------------------

TEST(Safetensors, RoundTripIsBitIdenticalForEveryDtype) {
  TempDir tmp;
  torch::manual_seed(3);
  TensorMap tensors;
  for (auto type : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort,
                    at::kChar, at::kByte}) {
    const int64_t n = 6 * 4;
    // Random bytes reinterpreted: NaN payloads, infinities, -0 and subnormals all included.
    const auto bits = torch::randint(0, 256, {n * static_cast<int64_t>(c10::elementSize(type))}, at::kByte);
    tensors[std::string("t_") + c10::toString(type)] = bits.view(type).reshape({6, 4});
  }
  tensors["bool"] = torch::randint(0, 2, {3, 5}, at::kByte).to(at::kBool);
  tensors["scalar"] = at::scalar_tensor(7, at::kLong);
  tensors["empty"] = torch::zeros({0, 3});
  tensors["strided"] = torch::arange(12, torch::kFloat).view({3, 4}).t();  // not contiguous
  write_safetensors(tmp.path() / "x.safetensors", tensors, {{"purpose", "test"}});

  const auto back = read_safetensors(tmp.path() / "x.safetensors");
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(back.tensors.count(name)) << name;
    EXPECT_TRUE(same_bits(back.tensors.at(name), t)) << name;
  }
  EXPECT_EQ(back.metadata, (SafetensorsMetadata{{"purpose", "test"}}));
  const std::string bytes = read_bytes(tmp.path() / "x.safetensors");
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]) % 8, 0);  // header padded: the data starts 8-byte aligned
}

TEST(Safetensors, ReadsAFileWrittenByteByByte) {
  TempDir tmp;
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
      R"("c":{"dtype":"BF16","shape":[1,1],"data_offsets":[16,18]},"__metadata__":{"k":"v"}})";
  // 1.5f = 0x3FC00000, -2.0f = 0xC0000000, 42 as int64, bf16 1.0 = 0x3F80; all little-endian.
  const std::string data = std::string("\x00\x00\xc0\x3f", 4) + std::string("\x00\x00\x00\xc0", 4) +
                           std::string("\x2a\x00\x00\x00\x00\x00\x00\x00", 8) + std::string("\x80\x3f", 2);
  const auto contents = read_safetensors(safetensors_file(tmp.path(), header, data));
  EXPECT_TRUE(torch::equal(contents.tensors.at("a"), torch::tensor({1.5f, -2.0f})));
  EXPECT_EQ(contents.tensors.at("b").dim(), 0);
  EXPECT_EQ(contents.tensors.at("b").item<int64_t>(), 42);
  EXPECT_EQ(contents.tensors.at("c").scalar_type(), at::kBFloat16);
  EXPECT_EQ(contents.tensors.at("c").item<float>(), 1.0f);
  EXPECT_EQ(contents.metadata.at("k"), "v");
}

TEST(Safetensors, CorruptFilesThrowNamingTheFile) {
  TempDir tmp;
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\x01');

  expect_rejected(safetensors_file(tmp.path(), ok, eight.substr(0, 5)), "truncated");
  expect_rejected(safetensors_file(tmp.path(), ok, eight + "xx"), "after the last tensor");
  expect_rejected(safetensors_file(tmp.path(), "{\"a\": [1, 2", eight), "not valid JSON");
  expect_rejected(safetensors_file(tmp.path(), "[1, 2]", ""), "not a JSON object");
  expect_rejected(safetensors_file(tmp.path(), R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", "xx"),
                  "unknown dtype");
  expect_rejected(safetensors_file(tmp.path(), R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
                  "need 12");
  expect_rejected(safetensors_file(tmp.path(), R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
                  "non-negative");
  expect_rejected(safetensors_file(tmp.path(),
                                   R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                   eight),
                  "overlaps");
  expect_rejected(safetensors_file(tmp.path(), R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", eight),
                  "gap");
  expect_rejected(safetensors_file(tmp.path(), R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", ""),
                  "truncated");
  expect_rejected(safetensors_file(tmp.path(), R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x07"),
                  "other than 0 or 1");
  expect_rejected(safetensors_file(tmp.path(), R"({"__metadata__":{"k":1}})", ""), "not a string");

  const fs::path file = tmp.path() / "long.safetensors";
  write_bytes(file, le64(1000) + ok);
  expect_rejected(file, "exceeds the file");
  write_bytes(file, "abc");
  expect_rejected(file, "shorter than the 8-byte header length");
  expect_rejected(tmp.path() / "missing.safetensors", "cannot read");
}

// ---- checkpoints ----------------------------------------------------------------------------------

TEST(Checkpoint, SaveWritesOneDurableDirectoryAndNoTemporary) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  make_dirs(checkpoints_dir(tmp.path()) / ".tmp.step_000001");  // a crashed save's leftover
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1, 4.5));

  EXPECT_EQ(dir, checkpoint_dir(tmp.path(), 1));
  EXPECT_EQ(dir.filename(), "step_000001");
  EXPECT_EQ(entries_of(checkpoints_dir(tmp.path())), std::vector<std::string>{"step_000001"});
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    EXPECT_TRUE(is_file(dir / f)) << f;
  }
}

TEST(Checkpoint, FailedSaveLeavesNothingUnderTheFinalName) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  // An optimizer holding a tensor that is not the model's: the optimizer file cannot be written,
  // after model.safetensors already was.
  auto stray = torch::zeros({2}, torch::requires_grad());
  t.opt->param_groups()[1].params().push_back(stray);
  EXPECT_THROW(save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1)), CheckpointError);
  EXPECT_TRUE(entries_of(checkpoints_dir(tmp.path())).empty());
}

TEST(Checkpoint, StateJsonRoundTrips) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  TrainState s = state_at(5, 3.25);
  s.best_val_loss = 3.0;
  s.extra = {{"parent", "runs/a/checkpoints/step_000100"}};
  save_checkpoint(tmp.path(), *t.model, *t.opt, s);
  const auto c = load_checkpoint(checkpoint_dir(tmp.path(), 5));
  EXPECT_EQ(c.state.step, 5);
  EXPECT_EQ(c.state.tokens_seen, 160);
  EXPECT_EQ(c.state.data_position, 5);
  EXPECT_EQ(c.state.val_loss, 3.25);
  EXPECT_EQ(c.state.best_val_loss, 3.0);
  EXPECT_EQ(c.state.config, s.config);
  EXPECT_EQ(c.state.extra, s.extra);
  EXPECT_EQ(c.state.git_revision, git_revision());
  EXPECT_FALSE(c.state.rng.cpu.empty());
  EXPECT_EQ(c.model_config.arm, "baseline");
  EXPECT_EQ(c.model_config.d_model, 32);
  EXPECT_TRUE(c.optimizer.empty());  // no step taken yet: AdamW has no state
  EXPECT_EQ(c.optimizer_groups.size(), 2u);

  // Not evaluated yet: NaN and +inf survive JSON (as null).
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(6));
  const auto d = load_checkpoint(checkpoint_dir(tmp.path(), 6), /*with_optimizer=*/false);
  EXPECT_TRUE(std::isnan(d.state.val_loss));
  EXPECT_TRUE(std::isinf(d.state.best_val_loss));
}

TEST(Checkpoint, RetentionKeepsLastKBestAndKeepSet) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  RetentionPolicy policy;
  policy.keep_last = 2;
  policy.keep_steps = {1, 4};
  for (int64_t step = 1; step <= 10; ++step) {
    const double val_loss = step == 3 ? 1.0 : 5.0 - 0.1 * step;  // step 3 is the best
    save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(step, val_loss), policy);
  }
  EXPECT_EQ(steps_of(tmp.path()), (std::vector<int64_t>{1, 3, 4, 9, 10}));

  policy = RetentionPolicy{};
  policy.keep_last = 1;
  policy.keep_best = false;
  policy.keep_every = 3;
  EXPECT_EQ(apply_retention(tmp.path(), policy), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(steps_of(tmp.path()), (std::vector<int64_t>{3, 9, 10}));
  policy.keep_last = 0;
  EXPECT_THROW(apply_retention(tmp.path(), policy), std::invalid_argument);
}

TEST(Checkpoint, LoadLatestFallsBackPastCorruptCheckpoints) {
  TempDir tmp;
  EXPECT_FALSE(load_latest(tmp.path()).has_value());  // a fresh run
  Trainee t(tiny_config(), 1);
  for (int64_t step = 1; step <= 4; ++step) {
    t.step();
    save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(step), RetentionPolicy{10});
  }
  const fs::path model4 = checkpoint_dir(tmp.path(), 4) / "model.safetensors";
  flip_byte(model4, read_bytes(model4).size() - 3);                                // bit rot in the data
  ASSERT_EQ(::truncate((checkpoint_dir(tmp.path(), 3) / "optimizer.safetensors").c_str(), 100), 0);
  write_bytes(checkpoint_dir(tmp.path(), 2) / "state.json", "{\"step\": 2,");       // torn JSON

  std::vector<std::string> warnings;
  const auto c = load_latest(tmp.path(), &warnings);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->state.step, 1);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("step_000004"), std::string::npos);
  EXPECT_NE(warnings[0].find("SHA-256"), std::string::npos);
  EXPECT_NE(warnings[1].find("step_000003"), std::string::npos);
  EXPECT_NE(warnings[1].find("truncated"), std::string::npos);
  EXPECT_NE(warnings[2].find("step_000002"), std::string::npos);
  EXPECT_NE(warnings[2].find("not valid JSON"), std::string::npos);

  ::unlink((checkpoint_dir(tmp.path(), 1) / "model.safetensors").c_str());
  try {
    load_latest(tmp.path());
    ADD_FAILURE() << "no error when no checkpoint is readable";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.file(), tmp.path());
  }

  // Saving a step again replaces its corrupt checkpoint.
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(4), RetentionPolicy{10});
  EXPECT_EQ(load_latest(tmp.path())->state.step, 4);
}

/// Three steps, save, two more; a fresh model and optimizer restored from the checkpoint take the
/// same two steps: every parameter and moment must be bit-identical.
void expect_bit_identical_resume(const std::string& arm) {
  SCOPED_TRACE(arm);
  TempDir tmp;
  torch::manual_seed(0);
  Trainee a(tiny_config(arm), 1);
  for (int i = 0; i < 3; ++i) a.step();
  for (auto& g : a.opt->param_groups()) g.options().set_lr(3e-3);  // the schedule moved on
  save_checkpoint(tmp.path(), *a.model, *a.opt, state_at(3));
  a.step();
  a.step();

  torch::manual_seed(12345);  // a different RNG stream: restore() must bring back the saved one
  Trainee b(tiny_config(arm), 7);
  std::vector<std::string> warnings;
  const auto ckpt = load_latest(tmp.path(), &warnings);
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_TRUE(warnings.empty());
  restore(*ckpt, *b.model, *b.opt);
  b.step();
  b.step();

  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
    const auto& sa = static_cast<torch::optim::AdamWParamState&>(*a.opt->state().at(item.value().unsafeGetTensorImpl()));
    const auto& sb = static_cast<torch::optim::AdamWParamState&>(*b.opt->state().at(pb[item.key()].unsafeGetTensorImpl()));
    EXPECT_EQ(sa.step(), sb.step());
    EXPECT_TRUE(torch::equal(sa.exp_avg(), sb.exp_avg())) << item.key();
    EXPECT_TRUE(torch::equal(sa.exp_avg_sq(), sb.exp_avg_sq())) << item.key();
  }
}

TEST(Checkpoint, AdamWResumeIsBitIdentical) {
  for (const char* arm : {"baseline", "combo", "sink_token"}) expect_bit_identical_resume(arm);
}

TEST(Checkpoint, OptimizerTensorsAreNamedByParameter) {
  TempDir tmp;
  Trainee t(tiny_config("sink_logit"), 1);
  t.step();
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  const auto file = read_safetensors(checkpoint_dir(tmp.path(), 1) / "optimizer.safetensors");
  for (const auto& item : t.model->named_parameters()) {
    const auto& state = static_cast<torch::optim::AdamWParamState&>(
        *t.opt->state().at(item.value().unsafeGetTensorImpl()));
    EXPECT_TRUE(torch::equal(file.tensors.at("exp_avg." + item.key()), state.exp_avg())) << item.key();
    EXPECT_TRUE(torch::equal(file.tensors.at("exp_avg_sq." + item.key()), state.exp_avg_sq())) << item.key();
    EXPECT_EQ(file.tensors.at("step." + item.key()).item<int64_t>(), 1);
  }
  EXPECT_TRUE(file.tensors.count("exp_avg.h.0.attn.sink_logit"));
}

TEST(Checkpoint, RestoreRefusesAnotherModel) {
  TempDir tmp;
  Trainee t(tiny_config("baseline"), 1);
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  const auto c = load_checkpoint(checkpoint_dir(tmp.path(), 1));
  Trainee other(tiny_config("off_by_one"), 1);  // same parameters, another arm
  try {
    restore(c, *other.model, *other.opt);
    ADD_FAILURE() << "restored a baseline checkpoint into off_by_one";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("arm"), std::string::npos) << e.what();
  }
  const auto no_opt = load_checkpoint(checkpoint_dir(tmp.path(), 1), /*with_optimizer=*/false);
  EXPECT_THROW(restore_optimizer(no_opt, *t.model, *t.opt), CheckpointError);
}

TEST(Checkpoint, LoadModelFromRunDirCheckpointDirOrFile) {
  TempDir tmp;
  Trainee t(tiny_config("combo"), 1);
  t.step();
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  t.step();
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(2));
  const fs::path copy = tmp.path() / "elsewhere.safetensors";
  write_bytes(copy, read_bytes(checkpoint_dir(tmp.path(), 2) / "model.safetensors"));

  const auto idx = torch::randint(0, 64, {1, 16}, torch::kLong);
  const auto expected = t.model->forward(idx);
  for (const fs::path& p : {tmp.path(), checkpoint_dir(tmp.path(), 2), copy}) {
    LoadedModel m = load_model(p);
    EXPECT_EQ(m.step, 2) << p;
    EXPECT_EQ(m.model_config.arm, "combo");
    EXPECT_EQ(m.config, state_at(2).config);
    EXPECT_TRUE(torch::equal(m.model->forward(idx), expected)) << p;
  }
  EXPECT_THROW(load_model(tmp.path() / "nothing"), CheckpointError);
}

TEST(Checkpoint, ListsCheckpointsByNumericStep) {
  TempDir tmp;
  for (const char* name : {"step_000010", "step_1000000", "step_000002", ".tmp.step_000011", "notes"}) {
    make_dirs(checkpoints_dir(tmp.path()) / name);
  }
  EXPECT_EQ(steps_of(tmp.path()), (std::vector<int64_t>{2, 10, 1000000}));
  EXPECT_EQ(checkpoint_dir(tmp.path(), 1234567).filename(), "step_1234567");
}

}  // namespace
}  // namespace attnlab
