#include "attnlab/shards.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "common/input_file.h"

namespace attnlab {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "shards are little-endian and mapped in place; a big-endian host would need swaps");

constexpr int32_t kLlama3Magic = 20240801;  // llm.c's uint32 format: named, since it is a likely mix-up

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw DataError(fmt::format("{}: {}", path, what));
}

int32_t header_field(const void* map, int index) {
  int32_t value;  // memcpy: the mapping carries no alignment promise to the compiler
  std::memcpy(&value, static_cast<const char*>(map) + 4 * index, sizeof(value));
  return value;
}

void check_header(const std::string& path, const void* map, int64_t file_bytes) {
  const int32_t magic = header_field(map, 0);
  if (magic == kLlama3Magic) {
    fail(path, fmt::format("magic {} is llm.c's uint32 (Llama-3) format; only the uint16 format "
                           "(magic {}) is supported", magic, kShardMagic));
  }
  if (magic != kShardMagic) {
    fail(path, fmt::format("wrong magic {} (expected {}); not an llm.c token shard", magic, kShardMagic));
  }
  const int32_t version = header_field(map, 1);
  if (version != kShardVersion) {
    fail(path, fmt::format("unsupported version {} (expected {})", version, kShardVersion));
  }
  const int64_t n = header_field(map, 2);
  if (n < 0) fail(path, fmt::format("negative token count {} in the header", n));
  const int64_t expected = kShardHeaderBytes + 2 * n;
  if (file_bytes < expected) {
    fail(path, fmt::format("truncated: the header says {} tokens ({} bytes) but the file has {} bytes",
                           n, expected, file_bytes));
  }
  if (file_bytes > expected) {
    fail(path, fmt::format("{} trailing bytes: the header says {} tokens ({} bytes) but the file has {}",
                           file_bytes - expected, n, expected, file_bytes));
  }
}

// One pass for the maximum (vectorises), a second only to locate the first bad token.
void check_tokens(const std::string& path, const uint16_t* tokens, int64_t n, int64_t vocab_size) {
  uint16_t max_token = 0;
  for (int64_t i = 0; i < n; ++i) max_token = std::max(max_token, tokens[i]);
  if (n == 0 || max_token < vocab_size) return;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] >= vocab_size) {
      fail(path, fmt::format("token {} at index {} >= vocab_size {}", tokens[i], i, vocab_size));
    }
  }
}

std::vector<std::string> expand_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  globfree(&g);
  if (rc == GLOB_NOMATCH || paths.empty()) {
    throw DataError(fmt::format("{}: the pattern matches no shard file", pattern));
  }
  if (rc != 0) throw DataError(fmt::format("{}: glob failed (a directory could not be read)", pattern));
  std::sort(paths.begin(), paths.end());  // glob sorts by locale; byte order is the same everywhere
  return paths;
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string base_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The tokenizer.json of each directory of `paths`, in path order.
std::vector<TokenizerInfo> dir_tokenizers_of(const std::vector<std::string>& paths) {
  std::set<std::string> dirs;
  for (const auto& p : paths) dirs.insert(dir_of(p));
  std::vector<TokenizerInfo> infos;
  for (const auto& dir : dirs) infos.push_back(read_tokenizer_info(dir));
  return infos;
}

// One tokenizer for shards from several directories, or the token ids would mean different things:
// every tokenizer.json present must agree; the result is the first, or unknown when there is none.
// `what` names the shards in the error.
TokenizerInfo combine(const std::vector<TokenizerInfo>& infos, const std::string& what) {
  const TokenizerInfo* known = nullptr;
  for (const auto& info : infos) {
    if (info.assumed) continue;
    if (known == nullptr) {
      known = &info;
      continue;
    }
    if (const auto diff = tokenizer_difference(*known, info); !diff.empty()) {
      throw DataError(fmt::format("{} and {}: {} were tokenized differently ({})", known->file, info.file, what, diff));
    }
  }
  if (known != nullptr) return *known;
  return infos.empty() ? TokenizerInfo{} : infos.front();
}

// What was assumed for each directory without tokenizer.json (item for the trainer's log).
std::vector<std::string> notes_for(const std::vector<TokenizerInfo>& infos, const TokenizerInfo& combined,
                                   int64_t model_vocab_size) {
  std::vector<std::string> notes;
  for (const auto& info : infos) {
    if (!info.assumed) continue;
    notes.push_back(combined.assumed
                        ? fmt::format("{}: no tokenizer.json; the token ids are used as they are, each checked to "
                                      "be below model.vocab_size = {} (the tokenizer is unknown; docs/data.md)",
                                      info.dir, model_vocab_size)
                        : fmt::format("{}: no tokenizer.json; taken to share {}'s tokenizer ({}, vocab_size {}), "
                                      "each token checked to be below model.vocab_size = {}",
                                      info.dir, combined.file, combined.tokenizer, combined.vocab_size,
                                      model_vocab_size));
  }
  return notes;
}

}  // namespace

