// The llm.c shard reader (SPEC section 6): good files read back exactly, every bad file is a
// DataError whose message names the file and the fault.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "attnlab/shards.h"
#include "shard_files.h"

namespace attnlab {
namespace {

using testing::ShardSpec;
using testing::TempDir;
using testing::iota_tokens;

// Runs `fn`, expects a DataError, and checks the message holds every fragment.
template <typename Fn>
void expect_data_error(Fn fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg << "\n lacks: " << f;
  }
}

TEST(Shard, ReadsKnownTokens) {
  TempDir dir;
  const std::vector<uint16_t> tokens = {50256, 15496, 995, 0, 65535 % 50257, 7};
  const auto path = dir.write_shard("x_val_000000.bin", {tokens});
  const auto shard = Shard::open(path, kGpt2VocabSize);
  ASSERT_EQ(shard.size(), 6);
  EXPECT_EQ(shard.path(), path);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(shard.tokens()[i], tokens[i]);
}

TEST(Shard, EmptyShardIsValid) {
  TempDir dir;
  const auto shard = Shard::open(dir.write_shard("e.bin", {{}}), 10);
  EXPECT_EQ(shard.size(), 0);
}

TEST(Shard, MissingFile) {
  TempDir dir;
  const auto path = dir.file("absent_train_000001.bin");
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "does not exist"});
}

TEST(Shard, ShorterThanHeader) {
  TempDir dir;
  dir.write_text("short.bin", std::string(100, '\0'));
  expect_data_error([&] { Shard::open(dir.file("short.bin"), 4096); },
                    {dir.file("short.bin"), "truncated", "100 bytes"});
}

TEST(Shard, TruncatedTokens) {
  TempDir dir;
  ShardSpec spec{iota_tokens(10)};
  spec.drop_bytes = 3;
  const auto path = dir.write_shard("t.bin", spec);
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "truncated", "10 tokens"});
}

TEST(Shard, HeaderClaimsMoreThanFileHolds) {
  TempDir dir;
  ShardSpec spec{iota_tokens(10)};
  spec.claimed = 11;
  const auto path = dir.write_shard("t.bin", spec);
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "truncated", "11 tokens"});
}

TEST(Shard, TrailingBytes) {
  TempDir dir;
  ShardSpec spec{iota_tokens(10)};
  spec.extra_bytes = "xyz";
  const auto path = dir.write_shard("t.bin", spec);
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "3 trailing bytes"});
}

TEST(Shard, WrongMagic) {
  TempDir dir;
  ShardSpec spec{iota_tokens(4)};
  spec.magic = 12345;
  const auto path = dir.write_shard("m.bin", spec);
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "wrong magic 12345", "20240520"});
}

TEST(Shard, Llama3FormatIsNamed) {
  TempDir dir;
  ShardSpec spec{iota_tokens(4)};
  spec.magic = 20240801;
  spec.version = 7;
  const auto path = dir.write_shard("l.bin", spec);
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "uint32 (Llama-3)"});
}

TEST(Shard, WrongVersion) {
  TempDir dir;
  ShardSpec spec{iota_tokens(4)};
  spec.version = 2;
  const auto path = dir.write_shard("v.bin", spec);
  expect_data_error([&] { Shard::open(path, 4096); }, {path, "unsupported version 2"});
}

TEST(Shard, TokenAtOrAboveVocab) {
  TempDir dir;
  auto tokens = iota_tokens(100, 0, 4096);
  tokens[77] = 5123;
  tokens[90] = 4096;  // a later bad token: the first one is reported
  const auto path = dir.write_shard("x_train_000001.bin", {tokens});
  expect_data_error([&] { Shard::open(path, 4096); },
                    {path + ": token 5123 at index 77 >= vocab_size 4096"});
  tokens[77] = 4095;  // the largest valid id
  tokens[90] = 4095;
  EXPECT_EQ(Shard::open(dir.write_shard("ok.bin", {tokens}), 4096).size(), 100);
}

