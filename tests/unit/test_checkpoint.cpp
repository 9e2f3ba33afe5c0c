// Checkpoints: the safetensors codec, atomic saves, retention, corrupt-checkpoint fallback, a
// bit-identical AdamW resume, and the integrity guarantees of docs/checkpoints.md (state.json's
// checksum and field rules, restore refusals that change nothing and fall back, checked dtypes).
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/run_dir.h"
#include "attnlab/safetensors.h"
#include "attnlab/trained_run.h"
#include "attnlab/version.h"
#include "unit/checkpoint_surgery.h"
#include "unit/trainee.h"

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

using testing::tiny_config;
using testing::Trainee;

TrainState state_at(int64_t step, double val_loss = std::nan("")) {
  TrainState s;
  s.step = step;
  s.tokens_seen = step * 32;
  s.data_position = step;
  s.val_loss = val_loss;
  if (!std::isnan(val_loss)) s.best_val_loss = val_loss;  // the lowest so far may not lie above it
  s.config = testing::tiny_run_config();
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
  expect_rejected(tmp.path() / "missing.safetensors", "does not exist");
}

// ---- checkpoints ----------------------------------------------------------------------------------

void expect_refused_save(const fs::path& run, const GPTImpl& model, const torch::optim::AdamW& opt,
                         const TrainState& state, const std::string& problem) {
  try {
    save_checkpoint(run, model, opt, state);
    ADD_FAILURE() << "saved; expected: " << problem;
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, SaveWritesOneDurableDirectoryAndNoTemporary) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  make_dirs(tmp.path() / ".tmp.step_000001");  // a crashed save's leftover
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1, 4.5));

  EXPECT_EQ(dir, checkpoint_dir(tmp.path(), 1));
  EXPECT_EQ(dir.filename(), "step_000001");
  EXPECT_EQ(entries_of(tmp.path()), std::vector<std::string>{"step_000001"});
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json", "state.json.sha256"}) {
    EXPECT_TRUE(is_file(dir / f)) << f;
  }
  // The sidecar is what `sha256sum state.json` prints, computed here independently.
  EXPECT_EQ(read_bytes(dir / "state.json.sha256"),
            testing::sha256_of(read_bytes(dir / "state.json")) + "  state.json\n");
}

TEST(Checkpoint, FailedSaveLeavesNothingUnderTheFinalName) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  // An optimizer holding a tensor that is not the model's: refused before anything is written.
  auto stray = torch::zeros({2}, torch::requires_grad());
  t.opt->param_groups()[1].params().push_back(stray);
  EXPECT_THROW(save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1)), CheckpointError);
  EXPECT_TRUE(entries_of(tmp.path()).empty());
  t.opt->param_groups()[1].params().pop_back();
  // A field JSON cannot encode (not UTF-8): state.json fails after both tensor files were written.
  TrainState s = state_at(1);
  s.trainer.parent = ParentRecord{"\xff", 0};
  expect_refused_save(tmp.path(), *t.model, *t.opt, s, "state.json: cannot encode as JSON");
  EXPECT_TRUE(entries_of(tmp.path()).empty());
}

