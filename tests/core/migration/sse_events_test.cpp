#include "core/migration/sse_events.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kvr {
namespace {

std::vector<std::string> read_in_pieces(std::string_view stream, std::size_t piece, sse_reader& reader) {
  std::vector<std::string> events;
  for (std::size_t at = 0; at < stream.size(); at += piece)
    reader.feed(stream.substr(at, piece), [&](std::string_view data) { events.emplace_back(data); });
  return events;
}

TEST(sse_reader, gives_each_events_data_whatever_the_byte_boundaries) {
  const std::string stream = "data: {\"a\":1}\n\n: a comment\n\ndata:{\"b\":2}\r\n\r\nevent: x\ndata: [DONE]\n\n";
  for (std::size_t piece = 1; piece <= stream.size(); ++piece) {
    sse_reader reader;
    EXPECT_EQ(read_in_pieces(stream, piece, reader), (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"}))
        << "pieces of " << piece << " bytes";
  }
}

TEST(sse_reader, joins_an_events_data_lines_and_skips_events_without_data) {
  sse_reader reader;
  EXPECT_EQ(read_in_pieces("data: one\ndata:  two\ndata\n\nid: 7\n\ndatum: no\n\n", 1000, reader),
            (std::vector<std::string>{"one\n two\n"}));
}

TEST(sse_reader, an_event_past_the_bound_stops_the_reader_instead_of_growing) {
  sse_reader reader(64);
  const auto events = read_in_pieces("data: " + std::string(100, 'x') + "\n\ndata: after\n\n", 7, reader);
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(reader.overflowed());
  reader.reset();
  EXPECT_EQ(read_in_pieces("data: again\n\n", 3, reader), (std::vector<std::string>{"again"}));
}

}  // namespace
}  // namespace kvr
