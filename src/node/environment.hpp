// The process environment as an EnvLookup: what Options::from_env and the launch environment read.
#pragma once

#include <gpuxfer/options.hpp>

namespace gpuxfer::detail {

/// Looks names up with std::getenv; nullopt for a variable that is not set.
[[nodiscard]] EnvLookup process_env_lookup();

}  // namespace gpuxfer::detail