TEST(Checkpoint, StateJsonRoundTrips) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  TrainState s = state_at(5, 3.25);
  s.best_val_loss = 3.0;
  s.trainer.parent = ParentRecord{"runs/a/checkpoints/step_000100", 100};
  s.trainer.elapsed_s = 12.5;
  save_checkpoint(tmp.path(), *t.model, *t.opt, s);
  const auto c = load_checkpoint(checkpoint_dir(tmp.path(), 5));
  EXPECT_EQ(c.state.step, 5);
  EXPECT_EQ(c.state.tokens_seen, 160);
  EXPECT_EQ(c.state.data_position, 5);
  EXPECT_EQ(c.state.val_loss, 3.25);
  EXPECT_EQ(c.state.best_val_loss, 3.0);
  ASSERT_TRUE(c.state.config.has_value());
  EXPECT_EQ(to_json(*c.state.config), to_json(*s.config));
  EXPECT_EQ(to_json(c.state.trainer), to_json(s.trainer));
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
  EXPECT_NE(warnings[2].find("state.json is corrupt"), std::string::npos);  // caught by its checksum

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
  for (const char* arm : {"baseline", "combo", "sink_token", "out_gate_elem", "sink_out_gate"})
    expect_bit_identical_resume(arm);
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
  const fs::path run = tmp.path() / "run", root = RunDir(run).checkpoints_path();
  t.step();
  save_checkpoint(root, *t.model, *t.opt, state_at(1));
  t.step();
  save_checkpoint(root, *t.model, *t.opt, state_at(2));
  const fs::path copy = tmp.path() / "elsewhere.safetensors";
  write_bytes(copy, read_bytes(checkpoint_dir(root, 2) / "model.safetensors"));

  const auto idx = torch::randint(0, 64, {1, 16}, torch::kLong);
  const auto expected = t.model->forward(idx);
  for (const fs::path& p : {run, checkpoint_dir(root, 2), copy}) {
    LoadedModel m = open_model(p);
    EXPECT_EQ(m.step, 2) << p;
    EXPECT_EQ(m.model_config.arm, "combo");
    ASSERT_TRUE(m.config.has_value()) << p;
    EXPECT_EQ(to_json(*m.config), to_json(*state_at(2).config));
    EXPECT_TRUE(torch::equal(m.model->forward(idx), expected)) << p;
  }
  EXPECT_THROW(open_model(tmp.path() / "nothing"), CheckpointError);
  EXPECT_THROW(load_model(run), CheckpointError);  // a run directory is RunDir's to resolve
}

// ---- integrity -------------------------------------------------------------------------------------

/// `f` must throw a CheckpointError whose message names `file` and contains `problem`.
template <class F>
void expect_refused(F&& f, const fs::path& file, const std::string& problem) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected: " << problem;
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << "expected '" << problem << "' in " << e.what();
  }
}

TEST(Checkpoint, StateJsonIsCoveredByItsChecksum) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  for (int64_t step = 3; step <= 4; ++step) {
    t.step();
    save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(step), RetentionPolicy{10});
  }
  const fs::path dir = checkpoint_dir(tmp.path(), 4);
  const std::string pristine = read_bytes(dir / "state.json");
  const std::string sidecar = read_bytes(dir / "state.json.sha256");
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = pristine;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  // Any change of state.json, meaningful (a skewed schedule) or not, is caught by its SHA-256.
  for (const auto& text : {replaced("\"step\": 4", "\"step\": 3"),
                           replaced("\"tokens_seen\": 128", "\"tokens_seen\": 96"), pristine + " "}) {
    write_bytes(dir / "state.json", text);
    expect_refused([&] { load_checkpoint(dir); }, dir / "state.json", "state.json is corrupt");
  }
  write_bytes(dir / "state.json", pristine);
  EXPECT_NO_THROW(load_checkpoint(dir));
  write_bytes(dir / "state.json.sha256", "not a checksum\n");
  expect_refused([&] { load_checkpoint(dir); }, dir / "state.json.sha256", "is not one line");
  ::unlink((dir / "state.json.sha256").c_str());
  expect_refused([&] { load_checkpoint(dir); }, dir / "state.json.sha256", "is missing");

  std::vector<std::string> warnings;
  EXPECT_EQ(load_latest(tmp.path(), &warnings)->state.step, 3);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step_000004"), std::string::npos) << warnings[0];
  write_bytes(dir / "state.json.sha256", sidecar);
  EXPECT_EQ(load_latest(tmp.path())->state.step, 4);
}