TEST(ShardSet, GlobMatchingNothingNamesThePattern) {
  TempDir dir;
  const auto pattern = dir.file("nothing_*.bin");
  expect_data_error([&] { ShardSet::open(pattern, 4096); }, {pattern, "matches no shard"});
}

TEST(ShardSet, SortedConcatenationAcrossShards) {
  TempDir dir;
  dir.write_shard("d_train_000002.bin", {{20, 21}});
  dir.write_shard("d_train_000001.bin", {{10, 11, 12}});
  dir.write_shard("d_train_000003.bin", {{}});
  dir.write_shard("d_train_000004.bin", {{30}});
  const auto set = ShardSet::open(dir.file("d_train_*.bin"), kGpt2VocabSize);
  ASSERT_EQ(set.shards().size(), 4u);
  EXPECT_EQ(set.shards()[0].path(), dir.file("d_train_000001.bin"));
  ASSERT_EQ(set.num_tokens(), 6);
  std::vector<int64_t> all(6);
  set.read(0, 6, all.data());
  EXPECT_EQ(all, (std::vector<int64_t>{10, 11, 12, 20, 21, 30}));
  std::vector<int64_t> span(3);
  set.read(2, 3, span.data());  // crosses two boundaries and the empty shard
  EXPECT_EQ(span, (std::vector<int64_t>{12, 20, 21}));
  EXPECT_THROW(set.read(4, 3, span.data()), std::out_of_range);
}

TEST(ShardSet, BadShardInSetNamesThatFile) {
  TempDir dir;
  dir.write_shard("d_train_000001.bin", {{1, 2, 3}});
  ShardSpec bad{{1, 2, 3}};
  bad.drop_bytes = 2;
  const auto path = dir.write_shard("d_train_000002.bin", bad);
  expect_data_error([&] { ShardSet::open(dir.file("d_train_*.bin"), kGpt2VocabSize); }, {path, "truncated"});
}

TEST(Tokenizer, AbsentFileAcceptsTokensBelowTheModelVocabWithANote) {
  TempDir dir;
  // A byte-level corpus (ids 0..255) made elsewhere, without tokenizer.json: valid for a 256-token model.
  dir.write_shard("bytes_val_000000.bin", {iota_tokens(1000, 0, 256)});
  const auto set = ShardSet::open(dir.file("*_val_*.bin"), 256);
  EXPECT_EQ(set.num_tokens(), 1000);
  EXPECT_TRUE(set.tokenizer().assumed);
  EXPECT_EQ(set.tokenizer().tokenizer, "unknown");
  ASSERT_EQ(set.notes().size(), 1u);
  EXPECT_EQ(set.notes()[0], dir.path() + ": no tokenizer.json; the token ids are used as they are, each checked to be "
                                         "below model.vocab_size = 256 (the tokenizer is unknown; docs/data.md)");
  // llm.c's GPT-2 shards load as before, for a model of GPT-2's vocabulary.
  dir.write_shard("edu_fineweb_val_000001.bin", {{50256, 464}});
  EXPECT_EQ(ShardSet::open(dir.file("edu_*_val_*.bin"), kGpt2VocabSize).num_tokens(), 2);
  // Refused only for a token out of range, naming the shard and the id.
  expect_data_error([&] { ShardSet::open(dir.file("edu_*_val_*.bin"), 256); },
                    {dir.file("edu_fineweb_val_000001.bin"), "token 50256 at index 0 >= vocab_size 256"});
}

