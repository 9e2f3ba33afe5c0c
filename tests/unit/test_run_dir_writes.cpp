// Every write of metrics.jsonl is checked (run_metrics.h): a failed append is cut off, retried with
// a doubling wait, and after the last try throws FileError naming the file and the error; the lines
// written before stay whole, and a transient failure loses nothing. The failures are real: a file
// size limit (EFBIG, as a full disk's ENOSPC) in a forked child, and a directory in the file's place.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "attnlab/file_error.h"
#include "attnlab/run_metrics.h"
#include "unit/forked.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::in_child;
using testing::TempDir;

StepRecord step_record(int64_t step) {
  StepRecord r;
  r.step = step, r.train_loss = 4.0;
  return r;
}

// Every line of the file, parsed; a line that does not parse fails the test.
std::vector<int64_t> logged_steps(const fs::path& file) {
  std::vector<int64_t> steps;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "a broken line: '" << line << "'";
    if (!j.is_discarded()) steps.push_back(j.at("step").get<int64_t>());
  }
  return steps;
}

TEST(MetricsWrites, AnAppendThatKeepsFailingStopsNamingTheFileAndTheErrorAndKeepsEveryWholeLine) {
  TempDir tmp;
  const fs::path file = tmp.file("metrics.jsonl");
  const size_t line_bytes = to_json(step_record(1)).dump().size() + 1;
  const size_t limit = 7 * line_bytes + 5;  // room for 7 lines and a piece of the 8th
  const auto said = nlohmann::json::parse(in_child([&] {
    std::vector<int64_t> waits_ms;
    MetricsLog log(file, -1, AppendRetry{3, 1ms, [&](std::chrono::milliseconds ms) { waits_ms.push_back(ms.count()); }});
    testing::limit_file_size(limit);
    for (int64_t step = 1; step <= 100; ++step) {
      try {
        log.append(step_record(step));
      } catch (const FileError& e) {
        return nlohmann::json{{"step", step}, {"waits", waits_ms}, {"what", e.what()}}.dump();
      }
    }
    return nlohmann::json{{"step", 0}}.dump();
  }), nullptr, false);
  ASSERT_FALSE(said.is_discarded());
  EXPECT_EQ(said["step"], 8) << said;
  EXPECT_EQ(said["waits"], nlohmann::json::array({1, 2})) << "two waits between three tries, doubling";
  const std::string what = said.value("what", "");
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_NE(what.find("File too large"), std::string::npos) << what;  // strerror(EFBIG)
  EXPECT_NE(what.find("step 8 (3 tries)"), std::string::npos) << what;
  EXPECT_EQ(logged_steps(file), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(fs::file_size(file), 7 * line_bytes) << "the failed tries left a piece of a line";
}

TEST(MetricsWrites, ATransientFailureIsRetriedAndLosesNothing) {
  TempDir tmp;
  const fs::path file = tmp.file("metrics.jsonl");
  const auto said = in_child([&] {
    std::vector<int64_t> waits_ms;
    // Space comes back during the second wait.
    MetricsLog log(file, -1, AppendRetry{4, 1ms, [&](std::chrono::milliseconds ms) {
                     waits_ms.push_back(ms.count());
                     if (waits_ms.size() == 2) testing::lift_file_size_limit();
                   }});
    log.append(step_record(1));
    testing::limit_file_size(fs::file_size(file) + 10);
    log.append(step_record(2));
    log.append(step_record(3));
    log.sync();
    return nlohmann::json(waits_ms).dump();
  });
  EXPECT_EQ(said, "[1,2]");
  EXPECT_EQ(logged_steps(file), (std::vector<int64_t>{1, 2, 3}));
}

TEST(MetricsWrites, ADirectoryInTheFilesPlaceIsRefusedNamingTheError) {
  TempDir tmp;
  const fs::path file = tmp.file("metrics.jsonl");
  fs::create_directories(file);
  try {
    MetricsLog log(file, -1);
    ADD_FAILURE() << "opened a directory for appending";
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), file);
    EXPECT_NE(e.problem().find("is a directory, not a regular file"), std::string::npos) << e.what();
  }
}

TEST(MetricsWrites, AResumeKeepsTheLinesUpToItsStepAndAppendsAfterThem) {
  TempDir tmp;
  const fs::path file = tmp.file("metrics.jsonl");
  {
    MetricsLog log(file, -1);
    for (int64_t step = 1; step <= 5; ++step) log.append(step_record(step));
  }
  std::ofstream(file, std::ios::app) << "{\"step\": 6, \"tra";  // a crash mid-line
  MetricsLog log(file, 4);
  log.append(step_record(5));
  EXPECT_EQ(logged_steps(file), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace attnlab
