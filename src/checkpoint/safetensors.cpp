#include "attnlab/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "common/durable_file.h"
#include "checkpoint/file_ops.h"
#include "common/input_file.h"
#include "common/json_read.h"

// The format is little-endian; the raw tensor bytes are copied as they lie in memory.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "attnlab's safetensors I/O assumes a little-endian host"
#endif

namespace attnlab {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

struct DType {
  const char* name;
  at::ScalarType type;
};

const std::vector<DType>& dtypes() {
  static const std::vector<DType> table = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16},
      {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
      {"U8", at::kByte},    {"BOOL", at::kBool}};
  return table;
}

/// One tensor's entry in the header, validated.
struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data section
};

// ---- writing ------------------------------------------------------------------------------

json header_for(const fs::path& file, const std::vector<std::pair<std::string, at::Tensor>>& cpu,
                const SafetensorsMetadata& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : cpu) {
    const uint64_t bytes = t.numel() * t.element_size();
    header[name] = {{"dtype", safetensors_dtype(t.scalar_type(), file)},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  return header;
}

std::string padded_dump(const fs::path& file, const json& header) {
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // e.g. a tensor name that is not UTF-8
    throw CheckpointError(file, std::string("cannot encode the header: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  return text;
}

// ---- reading ------------------------------------------------------------------------------

void read_exact(std::ifstream& in, char* out, uint64_t bytes, const fs::path& file,
                const char* what) {
  in.read(out, static_cast<std::streamsize>(bytes));
  if (static_cast<uint64_t>(in.gcount()) != bytes) {
    throw CheckpointError(file, std::string("read failed (") + what + ")");
  }
}

uint64_t read_header_length(std::ifstream& in, uint64_t file_bytes, const fs::path& file) {
  if (file_bytes < 8) {
    throw CheckpointError(file, "file is " + std::to_string(file_bytes) +
                                    " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  read_exact(in, reinterpret_cast<char*>(&n), 8, file, "header length");
  if (n > file_bytes - 8) {
    throw CheckpointError(file, "header length " + std::to_string(n) + " exceeds the file (" +
                                    std::to_string(file_bytes) + " bytes): truncated or not safetensors");
  }
  if (n > kMaxHeaderBytes) {
    throw CheckpointError(file, "header length " + std::to_string(n) + " is over the 100 MB limit");
  }
  return n;
}

json parse_header(std::ifstream& in, uint64_t n, const fs::path& file) {
  std::string text(n, '\0');
  read_exact(in, text.data(), n, file, "header");
  json header;
  try {
    header = detail::parse_json(text);  // nesting and numbers beyond a double checked too
  } catch (const detail::JsonError& e) {
    throw CheckpointError(file, std::string("header: ") + e.what());
  }
  if (!header.is_object()) throw CheckpointError(file, "header is not a JSON object");
  return header;
}

at::ScalarType parse_dtype(const json& value, const std::string& name, const fs::path& file) {
  if (value.is_string()) {
    for (const auto& d : dtypes()) {
      if (value.get<std::string>() == d.name) return d.type;
    }
  }
  throw CheckpointError(file, "tensor '" + name + "' has unknown dtype " + value.dump());
}

uint64_t parse_count(const json& value, const std::string& name, const fs::path& file,
                     const char* field) {
  if (!value.is_number_unsigned()) {
    throw CheckpointError(file, "tensor '" + name + "': " + field + " holds " + value.dump() +
                                    ", not a non-negative integer");
  }
  return value.get<uint64_t>();
}

uint64_t byte_size(const Entry& e, const fs::path& file) {
  uint64_t bytes = c10::elementSize(e.type);
  for (int64_t dim : e.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      throw CheckpointError(file, "tensor '" + e.name + "': shape overflows 64 bits");
    }
  }
  return bytes;
}

Entry parse_entry(const std::string& name, const json& value, const fs::path& file) {
  if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
      !value.contains("data_offsets")) {
    throw CheckpointError(file, "tensor '" + name + "' lacks dtype, shape or data_offsets");
  }
  Entry e;
  e.name = name;
  e.type = parse_dtype(value["dtype"], name, file);
  const json& shape = value["shape"];
  const json& offsets = value["data_offsets"];
  if (!shape.is_array()) throw CheckpointError(file, "tensor '" + name + "': shape is not a list");
  for (const auto& dim : shape) {
    const uint64_t d = parse_count(dim, name, file, "shape");
    if (d > static_cast<uint64_t>(INT64_MAX)) throw CheckpointError(file, "tensor '" + name + "': dimension too large");
    e.shape.push_back(static_cast<int64_t>(d));
  }
  if (!offsets.is_array() || offsets.size() != 2) {
    throw CheckpointError(file, "tensor '" + name + "': data_offsets is not [begin, end]");
  }
  e.begin = parse_count(offsets[0], name, file, "data_offsets");
  e.end = parse_count(offsets[1], name, file, "data_offsets");
  if (e.end < e.begin) throw CheckpointError(file, "tensor '" + name + "': data_offsets end before begin");
  const uint64_t expected = byte_size(e, file);
  if (e.end - e.begin != expected) {
    throw CheckpointError(file, "tensor '" + name + "' spans " + std::to_string(e.end - e.begin) +
                                    " bytes but its dtype and shape need " + std::to_string(expected));
  }
  return e;
}

SafetensorsMetadata parse_metadata(const json& value, const fs::path& file) {
  if (!value.is_object()) throw CheckpointError(file, "__metadata__ is not a JSON object");
  SafetensorsMetadata metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) throw CheckpointError(file, "__metadata__['" + key + "'] is not a string");
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

/// The entries, sorted by offset, must cover [0, data_bytes) exactly once.
void check_tiling(std::vector<Entry>& entries, uint64_t data_bytes, const fs::path& file) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const auto& e : entries) {
    if (e.begin < covered) throw CheckpointError(file, "tensor '" + e.name + "' overlaps the previous tensor's bytes");
    if (e.begin > covered) throw CheckpointError(file, "gap in the data section before tensor '" + e.name + "'");
    covered = e.end;
  }
  if (covered > data_bytes) {
    throw CheckpointError(file, "tensors need " + std::to_string(covered) + " data bytes but the file holds " +
                                    std::to_string(data_bytes) + ": truncated");
  }
  if (covered < data_bytes) {
    throw CheckpointError(file, std::to_string(data_bytes - covered) + " bytes after the last tensor");
  }
}

at::Tensor read_tensor(std::ifstream& in, uint64_t data_start, const Entry& e, const fs::path& file) {
  at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
  in.seekg(static_cast<std::streamoff>(data_start + e.begin));
  read_exact(in, static_cast<char*>(t.data_ptr()), e.end - e.begin, file, e.name.c_str());
  if (e.type == at::kBool) {  // any byte but 0/1 would be undefined behaviour as a C++ bool
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    if (std::any_of(bytes, bytes + t.numel(), [](uint8_t b) { return b > 1; })) {
      throw CheckpointError(file, "BOOL tensor '" + e.name + "' holds a byte other than 0 or 1");
    }
  }
  return t;
}

}  // namespace

