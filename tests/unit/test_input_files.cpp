// Hostile inputs to every reader of user files (docs/design.md, "Reading user files"): a path that is
// not a regular file (a FIFO blocks a plain open until something writes to it; a directory opens and
// then fails every read), JSON nested far too deep (nlohmann copies, compares and prints a value
// recursively: a million levels overflow the stack) and numbers beyond a double (1e400). Each reader
// must refuse them promptly with an error that names the path and what is wrong; a damaged newest
// checkpoint makes a resume fall back to the previous one. Readers run in a child process under an
// alarm, so a reader that hangs or crashes fails the test instead of the suite.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/checkpoint.h"
#include "attnlab/hf_interop.h"
#include "attnlab/run_config.h"
#include "attnlab/run_dir.h"
#include "attnlab/run_metrics.h"
#include "attnlab/safetensors.h"
#include "attnlab/shards.h"
#include "attnlab/sweep.h"
#include "unit/checkpoint_surgery.h"
#include "unit/forked.h"
#include "unit/shard_files.h"
#include "unit/trainee.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// What `read` throws: "refused: <what()>", or "accepted" when it returns; run in a child killed by
// SIGALRM after 20 s, so a reader that blocks yields "child died: signal 14" rather than a hang.
std::string outcome(const std::function<void()>& read) {
  return testing::in_child([&] {
    ::alarm(20);
    try {
      read();
    } catch (const std::exception& e) {
      return std::string("refused: ") + e.what();
    }
    return std::string("accepted");
  });
}

void expect_refused(const std::function<void()>& read, const std::vector<std::string>& fragments,
                    const std::string& what) {
  const auto text = outcome(read);
  EXPECT_EQ(text.rfind("refused: ", 0), 0u) << what << ": " << text;
  for (const auto& f : fragments) EXPECT_NE(text.find(f), std::string::npos) << what << ": " << text;
}

// Each reader of a user-named file, handed `dir`, in which it reads the file called `name`.
struct Reader {
  std::string what;
  std::string name;  // the file it opens inside the directory
  std::function<void(const std::string& dir)> read;
};

std::vector<Reader> file_readers() {
  return {
      {"a shard glob (train, eval)", "train_000.bin", [](const std::string& d) { ShardSet::open(d + "/train_*.bin", 256); }},
      {"a config include", "tier.yaml",
       [](const std::string& d) {
         std::ofstream(d + "/run.yaml") << "include: [tier.yaml]\n";
         load_run_config(d + "/run.yaml");
       }},
      {"metrics.jsonl (report, watch)", "metrics.jsonl", [](const std::string& d) { read_metrics(d + "/metrics.jsonl"); }},
      {"metrics.jsonl (a resume)", "metrics.jsonl", [](const std::string& d) { MetricsLog(d + "/metrics.jsonl", 3); }},
      {"final.json", "final.json", [](const std::string& d) { RunDir(d).final_record(); }},
      {"a lone model file", "model.safetensors", [](const std::string& d) { load_model(d + "/model.safetensors"); }},
      {"a safetensors file", "model.safetensors", [](const std::string& d) { read_safetensors(d + "/model.safetensors"); }},
      {"a checkpoint's state.json", "state.json", [](const std::string& d) { load_checkpoint(d); }},
      {"tokenizer.json beside shards", "tokenizer.json", [](const std::string& d) { read_tokenizer_info(d); }},
      {"a sweep manifest", "manifest.json", [](const std::string& d) { read_manifest(d); }},
      {"a Hugging Face config.json", "config.json", [](const std::string& d) { read_hf_model(d); }},
  };
}

TEST(InputPaths, EveryReaderRefusesAFifoByWhatItIs) {
  for (const auto& reader : file_readers()) {
    TempDir dir;
    ASSERT_EQ(::mkfifo(dir.file(reader.name).c_str(), 0600), 0);
    expect_refused([&] { reader.read(dir.path()); }, {dir.file(reader.name), "is a FIFO (named pipe)"}, reader.what);
  }
}

// A directory opens for reading and then fails each read, which the readers took for an empty file
// or reported as "cannot read: Success".
TEST(InputPaths, EveryReaderRefusesADirectoryByWhatItIs) {
  for (const auto& reader : file_readers()) {
    TempDir dir;
    ASSERT_EQ(::mkdir(dir.file(reader.name).c_str(), 0700), 0);
    expect_refused([&] { reader.read(dir.path()); }, {dir.file(reader.name), "is a directory"}, reader.what);
  }
}

TEST(InputPaths, ADeviceIsNeverReadToItsEnd) {
  TempDir dir;
  std::ofstream(dir.file("run.yaml")) << "include: [/dev/zero]\n";
  expect_refused([&] { load_run_config(dir.file("run.yaml")); }, {"/dev/zero: is a character device"}, "an include");
  expect_refused([&] { load_run_config("/dev/zero"); }, {"/dev/zero: is a character device"}, "--config");
}

// --config <(...) is a pipe with a writer: it is read. A named FIFO nobody writes to reads as empty
// instead of blocking the open.
TEST(InputPaths, TheTopLevelConfigMayBeAPipe) {
  TempDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text = "data: {train: a, val: b}\nmodle: {arm: baseline}\n";  // read, then refused by its key
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  const std::string path = "/dev/fd/" + std::to_string(fds[0]);
  expect_refused([&] { load_run_config(path); }, {"modle: unknown key"}, "a pipe holding a config (read, then checked)");
  ::close(fds[0]);
  ASSERT_EQ(::mkfifo(dir.file("run.yaml").c_str(), 0600), 0);
  const auto named = outcome([&] { load_run_config(dir.file("run.yaml")); });
  EXPECT_EQ(named.rfind("refused: ", 0), 0u) << named;  // an empty config lacks its required keys
}