TEST(Checkpoint, StateJsonFieldsAreChecked) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  TrainState s = state_at(4, 3.5);
  s.best_val_loss = 3.25;
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, s);
  const std::string pristine = read_bytes(dir / "state.json");
  testing::reseal(dir);  // re-sealing by itself changes nothing
  EXPECT_NO_THROW(load_checkpoint(dir));

  using nlohmann::json;
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j["tokens_seen"] = -5; }, "field 'tokens_seen' is negative"},
      {[](json& j) { j["step"] = -1; }, "field 'step' is negative"},
      {[](json& j) { j["data_position"] = -1; }, "field 'data_position' is negative"},
      {[](json& j) { j["step"] = 3; }, "step 3 differs from its directory's name (step_000004)"},
      {[](json& j) { j["tokens_seen"] = 2; }, "tokens_seen 2 is below step 4"},
      {[](json& j) { j["val_loss"] = 0.0; }, "best_val_loss 3.25 is above this step's val_loss 0.0"},
      {[](json& j) { j["best_val_loss"] = nullptr; }, "best_val_loss null is above this step's val_loss 3.5"},
      {[](json& j) { j["val_loss"] = -1.0; }, "field 'val_loss' is -1.0, not a loss"},
      {[](json& j) { j["best_val_loss"] = -0.5; }, "field 'best_val_loss' is -0.5, not a loss"},
      {[](json& j) { j["best_val_loss"] = "low"; }, "field 'best_val_loss' is not a number"},
      {[](json& j) { j["step"] = 4.0; }, "field 'step' is not an integer"},
      {[](json& j) { j["config"] = json::array(); }, "field 'config' is not an object"},
      {[](json& j) { j["extra"] = "x"; }, "field 'extra' is not an object"},
      {[](json& j) { j["format_version"] = 3; }, "format_version 3 is not a supported one"},
      {[](json& j) { j["model"]["n_head"] = 5; }, "model config"},
  };
  for (const auto& [edit, problem] : cases) {
    SCOPED_TRACE(problem);
    write_bytes(dir / "state.json", pristine);
    testing::reseal(dir, edit);
    expect_refused([&] { load_checkpoint(dir); }, dir / "state.json", problem);
  }

  // The writer keeps the same rules: it never writes a state.json the reader would refuse.
  TempDir other;
  TrainState bad = s;
  bad.best_val_loss = 4.0;
  expect_refused_save(other.path(), *t.model, *t.opt, bad, "best_val_loss 4.0 is above this step's val_loss 3.5");
  bad = s;
  bad.tokens_seen = -1;
  expect_refused_save(other.path(), *t.model, *t.opt, bad, "field 'tokens_seen' is negative: -1");
  bad = s;
  bad.val_loss = std::numeric_limits<double>::infinity();
  expect_refused_save(other.path(), *t.model, *t.opt, bad, "field 'val_loss' is inf, not a loss");
  EXPECT_TRUE(entries_of(other.path()).empty());
}

TEST(Checkpoint, FormatVersion1WithoutTheSidecarStillLoads) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(2));
  testing::reseal(dir, [](nlohmann::json& j) { j["format_version"] = 1; });
  ::unlink((dir / "state.json.sha256").c_str());
  EXPECT_EQ(load_checkpoint(dir).state.step, 2);
  testing::reseal(dir, [](nlohmann::json& j) { j["format_version"] = 2; });
  ::unlink((dir / "state.json.sha256").c_str());
  expect_refused([&] { load_checkpoint(dir); }, dir / "state.json.sha256", "is missing");
}

