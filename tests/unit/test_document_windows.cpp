// Document-aligned windows (document_windows.h, data.sampling: document): the starts against a hand
// count and a plain loop over documents, the draw of batch_sampler.h's key over them, the aligned
// validation set, and the refusal where the separator is unknown.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include <torch/torch.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/document_windows.h"
#include "shard_files.h"

namespace attnlab {
namespace {

using testing::TempDir;

constexpr uint16_t S = 7;  // the separator of the hand-made streams

// An independent reading of the rule: for each separator s, its document [s, e) (e the next
// separator or the end), the starts s and s + kT (k >= 1) while s + kT + 1 < e, each kept when its
// T + 1 tokens end by `limit`.
std::vector<int64_t> plain_starts(const std::vector<uint16_t>& tokens, uint16_t sep, int64_t T, int64_t limit) {
  const int64_t n = std::min<int64_t>(limit, static_cast<int64_t>(tokens.size()));
  std::vector<int64_t> out;
  for (int64_t s = 0; s < n; ++s) {
    if (tokens[s] != sep) continue;
    int64_t e = s + 1;
    while (e < n && tokens[e] != sep) ++e;
    for (int64_t k = 0; k == 0 || s + k * T + 1 < e; ++k)
      if (s + k * T + T + 1 <= n) out.push_back(s + k * T);
  }
  return out;
}

// T = 4: a leading fragment [0, 2) (no separator at 0), then documents of 3 tokens (shorter than
// T), 5 (T + 1: one window), 11 (two continuations), 4 (= T) and 3 tokens cut by the end of the
// data (its window would pass it). Over two shards, split inside the 11-token document.
std::vector<uint16_t> hand_stream() {
  std::vector<uint16_t> t = {1, 2};
  auto doc = [&](int len) {
    t.push_back(S);
    for (int i = 1; i < len; ++i) t.push_back(static_cast<uint16_t>(10 + t.size() % 50));
  };
  for (int len : {3, 5, 11, 4, 3}) doc(len);
  return t;  // 28 tokens; separators at 2, 5, 10, 21, 25
}

std::shared_ptr<const ShardSet> open_stream(const TempDir& dir, const std::vector<uint16_t>& t, const std::string& stem) {
  const size_t cut = 13;
  dir.write_shard(stem + "_000001.bin", {{t.begin(), t.begin() + std::min(cut, t.size())}});
  if (t.size() > cut) dir.write_shard(stem + "_000002.bin", {{t.begin() + cut, t.end()}});
  return std::make_shared<ShardSet>(ShardSet::open(dir.file(stem + "_*.bin"), 4096));
}

TEST(DocumentWindows, StartsFollowTheRuleCountedByHand) {
  TempDir dir;
  const auto tokens = hand_stream();
  ASSERT_EQ(tokens.size(), 28u);
  const auto set = open_stream(dir, tokens, "h_train");
  const auto w = document_windows(*set, S, 4, set->num_tokens());
  // 2 (3 tokens), 5 (T + 1: no continuation), 10 and its continuations 14, 18 (18 runs on into the
  // document at 21: packing), 21 (= T); 25 is dropped (25 + 5 > 28); nothing before the first separator.
  EXPECT_EQ(w.starts, (std::vector<int64_t>{2, 5, 10, 14, 18, 21}));
  EXPECT_EQ(w.at_document_start, 4);
  EXPECT_EQ(w.starts, plain_starts(tokens, S, 4, 28));
}

TEST(DocumentWindows, StartsMatchAPlainLoopOnManyStreams) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    TempDir dir;
    std::vector<uint16_t> tokens;
    const bool at_zero = trial % 2 == 0;  // a separator at position 0, or a leading fragment
    if (!at_zero) tokens = {3, 4, 5};
    while (tokens.size() < 200) {
      const int len = 1 + static_cast<int>(rng() % 23);  // shorter, equal and longer than T
      tokens.push_back(S);
      for (int i = 1; i < len; ++i) tokens.push_back(static_cast<uint16_t>(8 + rng() % 40));
    }
    const auto set = open_stream(dir, tokens, "r_train");
    for (int64_t T : {1, 4, 8, 9, 16}) {
      for (int64_t limit : {int64_t(200), int64_t(tokens.size()), int64_t(57)}) {
        const auto w = document_windows(*set, S, T, limit);
        ASSERT_EQ(w.starts, plain_starts(tokens, S, T, limit)) << trial << " T " << T << " limit " << limit;
        int64_t at_doc = 0;
        for (int64_t s : w.starts) at_doc += tokens[s] == S;
        EXPECT_EQ(w.at_document_start, at_doc);
        if (at_zero && !w.starts.empty()) EXPECT_EQ(w.starts.front(), 0);
      }
    }
  }
}

