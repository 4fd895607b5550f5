#include "core/migration/sse_events.hpp"

namespace kvr {

void sse_reader::reset() {
  line_.clear();
  data_.clear();
  has_data_ = false;
  overflowed_ = false;
}

void sse_reader::append_partial(std::string_view bytes) {
  if (line_.size() + data_.size() + bytes.size() > max_event_bytes_) {
    overflowed_ = true;
    line_.clear();
    data_.clear();
    return;
  }
  line_.append(bytes);
}

bool sse_reader::end_line() {
  std::string_view line(line_);
  if (line.ends_with('\r')) line.remove_suffix(1);
  if (line.empty()) {  // a blank line dispatches the event, if it had data
    line_.clear();
    return has_data_;
  }
  if (line.starts_with("data")) {
    std::string_view value = line.substr(4);
    if (value.empty() || value.front() == ':') {
      if (!value.empty()) value.remove_prefix(1);
      if (value.starts_with(' ')) value.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();  // comments (":..."), other fields, and "dataX" lines are skipped
  return false;
}

}  // namespace kvr