Shard Shard::open(const std::string& path, int64_t vocab_size) {
  if (vocab_size <= 0) fail(path, fmt::format("vocab_size {} must be positive", vocab_size));
  // A plain open of a FIFO would block until something writes to it: say what the path is instead
  // (and open without blocking, in case it changes in between; fstat below checks again).
  if (const auto problem = detail::regular_file_problem(path); !problem.empty()) fail(path, problem);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const int64_t bytes = st.st_size;
  if (bytes < kShardHeaderBytes) {
    ::close(fd);
    fail(path, fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes, kShardHeaderBytes));
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) fail(path, fmt::format("mmap failed: {}", std::strerror(errno)));

  Shard shard;
  shard.path_ = path;
  shard.map_ = map;
  shard.map_bytes_ = bytes;
  check_header(path, map, bytes);  // on throw, ~Shard unmaps
  shard.num_tokens_ = header_field(map, 2);
  shard.tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map) + kShardHeaderBytes);
  check_tokens(path, shard.tokens_, shard.num_tokens_, vocab_size);
  ::madvise(map, static_cast<size_t>(bytes), MADV_RANDOM);  // batches read short random windows
  return shard;
}

Shard::Shard(Shard&& other) noexcept { *this = std::move(other); }

Shard& Shard::operator=(Shard&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    num_tokens_ = std::exchange(other.num_tokens_, 0);
  }
  return *this;
}

Shard::~Shard() { unmap(); }

void Shard::unmap() noexcept {
  if (map_ != nullptr) ::munmap(map_, static_cast<size_t>(map_bytes_));
  map_ = nullptr;
}

TokenizerInfo tokenizer_for_pattern(const std::string& pattern) {
  return combine(dir_tokenizers_of(expand_glob(pattern)), "the shards of " + pattern);
}

ShardSet ShardSet::open(const std::string& pattern, int64_t model_vocab_size) {
  const auto paths = expand_glob(pattern);
  ShardSet set;
  set.pattern_ = pattern;
  set.dir_tokenizers_ = dir_tokenizers_of(paths);
  set.tokenizer_ = combine(set.dir_tokenizers_, "the shards of " + pattern);
  set.notes_ = notes_for(set.dir_tokenizers_, set.tokenizer_, model_vocab_size);
  check_vocab(set.tokenizer_, model_vocab_size);
  for (const auto& path : paths) {
    set.shards_.push_back(Shard::open(path, model_vocab_size));
    set.starts_.push_back(set.total_);
    set.total_ += set.shards_.back().size();
  }
  return set;
}

void ShardSet::read(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > total_) {
    throw std::out_of_range(fmt::format("{}: tokens [{}, {}) outside [0, {})", pattern_, start,
                                        start + count, total_));
  }
  // The last shard whose first token is <= start (empty shards are skipped by the loop).
  size_t s = std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin() - 1;
  int64_t local = start - starts_[s];
  while (count > 0) {
    const Shard& shard = shards_[s];
    const int64_t take = std::min(count, shard.size() - local);
    std::copy(shard.tokens() + local, shard.tokens() + local + take, out);
    out += take;
    count -= take;
    local = 0;
    ++s;
  }
}

TrainValData open_train_val(const std::string& train_pattern, const std::string& val_pattern,
                            int64_t model_vocab_size) {
  TrainValData data;
  auto train = std::make_shared<ShardSet>(ShardSet::open(train_pattern, model_vocab_size));
  auto val = std::make_shared<ShardSet>(ShardSet::open(val_pattern, model_vocab_size));
  std::set<std::string> val_paths;
  for (const auto& shard : val->shards()) val_paths.insert(shard.path());
  for (const auto& shard : train->shards()) {
    if (base_of(shard.path()).find("val") != std::string::npos) {
      fail(shard.path(), fmt::format("matched by the train pattern {} but its name contains \"val\", "
                                     "which marks validation shards (SPEC section 6)", train_pattern));
    }
    if (val_paths.count(shard.path()) != 0) {
      fail(shard.path(), fmt::format("matched by both the train pattern {} and the val pattern {}",
                                     train_pattern, val_pattern));
    }
  }
  // Train and val may lie in different directories; each directory is compared once.
  std::vector<TokenizerInfo> infos;
  std::set<std::string> dirs;
  for (const auto* set : {train.get(), val.get()})
    for (const auto& info : set->dir_tokenizers())
      if (dirs.insert(info.dir).second) infos.push_back(info);
  const auto both = combine(infos, fmt::format("train ({}) and val ({})", train_pattern, val_pattern));
  data.notes = notes_for(infos, both, model_vocab_size);
  data.tokenizer = both;
  data.train = std::move(train);
  data.val = std::move(val);
  return data;
}

}  // namespace attnlab