TEST(Tokenizer, ReadsTokenizerJsonAndChecksVocab) {
  TempDir dir;
  dir.write_text("tokenizer.json",
                 R"({"tokenizer": "sentencepiece", "vocab_size": 4096, "model": "tokenizer.model",
                     "source": "python3.11-doc", "eot": 1})");
  dir.write_shard("p_val_000000.bin", {{1, 4095}});
  EXPECT_EQ(tokenizer_for_pattern(dir.file("p_val_*.bin")).vocab_size, 4096);  // before any model exists
  const auto set = ShardSet::open(dir.file("p_val_*.bin"), 4096);
  const auto& info = set.tokenizer();
  EXPECT_FALSE(info.assumed);
  EXPECT_EQ(info.tokenizer, "sentencepiece");
  EXPECT_EQ(info.model, dir.file("tokenizer.model"));
  EXPECT_EQ(info.eot, 1);
  EXPECT_EQ(info.file, dir.file("tokenizer.json"));
  expect_data_error([&] { check_vocab(info, 50257); }, {dir.file("tokenizer.json"), "4096", "50257"});
  expect_data_error([&] { ShardSet::open(dir.file("p_val_*.bin"), 8192); },
                    {dir.file("tokenizer.json"), "4096", "8192"});
}

TEST(Tokenizer, MalformedTokenizerJsonNamesTheFile) {
  TempDir dir;
  dir.write_text("tokenizer.json", "{\"tokenizer\": \"bytes\"");
  expect_data_error([&] { read_tokenizer_info(dir.path()); }, {dir.file("tokenizer.json"), "not valid JSON"});
  dir.write_text("tokenizer.json", R"({"tokenizer": "bytes"})");
  expect_data_error([&] { read_tokenizer_info(dir.path()); }, {dir.file("tokenizer.json"), "vocab_size"});
  dir.write_text("tokenizer.json", R"({"tokenizer": "wordpiece", "vocab_size": 10})");
  expect_data_error([&] { read_tokenizer_info(dir.path()); }, {dir.file("tokenizer.json"), "wordpiece"});
}

TEST(Tokenizer, FieldsOfTheWrongTypeOrRangeAreRefused) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"tokenizer": "bytes", "vocab_size": 257, "eot": "256"})", "\"eot\": expected an integer"},
      {R"({"tokenizer": "bytes", "vocab_size": 257, "eot": 257})", "eot 257 outside the vocabulary [0, 257)"},
      {R"({"tokenizer": "bytes", "vocab_size": 257, "eot": -1})", "eot -1 outside"},
      {R"({"tokenizer": "sentencepiece", "vocab_size": 4096, "model": 5})", "\"model\": expected a file name or null"},
      {R"({"tokenizer": "bytes", "vocab_size": 257, "source": ["a"]})", "\"source\": expected a string"},
      {R"({"tokenizer": "bytes", "vocab_size": 18446744073709551615})", "vocab_size 18446744073709551615 does not fit"},
      {R"({"tokenizer": "bytes", "vocab_size": 65537})", "vocab_size 65537 does not fit"},
      {R"({"tokenizer": "bytes", "vocab_size": 257, "documents": 1e400})", "beyond the range of a double"},
  };
  for (const auto& [text, fragment] : cases) {
    dir.write_text("tokenizer.json", text);
    expect_data_error([&] { read_tokenizer_info(dir.path()); }, {dir.file("tokenizer.json"), fragment});
  }
  dir.write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 257, "eot": 256, "model": null})");
  EXPECT_EQ(read_tokenizer_info(dir.path()).eot, 256);
}

// Two directories holding the same SentencePiece tokenizer (a copy of one model file each).
struct TwoDirs {
  TempDir root;
  std::string a = root.file("a"), b = root.file("b");
  TwoDirs(const std::string& model_a, const std::string& model_b, int eot_b = 1) {
    ::mkdir(a.c_str(), 0755);
    ::mkdir(b.c_str(), 0755);
    root.write_text("a/tokenizer.json", R"({"tokenizer": "sentencepiece", "vocab_size": 4096, "model": "tokenizer.model", "eot": 1, "source": "here"})");
    root.write_text("b/tokenizer.json", R"({"tokenizer": "sentencepiece", "vocab_size": 4096, "model": "tokenizer.model", "eot": )" +
                                            std::to_string(eot_b) + R"(, "source": "there"})");
    root.write_text("a/tokenizer.model", model_a);
    root.write_text("b/tokenizer.model", model_b);
    root.write_shard("a/c_train_000001.bin", {{4, 5, 6}});
    root.write_shard("b/c_val_000000.bin", {{1, 2, 3}});
  }
};

