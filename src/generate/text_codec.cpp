// The two calls of tools/text_codec.py; files in a private temporary directory carry the ids and the
// text both ways (no shell, no quoting of the prompt).
#include "attnlab/text_codec.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "common/json_read.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// A directory of our own under $TMPDIR (or /tmp), removed when the call ends.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/attnlab-codec-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("text codec: cannot create a directory in " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("text codec: no output in " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// text_codec.py COMMAND --tokenizer KIND [--model FILE] [--eot ID] EXTRA..., once the Python and the
// script are found.
std::vector<std::string> codec_args(const TextCodec& codec, const std::string& command,
                                    const std::vector<std::string>& extra) {
  const std::string fix = " (scripts/setup.sh makes the venv; `attnlab sample --python` chooses another)";
  if (codec.python.empty() || !fs::exists(codec.python))
    throw std::runtime_error("text codec: no Python at '" + codec.python.string() + "'" + fix);
  if (!fs::exists(codec.script)) throw std::runtime_error("text codec: script '" + codec.script.string() + "' not found");
  std::vector<std::string> args = {codec.script.string(), command, "--tokenizer", codec.tokenizer.tokenizer};
  if (!codec.tokenizer.model.empty()) args.insert(args.end(), {"--model", codec.tokenizer.model});
  if (codec.tokenizer.eot >= 0) args.insert(args.end(), {"--eot", std::to_string(codec.tokenizer.eot)});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void run_codec(const TextCodec& codec, const std::string& command, const std::vector<std::string>& extra) {
  if (const int code = process::wait_exit(process::spawn(codec.python, codec_args(codec, command, extra))))
    throw std::runtime_error("text codec: " + codec.script.string() + " " + command + " exited with " + std::to_string(code));
}

}  // namespace

std::vector<int64_t> encode_text(const TextCodec& codec, const std::string& text) {
  TempDir tmp;
  run_codec(codec, "encode", {"--text=" + text, "--out", (tmp.path() / "ids.json").string()});
  const auto j = detail::read_json_file(tmp.path() / "ids.json");
  return j.get<std::vector<int64_t>>();
}

std::string decode_ids(const TextCodec& codec, const std::vector<int64_t>& ids) {
  TempDir tmp;
  std::ofstream(tmp.path() / "ids.json") << nlohmann::json(ids).dump();
  run_codec(codec, "decode", {"--ids", (tmp.path() / "ids.json").string(), "--out", (tmp.path() / "text.txt").string()});
  return read_file(tmp.path() / "text.txt");
}

DecodeStream::DecodeStream(const TextCodec& codec) : script_(codec.script.string()) {
  const auto child = process::spawn_fed(codec.python, codec_args(codec, "stream", {}));
  pid_ = child.pid, input_ = child.input;
}

DecodeStream::~DecodeStream() {
  if (pid_ < 0) return;
  ::close(input_);
  process::wait_exit(pid_);
}

void DecodeStream::add(int64_t id) {
  if (!process::feed({pid_, input_}, std::to_string(id) + "\n"))
    throw std::runtime_error("text codec: " + script_ + " stream stopped reading (its output closed, or it failed)");
}

void DecodeStream::finish() {
  ::close(input_);
  const int code = process::wait_exit(pid_);
  pid_ = -1;
  if (code != 0) throw std::runtime_error("text codec: " + script_ + " stream exited with " + std::to_string(code));
}

}  // namespace attnlab
