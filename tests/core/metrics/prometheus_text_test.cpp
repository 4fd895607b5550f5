#include "core/metrics/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace kvr {
namespace {

struct seen {
  std::string name;
  std::map<std::string, std::string> labels;
  double value;
};

std::vector<seen> samples_of(std::string_view text, prometheus_parse_result* result = nullptr) {
  std::vector<seen> out;
  const auto r = parse_prometheus_text(text, [&](const prometheus_sample& s) {
    seen one{std::string(s.name), {}, s.value};
    for (const auto& l : s.labels) one.labels[std::string(l.name)] = l.value;
    out.push_back(std::move(one));
  });
  if (result) *result = r;
  return out;
}

TEST(prometheus_text, reads_samples_with_labels_and_skips_help_type_and_blank_lines) {
  prometheus_parse_result result;
  const auto samples = samples_of(
      "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
      "# TYPE vllm:num_requests_waiting gauge\n"
      "\n"
      "vllm:num_requests_waiting{model_name=\"qwen\",engine=\"0\"} 3.0\n"
      "vllm:num_requests_waiting{engine=\"1\",} 2\r\n"
      "  process_open_fds 17 1700000000000\n"
      "up{ } 1",
      &result);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(result.malformed, 0u);
  EXPECT_EQ(samples[0].name, "vllm:num_requests_waiting");
  EXPECT_EQ(samples[0].labels.at("model_name"), "qwen");
  EXPECT_EQ(samples[0].labels.at("engine"), "0");
  EXPECT_EQ(samples[0].value, 3.0);
  EXPECT_EQ(samples[1].labels.at("engine"), "1");  // a trailing comma is allowed
  EXPECT_EQ(samples[2].value, 17.0);               // with a timestamp
  EXPECT_TRUE(samples[3].labels.empty());
}

TEST(prometheus_text, undoes_the_three_label_escapes) {
  const auto samples = samples_of(R"(info{path="C:\\dir",quote="say \"hi\"",lines="a\nb"} 1)");
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].labels.at("path"), "C:\\dir");
  EXPECT_EQ(samples[0].labels.at("quote"), "say \"hi\"");
  EXPECT_EQ(samples[0].labels.at("lines"), "a\nb");
}

TEST(prometheus_text, reads_nan_and_infinities_and_exponents) {
  const auto samples = samples_of("a NaN\nb +Inf\nc -Inf\nd 1.5e3\ne -0.25\n");
  ASSERT_EQ(samples.size(), 5u);
  EXPECT_TRUE(std::isnan(samples[0].value));
  EXPECT_EQ(samples[1].value, INFINITY);
  EXPECT_EQ(samples[2].value, -INFINITY);
  EXPECT_EQ(samples[3].value, 1500.0);
  EXPECT_EQ(samples[4].value, -0.25);
}

TEST(prometheus_text, counts_and_skips_every_kind_of_malformed_line_and_keeps_the_good_ones) {
  prometheus_parse_result result;
  const auto samples = samples_of(
      "good 1\n"
      "{engine=\"0\"} 1\n"              // no name
      "9starts_with_digit 1\n"          // bad name
      "x{engine=0} 1\n"                 // unquoted value
      "x{engine=\"0} 1\n"               // unterminated value
      "x{engine=\"\\q\"} 1\n"           // unknown escape
      "x{a:b=\"1\"} 1\n"                // ':' in a label name
      "x{engine=\"0\" 1\n"              // no closing brace
      "x\n"                             // no value
      "x one\n"                         // not a number
      "x 1 2 3\n"                       // trailing garbage
      "x 1 soon\n"                      // bad timestamp
      "also_good{le=\"+Inf\"} 4\n",
      &result);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].name, "good");
  EXPECT_EQ(samples[1].name, "also_good");
  EXPECT_EQ(result.samples, 2u);
  EXPECT_EQ(result.malformed, 11u);
}

TEST(prometheus_text, refuses_a_sample_with_more_labels_than_the_bound) {
  std::string many = "x{";
  for (std::size_t i = 0; i <= prometheus_max_labels; ++i) many += "l" + std::to_string(i) + "=\"v\",";
  many += "} 1\nafter 2\n";
  prometheus_parse_result result;
  const auto samples = samples_of(many, &result);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].name, "after");
  EXPECT_EQ(result.malformed, 1u);
}

}  // namespace
}  // namespace kvr