// ---- JSON: depth and numbers ----------------------------------------------------------------------

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A JSON reader, handed a directory and the text to place in the file it reads.
struct JsonReader {
  std::string what;
  std::string name;
  std::function<std::string(const std::string& value)> text;  // the file's text around a value
  std::function<void(const std::string& dir)> read;
};

std::string le64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

std::vector<JsonReader> json_readers() {
  return {
      {"tokenizer.json", "tokenizer.json",
       [](const std::string& v) { return R"({"tokenizer": "bytes", "vocab_size": 257, "source": )" + v + "}"; },
       [](const std::string& d) { read_tokenizer_info(d); }},
      {"config.json of a Hugging Face directory", "config.json",
       [](const std::string& v) { return R"({"model_type": "gpt2", "n_embd": )" + v + "}"; },
       [](const std::string& d) { read_hf_model(d); }},
      {"final.json", "final.json", [](const std::string& v) { return R"({"config_hash": )" + v + "}"; },
       [](const std::string& d) { RunDir(d).final_record(); }},
      {"a sweep manifest", "manifest.json", [](const std::string& v) { return R"({"runs": [], "sweep": )" + v + "}"; },
       [](const std::string& d) { read_manifest(d); }},
      {"a checkpoint's state.json", "state.json",
       [](const std::string& v) { return R"({"format": "attnlab-checkpoint", "extra": )" + v + "}"; },
       [](const std::string& d) { load_checkpoint(d); }},
      {"a safetensors header", "model.safetensors",
       [](const std::string& v) {
         const std::string header = R"({"__metadata__": {"a": "b"}, "w": )" + v + "}";
         return le64(header.size()) + header;
       },
       [](const std::string& d) { read_safetensors(d + "/model.safetensors"); }},
  };
}

TEST(JsonReaders, DeepNestingIsRefusedNamingTheFile) {
  for (const auto& reader : json_readers()) {
    TempDir dir;
    dir.write_text(reader.name, reader.text(nested(1000000)));
    expect_refused([&] { reader.read(dir.path()); }, {dir.file(reader.name), "nested deeper than 64 levels"},
                   reader.what);
  }
}

TEST(JsonReaders, NumbersBeyondADoubleAreRefusedNamingTheFile) {
  for (const auto& reader : json_readers()) {
    TempDir dir;
    dir.write_text(reader.name, reader.text("1e400"));
    expect_refused([&] { reader.read(dir.path()); }, {dir.file(reader.name), "beyond the range of a double"},
                   reader.what);
  }
}

// metrics.jsonl is append-only and a crash can cut its last line, so its readers skip a line they
// cannot take; a deep or huge-number line is one such, and every other line is kept.
TEST(JsonReaders, MetricsLinesNestedTooDeepAreSkippedAndTheRestKept) {
  TempDir dir;
  const std::string at_limit = R"({"step": 2, "train_loss": 2.0, "x": )" + nested(63) + "}";  // 64 levels
  dir.write_text("metrics.jsonl", std::string(R"({"step": 1, "train_loss": 1.0})") + "\n" +
                                      R"({"step": 9, "train_loss": )" + nested(1000000) + "}\n" +
                                      R"({"step": 8, "train_loss": 1e400})" + "\n" + at_limit + "\n" +
                                      R"({"step": 7, "train_loss": 7.0, "x": )" + nested(64) + "}\n");
  const auto text = outcome([&] {
    const auto h = read_metrics(dir.file("metrics.jsonl"));
    std::string steps;
    for (const auto& p : h.training) steps += std::to_string(p.step) + " ";
    throw std::runtime_error(steps);
  });
  EXPECT_EQ(text, "refused: 1 2 ");
}

// The newest checkpoint's state.json, damaged and resealed (so its checksum holds), must be a
// CheckpointError of that checkpoint: load_latest skips it for the one before.
TEST(JsonReaders, ADamagedNewestStateJsonFallsBackToThePreviousCheckpoint) {
  for (const std::string& damage : {std::string("1e400"), nested(1000000)}) {
    TempDir dir;
    const fs::path run = dir.file("run");
    testing::Trainee t(testing::tiny_config(), 1);
    for (int64_t step = 1; step <= 2; ++step) {
      t.step();
      TrainState s;
      s.step = step, s.tokens_seen = 32 * step, s.data_position = step;
      save_checkpoint(run, *t.model, *t.opt, s, RetentionPolicy{10});
    }
    const fs::path newest = checkpoint_dir(run, 2);
    std::string text = testing::file_text(newest / "state.json");
    const auto at = text.find("\"extra\":");
    ASSERT_NE(at, std::string::npos) << text;
    text.insert(at, "\"damage\": " + damage + ", ");
    testing::write_text_file(newest / "state.json", text);
    testing::write_text_file(newest / "state.json.sha256", testing::sha256_of(text) + "  state.json\n");
    const auto result = outcome([&] {
      std::vector<std::string> warnings;
      const auto ckpt = load_latest(run, &warnings);
      throw std::runtime_error("step " + std::to_string(ckpt->state.step) + "; " + (warnings.empty() ? "" : warnings[0]));
    });
    EXPECT_EQ(result.rfind("refused: step 1; skipping checkpoint " + newest.string(), 0), 0u) << result;
    EXPECT_NE(result.find((newest / "state.json").string()), std::string::npos) << result;
  }
}

}  // namespace
}  // namespace attnlab
