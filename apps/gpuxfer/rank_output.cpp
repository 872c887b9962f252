#include "rank_output.hpp"

#include <cerrno>

namespace gpuxfer::cli {

// A line longer than this is cut into pieces, each prefixed: a rank that never writes a newline must not
// grow the launcher's memory without bound.
constexpr std::size_t max_line = 64 * 1024;

// Appended piece by piece: "[" + std::to_string(rank) trips g++ 12's -Wrestrict false positive at -O3.
RankOutput::RankOutput(int rank, std::FILE* out) : prefix_("["), out_(out) {
  prefix_ += std::to_string(rank);
  prefix_ += "] ";
}

void RankOutput::feed(std::string_view bytes) {
  partial_.append(bytes);
  std::size_t start = 0;
  while (true) {
    const std::size_t end = partial_.find('\n', start);
    if (end == std::string::npos) break;
    write_line(std::string_view(partial_).substr(start, end - start));
    start = end + 1;
  }
  partial_.erase(0, start);
  while (partial_.size() >= max_line) {
    write_line(std::string_view(partial_).substr(0, max_line));
    partial_.erase(0, max_line);
  }
}

void RankOutput::finish() {
  if (!partial_.empty()) write_line(partial_);
  partial_.clear();
}

void RankOutput::write_line(std::string_view line) {
  if (closed_) return;
  const std::string text = prefix_ + std::string(line) + "\n";
  std::fwrite(text.data(), 1, text.size(), out_);
  if (std::fflush(out_) != 0 && errno == EPIPE) closed_ = true;
}

}  // namespace gpuxfer::cli
