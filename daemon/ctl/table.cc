#include "daemon/ctl/table.h"

#include <algorithm>

namespace ringside::daemon::ctl {
namespace {

// Display width: UTF-8 continuation bytes take no column.
size_t Width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++w;
  }
  return w;
}

}  // namespace

std::string Cell(const std::string& s, size_t max_width) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
  if (max_width > 1 && Width(out) > max_width) {
    // Cut at a character boundary, leaving room for the ellipsis.
    size_t cols = 0;
    size_t i = 0;
    for (; i < out.size(); ++i) {
      if ((static_cast<unsigned char>(out[i]) & 0xC0) != 0x80) {
        if (cols == max_width - 1) break;
        ++cols;
      }
    }
    out.resize(i);
    out += "…";
  }
  return out;
}

Table::Table(std::vector<std::string> header)
    : header_(std::move(header)), right_(header_.size(), false) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  for (std::string& c : cells) c = Cell(c);
  rows_.push_back(std::move(cells));
}

void Table::RightAlign(size_t column) {
  if (column < right_.size()) right_[column] = true;
}

void Table::Render(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  for (size_t c = 0; c < header_.size(); ++c) width[c] = Width(header_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], Width(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = width[c] - Width(cells[c]);
      if (c > 0) text += "  ";
      if (right_[c]) {
        text.append(pad, ' ');
        text += cells[c];
      } else {
        text += cells[c];
        if (c + 1 < cells.size()) text.append(pad, ' ');
      }
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(header_);
  for (const auto& row : rows_) line(row);
}

}  // namespace ringside::daemon::ctl