// Checkpoints written before state.json's "extra" was typed: each of its keys, none, or one this build
// does not know loads into the TrainerState; a known key of the wrong type is refused naming it.
TEST(Checkpoint, OlderExtraKeysLoadIntoTheTypedTrainerState) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(3, 4.0));
  const std::string pristine = read_bytes(dir / "state.json");
  using nlohmann::json;
  auto with_extra = [&](const json& extra, int64_t format) {
    write_bytes(dir / "state.json", pristine);
    testing::reseal(dir, [&](json& j) { j["extra"] = extra, j["format_version"] = format; });
    if (format == 1) ::unlink((dir / "state.json.sha256").c_str());  // format 1 predates the sidecar
    return load_checkpoint(dir).state.trainer;
  };
  for (const int64_t format : {1, 2}) {
    SCOPED_TRACE(format);
    const json parent = {{"checkpoint", "runs/a/checkpoints/step_000100"}, {"step", 100}};
    auto trained = with_extra({{"elapsed_s", 12.5}, {"parent", parent}}, format);
    EXPECT_EQ(trained.elapsed_s.value_or(-1), 12.5);
    ASSERT_TRUE(trained.parent.has_value());
    EXPECT_EQ(trained.parent->checkpoint, "runs/a/checkpoints/step_000100");
    EXPECT_EQ(trained.parent->step, 100);
    EXPECT_FALSE(trained.imported_from.has_value());
    EXPECT_EQ(to_json(trained), json({{"elapsed_s", 12.5}, {"parent", parent}}));  // written back as it was

    const json hf = {{"model_type", "gpt_neox"}, {"hidden_size", 32}};
    auto imported = with_extra({{"imported_from", {{"path", "/m/step0"}, {"model_type", "gpt_neox"}, {"hf_config", hf}}}},
                               format);
    EXPECT_FALSE(imported.elapsed_s.has_value());
    ASSERT_TRUE(imported.imported_from.has_value());
    EXPECT_EQ(imported.imported_from->path, "/m/step0");
    EXPECT_EQ(imported.imported_from->model_type, "gpt_neox");
    EXPECT_EQ(imported.imported_from->hf_config, hf);

    const auto bare = with_extra(json::object(), format);
    EXPECT_FALSE(bare.elapsed_s || bare.parent || bare.imported_from);
    EXPECT_EQ(with_extra({{"note", "a later build's key"}, {"elapsed_s", 3.0}}, format).elapsed_s.value_or(-1), 3.0);
  }
  const std::vector<std::pair<json, std::string>> refused = {
      {{{"elapsed_s", "long"}}, "extra.elapsed_s"},
      {{{"elapsed_s", -1.0}}, "not a duration in seconds"},
      {{{"parent", {{"checkpoint", "x"}}}}, "extra.parent.step"},
      {{{"parent", "runs/a/checkpoints/step_000100"}}, "extra.parent"},
      {{{"imported_from", {{"path", "/m"}, {"model_type", 3}, {"hf_config", json::object()}}}}, "extra.imported_from.model_type"},
  };
  for (const auto& [extra, problem] : refused) {
    SCOPED_TRACE(extra.dump());
    write_bytes(dir / "state.json", pristine);
    testing::reseal(dir, [&](json& j) { j["extra"] = extra; });
    expect_refused([&] { load_checkpoint(dir); }, dir / "state.json", problem);
  }
}

/// Bits of every parameter and the optimizer's state count, to see that a refusal changed nothing.
std::vector<at::Tensor> snapshot(const Trainee& t) {
  std::vector<at::Tensor> out;
  for (const auto& p : t.model->parameters()) out.push_back(p.detach().clone());
  return out;
}

/// A damage that only restoring can see: applied to checkpoint `dir`, then re-sealed.
struct RestoreCase {
  std::string what;
  std::function<void(const fs::path& dir)> damage;
  std::string problem;  ///< expected in the message
  std::string file;     ///< the file the message names
};

void edit_rng(const fs::path& dir, const std::function<void(std::string&)>& edit) {
  testing::reseal(dir, [&](nlohmann::json& j) {
    std::string hex = j["rng"]["cpu"];
    edit(hex);
    j["rng"]["cpu"] = hex;
  });
}

void edit_weights(const fs::path& dir, const std::function<void(TensorMap&)>& edit) {
  testing::edit_tensors(dir, "model.safetensors", [&](TensorMap& t, SafetensorsMetadata&) { edit(t); });
}

void edit_moments(const fs::path& dir, const std::function<void(TensorMap&, SafetensorsMetadata&)>& edit) {
  testing::edit_tensors(dir, "optimizer.safetensors", edit);
}