// Documents of exactly T + 1 tokens: one window each, and every drawn window starts with the separator.
TEST(DocumentWindows, AnAllAlignedCorpusDrawsOnlyWindowsStartingWithTheSeparator) {
  TempDir dir;
  const int64_t T = 8, docs = 40;
  std::vector<uint16_t> tokens;
  for (int64_t d = 0; d < docs; ++d) {
    tokens.push_back(S);
    for (int64_t i = 0; i < T; ++i) tokens.push_back(static_cast<uint16_t>(100 + d));
  }
  const auto set = open_stream(dir, tokens, "a_train");
  BatchSampler s(set, {4, T, 3, int64_t(S)});
  EXPECT_EQ(s.num_windows(), docs);  // the last one ends exactly at the end of the data
  EXPECT_EQ(s.num_document_starts(), docs);
  std::set<int64_t> drawn;
  for (int64_t step = 0; step < 100; ++step) {
    const auto b = s.batch(step, 0);
    EXPECT_TRUE(torch::all(b.x.select(1, 0) == int64_t(S)).item<bool>()) << step;
    for (int64_t r = 0; r < 4; ++r) drawn.insert(b.x[r][1].item<int64_t>());
  }
  EXPECT_EQ(static_cast<int64_t>(drawn.size()), docs);  // every document, in 400 draws
}

// batch_sampler.h's key, transcribed independently: splitmix64's finaliser and the 128-bit multiply.
uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
uint64_t key_of(uint64_t seed, uint64_t step, uint64_t index) {
  const auto mix = [](uint64_t h, uint64_t v) { return splitmix(h ^ splitmix(v)); };
  return mix(mix(splitmix(seed ^ 0x6174746e64617461ULL), step), index);
}

TEST(DocumentWindows, TheDrawIsTheRandomSamplersKeyOverTheStarts) {
  TempDir dir;
  const auto set = open_stream(dir, hand_stream(), "h_train");
  const std::vector<int64_t> starts = {2, 5, 10, 14, 18, 21};
  BatchSampler a(set, {2, 4, 1337, int64_t(S)}), again(set, {2, 4, 1337, int64_t(S)}), other(set, {2, 4, 1338, int64_t(S)});
  BatchSampler plain(set, {2, 4, 1337});
  bool differs = false;
  for (int64_t step = 0; step < 50; ++step) {
    for (int64_t index = 0; index < 4; ++index) {
      const uint64_t key = key_of(1337, uint64_t(step), uint64_t(index));
      const auto pick = static_cast<size_t>((static_cast<unsigned __int128>(key) * starts.size()) >> 64);
      EXPECT_EQ(a.window_offset(step, index), starts[pick]);
      EXPECT_EQ(again.window_offset(step, index), a.window_offset(step, index));
      // the random sampler draws from the same key: uniform over N - T = 24 offsets
      EXPECT_EQ(plain.window_offset(step, index), int64_t((static_cast<unsigned __int128>(key) * 24) >> 64));
      differs |= other.window_offset(step, index) != a.window_offset(step, index);
    }
  }
  EXPECT_TRUE(differs) << "another seed, another order";
  EXPECT_TRUE(torch::equal(a.batch(3, 0).x, torch::cat({BatchSampler(set, {1, 4, 1337, int64_t(S)}).batch(3, 0).x,
                                                          BatchSampler(set, {1, 4, 1337, int64_t(S)}).batch(3, 1).x})));
}

