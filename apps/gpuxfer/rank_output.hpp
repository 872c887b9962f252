/// @file rank_output.hpp
/// @brief `gpuxfer launch`'s output: each rank's stdout and stderr, line by line, prefixed "[rank] ".
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace gpuxfer::cli {

/// Cuts one stream of one rank into lines and writes each whole line, prefixed, to @p out at once, so
/// lines of different ranks never interleave within a line.
class RankOutput {
 public:
  RankOutput(int rank, std::FILE* out);

  /// Writes every line that @p bytes completes; keeps the rest for the next call.
  void feed(std::string_view bytes);
  /// Writes what is left (a last line without its newline), with a newline.
  void finish();
  /// The reader of @p out went away (a write failed with EPIPE): nothing is written any more.
  [[nodiscard]] bool closed() const { return closed_; }

 private:
  void write_line(std::string_view line);

  std::string prefix_;
  std::FILE* out_;
  std::string partial_;
  bool closed_ = false;
};

}  // namespace gpuxfer::cli
