// Aligned text tables for the `ringside` CLI: a header row and data rows, columns padded to the
// widest cell and separated by two spaces, no trailing blanks. Cells are sanitized so a label
// with a newline or tab cannot break the layout.
#ifndef RINGSIDE_DAEMON_CTL_TABLE_H_
#define RINGSIDE_DAEMON_CTL_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace ringside::daemon::ctl {

class Table {
 public:
  explicit Table(std::vector<std::string> header);

  // Missing cells are blank; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  size_t size() const { return rows_.size(); }

  // Writes the header and every row, each ending in '\n'. Columns listed in right_aligned (by
  // index) are padded on the left (numbers).
  void Render(std::ostream& out) const;
  void RightAlign(size_t column);

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// `s` with control characters replaced by spaces and, if longer than `max_width` (0: no limit)
// characters, cut with a trailing "…".
std::string Cell(const std::string& s, size_t max_width = 0);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_TABLE_H_