std::vector<RestoreCase> restore_cases() {
  using nlohmann::json;
  const std::string w = "h.0.attn.c_attn.weight";
  return {
      {"RNG state too short", [](auto d) { edit_rng(d, [](std::string& h) { h.resize(h.size() - 2); }); },
       "the CPU RNG state is 5055 bytes", "state.json"},
      {"RNG state too long", [](auto d) { edit_rng(d, [](std::string& h) { h += "00"; }); },
       "the CPU RNG state is 5057 bytes", "state.json"},
      {"RNG state empty", [](auto d) { edit_rng(d, [](std::string& h) { h.clear(); }); },
       "the CPU RNG state is 0 bytes", "state.json"},
      // `left` (int32 at byte 8) = 0 would never regenerate the table and read past it.
      {"RNG position", [](auto d) { edit_rng(d, [](std::string& h) { h.replace(16, 8, "00000000"); }); },
       "mt19937 position (left 0", "state.json"},
      {"model dimensions", [](auto d) { testing::reseal(d, [](json& j) { j["model"]["d_model"] = 64; }); },
       "model differs from this model in: d_model (64 vs 32)", ""},
      {"weight renamed",
       [w](auto d) {
         edit_weights(d, [w](TensorMap& t) {
           t[w + "s"] = t.at(w);
           t.erase(w);
         });
       },
       "has no tensor '" + w + "'", "model.safetensors"},
      {"extra weight", [](auto d) { edit_weights(d, [](TensorMap& t) { t["stray.bias"] = torch::zeros({3}); }); },
       "1 tensors name no parameter of this model: 'stray.bias'", "model.safetensors"},
      {"weight stored as I32", [w](auto d) { edit_weights(d, [w](TensorMap& t) { t[w] = t.at(w).to(torch::kInt); }); },
       "tensor '" + w + "' is I32, the model's parameter F32", "model.safetensors"},
      {"weight of another shape",
       [w](auto d) { edit_weights(d, [w](TensorMap& t) { t[w] = t.at(w).narrow(0, 0, 8); }); },
       "tensor '" + w + "' has shape [8, 32]", "model.safetensors"},
      {"weight holds NaN", [w](auto d) { edit_weights(d, [w](TensorMap& t) { t[w][0][0] = NAN; }); },
       "tensor '" + w + "' holds NaN or infinity", "model.safetensors"},
      {"optimizer tensor renamed",
       [w](auto d) {
         edit_moments(d, [w](TensorMap& t, auto&) {
           t["exp_avg." + w + "x"] = t.at("exp_avg." + w);
           t.erase("exp_avg." + w);
         });
       },
       "missing tensor 'exp_avg." + w + "'", "optimizer.safetensors"},
      {"extra optimizer tensor",
       [](auto d) { edit_moments(d, [](TensorMap& t, auto&) { t["exp_avg.stray"] = torch::zeros({2}); }); },
       "1 optimizer tensors name no parameter of this model: 'exp_avg.stray'", "optimizer.safetensors"},
      {"moment stored as F64",
       [w](auto d) {
         edit_moments(d,
                      [w](TensorMap& t, auto&) { t["exp_avg_sq." + w] = t.at("exp_avg_sq." + w).to(torch::kDouble); });
       },
       "tensor 'exp_avg_sq." + w + "' is F64, the parameter F32", "optimizer.safetensors"},
      {"moment of another shape",
       [w](auto d) {
         edit_moments(d, [w](TensorMap& t, auto&) { t["exp_avg." + w] = t.at("exp_avg." + w).t().contiguous(); });
       },
       "tensor 'exp_avg." + w + "' has shape [32, 96]", "optimizer.safetensors"},
      {"negative second moment",
       [w](auto d) { edit_moments(d, [w](TensorMap& t, auto&) { t["exp_avg_sq." + w][1][2] = -1.0; }); },
       "holds negative values", "optimizer.safetensors"},
      {"infinite first moment",
       [w](auto d) { edit_moments(d, [w](TensorMap& t, auto&) { t["exp_avg." + w][0][0] = INFINITY; }); },
       "tensor 'exp_avg." + w + "' holds NaN or infinity", "optimizer.safetensors"},
      {"step stored as F32",
       [w](auto d) {
         edit_moments(d, [w](TensorMap& t, auto&) { t["step." + w] = t.at("step." + w).to(torch::kFloat); });
       },
       "'step." + w + "' is not an I64 scalar", "optimizer.safetensors"},
      {"step count 0",
       [w](auto d) { edit_moments(d, [w](TensorMap& t, auto&) { t["step." + w] = at::scalar_tensor(0, at::kLong); }); },
       "'step." + w + "' is 0, not a step count >= 1", "optimizer.safetensors"},
      {"parameter groups swapped",
       [](auto d) {
         edit_moments(d, [](TensorMap&, SafetensorsMetadata& m) {
           auto groups = json::parse(m.at("attnlab.param_groups"));
           std::swap(groups[0]["params"], groups[1]["params"]);
           m["attnlab.param_groups"] = groups.dump();
         });
       },
       "parameter group 0 holds other parameters", "optimizer.safetensors"},
      {"negative learning rate",
       [](auto d) {
         edit_moments(d, [](TensorMap&, SafetensorsMetadata& m) {
           auto groups = json::parse(m.at("attnlab.param_groups"));
           groups[1]["lr"] = -0.5;
           m["attnlab.param_groups"] = groups.dump();
         });
       },
       "parameter group 1 has lr -0.5", "optimizer.safetensors"},
  };
}