std::string safetensors_dtype(at::ScalarType type, const fs::path& file) {
  for (const auto& d : dtypes()) {
    if (d.type == type) return d.name;
  }
  throw CheckpointError(file, std::string("dtype ") + c10::toString(type) + " has no safetensors name");
}

void write_safetensors(const fs::path& file, const TensorMap& tensors,
                       const SafetensorsMetadata& metadata) {
  std::vector<std::pair<std::string, at::Tensor>> cpu;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == kMetadataKey) throw CheckpointError(file, "bad tensor name '" + name + "'");
    if (!t.defined()) throw CheckpointError(file, "tensor '" + name + "' is undefined");
    cpu.emplace_back(name, t.detach().to(at::kCPU).contiguous());
  }
  const std::string header = padded_dump(file, header_for(file, cpu, metadata));
  const uint64_t n = header.size();
  detail::DurableFile out(file);
  out.write(&n, 8);
  out.write(header.data(), header.size());
  for (const auto& [name, t] : cpu) out.write(t.data_ptr(), t.numel() * t.element_size());
  out.commit();
}

namespace {

// The file's validated header: its length, entries (tiling checked) and metadata; no tensor read.
struct ParsedHeader {
  uint64_t length = 0;
  std::vector<Entry> entries;
  SafetensorsMetadata metadata;
};

ParsedHeader read_header(std::ifstream& in, const fs::path& file) {
  if (const auto problem = detail::regular_file_problem(file); !problem.empty()) throw CheckpointError(file, problem);
  const auto size = detail::file_bytes(file);
  if (!size) throw CheckpointError(file, std::string("cannot read: ") + std::strerror(errno));
  in.open(file, std::ios::binary);
  if (!in) throw CheckpointError(file, "cannot open");
  ParsedHeader out;
  out.length = read_header_length(in, *size, file);
  const json header = parse_header(in, out.length, file);
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      out.metadata = parse_metadata(value, file);
    } else {
      out.entries.push_back(parse_entry(name, value, file));
    }
  }
  check_tiling(out.entries, *size - 8 - out.length, file);
  return out;
}

}  // namespace

SafetensorsHeader read_safetensors_header(const fs::path& file) {
  std::ifstream in;
  SafetensorsHeader out;
  for (auto& e : read_header(in, file).entries) out[e.name] = {e.type, std::move(e.shape)};
  return out;
}

SafetensorsContents read_safetensors(const fs::path& file) {
  std::ifstream in;
  ParsedHeader header = read_header(in, file);
  SafetensorsContents contents;
  contents.metadata = std::move(header.metadata);
  for (const auto& e : header.entries) contents.tensors[e.name] = read_tensor(in, 8 + header.length, e, file);
  return contents;
}

}  // namespace attnlab