TEST(DocumentWindows, NoAlignedWindowNamesThePattern) {
  TempDir dir;
  const auto set = open_stream(dir, testing::iota_tokens(40, 20, 100), "n_train");  // no 7 anywhere
  try {
    BatchSampler(set, {1, 4, 0, int64_t(S)});
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("n_train_*.bin")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("document separator"), std::string::npos) << e.what();
  }
}

// Sequence k is the k-th aligned window that fits in max_tokens; without a separator, today's cut.
TEST(DocumentWindows, TheValidationSetTakesTheAlignedWindowsInOrder) {
  TempDir dir;
  const auto tokens = hand_stream();
  const auto set = open_stream(dir, tokens, "h_val");
  const ValidationSet v(set, 4, 20, int64_t(S));  // starts whose 5 tokens end by 20: 2, 5, 10, 14
  ASSERT_EQ(v.num_sequences(), 4);
  EXPECT_EQ(v.num_targets(), 16);
  EXPECT_EQ(v.num_document_starts(), 3);
  const auto all = v.sequences(0, 4);
  const std::vector<int64_t> starts = {2, 5, 10, 14};
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t t = 0; t < 4; ++t) {
      EXPECT_EQ(all.x[k][t].item<int64_t>(), tokens[starts[k] + t]) << k << " " << t;
      EXPECT_EQ(all.y[k][t].item<int64_t>(), tokens[starts[k] + t + 1]) << k << " " << t;
    }
  EXPECT_EQ(all.x[0][0].item<int64_t>(), S);
  EXPECT_EQ(v.fingerprint(), ValidationSet(set, 4, 20, int64_t(S)).fingerprint());
  const ValidationSet cut(set, 4, 20);  // the consecutive cut, as without the option
  EXPECT_EQ(cut.num_sequences(), 4);
  EXPECT_EQ(cut.sequences(1, 1).x[0][0].item<int64_t>(), tokens[4]);
  EXPECT_NE(v.fingerprint(), cut.fingerprint());
  EXPECT_EQ(ValidationSet(set, 4, 0, int64_t(S)).num_sequences(), 6);  // all 28 tokens
  try {
    ValidationSet(set, 4, 6, int64_t(S));  // the window at 2 needs tokens up to 7
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("h_val_*.bin")), std::string::npos) << e.what();
  }
}

// The separator: tokenizer.json's eot; without one GPT-2's for its vocabulary, else a refusal
// that names the data pattern and says why.
TEST(DocumentWindows, TheSeparatorComesFromTokenizerJsonOrIsRefusedNamingThePattern) {
  TempDir dir;
  dir.write_shard("x_train_000001.bin", {testing::iota_tokens(50)});
  dir.write_shard("x_val_000000.bin", {testing::iota_tokens(50)});
  const auto data = open_train_val(dir.file("x_train_*.bin"), dir.file("x_val_*.bin"), 4096);
  ASSERT_TRUE(data.tokenizer.assumed);
  EXPECT_EQ(document_separator(data.tokenizer, kGpt2VocabSize, "p"), 50256);
  try {
    document_separator(data.tokenizer, 4096, dir.file("x_train_*.bin"));
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(dir.file("x_train_*.bin") + ": data.sampling: document", 0), 0u) << what;
    EXPECT_NE(what.find("no tokenizer.json"), std::string::npos) << what;
    EXPECT_NE(what.find("the separator is unknown"), std::string::npos) << what;
  }
  dir.write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 4096, "eot": 7})");
  const auto known = open_train_val(dir.file("x_train_*.bin"), dir.file("x_val_*.bin"), 4096);
  EXPECT_EQ(document_separator(known.tokenizer, 4096, "p"), 7);
  dir.write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 4096})");
  const auto no_eot = open_train_val(dir.file("x_train_*.bin"), dir.file("x_val_*.bin"), 4096);
  try {
    document_separator(no_eot.tokenizer, 4096, "data/p_*.bin");
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("names no \"eot\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab
