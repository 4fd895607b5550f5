#include "core/config/worker_spec.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(worker_spec, a_url_alone_is_a_worker_without_kv_events) {
  auto spec = parse_worker_spec("http://10.0.0.5:8000/");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->url, "http://10.0.0.5:8000");
  EXPECT_EQ(spec->kv_events, "");
  EXPECT_EQ(spec->dp_size, 1u);
}

TEST(worker_spec, reads_every_key) {
  auto spec = parse_worker_spec("http://h:8000,kv_events=tcp://h:5557,replay=tcp://h:5600,dp_size=4,id=a1,topic=kv");
  ASSERT_TRUE(spec);
  EXPECT_EQ(*spec, (worker_spec{"a1", "http://h:8000", "tcp://h:5557", "tcp://h:5600", "kv", 4}));
}

TEST(worker_spec, the_older_kv_and_dp_keys_still_read_and_are_reported_with_their_new_names) {
  std::vector<deprecated_key> deprecated;
  auto spec = parse_worker_spec("http://h:8000,kv=tcp://h:5557,dp=2,id=a", &deprecated);
  ASSERT_TRUE(spec);
  EXPECT_EQ(*spec, (worker_spec{"a", "http://h:8000", "tcp://h:5557", "", "", 2}));
  ASSERT_EQ(deprecated.size(), 2u);
  EXPECT_EQ(deprecated[0].old_key, "kv");
  EXPECT_EQ(deprecated[0].new_key, "kv_events");
  EXPECT_EQ(deprecated[1].old_key, "dp");
  EXPECT_EQ(deprecated[1].new_key, "dp_size");
  deprecated.clear();
  ASSERT_TRUE(parse_worker_spec("http://h:8000,kv_events=tcp://h:5557,dp_size=2", &deprecated));
  EXPECT_TRUE(deprecated.empty());
  EXPECT_EQ(parse_worker_spec("http://h,dp=0").error().message, "worker \"http://h,dp=0\": dp_size must be a rank count from 1 to 1024")
      << "an error names the key as it is spelled now";
}

TEST(worker_spec, errors_name_the_bad_part) {
  EXPECT_EQ(parse_worker_spec("h:8000").error().message, "worker \"h:8000\": must start with the worker's http:// or https:// URL");
  EXPECT_EQ(parse_worker_spec("http://h,kv_events=h:5557").error().message,
            "worker \"http://h,kv_events=h:5557\": kv_events must be a ZeroMQ endpoint such as tcp://host:5557");
  EXPECT_EQ(parse_worker_spec("http://h,dp_size=0").error().message, "worker \"http://h,dp_size=0\": dp_size must be a rank count from 1 to 1024");
  EXPECT_EQ(parse_worker_spec("http://h,colour=red").error().message,
            "worker \"http://h,colour=red\": unknown key \"colour\" (expected kv_events, replay, dp_size, id, topic, role or bootstrap)");
  EXPECT_EQ(parse_worker_spec("http://h,kv").error().message, "worker \"http://h,kv\": \"kv\" is not key=value");
}

TEST(worker_spec, urls_with_ports_out_of_range_or_schemes_kvrouter_cannot_speak_are_refused) {
  EXPECT_EQ(parse_worker_spec("http://h:99999").error().message, "worker \"http://h:99999\": bad URL: bad port 99999");
  EXPECT_EQ(parse_worker_spec("http://h:0").error().message, "worker \"http://h:0\": bad URL: bad port 0");
  EXPECT_EQ(parse_worker_spec("https://h")->url, "https://h") << "https workers are spoken to over TLS";
  EXPECT_EQ(parse_worker_spec("ftp://h").error().message, "worker \"ftp://h\": must start with the worker's http:// or https:// URL");
  EXPECT_FALSE(parse_worker_spec("http://:8000"));
  EXPECT_FALSE(parse_worker_spec("http://h:8000?x=1"));
  EXPECT_EQ(parse_worker_spec("http://h,kv_events=tcp://h:99999").error().message,
            "worker \"http://h,kv_events=tcp://h:99999\": kv_events endpoint tcp://h:99999 needs a port from 1 to 65535");
  EXPECT_FALSE(parse_worker_spec("http://h,kv_events=tcp://h"));
  EXPECT_FALSE(parse_worker_spec("http://h,replay=tcp://h:0"));
  EXPECT_FALSE(parse_worker_spec("http://h,kv_events=tcp://h:65535,dp_size=2")) << "rank 1 would need port 65536";
  EXPECT_TRUE(parse_worker_spec("http://h,kv_events=tcp://h:65534,dp_size=2"));
  EXPECT_TRUE(parse_worker_spec("http://h,kv_events=ipc:///tmp/kv,dp_size=4"));
  ASSERT_TRUE(parse_worker_spec("http://[::1]:8000"));
  EXPECT_EQ(parse_worker_spec("http://[::1]:8000")->url, "http://[::1]:8000");
}

TEST(worker_spec, expands_data_parallel_workers_into_one_publisher_per_rank) {
  const std::vector<worker_spec> workers{*parse_worker_spec("http://a:8000,kv_events=tcp://a:5557,replay=tcp://a:5600,dp_size=2"),
                                         *parse_worker_spec("http://b:8000,kv_events=tcp://b:5557,id=bee")};
  const auto publishers = expand_publishers(workers);
  ASSERT_EQ(publishers.size(), 3u);
  EXPECT_EQ(publishers[0].name, "w0/dp0");
  EXPECT_EQ(publishers[1].name, "w0/dp1");
  EXPECT_EQ(publishers[1].endpoint, "tcp://a:5558");
  EXPECT_EQ(publishers[1].replay_endpoint, "tcp://a:5601");
  EXPECT_EQ(publishers[1].worker, 0u);
  EXPECT_EQ(publishers[2].name, "bee");
  EXPECT_EQ(publishers[2].worker, 1u);
  EXPECT_EQ(publishers[2].replay_endpoint, "");
}

TEST(worker_spec, data_parallel_ranks_publish_on_consecutive_ports) {
  EXPECT_EQ(endpoint_with_port_offset("tcp://10.0.0.5:5557", 0), "tcp://10.0.0.5:5557");
  EXPECT_EQ(endpoint_with_port_offset("tcp://10.0.0.5:5557", 3), "tcp://10.0.0.5:5560");
  EXPECT_EQ(endpoint_with_port_offset("ipc:///tmp/kv", 1), "ipc:///tmp/kv-1");  // as kvrouter-mocker names ranks
}

}  // namespace
}  // namespace kvr