// Each damage behind intact checksums is refused by restore() without changing the model, the
// optimizer or the RNG, and load_latest with check_restorable falls back past it.
// The window keys are optional in a checkpoint's model (docs/windows.md): one whose model lost them
// is a model without a window, and restoring it into a windowed model is refused naming them (a
// missing key compares as null, in both directions).
TEST(Checkpoint, AModelWithoutItsWindowKeysIsAnotherModel) {
  TempDir tmp;
  auto cfg = tiny_config();
  cfg.window = 4, cfg.window_pattern = "L", cfg.window_keep_first = 0;
  Trainee t(cfg, 1);
  t.step();
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  const fs::path dir = checkpoint_dir(tmp.path(), 1);
  testing::reseal(dir, [](nlohmann::json& j) {
    for (const char* key : {"window", "window_pattern", "window_keep_first"}) j["model"].erase(key);
  });
  Trainee u(cfg, 7);
  const auto ckpt = load_checkpoint(dir);
  EXPECT_FALSE(ckpt.model_config.window.has_value());
  expect_refused([&] { restore(ckpt, *u.model, *u.opt); }, dir,
                 "model differs from this model in: window (null vs 4) window_keep_first (null vs 0) "
                 "window_pattern (null vs \"L\")");
}

TEST(Checkpoint, RestoreRefusalsChangeNothingAndFallBack) {
  for (const auto& c : restore_cases()) {
    SCOPED_TRACE(c.what);
    TempDir tmp;
    Trainee t(tiny_config(), 1);
    for (int64_t step = 1; step <= 2; ++step) {
      t.step();
      save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(step));
    }
    const fs::path dir = checkpoint_dir(tmp.path(), 2);
    c.damage(dir);
    const fs::path file = c.file.empty() ? dir : dir / c.file;

    Trainee u(tiny_config(), 7);
    const auto before = snapshot(u);
    const auto rng_before = capture_rng_states().cpu;
    const auto ckpt = load_checkpoint(dir);
    expect_refused([&] { restore(ckpt, *u.model, *u.opt); }, file, c.problem);
    const auto after = snapshot(u);
    for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(same_bits(before[i], after[i])) << i;
    EXPECT_TRUE(u.opt->state().empty());
    EXPECT_EQ(capture_rng_states().cpu, rng_before);

    std::vector<std::string> warnings;
    const auto found = load_latest(tmp.path(), &warnings, true,
                                   [&](const LoadedCheckpoint& l) { check_restorable(l, *u.model, *u.opt); });
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->state.step, 1);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(c.problem), std::string::npos) << warnings[0];
    EXPECT_NO_THROW(restore(*found, *u.model, *u.opt));
  }
}

TEST(Checkpoint, NoUsableCheckpointStopsWithTheNewestProblem) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  Trainee other(tiny_config("off_by_one"), 1);
  expect_refused(
      [&] {
        load_latest(tmp.path(), nullptr, true, [&](const auto& c) { check_restorable(c, *other.model, *other.opt); });
      },
      tmp.path(), "none of its 1 checkpoints can be used");
  expect_refused(
      [&] {
        load_latest(tmp.path(), nullptr, true, [&](const auto& c) { check_restorable(c, *other.model, *other.opt); });
      },
      tmp.path(), "arm (\"baseline\" vs \"off_by_one\")");
}