TEST(TrainVal, TheSameTokenizerInDifferentDirectoriesIsAccepted) {
  TwoDirs dirs("model bytes", "model bytes");
  const auto data = open_train_val(dirs.a + "/c_train_*.bin", dirs.b + "/c_val_*.bin", 4096);
  EXPECT_EQ(data.train->tokenizer().file, dirs.a + "/tokenizer.json");
  EXPECT_EQ(data.val->tokenizer().file, dirs.b + "/tokenizer.json");
  EXPECT_TRUE(data.notes.empty());
  EXPECT_EQ(tokenizer_difference(data.train->tokenizer(), data.val->tokenizer()), "");  // the source is free text
}

TEST(TrainVal, DifferentTokenizersAreRefusedNamingBothFilesAndWhatDiffers) {
  TwoDirs models("model bytes", "other bytes");
  expect_data_error([&] { open_train_val(models.a + "/c_train_*.bin", models.b + "/c_val_*.bin", 4096); },
                    {models.a + "/tokenizer.json and " + models.b + "/tokenizer.json", "train (", "tokenized differently",
                     "SentencePiece models " + models.a + "/tokenizer.model and " + models.b + "/tokenizer.model differ"});
  TwoDirs eots("model bytes", "model bytes", 2);
  expect_data_error([&] { open_train_val(eots.a + "/c_train_*.bin", eots.b + "/c_val_*.bin", 4096); }, {"(eot 1 vs 2)"});
  // One pattern over both directories: the same check.
  eots.root.write_shard("a/c_val_000002.bin", {{1}});
  expect_data_error([&] { ShardSet::open(eots.root.file("*/c_val_*.bin"), 4096); },
                    {eots.a + "/tokenizer.json and " + eots.b + "/tokenizer.json", "the shards of", "(eot 1 vs 2)"});
  TwoDirs missing("model bytes", "model bytes");
  std::remove((missing.b + "/tokenizer.model").c_str());
  expect_data_error([&] { open_train_val(missing.a + "/c_train_*.bin", missing.b + "/c_val_*.bin", 4096); },
                    {missing.b + "/tokenizer.model: does not exist (the SentencePiece model that " + missing.b + "/tokenizer.json names)"});
}

TEST(TrainVal, ADirectoryWithoutTokenizerJsonSharesTheOthersWithANote) {
  TwoDirs dirs("model bytes", "model bytes");
  std::remove((dirs.b + "/tokenizer.json").c_str());
  const auto data = open_train_val(dirs.a + "/c_train_*.bin", dirs.b + "/c_val_*.bin", 4096);
  ASSERT_EQ(data.notes.size(), 1u);
  EXPECT_EQ(data.notes[0], dirs.b + ": no tokenizer.json; taken to share " + dirs.a +
                               "/tokenizer.json's tokenizer (sentencepiece, vocab_size 4096), each token checked to be "
                               "below model.vocab_size = 4096");
}

TEST(TrainVal, OpensBothAndRefusesLeaks) {
  TempDir dir;
  dir.write_shard("c_val_000000.bin", {{1, 2, 3}});
  dir.write_shard("c_train_000001.bin", {{4, 5, 6}});
  const auto data = open_train_val(dir.file("c_train_*.bin"), dir.file("c_val_*.bin"), kGpt2VocabSize);
  EXPECT_EQ(data.train->num_tokens(), 3);
  EXPECT_EQ(data.val->num_tokens(), 3);
  ASSERT_EQ(data.notes.size(), 1u);  // no tokenizer.json in their one directory, for the log
  expect_data_error([&] { open_train_val(dir.file("c_*.bin"), dir.file("c_val_*.bin"), kGpt2VocabSize); },
                    {dir.file("c_val_000000.bin"), "\"val\""});
  expect_data_error(
      [&] { open_train_val(dir.file("c_train_*.bin"), dir.file("c_*.bin"), kGpt2VocabSize); },
      {dir.file("c_train_000001.bin"), "both"});
}

}  // namespace
}  // namespace attnlab
