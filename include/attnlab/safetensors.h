// The safetensors file format (https://huggingface.co/docs/safetensors), written and read without
// any dependency beyond nlohmann_json, so weights leave attnlab readable by Python's `safetensors`
// package or plain numpy (docs/checkpoints.md shows both):
//
//   bytes [0, 8)        N, the header length, uint64 little-endian
//   bytes [8, 8 + N)    JSON header: { "<name>": {"dtype": "F32", "shape": [..],
//                                                  "data_offsets": [begin, end]}, ...,
//                                      "__metadata__": {"<key>": "<string>", ...} }   (optional)
//                       padded with spaces so the data starts 8-byte aligned
//   bytes [8 + N, end)  the tensors' raw bytes, row-major, little-endian; data_offsets are relative
//                       to 8 + N and tile the data section exactly (no gaps, no overlaps).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attnlab/checkpoint_error.h"

namespace attnlab {

/// Tensors by name (sorted, as the JSON header lists them).
using TensorMap = std::map<std::string, at::Tensor>;
/// The header's "__metadata__": free-form string to string.
using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  TensorMap tensors;  ///< CPU, contiguous, with the file's dtype and shape (shape [] = scalar)
  SafetensorsMetadata metadata;
};

/// The format's name of a dtype: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL.
/// Throws CheckpointError (naming `file`) for any other scalar type.
std::string safetensors_dtype(at::ScalarType type, const std::filesystem::path& file);

/// Writes `tensors` (any device, any strides; stored as contiguous row-major little-endian bytes
/// of their own dtype, bit for bit) and `metadata` to `file`, replacing it, and fsyncs it before
/// returning. Names must be non-empty and not "__metadata__".
/// Throws CheckpointError naming `file` on an unsupported dtype, a bad name or an I/O failure.
void write_safetensors(const std::filesystem::path& file, const TensorMap& tensors,
                       const SafetensorsMetadata& metadata = {});

/// One tensor as a safetensors header declares it.
struct SafetensorsEntry {
  at::ScalarType dtype;
  std::vector<int64_t> shape;
};
using SafetensorsHeader = std::map<std::string, SafetensorsEntry>;

/// The tensors `file` declares, validated as read_safetensors() validates them (the data section's
/// tiling included) without reading any tensor's bytes: what a reader checks before it allocates.
/// Throws CheckpointError naming `file` and the first problem found.
SafetensorsHeader read_safetensors_header(const std::filesystem::path& file);

/// Reads a whole safetensors file onto the CPU. Validates, before trusting any byte: the header
/// length fits in the file, the header is a JSON object, every entry has a known dtype, a
/// non-negative shape and data_offsets whose size equals the shape's, the offsets tile the data
/// section exactly, metadata values are strings, BOOL bytes are 0 or 1.
/// Throws CheckpointError naming `file` and the first problem found.
SafetensorsContents read_safetensors(const std::filesystem::path& file);

}  // namespace attnlab