// A model.safetensors inside a checkpoint directory is the checkpoint: its SHA-256 is verified.
TEST(Checkpoint, ModelFileBesideItsStateJsonIsVerified) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  const fs::path file = dir / "model.safetensors";
  EXPECT_EQ(load_model(file).source, dir);
  flip_byte(file, read_bytes(file).size() - 5);  // one flipped bit pattern in the last weight
  expect_refused([&] { load_model(file); }, file, "SHA-256 differs");
}

// Weights given alone: their declared dtype and their names are checked against the model.
TEST(Checkpoint, LoneModelFileDtypesAndNamesAreChecked) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  const fs::path dir = save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  const auto original = read_safetensors(dir / "model.safetensors");
  const fs::path copy = tmp.path() / "weights.safetensors";
  auto write_changed = [&](const std::function<void(TensorMap&)>& edit) {
    TensorMap tensors = original.tensors;
    edit(tensors);
    write_safetensors(copy, tensors, original.metadata);
  };
  write_changed([](TensorMap& m) { m["wpe.weight"] = (m.at("wpe.weight") * 1000).to(torch::kInt); });
  expect_refused([&] { load_model(copy); }, copy, "tensor 'wpe.weight' is I32, the model's parameter F32");
  write_changed([](TensorMap& m) { m["ln_f.weight"] = m.at("ln_f.weight").to(torch::kBFloat16); });
  expect_refused([&] { load_model(copy); }, copy, "tensor 'ln_f.weight' is BF16");
  write_changed([](TensorMap& m) { m["lm_head.weight"] = m.at("wte.weight"); });
  expect_refused([&] { load_model(copy); }, copy, "1 tensors name no parameter of this model: 'lm_head.weight'");
  write_changed([](TensorMap&) {});
  EXPECT_EQ(load_model(copy).source, copy);
}

TEST(Checkpoint, SaveRefusesNonFiniteValues) {
  TempDir tmp;
  Trainee t(tiny_config(), 1);
  t.step();
  save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(1));
  t.step();
  {
    torch::NoGradGuard no_grad;
    t.model->named_parameters()["ln_f.bias"][3] = NAN;
  }
  expect_refused([&] { save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(2)); },
                 checkpoint_dir(tmp.path(), 2).parent_path(), "tensor 'ln_f.bias' holds NaN or infinity");
  EXPECT_EQ(steps_of(tmp.path()), std::vector<int64_t>{1});
  EXPECT_EQ(entries_of(tmp.path()), std::vector<std::string>{"step_000001"});
  {
    torch::NoGradGuard no_grad;
    t.model->named_parameters()["ln_f.bias"][3] = 0.0;
    auto& state = static_cast<torch::optim::AdamWParamState&>(
        *t.opt->state().at(t.model->named_parameters()["wpe.weight"].unsafeGetTensorImpl()));
    state.exp_avg_sq()[0][0] = INFINITY;
  }
  expect_refused([&] { save_checkpoint(tmp.path(), *t.model, *t.opt, state_at(2)); }, tmp.path(),
                 "tensor 'exp_avg_sq.wpe.weight' holds NaN or infinity");
  EXPECT_EQ(steps_of(tmp.path()), std::vector<int64_t>{1});
}

TEST(Checkpoint, ListsCheckpointsByNumericStep) {
  TempDir tmp;
  for (const char* name : {"step_000010", "step_1000000", "step_000002", ".tmp.step_000011", "notes"}) {
    make_dirs(tmp.path() / name);
  }
  EXPECT_EQ(steps_of(tmp.path()), (std::vector<int64_t>{2, 10, 1000000}));
  EXPECT_EQ(checkpoint_dir(tmp.path(), 1234567).filename(), "step_1234567");
}

}  // namespace
}  // namespace attnlab
