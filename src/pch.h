// Precompiled header for every C++ target that links LibTorch. Public headers stay light
// (<ATen/core/Tensor.h>, <torch/nn/module.h>); the heavy umbrella is parsed once here.
#pragma once
#include <torch/torch.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
