/// @file version.hpp
/// @brief gpuxfer's version, kept equal to the CMake project version.
#pragma once

#define GPUXFER_VERSION_MAJOR 0
#define GPUXFER_VERSION_MINOR 1
#define GPUXFER_VERSION_PATCH 0

namespace gpuxfer {

/// "0.1.0"
inline constexpr const char* version_string = "0.1.0";

}  // namespace gpuxfer
